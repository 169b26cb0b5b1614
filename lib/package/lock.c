#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lock.h"
#include "artifact.h"
#include "boxarchive.h"
#include "buf.h"
#include "lockfile.h"
#include "oci.h"
#include "pull.h"
#include "repo.h"
#include "semver.h"
#include "sha256.h"
#include "store.h"
#include "banned.h"

#define MAX_STORE_ENTRIES 100000

const struct box_field box_resolve_fields[] = {
	{ "command", BOX_F_STRING, 0, 16, 0,
	  "resolve (the default), update, verify, check or gc", "COMMAND" },
	{ "names", BOX_F_STRINGS, 0, 10000, 0, "for update: the artifacts to move (default all)",
	  "NAME" },
	{ "manifest", BOX_F_STRING, 0, 4096, 'm', "the manifest (default ./box.json)", "FILE" },
	{ "lock", BOX_F_STRING, 0, 4096, 'l', "the lockfile (default ./box.lock)", "FILE" },
	{ "locks", BOX_F_STRINGS, 0, 1000, 0,
	  "for gc: the lockfiles whose pins stay in the store (default the lockfile)", "FILE" },
	{ "registry", BOX_F_STRING, 0, 4096, 'r',
	  "registry: oci:PATH or a remote registry (default: box.json's, else $BOX_REGISTRY, "
	  "else oci:$BOX_HOME/registry)",
	  "REF" },
	{ "frozen", BOX_F_BOOL, 0, 0, 0,
	  "never write the lockfile: fail if it would change (check: no registry at all)", NULL },
	{ "insecure", BOX_F_BOOL, 0, 0, 0,
	  "allow a plain http:// registry that is not on a loopback address", NULL },
	{ NULL },
};

struct res {
	const cJSON *req;
	struct box_manifest man;
	struct box_repo repo;
	struct box_store store;
	char source[1025];
	cJSON *out;          /* the artifacts array of the result */
	cJSON *skipped;      /* tags that hold no box artifact */
};

static int wanted(const cJSON *names, const char *name)
{
	const cJSON *n;

	if (cJSON_GetArraySize(names) == 0)
		return 1;
	cJSON_ArrayForEach(n, names)
		if (strcmp(n->valuestring, name) == 0)
			return 1;
	return 0;
}

/* The kind an artifact declares, from its config blob (checked against its digest). */
static int read_kind(struct res *r, const char *manifest, size_t len, const char *name,
		     const char *version, char kind[8], struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(BOX_ARTIFACT_MAX);
	struct box_oci_artifact a;
	struct box_artifact art;
	int fd, rc;

	if (box_oci_artifact_parse(manifest, len, &a, err) < 0)
		return -1;
	if (a.config_size > BOX_ARTIFACT_MAX)
		return box_err_set(err, BOX_E_INTEGRITY, "config of %s is too large", name);
	fd = memfd_create("box-config", MFD_CLOEXEC);
	if (fd < 0)
		return box_err_sys(err, "memfd_create");
	rc = box_repo_fetch(&r->repo, name, a.config_digest, a.config_size, fd, err);
	if (rc == 0 && lseek(fd, 0, SEEK_SET) < 0)
		rc = box_err_sys(err, "lseek");
	if (rc == 0)
		rc = box_buf_read_fd(&b, fd, err);
	close(fd);
	if (rc == 0)
		rc = box_artifact_parse(b.data ? b.data : "", b.len, &art, err);
	box_buf_release(&b);
	if (rc < 0)
		return -1;
	if (strcmp(art.name, name) || strcmp(art.version, version))
		return box_err_set(err, BOX_E_INTEGRITY, "%s:%s holds %s %s", name, version, art.name,
				   art.version);
	snprintf(kind, 8, "%s", art.kind);
	return 0;
}

/* Pins one manifest entry: keeps a pin its range accepts (unless updating it), after checking
 * that its tag still resolves to the pinned digest; else picks the best tag. */
