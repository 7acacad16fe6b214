/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plugin-kind: the plugins' table of hooks for the hub (kind.h). It only
 * names what the plugin module already exports; it must not know how a
 * plugin works.
 */
#include "plugin-internal.h"

#include <stddef.h>

#include "kind.h"

const struct kind_ops plugins_kind = {
	.name = "plugins",
	.type = &plugins_type,
	.ready_count = true,
	.init = plugins_init,
	.start = plugins_start,
	.tick = plugins_tick,
	.render_metrics = plugins_render_metrics,
	.reload = plugins_reload,
	.reload_finish = plugins_reload_finish,
	.reload_noun = "plugin",
	.cancel = plugins_cancel,
	.stop = plugins_stop,
};
