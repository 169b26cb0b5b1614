#!/usr/bin/env bats
# box-pull: artifacts from a local OCI layout registry into the content-addressed store
# ($BOX_HOME/store/sha256/<hex>), verified before extraction, extracted safely, pinned in
# box.lock. Hostile layers are written into the layout by hand (python3: tarfile, zipfile).

load helpers
bats_require_minimum_version 1.5.0

# python3 for crafting layers: Debian's own when there is one (a version manager's shim costs
# more start-up time than the whole crafting)
PY=python3
if [ -x /usr/bin/python3 ]; then
	PY=/usr/bin/python3
fi

# The template of every test, made once: a registry holding base:1.0.0 and, written by hand,
# every crafted layer the tests pull (tagged by their kind, see setup_file), and a store and
# box.lock where base:1.0.0 is pulled. Absolute paths in hostile layers point into $TPL/out.
setup_file() {
	TPL=$BATS_FILE_TMPDIR/tpl
	export TPL
	mkdir -p "$TPL/cwd" "$TPL/out"
	(
		export BOX_HOME=$TPL/home
		unset BOX_REGISTRY
		REG=$BOX_HOME/registry
		cd "$TPL/cwd" || exit 1
		mk_art "$TPL/src/base" base 1.0.0
		box-pack "$TPL/src/base" | jq -er .digest >"$TPL/base.digest" || exit 1
		box-pull base@1.0.0 >/dev/null || exit 1
		specs=()
		for k in absolute dotdot dotdot-inner backslash control newline duplicate \
			file-dir-duplicate symlink symlink-dir hardlink hardlink-out chardev blockdev \
			fifo bomb many zip-dotdot zip-absolute zip-symlink; do
			specs+=("evil-$k 1.0.0 kind:$k")
		done
		craft "${specs[@]}" "liar-a 1.0.0 kind:ok size_delta=-1" \
			"liar-b 1.0.0 kind:ok size_delta=1" "liar-c 1.0.0 kind:ok size_delta=-100" \
			"liar-ok 1.0.0 kind:ok" "cfgname 1.0.0 kind:ok config_name=other" \
			"cfgver 1.0.0 kind:ok config_version=9.9.9" "good 1.0.0 kind:ok" \
			"zipgood 1.0.0 kind:zip-ok" "setid 1.0.0 kind:setid" >/dev/null
	)
}

setup() {
	box_setup
	unset BOX_REGISTRY
	export BOX_HOME=$T/home
	export BOX_PROG=box-pull
	REG=$BOX_HOME/registry
	STORE=$BOX_HOME/store
	mkdir -p "$BOX_HOME"
	cp -a "$TPL/home/registry" "$REG"
}

# mk_art DIR NAME VERSION [KIND]: an artifact directory with an entry point, a data file with
# unusual permissions and a nested directory.
mk_art() {
	local d=$1 name=$2 version=$3 kind=${4:-skill}
	mkdir -p "$d/bin" "$d/data/deep"
	printf '#!/bin/sh\necho %s %s\n' "$name" "$version" >"$d/bin/run"
	chmod 0700 "$d/bin/run"
	printf '%s\n' "$name-$version" >"$d/data/deep/info.txt"
	chmod 0600 "$d/data/deep/info.txt"
	cat >"$d/box-artifact.json" <<-EOF
	{"name": "$name", "version": "$version", "kind": "$kind", "entry": "bin/run",
	 "description": "test artifact"$([ "$kind" = tool ] && echo ', "tools": [{"name": "run", "description": "runs it", "input_schema": {"type": "object"}}]')}
	EOF
}

# pack NAME VERSION [KIND]: packs a fresh artifact into the default registry, prints the
# manifest digest.
pack() {
	local d=$T/src/$1-$2
	rm -rf "$d"
	mk_art "$d" "$1" "$2" "${3:-skill}"
	box-pack "$d" | jq -er .digest
}

# state: what a failed pull must leave unchanged: the store tree (paths, sizes, modes) and
# the bytes of box.lock.
state() {
	find "$STORE" -printf '%p %s %m\n' 2>/dev/null | sort
	if [ -e box.lock ]; then sha box.lock; else echo "no box.lock"; fi
}

# on_tmpfs: moves the test to a fresh directory on /dev/shm when there is one: creating and
# removing 10,000 files, or killing pulls in a loop, is many times faster there than on disk.
on_tmpfs() {
	[ -d /dev/shm ] && [ -w /dev/shm ] || return 0
	SHM=$(mktemp -d /dev/shm/box-pull.XXXXXX) || return 0
	T=$SHM
	BOX_HOME=$T/home
	REG=$BOX_HOME/registry
	STORE=$BOX_HOME/store
	cd "$T" || return 1
	mkdir -p "$BOX_HOME"
	cp -a "$TPL/home/registry" "$REG"
}

teardown() {
	if [ -n "${SHM:-}" ]; then
		rm -rf "$SHM"
	fi
}

# base: base:1.0.0 pulled, so that the store and box.lock exist before the pull under test.
base() {
	BASE=$(cat "$TPL/base.digest")
	cp -a "$TPL/home/store" "$STORE"
	# pinned from this test's registry, as if pulled here
	sed "s|\"oci:$TPL/home/registry\"|\"oci:$REG\"|" "$TPL/cwd/box.lock" >box.lock
}

