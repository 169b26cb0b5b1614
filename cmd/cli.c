#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "proc.h"
#include "buf.h"
#include "describe.h"
#include "flags.h"
#include "banned.h"

/* --format of --describe (box_cli_take_format); NULL: box's own form */
static const char *describe_format;
/* What one parse of this process found: the policy in force and the agent's request as it
 * came on stdin. One parse per process, so they are kept here for the driver to ask. */
static struct box_trust cli_trust;
static cJSON *cli_agent, *cli_flags;

static const struct box_field *find_flag(const struct box_field *fields, const char *flag,
					 int *negated)
{
	char name[128];
	size_t i;

	*negated = 0;
	if (strncmp(flag, "no-", 3) == 0) {
		const struct box_field *f = find_flag(fields, flag + 3, negated);

		if (f && f->type == BOX_F_BOOL) {
			*negated = 1;
			return f;
		}
	}
	for (i = 0; flag[i] && i < sizeof(name) - 1; i++)
		name[i] = flag[i] == '-' ? '_' : flag[i];
	name[i] = 0;
	/* flags are kebab-case only: --timeout_ms is not --timeout-ms */
	if (strchr(flag, '_'))
		return NULL;
	for (; fields->name; fields++)
		if (strcmp(fields->name, name) == 0)
			return fields;
	return NULL;
}

/* A usage error already set by lib/core/flags (its words), given the path of field f. */
static int usage_at(struct box_err *err, const struct box_field *f)
{
	char path[BOX_ERR_FIELD_MAX];

	if (f) {
		snprintf(path, sizeof(path), "$.%s", f->name);
		box_err_path(err, path);
	}
	return -1;
}

/* "--kebab-case" of field f, as a message names its flag */
static void flag_of(const struct box_field *f, char *out, size_t outlen)
{
	size_t i, o = 0;

	if (outlen < 3)
		return;
	out[o++] = '-';
	out[o++] = '-';
	for (i = 0; f->name[i] && o + 1 < outlen; i++)
		out[o++] = f->name[i] == '_' ? '-' : f->name[i];
	out[o] = 0;
}

static int set_flag(cJSON *flags, const struct box_field *f, int negated, const char *val,
		    struct box_err *err)
{
	cJSON *v = NULL, *arr;
	char flag[BOX_FLAG_SHOW];
	long long n;

	flag_of(f, flag, sizeof(flag));
	switch (f->type) {
	case BOX_F_BOOL:
		v = cJSON_CreateBool(!negated);
		break;
	case BOX_F_INT:
		if (box_flag_int(flag, val, f->min, f->max, &n, err) < 0)
			return usage_at(err, f);
		/* a number node carrying its literal is what box_json_parse makes of an integer */
		v = cJSON_CreateNumber((double)n);
		if (v) {
			v->valuestring = cJSON_malloc(strlen(val) + 1);
			if (!v->valuestring) {
				cJSON_Delete(v);
				v = NULL;
			} else {
				memcpy(v->valuestring, val, strlen(val) + 1);
			}
		}
		break;
	case BOX_F_STRINGS:
		arr = cJSON_GetObjectItemCaseSensitive(flags, f->name);
		if (!arr) {
			arr = cJSON_AddArrayToObject(flags, f->name);
			if (!arr)
				return box_err_set(err, BOX_E_INTERNAL, "out of memory");
		}
		v = cJSON_CreateString(val);
		if (!v || !cJSON_AddItemToArray(arr, v))
			return box_err_set(err, BOX_E_INTERNAL, "out of memory");
		return 0;
	case BOX_F_ARRAY:
	case BOX_F_OBJECT:
	case BOX_F_ANY:
		{
			struct box_err perr;

			v = box_json_parse(val, strlen(val), &perr);
			if (!v) {
				box_flag_invalid(err, "JSON", flag, val);
				return usage_at(err, f);
			}
		}
		break;
	case BOX_F_STRING:
		v = cJSON_CreateString(val);
		break;
	}
	if (!v)
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	cJSON_DeleteItemFromObjectCaseSensitive(flags, f->name);
	cJSON_AddItemToObject(flags, f->name, v);
	return 0;
}