static int pin_one(struct res *r, struct box_lock *lk, const struct box_manifest_entry *m,
		   int update, struct box_err *err)
{
	const struct box_lock_entry *found = box_lock_find(lk, m->name);
	struct box_lock_entry old, *pin = found ? &old : NULL;
	struct box_buf man = BOX_BUF_INIT(BOX_OCI_MANIFEST_MAX);
	struct box_lock_entry e;
	struct box_range range;
	struct box_semver v;
	char digest[BOX_OCI_DIGEST_LEN];
	const char **tags = NULL;
	cJSON *list = NULL, *t, *o;
	size_t n = 0, best;
	int rc = -1, kept = 0;

	/* a copy: box_lock_put below rewrites the entry the lock holds */
	if (found)
		old = *found;
	if (box_range_parse(m->range, &range, err) < 0)
		return -1;
	memset(&e, 0, sizeof(e));
	if (pin && !update && box_semver_parse(pin->version, &v, err) == 0 &&
	    box_range_match(&range, &v)) {
		if (box_repo_resolve(&r->repo, m->name, pin->version, digest, &man, err) < 0)
			goto out;
		if (strcmp(digest, pin->digest) != 0) {
			box_err_set(err, BOX_E_CONFLICT, "%s:%s is pinned to %s but now resolves to %s",
				    m->name, pin->version, pin->digest, digest);
			goto out;
		}
		e = *pin;
		kept = 1;
		if (!e.tree_digest[0]) {	/* complete an older pin */
			if (box_pull_tree(&r->repo, &r->store, e.name, e.digest, man.data, man.len,
					  e.tree_digest, err) < 0 || box_lock_put(lk, &e, 1, err) < 0)
				goto out;
		}
	} else {
		list = box_repo_tags(&r->repo, m->name, err);
		if (!list)
			goto out;
		tags = calloc((size_t)cJSON_GetArraySize(list) + 1, sizeof(*tags));
		if (!tags) {
			box_err_set(err, BOX_E_INTERNAL, "out of memory");
			goto out;
		}
		cJSON_ArrayForEach(t, list)
			if (cJSON_IsString(t))
				tags[n++] = t->valuestring;
		for (;;) {
			if (box_range_best(&range, tags, n, &best, err) < 0) {
				if (err->code == BOX_E_NOT_FOUND)
					box_err_set(err, BOX_E_NOT_FOUND,
						    "no version of %s matches %s in %s", m->name,
						    m->range, r->source);
				goto out;
			}
			snprintf(e.name, sizeof(e.name), "%s", m->name);
			snprintf(e.version, sizeof(e.version), "%s", tags[best]);
			if (box_repo_resolve(&r->repo, m->name, tags[best], digest, &man, err) == 0 &&
			    read_kind(r, man.data, man.len, e.name, e.version, e.kind, err) == 0)
				break;
			if (err->code != BOX_E_INVALID)
				goto out;
			/* a tag holding something else than a box artifact (another tool's image):
			 * skipped, named in the result, and the next best tries */
			o = cJSON_CreateObject();
			cJSON_AddStringToObject(o, "name", m->name);
			cJSON_AddStringToObject(o, "tag", tags[best]);
			cJSON_AddStringToObject(o, "reason", err->message);
			cJSON_AddItemToArray(r->skipped, o);
			box_err_init(err);
			tags[best] = tags[--n];
		}
		snprintf(e.digest, sizeof(e.digest), "%s", digest);
		snprintf(e.source, sizeof(e.source), "%s", r->source);
		/* the same digest keeps the tree digest a pull recorded; a new one gets its own,
		 * from the store (fetched into it when missing), so that the pin is complete */
		if (pin && strcmp(pin->digest, e.digest) == 0)
			snprintf(e.tree_digest, sizeof(e.tree_digest), "%s", pin->tree_digest);
		if (!e.tree_digest[0] && box_pull_tree(&r->repo, &r->store, e.name, e.digest,
							man.data, man.len, e.tree_digest, err) < 0)
			goto out;
		if (box_lock_put(lk, &e, 1, err) < 0)
			goto out;
	}
	o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "name", e.name);
	cJSON_AddStringToObject(o, "version", e.version);
	cJSON_AddStringToObject(o, "digest", e.digest);
	cJSON_AddStringToObject(o, "kind", e.kind);
	cJSON_AddBoolToObject(o, "changed", !kept && (!pin || strcmp(pin->digest, e.digest) ||
						      strcmp(pin->version, e.version)));
	cJSON_AddItemToArray(r->out, o);
	rc = 0;
out:
	free(tags);
	cJSON_Delete(list);
	box_buf_release(&man);
	return rc;
}

