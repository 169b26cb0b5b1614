#!/usr/bin/env python3
"""Servers for tests/box-sandbox-net.bats and bench/network.sh.

netlab.py dns PORTFILE MAPFILE LOGFILE
    A DNS server on 127.0.0.1 (UDP, A and AAAA records). MAPFILE is JSON, read at each query:
    {"name": ["ip", ...]} or {"name": {"first": "ip", "then": "ip"}} (the first A query of the
    name gets first, every later one then: a rebinding answer); an A query gets the IPv4
    addresses, an AAAA query the IPv6 ones. Each A query's name is appended to LOGFILE, an
    AAAA query's as "NAME AAAA". TTL 0.
netlab.py http DIR PORTFILE [ADDR [PORT [CERT KEY]]]
    A threaded HTTP (or, with CERT and KEY, HTTPS) server of DIR on ADDR (127.0.0.1) and PORT
    (0: any; the port is written to PORTFILE). POST answers "posted N" (N bytes read).
netlab.py keep PORTFILE ADDR LOGFILE
    A careless HTTP/1.1 server on ADDR (any port, written to PORTFILE) that keeps every
    connection open whatever it is told (until 2 s idle) and answers each request it finds
    in it, pipelined or not ("ok PATH"; a Content-Length or chunked body is skipped). Every request line
    and Host it reads is appended to LOGFILE, so a test sees whatever reached the origin.
"""
import http.server
import json
import os
import socket
import socketserver
import ssl
import struct
import sys


def dns(portfile, mapfile, logfile):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    with open(portfile + ".tmp", "w") as f:
        f.write(str(s.getsockname()[1]))
    os.rename(portfile + ".tmp", portfile)
    seen = {}
    while True:
        q, peer = s.recvfrom(512)
        if len(q) < 12:
            continue
        at, labels = 12, []
        while at < len(q) and q[at] != 0:
            n = q[at]
            labels.append(q[at + 1:at + 1 + n].decode("ascii", "replace"))
            at += n + 1
        name = ".".join(labels).lower()
        qtype = struct.unpack("!H", q[at + 1:at + 3])[0] if at + 3 <= len(q) else 0
        question = q[12:at + 5]
        with open(logfile, "a") as f:
            f.write(name + (" AAAA" if qtype == 28 else "") + "\n")
        try:
            with open(mapfile) as f:
                table = json.load(f)
        except (OSError, ValueError):
            table = {}
        ans = table.get(name)
        if isinstance(ans, dict):
            ans = [ans["first"] if name not in seen else ans["then"]]
            if qtype == 1:
                seen[name] = True
        fam = {1: socket.AF_INET, 28: socket.AF_INET6}.get(qtype)
        ips = [ip for ip in (ans or []) if fam and (":" in ip) == (fam == socket.AF_INET6)]
        rcode = 0 if name in table else 3
        hdr = q[:2] + struct.pack("!HHHHH", 0x8180 | rcode, 1, len(ips), 0, 0)
        body = question
        for ip in ips:
            raw = socket.inet_pton(fam, ip)
            body += b"\xc0\x0c" + struct.pack("!HHIH", qtype, 1, 0, len(raw)) + raw
        s.sendto(hdr + body, peer)


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def copyfile(self, source, outputfile):
        # sendfile: the server costs little CPU, so a benchmark measures what is between
        if self.server.socket.__class__ is socket.socket:
            outputfile.flush()
            self.connection.sendfile(source)
        else:
            super().copyfile(source, outputfile)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        got = len(self.rfile.read(n))
        body = ("posted %d\n" % got).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(directory, portfile, addr="127.0.0.1", port="0", cert=None, key=None):
    os.chdir(directory)
    srv = Server((addr, int(port)), Handler)
    if cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(portfile + ".tmp", portfile)
    srv.serve_forever()


def keep(portfile, addr, logfile):
    import threading
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((addr, 0))
    srv.listen(16)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(srv.getsockname()[1]))
    os.rename(portfile + ".tmp", portfile)
    lock = threading.Lock()

    def one(c):
        buf = b""
        c.settimeout(2)
        try:
            while True:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    got = c.recv(65536)
                    if not got:
                        return
                    buf += got
                    continue
                head = buf[:end].decode("latin-1").split("\r\n")
                host = [h for h in head[1:] if h.lower().startswith("host:")]
                n = 0
                for h in head[1:]:
                    if h.lower().startswith("content-length:"):
                        n = int(h.split(":", 1)[1])
                    if h.lower().replace(" ", "") == "transfer-encoding:chunked":
                        # the body ends at the first empty line after a "0" line
                        while True:
                            z = buf.find(b"\r\n0\r\n", end + 2)
                            e = buf.find(b"\r\n", z + 5) if z >= 0 else -1
                            while e >= 0 and buf[e - 2:e] != b"\r\n" and e != z + 5:
                                e = buf.find(b"\r\n", e + 2)
                            if e >= 0:
                                break
                            got = c.recv(65536)
                            if not got:
                                return
                            buf += got
                        n = e + 2 - (end + 4)
                while len(buf) < end + 4 + n:
                    got = c.recv(65536)
                    if not got:
                        return
                    buf += got
                body = buf[end + 4:end + 4 + n]
                buf = buf[end + 4 + n:]
                with lock, open(logfile, "a") as f:
                    f.write("%s | %s | %r\n" % (head[0], ",".join(host), body))
                path = head[0].split(" ")[1] if " " in head[0] else "?"
                out = ("ok %s\n" % path).encode()
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(out) + out)
        except OSError:
            return
        finally:
            c.close()

    while True:
        c, _ = srv.accept()
        threading.Thread(target=one, args=(c,), daemon=True).start()


if __name__ == "__main__":
    if sys.argv[1] == "dns":
        dns(*sys.argv[2:5])
    elif sys.argv[1] == "http":
        serve(*sys.argv[2:])
    elif sys.argv[1] == "keep":
        keep(*sys.argv[2:5])
    else:
        sys.exit("usage: netlab.py dns|http ...")
