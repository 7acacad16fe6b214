/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * snapshots: what the registry may ask of snapshots/: the kind's table,
 * and the functions it hands other rooms through core/links.h (a volume's
 * restore finds its source here; volumes/NAME/snapshots and
 * plugins/NAME/snapshots name them).
 * Must not know: volumes/ or plugins/ (they are reached through links.h).
 */
#ifndef NODEFS_SNAPSHOTS_H
#define NODEFS_SNAPSHOTS_H

#include <stdbool.h>
#include <stddef.h>

struct backend;
struct kind_ops;
struct nerr;
struct sbuf;

/* snapshots/: the kind's table (snapshot-kind.c). */
extern const struct kind_ops snapshots_kind;

/* links.h's snapshot_identity: snapshot name's plugin and id, copied;
 * -ENOENT no such snapshot, -EBUSY not READY. Any thread. */
int snapshot_identity(struct backend *b, const char *name, char *plugin, size_t plen, char *id,
		      size_t idlen, struct nerr *err);
/* links.h's snapshots_of_volume: the names of volume vol's snapshots,
 * one a line, into out. Any thread. */
int snapshots_of_volume(struct backend *b, const char *vol, struct sbuf *out);
/* links.h's snapshot_name_by_id: the snapshot of plugin with id (its name
 * in buf). Any thread. */
bool snapshot_name_by_id(struct backend *b, const char *plugin, const char *id, char *buf,
			 size_t len);

#endif
