/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * snapshot-kind: the snapshots' table of hooks for the hub (kind.h). The
 * hub makes the snapshots/ directory from its type and holds it
 * (kind_dir_named); struct backend keeps nothing of the room.
 *
 * Must not know: how a snapshot works.
 */
#include "snapshot-internal.h"

#include "kind.h"

const struct kind_ops snapshots_kind = {
	.name = "snapshots",
	.type = &snapshots_type,
	.op_prefix = "snapshot.",
	.recover = snapshots_recover,
	.settle = snapshots_settle,
	.resume = snapshot_resume,
	.render_metrics = snapshots_render_metrics,
};
