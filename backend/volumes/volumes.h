/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * volumes: what the registry (backend/registry.c) takes of volumes/: the
 * kind's table and what volumes offer other rooms through links.h.
 * Nothing else includes this header.
 * Must not know: containers (their use of a volume comes through links.h).
 */
#ifndef NODEFS_VOLUMES_H
#define NODEFS_VOLUMES_H

#include "kind.h"

#include <stdbool.h>
#include <stddef.h>

struct backend;
struct kind_ops;
struct nerr;
struct volume_index;

extern const struct kind_ops volumes_kind;	/* volume-kind.c */
/* volumes/: the kind's directory, which the hub keeps (kind_dir_named). */
static inline struct bnode *volumes_dir(struct backend *b)
{
	return kind_dir_named(b, "volumes");
}

/* The links (links.h) volumes offer. */
int volume_mount_source(struct backend *b, const char *name, char **ret_path, struct nerr *err);
bool volume_uses_plugin(struct backend *b, const char *plugin, char *buf, size_t len);
struct volume_index *volume_index_new(struct backend *b, const char *plugin);
const char *volume_index_find(const struct volume_index *ix, const char *id);
void volume_index_free(struct volume_index *ix);
void volumes_refresh_stats(struct backend *b, const char *plugin);
/* links.h's volume_identity: volume name's plugin and id; -ENOENT,
 * -EBUSY while it has no id. Any thread. */
int volume_identity(struct backend *b, const char *name, char *plugin, size_t plen, char *id,
		    size_t idlen, struct nerr *err);
/* The bytes of the volumes made (each its capacity, else its size asked). */
uint64_t volumes_bytes_provisioned(struct backend *b);

#endif
