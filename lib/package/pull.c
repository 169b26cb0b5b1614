#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pull.h"
#include "artifact.h"
#include "atomic.h"
#include "boxarchive.h"
#include "buf.h"
#include "lockfile.h"
#include "oci.h"
#include "repo.h"
#include "semver.h"
#include "store.h"
#include "banned.h"

#define MAX_ARTIFACTS 256
#define MAX_LAYER (INT64_C(1) << 32)

const struct box_field box_pull_fields[] = {
	{ "artifacts", BOX_F_STRINGS, 0, MAX_ARTIFACTS, 0,
	  "NAME, NAME@VERSION or NAME@sha256:HEX to pull (or the arguments)", "SPEC" },
	{ "registry", BOX_F_STRING, 0, 4096, 'r',
	  "registry: oci:PATH, https://HOST[/PREFIX] or HOST[:PORT]/PREFIX (default $BOX_REGISTRY, "
	  "else oci:$BOX_HOME/registry)", "REF" },
	{ "lock", BOX_F_STRING, 0, 4096, 'l', "the lockfile to pin into (default ./box.lock)", "FILE" },
	{ "frozen", BOX_F_BOOL, 0, 0, 0,
	  "pull only what the lockfile pins; fail if it would have to change", NULL },
	{ "insecure", BOX_F_BOOL, 0, 0, 0,
	  "allow a plain http:// registry that is not on a loopback address", NULL },
	{ NULL },
};

/* One artifact of the request, from its spec to its staged tree. */
struct item {
	char name[BOX_OCI_NAME_MAX + 1];
	char ref[BOX_OCI_DIGEST_LEN + BOX_OCI_TAG_MAX];  /* tag or digest asked for, "" for none */
	char digest[BOX_OCI_DIGEST_LEN];                  /* manifest digest */
	char tree[BOX_ARCHIVE_DIGEST_LEN + 1];
	struct box_artifact art;
	int64_t bytes;                                    /* layer bytes downloaded */
	int cached;
	char tmpname[64];                                 /* staged tree under store/tmp */
	int tmpfd;                                        /* holds the staging dir's flock */
	char source[BOX_LOCK_SOURCE_MAX + 1];             /* the registry it comes from */
	int skip;                                         /* frozen: differs, not staged */
};

struct pull {
	const struct box_pull_hooks *hooks;
	const char *current;       /* the artifact whose layer is being fetched */
	const char *source;        /* the registry repo is open on, "" when none */
	char current_source[BOX_LOCK_SOURCE_MAX + 1];
	const cJSON *req;
	char manifest_registry[BOX_LOCK_SOURCE_MAX + 1];  /* box.json's, "" for none */
	cJSON *diffs;              /* frozen: what box.lock and the registry disagree on */
	struct box_repo repo;
	struct box_store store;
	struct box_lock snapshot;  /* the lockfile as read before any work */
	struct item *items;
	size_t n;
	int frozen;
};

static int parse_spec(const char *spec, struct item *it, struct box_err *err)
{
	const char *at = strchr(spec, '@');
	size_t n = at ? (size_t)(at - spec) : strlen(spec);

	if (n == 0 || n > BOX_OCI_NAME_MAX)
		return box_err_set(err, BOX_E_INVALID, "bad artifact spec '%.300s'", spec);
	memcpy(it->name, spec, n);
	it->name[n] = 0;
	if (box_oci_name_check(it->name, err) < 0)
		return -1;
	if (!at)
		return 0;
	if (strncmp(at + 1, "sha256:", 7) == 0 ? box_oci_digest_check(at + 1, err) < 0 :
	    box_oci_tag_check(at + 1, err) < 0)
		return -1;
	snprintf(it->ref, sizeof(it->ref), "%s", at + 1);
	return 0;
}

