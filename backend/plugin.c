/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plugin: plugins/ and plugins/NAME/, the CSI plugins nodefs talks to.
 * Plugins come from the config and from `plugins/ctl add NAME ENDPOINT`.
 */
#include "backend-internal.h"

#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "valid.h"

struct plugin {
	struct backend *b;
	char *name;
	char *endpoint;
	bool from_config;
};

static void plugin_free(struct plugin *p)
{
	if (!p)
		return;
	free(p->name);
	free(p->endpoint);
	free(p);
}

static int show_endpoint(struct bnode *n, struct sbuf *out)
{
	struct plugin *p = n->priv;

	return sbuf_printf(out, "%s\n", p->endpoint);
}

static const struct battr plugin_attrs[] = {
	{ .name = "endpoint", .show = show_endpoint },
	{ .name = "error", .show = battr_show_error },
};

static void plugin_node_free(struct bnode *n)
{
	plugin_free(n->priv);
}

static const struct btype plugin_type = {
	.name = "plugin",
	.attrs = plugin_attrs,
	.nattrs = sizeof(plugin_attrs) / sizeof(plugin_attrs[0]),
	.free = plugin_node_free,
};

static int valid_endpoint(const char *ep, struct nerr *err)
{
	static const char pre[] = "unix://";

	if (strncmp(ep, pre, sizeof(pre) - 1) != 0 || ep[sizeof(pre) - 1] != '/')
		return nerr_set(err, EINVAL, "endpoint '%s' is not unix:///absolute/path", ep);
	return valid_path(ep + sizeof(pre) - 1, NULL, 0, err);
}

static int plugin_add(struct backend *b, const char *name, const char *endpoint,
		      bool from_config, struct nerr *err)
{
	struct plugin *p;
	struct bnode *n;
	int r;

	r = valid_name(name, err);
	if (r < 0)
		return r;
	r = valid_endpoint(endpoint, err);
	if (r < 0)
		return r;
	p = calloc(1, sizeof(*p));
	if (!p)
		return nerr_set(err, ENOMEM, "out of memory");
	p->b = b;
	p->name = strdup(name);
	p->endpoint = strdup(endpoint);
	p->from_config = from_config;
	if (!p->name || !p->endpoint) {
		plugin_free(p);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	n = bnode_new(&plugin_type, name, p);
	if (!n) {
		plugin_free(p);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	r = bnode_add(b->plugins, n);
	bnode_unref(n);
	if (r == -EEXIST)
		return nerr_set(err, EEXIST, "plugin '%s' exists", name);
	if (r < 0)
		return nerr_set(err, -r, "plugin '%s': %s", name, strerror(-r));
	events_emit(b->events, "plugin", name, NULL, "added", NULL, endpoint);
	return 0;
}

static int cmd_add(struct bnode *n, const struct ctl_cmd *c, struct breq *rq)
{
	return plugin_add(node_backend(n), c->argv[1], c->argv[2], false, &rq->err);
}

static int cmd_remove(struct bnode *n, const struct ctl_cmd *c, struct breq *rq)
{
	struct backend *b = node_backend(n);
	struct bnode *k = bnode_lookup(b->plugins, c->argv[1]);

	if (!k)
		return nerr_set(&rq->err, ENOENT, "no plugin '%s'", c->argv[1]);
	/* volumes on the plugin keep it: their objects name it */
	for (size_t i = 0; i < b->cfg->nprofiles; i++) {
		const char *pp = b->cfg->profiles[i].plugin;
		if (pp && strcmp(pp, c->argv[1]) == 0) {
			bnode_unref(k);
			return nerr_set(&rq->err, EBUSY, "plugin '%s' is used by profile '%s'",
					c->argv[1], b->cfg->profiles[i].name);
		}
	}
	bnode_remove(k);
	bnode_unref(k);
	events_emit(b->events, "plugin", c->argv[1], "added", "removed", NULL, NULL);
	return 0;
}

static const struct ctl_spec plugins_specs[] = {
	{ .name = "add", .min_args = 2, .max_args = 2, .usage = "add NAME ENDPOINT" },
	{ .name = "remove", .min_args = 1, .max_args = 1, .usage = "remove NAME" },
};
static const bctl_fn plugins_fns[] = { cmd_add, cmd_remove };
static const struct bctl_table plugins_ctl = { plugins_specs, plugins_fns, 2 };

BCTL_FUNCS(plugins_ctl, plugins_ctl)

static const struct battr plugins_attrs[] = {
	BCTL_ATTR(plugins_ctl),
	{ .name = "error", .show = battr_show_error },
};

const struct btype plugins_type = {
	.name = "plugins",
	.attrs = plugins_attrs,
	.nattrs = sizeof(plugins_attrs) / sizeof(plugins_attrs[0]),
};

int plugins_init(struct backend *b, struct nerr *err)
{
	for (size_t i = 0; i < b->cfg->nplugins; i++) {
		struct config_plugin *cp = &b->cfg->plugins[i];
		int r = plugin_add(b, cp->name, cp->endpoint, true, err);

		if (r < 0)
			return r;
	}
	return 0;
}

void plugins_stop(struct backend *b)
{
}
