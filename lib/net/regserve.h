/* The registry helper's protocol: box-registry (in $(libexecdir)/box) does the remote
 * registry work of lib/net/registry.c, with libcurl, for box-pack, box-pull and box-lock, which
 * thus never load libcurl for a local layout (DESIGN.md, start-up). */
#ifndef BOX_REGSERVE_H
#define BOX_REGSERVE_H

#include "err.h"

#define BOX_REGSERVE_MAX_FRAME (32 << 20)  /* a manifest (4 MiB) in base64, a tag list */
#define BOX_REGSERVE_ANSWER 1              /* frame op of a request and of its answer */
#define BOX_REGSERVE_PROGRESS 2            /* {"done", "total"} while a blob is fetched */
#define BOX_REGSERVE_READY 3               /* {}: now send the fd (nothing is read ahead) */

/*
 * Serves requests on the stream socket sock until its peer closes it: each is one frame of
 * op BOX_REGSERVE_ANSWER holding a JSON object {"op", ...}, answered by one such frame
 * {"ok": true, ...} or {"ok": false, "error": {...}} (box_err_to_json):
 *   init {ref, insecure}               box_registry_init; must come first
 *   manifest {name, ref}               -> {digest, media_type, body (base64)}
 *   tags {name}                        -> {tags}
 *   blob {name, digest, size} + an fd  box_registry_get_blob into the fd the caller sends
 *                                      (box_ipc_send_fds) once a READY frame asks for it,
 *                                      with PROGRESS frames
 *   put_blob {name, digest, size} + fd box_registry_put_blob from it
 *   put_manifest {name, tag, body (base64), media_type}
 * Returns 0 at the end of the stream, -1 with err when the socket fails.
 */
int box_regserve(int sock, struct box_err *err);

#endif
