/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * container-kind: the containers' table of hooks for the hub (kind.h). It
 * only names what the container module already exports, file by file; it
 * must not know how a container works. Kept apart from container.c so
 * the object's file calls none of the files built on it.
 */
#include "container-internal.h"

#include <stddef.h>

#include "kind.h"
#include "reconcile.h"

const struct kind_ops containers_kind = {
	.name = "containers",
	.type = &containers_type,
	.op_prefix = "container.",
	.recover = containers_recover,		/* container-recover.c */
	.watch = containers_watch,		/* container-sync.c */
	.resume = container_resume,		/* container-recover.c */
	.reconcile = containers_reconcile,	/* container-sync.c */
	.render_metrics = containers_render_metrics,	/* container-files.c */
	.state_size = sizeof(struct containers_state),
};