/* The highest version tag of name when the spec gives none and nothing pins it. */
static int latest(struct pull *p, struct item *it, struct box_err *err)
{
	cJSON *tags = box_repo_tags(&p->repo, it->name, err), *t;
	const char **v = NULL;
	struct box_range r;
	size_t n = 0, best;
	int rc = -1;

	if (!tags)
		return -1;
	v = calloc((size_t)cJSON_GetArraySize(tags) + 1, sizeof(*v));
	if (!v) {
		cJSON_Delete(tags);
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	}
	cJSON_ArrayForEach(t, tags)
		if (cJSON_IsString(t))
			v[n++] = t->valuestring;
	if (box_range_parse("*", &r, err) == 0 && box_range_best(&r, v, n, &best, err) == 0) {
		snprintf(it->ref, sizeof(it->ref), "%s", v[best]);
		rc = 0;
	} else if (err->code == BOX_E_NOT_FOUND) {
		box_err_set(err, BOX_E_NOT_FOUND, "no version of %s in %s", it->name, p->source);
	}
	free(v);
	cJSON_Delete(tags);
	return rc;
}

static void on_progress(void *ctx, int64_t done, int64_t total)
{
	struct pull *p = ctx;

	p->hooks->progress(p->hooks->ctx, p->current, done, total);
}

static int read_config(struct pull *p, const struct box_oci_artifact *a, struct item *it,
		       struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(BOX_ARTIFACT_MAX);
	int fd, r;

	if (a->config_size > BOX_ARTIFACT_MAX)
		return box_err_set(err, BOX_E_INTEGRITY, "config of %s is too large", it->name);
	fd = memfd_create("box-config", MFD_CLOEXEC);
	if (fd < 0)
		return box_err_sys(err, "memfd_create");
	r = box_repo_fetch(&p->repo, it->name, a->config_digest, a->config_size, fd, err);
	if (r == 0 && lseek(fd, 0, SEEK_SET) < 0)
		r = box_err_sys(err, "lseek");
	if (r == 0)
		r = box_buf_read_fd(&b, fd, err);
	close(fd);
	if (r == 0)
		r = box_artifact_parse(b.data ? b.data : "", b.len, &it->art, err);
	box_buf_release(&b);
	if (r < 0)
		return -1;
	if (strcmp(it->art.name, it->name) != 0)
		return box_err_set(err, BOX_E_INTEGRITY, "%s resolves to an artifact named %s",
				   it->name, it->art.name);
	if (it->ref[0] && strncmp(it->ref, "sha256:", 7) != 0 && strcmp(it->ref, it->art.version))
		return box_err_set(err, BOX_E_INTEGRITY, "%s:%s resolves to version %s", it->name,
				   it->ref, it->art.version);
	return 0;
}

/* The tree digest of a store entry is noted beside it (sha256/<hex>.tree) when it is made, so
 * that a later pull of the same digest can pin it without trusting the tree as it is now. */
static void read_tree_note(struct box_store *store, const char *digest,
			   char tree[BOX_ARCHIVE_DIGEST_LEN + 1])
{
	struct box_buf b = BOX_BUF_INIT(BOX_ARCHIVE_DIGEST_LEN);
	struct box_err e;
	char name[80];
	int r;

	snprintf(name, sizeof(name), "%.64s.tree", digest + 7);
	r = box_buf_read_file(&b, store->shafd, name, &e);
	if (r == 0 && b.len == BOX_ARCHIVE_DIGEST_LEN && strncmp(b.data, "sha256:", 7) == 0)
		memcpy(tree, b.data, b.len + 1);
	else
		tree[0] = 0;  /* no note (an older store): the pin records none */
	box_buf_release(&b);
}

static int write_tree_note(struct box_store *store, const char *digest, const char *tree,
			   struct box_err *err)
{
	char name[80];

	snprintf(name, sizeof(name), "%.64s.tree", digest + 7);
	return box_atomic_write(store->shafd, name, tree, strlen(tree), 0644, err);
}

/* Fetches the layer of a into an unnamed file of the store (box_repo_fetch checks digest and
 * size while it streams, before anything is extracted), extracts it into a fresh staging
 * directory (tmpname, *tmpfd) and computes its tree digest. */
