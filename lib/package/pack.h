/* box-pack: a directory into a reproducible OCI artifact in a registry. */
#ifndef BOX_PACK_H
#define BOX_PACK_H

#include <cjson/cJSON.h>
#include "err.h"
#include "json.h"

extern const struct box_field box_pack_fields[];

/*
 * Packs the request's "dir" (checked against box_pack_fields): reads and checks
 * DIR/box-artifact.json, writes a reproducible tar.gz of DIR (lib/artifact/boxarchive.h), and stores it
 * in the registry ("registry", else the default of box_default_registry) as an OCI image
 * manifest with artifactType application/vnd.box.artifact.v1, the box-artifact.json bytes as
 * its config blob and the archive as its one layer, tagged NAME:VERSION. A tag that already
 * names another digest is a conflict unless "force". Returns the result object, or NULL with
 * err (nothing is tagged then; blobs already stored are content-addressed and harmless).
 */
cJSON *box_pack(const cJSON *req, struct box_err *err);

#endif
