#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#include "vm.h"
#include "base64.h"
#include "buf.h"
#include "ipc.h"
#include "json.h"
#include "utf8.h"
#include "banned.h"

/*
 * One VM per process: the child runs exactly one script, so its state is a file-level struct
 * that the allocator, the hook and the SIGPROF handler can reach without a lua_State.
 */
enum trip {
	TRIP_NONE,
	TRIP_MEMORY,
	TRIP_INSTRUCTIONS,
	TRIP_CPU,
	TRIP_HOST,      /* a limit the broker reported (write quota) */
};

#define COUNT_STEP 10000
#define MAX_DEPTH 100
#define GREP_MAX_BYTES (16 << 20)
#define GREP_MAX_MATCHES 1000

static struct {
	const struct box_vm_config *c;
	lua_State *L;
	lua_State *volatile running;  /* the thread now executing: main or a coroutine */
	volatile sig_atomic_t tripped;
	volatile sig_atomic_t cpu_fired;
	int mem_pending;              /* an allocation failed; a retry after GC may still save it */
	const void *fail_ptr;
	size_t fail_size;
	int64_t mem_used;
	int64_t counted;              /* instructions counted in finished steps */
	int step;                     /* instructions in the running step */
	int counting;
	int trip_ref;                 /* registry ref of the sticky error message */
	int ids_ref;                  /* registry ref of the weak table object → its number */
	int object_mt_ref;            /* registry ref of the metatable of json.object() */
	lua_Integer last_id;          /* the number tostring gave last */
	int host_ref;                 /* registry ref of the last host error raised */
	enum box_code host_code;      /* and its code */
	struct box_err tool_err;      /* the last tool error raised, whole (limit, path...) */
	int tool_err_set;             /* 1 when the last host error raised is tool_err */
	struct box_err host_err;      /* the limit behind TRIP_HOST */
	int lossy;
	struct box_buf reply;         /* host call replies, capped at memory_bytes */
	struct box_ipc_in in;
	long long local_calls;        /* calls answered by local_call, not yet told the broker */
} V;

/* Tells the broker how many calls the replay answered here since it last heard (see
 * BOX_OP_REPLAYED). 0, or -1 with err. */
static int tell_local_calls(struct box_err *err)
{
	char num[32];
	struct box_ipc_field f;

	if (V.local_calls == 0)
		return 0;
	f.n = (size_t)snprintf(num, sizeof(num), "%lld", V.local_calls);
	f.p = num;
	V.local_calls = 0;
	return box_ipc_send(V.c->sock, BOX_OP_REPLAYED, &f, 1, -1, err);
}

static char json_null_tag;

/* ------------------------------------------------------------------ limits */

static void hook(lua_State *L, lua_Debug *ar);

static void arm(lua_State *L)
{
	/* while counting, the step hook sees the flags within COUNT_STEP instructions; replacing
	 * its count here would lose the instructions counted in the running step */
	if (!V.counting && L)
		lua_sethook(L, hook, LUA_MASKCOUNT, 1);
}

static void trip(enum trip t)
{
	if (V.tripped == TRIP_NONE)
		V.tripped = t;
	if (V.running)
		lua_sethook(V.running, hook, LUA_MASKCOUNT, 1);
}

static void *vm_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
	size_t old = ptr ? osize : 0;
	void *p;

	(void)ud;
	if (nsize == 0) {
		free(ptr);
		V.mem_used -= (int64_t)old;
		return NULL;
	}
	if (nsize > old && (int64_t)(nsize - old) > V.c->memory_bytes - V.mem_used) {
		/* Lua collects garbage and asks again with the same block and size; only a second
		 * refusal, or an error that escapes, is the limit */
		if (V.mem_pending && V.fail_ptr == ptr && V.fail_size == nsize) {
			trip(TRIP_MEMORY);
		} else {
			V.mem_pending = 1;
			V.fail_ptr = ptr;
			V.fail_size = nsize;
			arm(V.running);
		}
		return NULL;
	}
	p = realloc(ptr, nsize);
	if (!p) {
		trip(TRIP_MEMORY);
		return NULL;
	}
	if (nsize > old)
		V.mem_pending = 0;
	V.mem_used += (int64_t)nsize - (int64_t)old;
	if (V.mem_used > V.c->shm->mem_peak)
		V.c->shm->mem_peak = V.mem_used;
	return p;
}

/* cJSON in the child allocates through this, so that json.decode counts against the limit */
struct jblock {
	size_t size;
	max_align_t pad[];
};

static void *json_malloc(size_t n)
{
	struct jblock *b;

	if ((int64_t)n > V.c->memory_bytes - V.mem_used - (int64_t)sizeof(*b)) {
		trip(TRIP_MEMORY);
		return NULL;
	}
	b = malloc(sizeof(*b) + n);
	if (!b)
		return NULL;
	b->size = n + sizeof(*b);
	V.mem_used += (int64_t)b->size;
	if (V.mem_used > V.c->shm->mem_peak)
		V.c->shm->mem_peak = V.mem_used;
	return b->pad;
}

static void json_free(void *p)
{
	struct jblock *b;

	if (!p)
		return;
	b = (struct jblock *)((char *)p - offsetof(struct jblock, pad));
	V.mem_used -= (int64_t)b->size;
	free(b);
}

static void raise_trip(lua_State *L)
{
	lua_sethook(L, hook, LUA_MASKCOUNT, 1);
	lua_rawgeti(L, LUA_REGISTRYINDEX, V.trip_ref);
	lua_error(L);
}

/* Raises the sticky limit error if a limit has been hit (or is pending); else returns. */
static void check_trips(lua_State *L)
{
	if (V.cpu_fired && V.tripped == TRIP_NONE)
		V.tripped = TRIP_CPU;
	if (V.mem_pending && V.tripped == TRIP_NONE)
		V.tripped = TRIP_MEMORY;
	if (V.tripped != TRIP_NONE) {
		V.counting = 0;
		raise_trip(L);
	}
}

static void hook(lua_State *L, lua_Debug *ar)
{
	(void)ar;
	if (V.counting && V.tripped == TRIP_NONE) {
		V.counted += V.step;
		if (V.counted >= V.c->max_instructions) {
			V.tripped = TRIP_INSTRUCTIONS;
		} else {
			int64_t left = V.c->max_instructions - V.counted;

			V.step = left < COUNT_STEP ? (int)left : COUNT_STEP;
			lua_sethook(L, hook, LUA_MASKCOUNT, V.step);
		}
	}
	check_trips(L);
	if (!V.counting)
		lua_sethook(L, NULL, 0, 0);
}

static void on_sigprof(int sig)
{
	(void)sig;
	V.cpu_fired = 1;
	/* lua_sethook is safe in a signal handler: it only stores the hook and its mask */
	arm(V.running);
}

/* ------------------------------------------------------------------ strings without addresses */

/* Pushes "table: 0x1", "function: 0x2"... (the __name of the metatable when it is a string):
 * objects are numbered in the order they are first shown, so that tostring is an identity
 * within the run that tells nothing of the address space. The numbers live in a weak table. */
static void push_identity(lua_State *L, int idx)
{
	int base = lua_gettop(L);
	const char *kind;
	lua_Integer id;
	char s[128];

	if (luaL_getmetafield(L, idx, "__name") == LUA_TSTRING) {
		kind = lua_tostring(L, -1);
	} else {
		lua_settop(L, base);
		kind = luaL_typename(L, idx);
	}
	if (lua_rawgeti(L, LUA_REGISTRYINDEX, V.ids_ref) != LUA_TTABLE) {
		/* before the environment is built: no number yet */
		lua_settop(L, base);
		lua_pushstring(L, luaL_typename(L, idx));
		return;
	}
	lua_pushvalue(L, idx);
	if (lua_rawget(L, -2) == LUA_TNUMBER) {
		id = lua_tointeger(L, -1);
	} else {
		id = ++V.last_id;
		lua_pushvalue(L, idx);
		lua_pushinteger(L, id);
		lua_rawset(L, -4);
	}
	snprintf(s, sizeof(s), "%.100s: 0x%llx", kind, (unsigned long long)id);
	lua_settop(L, base);
	lua_pushstring(L, s);
}

