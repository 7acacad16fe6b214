/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * volume-ctl: the volume commands. volumes/ctl (create, import), mkdir and
 * rmdir of volumes/NAME, and volumes/NAME/ctl (publish, unpublish, stage,
 * unstage, expand, destroy): each is validated whole before anything
 * changes (a rejected command changes nothing), then queued as an action
 * with its operation (volume_submit), which the state machine runs.
 *
 * Must not know: the storage interface beyond the cached capabilities,
 * how a step runs, how files render.
 */
#include "volume-internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "operation.h"
#include "profiles.h"
#include "units.h"
#include "valid.h"

/* ---- actions: queued with their operation ---- */

/* After run, before the writer is answered. */
void volume_act_done(struct action *a, int result)
{
	struct volume *v = ((struct vact *)a)->v;

	(void)result;
	if (atomic_fetch_sub(&v->inflight, 1) == 1)
		bnode_changed(v->node);	/* settled: wakes `wait` readers */
}

void volume_act_free(struct action *a)
{
	struct vact *x = (struct vact *)a;

	free(x->target);
	bnode_unref(x->node);
	free(x);
}

int volume_submit(struct volume *v, int kind, const char *cmdline, struct breq *rq, struct vact *t)
{
	static const char *const types[] = {
		"volume.create", "volume.import", "volume.publish", "volume.stage", "volume.unpublish",
		"volume.unstage", "volume.expand", "volume.destroy",
	};
	struct vact *x = calloc(1, sizeof(*x));
	char object[80];
	int r;

	if (!x) {
		if (t)
			free(t->target);
		return nerr_set(&rq->err, ENOMEM, "out of memory");
	}
	if (t)
		*x = *t;
	if (kind != VA_CREATE && kind != VA_IMPORT && !atomic_load(&v->queued)) {
		free(x->target);
		free(x);
		return nerr_set(&rq->err, EBUSY, "volume %s is being created", v->name);
	}
	if (rq->nonblock) {
		if (atomic_load(&v->inflight) > 0) {
			free(x->target);
			free(x);
			return nerr_set(&rq->err, EBUSY, "volume %s has a command in flight", v->name);
		}
	}
	x->v = v;
	x->node = bnode_ref(v->node);
	x->kind = kind;
	x->a.b = v->b;
	x->a.rq = rq;
	x->a.run = volume_run_action;
	x->a.done = volume_act_done;
	x->a.free = volume_act_free;
	x->a.self_sync = true;	/* each step's first checkpoint is durable */
	snprintf(object, sizeof(object), "volumes/%s", v->name);
	r = op_begin(v->b, types[kind], object, cmdline, rq, &x->a.op, &rq->err);
	if (r < 0) {
		volume_act_free(&x->a);
		return r;
	}
	if (kind == VA_CREATE) {
		/* the name CreateVolume gets: retried, it makes the same volume */
		char cn[160];
		uint32_t salt = 0;

		/* the salt keeps a lost state dir (operation ids restarting at
		 * 000000) from adopting an old volume of the same name */
		if (getrandom(&salt, sizeof(salt), GRND_NONBLOCK) != sizeof(salt))
			salt = (uint32_t)time(NULL) ^ (uint32_t)getpid();
		snprintf(cn, sizeof(cn), "nodefs-%s-%s-%08x", v->name, x->a.op->id, salt);
		pthread_mutex_lock(&v->lock);
		free(v->csi_name);
		v->csi_name = strdup(cn);
		pthread_mutex_unlock(&v->lock);
	}
	atomic_fetch_add(&v->inflight, 1);
	/* a new volume's first word, with the operation that makes it, before
	 * the create can run and move it (a fresh queue never answers EBUSY) */
	if (kind == VA_CREATE)
		op_events_emit(v->b, "volume", v->name, NULL, "CREATING", x->a.op->id, NULL);
	r = actq_submit(&v->q, &x->a);
	if (r == -EBUSY) {
		atomic_fetch_sub(&v->inflight, 1);
		op_drop(x->a.op, "the volume had a command in flight");
		op_unref(x->a.op);
		x->a.op = NULL;
		volume_act_free(&x->a);
		return nerr_set(&rq->err, EBUSY, "volume %s has a command in flight", v->name);
	}
	if (r >= 0 || r == -EINPROGRESS)
		atomic_store(&v->queued, true);
	return r;
}