static int stage_layer(struct box_repo *repo, struct box_store *store, const char *name,
		       const struct box_oci_artifact *a, char tmpname[64], int *tmpfd,
		       char tree[BOX_ARCHIVE_DIGEST_LEN + 1], struct box_err *err)
{
	struct box_archive_limits lim;
	int fd, r;

	if (a->layer_size > MAX_LAYER)
		return box_err_set(err, BOX_E_LIMIT, "layer of %s is too large", name);
	fd = openat(store->tmpfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return box_err_sys(err, "temporary file in the store");
	r = box_repo_fetch(repo, name, a->layer_digest, a->layer_size, fd, err);
	if (r == 0 && lseek(fd, 0, SEEK_SET) < 0)
		r = box_err_sys(err, "lseek");
	if (r == 0)
		r = box_store_tmpdir(store, tmpname, tmpfd, err);
	if (r == 0) {
		box_archive_default_limits(a->layer_size, &lim);
		r = box_archive_extract(fd, *tmpfd, &lim, NULL, err);
	}
	if (r == 0)
		r = box_archive_tree_digest(*tmpfd, tree, err);
	close(fd);
	return r;
}

int box_pull_tree(struct box_repo *repo, struct box_store *store, const char *name,
		  const char *digest, const char *manifest, size_t len,
		  char tree[BOX_ARCHIVE_DIGEST_LEN + 1], struct box_err *err)
{
	struct box_oci_artifact a;
	char tmpname[64] = "";
	struct box_err e;
	int tmpfd = -1, r, fd;

	r = box_store_has(store, digest, err);
	if (r < 0)
		return -1;
	if (r == 1) {
		read_tree_note(store, digest, tree);
		if (tree[0])
			return 0;
		/* an entry of an older store without its note: verified when it was extracted */
		if ((fd = box_store_open_entry(store, digest, err)) < 0)
			return -1;
		r = box_archive_tree_digest(fd, tree, err);
		close(fd);
		return r < 0 ? -1 : write_tree_note(store, digest, tree, err);
	}
	if (box_oci_artifact_parse(manifest, len, &a, err) < 0)
		return -1;
	r = stage_layer(repo, store, name, &a, tmpname, &tmpfd, tree, err);
	if (r == 0)
		r = write_tree_note(store, digest, tree, err);
	if (r == 0)
		r = box_store_commit(store, tmpname, digest, err);
	else if (tmpname[0])
		box_store_abort(store, tmpname, &e);
	if (tmpfd >= 0)
		close(tmpfd);
	return r;
}

/* Notes one difference between box.lock and what was found (frozen mode). */
static void differ(struct pull *p, const char *name, const char *field, const char *locked,
		   const char *found)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "name", name);
	cJSON_AddStringToObject(o, "field", field);
	if (locked)
		cJSON_AddStringToObject(o, "locked", locked);
	else
		cJSON_AddNullToObject(o, "locked");
	if (found)
		cJSON_AddStringToObject(o, "found", found);
	else
		cJSON_AddNullToObject(o, "found");
	cJSON_AddItemToArray(p->diffs, o);
}

/* The registry an artifact comes from: the request's, else where box.lock pinned it from,
 * else box.json's, else the default (box_default_registry). */
static int item_source(struct pull *p, const struct box_lock_entry *pin, struct item *it,
		       struct box_err *err)
{
	const char *r = box_json_get_str(p->req, "registry", NULL);

	if (!r && pin)
		r = pin->source;
	if (!r && p->manifest_registry[0])
		r = p->manifest_registry;
	if (r) {
		if (strlen(r) >= sizeof(it->source))
			return box_err_set(err, BOX_E_INVALID, "registry reference too long");
		snprintf(it->source, sizeof(it->source), "%s", r);
		return 0;
	}
	return box_default_registry(it->source, sizeof(it->source), err);
}

/* Opens the registry of it unless it is the one open already. */
static int use_source(struct pull *p, struct item *it, struct box_err *err)
{
	if (p->source[0] && strcmp(p->source, it->source) == 0)
		return 0;
	if (p->source[0]) {
		box_repo_close(&p->repo);
		p->current_source[0] = 0;
	}
	if (box_repo_open(it->source, 0, box_json_get_bool(p->req, "insecure", 0), &p->repo,
			  err) < 0)
		return -1;
	snprintf(p->current_source, sizeof(p->current_source), "%s", it->source);
	return 0;
}

