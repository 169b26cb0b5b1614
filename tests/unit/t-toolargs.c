#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "toolargs.h"
#include "tap.h"
#include "banned.h"

static const char *schema_text =
	"{\"type\":\"object\",\"properties\":{"
	"\"query\":{\"type\":\"string\",\"description\":\"Search text\"},"
	"\"maxItems\":{\"type\":\"integer\",\"minimum\":1},"
	"\"ratio\":{\"type\":\"number\"},"
	"\"verbose\":{\"type\":\"boolean\"},"
	"\"tag\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
	"\"ids\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},"
	"\"flags\":{\"type\":\"array\",\"items\":{\"type\":\"boolean\"}},"
	"\"mode\":{\"enum\":[\"fast\",\"slow\"]},"
	"\"level\":{\"type\":\"string\",\"enum\":[\"a\",\"b\",\"c\"]},"
	"\"size\":{\"type\":\"integer\",\"enum\":[1,2]},"
	"\"opts\":{\"type\":\"object\"},"
	"\"dry_run\":{\"type\":[\"boolean\",\"null\"]},"
	"\"colors\":{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"green\"]}}"
	"},\"required\":[\"query\",\"maxItems\"],\"additionalProperties\":false}";

static cJSON *schema;

static cJSON *parse(const char *text)
{
	struct box_err err;

	box_err_init(&err);
	return box_json_parse(text, strlen(text), &err);
}

static cJSON *run(struct box_err *err, int *help, int argc, ...)
{
	char *argv[32];
	va_list ap;
	int i;

	va_start(ap, argc);
	for (i = 0; i < argc && i < 32; i++)
		argv[i] = va_arg(ap, char *);
	va_end(ap);
	box_err_init(err);
	return box_toolargs_parse(schema, argc, argv, help, err);
}

/* Parses the arguments and compares the unformatted result with want. */
#define good(want, ...) do { \
	struct box_err e_; \
	int h_ = 7; \
	cJSON *r_ = run(&e_, &h_, __VA_ARGS__); \
	char *s_ = r_ ? cJSON_PrintUnformatted(r_) : NULL; \
	is_str(s_, want, "%s", want); \
	if (!r_) \
		printf("#   error: %s\n", e_.message); \
	is_int(h_, 0, "  no help"); \
	free(s_); \
	cJSON_Delete(r_); \
} while (0)

#define bad(code_, msg, ...) do { \
	struct box_err e_; \
	int h_ = 7; \
	cJSON *r_ = run(&e_, &h_, __VA_ARGS__); \
	ok(r_ == NULL, "refused: %s", msg); \
	is_int(e_.code, code_, "  code %s", box_err_code_name(code_)); \
	is_str(e_.message, msg, "  message"); \
	is_int(h_, 0, "  no help"); \
	cJSON_Delete(r_); \
} while (0)

static void test_flag_names(void)
{
	char out[32];

	ok(box_toolargs_flag_name("maxItems", out, sizeof(out)) == 0 && !strcmp(out, "max-items"),
	   "maxItems -> max-items");
	ok(box_toolargs_flag_name("max_items", out, sizeof(out)) == 0 && !strcmp(out, "max-items"),
	   "max_items -> max-items");
	ok(box_toolargs_flag_name("max-items", out, sizeof(out)) == 0 && !strcmp(out, "max-items"),
	   "max-items stays");
	ok(box_toolargs_flag_name("HTTPServer", out, sizeof(out)) == 0 &&
	   !strcmp(out, "http-server"), "HTTPServer -> http-server");
	ok(box_toolargs_flag_name("userID", out, sizeof(out)) == 0 && !strcmp(out, "user-id"),
	   "userID -> user-id");
	ok(box_toolargs_flag_name("v2Name", out, sizeof(out)) == 0 && !strcmp(out, "v2-name"),
	   "v2Name -> v2-name");
	ok(box_toolargs_flag_name("snake_Case", out, sizeof(out)) == 0 && !strcmp(out, "snake-case"),
	   "snake_Case -> snake-case");
	ok(box_toolargs_flag_name("q", out, sizeof(out)) == 0 && !strcmp(out, "q"), "q -> q");
	is_int(box_toolargs_flag_name("", out, sizeof(out)), -1, "empty name refused");
	is_int(box_toolargs_flag_name("maxItems", out, 9), -1, "too long for the buffer");
	is_int(box_toolargs_flag_name("maxItems", out, 10), 0, "exactly fits");
}

