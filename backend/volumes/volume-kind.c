/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * volume-kind: the volumes' table of hooks for the hub (kind.h). It only
 * names what the volume module already exports; it must not know how a
 * volume works.
 */
#include "volume-internal.h"

#include <stddef.h>

#include "kind.h"

const struct kind_ops volumes_kind = {
	.name = "volumes",
	.type = &volumes_type,
	.op_prefix = "volume.",
	.recover = volumes_recover,
	.resume = volume_resume,
	.render_metrics = volumes_render_metrics,
};