static const char *safe_tolstring(lua_State *L, int idx, size_t *len)
{
	idx = lua_absindex(L, idx);
	if (luaL_callmeta(L, idx, "__tostring")) {
		if (!lua_isstring(L, -1))
			luaL_error(L, "'__tostring' must return a string");
		return lua_tolstring(L, -1, len);
	}
	switch (lua_type(L, idx)) {
	case LUA_TNUMBER:
	case LUA_TSTRING:
		return luaL_tolstring(L, idx, len);
	case LUA_TBOOLEAN:
		lua_pushstring(L, lua_toboolean(L, idx) ? "true" : "false");
		break;
	case LUA_TNIL:
		lua_pushliteral(L, "nil");
		break;
	case LUA_TLIGHTUSERDATA:
		if (lua_touserdata(L, idx) == &json_null_tag) {
			lua_pushliteral(L, "json.null");
			break;
		}
		/* fall through */
	default:
		push_identity(L, idx);
	}
	return lua_tolstring(L, -1, len);
}

static int l_tostring(lua_State *L)
{
	luaL_checkany(L, 1);
	safe_tolstring(L, 1, NULL);
	return 1;
}

static lua_CFunction str_format;

/* string.format without %p, and with %s of tables and functions through safe_tolstring. The
 * original runs in this very call, not through lua_call, so that its errors name 'format' and
 * the script's line as they do in Lua. */
static int l_format(lua_State *L)
{
	size_t n;
	const char *f = luaL_checklstring(L, 1, &n);
	int arg = 1, top = lua_gettop(L);
	size_t i;

	for (i = 0; i < n; i++) {
		if (f[i] != '%')
			continue;
		if (++i < n && f[i] == '%')
			continue;
		arg++;
		while (i < n && strchr("-+ #0123456789.", f[i]))
			i++;
		if (i >= n)
			break;
		if (f[i] == 'p')
			return luaL_error(L, "invalid conversion '%%p' to 'format' (not available here)");
		if (f[i] == 's' && arg <= top && !lua_isstring(L, arg)) {
			safe_tolstring(L, arg, NULL);
			lua_replace(L, arg);
		}
	}
	return str_format(L);
}

/* ------------------------------------------------------------------ print */

static void out_append(const char *s, size_t n)
{
	struct box_vm_shm *shm = V.c->shm;
	size_t room = shm->out_cap - shm->out_len;
	size_t i;

	shm->output_bytes += (int64_t)n;
	for (i = 0; i < n; i++)
		if (s[i] == '\n')
			shm->total_lines++;
	if (shm->truncated)
		return;
	if (n > room) {
		n = box_utf8_cut(s, room);
		shm->truncated = 1;
	}
	memcpy(shm->out + shm->out_len, s, n);
	shm->out_len += (uint32_t)n;
	if (V.c->events && n) {
		struct box_ipc_field fld = { s, n };
		struct box_err err;

		box_ipc_send(V.c->sock, BOX_OP_PRINT, &fld, 1, -1, &err);
	}
}

static int l_print(lua_State *L)
{
	int n = lua_gettop(L), i;
	size_t len;
	const char *s;
	luaL_Buffer b;

	/* the buffer may live on the stack: every piece is pushed above it and taken with
	 * luaL_addvalue, which is the only way to add a value that sits on top */
	luaL_buffinit(L, &b);
	for (i = 1; i <= n; i++) {
		if (i > 1)
			luaL_addchar(&b, '\t');
		safe_tolstring(L, i, NULL);
		luaL_addvalue(&b);
	}
	luaL_addchar(&b, '\n');
	luaL_pushresult(&b);
	s = lua_tolstring(L, -1, &len);
	out_append(s, len);
	return 0;
}

/* ------------------------------------------------------------------ coroutines */

/* resume that keeps V.running current for the signal handler, and lets no limit stay inside
 * a coroutine: a trip raised in the coroutine is raised again in the resumer */
static int resume(lua_State *L, lua_State *co, int narg)
{
	lua_State *prev = V.running;
	int status, nres;

	if (!lua_checkstack(co, narg))
		return luaL_error(L, "too many arguments to resume");
	if (lua_status(co) == LUA_OK && lua_gettop(co) == 0) {
		lua_pushliteral(L, "cannot resume dead coroutine");
		return -1;
	}
	lua_xmove(L, co, narg);
	V.running = co;
	if (V.tripped != TRIP_NONE || V.cpu_fired)
		lua_sethook(co, hook, LUA_MASKCOUNT, 1);
	status = lua_resume(co, L, narg, &nres);
	V.running = prev;
	check_trips(L);
	if (status == LUA_OK || status == LUA_YIELD) {
		if (!lua_checkstack(L, nres + 1)) {
			lua_pop(co, nres);
			lua_pushliteral(L, "too many results to resume");
			return -1;
		}
		lua_xmove(co, L, nres);
		return nres;
	}
	lua_xmove(co, L, 1);
	return -1;
}

static int l_resume(lua_State *L)
{
	lua_State *co = lua_tothread(L, 1);
	int r;

	luaL_argexpected(L, co, 1, "thread");  /* as lcorolib says it */
	r = resume(L, co, lua_gettop(L) - 1);
	if (r < 0) {
		lua_pushboolean(L, 0);
		lua_insert(L, -2);
		return 2;
	}
	lua_pushboolean(L, 1);
	lua_insert(L, -(r + 1));
	return r + 1;
}

static int wrap_call(lua_State *L)
{
	lua_State *co = lua_tothread(L, lua_upvalueindex(1));
	int r = resume(L, co, lua_gettop(L));

	if (r < 0) {
		int st = lua_status(co);

		if (st != LUA_OK && st != LUA_YIELD) {
#if LUA_VERSION_RELEASE_NUM >= 50406
			lua_closethread(co, L);
#else
			lua_resetthread(co);
#endif
			lua_xmove(co, L, 1);
		}
		if (lua_type(L, -1) == LUA_TSTRING) {
			luaL_where(L, 1);
			lua_insert(L, -2);
			lua_concat(L, 2);
		}
		return lua_error(L);
	}
	return r;
}

static int l_wrap(lua_State *L)
{
	lua_State *co;

	luaL_checktype(L, 1, LUA_TFUNCTION);
	co = lua_newthread(L);
	lua_pushvalue(L, 1);
	lua_xmove(L, co, 1);
	lua_pushcclosure(L, wrap_call, 1);
	return 1;
}

/* ------------------------------------------------------------------ Lua value → JSON text */

struct conv {
	struct box_buf *out;
	const void *stack[MAX_DEPTH];
	int depth;
	char path[256];
	int lossy;
	char msg[256];
	enum box_code code;
};

static int conv_fail(struct conv *cv, enum box_code code, const char *what)
{
	if (!cv->msg[0]) {
		snprintf(cv->msg, sizeof(cv->msg), "%.100s at $%.140s", what, cv->path);
		cv->code = code;
	}
	return -1;
}

static int put(struct conv *cv, const char *s, size_t n)
{
	struct box_err err;

	if (box_buf_append(cv->out, s, n, &err) < 0)
		return conv_fail(cv, BOX_E_LIMIT, "value too large for JSON");
	return 0;
}

static int put_string(struct conv *cv, const char *s, size_t n)
{
	struct box_buf clean = BOX_BUF_INIT(cv->out->max);
	struct box_err err;
	static const char hex[] = "0123456789abcdef";
	size_t i, start = 0;
	int r;

	r = box_utf8_sanitize(s, n, &clean, &err);
	if (r < 0) {
		box_buf_release(&clean);
		return conv_fail(cv, BOX_E_LIMIT, "value too large for JSON");
	}
	if (r > 0)
		cv->lossy = 1;
	s = clean.data ? clean.data : "";
	n = clean.len;
	r = put(cv, "\"", 1);
	for (i = 0; i < n && r == 0; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[8];
		size_t el = 2;

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		r = put(cv, s + start, i - start);
		start = i + 1;
		esc[0] = '\\';
		switch (c) {
		case '"': esc[1] = '"'; break;
		case '\\': esc[1] = '\\'; break;
		case '\n': esc[1] = 'n'; break;
		case '\r': esc[1] = 'r'; break;
		case '\t': esc[1] = 't'; break;
		case '\b': esc[1] = 'b'; break;
		case '\f': esc[1] = 'f'; break;
		default:
			memcpy(esc + 1, "u00", 3);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			el = 6;
		}
		if (r == 0)
			r = put(cv, esc, el);
	}
	if (r == 0)
		r = put(cv, s + start, n - start);
	if (r == 0)
		r = put(cv, "\"", 1);
	box_buf_release(&clean);
	return r;
}