/* ---- volumes/NAME/ctl ---- */

/* A publish target: absolute, normalized, under allowed_targets, and no
 * symlink on the way (a link could lead the mount anywhere). */
static int check_target(struct backend *b, const char *t, struct nerr *err)
{
	const char *const *allowed = (const char *const *)b->cfg->allowed_targets;
	char buf[PATH_MAX], real[PATH_MAX];
	size_t n = 0;
	int r;

	while (allowed && allowed[n])
		n++;
	r = valid_path(t, allowed, n, err);
	if (r < 0)
		return r;
	snprintf(buf, sizeof(buf), "%s", t);
	for (;;) {
		struct stat st;

		if (lstat(buf, &st) == 0) {
			if (S_ISLNK(st.st_mode))
				return nerr_set(err, EINVAL, "target %s: %s is a symlink", t, buf);
			if (!realpath(buf, real))
				return nerr_set(err, errno, "target %s: %s", t, strerror(errno));
			if (strcmp(real, buf) != 0)
				return nerr_set(err, EINVAL, "target %s: %s resolves to %s through a symlink",
						t, buf, real);
			return 0;
		}
		char *slash = strrchr(buf, '/');
		if (!slash || slash == buf)
			return 0;
		*slash = '\0';
	}
}

static bool target_taken(struct backend *b, const char *t, const struct volume *self,
			 char *who, size_t len)
{
	struct bnode **v;
	size_t n;
	bool taken = false;

	if (bnode_list(volumes_dir(b), &v, &n) < 0)
		return false;
	for (size_t i = 0; i < n && !taken; i++) {
		struct volume *o = vof(v[i]);
		if (o == self)
			continue;
		pthread_mutex_lock(&o->lock);
		if (o->target && strcmp(o->target, t) == 0) {
			taken = true;
			snprintf(who, len, "%s", o->name);
		}
		pthread_mutex_unlock(&o->lock);
	}
	bnode_list_free(v, n);
	return taken;
}

static int cmd_publish(struct bnode *n, const struct ctl_cmd *cmd, struct breq *rq)
{
	struct volume *v = vof(n);
	struct vact t = { 0 };
	char line[512], who[80];
	int r;

	if (cmd->argc > 2 && strcmp(cmd->argv[2], "ro") != 0 && strcmp(cmd->argv[2], "rw") != 0)
		return nerr_set(&rq->err, EINVAL, "publish: '%s' is not ro or rw", cmd->argv[2]);
	r = check_target(v->b, cmd->argv[1], &rq->err);
	if (r < 0 || rq->dry_run)
		return r;
	if (target_taken(v->b, cmd->argv[1], v, who, sizeof(who)))
		return nerr_set(&rq->err, EBUSY, "target %s is where volume %s is published",
				cmd->argv[1], who);
	pthread_mutex_lock(&v->lock);
	if (v->state == V_PUBLISHED) {
		r = nerr_set(&rq->err, EBUSY, "volume %s is already published at %s", v->name, v->target);
	} else if (v->target && (v->state == V_NODE_PUBLISH || v->state == V_NODE_UNPUBLISH) &&
		   strcmp(v->target, cmd->argv[1]) != 0) {
		r = nerr_set(&rq->err, EBUSY, "volume %s has an unfinished publish at %s: unpublish it first",
			     v->name, v->target);
	}
	pthread_mutex_unlock(&v->lock);
	if (r < 0)
		return r;
	t.target = strdup(cmd->argv[1]);
	t.ro = cmd->argc > 2 && strcmp(cmd->argv[2], "ro") == 0;
	if (!t.target)
		return nerr_set(&rq->err, ENOMEM, "out of memory");
	return volume_submit(v, VA_PUBLISH, cmdline_of(cmd, line, sizeof(line)), rq, &t);
}