static int resolve_all(struct box_lock *lk, void *ctx, struct box_err *err)
{
	struct res *r = ctx;
	const cJSON *names = cJSON_GetObjectItemCaseSensitive(r->req, "names");
	int update = strcmp(box_json_get_str(r->req, "command", "resolve"), "update") == 0;
	size_t i, j;

	for (i = 0; i < r->man.n; i++)
		if (pin_one(r, lk, &r->man.entries[i], update && wanted(names, r->man.entries[i].name),
			    err) < 0)
			return -1;
	/* pins of artifacts box.json no longer names go */
	for (i = 0; i < lk->n;) {
		for (j = 0; j < r->man.n; j++)
			if (strcmp(lk->entries[i].name, r->man.entries[j].name) == 0)
				break;
		if (j == r->man.n)
			box_lock_remove(lk, lk->entries[i].name);
		else
			i++;
	}
	return 0;
}

static int open_store(struct box_store *s, struct box_err *err)
{
	char home[4096], dir[4200];

	if (box_home(home, sizeof(home), err) < 0)
		return -1;
	snprintf(dir, sizeof(dir), "%s/store", home);
	return box_store_open(dir, s, err);
}

static cJSON *do_resolve(struct res *r, const char *lock, struct box_err *err)
{
	const cJSON *names = cJSON_GetObjectItemCaseSensitive(r->req, "names"), *n;
	int changed = 0, rc, slock;
	cJSON *res;

	cJSON_ArrayForEach(n, names) {
		size_t i;

		for (i = 0; i < r->man.n; i++)
			if (strcmp(r->man.entries[i].name, n->valuestring) == 0)
				break;
		if (i == r->man.n) {
			box_err_set(err, BOX_E_NOT_FOUND, "%s is not in the manifest", n->valuestring);
			return NULL;
		}
	}
	if (box_json_get_str(r->req, "registry", NULL))
		snprintf(r->source, sizeof(r->source), "%s", box_json_get_str(r->req, "registry", ""));
	else if (r->man.registry[0])
		snprintf(r->source, sizeof(r->source), "%s", r->man.registry);
	else if (box_default_registry(r->source, sizeof(r->source), err) < 0)
		return NULL;
	if (open_store(&r->store, err) < 0)
		return NULL;
	if (box_repo_open(r->source, 0, box_json_get_bool(r->req, "insecure", 0), &r->repo, err) < 0) {
		box_store_close(&r->store);
		return NULL;
	}
	r->out = cJSON_CreateArray();
	r->skipped = cJSON_CreateArray();
	/* shared: a gc never removes what is fetched here before it is pinned */
	slock = r->out ? box_store_lock(&r->store, 0, err) : -1;
	rc = slock < 0 ? -1 : box_lock_update(AT_FDCWD, lock, resolve_all, r,
					      box_json_get_bool(r->req, "frozen", 0), &changed, err);
	if (!r->out)
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
	if (slock >= 0)
		close(slock);
	box_repo_close(&r->repo);
	box_store_close(&r->store);
	if (rc < 0) {
		cJSON_Delete(r->out);
		cJSON_Delete(r->skipped);
		return NULL;
	}
	res = cJSON_CreateObject();
	cJSON_AddTrueToObject(res, "ok");
	cJSON_AddItemToObject(res, "artifacts", r->out);
	cJSON_AddItemToObject(res, "skipped", r->skipped);
	n = cJSON_AddObjectToObject(res, "lock");
	cJSON_AddStringToObject((cJSON *)n, "path", lock);
	cJSON_AddBoolToObject((cJSON *)n, "changed", changed);
	return res;
}

static void problem(cJSON *arr, const char *name, const char *digest, const char *what,
		    const char *detail)
{
	cJSON *o = cJSON_CreateObject();

	if (name)
		cJSON_AddStringToObject(o, "name", name);
	cJSON_AddStringToObject(o, "digest", digest);
	cJSON_AddStringToObject(o, "problem", what);
	if (detail)
		cJSON_AddStringToObject(o, "detail", detail);
	cJSON_AddItemToArray(arr, o);
}

/* verify: every pin is in the store and its tree still hashes to what was recorded; store
 * entries no pin names are extra */