static void print_help(const struct box_cli *cli)
{
	const struct box_field *f;
	const char *s = cli->synopsis, *nl;

	printf("usage:");
	for (; *s; s = nl + (*nl != 0)) {
		nl = strchr(s, '\n');
		if (!nl)
			nl = s + strlen(s);
		printf("%s %s %.*s\n", s == cli->synopsis ? "" : "      ", cli->name, (int)(nl - s), s);
	}
	printf("\n%s\n\noptions (each is also a member of the --json request, with _ for -):\n",
	       cli->description);
	for (f = cli->fields; f->name; f++) {
		char flag[160];
		size_t i, n;

		n = (size_t)snprintf(flag, sizeof(flag), "%s%c%s--", f->shortopt ? "-" : "",
				     f->shortopt ? f->shortopt : ' ', f->shortopt ? ", " : "  ");
		if (!f->shortopt)
			n = (size_t)snprintf(flag, sizeof(flag), "    --");
		for (i = 0; f->name[i] && n < sizeof(flag) - 1; i++)
			flag[n++] = f->name[i] == '_' ? '-' : f->name[i];
		flag[n] = 0;
		if (f->type == BOX_F_BOOL)
			printf("  %s, --no-%.*s\n        %s\n", flag, (int)(strlen(flag) - 6), flag + 6,
			       f->help);
		else
			printf("  %s %s\n        %s\n", flag, f->argname ? f->argname : "VALUE", f->help);
	}
	printf("  --json\n        read the request object from standard input (the agent's: it may "
	       "set only what the policy grants)\n"
	       "  --policy FILE\n        the operator's policy: what a --json request may set, and "
	       "the caps (default $BOX_POLICY)\n"
	       "  --trust-request\n        let the --json request set every member, as a flag "
	       "could (never for an agent)\n"
	       "  --describe [--format box|mcp|openai|anthropic]\n        print the tool definition "
	       "(name, description, schemas) of what the policy lets a request set, in the form "
	       "the named framework loads\n"
	       "  --help, --version\n\n"
	       "The result is one JSON object on standard output; see %s(1) and box(7).\n", cli->name);
}

cJSON *box_cli_agent_schema(const struct box_cli *cli, const cJSON *flags, struct box_err *err)
{
	cJSON *full = box_json_parse(cli->request_schema, strlen(cli->request_schema), err), *s;

	if (!full)
		return NULL;
	s = box_trust_schema(&cli_trust, full, flags, err);
	cJSON_Delete(full);
	return s;
}

char *box_cli_agent_schema_text(const struct box_cli *cli, const cJSON *flags,
				struct box_err *err)
{
	cJSON *s = box_cli_agent_schema(cli, flags, err);
	char *text = s ? cJSON_PrintUnformatted(s) : NULL;

	if (s && !text)
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
	cJSON_Delete(s);
	return text;
}

static int describe(const struct box_cli *cli, const cJSON *flags, struct box_err *err)
{
	cJSON *o = cJSON_CreateObject(), *in, *out;
	int r;

	in = box_cli_agent_schema(cli, flags, err);
	out = box_json_parse(cli->result_schema, strlen(cli->result_schema), err);
	if (!o || !in || !out) {
		cJSON_Delete(o);
		cJSON_Delete(in);
		cJSON_Delete(out);
		return box_err_set(err, BOX_E_INTERNAL, "built-in schema does not parse");
	}
	box_json_exact(in);
	box_json_exact(out);
	cJSON_AddStringToObject(o, "name", cli->name);
	cJSON_AddStringToObject(o, "description", cli->description);
	cJSON_AddItemToObject(o, "input_schema", in);
	cJSON_AddItemToObject(o, "output_schema", out);
	if (describe_format) {
		cJSON *f = box_describe_format(o, describe_format, err);

		cJSON_Delete(o);
		if (!f)
			return -1;
		o = f;
	}
	r = box_cli_emit(o);
	cJSON_Delete(o);
	return r;
}

void box_cli_take_format(int *argc, char **argv)
{
	int i, describing = 0;

	for (i = 1; i < *argc && strcmp(argv[i], "--") != 0; i++)
		describing |= strcmp(argv[i], "--describe") == 0;
	for (i = 1; describing && i < *argc && strcmp(argv[i], "--") != 0; i++) {
		int take = 0;

		if (strcmp(argv[i], "--format") == 0 && i + 1 < *argc) {
			describe_format = argv[i + 1];
			take = 2;
		} else if (strncmp(argv[i], "--format=", 9) == 0) {
			describe_format = argv[i] + 9;
			take = 1;
		}
		if (take) {
			memmove(argv + i, argv + i + take, (size_t)(*argc - i - take + 1) * sizeof(*argv));
			*argc -= take;
			i--;
		}
	}
}