/* Resolves, checks against the lockfile as it was read, and stages one artifact. With
 * frozen, an artifact box.lock does not pin, or pins to something else, is not staged:
 * pin_all lists how it differs. */
static int prepare(struct pull *p, struct item *it, struct box_err *err)
{
	const struct box_lock_entry *pin = box_lock_find(&p->snapshot, it->name);
	struct box_buf man = BOX_BUF_INIT(BOX_OCI_MANIFEST_MAX);
	struct box_oci_artifact a;
	int r;

	if (p->frozen && !pin) {
		it->skip = 1;
		return 0;
	}
	if (item_source(p, pin, it, err) < 0 || use_source(p, it, err) < 0)
		return -1;
	if (!it->ref[0] && pin)
		snprintf(it->ref, sizeof(it->ref), "%s", pin->digest);
	if (!it->ref[0] && latest(p, it, err) < 0)
		return -1;
	r = box_repo_resolve(&p->repo, it->name, it->ref, it->digest, &man, err);
	if (r == 0)
		r = box_oci_artifact_parse(man.data, man.len, &a, err);
	box_buf_release(&man);
	if (r < 0 || read_config(p, &a, it, err) < 0)
		return -1;
	if (pin && (strcmp(pin->digest, it->digest) || strcmp(pin->version, it->art.version))) {
		if (p->frozen) {
			it->skip = 1;
			return 0;
		}
		return box_err_set(err, BOX_E_CONFLICT, "%s is pinned to %s (%s), not %s (%s)",
				   it->name, pin->version, pin->digest, it->art.version, it->digest);
	}
	r = box_store_has(&p->store, it->digest, err);
	if (r < 0)
		return -1;
	if (r == 1) {
		it->cached = 1;
		read_tree_note(&p->store, it->digest, it->tree);
		return 0;
	}
	p->current = it->name;
	if (p->hooks && p->hooks->progress) {
		p->repo.progress = on_progress;
		p->repo.progress_ctx = p;
	}
	r = stage_layer(&p->repo, &p->store, it->name, &a, it->tmpname, &it->tmpfd, it->tree, err);
	p->repo.progress = NULL;
	it->bytes = a.layer_size;
	return r;
}

/* frozen: every way the pin of it differs from what was found */
static void compare_pin(struct pull *p, const struct box_lock_entry *old, const struct item *it,
			const struct box_lock_entry *e)
{
	if (!old) {
		differ(p, it->name, "name", NULL, it->name);
		return;
	}
	if (it->skip && !it->digest[0])
		return;
	if (strcmp(old->version, e->version))
		differ(p, it->name, "version", old->version, e->version);
	if (strcmp(old->digest, e->digest))
		differ(p, it->name, "digest", old->digest, e->digest);
	if (strcmp(old->kind, e->kind))
		differ(p, it->name, "kind", old->kind, e->kind);
	if (!it->skip && strcmp(old->tree_digest, e->tree_digest))
		differ(p, it->name, "tree_digest", old->tree_digest[0] ? old->tree_digest : NULL,
		       e->tree_digest[0] ? e->tree_digest : NULL);
}