# tagged NAME:TAG: the manifest digest index.json tags NAME:TAG with.
tagged() {
	jq -r --arg r "$1" '.manifests[] | select(.annotations["org.opencontainers.image.ref.name"]
		== $r) | .digest' "$REG/index.json"
}

# assert_pulled [FILTER]: exit 0, one JSON object, ok, no error, nothing on stderr.
assert_pulled() {
	assert_equal "$status" 0
	one_json_where ".ok == true and (has(\"error\") | not) and (${1:-true})" "${@:2}"
	assert_equal "$stderr" ""
}

# craft SPEC...: writes layers into the layout $REG by hand, each as the one layer of a box
# artifact, and prints "NAME:VERSION DIGEST" for each. A SPEC is one word list
# "NAME VERSION LAYER [KEY=VALUE...]": LAYER is kind:KIND, an archive crafted here; KEYs are
# config_name, config_version, kind (of the config blob) and size_delta (added to the layer
# size the manifest states).
#
# The crafted archives: every hostile one starts with a harmless file, so a refusal must also
# remove what was already extracted. Files meant to escape are named *pwned*, so a find shows
# any that got out.
craft() {
	"$PY" - "$REG" "$TPL/out" "$@" <<-'EOF'
	import gzip, hashlib, io, json, os, stat, sys, tarfile, zipfile
	reg, t = sys.argv[1:3]
	MT = "application/vnd.oci.image.manifest.v1+json"
	AT = "application/vnd.box.artifact.v1"
	REF = "org.opencontainers.image.ref.name"

	def reg_(name, data=b"ok\n", mode=0o644):
	    ti = tarfile.TarInfo(name)
	    ti.size, ti.mode = len(data), mode
	    return ti, data

	def special(name, typ, linkname="", major=0, minor=0):
	    ti = tarfile.TarInfo(name)
	    ti.type, ti.linkname, ti.devmajor, ti.devminor = typ, linkname, major, minor
	    return ti, None

	def tgz(entries):
	    bio = io.BytesIO()
	    with tarfile.open(fileobj=bio, mode="w", format=tarfile.GNU_FORMAT) as tf:
	        for ti, data in entries:
	            tf.addfile(ti, io.BytesIO(data) if data is not None else None)
	    return gzip.compress(bio.getvalue(), mtime=0)

	def zipped(entries):
	    bio = io.BytesIO()
	    with zipfile.ZipFile(bio, "w", zipfile.ZIP_DEFLATED) as zf:
	        for name, data, mode in entries:
	            zi = zipfile.ZipInfo(name)
	            zi.create_system = 3
	            zi.external_attr = mode << 16
	            zf.writestr(zi, data)
	    return bio.getvalue()

	first = reg_("first.txt")
	layers = {
	    "ok": lambda: tgz([first, reg_("bin/run", b"#!/bin/sh\n", 0o755)]),
	    "absolute": lambda: tgz([first, reg_(t + "/pwned-abs")]),
	    "dotdot": lambda: tgz([first, reg_("../../../pwned-dotdot")]),
	    "dotdot-inner": lambda: tgz([first, reg_("a/../../../../pwned-inner")]),
	    "backslash": lambda: tgz([first, reg_("..\\..\\..\\pwned-bs")]),
	    "control": lambda: tgz([first, reg_("pwned-\x01ctl")]),
	    "newline": lambda: tgz([first, reg_("pwned-\nnl")]),
	    "duplicate": lambda: tgz([first, reg_("same.txt"), reg_("same.txt", b"other\n")]),
	    "file-dir-duplicate": lambda: tgz([first, reg_("x"), reg_("x/y")]),
	    "symlink": lambda: tgz([first, special("pwned-link", tarfile.SYMTYPE, "/etc/passwd")]),
	    "symlink-dir": lambda: tgz([first, special("d", tarfile.SYMTYPE, t),
	                                reg_("d/pwned-through-link")]),
	    "hardlink": lambda: tgz([first, special("pwned-hard", tarfile.LNKTYPE, "first.txt")]),
	    "hardlink-out": lambda: tgz([first, special("pwned-hard", tarfile.LNKTYPE,
	                                                "/etc/passwd")]),
	    "chardev": lambda: tgz([first, special("pwned-null", tarfile.CHRTYPE, "", 1, 3)]),
	    "blockdev": lambda: tgz([first, special("pwned-blk", tarfile.BLKTYPE, "", 7, 0)]),
	    "fifo": lambda: tgz([first, special("pwned-fifo", tarfile.FIFOTYPE)]),
	    "setid": lambda: tgz([first, reg_("suid", b"#!/bin/sh\n", 0o4755),
	                          reg_("sgid", b"data\n", 0o2644), reg_("sticky", b"x\n", 0o1777),
	                          reg_("private", b"p\n", 0o600)]),
	    # 8 MiB of zeros: about 8 KiB compressed, far past 20x
	    "bomb": lambda: tgz([first, reg_("zeros", bytes(8 << 20))]),
	    "many": lambda: tgz([first] + [reg_("f/%05d" % i, b"") for i in range(10001)]),
	    "zip-ok": lambda: zipped([("first.txt", b"ok\n", 0o100644),
	                              ("bin/run", b"#!/bin/sh\n", 0o100755)]),
	    "zip-dotdot": lambda: zipped([("first.txt", b"ok\n", 0o100644),
	                                  ("../../../pwned-zip", b"x\n", 0o100644)]),
	    "zip-absolute": lambda: zipped([("first.txt", b"ok\n", 0o100644),
	                                    (t + "/pwned-zipabs", b"x\n", 0o100644)]),
	    "zip-symlink": lambda: zipped([("first.txt", b"ok\n", 0o100644),
	                                   ("pwned-ziplink", b"/etc/passwd",
	                                    stat.S_IFLNK | 0o777)]),
	}

	def put(data):
	    h = hashlib.sha256(data).hexdigest()
	    with open(os.path.join(reg, "blobs", "sha256", h), "wb") as f:
	        f.write(data)
	    return "sha256:" + h

	path = os.path.join(reg, "index.json")
	idx = json.load(open(path))
	for spec in sys.argv[3:]:
	    name, version, layer, *rest = spec.split(" ")
	    opt = dict(a.split("=", 1) for a in rest)
	    data = layers[layer[5:]]()
	    cfg = json.dumps({"name": opt.get("config_name", name),
	                      "version": opt.get("config_version", version),
	                      "kind": opt.get("kind", "skill")}).encode()
	    man = {"schemaVersion": 2, "mediaType": MT, "artifactType": AT,
	           "config": {"mediaType": "application/vnd.box.artifact.config.v1+json",
	                      "digest": put(cfg), "size": len(cfg)},
	           "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
	                       "digest": put(data),
	                       "size": len(data) + int(opt.get("size_delta", 0)),
	                       "annotations": {"org.opencontainers.image.title":
	                                       name + ".tar.gz"}}]}
	    mb = json.dumps(man, separators=(",", ":")).encode()
	    md = put(mb)
	    ref = name + ":" + version
	    idx["manifests"] = [d for d in idx["manifests"]
	                        if d.get("annotations", {}).get(REF) != ref]
	    idx["manifests"].append({"mediaType": MT, "artifactType": AT, "digest": md,
	                             "size": len(mb), "annotations": {REF: ref}})
	    print(ref, md)
	with open(path + ".tmp", "w") as f:
	    json.dump(idx, f)
	os.rename(path + ".tmp", path)
	EOF
}