static cJSON *do_verify(const char *lock, struct box_err *err)
{
	char home[4096], dir[4200], tree[BOX_ARCHIVE_DIGEST_LEN + 1], digest[80];
	struct box_store s;
	struct box_lock lk;
	cJSON *res = NULL, *probs, *unpinned = NULL;
	struct dirent *de;
	size_t i, seen = 0;
	DIR *d;
	int fd;

	box_lock_init(&lk);
	if (box_lock_read(AT_FDCWD, lock, &lk, err) < 0)
		return NULL;
	if (box_home(home, sizeof(home), err) < 0)
		goto out_lock;
	snprintf(dir, sizeof(dir), "%s/store", home);
	if (box_store_open(dir, &s, err) < 0)
		goto out_lock;
	probs = cJSON_CreateArray();
	unpinned = cJSON_CreateArray();
	for (i = 0; i < lk.n; i++) {
		const struct box_lock_entry *e = &lk.entries[i];

		fd = box_store_open_entry(&s, e->digest, err);
		if (fd < 0 && err->code == BOX_E_NOT_FOUND) {
			problem(probs, e->name, e->digest, "missing", NULL);
			continue;
		}
		if (fd < 0)
			goto out_store;
		if (box_archive_tree_digest(fd, tree, err) < 0) {
			close(fd);
			goto out_store;
		}
		close(fd);
		if (!e->tree_digest[0])
			problem(probs, e->name, e->digest, "unrecorded",
				"no tree digest in the lockfile: pull it again to record one");
		else if (strcmp(tree, e->tree_digest) != 0)
			problem(probs, e->name, e->digest, "modified", tree);
	}
	d = fdopendir(dup(s.shafd));
	if (!d) {
		box_err_sys(err, "read the store");
		goto out_store;
	}
	rewinddir(d);
	while ((de = readdir(d)) && seen++ < MAX_STORE_ENTRIES) {
		if (de->d_name[0] == '.' || strchr(de->d_name, '.'))
			continue;
		snprintf(digest, sizeof(digest), "sha256:%.64s", de->d_name);
		for (i = 0; i < lk.n; i++)
			if (strcmp(lk.entries[i].digest, digest) == 0)
				break;
		if (i == lk.n)	/* another project's, or an old version: information */
			cJSON_AddItemToArray(unpinned, cJSON_CreateString(digest));
	}
	closedir(d);
	res = cJSON_CreateObject();
	cJSON_AddBoolToObject(res, "ok", cJSON_GetArraySize(probs) == 0);
	cJSON_AddItemToObject(res, "problems", probs);
	cJSON_AddItemToObject(res, "unpinned", unpinned);
	probs = NULL;
	unpinned = NULL;
	if (cJSON_GetArraySize(cJSON_GetObjectItem(res, "problems")) > 0) {
		struct box_err e;

		box_err_set(&e, BOX_E_INTEGRITY, "%d problem(s) in the store",
			    cJSON_GetArraySize(cJSON_GetObjectItem(res, "problems")));
		cJSON_AddItemToObject(res, "error", box_err_to_json(&e));
	}
out_store:
	cJSON_Delete(probs);
	cJSON_Delete(unpinned);
	box_store_close(&s);
out_lock:
	box_lock_release(&lk);
	return res;
}

static int pinned_by(const struct box_lock *locks, size_t n, const char *digest)
{
	size_t i, j;

	for (i = 0; i < n; i++)
		for (j = 0; j < locks[i].n; j++)
			if (strcmp(locks[i].entries[j].digest, digest) == 0)
				return 1;
	return 0;
}

/* gc: removes the store entries that none of the lockfiles pins, under the store's
 * exclusive lock (no pull or resolve is between commit and pin meanwhile). */