static int put_number(struct conv *cv, lua_State *L, int idx)
{
	char num[64];
	int n;

	if (lua_isinteger(L, idx)) {
		n = snprintf(num, sizeof(num), "%lld", (long long)lua_tointeger(L, idx));
	} else {
		double d = lua_tonumber(L, idx);
		int prec;

		if (!isfinite(d))
			return conv_fail(cv, BOX_E_GUEST, "cannot convert NaN or infinity to JSON");
		for (prec = 15; prec <= 17; prec++) {
			n = snprintf(num, sizeof(num), "%.*g", prec, d);
			if (strtod(num, NULL) == d)
				break;
		}
		/* keep it a float when read back */
		if (!strpbrk(num, ".eE") && n + 2 < (int)sizeof(num)) {
			memcpy(num + n, ".0", 3);
			n += 2;
		}
	}
	return put(cv, num, (size_t)n);
}

static int to_json(struct conv *cv, lua_State *L, int idx, int top);

/* Appends to the path of the value being converted; returns the length to restore. */
__attribute__((format(printf, 2, 3)))
static size_t path_push(struct conv *cv, const char *fmt, ...)
{
	size_t old = strlen(cv->path);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cv->path + old, sizeof(cv->path) - old, fmt, ap);
	va_end(ap);
	return old;
}

static int cmp_keys(const void *a, const void *b)
{
	const struct { const char *s; size_t n; int idx; } *x = a, *y = b;
	size_t m = x->n < y->n ? x->n : y->n;
	int c = memcmp(x->s, y->s, m);

	return c ? c : (x->n > y->n) - (x->n < y->n);
}

enum json_kind { KIND_ANY, KIND_OBJECT, KIND_ARRAY };

/* What the __jsontype field of the table's metatable asks for ("object" or "array", as
 * json.object and json.array set it, and as dkjson reads it). Raw reads only: no code of the
 * script runs. */
static enum json_kind json_kind(lua_State *L, int idx)
{
	enum json_kind k = KIND_ANY;

	if (luaL_getmetafield(L, idx, "__jsontype") == LUA_TNIL)
		return k;
	if (lua_type(L, -1) == LUA_TSTRING) {
		const char *s = lua_tostring(L, -1);

		if (strcmp(s, "object") == 0)
			k = KIND_OBJECT;
		else if (strcmp(s, "array") == 0)
			k = KIND_ARRAY;
	}
	lua_pop(L, 1);
	return k;
}

/* Long because it works on the Lua stack: the array test, the keys, their copies and
 * their sort live in stack slots that a split would have to hand over by index. */
static int table_to_json(struct conv *cv, lua_State *L, int idx)
{
	lua_Integer count = 0, maxi = 0;
	enum json_kind kind;
	int is_array = 1, i, r = 0;
	struct key { const char *s; size_t n; int idx; } *keys = NULL;
	int base;

	for (i = 0; i < cv->depth; i++)
		if (cv->stack[i] == lua_topointer(L, idx))
			return conv_fail(cv, BOX_E_GUEST, "cycle in the value");
	if (cv->depth >= MAX_DEPTH)
		return conv_fail(cv, BOX_E_GUEST, "value nested too deeply");
	if (!lua_checkstack(L, 8))
		return conv_fail(cv, BOX_E_LIMIT, "value nested too deeply");
	cv->stack[cv->depth++] = lua_topointer(L, idx);
	kind = json_kind(L, idx);

	/* raw traversal: no __pairs, no __index */
	lua_pushnil(L);
	while (lua_next(L, idx)) {
		lua_pop(L, 1);
		count++;
		if (lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1) {
			if (lua_tointeger(L, -1) > maxi)
				maxi = lua_tointeger(L, -1);
		} else {
			is_array = 0;
		}
		if ((size_t)count * 8 > cv->out->max) {
			lua_pop(L, 1);
			cv->depth--;
			return conv_fail(cv, BOX_E_LIMIT, "value too large for JSON");
		}
	}
	if (kind == KIND_ARRAY && !(is_array && maxi == count)) {
		cv->depth--;
		return conv_fail(cv, BOX_E_GUEST, "table marked as an array is not a sequence 1..n");
	}
	if (kind != KIND_OBJECT && (count == 0 || (is_array && maxi == count))) {
		size_t old;

		r = put(cv, "[", 1);
		for (lua_Integer k = 1; k <= count && r == 0; k++) {
			if (k > 1)
				r = put(cv, ",", 1);
			lua_rawgeti(L, idx, k);
			old = path_push(cv, "[%lld]", (long long)(k - 1));
			if (r == 0)
				r = to_json(cv, L, lua_gettop(L), 0);
			cv->path[old] = 0;
			lua_pop(L, 1);
		}
		if (r == 0)
			r = put(cv, "]", 1);
		cv->depth--;
		return r;
	}
	/* an object, its keys sorted so that the same table always prints the same */
	keys = calloc((size_t)count, sizeof(*keys));
	if (!keys) {
		cv->depth--;
		return conv_fail(cv, BOX_E_LIMIT, "out of memory");
	}
	base = lua_gettop(L);
	i = 0;
	lua_pushnil(L);
	while (lua_next(L, idx) && i < count) {
		lua_pop(L, 1);
		if (lua_type(L, -1) == LUA_TSTRING) {
			lua_pushvalue(L, -1);
		} else if (lua_isinteger(L, -1)) {
			lua_pushfstring(L, "%I", (LUAI_UACINT)lua_tointeger(L, -1));
		} else {
			lua_settop(L, base);
			free(keys);
			cv->depth--;
			return conv_fail(cv, BOX_E_GUEST, "table key is not a string or an integer");
		}
		/* [key name] → [name key' key]: the name and a copy of the key stay on the stack
		 * (keys[] points into the names), the key itself goes back to lua_next */
		lua_pushvalue(L, -2);
		lua_rotate(L, -3, -1);
		keys[i].s = lua_tolstring(L, -3, &keys[i].n);
		keys[i].idx = lua_gettop(L) - 2;
		i++;
		if (!lua_checkstack(L, 4)) {
			lua_settop(L, base);
			free(keys);
			cv->depth--;
			return conv_fail(cv, BOX_E_LIMIT, "table too large for JSON");
		}
	}
	/* the stack now holds: name1 key1 name2 key2 ... */
	qsort(keys, (size_t)i, sizeof(*keys), cmp_keys);
	r = put(cv, "{", 1);
	for (int k = 0; k < i && r == 0; k++) {
		char kname[64];
		size_t old;

		if (k > 0)
			r = put(cv, ",", 1);
		if (r == 0)
			r = put_string(cv, keys[k].s, keys[k].n);
		if (r == 0)
			r = put(cv, ":", 1);
		snprintf(kname, sizeof(kname), "%.*s", (int)(keys[k].n < 40 ? keys[k].n : 40), keys[k].s);
		old = path_push(cv, ".%s", kname);
		lua_pushvalue(L, keys[k].idx + 1);
		lua_rawget(L, idx);
		if (r == 0)
			r = to_json(cv, L, lua_gettop(L), 0);
		lua_pop(L, 1);
		cv->path[old] = 0;
	}
	if (r == 0)
		r = put(cv, "}", 1);
	lua_settop(L, base);
	free(keys);
	cv->depth--;
	return r;
}

static int to_json(struct conv *cv, lua_State *L, int idx, int top)
{
	size_t n;
	const char *s;

	(void)top;
	switch (lua_type(L, idx)) {
	case LUA_TNIL:
		return put(cv, "null", 4);
	case LUA_TBOOLEAN:
		return lua_toboolean(L, idx) ? put(cv, "true", 4) : put(cv, "false", 5);
	case LUA_TNUMBER:
		return put_number(cv, L, idx);
	case LUA_TSTRING:
		s = lua_tolstring(L, idx, &n);
		return put_string(cv, s, n);
	case LUA_TTABLE:
		return table_to_json(cv, L, idx);
	case LUA_TLIGHTUSERDATA:
		if (lua_touserdata(L, idx) == &json_null_tag)
			return put(cv, "null", 4);
		/* fall through */
	default:
		{
			char what[64];

			snprintf(what, sizeof(what), "cannot convert a %s to JSON", luaL_typename(L, idx));
			return conv_fail(cv, BOX_E_GUEST, what);
		}
	}
}

static int l_json_encode(lua_State *L)
{
	struct box_buf out = BOX_BUF_INIT((size_t)V.c->memory_bytes);
	struct conv cv = { .out = &out, .path = "" };

	luaL_checkany(L, 1);
	lua_settop(L, 1);
	if (to_json(&cv, L, 1, 1) < 0) {
		box_buf_release(&out);
		return luaL_error(L, "json.encode: %s", cv.msg);
	}
	lua_pushlstring(L, out.data ? out.data : "", out.len);
	box_buf_release(&out);
	return 1;
}

