/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * volume: volumes/ and volumes/NAME/, CSI volumes and their lifecycle.
 */
#include "backend-internal.h"

#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "units.h"
#include "valid.h"

/* Everything a create names, checked before anything happens. */
struct volume_req {
	const char *name;
	const char *plugin;
	const char *profile;
	uint64_t size;
};

static int resolve_create(struct backend *b, const struct ctl_cmd *c, const char *name,
			  struct volume_req *ret, struct nerr *err)
{
	struct volume_req v = { .name = name };
	const char *s;
	struct bnode *k;
	int r;

	r = valid_name(name, err);
	if (r < 0)
		return r;
	k = bnode_lookup(b->volumes, name);
	if (k) {
		bnode_unref(k);
		return nerr_set(err, EEXIST, "volume '%s' exists", name);
	}
	if (c && (s = ctl_opt_get(c, "size"))) {
		r = parse_size(s, &v.size, err);
		if (r < 0)
			return r;
	}
	if (c && (s = ctl_opt_get(c, "mode"))) {
		size_t i;
		for (i = 0; config_access_modes[i] && strcmp(config_access_modes[i], s); i++)
			;
		if (!config_access_modes[i])
			return nerr_set(err, EINVAL, "unknown access mode '%s' (one of: single-node-writer, single-node-reader-only, multi-node-reader-only, multi-node-single-writer, multi-node-multi-writer, single-node-single-writer, single-node-multi-writer)", s);
	}
	if (c && (s = ctl_opt_get(c, "fs")) && (r = valid_name(s, err)) < 0) {
		nerr_prefix(err, "fs");
		return r;
	}
	v.profile = c ? ctl_opt_get(c, "profile") : NULL;
	if (v.profile) {
		const struct config_profile *p = NULL;
		for (size_t i = 0; i < b->cfg->nprofiles; i++)
			if (strcmp(b->cfg->profiles[i].name, v.profile) == 0)
				p = &b->cfg->profiles[i];
		if (!p)
			return nerr_set(err, EINVAL, "no profile '%s'", v.profile);
		v.plugin = p->plugin;
	}
	if (c && (s = ctl_opt_get(c, "plugin")))
		v.plugin = s;
	if (!v.plugin) {
		for (size_t i = 0; i < b->cfg->nplugins; i++)
			if (b->cfg->plugins[i].is_default)
				v.plugin = b->cfg->plugins[i].name;
	}
	if (!v.plugin)
		return nerr_set(err, EINVAL, "no plugin given and no default plugin configured");
	k = bnode_lookup(b->plugins, v.plugin);
	if (!k)
		return nerr_set(err, EINVAL, "no plugin '%s'", v.plugin);
	bnode_unref(k);
	*ret = v;
	return 0;
}

static int volume_create(struct backend *b, const struct volume_req *v, struct breq *rq)
{
	return nerr_set(&rq->err, ENOTSUP, "plugin '%s': the CSI client is not wired yet", v->plugin);
}

static int cmd_create(struct bnode *n, const struct ctl_cmd *c, struct breq *rq)
{
	struct backend *b = node_backend(n);
	struct volume_req v;
	int r = resolve_create(b, c, c->argv[1], &v, &rq->err);

	return r < 0 ? r : volume_create(b, &v, rq);
}

static int cmd_import(struct bnode *n, const struct ctl_cmd *c, struct breq *rq)
{
	struct backend *b = node_backend(n);
	struct volume_req v;
	int r = resolve_create(b, c, c->argv[1], &v, &rq->err);

	return r < 0 ? r : volume_create(b, &v, rq);
}

static const char *const create_opts[] = { "plugin", "size", "profile", "mode", "fs", "param.", NULL };
static const char *const import_opts[] = { "plugin", "profile", NULL };

static const struct ctl_spec volumes_specs[] = {
	{ .name = "create", .min_args = 1, .max_args = 1, .opts = create_opts,
	  .usage = "create NAME [plugin=P] [size=SIZE] [profile=PR] [mode=ACCESS_MODE] [fs=TYPE] [param.K=V ...]" },
	{ .name = "import", .min_args = 2, .max_args = 2, .opts = import_opts,
	  .usage = "import NAME ID [plugin=P] [profile=PR]" },
};
static const bctl_fn volumes_fns[] = { cmd_create, cmd_import };
static const struct bctl_table volumes_ctl = { volumes_specs, volumes_fns, 2 };

BCTL_FUNCS(volumes_ctl, volumes_ctl)

static int volumes_mkdir(struct bnode *dir, const char *name, struct breq *rq)
{
	struct backend *b = node_backend(dir);
	struct volume_req v;
	int r = resolve_create(b, NULL, name, &v, &rq->err);
	return r < 0 ? r : volume_create(b, &v, rq);
}

static int volumes_rmdir(struct bnode *dir, struct bnode *child, struct breq *rq)
{
	return nerr_set(&rq->err, ENOTSUP, "volume '%s': the CSI client is not wired yet", child->name);
}

static const struct battr volumes_attrs[] = {
	BCTL_ATTR(volumes_ctl),
	{ .name = "error", .show = battr_show_error },
};

const struct btype volumes_type = {
	.name = "volumes",
	.attrs = volumes_attrs,
	.nattrs = sizeof(volumes_attrs) / sizeof(volumes_attrs[0]),
	.can_mkdir = true,
	.mkdir = volumes_mkdir,
	.rmdir = volumes_rmdir,
};

int volume_mount_source(struct backend *b, const char *name, char **ret_path, struct nerr *err)
{
	struct bnode *k = bnode_lookup(b->volumes, name);

	if (!k)
		return nerr_set(err, ENOENT, "no volume '%s'", name);
	bnode_unref(k);
	return nerr_set(err, EBUSY, "volume '%s' is not published", name);
}
