/* What every box binary does the same way: flags or a --json request, --help, --version,
 * --describe, one JSON object on stdout, one line on stderr on failure, DESIGN.md exit codes.
 * Shared by the drivers in cmd/; the library itself never prints. */
#ifndef BOX_CLI_H
#define BOX_CLI_H

#include <cjson/cJSON.h>
#include "err.h"
#include "json.h"
#include "trust.h"

#define BOX_MAX_REQUEST_BYTES (16 * 1024 * 1024)

struct box_cli {
	const char *name;            /* "box-run" */
	const char *synopsis;        /* the SYNOPSIS lines of the man page, without the name */
	const char *description;     /* for --describe and the head of --help */
	const struct box_field *fields;
	const char *request_schema;  /* JSON text */
	const char *result_schema;   /* JSON text */
	int permute;                 /* positional arguments may stand between the flags (GNU
				      * style); "--" ends the flags */
};

enum box_cli_next {
	BOX_CLI_GO,    /* *req holds the request, argv[*rest..] the positional arguments */
	BOX_CLI_DONE,  /* --help, --version or --describe was printed: exit with *status */
};

/*
 * Parses argv: every field is a flag (--timeout-ms 5 for timeout_ms; --x/--no-x for booleans;
 * repeated flags for arrays of strings), --json reads the request object from stdin (at most
 * BOX_MAX_REQUEST_BYTES) and the flags are merged over it. Stops at the first positional
 * argument or after "--"; with cli->permute, positional arguments are moved (in order) to the
 * end of argv, before those that follow "--", and parsing goes on past them. The request is checked against the fields (unknown members, types,
 * ranges) before it is returned. Returns -1 with usage/invalid_request on error.
 */
int box_cli_parse(const struct box_cli *cli, int argc, char **argv, cJSON **req, int *rest,
		  enum box_cli_next *next, int *status, struct box_err *err);

/* The start every driver shares: SIGPIPE ignored (a closed stdout is an EPIPE, handled where
 * output is written), argv parsed by box_cli_parse. Returns 1 with *req (the caller owns it)
 * to go on, or 0 when main should return *status: --help, --version or --describe was
 * printed, or the failure was reported. */
int box_cli_start(const struct box_cli *cli, int argc, char **argv, cJSON **req, int *rest,
		  int *status);

/* The policy in force after box_cli_parse (borrowed; the built-in one before). */
const struct box_trust *box_cli_trust(void);

/* The --json request as the agent sent it, before the operator's values were laid over it;
 * NULL without --json. Borrowed. */
const cJSON *box_cli_agent(void);

/* The members the command line's flags set (the operator's), after box_cli_parse. */
const cJSON *box_cli_flags(void);

/* The request schema of what the policy lets the agent set, caps as maximums (flags: the
 * operator's flags, for max_* caps; may be NULL). A new object (or text: free() it), or NULL
 * with err. */
cJSON *box_cli_agent_schema(const struct box_cli *cli, const cJSON *flags, struct box_err *err);
char *box_cli_agent_schema_text(const struct box_cli *cli, const cJSON *flags,
				struct box_err *err);

/* With --describe in argv (before "--"), takes "--format F" / "--format=F" out of argv: the
 * form --describe prints in (box_describe_format). box_cli_start calls it; a driver that
 * takes --describe out of argv itself calls it first. */
void box_cli_take_format(int *argc, char **argv);

/* Prints a tool definition (borrowed) in the --format taken, or as it is; returns the exit
 * status (a format the definition cannot take is reported as box_cli_fail does). */
int box_cli_emit_tool(const struct box_cli *cli, const cJSON *tooldef);

/* Prints one JSON object (one line) to stdout and flushes; 0, or -1 when stdout failed. */
int box_cli_emit(const cJSON *obj);

/* Prints {"ok":false,"error":{...}} on stdout and "NAME: code: message" on stderr; returns
 * the exit status of the error's code. */
int box_cli_fail(const struct box_cli *cli, const struct box_err *err);

/* Prints a result object whose "error" member (if any) decides the exit status, and the
 * stderr line for it; returns that status. The result is borrowed. */
int box_cli_print_result(const struct box_cli *cli, const cJSON *result);

/* Prints a result object whose "error" member (if any) decides the exit status, and the
 * stderr line for it. Takes ownership of result. */
int box_cli_finish(const struct box_cli *cli, cJSON *result);

#endif