/* ------------------------------------------------------------------ JSON → Lua */

static void push_json(lua_State *L, const cJSON *v, int depth)
{
	const cJSON *it;
	int64_t iv;

	if (depth > BOX_JSON_MAX_DEPTH + 1 || !lua_checkstack(L, 4))
		luaL_error(L, "JSON nested too deeply");
	if (cJSON_IsNull(v)) {
		lua_pushlightuserdata(L, &json_null_tag);
	} else if (cJSON_IsBool(v)) {
		lua_pushboolean(L, cJSON_IsTrue(v));
	} else if (cJSON_IsNumber(v)) {
		if (box_json_is_int_literal(v) && box_json_int64(v, &iv))
			lua_pushinteger(L, (lua_Integer)iv);
		else
			lua_pushnumber(L, v->valuedouble);
	} else if (cJSON_IsString(v)) {
		lua_pushstring(L, v->valuestring);
	} else if (cJSON_IsArray(v)) {
		lua_Integer i = 1;

		lua_createtable(L, cJSON_GetArraySize(v), 0);
		cJSON_ArrayForEach(it, v) {
			push_json(L, it, depth + 1);
			lua_rawseti(L, -2, i++);
		}
	} else if (cJSON_IsObject(v)) {
		lua_createtable(L, 0, cJSON_GetArraySize(v));
		/* marked, so that {} goes back out as {} */
		lua_rawgeti(L, LUA_REGISTRYINDEX, V.object_mt_ref);
		lua_setmetatable(L, -2);
		cJSON_ArrayForEach(it, v) {
			lua_pushstring(L, it->string);
			push_json(L, it, depth + 1);
			lua_rawset(L, -3);
		}
	} else {
		lua_pushnil(L);
	}
}

/* json.object([t]) and json.array([t]): t (or a new table) with the metatable that says
 * which JSON it becomes; upvalue 1 is that metatable. */
static int l_json_mark(lua_State *L)
{
	if (lua_isnoneornil(L, 1)) {
		lua_settop(L, 0);
		lua_newtable(L);
	} else {
		luaL_checktype(L, 1, LUA_TTABLE);
		lua_settop(L, 1);
	}
	lua_pushvalue(L, lua_upvalueindex(1));
	lua_setmetatable(L, 1);
	return 1;
}

/* the tree is freed by a __gc-free userdata box, so that a Lua error in push_json leaks nothing */
static int tree_gc(lua_State *L)
{
	cJSON **t = lua_touserdata(L, 1);

	cJSON_Delete(*t);
	*t = NULL;
	return 0;
}

static void push_tree_box(lua_State *L, cJSON *tree)
{
	cJSON **t = lua_newuserdatauv(L, sizeof(*t), 0);

	*t = tree;
	if (luaL_newmetatable(L, "box.jsontree")) {
		lua_pushcfunction(L, tree_gc);
		lua_setfield(L, -2, "__close");
	}
	lua_setmetatable(L, -2);
	lua_toclose(L, -1);
}

static int l_json_decode(lua_State *L)
{
	size_t n;
	const char *s = luaL_checklstring(L, 1, &n);
	struct box_err err;
	cJSON *tree;

	if (!box_utf8_valid(s, n))
		return luaL_error(L, "json.decode: input is not valid UTF-8");
	tree = box_json_parse(s, n, &err);
	if (!tree)
		return luaL_error(L, "json.decode: %s", err.message);
	push_tree_box(L, tree);
	push_json(L, tree, 0);
	return 1;
}

/* ------------------------------------------------------------------ base64 */

static int l_b64_encode(lua_State *L)
{
	size_t n;
	const char *s = luaL_checklstring(L, 1, &n);
	struct box_buf out = BOX_BUF_INIT((size_t)V.c->memory_bytes);
	struct box_err err;

	if (box_base64_encode(s, n, &out, &err) < 0) {
		box_buf_release(&out);
		return luaL_error(L, "base64.encode: %s", err.message);
	}
	lua_pushlstring(L, out.data ? out.data : "", out.len);
	box_buf_release(&out);
	return 1;
}

static int l_b64_decode(lua_State *L)
{
	size_t n;
	const char *s = luaL_checklstring(L, 1, &n);
	struct box_buf out = BOX_BUF_INIT((size_t)V.c->memory_bytes);
	struct box_err err;

	if (box_base64_decode(s, n, &out, &err) < 0) {
		box_buf_release(&out);
		return luaL_error(L, "base64.decode: %s", err.message);
	}
	lua_pushlstring(L, out.data ? out.data : "", out.len);
	box_buf_release(&out);
	return 1;
}

/* ------------------------------------------------------------------ host calls */

/* Raises a host error as "code: message"; if the script lets it end the run, the run's error
 * keeps that code (policy_denied stays policy_denied, not guest_error). */
static int host_raise(lua_State *L, const struct box_err *err)
{
	luaL_where(L, 1);
	lua_pushfstring(L, "%s: %s", box_err_code_name(err->code), err->message);
	lua_concat(L, 2);
	lua_pushvalue(L, -1);
	lua_rawseti(L, LUA_REGISTRYINDEX, V.host_ref);
	V.host_code = err->code;
	V.tool_err_set = 0;
	return lua_error(L);
}

/* A tool's error is the tool's, not the script's: it is raised like any host error (pcall
 * catches it, even a limit of the tool), and if it ends the run the run reports it whole. */
static int tool_raise(lua_State *L, const struct box_err *err)
{
	luaL_where(L, 1);
	lua_pushfstring(L, "%s: %s", box_err_code_name(err->code), err->message);
	lua_concat(L, 2);
	lua_pushvalue(L, -1);
	lua_rawseti(L, LUA_REGISTRYINDEX, V.host_ref);
	V.host_code = err->code;
	V.tool_err = *err;
	V.tool_err_set = 1;
	return lua_error(L);
}

/* Sends a host call and waits for its answer; raises the error the broker reports. On return
 * V.reply holds the answer's payload (fields). */
static int host_call_ex(lua_State *L, uint8_t op, const struct box_ipc_field *f, int n,
			struct box_ipc_field *res, int maxres, int tool)
{
	struct box_err err;
	uint8_t rop;
	int r, count = -1;

	if (V.c->local_call)
		count = V.c->local_call(V.c->local_ctx, op, f, n, &rop, res, maxres);
	if (count >= 0) {
		V.local_calls++;
	} else {
		if (tell_local_calls(&err) < 0 || box_ipc_send(V.c->sock, op, f, n, -1, &err) < 0 ||
		    box_ipc_recv(V.c->sock, &V.in, &rop, &V.reply, -1, &err) <= 0)
			return luaL_error(L, "host call failed: %s", err.message);
		if (V.c->remote_done)
			V.c->remote_done(V.c->local_ctx);
		count = box_ipc_split(V.reply.data ? V.reply.data : "", V.reply.len, res, maxres);
	}
	if (count < 0)
		return luaL_error(L, "host call failed: malformed answer");
	if (rop == BOX_OP_OK)
		return count;
	if (rop != BOX_OP_ERR || count < 1)
		return luaL_error(L, "host call failed: malformed answer");
	{
		cJSON *eo = cJSON_ParseWithLength(res[0].p, res[0].n);

		box_err_init(&err);
		r = eo ? box_err_from_json(&err, eo) : -1;
		cJSON_Delete(eo);
		if (r < 0)
			return luaL_error(L, "host call failed: malformed error");
	}
	if (tool)
		return tool_raise(L, &err);
	if (err.code == BOX_E_LIMIT) {
		/* a limit the broker enforces is as final as one the VM enforces */
		V.host_err = err;
		lua_pushfstring(L, "limit_exceeded: %s", err.message);
		lua_rawseti(L, LUA_REGISTRYINDEX, V.trip_ref);
		trip(TRIP_HOST);
		raise_trip(L);
	}
	return host_raise(L, &err);
}

static int host_call(lua_State *L, uint8_t op, const struct box_ipc_field *f, int n,
		     struct box_ipc_field *res, int maxres)
{
	return host_call_ex(L, op, f, n, res, maxres, 0);
}

static const char *check_path(lua_State *L, int idx, size_t *n)
{
	const char *p = luaL_checklstring(L, idx, n);

	if (memchr(p, 0, *n))
		luaL_argerror(L, idx, "path contains a NUL byte");
	return p;
}