# hostile KIND CODE STATUS [FILTER]: the crafted layer KIND, tagged evil-KIND:1.0.0, is
# refused with CODE; the store and box.lock are byte-identical afterwards and nothing escaped.
hostile() {
	local kind=$1 code=$2 want=$3 filter=${4:-true} before
	base
	before=$(state)
	run --separate-stderr box-pull "evil-$kind@1.0.0"
	assert_fail "$code" "$want" "$filter"
	assert_equal "$(state)" "$before"
	assert_equal "$(find "$T" "$TPL/out" -name '*pwned*')" ""
}

@test "pull NAME: the highest version, into the store, pinned in box.lock" {
	pack tool 1.0.0 tool >/dev/null
	pack tool 1.2.0 tool >/dev/null
	d=$(pack tool 1.10.0 tool)
	pack tool 1.11.0-rc.1 tool >/dev/null
	layer=$(jq -r '.layers[0] | "\(.digest) \(.size)"' "$REG/blobs/sha256/${d#sha256:}")
	run --separate-stderr box-pull tool
	assert_pulled '.artifacts | length == 1'
	one_json_where '.artifacts[0] | .name == "tool" and .version == "1.10.0" and
		.digest == $d and .kind == "tool" and .path == $p and .bytes == $b and
		.cached == false' --arg d "$d" --arg p "$STORE/sha256/${d#sha256:}" \
		--argjson b "${layer#* }"
	one_json_where '.lock.path == "box.lock" and .lock.changed == true'
	[ -d "$STORE/sha256/${d#sha256:}" ]
	jq -e --arg d "$d" --arg s "oci:$REG" '.lock_version == 1 and (.artifacts | length == 1) and
		(.artifacts[0] | .name == "tool" and .version == "1.10.0" and .digest == $d and
		.kind == "tool" and .source == $s and (.tree_digest | test("^sha256:[0-9a-f]{64}$")))' \
		box.lock
}

@test "pull NAME@VERSION and NAME@sha256:DIGEST" {
	d1=$(pack lib 1.0.0)
	d2=$(pack lib 2.0.0)
	other=$(pack other 3.0.0)
	run --separate-stderr box-pull lib@1.0.0 "other@$other"
	assert_pulled '(.artifacts | map([.name, .version, .digest])) ==
		[["lib", "1.0.0", $d1], ["other", "3.0.0", $o]]' --arg d1 "$d1" --arg o "$other"
	[ -d "$STORE/sha256/${d1#sha256:}" ]
	[ -d "$STORE/sha256/${other#sha256:}" ]
	[ ! -e "$STORE/sha256/${d2#sha256:}" ]
	jq -e '.artifacts | map(.name + "@" + .version) == ["lib@1.0.0", "other@3.0.0"]' box.lock
}