static void test_values(void)
{
	good("{\"query\":\"hi\",\"maxItems\":5}", 4, "--query", "hi", "--max-items", "5");
	good("{\"query\":\"a=b\",\"maxItems\":5}", 2, "--query=a=b", "--max-items=5");
	good("{\"maxItems\":1,\"query\":\"--x\"}", 4, "--max-items", "1", "--query", "--x");
	good("{\"query\":\"\",\"maxItems\":1}", 3, "--query=", "--max-items", "1");
	good("{\"query\":\"q\",\"maxItems\":1,\"verbose\":true}", 5, "--query", "q", "--max-items",
	     "1", "--verbose");
	good("{\"query\":\"q\",\"maxItems\":1,\"verbose\":false}", 5, "--query", "q", "--max-items",
	     "1", "--no-verbose");
	good("{\"query\":\"q\",\"maxItems\":1,\"verbose\":false}", 5, "--query", "q", "--max-items",
	     "1", "--verbose=false");
	good("{\"query\":\"q\",\"maxItems\":1,\"verbose\":true}", 5, "--query", "q", "--max-items",
	     "1", "--verbose=true");
	good("{\"query\":\"q\",\"maxItems\":1,\"dry_run\":true}", 5, "--query", "q", "--max-items",
	     "1", "--dry-run");
	good("{\"query\":\"q\",\"maxItems\":1,\"ratio\":-2.5}", 6, "--query", "q", "--max-items", "1",
	     "--ratio", "-2.5");
	good("{\"query\":\"q\",\"maxItems\":1,\"ratio\":3}", 6, "--query", "q", "--max-items", "1",
	     "--ratio", "3");
	good("{\"query\":\"q\",\"maxItems\":1000}", 4, "--query", "q", "--max-items", "1e3");
	good("{\"query\":\"q\",\"maxItems\":1,\"tag\":[\"a\",\"b\"]}", 8, "--query", "q",
	     "--max-items", "1", "--tag", "a", "--tag", "b");
	good("{\"tag\":[\"x\"],\"query\":\"q\",\"maxItems\":1}", 5, "--tag=x", "--query", "q",
	     "--max-items", "1");
	good("{\"query\":\"q\",\"maxItems\":1,\"ids\":[3,-4]}", 8, "--query", "q", "--max-items", "1",
	     "--ids", "3", "--ids", "-4");
	good("{\"query\":\"q\",\"maxItems\":1,\"flags\":[true,false]}", 8, "--query", "q",
	     "--max-items", "1", "--flags", "true", "--flags", "false");
	good("{\"query\":\"q\",\"maxItems\":1,\"colors\":[\"green\"]}", 6, "--query", "q",
	     "--max-items", "1", "--colors", "green");
	good("{\"query\":\"q\",\"maxItems\":1,\"mode\":\"slow\"}", 6, "--query", "q", "--max-items",
	     "1", "--mode", "slow");
	good("{\"query\":\"q\",\"maxItems\":1,\"level\":\"c\"}", 6, "--query", "q", "--max-items",
	     "1", "--level", "c");
	good("{\"query\":\"q\",\"maxItems\":1,\"size\":2}", 6, "--query", "q", "--max-items", "1",
	     "--size", "2");
	good("{\"query\":\"q\",\"maxItems\":1,\"opts\":{\"a\":[1]}}", 6, "--query", "q",
	     "--max-items", "1", "--opts", "{\"a\":[1]}");

	{
		struct box_err err;
		int help;
		int64_t n = 0;
		cJSON *r = run(&err, &help, 4, "--query", "q", "--max-items", "9007199254740993");

		ok(r && box_json_int64(cJSON_GetObjectItem(r, "maxItems"), &n) &&
		   n == INT64_C(9007199254740993), "integers stay exact beyond 2^53");
		cJSON_Delete(r);
	}
}