int box_cli_emit_tool(const struct box_cli *cli, const cJSON *tooldef)
{
	struct box_err err;
	cJSON *f;
	int status;

	if (!describe_format)
		return box_cli_emit(tooldef) < 0 ? 8 : 0;
	box_err_init(&err);
	f = box_describe_format(tooldef, describe_format, &err);
	if (!f)
		return box_cli_fail(cli, &err);
	status = box_cli_emit(f) < 0 ? 8 : 0;
	cJSON_Delete(f);
	return status;
}

static int read_request(cJSON **req, struct box_err *err)
{
	struct box_buf b = BOX_BUF_INIT(BOX_MAX_REQUEST_BYTES);

	if (box_buf_read_fd(&b, 0, err) < 0) {
		if (err->code == BOX_E_LIMIT) {
			err->code = BOX_E_INVALID;
			box_err_path(err, "$");
		}
		box_buf_release(&b);
		return -1;
	}
	*req = box_json_parse(b.data ? b.data : "", b.len, err);
	box_buf_release(&b);
	if (!*req) {
		box_err_path(err, "$");
		return -1;
	}
	return 0;
}

/* Long because flags, their values, the positionals left for the binary and the --json
 * request are taken in one pass over argv, with one set of messages. */
int box_cli_parse(const struct box_cli *cli, int argc, char **argv, cJSON **req, int *rest,
		  enum box_cli_next *next, int *status, struct box_err *err)
{
	cJSON *flags = cJSON_CreateObject(), *m;
	int i, json = 0, npos = 0, want_describe = 0, trust_request = 0;
	const char *policy = NULL;
	char **pos = cli->permute ? calloc((size_t)argc + 1, sizeof(*pos)) : NULL;

	*req = NULL;
	*next = BOX_CLI_GO;
	*status = 0;
	if (!flags || (cli->permute && !pos)) {
		cJSON_Delete(flags);
		free(pos);
		return box_err_set(err, BOX_E_INTERNAL, "out of memory");
	}
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const struct box_field *f = NULL;
		int negated = 0;
		const char *val = NULL;
		char name[128];
		const char *eq;

		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if ((a[0] != '-' || a[1] == 0) && pos) {
			pos[npos++] = argv[i];
			continue;
		}
		if (a[0] != '-' || a[1] == 0)
			break;
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			print_help(cli);
			*next = BOX_CLI_DONE;
			goto done;
		}
		if (strcmp(a, "--version") == 0) {
			printf("%s (box) %s\n", cli->name, PACKAGE_VERSION);
			*next = BOX_CLI_DONE;
			goto done;
		}
		if (strcmp(a, "--describe") == 0) {
			want_describe = 1;
			continue;
		}
		if (strcmp(a, "--json") == 0) {
			json = 1;
			continue;
		}
		if (strcmp(a, "--trust-request") == 0) {
			trust_request = 1;
			continue;
		}
		if (strcmp(a, "--policy") == 0 || strncmp(a, "--policy=", 9) == 0) {
			if (a[8] == '=') {
				policy = a + 9;
			} else if (i + 1 < argc) {
				policy = argv[++i];
			} else {
				box_flag_missing_value(err, "--policy");
				goto fail;
			}
			if (!policy[0]) {
				box_flag_missing_value(err, "--policy");
				goto fail;
			}
			continue;
		}
		if (a[1] != '-') {
			for (f = cli->fields; f->name; f++)
				if (f->shortopt && f->shortopt == a[1] && a[2] == 0)
					break;
			if (!f->name) {
				box_flag_unknown(err, a);
				goto fail;
			}
		} else {
			eq = strchr(a + 2, '=');
			snprintf(name, sizeof(name), "%.*s", eq ? (int)(eq - a - 2) : (int)strlen(a + 2),
				 a + 2);
			f = find_flag(cli->fields, name, &negated);
			if (!f) {
				box_flag_unknown(err, a);
				goto fail;
			}
			if (eq)
				val = eq + 1;
			if (eq && f->type == BOX_F_BOOL) {
				box_flag_takes_no_value(err, a);
				usage_at(err, f);
				goto fail;
			}
		}
		if (f->type != BOX_F_BOOL && !val) {
			if (i + 1 >= argc) {
				box_flag_missing_value(err, a);
				usage_at(err, f);
				goto fail;
			}
			val = argv[++i];
		}
		if (set_flag(flags, f, negated, val, err) < 0)
			goto fail;
	}
	if (pos) {
		/* argv[1..i) held flags and positionals: the positionals take the places just
		 * before those after "--", which stay where they are */
		int k;

		i -= npos;
		for (k = 0; k < npos; k++)
			argv[i + k] = pos[k];
		free(pos);
		pos = NULL;
	}
	*rest = i;
	if (box_trust_load(&cli_trust, cli->name, cli->fields, policy, trust_request, err) < 0)
		goto fail;
	if (want_describe) {
		*next = BOX_CLI_DONE;
		if (describe(cli, flags, err) < 0)
			goto fail;
		goto done;
	}
	if (json) {
		if (read_request(req, err) < 0)
			goto fail;
		if (!cJSON_IsObject(*req)) {
			box_err_set(err, BOX_E_INVALID, "request must be a JSON object");
			box_err_path(err, "$");
			goto fail;
		}
	} else {
		*req = cJSON_CreateObject();
		if (!*req) {
			box_err_set(err, BOX_E_INTERNAL, "out of memory");
			goto fail;
		}
	}
	if (box_json_check(*req, cli->fields, err) < 0)
		goto fail;
	/* the request is the agent's: it may set only what the policy grants, within the caps;
	 * then come the operator's values, the policy's and the flags */
	if (json && box_trust_check(&cli_trust, *req, flags, err) < 0)
		goto fail;
	if (json && !(cli_agent = cJSON_Duplicate(*req, 1))) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto fail;
	}
	if (box_trust_apply(&cli_trust, *req, err) < 0)
		goto fail;
	if (!(cli_flags = cJSON_Duplicate(flags, 1))) {
		box_err_set(err, BOX_E_INTERNAL, "out of memory");
		goto fail;
	}
	while ((m = flags->child)) {
		cJSON_DetachItemViaPointer(flags, m);
		cJSON_DeleteItemFromObjectCaseSensitive(*req, m->string);
		cJSON_AddItemToObject(*req, m->string, m);
	}
	cJSON_Delete(flags);
	if (box_json_check(*req, cli->fields, err) < 0) {
		/* a flag value out of range is a usage error, not a bad request */
		err->code = BOX_E_USAGE;
		cJSON_Delete(*req);
		*req = NULL;
		return -1;
	}
	return 0;