static int fs_simple(lua_State *L, uint8_t op, int with_data)
{
	struct box_ipc_field f[2], res[2];
	int n = 1;

	f[0].p = check_path(L, 1, &f[0].n);
	if (with_data) {
		f[1].p = luaL_checklstring(L, 2, &f[1].n);
		n = 2;
	}
	return host_call(L, op, f, n, res, 2);
}

static int l_fs_read(lua_State *L)
{
	struct box_ipc_field f, res[1];
	int n;

	f.p = check_path(L, 1, &f.n);
	n = host_call(L, BOX_OP_FS_READ, &f, 1, res, 1);
	if (n < 1)
		return luaL_error(L, "host call failed: malformed answer");
	lua_pushlstring(L, res[0].p, res[0].n);
	return 1;
}

static int l_fs_write(lua_State *L)
{
	fs_simple(L, BOX_OP_FS_WRITE, 1);
	lua_pushboolean(L, 1);
	return 1;
}

static int l_fs_append(lua_State *L)
{
	fs_simple(L, BOX_OP_FS_APPEND, 1);
	lua_pushboolean(L, 1);
	return 1;
}

static int l_fs_mkdir(lua_State *L)
{
	fs_simple(L, BOX_OP_FS_MKDIR, 0);
	lua_pushboolean(L, 1);
	return 1;
}

static int flag_answer(lua_State *L, const struct box_ipc_field *res, int n)
{
	if (n < 1 || res[0].n != 1)
		return luaL_error(L, "host call failed: malformed answer");
	lua_pushboolean(L, ((const char *)res[0].p)[0] == '1');
	return 1;
}

static int l_fs_exists(lua_State *L)
{
	struct box_ipc_field f, res[1];

	f.p = check_path(L, 1, &f.n);
	return flag_answer(L, res, host_call(L, BOX_OP_FS_EXISTS, &f, 1, res, 1));
}

static int l_fs_remove(lua_State *L)
{
	struct box_ipc_field f[2], res[1];

	f[0].p = check_path(L, 1, &f[0].n);
	f[1].p = lua_toboolean(L, 2) ? "1" : "0";
	f[1].n = 1;
	return flag_answer(L, res, host_call(L, BOX_OP_FS_REMOVE, f, 2, res, 1));
}

static int json_answer(lua_State *L, uint8_t op, int optional_path)
{
	struct box_ipc_field f, res[1];
	struct box_err err;
	cJSON *tree;
	int n;

	if (optional_path && lua_isnoneornil(L, 1)) {
		f.p = "/";
		f.n = 1;
	} else {
		f.p = check_path(L, 1, &f.n);
	}
	n = host_call(L, op, &f, 1, res, 1);
	if (n == 0) {
		lua_pushnil(L);
		return 1;
	}
	tree = box_json_parse(res[0].p, res[0].n, &err);
	if (!tree)
		return luaL_error(L, "host call failed: %s", err.message);
	push_tree_box(L, tree);
	push_json(L, tree, 0);
	return 1;
}

static int l_fs_stat(lua_State *L)
{
	return json_answer(L, BOX_OP_FS_STAT, 0);
}

static int l_fs_list(lua_State *L)
{
	return json_answer(L, BOX_OP_FS_LIST, 1);
}

static int l_fs_walk(lua_State *L)
{
	return json_answer(L, BOX_OP_FS_WALK, 1);
}

/* fs.grep runs in Lua, so that its pattern matching is under every limit of the script */
static const char grep_src[] =
	"local walk, read, find, sub, maxbytes, maxmatches = ...\n"
	"return function(pattern, path)\n"
	"  if type(pattern) ~= 'string' then error(\"bad argument #1 to 'grep' (string expected)\", 2) end\n"
	"  local hits, scanned = {}, 0\n"
	"  for _, file in ipairs(walk(path)) do\n"
	"    local data = read(file)\n"
	"    scanned = scanned + #data\n"
	"    if scanned > maxbytes then return hits, true end\n"
	"    if not find(data, '\\0', 1, true) then\n"
	"      local pos, line = 1, 1\n"
	"      while pos <= #data do\n"
	"        local nl = find(data, '\\n', pos, true) or #data + 1\n"
	"        local text = sub(data, pos, nl - 1)\n"
	"        if find(text, pattern) then\n"
	"          hits[#hits + 1] = { path = file, line_number = line, line = text }\n"
	"          if #hits >= maxmatches then return hits, true end\n"
	"        end\n"
	"        pos, line = nl + 1, line + 1\n"
	"      end\n"
	"    end\n"
	"  end\n"
	"  return hits, false\n"
	"end\n";

static void install_grep(lua_State *L)
{
	/* fs table on top */
	if (luaL_loadbufferx(L, grep_src, sizeof(grep_src) - 1, "=fs.grep", "t") != LUA_OK)
		lua_error(L);
	lua_pushcfunction(L, l_fs_walk);
	lua_pushcfunction(L, l_fs_read);
	lua_getglobal(L, "string");
	lua_getfield(L, -1, "find");
	lua_getfield(L, -2, "sub");
	lua_remove(L, -3);
	lua_pushinteger(L, GREP_MAX_BYTES);
	lua_pushinteger(L, GREP_MAX_MATCHES);
	lua_call(L, 6, 1);
	lua_setfield(L, -2, "grep");
}

/* http.get(url[, opts]) and http.post(url, body[, opts]) → {status, body, headers} */
static int http_call(lua_State *L, const char *method, int url_idx, int body_idx, int opts_idx)
{
	struct box_buf req = BOX_BUF_INIT((size_t)V.c->memory_bytes);
	struct conv cv = { .out = &req };
	struct box_ipc_field f, res[1];
	struct box_err err;
	cJSON *tree;
	const cJSON *ok, *body, *e;
	int n;

	luaL_checkstring(L, url_idx);
	if (!lua_isnoneornil(L, opts_idx))
		luaL_checktype(L, opts_idx, LUA_TTABLE);
	lua_createtable(L, 0, 5);
	lua_pushstring(L, method);
	lua_setfield(L, -2, "method");
	lua_pushvalue(L, url_idx);
	lua_setfield(L, -2, "url");
	if (body_idx) {
		size_t bl;
		const char *b = luaL_checklstring(L, body_idx, &bl);
		struct box_buf enc = BOX_BUF_INIT((size_t)V.c->memory_bytes);

		if (box_base64_encode(b, bl, &enc, &err) < 0) {
			box_buf_release(&enc);
			return luaL_error(L, "http: %s", err.message);
		}
		lua_pushlstring(L, enc.data ? enc.data : "", enc.len);
		box_buf_release(&enc);
		lua_setfield(L, -2, "body_base64");
	}
	if (!lua_isnoneornil(L, opts_idx)) {
		if (lua_getfield(L, opts_idx, "headers") != LUA_TNIL)
			luaL_checktype(L, -1, LUA_TTABLE);
		lua_setfield(L, -2, "headers");
		if (lua_getfield(L, opts_idx, "timeout_ms") != LUA_TNIL)
			luaL_checkinteger(L, -1);
		lua_setfield(L, -2, "timeout_ms");
	}
	if (to_json(&cv, L, lua_gettop(L), 1) < 0) {
		box_buf_release(&req);
		return luaL_error(L, "http: %s", cv.msg);
	}
	/* a Lua string, not the buffer, goes out: the call raises on an http error, and the
	 * buffer would leak, outside the memory limit, once per failed request */
	lua_pushlstring(L, req.data ? req.data : "", req.len);
	box_buf_release(&req);
	f.p = lua_tolstring(L, -1, &f.n);
	n = host_call(L, BOX_OP_HTTP, &f, 1, res, 1);
	if (n < 1)
		return luaL_error(L, "http: malformed answer");
	tree = box_json_parse(res[0].p, res[0].n, &err);
	if (!tree)
		return luaL_error(L, "http: malformed answer: %s", err.message);
	push_tree_box(L, tree);
	ok = cJSON_GetObjectItemCaseSensitive(tree, "ok");
	if (!cJSON_IsTrue(ok)) {
		e = cJSON_GetObjectItemCaseSensitive(tree, "error");
		box_err_init(&err);
		if (!e || box_err_from_json(&err, e) < 0)
			return luaL_error(L, "http: malformed answer");
		return host_raise(L, &err);
	}
	lua_createtable(L, 0, 4);
	lua_pushinteger(L, (lua_Integer)box_json_get_int(tree, "status", 0));
	lua_setfield(L, -2, "status");
	body = cJSON_GetObjectItemCaseSensitive(tree, "body_base64");
	{
		struct box_buf dec = BOX_BUF_INIT((size_t)V.c->memory_bytes);
		const char *b64 = cJSON_IsString(body) ? body->valuestring : "";

		if (box_base64_decode(b64, strlen(b64), &dec, &err) < 0) {
			box_buf_release(&dec);
			return luaL_error(L, "http: malformed body: %s", err.message);
		}
		lua_pushlstring(L, dec.data ? dec.data : "", dec.len);
		box_buf_release(&dec);
	}
	lua_setfield(L, -2, "body");
	e = cJSON_GetObjectItemCaseSensitive(tree, "headers");
	if (cJSON_IsObject(e))
		push_json(L, e, 1);
	else
		lua_newtable(L);
	lua_setfield(L, -2, "headers");
	e = cJSON_GetObjectItemCaseSensitive(tree, "url");
	if (cJSON_IsString(e)) {
		lua_pushstring(L, e->valuestring);
		lua_setfield(L, -2, "url");
	}
	return 1;
}

