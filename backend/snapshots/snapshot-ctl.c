/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * snapshot-ctl: the snapshot commands. snapshots/ctl (create SNAP
 * volume=VOL [param.K=V ...] [plugin=P], import SNAP ID [plugin=P]),
 * mkdir (refused: a snapshot needs its volume) and rmdir (delete) of
 * snapshots/SNAP, and snapshots/SNAP/ctl (delete): each validated whole
 * before anything changes, then queued with its operation.
 *
 * Must not know: how a call is made, how files render; volumes/ and
 * plugins/ but through links.h.
 */
#include "snapshot-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage.h"
#include "valid.h"

static int strv_push(char ***v, const char *s)
{
	size_t n = 0;

	while (*v && (*v)[n])
		n++;
	char **nv = realloc(*v, (n + 2) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	if (!(nv[n] = strdup(s)))
		return -ENOMEM;
	nv[n + 1] = NULL;
	return 0;
}

/* plugin= (checked), else the default one; into buf. */
static int pick_plugin(struct backend *b, const struct ctl_cmd *c, char *buf, size_t len,
		       bool dry_run, struct nerr *err)
{
	const char *p = ctl_opt_get(c, "plugin");
	const struct backend_links *ln = b->links;
	int r;

	if (p) {
		if ((r = valid_name(p, err)) < 0) {
			nerr_prefix(err, "plugin");
			return r;
		}
		snprintf(buf, len, "%s", p);
		return 0;
	}
	if (dry_run)
		return 0;
	if (!ln || !ln->plugin_default || ln->plugin_default(b, buf, len) < 0)
		return nerr_set(err, EINVAL, "no plugin given and no default plugin configured");
	return 0;
}

/* The capability known now (no call: a FUSE thread): refuse what the
 * plugin says it cannot do; an unknown answer is the action's to find. */
static int need_cap(struct backend *b, const char *plugin, int cap, const char *what,
		    const char *capname, struct nerr *err)
{
	const struct backend_links *ln = b->links;
	struct storage_caps caps;

	if (ln && ln->plugin_caps_known && ln->plugin_caps_known(b, plugin, &caps) &&
	    !STORAGE_CAP(caps.controller, cap))
		return nerr_set(err, ENOTSUP, "plugin %s cannot %s (no %s)", plugin, what, capname);
	return 0;
}

static int start(struct backend *b, struct snapshot *s, int kind, const char *cmdline,
		 struct breq *rq)
{
	struct bnode *dir = snapshots_dir(b);
	int r;

	s->state = S_CREATING;
	s->node = bnode_new(&snapshot_type, s->name, s);
	if (!dir || !s->node) {
		bnode_unref(dir);
		snapshot_free(s);
		return nerr_set(&rq->err, ENOMEM, "out of memory");
	}
	struct bnode *node = s->node;

	r = bnode_add(dir, node);
	bnode_unref(dir);
	if (r < 0) {
		nerr_set(&rq->err, -r, "snapshot '%s': %s", s->name, r == -EEXIST ? "exists" : strerror(-r));
		bnode_unref(node);
		return r;
	}
	r = snapshot_submit(s, kind, cmdline, rq);
	if (r < 0 && r != -EINPROGRESS)
		bnode_remove(node);
	bnode_unref(node);
	return r;
}

static int check_new_name(struct backend *b, const char *name, struct nerr *err)
{
	int r = valid_name(name, err);
	struct bnode *dir, *k;

	if (r < 0)
		return r;
	dir = snapshots_dir(b);
	k = dir ? bnode_lookup(dir, name) : NULL;
	bnode_unref(dir);
	if (k) {
		bnode_unref(k);
		return nerr_set(err, EEXIST, "snapshot '%s' exists", name);
	}
	return 0;
}

/* The same create written again for a snapshot whose CreateSnapshot never
 * answered (CREATING): the call is repeated with the name the record
 * keeps, so what the first one made is learnt, not made twice. 1: not
 * such a case (go on as a new create). */
static int again(struct backend *b, const struct ctl_cmd *c, const char *vol, struct breq *rq)
{
	struct bnode *dir = snapshots_dir(b);
	struct bnode *k = dir ? bnode_lookup(dir, c->argv[1]) : NULL;
	char line[512];
	int r = 1;

	bnode_unref(dir);
	if (!k)
		return 1;
	struct snapshot *s = sof(k);
	if (snapshot_state(s) == S_CREATING && !s->imported && s->volume && strcmp(s->volume, vol) == 0)
		r = snapshot_submit(s, SA_CREATE, cmdline_of(c, line, sizeof(line)), rq);
	bnode_unref(k);
	return r;
}

static int cmd_create(struct bnode *n, const struct ctl_cmd *c, struct breq *rq)
{
	struct backend *b = node_backend(n);
	const struct backend_links *ln = b->links;
	const char *vol = ctl_opt_get(c, "volume");
	char plugin[80] = "", vplugin[80], vid[1100], line[512];
	struct snapshot *s;
	int r = valid_name(c->argv[1], &rq->err);

	if (r < 0)
		return r;
	if (!vol)
		return nerr_set(&rq->err, EINVAL, "create: volume=VOL is required (a snapshot is of a volume)");
	if ((r = valid_name(vol, &rq->err)) < 0) {
		nerr_prefix(&rq->err, "volume");
		return r;
	}
	for (size_t i = 0; i < c->nopts; i++)
		if (strncmp(c->opts[i].key, "param.", 6) == 0 && !c->opts[i].key[6])
			return nerr_set(&rq->err, EINVAL, "param.: empty parameter name");
	if ((r = pick_plugin(b, c, plugin, sizeof(plugin), true, &rq->err)) < 0 || rq->dry_run)
		return r;
	if ((r = again(b, c, vol, rq)) != 1)
		return r;
	if ((r = check_new_name(b, c->argv[1], &rq->err)) < 0)
		return r;
	if (!ln || !ln->volume_identity)
		return nerr_set(&rq->err, ENOENT, "no volume '%s'", vol);
	if ((r = ln->volume_identity(b, vol, vplugin, sizeof(vplugin), vid, sizeof(vid), &rq->err)) < 0)
		return r;
	if (plugin[0] && strcmp(plugin, vplugin) != 0)
		return nerr_set(&rq->err, EINVAL, "volume %s is of plugin %s, not %s", vol, vplugin, plugin);
	r = need_cap(b, vplugin, STORAGE_CTL_CREATE_DELETE_SNAPSHOT, "take snapshots",
		     "CREATE_DELETE_SNAPSHOT", &rq->err);
	if (r < 0)
		return r;
	s = snapshot_alloc(b, c->argv[1]);
	if (!s || !(s->plugin = strdup(vplugin)) || !(s->volume = strdup(vol)) ||
	    !(s->volume_id = strdup(vid)))
		goto oom;
	for (size_t i = 0; i < c->nopts; i++) {
		char buf[4200];

		if (strncmp(c->opts[i].key, "param.", 6) != 0)
			continue;
		snprintf(buf, sizeof(buf), "%s=%s", c->opts[i].key + 6, c->opts[i].val);
		if (strv_push(&s->params, buf) < 0)
			goto oom;
	}
	return start(b, s, SA_CREATE, cmdline_of(c, line, sizeof(line)), rq);
oom:
	snapshot_free(s);
	return nerr_set(&rq->err, ENOMEM, "out of memory");
}

static int cmd_import(struct bnode *n, const struct ctl_cmd *c, struct breq *rq)
{
	struct backend *b = node_backend(n);
	const struct backend_links *ln = b->links;
	char plugin[80] = "", line[512], known[80];
	struct snapshot *s;
	int r = valid_name(c->argv[1], &rq->err);

	if (r < 0)
		return r;
	if (!c->argv[2][0] || strlen(c->argv[2]) > 1024)
		return nerr_set(&rq->err, EINVAL, "import: bad snapshot id");
	if ((r = pick_plugin(b, c, plugin, sizeof(plugin), rq->dry_run, &rq->err)) < 0 || rq->dry_run)
		return r;
	if ((r = check_new_name(b, c->argv[1], &rq->err)) < 0)
		return r;
	if (!ln || !ln->plugin_caps_known || !ln->plugin_reach)
		return nerr_set(&rq->err, EINVAL, "no plugin '%s'", plugin);
	if (snapshot_name_by_id(b, plugin, c->argv[2], known, sizeof(known)))
		return nerr_set(&rq->err, EEXIST, "snapshot id %s of plugin %s is snapshot '%s' already",
				c->argv[2], plugin, known);
	s = snapshot_alloc(b, c->argv[1]);
	if (!s || !(s->plugin = strdup(plugin)) || !(s->id = strdup(c->argv[2]))) {
		snapshot_free(s);
		return nerr_set(&rq->err, ENOMEM, "out of memory");
	}
	s->imported = true;
	return start(b, s, SA_IMPORT, cmdline_of(c, line, sizeof(line)), rq);
}

static const char *const create_opts[] = { "volume", "plugin", "param.", NULL };
static const char *const import_opts[] = { "plugin", NULL };

static const struct ctl_spec snapshots_specs[] = {
	{ .name = "create", .min_args = 1, .max_args = 1, .opts = create_opts,
	  .usage = "create SNAP volume=VOL [param.K=V ...] [plugin=P]" },
	{ .name = "import", .min_args = 2, .max_args = 2, .opts = import_opts,
	  .usage = "import SNAP ID [plugin=P]" },
};
static const bctl_fn snapshots_fns[] = { cmd_create, cmd_import };
static const struct bctl_table snapshots_ctl = { snapshots_specs, snapshots_fns, 2 };
BCTL_FUNCS(snapshots_ctl, snapshots_ctl)

static int snapshots_mkdir(struct bnode *dir, const char *name, struct breq *rq)
{
	(void)dir;
	return nerr_set(&rq->err, EPERM, "mkdir snapshots/%s: a snapshot needs its volume: "
			"write 'create %s volume=VOL' to snapshots/ctl", name, name);
}

static int snapshots_rmdir(struct bnode *dir, struct bnode *child, struct breq *rq)
{
	int r = backend_admit_rmdir(dir, child, rq);	/* after recovery */

	if (r != 0)
		return r;
	return snapshot_submit(sof(child), SA_DELETE, "rmdir", rq);
}

static const struct battr snapshots_attrs[] = {
	BCTL_ATTR(snapshots_ctl),
	{ .name = "error", .show = battr_show_error },
};

const struct btype snapshots_type = {
	.name = "snapshots",
	.attrs = snapshots_attrs,
	.nattrs = sizeof(snapshots_attrs) / sizeof(snapshots_attrs[0]),
	.can_mkdir = true,
	.mkdir = snapshots_mkdir,
	.rmdir = snapshots_rmdir,
};

/* ---- snapshots/SNAP/ctl ---- */

static int cmd_delete(struct bnode *n, const struct ctl_cmd *c, struct breq *rq)
{
	char line[128];

	if (rq->dry_run)
		return 0;
	return snapshot_submit(sof(n), SA_DELETE, cmdline_of(c, line, sizeof(line)), rq);
}

static const struct ctl_spec snapshot_specs[] = {
	{ .name = "delete", .min_args = 0, .max_args = 0, .usage = "delete" },
};
static const bctl_fn snapshot_fns[] = { cmd_delete };
const struct bctl_table snapshot_ctl_table = { snapshot_specs, snapshot_fns, 1 };