static int pin_all(struct box_lock *lk, void *ctx, struct box_err *err)
{
	struct pull *p = ctx;
	int changed = 0;
	size_t i;

	for (i = 0; i < p->n; i++) {
		struct item *it = &p->items[i];
		struct box_lock_entry e;
		const struct box_lock_entry *old = box_lock_find(lk, it->name);
		int r;

		memset(&e, 0, sizeof(e));
		snprintf(e.name, sizeof(e.name), "%s", it->name);
		snprintf(e.version, sizeof(e.version), "%s", it->art.version);
		snprintf(e.digest, sizeof(e.digest), "%s", it->digest);
		snprintf(e.kind, sizeof(e.kind), "%s", it->art.kind);
		snprintf(e.source, sizeof(e.source), "%s", it->source);
		/* a cached entry keeps the tree digest it was recorded with */
		snprintf(e.tree_digest, sizeof(e.tree_digest), "%s", it->tree);
		if (old && (p->frozen || (it->cached && strcmp(old->digest, it->digest) == 0)))
			snprintf(e.source, sizeof(e.source), "%s", old->source);
		if (p->frozen) {
			compare_pin(p, old, it, &e);
			continue;
		}
		r = box_lock_put(lk, &e, 0, err);
		if (r < 0)
			return -1;
		changed |= r;
	}
	if (p->frozen && cJSON_GetArraySize(p->diffs) > 0) {
		const cJSON *d = p->diffs->child;
		char *locked = cJSON_PrintUnformatted(cJSON_GetObjectItem(d, "locked"));
		char *found = cJSON_PrintUnformatted(cJSON_GetObjectItem(d, "found"));

		box_err_set(err, BOX_E_CONFLICT,
			    "box.lock would change (--frozen): %d difference(s), first %s %s: "
			    "locked %s, found %s", cJSON_GetArraySize(p->diffs),
			    box_json_get_str(d, "name", "?"), box_json_get_str(d, "field", "?"),
			    locked ? locked : "?", found ? found : "?");
		free(locked);
		free(found);
		return -1;
	}
	/* the store entries become visible only now, under the lockfile's lock and after every
	 * conflict check: a refused pull leaves the store as it was */
	for (i = 0; i < p->n; i++) {
		struct item *it = &p->items[i];

		if (it->tmpname[0] && (write_tree_note(&p->store, it->digest, it->tree, err) < 0 ||
				       box_store_commit(&p->store, it->tmpname, it->digest, err) < 0))
			return -1;
		if (it->tmpname[0]) {
			close(it->tmpfd);
			it->tmpfd = -1;
			it->tmpname[0] = 0;
		}
	}
	return 0;
}

static cJSON *result(struct pull *p, const char *lock, int changed)
{
	cJSON *res = cJSON_CreateObject(), *arr, *o;
	char path[4200];
	struct box_err e;
	size_t i;

	if (!res)
		return NULL;
	cJSON_AddTrueToObject(res, "ok");
	arr = cJSON_AddArrayToObject(res, "artifacts");
	for (i = 0; i < p->n; i++) {
		struct item *it = &p->items[i];

		o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "name", it->name);
		cJSON_AddStringToObject(o, "version", it->art.version);
		cJSON_AddStringToObject(o, "digest", it->digest);
		cJSON_AddStringToObject(o, "kind", it->art.kind);
		if (box_store_path(&p->store, it->digest, path, sizeof(path), &e) == 0)
			cJSON_AddStringToObject(o, "path", path);
		box_json_add_int64(o, "bytes", it->bytes);
		cJSON_AddBoolToObject(o, "cached", it->cached);
		cJSON_AddItemToArray(arr, o);
	}
	o = cJSON_AddObjectToObject(res, "lock");
	cJSON_AddStringToObject(o, "path", lock);
	cJSON_AddBoolToObject(o, "changed", changed);
	return res;
}

/* box.json's registry, from the box.json beside the lockfile, when there is one. */
static int manifest_registry(struct pull *p, const char *lock, struct box_err *err)
{
	const char *slash = strrchr(lock, '/');
	char path[4200];
	struct box_manifest m;
	int r;

	if (slash)
		snprintf(path, sizeof(path), "%.*s/box.json", (int)(slash - lock), lock);
	else
		snprintf(path, sizeof(path), "box.json");
	if (access(path, F_OK) < 0 && errno == ENOENT)
		return 0;
	box_manifest_init(&m);
	r = box_manifest_read(AT_FDCWD, path, &m, err);
	if (r == 0)
		snprintf(p->manifest_registry, sizeof(p->manifest_registry), "%s", m.registry);
	box_manifest_release(&m);
	return r;
}