static int l_http_get(lua_State *L)
{
	return http_call(L, "GET", 1, 0, 2);
}

static int l_http_post(lua_State *L)
{
	return http_call(L, "POST", 1, 2, 3);
}

/* ------------------------------------------------------------------ tools */

/* require(name): a Lua library the operator's box.lock pins, its source from the broker (the
 * VM cannot open a file), loaded as text in the script's environment, once per run. upvalue 1
 * is the table of the libraries loaded (name → the value the library returned, or the
 * "loading" marker while it runs: meeting that marker is a cycle). */
static char require_loading;

static int l_require(lua_State *L)
{
	struct box_ipc_field f, res[2];
	size_t n;
	const char *name = luaL_checklstring(L, 1, &n);

	lua_settop(L, 1);
	lua_pushvalue(L, 1);
	if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) {
		if (lua_touserdata(L, -1) == &require_loading)
			return luaL_error(L, "require %s: a require cycle (%s is still loading)",
					  name, name);
		return 1;
	}
	lua_pop(L, 1);
	f.p = name;
	f.n = n;
	if (host_call(L, BOX_OP_REQUIRE, &f, 1, res, 2) < 2)
		return luaL_error(L, "host call failed: malformed answer");
	lua_pushliteral(L, "=");
	lua_pushlstring(L, res[1].p, res[1].n);
	lua_concat(L, 2);
	/* text only: a binary chunk is refused, as in the script itself */
	if (luaL_loadbufferx(L, res[0].p, res[0].n, lua_tostring(L, 2), "t") != LUA_OK)
		return luaL_error(L, "require %s: %s", name, lua_tostring(L, -1));
	lua_pushvalue(L, 1);
	lua_pushlightuserdata(L, &require_loading);
	lua_rawset(L, lua_upvalueindex(1));
	lua_pushvalue(L, 1);
	if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
		/* the library's own error, unchanged; a later require tries it again */
		lua_pushvalue(L, 1);
		lua_pushnil(L);
		lua_rawset(L, lua_upvalueindex(1));
		return lua_error(L);
	}
	if (lua_isnil(L, -1)) {
		lua_pop(L, 1);
		lua_pushboolean(L, 1);
	}
	lua_pushvalue(L, 1);
	lua_pushvalue(L, -2);
	lua_rawset(L, lua_upvalueindex(1));
	return 1;
}

/* tools.NAME([input]): the input table goes to the broker as a JSON object (nil and an empty
 * table as {}), the tool's answer comes back as Lua values; upvalue 1 is NAME. */
static int l_tool_call(lua_State *L)
{
	struct box_buf in = BOX_BUF_INIT((size_t)V.c->memory_bytes);
	struct conv cv = { .out = &in };
	struct box_ipc_field f[2], res[1];
	struct box_err err;
	cJSON *tree;
	int n, empty;

	lua_settop(L, 1);
	f[0].p = lua_tolstring(L, lua_upvalueindex(1), &f[0].n);
	empty = lua_isnil(L, 1);
	if (lua_istable(L, 1)) {
		lua_pushnil(L);
		empty = !lua_next(L, 1);
		lua_settop(L, 1);
	}
	if (empty ? put(&cv, "{}", 2) < 0 : to_json(&cv, L, 1, 1) < 0) {
		box_buf_release(&in);
		return luaL_error(L, "tools.%s: input: %s", (const char *)f[0].p, cv.msg);
	}
	if (cv.lossy)
		V.lossy = 1;
	/* the input becomes a Lua string before the call, which raises on a tool error: the
	 * buffer would leak, outside the memory limit, once per failed call */
	lua_pushlstring(L, in.data ? in.data : "", in.len);
	box_buf_release(&in);
	f[1].p = lua_tolstring(L, -1, &f[1].n);
	n = host_call_ex(L, BOX_OP_TOOL, f, 2, res, 1, 1);
	if (n < 1)
		return luaL_error(L, "host call failed: malformed answer");
	tree = box_json_parse(res[0].p, res[0].n, &err);
	if (!tree)
		return luaL_error(L, "host call failed: malformed answer: %s", err.message);
	push_tree_box(L, tree);
	push_json(L, tree, 0);
	return 1;
}

/* __index of the tools table: a declared tool that code mode does not offer is absent from
 * the table, and naming it says why; any other missing name is nil. upvalue 1 maps the names
 * of the refused tools to the reason. */
static int l_tools_index(lua_State *L)
{
	struct box_err err;

	lua_settop(L, 2);
	if (lua_type(L, 2) != LUA_TSTRING)
		return 0;
	lua_pushvalue(L, 2);
	if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TSTRING)
		return 0;
	box_err_init(&err);
	box_err_set(&err, BOX_E_POLICY, "tool %.64s is not offered in code mode: %.64s",
		    lua_tostring(L, 2), lua_tostring(L, -1));
	return host_raise(L, &err);
}

static void install_tools(lua_State *L)
{
	size_t i;

	lua_createtable(L, 0, (int)V.c->ntools);
	lua_createtable(L, 0, 2);              /* its metatable */
	lua_createtable(L, 0, 0);              /* refused name → reason */
	for (i = 0; i < V.c->ntools; i++) {
		const struct box_vm_tool *t = &V.c->tools[i];

		if (t->refused) {
			lua_pushstring(L, t->refused);
			lua_setfield(L, -2, t->name);
			continue;
		}
		lua_pushstring(L, t->name);
		lua_pushcclosure(L, l_tool_call, 1);
		lua_setfield(L, -4, t->name);
	}
	lua_pushcclosure(L, l_tools_index, 1);
	lua_setfield(L, -2, "__index");
	lua_pushboolean(L, 0);
	lua_setfield(L, -2, "__metatable");
	lua_setmetatable(L, -2);
}

/* ------------------------------------------------------------------ the environment */

/* A clock reading of a recorded or replayed run: the VM's own reading goes to the broker,
 * which records it (and answers it back) or answers the recorded one in its place. */
static lua_Number clock_reading(lua_State *L, const char *kind, lua_Number mine)
{
	struct box_ipc_field f[2], res;
	char num[64];
	char *end;
	double v;

	snprintf(num, sizeof(num), "%.17g", (double)mine);
	f[0].p = kind;
	f[0].n = strlen(kind);
	f[1].p = num;
	f[1].n = strlen(num);
	if (host_call(L, BOX_OP_CLOCK, f, 2, &res, 1) != 1 || res.n == 0 || res.n >= sizeof(num))
		luaL_error(L, "host call failed: malformed clock answer");
	memcpy(num, res.p, res.n);
	num[res.n] = 0;
	errno = 0;
	v = strtod(num, &end);
	if (*end || errno)
		luaL_error(L, "host call failed: malformed clock answer");
	return (lua_Number)v;
}

/* os.time(): the reading is the broker's; os.time(table) reads no clock */
static int l_os_time(lua_State *L)
{
	if (!lua_isnoneornil(L, 1)) {
		lua_pushvalue(L, lua_upvalueindex(1));
		lua_insert(L, 1);
		lua_call(L, lua_gettop(L) - 1, 1);
		return 1;
	}
	lua_pushinteger(L, (lua_Integer)clock_reading(L, "time", (lua_Number)time(NULL)));
	return 1;
}

static int l_os_clock(lua_State *L)
{
	lua_pushnumber(L, clock_reading(L, "clock", (lua_Number)clock() / CLOCKS_PER_SEC));
	return 1;
}

