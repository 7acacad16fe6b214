/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * profile-reload: the [profile] sections of a reload (the profiles' reload
 * hook, kind.h, driven by core/reload.c), and the config whose profiles
 * are current (profiles_config: the daemon's, or the last reload's, kept in
 * the kind's slot). A new or changed profile must name a plugin nodefs
 * runs (asked through links.h, the plugins' new sections already applied):
 * every one is checked before the tree changes, and one that does not
 * refuses the reload. Then profiles/NAME/ nodes are removed, added and
 * replaced, and lookups see the new config.
 * Must not know: plugins or volumes beyond that one question.
 */
#include "profiles.h"

#include <errno.h>
#include <stdatomic.h>

#include "links.h"
#include "log.h"

const struct config *profiles_config(struct backend *b)
{
	struct profiles_state *ps = kind_state(b, &profiles_kind);
	struct config *c = ps ? atomic_load(&ps->cfg) : NULL;

	return c ? c : b->cfg;
}

static bool profile_eq(const struct config_profile *a, const struct config_profile *b)
{
	return config_str_eq(a->plugin, b->plugin) && config_str_eq(a->access_mode, b->access_mode) &&
	       config_str_eq(a->fs_type, b->fs_type) &&
	       config_strv_eq(a->mount_flags, b->mount_flags) &&
	       config_strv_eq(a->params, b->params) && a->size == b->size;
}

static bool plugin_live(struct backend *b, const char *plugin)
{
	if (!plugin || !b->links || !b->links->plugin_live)
		return true;
	return b->links->plugin_live(b, plugin);
}

int profiles_reload(struct backend *b, struct config *nc, struct reload_tally *t,
		    struct nerr *err)
{
	struct profiles_state *ps = kind_state(b, &profiles_kind);
	const struct config *oc = profiles_config(b);
	unsigned applied = 0;
	int r;

	/* validate them all before touching the tree */
	for (size_t i = 0; i < nc->nprofiles; i++) {
		const struct config_profile *np = &nc->profiles[i];
		const struct config_profile *op = config_profile_find(oc, np->name);

		if ((!op || !profile_eq(op, np)) && !plugin_live(b, np->plugin))
			return nerr_set(err, ENOENT, "profile %s names plugin %s, which nodefs does "
					"not run: profiles not reloaded", np->name, np->plugin);
	}
	for (size_t i = 0; i < oc->nprofiles; i++) {
		const struct config_profile *op = &oc->profiles[i];
		const struct config_profile *np = config_profile_find(nc, op->name);

		if (np && profile_eq(op, np))
			continue;
		struct bnode *n = bnode_lookup(profiles_dir(b), op->name);

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
	 * stays alive (profile nodes of it may still be open: reload.c) */
	atomic_store(&ps->cfg, nc);
	if (applied)
		bnode_changed(profiles_dir(b));
	t->applied += applied;
	return 0;
}
