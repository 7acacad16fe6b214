/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * snapshot-kind: the snapshots' table of hooks for the hub (kind.h). The
 * snapshots/ directory is made here, in init, and holds the room's state
 * itself (struct backend keeps no field of it): the hub's `dir` is 0.
 *
 * Must not know: how a snapshot works.
 */
#include "snapshot-internal.h"

#include <errno.h>

#include "kind.h"

static int snapshots_init(struct backend *b, struct nerr *err)
{
	struct bnode *d = bnode_new(&snapshots_type, "snapshots", NULL);
	int r;

	if (!d)
		return nerr_set(err, ENOMEM, "out of memory");
	r = bnode_add(b->root, d);
	bnode_unref(d);
	if (r < 0)
		return nerr_set(err, -r, "snapshots/: cannot be added");
	return 0;
}

const struct kind_ops snapshots_kind = {
	.name = "snapshots",
	.type = NULL,	/* made by init: the room keeps its own directory */
	.dir = 0,
	.op_prefix = "snapshot.",
	.init = snapshots_init,
	.recover = snapshots_recover,
	.settle = snapshots_settle,
	.resume = snapshot_resume,
	.render_metrics = snapshots_render_metrics,
};