/* The items: the specs asked for, or with none every pin of box.lock. */
static int make_items(struct pull *p, const cJSON *specs, struct box_err *err)
{
	size_t n = specs ? (size_t)cJSON_GetArraySize(specs) : 0, i, j;
	const cJSON *s;

	if (n == 0 && p->snapshot.n == 0) {
		box_err_set(err, BOX_E_INVALID, "nothing to pull: give NAME[@VERSION|@sha256:HEX]... "
			    "or a lockfile that pins artifacts");
		box_err_path(err, "$.artifacts");
		return -1;
	}
	p->items = calloc(n ? n : p->snapshot.n, sizeof(*p->items));
	if (!p->items)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	if (n == 0) {
		for (i = 0; i < p->snapshot.n; i++) {
			struct item *it = &p->items[p->n++];

			it->tmpfd = -1;
			snprintf(it->name, sizeof(it->name), "%s", p->snapshot.entries[i].name);
		}
		return 0;
	}
	cJSON_ArrayForEach(s, specs) {
		struct item *it = &p->items[p->n++];

		it->tmpfd = -1;
		if (parse_spec(s->valuestring, it, err) < 0) {
			char path[64];

			snprintf(path, sizeof(path), "$.artifacts[%zu]", p->n - 1);
			box_err_path(err, path);
			return -1;
		}
	}
	for (i = 0; i < p->n; i++)
		for (j = 0; j < i; j++)
			if (strcmp(p->items[i].name, p->items[j].name) == 0) {
				box_err_set(err, BOX_E_INVALID, "%s is asked for twice", p->items[i].name);
				box_err_path(err, "$.artifacts");
				return -1;
			}
	return 0;
}

cJSON *box_pull(const cJSON *req, const struct box_pull_hooks *hooks, struct box_err *err)
{
	const cJSON *specs = cJSON_GetObjectItemCaseSensitive(req, "artifacts");
	const char *lock = box_json_get_str(req, "lock", "box.lock");
	char home[4096], storedir[4200];
	struct pull p;
	int have_store = 0, changed = 0, slock = -1, r;
	cJSON *res = NULL;
	size_t i;

	memset(&p, 0, sizeof(p));
	p.hooks = hooks;
	p.req = req;
	p.source = p.current_source;
	box_lock_init(&p.snapshot);
	p.frozen = box_json_get_bool(req, "frozen", 0);
	if (!(p.diffs = cJSON_CreateArray()))
		return box_err_set(err, BOX_E_INTERNAL, "out of memory"), NULL;
	if (box_lock_read(AT_FDCWD, lock, &p.snapshot, err) < 0 ||
	    make_items(&p, specs, err) < 0 || manifest_registry(&p, lock, err) < 0)
		goto out;
	if (box_home(home, sizeof(home), err) < 0)
		goto out;
	snprintf(storedir, sizeof(storedir), "%s/store", home);
	if (box_store_open(storedir, &p.store, err) < 0)
		goto out;
	have_store = 1;
	for (i = 0; i < p.n; i++)
		if (prepare(&p, &p.items[i], err) < 0)
			goto out;
	/* shared: a gc (exclusive) never sees an entry committed but not yet pinned */
	if ((slock = box_store_lock(&p.store, 0, err)) < 0)
		goto out;
	r = box_lock_update(AT_FDCWD, lock, pin_all, &p, p.frozen, &changed, err);
	close(slock);
	if (r < 0) {
		if (p.frozen && cJSON_GetArraySize(p.diffs) > 0) {
			res = cJSON_CreateObject();
			cJSON_AddFalseToObject(res, "ok");
			cJSON_AddItemToObject(res, "differences", p.diffs);
			p.diffs = NULL;
			cJSON_AddItemToObject(res, "error", box_err_to_json(err));
		}
		goto out;
	}
	res = result(&p, lock, changed);
	if (!res)
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
out:
	for (i = 0; i < p.n; i++) {
		struct item *it = &p.items[i];
		struct box_err e;

		if (it->tmpname[0])
			box_store_abort(&p.store, it->tmpname, &e);
		if (it->tmpfd >= 0)
			close(it->tmpfd);
	}
	cJSON_Delete(p.diffs);
	free(p.items);
	box_lock_release(&p.snapshot);
	if (have_store)
		box_store_close(&p.store);
	if (p.source[0])
		box_repo_close(&p.repo);
	return res;
}
