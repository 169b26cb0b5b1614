/* box-pull: artifacts from a registry into the verified store, pinned in box.lock. */
#ifndef BOX_PULL_H
#define BOX_PULL_H

#include <cjson/cJSON.h>
#include "err.h"
#include "json.h"

extern const struct box_field box_pull_fields[];

/*
 * Pulls every spec of the request's "artifacts" (NAME, NAME@VERSION, NAME@sha256:HEX): resolves
 * it in the registry (the request's "registry"; else, when box.lock pins every requested
 * artifact to one source, that source; else the default of box_default_registry) (a bare NAME: its lockfile pin, else its highest version tag), checks the
 * manifest digest, the config (its name and version must be what was asked) and, unless the
 * store already has the digest, copies the layer into the store while hashing it and checks
 * digest and size before extracting it (lib/artifact/boxarchive.h rules) into store/tmp. Then, under the
 * lockfile's flock: pins every artifact (another version or digest already pinned is a
 * conflict; with "frozen" any change is), makes the staged trees visible as
 * store/sha256/<hex> by rename, and writes box.lock atomically if it changed.
 * Any failure leaves store and lockfile as they were (staged trees are removed).
 * Returns {"ok", "artifacts": [{name, version, digest, kind, path, bytes, cached}], "lock"}
 * or NULL with err.
 */
struct box_pull_hooks {
	/* optional: called as the layer of name is fetched (bytes so far, its size); the caller
	 * decides whether and where to show it */
	void (*progress)(void *ctx, const char *name, int64_t done, int64_t total);
	void *ctx;
};

cJSON *box_pull(const cJSON *req, const struct box_pull_hooks *hooks, struct box_err *err);

struct box_repo;
struct box_store;

/*
 * The tree digest ("sha256:HEX" of the extracted tree, box_archive_tree_digest) of artifact
 * name whose manifest (len bytes, already checked against digest) is manifest: from the
 * store's note when the store has the entry; else its layer is fetched from repo, checked,
 * extracted and committed into the store with its note, as box_pull does. box-lock uses it
 * to write complete pins. Returns 0, or -1 with err (the store is then as it was).
 */
int box_pull_tree(struct box_repo *repo, struct box_store *store, const char *name,
		  const char *digest, const char *manifest, size_t len, char tree[72],
		  struct box_err *err);

#endif