/* -EBUSY while a container mounts v (volume=): taking it away would leave
 * the container a dangling bind. */
static int refuse_if_used(struct volume *v, const char *what, struct nerr *err)
{
	char names[160];
	const struct backend_links *ln = v->b->links;
	size_t users = ln && ln->containers_using_volume ?
		ln->containers_using_volume(v->b, v->name, names, sizeof(names)) : 0;

	if (!users)
		return 0;
	return nerr_set(err, EBUSY, "volume %s is used by container%s %s: destroy %s first%s", v->name,
			users > 1 ? "s" : "", names, users > 1 ? "them" : "it", what);
}

static int cmd_unpublish(struct bnode *n, const struct ctl_cmd *cmd, struct breq *rq)
{
	struct volume *v = vof(n);
	enum vstate s = volume_state(v);
	char line[512];
	int r;

	if (cmd->argc > 1 && strcmp(cmd->argv[1], "force") != 0)
		return nerr_set(&rq->err, EINVAL, "unpublish: unknown argument '%s' (only force)",
				cmd->argv[1]);
	if (rq->dry_run)
		return 0;
	if (s != V_PUBLISHED && s != V_NODE_PUBLISH && s != V_NODE_UNPUBLISH && !actq_busy(&v->q))
		return nerr_set(&rq->err, EINVAL, "volume %s is not published (%s)", v->name,
				vstate_to_string(s));
	if (cmd->argc == 1 && (r = refuse_if_used(v, ", or unpublish force", &rq->err)) < 0)
		return r;
	return volume_submit(v, VA_UNPUBLISH, cmdline_of(cmd, line, sizeof(line)), rq, NULL);
}

static int cmd_stage(struct bnode *n, const struct ctl_cmd *cmd, struct breq *rq)
{
	char line[512];

	if (rq->dry_run)
		return 0;
	return volume_submit(vof(n), VA_STAGE, cmdline_of(cmd, line, sizeof(line)), rq, NULL);
}

static int cmd_unstage(struct bnode *n, const struct ctl_cmd *cmd, struct breq *rq)
{
	struct volume *v = vof(n);
	char line[512];

	if (rq->dry_run)
		return 0;
	if (volume_state(v) == V_PUBLISHED && !actq_busy(&v->q))
		return nerr_set(&rq->err, EBUSY, "volume %s is published at %s: unpublish it first",
				v->name, v->target);
	return volume_submit(v, VA_UNSTAGE, cmdline_of(cmd, line, sizeof(line)), rq, NULL);
}

static int cmd_expand(struct bnode *n, const struct ctl_cmd *cmd, struct breq *rq)
{
	struct volume *v = vof(n);
	struct vact t = { 0 };
	struct storage_caps caps;
	struct bnode *pn = NULL;
	struct plugin *p;
	char line[512];
	int64_t cap, owed;
	bool known;
	int r = parse_size(cmd->argv[1], &t.size, &rq->err);

	if (r < 0) {
		nerr_prefix(&rq->err, "expand");
		return -EINVAL;
	}
	if (rq->dry_run)
		return 0;
	/* checked again by the action, which sees the capacity a queued
	 * command leaves; here only what is certain now is refused */
	pthread_mutex_lock(&v->lock);
	cap = v->capacity;
	owed = v->node_expand_to;
	pthread_mutex_unlock(&v->lock);
	if (!actq_busy(&v->q) && t.size > 0 && (int64_t)t.size <= cap && (int64_t)t.size != owed)
		return nerr_set(&rq->err, EINVAL, "expand: %llu bytes is not more than the capacity %lld",
				(unsigned long long)t.size, (long long)cap);
	p = plugin_get(v->b, v->plugin, &pn);
	known = p && plugin_caps_cached(p, &caps);
	bnode_unref(pn);
	if (known && !STORAGE_CAP(caps.controller, STORAGE_CTL_EXPAND_VOLUME) &&
	    !STORAGE_CAP(caps.node, STORAGE_NODE_EXPAND_VOLUME))
		return nerr_set(&rq->err, ENOTSUP, "expand: plugin %s cannot expand volumes (no EXPAND_VOLUME)",
				v->plugin);
	return volume_submit(vof(n), VA_EXPAND, cmdline_of(cmd, line, sizeof(line)), rq, &t);
}

