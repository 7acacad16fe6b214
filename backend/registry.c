/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * registry: the one file that names every room of backend/, as Plan 9's
 * generated conf file names every device for devtab[]. It gives core/ the
 * kinds, in the root directory's order, and the links between rooms
 * (core/links.h: a container's volume mount, a plugin's volume stats, ...)
 * and so defines backend_new (backend.h) for main, the tests and the
 * fuzzers. Reload is each kind's (its table's reload hooks, driven by
 * core/reload.c).
 * Must not know: how any kind works; it only names their tables and the
 * functions each offers another through links.h.
 */
#include "backend-internal.h"

#include "cluster.h"
#include "containers.h"
#include "engines.h"
#include "kind.h"
#include "links.h"
#include "macro.h"
#include "operation.h"
#include "plugin-proc.h"
#include "plugins.h"
#include "profiles.h"
#include "snapshots.h"
#include "resources.h"
#include "uncertain.h"
#include "volumes.h"

static const struct kind_ops *const kinds[] = {
	&plugins_kind, &profiles_kind, &runtimes_kind, &volumes_kind, &operations_kind,
	&snapshots_kind, &containers_kind, &cluster_kind,
	&resources_kind,	/* no directory: the top-level resources files, its gauges */
	&supervise_kind,	/* no directory; its metrics after every other kind's */
};

static const struct backend_links links = {
	.volume_mount_source = volume_mount_source,
	.volume_uses_plugin = volume_uses_plugin,
	.volume_index_new = volume_index_new,
	.volume_index_find = volume_index_find,
	.volume_index_free = volume_index_free,
	.volumes_refresh_stats = volumes_refresh_stats,
	.containers_using_volume = containers_using_volume,
	.container_creating_now = container_creating_now,
	.container_find_by_id = container_find_by_id,
	.containers_on_engine = containers_on,
	.uncertain_stop = uncertain_stop,
	.uncertain_render_metrics = uncertain_render_metrics,
	.uncertain_watch_call = uncertain_watch_call,
	.uncertain_settled = uncertain_settled,
	.plugin_probe = plugin_probe,
	.plugin_live = plugin_live,
	.plugin_reach = plugin_reach,
	.plugin_caps_known = plugin_caps_known,
	.plugin_default = plugin_default,
	.plugin_lists_stale = plugin_lists_stale,
	.volume_identity = volume_identity,
	.snapshot_identity = snapshot_identity,
	.snapshots_of_volume = snapshots_of_volume,
	.snapshot_name_by_id = snapshot_name_by_id,
	.containers_limits = containers_limits,
	.profiles_capacity = profiles_capacity,
	.volumes_bytes_provisioned = volumes_bytes_provisioned,
	.resources_show = resources_show,
};

int backend_new(struct config *cfg, struct backend **ret, struct nerr *err)
{
	return backend_new_with(cfg, kinds, ARRAY_SIZE(kinds), &links, ret, err);
}