static cJSON *do_gc(const cJSON *req, const char *lock, struct box_err *err)
{
	const cJSON *given = cJSON_GetObjectItemCaseSensitive(req, "locks");
	size_t n = given && cJSON_GetArraySize(given) ? (size_t)cJSON_GetArraySize(given) : 1;
	struct box_lock *locks = calloc(n, sizeof(*locks));
	cJSON *res = NULL, *removed = NULL;
	struct box_store s;
	struct dirent *de;
	size_t i, seen = 0, kept = 0;
	int have_store = 0, slock = -1;
	char digest[80];
	DIR *d = NULL;

	if (!locks)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
	if (open_store(&s, err) < 0)
		goto out;
	have_store = 1;
	if ((slock = box_store_lock(&s, 1, err)) < 0)
		goto out;
	for (i = 0; i < n; i++) {
		const char *path = n == 1 && !cJSON_GetArraySize(given) ? lock :
				   cJSON_GetArrayItem(given, (int)i)->valuestring;

		box_lock_init(&locks[i]);
		if (box_lock_read(AT_FDCWD, path, &locks[i], err) < 0)
			goto out;
		if (locks[i].missing) {	/* a typo must not empty the store */
			box_err_set(err, BOX_E_NOT_FOUND, "%s: no such lockfile", path);
			goto out;
		}
	}
	d = fdopendir(dup(s.shafd));
	if (!d) {
		box_err_sys(err, "read the store");
		goto out;
	}
	removed = cJSON_CreateArray();
	while ((de = readdir(d)) && seen++ < MAX_STORE_ENTRIES) {
		if (de->d_name[0] == '.' || strchr(de->d_name, '.') || strlen(de->d_name) != 64)
			continue;
		snprintf(digest, sizeof(digest), "sha256:%.64s", de->d_name);
		if (pinned_by(locks, n, digest)) {
			kept++;
			continue;
		}
		if (box_store_remove(&s, digest, err) < 0)
			goto out;
		cJSON_AddItemToArray(removed, cJSON_CreateString(digest));
	}
	if (box_store_clean_tmp(&s, err) < 0)
		goto out;
	res = cJSON_CreateObject();
	cJSON_AddTrueToObject(res, "ok");
	cJSON_AddItemToObject(res, "removed", removed);
	removed = NULL;
	box_json_add_int64(res, "kept", (int64_t)kept);
out:
	if (d)
		closedir(d);
	cJSON_Delete(removed);
	for (i = 0; i < n; i++)
		box_lock_release(&locks[i]);
	free(locks);
	if (slock >= 0)
		close(slock);
	if (have_store)
		box_store_close(&s);
	return res;
}

static cJSON *do_check(struct res *r, const char *lock, struct box_err *err)
{
	struct box_lock lk;
	cJSON *probs = NULL, *res = NULL;
	struct box_err why;
	int rc;

	box_lock_init(&lk);
	if (box_lock_read(AT_FDCWD, lock, &lk, err) < 0)
		return NULL;
	box_err_init(&why);
	rc = box_lock_satisfies(&r->man, &lk, &probs, &why);
	if (rc < 0) {
		*err = why;
		goto out;
	}
	res = cJSON_CreateObject();
	cJSON_AddBoolToObject(res, "ok", rc == 0);
	cJSON_AddItemToObject(res, "problems", probs);
	if (rc == 1)
		cJSON_AddItemToObject(res, "error", box_err_to_json(&why));
out:
	box_lock_release(&lk);
	return res;
}

cJSON *box_resolve(const cJSON *req, struct box_err *err)
{
	const char *cmd = box_json_get_str(req, "command", "resolve");
	const char *manifest = box_json_get_str(req, "manifest", "box.json");
	const char *lock = box_json_get_str(req, "lock", "box.lock");
	struct res r;
	cJSON *res = NULL;

	memset(&r, 0, sizeof(r));
	r.req = req;
	box_manifest_init(&r.man);
	if (strcmp(cmd, "gc") == 0)
		return do_gc(req, lock, err);
	if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(req, "locks"))) {
		box_err_set(err, BOX_E_USAGE, "locks are for gc only");
		box_err_path(err, "$.locks");
		return NULL;
	}
	if (strcmp(cmd, "verify") == 0)
		return do_verify(lock, err);
	if (strcmp(cmd, "resolve") && strcmp(cmd, "update") && strcmp(cmd, "check")) {
		box_err_set(err, BOX_E_USAGE,
			    "unknown command %.32s (resolve, update, verify, check, gc)", cmd);
		box_err_path(err, "$.command");
		return NULL;
	}
	if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(req, "names")) &&
	    strcmp(cmd, "update") != 0) {
		box_err_set(err, BOX_E_USAGE, "names are for update only");
		box_err_path(err, "$.names");
		return NULL;
	}
	if (box_manifest_read(AT_FDCWD, manifest, &r.man, err) < 0)
		return NULL;
	if (strcmp(cmd, "check") == 0)
		res = do_check(&r, lock, err);
	else
		res = do_resolve(&r, lock, err);
	box_manifest_release(&r.man);
	return res;
}