static int cmd_destroy(struct bnode *n, const struct ctl_cmd *cmd, struct breq *rq)
{
	char line[512];
	int r;

	if (rq->dry_run)
		return 0;
	r = refuse_if_used(vof(n), "", &rq->err);
	if (r < 0)
		return r;

	return volume_submit(vof(n), VA_DESTROY, cmdline_of(cmd, line, sizeof(line)), rq, NULL);
}

static const struct ctl_spec volume_specs[] = {
	{ .name = "publish", .min_args = 1, .max_args = 2, .usage = "publish TARGET [ro]" },
	{ .name = "unpublish", .min_args = 0, .max_args = 1, .usage = "unpublish [force]" },
	{ .name = "stage", .min_args = 0, .max_args = 0, .usage = "stage" },
	{ .name = "unstage", .min_args = 0, .max_args = 0, .usage = "unstage" },
	{ .name = "expand", .min_args = 1, .max_args = 1, .usage = "expand SIZE" },
	{ .name = "destroy", .min_args = 0, .max_args = 0, .usage = "destroy" },
};
static const bctl_fn volume_fns[] = {
	cmd_publish, cmd_unpublish, cmd_stage, cmd_unstage, cmd_expand, cmd_destroy,
};
const struct bctl_table volume_ctl_table = { volume_specs, volume_fns, 6 };

/* ---- volumes/ctl: create, import; mkdir, rmdir ---- */

/* Everything a create or import names, checked before anything happens.
 * dry_run: the values alone (the line's, and the profile's it names), and
 * nothing made; what depends on other objects (the plugin, the name taken)
 * is checked when the line runs. */
