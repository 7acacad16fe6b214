/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * reload: a new config read at SIGHUP, against the one the daemon runs.
 *
 * Applies what can change under a running mount: the [plugin] sections
 * (plugins/NAME/ added, replaced when their endpoint, command or
 * keep_running changed, removed unless a profile or a volume still uses
 * them: that part is refused with a log line and the rest goes on), the
 * [profile] sections (profiles/NAME/ nodes added, removed, replaced) and
 * the [runtime] sections (a changed one gets a new driver handle, calls in
 * flight finishing on the old one: engine_reload; one that moves where the
 * containers live is refused while the runtime has any). It
 * reports every other difference as needing a restart, changing nothing
 * of it. A plugin added through plugins/ctl is left as it is. The configs a
 * reload replaced stay alive until backend_free: a profile node or a
 * reader that looked a profile up a moment ago may still point into one.
 * Must not know: how the file was read, the log level (main owns those).
 */
#include "backend-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "containers.h"
#include "engines.h"
#include "log.h"
#include "plugins.h"
#include "profiles.h"

static bool str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool strv_eq(char *const *a, char *const *b)
{
	size_t i;

	for (i = 0; a && b && a[i] && b[i]; i++)
		if (strcmp(a[i], b[i]) != 0)
			return false;
	return (!a || !a[i]) && (!b || !b[i]);
}

static bool profile_eq(const struct config_profile *a, const struct config_profile *b)
{
	return str_eq(a->plugin, b->plugin) && str_eq(a->access_mode, b->access_mode) &&
	       str_eq(a->fs_type, b->fs_type) && strv_eq(a->mount_flags, b->mount_flags) &&
	       strv_eq(a->params, b->params) && a->size == b->size;
}

static void restart_needed(const char *what)
{
	log_warn("reload: %s changed: needs a restart (not applied)", what);
}

/* Every [nodefs] key but log_level needs a restart. */
static unsigned nodefs_diff(const struct config *o, const struct config *n)
{
	unsigned k = 0;

	if (!str_eq(o->state_dir, n->state_dir))
		restart_needed("[nodefs] state_dir"), k++;
	if (!strv_eq(o->allowed_targets, n->allowed_targets))
		restart_needed("[nodefs] allowed_targets"), k++;
	if (!str_eq(o->ctl_group, n->ctl_group))
		restart_needed("[nodefs] ctl_group"), k++;
	if (!str_eq(o->read_group, n->read_group))
		restart_needed("[nodefs] read_group"), k++;
	if (o->csi_timeout_ms != n->csi_timeout_ms)
		restart_needed("[nodefs] csi_timeout"), k++;
	if (o->retry_backoff_ms != n->retry_backoff_ms || o->retry_max_ms != n->retry_max_ms)
		restart_needed("[nodefs] retry_backoff/retry_max"), k++;
	if (o->operations_keep != n->operations_keep)
		restart_needed("[nodefs] operations_keep"), k++;
	if (o->events_keep != n->events_keep)
		restart_needed("[nodefs] events_keep"), k++;
	if (o->reader_memory != n->reader_memory)
		restart_needed("[nodefs] reader_memory"), k++;
	if (o->reconcile_interval_ms != n->reconcile_interval_ms)
		restart_needed("[nodefs] reconcile_interval"), k++;
	if (o->cache_max_age_ms != n->cache_max_age_ms)
		restart_needed("[nodefs] cache_max_age"), k++;
	if (!str_eq(o->name_prefix, n->name_prefix) ||
	    o->uncertain_timeout_ms != n->uncertain_timeout_ms)
		restart_needed("[nodefs] name_prefix/uncertain_timeout"), k++;
	return k;
}

/* Whether plugin is one the daemon runs now (from the config, or added
 * through plugins/ctl). */
static bool plugin_live(struct backend *b, const char *plugin)
{
	struct bnode *n;

	if (!plugin)
		return true;	/* the default plugin */
	n = bnode_lookup(b->plugins, plugin);
	bnode_unref(n);
	return n != NULL;
}

/* The [plugin] sections, added and changed ones first (a new profile may
 * name them), removed ones after the profiles (the new profiles no longer
 * name them). */
static unsigned plugins_apply(struct backend *b, const struct config *nc, unsigned *refused)
{
	unsigned k = 0;

	for (size_t i = 0; i < nc->nplugins; i++) {
		const struct config_plugin *cp = &nc->plugins[i];
		struct nerr e = { 0 };
		struct bnode *pn;
		struct plugin *p = plugin_get(b, cp->name, &pn);
		bool from_config = false, same = p && plugin_matches(p, cp, &from_config);

		if (p)
			bnode_unref(pn);
		if (same)
			continue;
		if (p && !from_config) {
			log_warn("reload: plugin %s: added through plugins/ctl: kept as it is "
				 "(remove it there for the config's to apply)", cp->name);
			(*refused)++;
			continue;
		}
		if (plugin_from_config(b, cp, p != NULL, &e) < 0) {
			log_err("reload: plugin %s: %s", cp->name, e.msg);
			(*refused)++;
			continue;
		}
		log_info("reload: plugin %s: %s (%s%s%s)", cp->name, p ? "changed" : "added",
			 cp->endpoint, cp->command ? ", started by nodefs: " : "",
			 cp->command ? cp->command[0] : "");
		k++;
	}
	return k;
}

