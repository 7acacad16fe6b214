/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plugin-reload: the [plugin] sections of a reload (the plugins' reload
 * hooks, kind.h, driven by core/reload.c). Added and changed ones first
 * (a new profile may name them: profiles come next in the list), removed
 * ones in the second round, once the profiles are the new config's (they
 * no longer name them). A plugin added through plugins/ctl is left as it
 * is; the default plugin cannot go or change its name without a restart.
 * Must not know: volumes or profiles' reload (a plugin's remove asks
 * whether they use it, as plugins/ctl remove does).
 */
#include "plugins.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "plugin-internal.h"

bool plugin_live(struct backend *b, const char *plugin)
{
	struct bnode *n;

	if (!plugin)
		return true;	/* the default plugin */
	n = bnode_lookup(plugins_dir(b), plugin);
	bnode_unref(n);
	return n != NULL;
}

int plugins_reload(struct backend *b, struct config *nc, struct reload_tally *t,
		   struct nerr *err)
{
	const struct config_plugin *od = config_default_plugin(b->cfg);
	const struct config_plugin *nd = config_default_plugin(nc);

	(void)err;
	if (!config_str_eq(od ? od->name : NULL, nd ? nd->name : NULL))
		config_restart_needed("the default plugin"), t->restart++;
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
			t->refused++;
			continue;
		}
		if (plugin_from_config(b, cp, p != NULL, &e) < 0) {
			log_err("reload: plugin %s: %s", cp->name, e.msg);
			t->refused++;
			continue;
		}
		log_info("reload: plugin %s: %s (%s%s%s)", cp->name, p ? "changed" : "added",
			 cp->endpoint, cp->command ? ", started by nodefs: " : "",
			 cp->command ? cp->command[0] : "");
		t->applied++;
	}
	return 0;
}

void plugins_reload_finish(struct backend *b, struct config *nc, struct reload_tally *t)
{
	const struct config_plugin *dp = config_default_plugin(b->cfg);
	struct bnode **v;
	size_t n;

	if (bnode_list(plugins_dir(b), &v, &n) < 0) {
		log_err("reload: out of memory: no plugin removed");
		t->refused++;
		goto done;
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
			t->refused++;
		} else if (plugin_remove(b, name, &e) < 0) {
			log_err("reload: plugin %s: removed from the config: not removed, %s", name,
				strstr(e.msg, "' ") ? strstr(e.msg, "' ") + 2 : e.msg);
			t->refused++;
		} else {
			log_info("reload: plugin %s: removed", name);
			t->applied++;
		}
	}
	bnode_list_free(v, n);
done:
	if (t->applied)
		bnode_changed(plugins_dir(b));
}
