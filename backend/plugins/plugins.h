/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plugins: what the rooms above (volumes/, the registry) may ask of
 * plugins/: a plugin by name, its capabilities, node id and storage
 * handle, its secrets, its lists marked stale; a reload's add, replace
 * and remove (plugin-reload.c, the plugins' reload hooks), and whether a
 * plugin runs (for profiles/, through links.h).
 * Must not know: volumes or containers (what it needs of volumes comes
 * through links.h).
 */
#ifndef NODEFS_PLUGINS_H
#define NODEFS_PLUGINS_H

#include "kind.h"

#include "backend-internal.h"

struct config_plugin;
struct kind_ops;
struct plugin;

/* plugins/: the kind's table (plugin-kind.c) and its type (plugin.c). */
extern const struct kind_ops plugins_kind;
/* plugins/: the kind's directory, which the hub keeps (kind_dir_named). */
static inline struct bnode *plugins_dir(struct backend *b)
{
	return kind_dir_named(b, "plugins");
}
extern const struct btype plugins_type;

/* Whether plugin is one the daemon runs now (from the config, or added
 * through plugins/ctl; NULL: the default plugin, always). Any thread. The
 * profiles' reload asks it through links.h. */
bool plugin_live(struct backend *b, const char *plugin);
/* plugins/ctl remove, and a reload's: take plugin name out unless a
 * profile or a volume uses it (-EBUSY naming it), -ENOENT. Any thread. */
int plugin_remove(struct backend *b, const char *name, struct nerr *err);
/* A reload's: add the plugin of section cp, or (replace) put it in place
 * of the running one of its name, whose process is ended first (waits up
 * to 10 s for it: -EBUSY). -errno with err. Not a FUSE thread. */
int plugin_from_config(struct backend *b, const struct config_plugin *cp, bool replace,
		       struct nerr *err);

/* Whether running plugin p is what section cp says (endpoint, command,
 * keep_running); *ret_from_config: p came from the config, not from
 * plugins/ctl. Any thread. */
bool plugin_matches(struct plugin *p, const struct config_plugin *cp, bool *ret_from_config);

/* A plugin by name (its node referenced in *ret_node), or NULL. */
struct plugin *plugin_get(struct backend *b, const char *name, struct bnode **ret_node);
/* The plugin's capabilities, fetched once (a call the first time). */
int plugin_caps(struct plugin *p, struct storage_caps *ret, struct nerr *err);
/* The capabilities as last fetched, without a call: for checks on FUSE
 * threads, which must not wait on a plugin. false when never fetched. */
bool plugin_caps_cached(struct plugin *p, struct storage_caps *ret);
int plugin_node_id(struct plugin *p, char *buf, size_t len, struct nerr *err);
/* How to call the plugin: its storage implementation and handle (NULL
 * handle before plugins_start and after plugins_stop). */
const struct storage_ops *plugin_ops(struct plugin *p);
void *plugin_handle(struct plugin *p);
const char *plugin_name(struct plugin *p);
/* The secrets file plugin `name` was added with (plugins/ctl add
 * secrets=), malloc'd, or NULL (none, no such plugin, or OOM). Any thread. */
char *plugin_secrets_dup(struct backend *b, const char *name);
/* A volume of plugin `name` was made, adopted or deleted: its lists are
 * refreshed when next read. Any thread. */
void plugin_lists_stale(struct backend *b, const char *name);
/* links.h's plugin_probe: probe the plugin of node (plugins/NAME) through
 * its storage handle; -ECANCELED when it has none (worker pool). */
int plugin_probe(struct bnode *node, bool *ready, struct nerr *err);
/* links.h's plugin_reach, plugin_caps_known and plugin_default
 * (plugin-links.c). */
int plugin_reach(struct backend *b, const char *name, const struct storage_ops **ret_ops,
		 void **ret_h, struct storage_caps *ret_caps, char ***ret_secrets,
		 struct bnode **ret_node, struct nerr *err);
bool plugin_caps_known(struct backend *b, const char *name, struct storage_caps *ret);
int plugin_default(struct backend *b, char *buf, size_t len);
/* links.h's profiles_capacity: fn once per profile line of each plugin's
 * capacity file as last refreshed ("NAME BYTES"; the plugin's "default"
 * and the failed ones left out). Any thread. */
void profiles_capacity(struct backend *b,
		       void (*fn)(void *ctx, const char *profile, long long bytes), void *ctx);

#endif