static unsigned plugins_drop(struct backend *b, const struct config *nc, unsigned *refused)
{
	const struct config_plugin *dp = config_default_plugin(b->cfg);
	struct bnode **v;
	unsigned k = 0;
	size_t n;

	if (bnode_list(b->plugins, &v, &n) < 0) {
		log_err("reload: out of memory: no plugin removed");
		(*refused)++;
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		const char *name = v[i]->name;
		struct nerr e = { 0 };
		struct bnode *pn;
		struct plugin *p = plugin_get(b, name, &pn);
		bool from_config = false;

		if (!p)
			continue;
		plugin_matches(p, &(struct config_plugin){ .endpoint = "" }, &from_config);
		bnode_unref(pn);
		if (!from_config || config_plugin_find(nc, name))
			continue;
		if (dp && strcmp(dp->name, name) == 0) {
			log_err("reload: plugin %s: removed from the config but it is the default "
				"plugin: kept (needs a restart)", name);
			(*refused)++;
		} else if (plugin_remove(b, name, &e) < 0) {
			log_err("reload: plugin %s: removed from the config: not removed, %s", name,
				strstr(e.msg, "' ") ? strstr(e.msg, "' ") + 2 : e.msg);
			(*refused)++;
		} else {
			log_info("reload: plugin %s: removed", name);
			k++;
		}
	}
	bnode_list_free(v, n);
	return k;
}

/* The [runtime] sections: each changed one gets a new driver handle; calls
 * in flight finish on the old one, closed with the last of them. */
static unsigned runtimes_apply(struct backend *b, const struct config *nc, unsigned *refused)
{
	unsigned k = 0;

	for (size_t i = 0; i < b->nengines; i++) {
		struct engine *e = &b->engines[i];
		struct nerr e2 = { 0 };
		int r = engine_reload(e, nc, containers_on(b, e), &e2);

		if (r < 0) {
			log_err("reload: runtime %s: %s", e->ops->name, e2.msg);
			(*refused)++;
		} else if (r > 0) {
			log_info("reload: runtime %s: changed (calls under way finish with the old "
				 "settings)", e->ops->name);
			k++;
		}
	}
	return k;
}

int backend_reload(struct backend *b, struct config *nc, struct nerr *err)
{
	const struct config *oc = backend_profiles(b);
	unsigned restart = 0, applied = 0, pl_applied = 0, rt_applied = 0, refused = 0;
	struct config **keep;
	int r;

	restart += nodefs_diff(b->cfg, nc);
	{
		const struct config_plugin *od = config_default_plugin(b->cfg);
		const struct config_plugin *nd = config_default_plugin(nc);

		if (!str_eq(od ? od->name : NULL, nd ? nd->name : NULL))
			restart_needed("the default plugin"), restart++;
	}

	pl_applied = plugins_apply(b, nc, &refused);

	/* profiles: validate them all before touching the tree */
	for (size_t i = 0; i < nc->nprofiles; i++) {
		const struct config_profile *np = &nc->profiles[i];
		const struct config_profile *op = config_profile_find(oc, np->name);

		if ((!op || !profile_eq(op, np)) && !plugin_live(b, np->plugin)) {
			r = nerr_set(err, ENOENT, "profile %s names plugin %s, which nodefs does not "
				     "run: profiles not reloaded", np->name, np->plugin);
			goto refuse;
		}
	}
	keep = realloc(b->old_cfgs, (b->nold_cfgs + 1) * sizeof(*keep));
	if (!keep) {
		r = nerr_set(err, ENOMEM, "out of memory");
		goto refuse;
	}
	b->old_cfgs = keep;
	for (size_t i = 0; i < oc->nprofiles; i++) {
		const struct config_profile *op = &oc->profiles[i];
		const struct config_profile *np = config_profile_find(nc, op->name);

		if (np && profile_eq(op, np))
			continue;
		struct bnode *n = bnode_lookup(b->profiles, op->name);

		if (n) {
			bnode_remove(n);
			bnode_unref(n);
		}
		if (!np)
			log_info("reload: profile %s: removed", op->name);
	}
	for (size_t i = 0; i < nc->nprofiles; i++) {
		struct config_profile *np = &nc->profiles[i];
		const struct config_profile *op = config_profile_find(oc, np->name);

		if (op && profile_eq(op, np))
			continue;
		/* first the node, then the lookups see the profile */
		r = profile_add(b, np, err);
		if (r < 0)
			log_err("reload: profile %s: %s", np->name, err->msg);
		else
			log_info("reload: profile %s: %s", np->name, op ? "changed" : "added");
		applied++;
	}
	for (size_t i = 0; i < oc->nprofiles; i++)
		if (!config_profile_find(nc, oc->profiles[i].name))
			applied++;
	/* volume creates look profiles up here from now on; the old config
	 * stays alive (profile nodes of it may still be open) */
	b->old_cfgs[b->nold_cfgs++] = nc;
	atomic_store(&b->pcfg, nc);
	if (applied)
		bnode_changed(b->profiles);
	pl_applied += plugins_drop(b, nc, &refused);
	if (pl_applied)
		bnode_changed(b->plugins);
	rt_applied = runtimes_apply(b, nc, &refused);
	{
		char rt[48] = "";

		if (rt_applied)
			snprintf(rt, sizeof(rt), "%u runtime change%s, ", rt_applied,
				 rt_applied == 1 ? "" : "s");
		log_info("reload: %s%u plugin change%s and %u profile change%s applied, %u "
			 "refused, %u change%s need%s a restart", rt, pl_applied,
			 pl_applied == 1 ? "" : "s", applied, applied == 1 ? "" : "s", refused,
			 restart, restart == 1 ? "" : "s", restart == 1 ? "s" : "");
	}
	return 0;
refuse:
	config_free(nc);
	return r;
}