done:
	free(pos);
	cJSON_Delete(flags);
	if (fflush(stdout) != 0 && errno != EPIPE)
		*status = 8;
	return 0;
fail:
	free(pos);
	cJSON_Delete(flags);
	cJSON_Delete(*req);
	*req = NULL;
	return -1;
}

const struct box_trust *box_cli_trust(void)
{
	return &cli_trust;
}

const cJSON *box_cli_agent(void)
{
	return cli_agent;
}

const cJSON *box_cli_flags(void)
{
	return cli_flags;
}

int box_cli_start(const struct box_cli *cli, int argc, char **argv, cJSON **req, int *rest,
		  int *status)
{
	enum box_cli_next next;
	struct box_err err;

	if (box_proc_std_fds() < 0) {
		*status = 8;
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	box_err_init(&err);
	box_cli_take_format(&argc, argv);
	if (box_cli_parse(cli, argc, argv, req, rest, &next, status, &err) < 0) {
		*status = box_cli_fail(cli, &err);
		return 0;
	}
	return next == BOX_CLI_GO;
}

int box_cli_emit(const cJSON *obj)
{
	size_t n;
	char *s = box_json_line(obj, &n);
	int r = 0;

	if (!s) {
		fputs("{\"ok\":false,\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}\n",
		      stdout);
		r = -1;
	} else if (fwrite(s, 1, n, stdout) != n) {
		r = -1;
	}
	free(s);
	if (fflush(stdout) != 0)
		r = -1;
	return r;
}

static void stderr_line(const struct box_cli *cli, const struct box_err *err)
{
	fprintf(stderr, "%s: %s: %s\n", cli->name, box_err_code_name(err->code), err->message);
}

int box_cli_fail(const struct box_cli *cli, const struct box_err *err)
{
	cJSON *o = box_err_result(err);

	stderr_line(cli, err);
	box_cli_emit(o);
	cJSON_Delete(o);
	return box_err_exit_status(err->code);
}

int box_cli_print_result(const struct box_cli *cli, const cJSON *result)
{
	const cJSON *e = cJSON_GetObjectItemCaseSensitive(result, "error");
	struct box_err err;
	int status = 0;

	if (e && box_err_from_json(&err, e) == 0) {
		stderr_line(cli, &err);
		status = box_err_exit_status(err.code);
	}
	if (box_cli_emit(result) < 0 && errno != EPIPE && status == 0)
		status = 8;
	return status;
}

int box_cli_finish(const struct box_cli *cli, cJSON *result)
{
	int status = box_cli_print_result(cli, result);

	cJSON_Delete(result);
	return status;
}