/* os.date(fmt) reads the clock as os.time() does; os.date(fmt, t) does not */
static int l_os_date(lua_State *L)
{
	if (lua_isnoneornil(L, 2)) {
		lua_Integer t = (lua_Integer)clock_reading(L, "time", (lua_Number)time(NULL));

		if (lua_isnone(L, 1))
			lua_pushliteral(L, "%c");
		lua_settop(L, 1);
		lua_pushinteger(L, t);
	}
	lua_pushvalue(L, lua_upvalueindex(1));
	lua_insert(L, 1);
	lua_call(L, lua_gettop(L) - 1, 1);
	return 1;
}

static void set_funcs(lua_State *L, const luaL_Reg *r)
{
	for (; r->name; r++) {
		lua_pushcfunction(L, r->func);
		lua_setfield(L, -2, r->name);
	}
}

/* Long because it is the whole of what a script sees: read as one, it shows every
 * function taken away and every one put in its place. */
static void build_env(lua_State *L)
{
	static const char *const drop[] = {
		"dofile", "loadfile", "load", "loadstring", "require", "collectgarbage", "warn",
		"io", "package", "debug", "module", "setfenv", "getfenv", "unpack", NULL
	};
	static const char *const os_keep[] = { "time", "date", "clock", "difftime", NULL };
	static const char *const added[] = { "json", "base64", "fs", "http", "tools", NULL };
	int i;

	luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
	luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
	luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
	luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
	luaL_requiref(L, LUA_UTF8LIBNAME, luaopen_utf8, 1);
	luaL_requiref(L, LUA_COLIBNAME, luaopen_coroutine, 1);
	luaL_requiref(L, LUA_OSLIBNAME, luaopen_os, 1);
	lua_settop(L, 0);
	/* a run is repeatable: math.random starts from the seed the broker chose and reports */
	lua_getglobal(L, LUA_MATHLIBNAME);
	lua_getfield(L, -1, "randomseed");
	lua_pushinteger(L, (lua_Integer)V.c->seed);
	lua_call(L, 1, 0);
	lua_settop(L, 0);

	lua_newtable(L);
	lua_createtable(L, 0, 1);
	lua_pushliteral(L, "k");
	lua_setfield(L, -2, "__mode");
	lua_setmetatable(L, -2);
	V.ids_ref = luaL_ref(L, LUA_REGISTRYINDEX);

	lua_pushglobaltable(L);
	for (i = 0; drop[i]; i++) {
		lua_pushnil(L);
		lua_setfield(L, 1, drop[i]);
	}
	lua_pushcfunction(L, l_tostring);
	lua_setfield(L, 1, "tostring");
	lua_pushcfunction(L, l_print);
	lua_setfield(L, 1, "print");

	/* os: a fresh table with the four harmless functions */
	lua_getfield(L, 1, "os");
	lua_createtable(L, 0, 4);
	for (i = 0; os_keep[i]; i++) {
		lua_getfield(L, -2, os_keep[i]);
		lua_setfield(L, -2, os_keep[i]);
	}
	if (V.c->clock_host) {
		lua_getfield(L, -1, "time");
		lua_pushcclosure(L, l_os_time, 1);
		lua_setfield(L, -2, "time");
		lua_getfield(L, -1, "date");
		lua_pushcclosure(L, l_os_date, 1);
		lua_setfield(L, -2, "date");
		lua_pushcfunction(L, l_os_clock);
		lua_setfield(L, -2, "clock");
	}
	lua_setfield(L, 1, "os");
	lua_pop(L, 1);

	/* string: no dump, a safe format, and the metatable of strings locked */
	lua_getfield(L, 1, "string");
	lua_pushnil(L);
	lua_setfield(L, -2, "dump");
	lua_getfield(L, -1, "format");
	str_format = lua_tocfunction(L, -1);
	lua_pop(L, 1);
	lua_pushcfunction(L, l_format);
	lua_setfield(L, -2, "format");
	lua_pop(L, 1);
	lua_pushliteral(L, "");
	if (lua_getmetatable(L, -1)) {
		lua_pushboolean(L, 0);
		lua_setfield(L, -2, "__metatable");
		lua_pop(L, 1);
	}
	lua_pop(L, 1);

	/* coroutines that carry limits with them */
	lua_getfield(L, 1, "coroutine");
	lua_pushcfunction(L, l_resume);
	lua_setfield(L, -2, "resume");
	lua_pushcfunction(L, l_wrap);
	lua_setfield(L, -2, "wrap");
	lua_pop(L, 1);

	{
		static const luaL_Reg json_f[] = {
			{ "encode", l_json_encode }, { "decode", l_json_decode }, { NULL, NULL }
		};
		static const luaL_Reg b64_f[] = {
			{ "encode", l_b64_encode }, { "decode", l_b64_decode }, { NULL, NULL }
		};

		lua_createtable(L, 0, 5);
		set_funcs(L, json_f);
		lua_pushlightuserdata(L, &json_null_tag);
		lua_setfield(L, -2, "null");
		lua_createtable(L, 0, 1);
		lua_pushliteral(L, "object");
		lua_setfield(L, -2, "__jsontype");
		lua_pushvalue(L, -1);
		V.object_mt_ref = luaL_ref(L, LUA_REGISTRYINDEX);
		lua_pushcclosure(L, l_json_mark, 1);
		lua_setfield(L, -2, "object");
		lua_createtable(L, 0, 1);
		lua_pushliteral(L, "array");
		lua_setfield(L, -2, "__jsontype");
		lua_pushcclosure(L, l_json_mark, 1);
		lua_setfield(L, -2, "array");
		lua_setfield(L, 1, "json");
		lua_createtable(L, 0, 2);
		set_funcs(L, b64_f);
		lua_setfield(L, 1, "base64");
	}
	if (V.c->has_fs) {
		static const luaL_Reg fs_f[] = {
			{ "read", l_fs_read }, { "write", l_fs_write }, { "append", l_fs_append },
			{ "exists", l_fs_exists }, { "list", l_fs_list }, { "stat", l_fs_stat },
			{ "remove", l_fs_remove }, { "mkdir", l_fs_mkdir }, { NULL, NULL }
		};

		lua_createtable(L, 0, 9);
		set_funcs(L, fs_f);
		install_grep(L);
		lua_setfield(L, 1, "fs");
	}
	if (V.c->has_http) {
		static const luaL_Reg http_f[] = {
			{ "get", l_http_get }, { "post", l_http_post }, { NULL, NULL }
		};

		lua_createtable(L, 0, 2);
		set_funcs(L, http_f);
		lua_setfield(L, 1, "http");
	}
	if (V.c->has_tools) {
		install_tools(L);
		lua_setfield(L, 1, "tools");
	}
	if (V.c->has_require) {
		lua_newtable(L);
		lua_pushcclosure(L, l_require, 1);
		lua_setfield(L, 1, "require");
	}
	/* where Lua looks up the name of a function that an error names ('json.decode', as
	 * 'string.rep'): box's libraries join the standard ones; the script never sees it */
	luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
	for (i = 0; added[i]; i++) {
		if (lua_getfield(L, 1, added[i]) == LUA_TTABLE)
			lua_setfield(L, -2, added[i]);
		else
			lua_pop(L, 1);
	}
	lua_settop(L, 0);
}

/* ------------------------------------------------------------------ running */

struct final {
	struct box_buf result;
	int has_result;
	struct box_err err;
	int failed;
};

static int setup(lua_State *L)
{
	const cJSON *a;
	lua_Integer i = 1;

	build_env(L);
	lua_pushliteral(L, "limit_exceeded");
	V.trip_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	lua_pushboolean(L, 0);
	V.host_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	if (luaL_loadbufferx(L, V.c->script, V.c->script_len, V.c->chunkname, "t") != LUA_OK)
		return lua_error(L);
	/* arg as in the lua(1) interpreter: arg[0] the script name, then the arguments */
	lua_createtable(L, cJSON_GetArraySize(V.c->args), 1);
	lua_pushstring(L, V.c->chunkname[0] == '@' ? V.c->chunkname + 1 : "-");
	lua_rawseti(L, -2, 0);
	cJSON_ArrayForEach(a, V.c->args) {
		push_json(L, a, 1);
		lua_rawseti(L, -2, i++);
	}
	lua_setglobal(L, "arg");
	return 1;
}