static void test_errors(void)
{
	bad(BOX_E_USAGE, "Missing required flag: --max-items", 2, "--query", "q");
	bad(BOX_E_USAGE, "Missing required flag: --query", 0, NULL);
	{
		struct box_err err;
		int help;

		run(&err, &help, 2, "--query", "q");
		is_str(err.path, "$.maxItems", "missing flag's path");
	}
	bad(BOX_E_USAGE, "Unknown flag: --bogus", 1, "--bogus");
	bad(BOX_E_USAGE, "Unknown flag: --bogus", 1, "--bogus=1");
	bad(BOX_E_USAGE, "Unknown flag: -x", 1, "-x");
	bad(BOX_E_USAGE, "Unknown flag: --no-query", 1, "--no-query");
	bad(BOX_E_USAGE, "Unknown flag: --no-verbose", 1, "--no-verbose=1");
	bad(BOX_E_USAGE, "Unknown flag: --maxItems", 2, "--maxItems", "1");
	bad(BOX_E_USAGE, "Unknown flag: --max_items", 2, "--max_items", "1");
	bad(BOX_E_USAGE, "Unexpected argument: foo", 3, "--query", "q", "foo");
	bad(BOX_E_USAGE, "Unexpected argument: --", 2, "--", "--query");
	bad(BOX_E_USAGE, "Unexpected argument: -", 1, "-");
	bad(BOX_E_USAGE, "Missing value for flag: --query", 1, "--query");
	bad(BOX_E_USAGE, "Flag given twice: --query", 4, "--query", "a", "--query", "b");
	bad(BOX_E_USAGE, "Flag given twice: --verbose", 2, "--verbose", "--no-verbose");
	bad(BOX_E_USAGE, "Invalid boolean for --verbose: yes", 1, "--verbose=yes");
	bad(BOX_E_USAGE, "Invalid integer for --max-items: 1.5", 2, "--max-items", "1.5");
	bad(BOX_E_USAGE, "Invalid integer for --max-items: ten", 2, "--max-items", "ten");
	bad(BOX_E_USAGE, "Invalid integer for --max-items: ", 2, "--max-items", "");
	bad(BOX_E_USAGE, "Invalid integer for --max-items: 1e999", 2, "--max-items", "1e999");
	bad(BOX_E_USAGE, "Invalid number for --ratio: abc", 2, "--ratio", "abc");
	bad(BOX_E_USAGE, "Invalid number for --ratio: 1e999", 2, "--ratio", "1e999");
	bad(BOX_E_USAGE, "Invalid number for --ratio: 0x10", 2, "--ratio", "0x10");
	bad(BOX_E_USAGE, "Invalid number for --ratio: nan", 2, "--ratio", "nan");
	bad(BOX_E_USAGE, "Invalid number for --ratio: \"1\"", 2, "--ratio", "\"1\"");
	bad(BOX_E_USAGE, "Invalid integer for --ids: x", 4, "--ids", "1", "--ids", "x");
	bad(BOX_E_USAGE, "Invalid boolean for --flags: 1", 2, "--flags", "1");
	bad(BOX_E_USAGE, "Invalid value for --mode: medium (expected fast|slow)", 2, "--mode",
	    "medium");
	bad(BOX_E_USAGE, "Invalid value for --level: d (expected a|b|c)", 2, "--level", "d");
	bad(BOX_E_USAGE, "Invalid value for --size: 3 (expected 1|2)", 2, "--size", "3");
	bad(BOX_E_USAGE, "Invalid value for --colors: blue (expected red|green)", 4, "--colors",
	    "red", "--colors", "blue");
	bad(BOX_E_USAGE, "Invalid JSON for --opts: {", 2, "--opts", "{");
	bad(BOX_E_INVALID, "at $.maxItems: expected >= 1, got 0", 4, "--query", "q", "--max-items",
	    "0");
	bad(BOX_E_INVALID, "at $.opts: expected object, got array", 6, "--query", "q", "--max-items",
	    "1", "--opts", "[]");
}

