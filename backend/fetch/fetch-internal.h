/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* fetch-internal: what fetch.c and fetch-extract.c share. */
#ifndef NODEFS_FETCH_INTERNAL_H
#define NODEFS_FETCH_INTERNAL_H

#include <stdint.h>

struct fetch_env;
struct nerr;

/* Unpack the archive at path into env->sandbox/dest (made as needed):
 * into a temporary directory beside it, each entry checked to stay inside
 * (fetch_path_inside) and libarchive's secure flags set, then each top
 * entry renamed into place. base: the sandbox's bytes before (for
 * sandbox_limit). -EIO naming the entry and uri, -EFBIG, -errno. */
int fetch_extract(const struct fetch_env *env, const char *path, const char *dest,
		  const char *uri, uint64_t base, struct nerr *err);
/* Copy src to a new file dst (reflink first, then copy_file_range). */
int fetch_copy_file(const char *src, const char *dst);

#endif
