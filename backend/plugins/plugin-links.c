/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plugin-links: what plugins/ offers rooms that may not name it
 * (snapshots/, through core/links.h): how to call a plugin now (its
 * storage handle, capabilities and secrets), its capabilities as last
 * fetched, and the plugin a command that names none means.
 *
 * Must not know: snapshots or volumes.
 */
#include "backend-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "macro.h"
#include "plugins.h"
#include "profiles.h"
#include "secrets.h"

int plugin_reach(struct backend *b, const char *name, const struct storage_ops **ret_ops,
		 void **ret_h, struct storage_caps *ret_caps, char ***ret_secrets,
		 struct bnode **ret_node, struct nerr *err)
{
	struct bnode *n = NULL;
	struct plugin *p = plugin_get(b, name, &n);
	const struct config_plugin *cp = config_plugin_find(profiles_config(b), name);
	_cleanup_free_ char *added = NULL;
	const char *path = cp ? cp->secrets : NULL;
	char **secrets = NULL;
	int r;

	if (!p)
		return nerr_set(err, ENOENT, "no plugin '%s'", name);
	r = plugin_caps(p, ret_caps, err);
	if (r >= 0 && !path && !cp)
		path = added = plugin_secrets_dup(b, name);
	if (r >= 0 && path)
		r = secrets_read(path, &secrets, err);
	if (r < 0) {
		bnode_unref(n);
		return r;
	}
	*ret_ops = plugin_ops(p);
	*ret_h = plugin_handle(p);
	*ret_secrets = secrets;
	*ret_node = n;
	return 0;
}

bool plugin_caps_known(struct backend *b, const char *name, struct storage_caps *ret)
{
	struct bnode *n = NULL;
	struct plugin *p = plugin_get(b, name, &n);
	bool known = p && plugin_caps_cached(p, ret);

	bnode_unref(n);
	return known;
}

int plugin_default(struct backend *b, char *buf, size_t len)
{
	const struct config_plugin *dp = config_default_plugin(b->cfg);
	struct bnode **v;
	size_t n;
	int r = -ENOENT;

	if (dp) {
		snprintf(buf, len, "%s", dp->name);
		return 0;
	}
	if (bnode_list(plugins_dir(b), &v, &n) < 0)
		return -ENOMEM;
	if (n == 1) {
		snprintf(buf, len, "%s", v[0]->name);
		r = 0;
	}
	bnode_list_free(v, n);
	return r;
}