static void test_json(void)
{
	char dir[] = "/tmp/t-toolargs-XXXXXX", cwd[4096];
	const char *doc = "{\"query\":\"j\",\"maxItems\":2}";
	struct box_err err;
	int help, fd;
	cJSON *r;

	good("{\"query\":\"j\",\"maxItems\":2}", 2, "--json", doc);
	good("{\"query\":\"j\",\"maxItems\":2}", 1, "--json={\"query\":\"j\",\"maxItems\":2}");
	bad(BOX_E_USAGE, "--json cannot be combined with other flags", 3, "--json", doc, "--verbose");
	bad(BOX_E_USAGE, "--json cannot be combined with other flags", 3, "--verbose", "--json", doc);
	bad(BOX_E_USAGE, "--json cannot be combined with other flags", 4, "--json", doc,
	    "--json-file", "x");
	bad(BOX_E_USAGE, "Flag given twice: --json", 4, "--json", doc, "--json", doc);
	bad(BOX_E_USAGE, "Missing value for flag: --json", 1, "--json");
	bad(BOX_E_USAGE, "Missing value for flag: --json-file", 1, "--json-file");
	bad(BOX_E_USAGE, "Unexpected argument: x", 3, "--json", doc, "x");
	bad(BOX_E_INVALID, "at $.query: expected string, got integer", 2, "--json",
	    "{\"query\":1,\"maxItems\":2}");
	bad(BOX_E_INVALID, "at $: missing required property \"maxItems\"", 2, "--json",
	    "{\"query\":\"q\"}");
	bad(BOX_E_INVALID, "at $.extra: property not allowed", 2, "--json",
	    "{\"query\":\"q\",\"maxItems\":1,\"extra\":0}");
	bad(BOX_E_INVALID, "at $: expected object, got array", 2, "--json", "[]");
	r = run(&err, &help, 2, "--json", "{");
	ok(!r && err.code == BOX_E_INVALID, "bad --json text is invalid_request");

	ok(getcwd(cwd, sizeof(cwd)) != NULL, "getcwd");
	ok(mkdtemp(dir) != NULL, "mkdtemp");
	ok(chdir(dir) == 0, "chdir to the temp dir");
	fd = open("in.json", O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ok(fd >= 0 && write(fd, doc, strlen(doc)) == (ssize_t)strlen(doc), "write in.json");
	close(fd);
	good("{\"query\":\"j\",\"maxItems\":2}", 2, "--json-file", "in.json");
	good("{\"query\":\"j\",\"maxItems\":2}", 1, "--json-file=./in.json");
	r = run(&err, &help, 2, "--json-file", "missing.json");
	ok(!r, "missing --json-file refused");
	is_int(err.code, BOX_E_NOT_FOUND, "  not_found");
	fd = open("big.json", O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ok(fd >= 0 && ftruncate(fd, (off_t)BOX_TOOLARGS_FILE_MAX + 1) == 0, "16 MiB + 1 file");
	close(fd);
	r = run(&err, &help, 2, "--json-file", "big.json");
	ok(!r, "oversized --json-file refused");
	is_int(err.code, BOX_E_LIMIT, "  limit_exceeded");
	fd = open("bad.json", O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ok(fd >= 0 && write(fd, "{\"query\"", 8) == 8, "write bad.json");
	close(fd);
	r = run(&err, &help, 2, "--json-file", "bad.json");
	ok(!r && err.code == BOX_E_INVALID, "bad --json-file text is invalid_request");
	unlink("in.json");
	unlink("big.json");
	unlink("bad.json");
	ok(chdir(cwd) == 0 && rmdir(dir) == 0, "clean up");
}

static void test_help_and_limits(void)
{
	struct box_err err;
	int help = 0;
	cJSON *r, *s;
	char *argv[4097];
	int i;

	r = run(&err, &help, 1, "--help");
	ok(!r && help == 1 && err.code == BOX_OK, "--help asks for help");
	help = 0;
	r = run(&err, &help, 3, "--query", "q", "-h");
	ok(!r && help == 1 && err.code == BOX_OK, "-h after flags asks for help");
	help = 0;
	r = run(&err, &help, 2, "--query", "--help");
	ok(r == NULL && help == 0 && err.code == BOX_E_USAGE,
	   "--help as a flag's value is the value (then required flag missing)");
	is_str(err.message, "Missing required flag: --max-items", "  message");

	for (i = 0; i < 4097; i++)
		argv[i] = (char *)"--verbose";
	box_err_init(&err);
	r = box_toolargs_parse(schema, 4097, argv, &help, &err);
	ok(!r && err.code == BOX_E_LIMIT, "more than 4096 arguments refused");

	s = parse("{\"properties\":{\"maxItems\":{},\"max_items\":{}}}");
	box_err_init(&err);
	r = box_toolargs_parse(s, 0, argv, &help, &err);
	ok(!r && err.code == BOX_E_INVALID, "colliding flag names refused");
	is_str(err.message, "Properties \"maxItems\" and \"max_items\" both map to --max-items",
	       "  message");
	cJSON_Delete(s);
	s = parse("{\"properties\":{\"json_file\":{}}}");
	box_err_init(&err);
	r = box_toolargs_parse(s, 0, argv, &help, &err);
	ok(!r && err.code == BOX_E_INVALID, "reserved flag name refused");
	is_str(err.message, "Property \"json_file\" takes the reserved flag --json-file", "  message");
	cJSON_Delete(s);

	s = parse("{\"properties\":{\"any\":{},\"list\":{\"type\":\"array\"}}}");
	box_err_init(&err);
	argv[0] = (char *)"--any";
	argv[1] = (char *)"[1,\"x\"]";
	argv[2] = (char *)"--list";
	argv[3] = (char *)"{\"k\":null}";
	r = box_toolargs_parse(s, 4, argv, &help, &err);
	{
		char *txt = r ? cJSON_PrintUnformatted(r) : NULL;

		is_str(txt, "{\"any\":[1,\"x\"],\"list\":[{\"k\":null}]}",
		       "untyped properties and items are JSON");
		free(txt);
	}
	cJSON_Delete(r);
	cJSON_Delete(s);
}

static void test_help_text(void)
{
	const char *want =
		"Usage: box-tool search [--flag VALUE]...\n"
		"       box-tool search --json JSON | --json-file PATH\n"
		"\n"
		"Search the index.\n"
		"\n"
		"Flags:\n"
		"  --query <string> (required)\n"
		"      Search text\n"
		"  --max-items <integer> (required)\n"
		"  --ratio <number>\n"
		"  --verbose, --no-verbose <boolean>\n"
		"  --tag <string[]>\n"
		"  --ids <integer[]>\n"
		"  --flags <boolean[]>\n"
		"  --mode <fast|slow>\n"
		"  --level <a|b|c>\n"
		"  --size <1|2>\n"
		"  --opts <json>\n"
		"  --dry-run, --no-dry-run <boolean>\n"
		"  --colors <(red|green)[]>\n"
		"  --json <json>\n"
		"      the whole input as one JSON value\n"
		"  --json-file <path>\n"
		"      read the whole input from a file\n"
		"  -h, --help\n"
		"      show this help\n";
	char *h = box_toolargs_help("search", "Search the index.", schema);
	cJSON *s;

	is_str(h, want, "help text");
	free(h);
	s = parse("{}");
	h = box_toolargs_help("t", NULL, s);
	is_str(h, "Usage: box-tool t [--flag VALUE]...\n"
	       "       box-tool t --json JSON | --json-file PATH\n"
	       "\n"
	       "Flags:\n"
	       "  --json <json>\n"
	       "      the whole input as one JSON value\n"
	       "  --json-file <path>\n"
	       "      read the whole input from a file\n"
	       "  -h, --help\n"
	       "      show this help\n", "help without description or properties");
	free(h);
	cJSON_Delete(s);
}

int main(void)
{
	schema = parse(schema_text);
	ok(schema != NULL, "test schema parses");
	test_flag_names();
	test_values();
	test_errors();
	test_json();
	test_help_and_limits();
	test_help_text();
	cJSON_Delete(schema);
	return done_testing();
}
