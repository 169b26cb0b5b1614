/* box-artifact.json, the manifest at the top of every artifact directory, and the places box
 * keeps artifacts: BOX_HOME, its store and its embedded registry. */
#ifndef BOX_ARTIFACT_H
#define BOX_ARTIFACT_H

#include <stddef.h>
#include <cjson/cJSON.h>
#include "err.h"

#define BOX_ARTIFACT_FILE "box-artifact.json"
#define BOX_ARTIFACT_MAX (1 << 20)

struct box_artifact {
	char name[256];
	char version[129];
	char kind[8];         /* "tool", "skill" or "lua" */
	char entry[4096];     /* relative path of the entry point, "" when none */
	int ntools;           /* tool definitions (kind tool) */
};

/*
 * Checks the text of a box-artifact.json: an object with "name" (a repository name, see
 * box_oci_name_check), "version" (a semantic version), "kind" ("tool", "skill" or "lua"), and
 * optionally "description" (string), "entry" (a relative path without ".." components) and
 * "tools" (an array of objects, each with a string "name"; required non-empty for kind tool).
 * Unknown members are refused. Returns 0, or -1 with invalid_request and err->path.
 */
int box_artifact_parse(const char *json, size_t len, struct box_artifact *a, struct box_err *err);

/* $BOX_HOME, else ${XDG_DATA_HOME:-$HOME/.local/share}/box. 0, or -1 (invalid_request when
 * neither BOX_HOME nor HOME is set, or the path is too long). */
int box_home(char *out, size_t size, struct box_err *err);

/* The default registry reference: $BOX_REGISTRY, else "oci:$BOX_HOME/registry". */
int box_default_registry(char *out, size_t size, struct box_err *err);

#endif