@test "the store entry holds the files, with normalised modes" {
	d=$(pack lib 1.0.0)
	run --separate-stderr box-pull lib@1.0.0
	assert_pulled
	e=$STORE/sha256/${d#sha256:}
	run bash -c "cd '$e' && find . -mindepth 1 -printf '%P %y %m\n' | sort"
	assert_output "$(printf '%s\n' 'bin d 755' 'bin/run f 755' 'box-artifact.json f 644' \
		'data d 755' 'data/deep d 755' 'data/deep/info.txt f 644')"
	cmp "$e/bin/run" "$T/src/lib-1.0.0/bin/run"
	cmp "$e/data/deep/info.txt" "$T/src/lib-1.0.0/data/deep/info.txt"
	cmp "$e/box-artifact.json" "$T/src/lib-1.0.0/box-artifact.json"
	# nothing left in the staging area
	assert_equal "$(ls -A "$STORE/tmp")" ""
}

@test "a second pull downloads nothing: cached, 0 bytes, nothing written" {
	d=$(pack lib 1.0.0)
	run --separate-stderr box-pull lib@1.0.0
	assert_pulled '.artifacts[0].cached == false and .artifacts[0].bytes > 0'
	before=$(state)
	ino=$(stat -c '%i %y' box.lock)
	for spec in lib@1.0.0 lib "lib@$d"; do
		run --separate-stderr box-pull "$spec"
		assert_pulled '.artifacts[0].cached == true and .artifacts[0].bytes == 0 and
			.artifacts[0].digest == $d and .lock.changed == false' --arg d "$d"
		assert_equal "$(state)" "$before"
		assert_equal "$(stat -c '%i %y' box.lock)" "$ino"
	done
}

@test "a cached pull does not read the layer blob again" {
	d=$(pack lib 1.0.0)
	run box-pull lib@1.0.0
	assert_success
	layer=$(jq -r '.layers[0].digest' "$REG/blobs/sha256/${d#sha256:}")
	rm "$REG/blobs/sha256/${layer#sha256:}"
	run --separate-stderr box-pull lib@1.0.0
	assert_pulled '.artifacts[0].cached == true and .artifacts[0].bytes == 0'
}

@test "box.lock: sorted by name, parses, one entry per artifact" {
	for n in zeta alpha mid; do pack "$n" 1.0.0 >/dev/null; done
	run --separate-stderr box-pull zeta mid
	assert_pulled
	run --separate-stderr box-pull alpha
	assert_pulled
	jq -e '.lock_version == 1 and (.artifacts | map(.name) == ["alpha", "mid", "zeta"]) and
		all(.artifacts[]; keys == (["digest", "kind", "name", "source", "tree_digest",
		"version"]))' box.lock
	# key order on disk: name, version, digest, kind, source, tree_digest
	run grep -o '"[a-z_]*":' box.lock
	assert_equal "$(echo "$output" | tr -d '\n')" \
		"\"lock_version\":\"artifacts\":$(printf '"name":"version":"digest":"kind":"source":"tree_digest":%.0s' 1 2 3)"
}

@test "--lock FILE pins into that file" {
	pack lib 1.0.0 >/dev/null
	mkdir sub
	run --separate-stderr box-pull --lock sub/my.lock lib
	assert_pulled '.lock.path == "sub/my.lock"'
	jq -e '.artifacts[0].name == "lib"' sub/my.lock
	[ ! -e box.lock ]
}

@test "lock conflict: pinned to another version or digest, nothing written" {
	base
	pack base 1.1.0 >/dev/null
	before=$(state)
	run --separate-stderr box-pull base@1.1.0
	assert_fail conflict 7
	assert_equal "$(state)" "$before"

	d11=$(tagged base:1.1.0)
	run --separate-stderr box-pull "base@$d11"
	assert_fail conflict 7
	assert_equal "$(state)" "$before"

	# the same version re-packed with other content: the pin's digest differs
	cp -a "$TPL/src/base" "$T/base"
	echo changed >>"$T/base/data/deep/info.txt"
	run box-pack --force "$T/base"
	assert_success
	run --separate-stderr box-pull base@1.0.0
	assert_fail conflict 7
	assert_equal "$(state)" "$before"
}

@test "a conflict on one artifact of several writes nothing for any of them" {
	base
	pack base 1.1.0 >/dev/null
	pack fresh 1.0.0 >/dev/null
	before=$(state)
	run --separate-stderr box-pull fresh@1.0.0 base@1.1.0
	assert_fail conflict 7
	assert_equal "$(state)" "$before"
}

@test "--frozen refuses an unpinned artifact and writes nothing" {
	base
	pack other 1.0.0 >/dev/null
	before=$(state)
	run --separate-stderr box-pull --frozen other
	assert_fail conflict 7
	assert_equal "$(state)" "$before"
	run --separate-stderr box-pull --frozen other@1.0.0
	assert_fail conflict 7
	assert_equal "$(state)" "$before"
	# no lockfile at all: nothing is pinned, and none is created
	rm box.lock
	run --separate-stderr box-pull --frozen base
	assert_fail conflict 7
	[ ! -e box.lock ]
}

@test "--frozen pulls what the lockfile pins, without writing it" {
	base
	pack base 1.5.0 >/dev/null
	lock=$(sha box.lock)
	run --separate-stderr box-pull --frozen base
	assert_pulled '.artifacts[0].version == "1.0.0" and .artifacts[0].cached == true and
		.lock.changed == false'
	# the store lost the entry: a frozen pull brings it back, the lockfile stays as it was
	rm -rf "$STORE/sha256/${BASE#sha256:}"
	run --separate-stderr box-pull --frozen base
	assert_pulled '.artifacts[0].version == "1.0.0" and .artifacts[0].digest == $d and
		.artifacts[0].cached == false and .artifacts[0].bytes > 0' --arg d "$BASE"
	[ -d "$STORE/sha256/${BASE#sha256:}" ]
	assert_equal "$(sha box.lock)" "$lock"
	run box-lock verify
	assert_success
}

@test "a bare NAME pulls its pin, not the highest version" {
	base
	pack base 2.0.0 >/dev/null
	run --separate-stderr box-pull base
	assert_pulled '.artifacts[0].version == "1.0.0" and .artifacts[0].digest == $d' \
		--arg d "$BASE"
}

@test "a flipped byte in the layer blob: integrity_failed, nothing written" {
	base
	d=$(pack lib 1.0.0)
	layer=$(jq -r '.layers[0].digest' "$REG/blobs/sha256/${d#sha256:}")
	f=$REG/blobs/sha256/${layer#sha256:}
	"$PY" -c 'import sys; p = sys.argv[1]; b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0x01
open(p, "wb").write(b)' "$f"
	before=$(state)
	run --separate-stderr box-pull lib@1.0.0
	assert_fail integrity_failed 5
	assert_equal "$(state)" "$before"
}

@test "a manifest whose layer size lies: integrity_failed, nothing written" {
	base
	for liar in liar-a liar-b liar-c; do
		before=$(state)
		run --separate-stderr box-pull "$liar@1.0.0"
		assert_fail integrity_failed 5
		assert_equal "$(state)" "$before"
	done
	# the same layer with the truth is accepted
	run --separate-stderr box-pull liar-ok@1.0.0
	assert_pulled
}

@test "a manifest whose bytes do not match its digest: integrity_failed" {
	base
	d=$(pack lib 1.0.0)
	f=$REG/blobs/sha256/${d#sha256:}
	# same size, one byte different (the manifest stays valid JSON)
	"$PY" -c 'import sys; p = sys.argv[1]; b = open(p, "rb").read()
open(p, "wb").write(b.replace(b"tar.gz\"", b"tar.gZ\"", 1))' "$f"
	before=$(state)
	run --separate-stderr box-pull lib@1.0.0
	assert_fail integrity_failed 5
	assert_equal "$(state)" "$before"
}

@test "index.json stating a wrong manifest size: integrity_failed" {
	base
	pack lib 1.0.0 >/dev/null
	jq '(.manifests[] | select(.annotations["org.opencontainers.image.ref.name"] ==
		"lib:1.0.0") | .size) |= . + 1' "$REG/index.json" >"$T/i" && mv "$T/i" "$REG/index.json"
	before=$(state)
	run --separate-stderr box-pull lib@1.0.0
	assert_fail integrity_failed 5
	assert_equal "$(state)" "$before"
}

@test "a config whose name or version differs from the tag: integrity_failed" {
	base
	before=$(state)
	run --separate-stderr box-pull cfgname@1.0.0
	assert_fail integrity_failed 5
	assert_equal "$(state)" "$before"

	run --separate-stderr box-pull cfgver@1.0.0
	assert_fail integrity_failed 5
	assert_equal "$(state)" "$before"
	run --separate-stderr box-pull cfgver
	assert_fail integrity_failed 5
	assert_equal "$(state)" "$before"
}

@test "a crafted but harmless layer is accepted (the hostile cases below are meaningful)" {
	base
	d=$(tagged good:1.0.0)
	run --separate-stderr box-pull good@1.0.0
	assert_pulled '.artifacts[0].digest == $d and .artifacts[0].kind == "skill"' --arg d "$d"
	[ -f "$STORE/sha256/${d#sha256:}/first.txt" ]
	assert_equal "$(stat -c %a "$STORE/sha256/${d#sha256:}/bin/run")" 755
	d=$(tagged zipgood:1.0.0)
	run --separate-stderr box-pull zipgood@1.0.0
	assert_pulled
	assert_equal "$(stat -c %a "$STORE/sha256/${d#sha256:}/bin/run")" 755
	assert_equal "$(stat -c %a "$STORE/sha256/${d#sha256:}/first.txt")" 644
}

@test "hostile: an absolute path" {
	hostile absolute integrity_failed 5 ".error.path == \"$TPL/out/pwned-abs\""
}

@test "hostile: a .. path" {
	hostile dotdot integrity_failed 5 '.error.path == "../../../pwned-dotdot"'
}

@test "hostile: a .. inside a path" {
	hostile dotdot-inner integrity_failed 5 '.error.path == "a/../../../../pwned-inner"'
}

@test "hostile: a backslash path" {
	hostile backslash integrity_failed 5 '.error.path == "..\\..\\..\\pwned-bs"'
}

@test "hostile: a control character in a path" {
	hostile control integrity_failed 5 '(.error.path | startswith("pwned-"))'
}

@test "hostile: a newline in a path" {
	hostile newline integrity_failed 5 '(.error.path | startswith("pwned-"))'
}

@test "hostile: a duplicate path" {
	hostile duplicate integrity_failed 5 '.error.path == "same.txt"'
}

@test "hostile: a file and a directory at the same path" {
	hostile file-dir-duplicate integrity_failed 5 '.error.path == "x/y"'
}

@test "hostile: a symlink" {
	hostile symlink integrity_failed 5 '.error.path == "pwned-link"'
}

@test "hostile: a symlink to a directory outside, then a file through it" {
	hostile symlink-dir integrity_failed 5 '.error.path == "d"'
}

@test "hostile: a hard link" {
	hostile hardlink integrity_failed 5 '.error.path == "pwned-hard"'
}

@test "hostile: a hard link to a file outside" {
	hostile hardlink-out integrity_failed 5 '.error.path == "pwned-hard"'
}

@test "hostile: a character device" {
	hostile chardev integrity_failed 5 '.error.path == "pwned-null"'
}

@test "hostile: a block device" {
	hostile blockdev integrity_failed 5 '.error.path == "pwned-blk"'
}

@test "hostile: a FIFO" {
	hostile fifo integrity_failed 5 '.error.path == "pwned-fifo"'
}

@test "hostile: a gzip bomb past 20x the compressed size" {
	hostile bomb limit_exceeded 3 '.error.limit == "bytes"'
	d=$(tagged evil-bomb:1.0.0)
	size=$(jq '.layers[0].size' "$REG/blobs/sha256/${d#sha256:}")
	[ $((size * 20)) -lt $((8 << 20)) ]
	one_json_where ".error.configured == $((size * 20))"
}

@test "hostile: too many entries" {
	on_tmpfs
	hostile many limit_exceeded 3 '.error.limit == "entries" and .error.configured == 10000'
}

@test "hostile: a zip with a .. path" {
	hostile zip-dotdot integrity_failed 5 '.error.path == "../../../pwned-zip"'
}

@test "hostile: a zip with an absolute path" {
	hostile zip-absolute integrity_failed 5 ".error.path == \"$TPL/out/pwned-zipabs\""
}

@test "hostile: a zip with a symlink" {
	hostile zip-symlink integrity_failed 5 '.error.path == "pwned-ziplink"'
}

@test "set-id and sticky bits are stripped, not refused" {
	base
	d=$(tagged setid:1.0.0)
	run --separate-stderr box-pull setid@1.0.0
	assert_pulled
	e=$STORE/sha256/${d#sha256:}
	assert_equal "$(stat -c %a "$e/suid") $(stat -c %a "$e/sgid") $(stat -c %a "$e/sticky")" \
		"755 644 755"
	assert_equal "$(stat -c %a "$e/private")" 644
	run box-lock verify
	assert_success
}

@test "not found: an unknown artifact or version" {
	base
	before=$(state)
	run --separate-stderr box-pull nope
	assert_fail not_found 6
	run --separate-stderr box-pull base@9.9.9
	assert_fail not_found 6
	run --separate-stderr box-pull "base@sha256:$(printf '0%.0s' {1..64})"
	assert_fail not_found 6
	assert_equal "$(state)" "$before"
}

@test "bad specs and requests: invalid_request with the path" {
	base
	before=$(state)
	run --separate-stderr box-pull base Bad@1.0.0
	assert_fail invalid_request 2 '.error.path == "$.artifacts[1]"'
	run --separate-stderr box-pull base@sha256:abc
	assert_fail invalid_request 2 '.error.path == "$.artifacts[0]"'
	run --separate-stderr box-pull base@1.0.0 base@1.0.0
	assert_fail invalid_request 2 '.error.path == "$.artifacts"'
	# no names and a lockfile that pins nothing
	run --separate-stderr box-pull --lock none.lock
	assert_fail invalid_request 2 '.error.path == "$.artifacts"'
	run --separate-stderr box-pull --json <<<'{"artifacts": "base"}'
	assert_fail invalid_request 2 '.error.path == "$.artifacts"'
	assert_equal "$(state)" "$before"
}

@test "--json request" {
	d=$(pack lib 1.0.0)
	run --separate-stderr box-pull --json --trust-request <<<"{\"artifacts\": [\"lib@1.0.0\"],
		\"registry\": \"oci:$REG\", \"lock\": \"j.lock\"}"
	assert_pulled '.artifacts[0].digest == $d' --arg d "$d"
	jq -e '.artifacts[0].name == "lib"' j.lock
	# an agent's request names what to pull; where from and where to pin are the operator's
	run --separate-stderr box-pull --json --registry "oci:$REG" --lock k.lock \
		<<<'{"artifacts": ["lib@1.0.0"]}'
	assert_pulled '.artifacts[0].digest == $d' --arg d "$d"
	for m in '"registry": "oci:/tmp"' '"lock": "/tmp/x.lock"' '"insecure": true'; do
		run --separate-stderr box-pull --json <<<"{\"artifacts\": [\"lib\"], $m}"
		assert_fail policy_denied 4
	done
	[ ! -e /tmp/x.lock ]
}

@test "registry references: plain http only to loopback; a missing layout is not_found" {
	base
	before=$(state)
	run --separate-stderr box-pull --registry http://registry.example.com base
	assert_fail policy_denied 4 '.error.path == "$.registry"'
	run --separate-stderr env BOX_REGISTRY=http://registry.example.com box-pull good
	assert_fail policy_denied 4
	run --separate-stderr box-pull --registry ftp://registry.example.com base
	assert_fail invalid_request 2 '.error.path == "$.registry"'
	# a loopback registry that is not there: an I/O error, retryable
	run --separate-stderr box-pull --registry http://127.0.0.1:1 base
	assert_fail io_error 8 '.error.retryable == true'
	run --separate-stderr box-pull --registry "oci:$T/none" base
	assert_fail not_found 6
	assert_equal "$(state)" "$before"
}

@test "without --registry, artifacts all pinned to one source are pulled from it" {
	base
	rm -rf "$STORE/sha256/${BASE#sha256:}"
	before=$(state)
	# good is not pinned: BOX_REGISTRY is used, and it has nothing
	run --separate-stderr env BOX_REGISTRY="oci:$T/nowhere" box-pull base good
	assert_fail not_found 6
	assert_equal "$(state)" "$before"
	# base is: its pin's source wins over BOX_REGISTRY
	run --separate-stderr env BOX_REGISTRY="oci:$T/nowhere" box-pull base
	assert_pulled '.artifacts[0].digest == $d and .artifacts[0].cached == false and
		.lock.changed == false' --arg d "$BASE"
	[ -d "$STORE/sha256/${BASE#sha256:}" ]
}

@test "crash safety: SIGKILL at random moments leaves no partial entry, box.lock old or new" {
	on_tmpfs
	# a few MB of random data in a few files, plus many small ones (extraction takes a while)
	mkdir -p big/files big/small
	echo '{"name": "big", "version": "1.0.0", "kind": "skill"}' >big/box-artifact.json
	for i in 1 2 3; do head -c $((1 << 20)) /dev/urandom >"big/files/$i"; done
	for i in $(seq 100); do echo "$i" >"big/small/$i"; done
	run box-pack --registry "oci:$REG" big
	assert_success
	big=$(jq -r .digest <<<"$output")
	hex=${big#sha256:}
	mk_art "$T/src/base" base 1.0.0
	run box-pack --registry "oci:$REG" "$T/src/base"
	assert_success
	bhex=$(jq -r .digest <<<"$output")
	bhex=${bhex#sha256:}

	# the reference outcome: a complete pull elsewhere, timed (same registry reference, so
	# the same lock bytes)
	mkdir ref work
	(cd ref && BOX_HOME=$T/refhome box-pull --registry "oci:$REG" base >/dev/null)
	cp ref/box.lock old.lock
	t0=$(now_ms)
	(cd ref && BOX_HOME=$T/refhome box-pull --registry "oci:$REG" big >/dev/null)
	dur=$(($(now_ms) - t0 + 20))
	cp ref/box.lock new.lock
	old=$(sha old.lock)
	new=$(sha new.lock)
	[ "$old" != "$new" ]

	cd work
	(box-pull --registry "oci:$REG" base >/dev/null)
	assert_equal "$(sha box.lock)" "$old"
	# the window of the kill adapts, so that about half the pulls die on the way
	killed=0 completed=0 window=$dur
	for i in $(seq 20); do
		box-pull --registry "oci:$REG" big >/dev/null 2>&1 &
		pid=$!
		sleep "$(printf '0.%03d' $((RANDOM % window % 1000)))"
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" || true
		# box.lock parses and is the old or the new file
		jq -e '.lock_version == 1' box.lock >/dev/null
		s=$(sha box.lock)
		[ "$s" = "$old" ] || [ "$s" = "$new" ]
		# a visible entry is complete: its tree hashes to the reference's record
		run --separate-stderr box-lock verify --lock "$T/new.lock"
		if [ -e "$STORE/sha256/$hex" ]; then
			assert_success
			one_json_where '.ok == true and .problems == []'
		else
			assert_failure 5
			one_json_where '.problems == [{"name": "big", "digest": $d, "problem": "missing"}]' \
				--arg d "$big"
			# a lock pinning big never comes before its store entry
			[ "$s" = "$old" ]
		fi
		if [ "$s" = "$new" ]; then
			completed=$((completed + 1))
			window=$((window * 2 / 3 + 1))
		else
			killed=$((killed + 1))
			window=$((window * 4 / 3 < 2 * dur ? window * 4 / 3 + 1 : 2 * dur))
		fi
		# nothing but the two entries and their tree notes is visible
		for e in "$STORE"/sha256/*; do
			case ${e##*/} in
			"$bhex" | "$bhex.tree" | "$hex" | "$hex.tree") ;;
			*) echo "unexpected store entry $e" >&2; false ;;
			esac
		done
		# back to the old state for the next round
		rm -rf "$STORE/sha256/$hex" "$STORE/sha256/$hex.tree"
		cp "$T/old.lock" box.lock
	done
	echo "# killed before the end $killed of 20, completed $completed (full pull ${dur} ms)" >&3
	# after all that, a pull completes normally and agrees with the reference
	run --separate-stderr box-pull --registry "oci:$REG" big
	assert_pulled '.artifacts[0].cached == false'
	assert_equal "$(sha box.lock)" "$new"
	run box-lock verify
	assert_success
}

@test "concurrency: eight pulls at once into one store and one lockfile lose no entry" {
	declare -A dig
	for i in 1 2 3 4 5 6 7 8; do dig[a$i]=$(pack "a$i" 1.0.$i); done
	pids=()
	for i in 1 2 3 4 5 6 7 8; do
		box-pull "a$i" >"out$i" 2>"err$i" &
		pids+=($!)
	done
	for i in 0 1 2 3 4 5 6 7; do
		wait "${pids[$i]}" || { cat "out$((i + 1))" "err$((i + 1))"; false; }
	done
	for i in 1 2 3 4 5 6 7 8; do
		jq -e --arg d "${dig[a$i]}" '.ok == true and .artifacts[0].digest == $d' "out$i"
		[ ! -s "err$i" ]
		[ -d "$STORE/sha256/${dig[a$i]#sha256:}" ]
	done
	jq -e '.lock_version == 1 and (.artifacts | map(.name) ==
		["a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8"]) and
		(.artifacts | map(.version) == ["1.0.1", "1.0.2", "1.0.3", "1.0.4", "1.0.5", "1.0.6",
		"1.0.7", "1.0.8"])' box.lock
	run box-lock verify
	assert_success
}

@test "--describe, --help, --version" {
	run --separate-stderr box-pull --describe
	assert_equal "$status" 0
	one_json_where '.name == "box-pull" and .input_schema.type == "object" and
		(.input_schema.properties | keys) == ["artifacts", "frozen"]'
	run --separate-stderr box-pull --describe --trust-request
	one_json_where '(.input_schema.properties | has("artifacts") and has("frozen") and
		has("lock") and has("registry"))'
	assert_equal "$stderr" ""
	run --separate-stderr box-pull --help
	assert_equal "$status" 0
	assert_line --index 0 --regexp '^usage: box-pull .*NAME'
	assert_output --partial '--frozen'
	assert_equal "$stderr" ""
	run --separate-stderr box-pull --version
	assert_equal "$status" 0
	assert_output --regexp '^box-pull \(box\) [0-9]+\.[0-9]+\.[0-9]+$'
}

@test "progress goes to stderr only when stderr is a terminal" {
	command -v script >/dev/null || skip "script (util-linux) is not installed"
	pack prog 1.0.0 >/dev/null
	run --separate-stderr box-pull prog
	assert_equal "$status" 0
	assert_equal "$stderr" ""
	rm -rf "$STORE" box.lock
	# under a pseudo-terminal the same pull shows a progress line
	run script -qec "box-pull prog" /dev/null
	assert_equal "$status" 0
	[[ $output == *"box-pull: prog "*"100%"* ]]
	# and the JSON still comes out whole on stdout
	grep -q '"name":"prog"' <<<"$output"
}

@test "libcurl only where a remote registry is used: box-pack, box-pull, box-lock never load it" {
	for b in box-pack box-pull box-lock; do
		run ldd "$(command -v "$b")"
		assert_success
		refute_output --partial libcurl
	done
	run ldd "$BOX_LIBEXEC_DIR/box-registry"
	assert_output --partial libcurl
	# a local layout needs no helper at all; a remote registry names the one it cannot run
	d=$(pack lib 1.0.0)
	run --separate-stderr env BOX_LIBEXEC_DIR=/nonexistent box-pull "lib@$d"
	assert_equal "$status" 0
	run --separate-stderr env BOX_LIBEXEC_DIR=/nonexistent box-pull -r http://127.0.0.1:1/x lib
	assert_fail not_found 6 '.error.message | test("helper box-registry .*looked in /nonexistent")'
}

@test "box-registry runs as every helper does: its own process group, killed with its caller" {
	local port pull reg i
	python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
conns = []
end = time.time() + 60
while time.time() < end:
    s.settimeout(1)
    try:
        conns.append(s.accept()[0])
    except OSError:
        pass' >"$T/port" &
	srv=$!
	for i in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
	port=$(cat "$T/port")
	box-pull -r "http://127.0.0.1:$port/x" lib >"$T/out" 2>&1 &
	pull=$!
	reg=
	for i in $(seq 100); do
		reg=$(pgrep -P "$pull" -f box-registry || true)
		[ -n "$reg" ] && break
		sleep 0.1
	done
	[ -n "$reg" ] || { kill "$pull" "$srv"; false; }
	# the leader of a process group of its own, not in its caller's
	[ "$(ps -o pgid= -p "$reg" | tr -d ' ')" = "$reg" ]
	[ "$(ps -o pgid= -p "$reg" | tr -d ' ')" != "$(ps -o pgid= -p "$pull" | tr -d ' ')" ]
	# a caller killed takes its helper with it
	kill -9 "$pull"
	wait "$pull" || true
	for i in $(seq 100); do kill -0 "$reg" 2>/dev/null || break; sleep 0.1; done
	run kill -0 "$reg"
	assert_failure
	kill "$srv" 2>/dev/null || true
	wait "$srv" 2>/dev/null || true
}
