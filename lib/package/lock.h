/* box-lock: box.json ranges into box.lock pins; verification of the store against them. */
#ifndef BOX_RESOLVE_H
#define BOX_RESOLVE_H

#include <cjson/cJSON.h>
#include "err.h"
#include "json.h"

extern const struct box_field box_resolve_fields[];

/*
 * Runs the request's "command":
 *   resolve  (default) reads box.json and pins every artifact in box.lock: an existing pin that
 *            the range accepts is kept (after checking that its tag still resolves to the pinned
 *            digest: another digest is a conflict), others get the highest version tag the
 *            range accepts; pins box.json no longer names are dropped. The lockfile is written
 *            under flock, atomically, and only when it changed; with "frozen" a change is a
 *            conflict and nothing is written.
 *   update   the same, moving the pins of "names" (all when none) to the best version.
 *   verify   every pin is in the store ($BOX_HOME/store) and its tree hashes to the recorded
 *            tree digest; store entries no pin names are "extra". Problems → integrity_failed.
 *   check    box.lock pins exactly what box.json asks for (no registry is read); problems →
 *            conflict.
 * Returns the result object (with "error" for verify/check problems) or NULL with err.
 */
cJSON *box_resolve(const cJSON *req, struct box_err *err);

#endif