static int build_volume(struct backend *b, const struct ctl_cmd *c, const char *name,
			const char *id, bool dry_run, struct volume **ret, struct nerr *err)
{
	const struct config_profile *prof = NULL;
	const char *s, *plugin = NULL, *mode = NULL, *fs = NULL;
	struct bnode *k, *pn;
	char only[65];
	uint64_t size = 0;
	struct volume *v;
	int r;

	r = valid_name(name, err);
	if (r < 0)
		return r;
	if (c && (s = ctl_opt_get(c, "size"))) {
		r = parse_size(s, &size, err);
		if (r < 0) {
			nerr_prefix(err, "size");
			return -EINVAL;
		}
	}
	if (c && (mode = ctl_opt_get(c, "mode"))) {
		size_t i;
		for (i = 0; config_access_modes[i] && strcmp(config_access_modes[i], mode); i++)
			;
		if (!config_access_modes[i])
			return nerr_set(err, EINVAL, "unknown access mode '%s' (one of: single-node-writer, single-node-reader-only, multi-node-reader-only, multi-node-single-writer, multi-node-multi-writer, single-node-single-writer, single-node-multi-writer)", mode);
	}
	if (c && (fs = ctl_opt_get(c, "fs")) && (r = valid_name(fs, err)) < 0) {
		nerr_prefix(err, "fs");
		return r;
	}
	if (c && (s = ctl_opt_get(c, "profile"))) {
		prof = config_profile_find(profiles_config(b), s);
		if (!prof)
			return nerr_set(err, EINVAL, "no profile '%s'", s);
		plugin = prof->plugin;
	}
	if (c && (s = ctl_opt_get(c, "plugin"))) {
		if (prof && prof->plugin && strcmp(prof->plugin, s) != 0)
			return nerr_set(err, EINVAL, "profile %s is for plugin %s, not %s", prof->name,
					prof->plugin, s);
		plugin = s;
		if ((r = valid_name(s, err)) < 0) {
			nerr_prefix(err, "plugin");
			return r;
		}
	}
	for (size_t i = 0; c && i < c->nopts; i++)
		if (strncmp(c->opts[i].key, "param.", 6) == 0 && !c->opts[i].key[6])
			return nerr_set(err, EINVAL, "param.: empty parameter name");
	if (dry_run)
		return 0;
	if (!plugin) {
		struct bnode **v2;
		size_t n2;
		const struct config_plugin *dp = config_default_plugin(b->cfg);
		if (dp)
			plugin = dp->name;
		else if (bnode_list(plugins_dir(b), &v2, &n2) == 0) {
			/* with exactly one plugin, that one */
			if (n2 == 1) {
				snprintf(only, sizeof(only), "%s", v2[0]->name);
				plugin = only;
			}
			bnode_list_free(v2, n2);
		}
	}
	if (!plugin)
		return nerr_set(err, EINVAL, "no plugin given and no default plugin configured");
	if (!plugin_get(b, plugin, &pn))
		return nerr_set(err, EINVAL, "no plugin '%s'", plugin);
	bnode_unref(pn);
	k = bnode_lookup(volumes_dir(b), name);
	if (k) {
		bnode_unref(k);
		return nerr_set(err, EEXIST, "volume '%s' exists", name);
	}
	if (id) {
		char known[80];
		if (volume_name_by_id(b, plugin, id, known, sizeof(known)))
			return nerr_set(err, EEXIST, "volume id %s of plugin %s is volume '%s' already",
					id, plugin, known);
	}
	v = volume_alloc(b, name);
	if (!v)
		return nerr_set(err, ENOMEM, "out of memory");
	v->plugin = intern_get(&b->names, plugin);
	v->profile = intern_get(&b->names, prof ? prof->name : NULL);
	v->access_mode = intern_get(&b->names, mode ? mode : prof ? prof->access_mode : NULL);
	v->fs_type = intern_get(&b->names, fs ? fs : prof ? prof->fs_type : NULL);
	if (volume_strv_dup(prof ? prof->mount_flags : NULL, &v->mount_flags) < 0 ||
	    volume_strv_dup(prof ? prof->params : NULL, &v->params) < 0) {
		volume_free(v);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	/* a size on the line wins; else the profile's (0: the plugin's) */
	v->size_req = c && ctl_opt_get(c, "size") ? size : prof ? prof->size : 0;
	for (size_t i = 0; c && i < c->nopts; i++) {
		char buf[4200];
		if (strncmp(c->opts[i].key, "param.", 6) != 0)
			continue;
		snprintf(buf, sizeof(buf), "%s=%s", c->opts[i].key + 6, c->opts[i].val);
		if (volume_strv_push(&v->params, buf) < 0) {
			volume_free(v);
			return nerr_set(err, ENOMEM, "out of memory");
		}
	}
	if (id) {
		v->id = strdup(id);
		v->imported = true;
		if (v->id)
			volume_staging_locked(v);
	}
	v->state = id ? V_CREATED : V_CREATING;
	if (!v->plugin || (id && !v->id)) {
		volume_free(v);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	*ret = v;
	return 0;
}

static int volume_start(struct backend *b, struct volume *v, int kind, const char *cmdline,
			struct breq *rq)
{
	int r;

	v->node = bnode_new(&volume_type, v->name, v);
	if (!v->node) {
		volume_free(v);
		return nerr_set(&rq->err, ENOMEM, "out of memory");
	}
	struct bnode *node = v->node;	/* ours until the end: once submitted,
					 * the create may fail, unmake the
					 * volume and the tree let it go */

	r = bnode_add(volumes_dir(b), node);
	if (r < 0) {
		nerr_set(&rq->err, -r, "volume '%s': %s", v->name,
			 r == -EEXIST ? "exists" : strerror(-r));
		bnode_unref(node);	/* frees v */
		return r;
	}
	/* a create is announced by volume_submit once its operation is on
	 * record; one refused before that goes without a word */
	r = volume_submit(v, kind, cmdline, rq, NULL);
	if (r < 0 && r != -EINPROGRESS)
		volume_unmake(v);
	bnode_unref(node);
	return r;
}

static int cmd_create(struct bnode *n, const struct ctl_cmd *c, struct breq *rq)
{
	struct backend *b = node_backend(n);
	struct volume *v;
	char line[512];
	int r = build_volume(b, c, c->argv[1], NULL, rq->dry_run, &v, &rq->err);

	if (r < 0 || rq->dry_run)
		return r;
	return volume_start(b, v, VA_CREATE, cmdline_of(c, line, sizeof(line)), rq);
}

static int cmd_import(struct bnode *n, const struct ctl_cmd *c, struct breq *rq)
{
	struct backend *b = node_backend(n);
	struct volume *v;
	char line[512];
	int r;

	if (!c->argv[2][0] || strlen(c->argv[2]) > 1024)
		return nerr_set(&rq->err, EINVAL, "import: bad volume id");
	r = build_volume(b, c, c->argv[1], c->argv[2], rq->dry_run, &v, &rq->err);
	if (r < 0 || rq->dry_run)
		return r;
	return volume_start(b, v, VA_IMPORT, cmdline_of(c, line, sizeof(line)), rq);
}

static const char *const create_opts[] = { "plugin", "size", "profile", "mode", "fs", "param.", NULL };
static const char *const import_opts[] = { "plugin", "profile", "mode", "fs", "param.", NULL };

static const struct ctl_spec volumes_specs[] = {
	{ .name = "create", .min_args = 1, .max_args = 1, .opts = create_opts,
	  .usage = "create NAME [plugin=P] [size=SIZE] [profile=PR] [mode=ACCESS_MODE] [fs=TYPE] [param.K=V ...]" },
	{ .name = "import", .min_args = 2, .max_args = 2, .opts = import_opts,
	  .usage = "import NAME ID [plugin=P] [profile=PR] [mode=ACCESS_MODE] [fs=TYPE] [param.K=V ...]" },
};
static const bctl_fn volumes_fns[] = { cmd_create, cmd_import };
static const struct bctl_table volumes_ctl = { volumes_specs, volumes_fns, 2 };
BCTL_FUNCS(volumes_ctl, volumes_ctl)

static int volumes_mkdir(struct bnode *dir, const char *name, struct breq *rq)
{
	struct backend *b = node_backend(dir);
	struct volume *v;
	char line[128];
	int r = backend_admit_mkdir(dir, name, rq);	/* after recovery */

	if (r != 0)
		return r;
	r = build_volume(b, NULL, name, NULL, false, &v, &rq->err);
	if (r < 0)
		return r;
	snprintf(line, sizeof(line), "mkdir %s", name);
	return volume_start(b, v, VA_CREATE, line, rq);
}

static int volumes_rmdir(struct bnode *dir, struct bnode *child, struct breq *rq)
{
	struct volume *v = vof(child);
	enum vstate s;
	int r = backend_admit_rmdir(dir, child, rq);	/* after recovery */

	if (r != 0)
		return r;
	s = volume_state(v);

	if (s == V_PUBLISHED || s == V_NODE_PUBLISH || s == V_NODE_UNPUBLISH)
		return nerr_set(&rq->err, EBUSY, "volume %s is published at %s: unpublish it first",
				v->name, v->target);
	r = refuse_if_used(v, "", &rq->err);
	if (r < 0)
		return r;
	return volume_submit(v, VA_DESTROY, "rmdir", rq, NULL);
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