static int pmain(lua_State *L)
{
	const cJSON *a;
	int nargs = 0;

	lua_settop(L, 0);
	setup(L);
	/* one walk of the list: cJSON_GetArrayItem(i) would walk it again for every i */
	cJSON_ArrayForEach(a, V.c->args) {
		push_json(L, a, 1);
		nargs++;
	}
	lua_call(L, nargs, 1);
	return 1;
}

static void set_trip_error(struct box_err *err)
{
	switch (V.tripped) {
	case TRIP_MEMORY:
		box_err_limit(err, BOX_E_LIMIT, "memory", V.c->memory_bytes, "bytes",
			      "memory limit of %lld bytes exceeded", (long long)V.c->memory_bytes);
		break;
	case TRIP_INSTRUCTIONS:
		box_err_limit(err, BOX_E_LIMIT, "instructions", V.c->max_instructions, "instructions",
			      "instruction limit of %lld exceeded", (long long)V.c->max_instructions);
		break;
	case TRIP_CPU:
		box_err_limit(err, BOX_E_LIMIT, "cpu", V.c->cpu_ms, "ms",
			      "CPU time limit of %lld ms exceeded", (long long)V.c->cpu_ms);
		break;
	case TRIP_HOST:
		*err = V.host_err;
		break;
	default:
		break;
	}
}

/* The run ends with a tool's error: the message is the script's, the rest the tool's. */
static void keep_tool_fields(struct box_err *dst, const struct box_err *src)
{
	memcpy(dst->limit, src->limit, sizeof(dst->limit));
	memcpy(dst->unit, src->unit, sizeof(dst->unit));
	memcpy(dst->path, src->path, sizeof(dst->path));
	dst->has_configured = src->has_configured;
	dst->configured = src->configured;
	dst->retryable = src->retryable;
}

/* Converts the error object at the top to a message, under the limits still armed. */
static int err_message(lua_State *L)
{
	size_t n;
	const char *s = safe_tolstring(L, 1, &n);

	lua_pushlstring(L, s, n);
	return 1;
}

static void send_final(struct final *fin)
{
	struct box_buf out = BOX_BUF_INIT((size_t)V.c->max_result_bytes + 4096);
	struct box_err err;
	struct box_ipc_field f[2];
	cJSON *eo;
	char *es = NULL;

	/* plain malloc again: a memory limit must not keep the error from being reported */
	cJSON_InitHooks(NULL);
	box_buf_puts(&out, "{", &err);
	if (fin->failed) {
		eo = box_err_to_json(&fin->err);
		es = eo ? cJSON_PrintUnformatted(eo) : NULL;
		cJSON_Delete(eo);
		box_buf_puts(&out, "\"error\":", &err);
		box_buf_puts(&out, es ? es : "{\"code\":\"internal\",\"message\":\"out of memory\"}", &err);
		cJSON_free(es);
	}
	/* the VM's own CPU time, so that the broker can answer before it reaps this process */
	{
		struct rusage ru;
		long long cpu = -1;

		if (getrusage(RUSAGE_SELF, &ru) == 0)
			cpu = (long long)ru.ru_utime.tv_sec * 1000 + ru.ru_utime.tv_usec / 1000 +
			      (long long)ru.ru_stime.tv_sec * 1000 + ru.ru_stime.tv_usec / 1000;
		box_buf_printf(&out, &err, "%s\"lossy\":%s,\"cpu_ms\":%lld}", out.len > 1 ? "," : "",
			       V.lossy ? "true" : "false", cpu);
	}
	f[0].p = out.data;
	f[0].n = out.len;
	/* the result travels as its own field: its text is embedded as it is, not re-encoded */
	f[1].p = fin->result.data;
	f[1].n = fin->result.len;
	(void)tell_local_calls(&err);
	box_ipc_send(V.c->sock, BOX_OP_FINAL, f, fin->has_result ? 2 : 1, -1, &err);
	box_buf_release(&out);
}

void box_vm_prepare(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigprof;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPROF, &sa, NULL);
}

/* Long because it is the VM child's whole life, from the state and its limits to the
 * final message; none of its steps returns to a caller that could go on without it. */
void box_vm_run(const struct box_vm_config *c)
{
	struct final fin;
	cJSON_Hooks hooks = { json_malloc, json_free };
	lua_State *L;
	int status;

	memset(&V, 0, sizeof(V));
	memset(&fin, 0, sizeof(fin));
	V.c = c;
	V.ids_ref = LUA_NOREF;
	V.object_mt_ref = LUA_NOREF;
	box_buf_init(&V.reply, (size_t)c->memory_bytes + 1024);
	box_buf_init(&fin.result, (size_t)c->max_result_bytes);

	L = lua_newstate(vm_alloc, NULL);
	if (!L) {
		fin.failed = 1;
		box_err_limit(&fin.err, BOX_E_LIMIT, "memory", c->memory_bytes, "bytes",
			      "memory limit of %lld bytes too small to start the VM",
			      (long long)c->memory_bytes);
		send_final(&fin);
		return;
	}
	V.L = L;
	V.running = L;
	lua_setwarnf(L, NULL, NULL);
	cJSON_InitHooks(&hooks);

	{
		struct itimerval it = { { 0, 0 }, { (time_t)(c->cpu_ms / 1000),
						      (suseconds_t)(c->cpu_ms % 1000) * 1000 } };

		setitimer(ITIMER_PROF, &it, NULL);
	}
	if (c->max_instructions > 0) {
		V.counting = 1;
		V.step = c->max_instructions < COUNT_STEP ? (int)c->max_instructions : COUNT_STEP;
		c->shm->counted = 1;
		lua_sethook(L, hook, LUA_MASKCOUNT, V.step);
	}

	lua_pushcfunction(L, pmain);
	status = lua_pcall(L, 0, 1, 0);
	if (V.counting || V.tripped == TRIP_INSTRUCTIONS)
		c->shm->instructions = V.counted;
	if (V.tripped == TRIP_NONE && V.mem_pending && status == LUA_ERRMEM)
		V.tripped = TRIP_MEMORY;
	if (V.tripped != TRIP_NONE) {
		fin.failed = 1;
		set_trip_error(&fin.err);
	} else if (status != LUA_OK) {
		int ms, host_error;

		fin.failed = 1;
		lua_rawgeti(L, LUA_REGISTRYINDEX, V.host_ref);
		host_error = lua_rawequal(L, -1, -2);
		lua_pop(L, 1);
		lua_pushcfunction(L, err_message);
		lua_insert(L, -2);
		ms = lua_pcall(L, 1, 1, 0);
		if (V.tripped != TRIP_NONE) {
			set_trip_error(&fin.err);
		} else {
			struct box_buf clean = BOX_BUF_INIT(BOX_ERR_MSG_MAX);
			size_t n = 0;
			const char *s = ms == LUA_OK ? lua_tolstring(L, -1, &n) :
				"error object could not be converted to a string";
			struct box_err e2;

			if (ms != LUA_OK)
				n = strlen(s);
			if (n > BOX_ERR_MSG_MAX - 8)
				n = box_utf8_cut(s, BOX_ERR_MSG_MAX - 8);
			if (box_utf8_sanitize(s, n, &clean, &e2) > 0)
				V.lossy = 1;
			box_err_set(&fin.err, host_error ? V.host_code : BOX_E_GUEST, "%s",
				    clean.data ? clean.data : "");
			box_buf_release(&clean);
			if (host_error && V.tool_err_set)
				keep_tool_fields(&fin.err, &V.tool_err);
		}
	} else if (!lua_isnil(L, -1)) {
		struct conv cv = { .out = &fin.result };

		if (to_json(&cv, L, lua_gettop(L), 1) < 0) {
			fin.failed = 1;
			if (cv.code == BOX_E_LIMIT)
				box_err_limit(&fin.err, BOX_E_LIMIT, "result_bytes", V.c->max_result_bytes,
					      "bytes", "return value: %s", cv.msg);
			else
				box_err_set(&fin.err, BOX_E_GUEST, "return value: %s", cv.msg);
		} else {
			fin.has_result = 1;
			if (cv.lossy)
				V.lossy = 1;
		}
	}
	{
		struct itimerval off = { { 0, 0 }, { 0, 0 } };

		setitimer(ITIMER_PROF, &off, NULL);
	}
	send_final(&fin);
	box_buf_release(&fin.result);
	/* no lua_close: finalizers of the script would run unbounded; the process ends here */
}

size_t box_vm_shm_size(int64_t max_output)
{
	return sizeof(struct box_vm_shm) + (size_t)max_output;
}
