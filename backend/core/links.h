/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * links: the narrow interfaces between rooms that must not name each
 * other. Where one kind needs another (a container mounts a volume; a
 * volume may not go while a container uses it; a plugin's refresh updates
 * its volumes' stats; the watcher of uncertain outcomes asks the containers
 * what they are making), the caller goes through one of these pointers,
 * declared here, below both, and filled from above: the registry
 * (backend/registry.c), which alone names every room, hands core the kinds
 * and these links together (backend_new_with). core holds them and calls
 * none of them itself; a NULL entry is a room that is not linked in (a
 * unit test's backend), and its callers then act as if the other side had
 * nothing.
 *
 * Must not know: any room's types beyond their forward declarations.
 */
#ifndef NODEFS_LINKS_H
#define NODEFS_LINKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct backend;
struct bnode;
struct container;
struct engine;
struct nerr;
struct operation;
struct sbuf;
struct storage_caps;
struct storage_ops;
struct volume_index;

struct backend_links {
	/* volumes/, for containers/: where a container mounts volume name
	 * from (its publish target); -ENOENT no such volume, -EBUSY not
	 * published. */
	int (*volume_mount_source)(struct backend *b, const char *name, char **ret_path,
				   struct nerr *err);
	/* volumes/, for plugins/: whether a volume uses plugin (its name
	 * in buf); the plugin's volumes by id (NULL on OOM), looked up and
	 * freed; measure the plugin's volumes for the metrics (a worker). */
	bool (*volume_uses_plugin)(struct backend *b, const char *plugin, char *buf, size_t len);
	struct volume_index *(*volume_index_new)(struct backend *b, const char *plugin);
	const char *(*volume_index_find)(const struct volume_index *ix, const char *id);
	void (*volume_index_free)(struct volume_index *ix);
	void (*volumes_refresh_stats)(struct backend *b, const char *plugin);

	/* containers/, for volumes/: how many containers mount volume vol
	 * with volume=, their names comma-separated in buf. */
	size_t (*containers_using_volume)(struct backend *b, const char *vol, char *buf,
					  size_t len);
	/* containers/, for uncertain/: whether a create of name on e is
	 * under way now; whether e's container id is one of ours (its node
	 * referenced in *ret_node). */
	bool (*container_creating_now)(struct backend *b, struct engine *e, const char *name);
	struct container *(*container_find_by_id)(struct backend *b, struct engine *e,
						  const char *id, struct bnode **ret_node);
	/* containers/, for engines/' reload: whether e has any container. */
	bool (*containers_on_engine)(struct backend *b, struct engine *e);

	/* uncertain/, for engines/ and operations/: stop its watcher (with
	 * the runtimes' monitor); its metric family, rendered after the
	 * operations' ones. */
	void (*uncertain_stop)(struct backend *b);
	int (*uncertain_render_metrics)(struct backend *b, struct sbuf *out);
	/* uncertain/, for snapshots/: a call whose answer never came,
	 * repeated by its owner in the background (fn runs once on the
	 * watcher after delay_ms and takes ctx; drop frees ctx if the watcher
	 * stops first), and its end counted (an event, a line in op's outcome,
	 * nodefs_uncertain_outcomes_total); uncertain.h says how. */
	int (*uncertain_watch_call)(struct backend *b, const char *name, uint64_t delay_ms,
				    void (*fn)(struct backend *, void *), void (*drop)(void *),
				    void *ctx);
	void (*uncertain_settled)(struct backend *b, const char *kind, const char *name,
				  struct operation *op, const char *result, const char *line);

	/* plugins/, for supervise/: probe the plugin of node (a plugins/NAME
	 * node) through its storage handle; -ECANCELED when it has none. */
	int (*plugin_probe)(struct bnode *node, bool *ready, struct nerr *err);

	/* For resources/ (node resources): containers/ calls fn once per
	 * running (or paused) container with its runtime's name and limits
	 * (cpus 0, memory 0: none); plugins/ calls fn once per profile whose
	 * capacity the last refresh had (GetCapacity); volumes/ sums the bytes
	 * of the volumes made (capacity, else the size asked). Any thread. */
	void (*containers_limits)(struct backend *b,
				  void (*fn)(void *ctx, const char *runtime, double cpus,
					     uint64_t memory),
				  void *ctx);
	void (*profiles_capacity)(struct backend *b,
				  void (*fn)(void *ctx, const char *profile, long long bytes),
				  void *ctx);
	uint64_t (*volumes_bytes_provisioned)(struct backend *b);
	/* resources/, for core's top-level files and for cluster/'s record:
	 * how is RESOURCES_TEXT (0), RESOURCES_JSON (1, indented) or
	 * RESOURCES_JSON_COMPACT (2); -E2BIG/-ENOMEM. (Its gauges are its
	 * kind's render_metrics.) */
	int (*resources_show)(struct backend *b, struct sbuf *out, int how);
	/* plugins/, for profiles/' reload: whether plugin is one nodefs runs. */
	bool (*plugin_live)(struct backend *b, const char *plugin);

	/* plugins/, for snapshots/: how to call plugin name now: its storage
	 * implementation and handle, its capabilities (fetched once: a call
	 * the first time) and its secrets (read now; secrets_free), its node
	 * referenced in *ret_node (bnode_unref when done); -ENOENT no such
	 * plugin (a worker's). The capabilities as last fetched, without a
	 * call (FUSE threads): false when never, or no such plugin. The
	 * plugin a command naming none means (the config's default, or the
	 * only one) into buf: -ENOENT when none. */
	int (*plugin_reach)(struct backend *b, const char *name, const struct storage_ops **ret_ops,
			    void **ret_h, struct storage_caps *ret_caps, char ***ret_secrets,
			    struct bnode **ret_node, struct nerr *err);
	bool (*plugin_caps_known)(struct backend *b, const char *name, struct storage_caps *ret);
	int (*plugin_default)(struct backend *b, char *buf, size_t len);
	/* plugins/: a snapshot of plugin name changed: its lists are fetched
	 * again at the next read. */
	void (*plugin_lists_stale)(struct backend *b, const char *name);

	/* volumes/, for snapshots/: volume name's plugin and id, copied;
	 * -ENOENT no such volume, -EBUSY not made yet (no id). */
	int (*volume_identity)(struct backend *b, const char *name, char *plugin, size_t plen,
			       char *id, size_t idlen, struct nerr *err);

	/* snapshots/, for volumes/ and plugins/: snapshot name's plugin and
	 * id (-ENOENT; -EBUSY not READY); the names of volume vol's
	 * snapshots, one a line; the name of plugin's snapshot id. */
	int (*snapshot_identity)(struct backend *b, const char *name, char *plugin, size_t plen,
				 char *id, size_t idlen, struct nerr *err);
	int (*snapshots_of_volume)(struct backend *b, const char *vol, struct sbuf *out);
	bool (*snapshot_name_by_id)(struct backend *b, const char *plugin, const char *id,
				    char *buf, size_t len);
};

#endif
