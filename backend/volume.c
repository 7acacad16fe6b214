/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * volume: volumes/ and volumes/NAME/, CSI volumes and their lifecycle.
 *
 * What the Mesos storage local resource provider does, as files: create
 * (CreateVolume) or import (ValidateVolumeCapabilities), publish (walking
 * CREATED -> CONTROLLER_PUBLISH -> NODE_READY -> NODE_STAGE -> VOL_READY ->
 * NODE_PUBLISH -> PUBLISHED, skipping what the plugin's capabilities do not
 * have), unpublish, stage, unstage, expand, destroy (walking back down:
 * NodeUnpublish before NodeUnstage before ControllerUnpublish before
 * DeleteVolume).
 *
 * Rules kept (from Mesos and kubelet): the calls of one volume run strictly
 * in order on its action queue; CreateVolume's name derives from the
 * operation id, so a retried create never makes two volumes; the transient
 * state is checkpointed before each call and the stable state after it; a
 * call whose outcome is unknown (deadline, unavailable, aborted) leaves the
 * volume in its transient state and the next command re-drives that call
 * (NodeStage is re-sent after a failed NodeUnstage); a call that failed for
 * certain puts the volume back where it was.
 */
#include "backend-internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jw.h"
#include "log.h"
#include "macro.h"
#include "operation.h"
#include "store.h"
#include "units.h"
#include "valid.h"

enum vstate {
	V_CREATING, V_CREATED, V_CONTROLLER_PUBLISH, V_NODE_READY, V_NODE_STAGE, V_VOL_READY,
	V_NODE_PUBLISH, V_PUBLISHED, V_NODE_UNPUBLISH, V_NODE_UNSTAGE, V_CONTROLLER_UNPUBLISH,
	V_DELETING,
};

static const char *const vstate_names[] = {
	"CREATING", "CREATED", "CONTROLLER_PUBLISH", "NODE_READY", "NODE_STAGE", "VOL_READY",
	"NODE_PUBLISH", "PUBLISHED", "NODE_UNPUBLISH", "NODE_UNSTAGE", "CONTROLLER_UNPUBLISH",
	"DELETING",
};

static const char *vstate_to_string(enum vstate s)
{
	return s <= V_DELETING ? vstate_names[s] : "UNKNOWN";
}

static int vstate_from_string(const char *s)
{
	for (int i = 0; i <= V_DELETING; i++)
		if (s && strcmp(s, vstate_names[i]) == 0)
			return i;
	return -1;
}

struct volume {
	struct backend *b;
	struct bnode *node;		/* borrowed: the node owns the volume */
	char name[65];
	struct actq q;
	atomic_int inflight;		/* actions submitted and not yet answered */
	/* Its create or import is queued (or it was recovered): other commands
	 * may follow. The node is in the tree before that action is queued
	 * (a name is taken once), and a command slipping in first would run
	 * before the create: a destroy would make and delete the volume, and
	 * the create, running next on the forgotten volume, make it again. */
	atomic_bool queued;

	/* what it was made with; immutable after create */
	char *plugin;
	char *profile;
	char *access_mode;
	char *fs_type;
	char **mount_flags;
	char **params;			/* "k=v" */
	uint64_t size_req;
	bool imported;

	pthread_mutex_t lock;		/* everything below */
	enum vstate state;
	char *csi_name;			/* CreateVolume name: nodefs-OPID */
	char *id;			/* CSI volume id */
	int64_t capacity;
	char **vctx;			/* volume context, "k=v" */
	char **pctx;			/* publish context, "k=v" */
	bool ctl_published, staged;
	int64_t node_expand_to;		/* ControllerExpand done, NodeExpand owed */
	bool have_stats;		/* NodeGetVolumeStats as last reported */
	long long stats_used, stats_available;
	char *target;
	bool ro;
	char staging[PATH_MAX];
	bool last_uncertain;		/* the last call's outcome is unknown */
};

static struct volume *vof(struct bnode *n)
{
	return n->priv;
}

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static int strv_push(char ***v, const char *s)
{
	size_t n = 0;
	char **nv;

	while (*v && (*v)[n])
		n++;
	nv = realloc(*v, (n + 2) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[n] = strdup(s);
	nv[n + 1] = NULL;
	return nv[n] ? 0 : -ENOMEM;
}

static char **strv_dup(char *const *v)
{
	char **r = calloc(1, sizeof(*r));

	for (size_t i = 0; r && v && v[i]; i++)
		if (strv_push(&r, v[i]) < 0) {
			strv_free(r);
			return NULL;
		}
	return r;
}

static void volume_free(struct volume *v)
{
	if (!v)
		return;
	free(v->plugin);
	free(v->profile);
	free(v->access_mode);
	free(v->fs_type);
	strv_free(v->mount_flags);
	strv_free(v->params);
	free(v->csi_name);
	free(v->id);
	strv_free(v->vctx);
	strv_free(v->pctx);
	free(v->target);
	pthread_mutex_destroy(&v->lock);
	free(v);
}

/* ---- state and checkpoints ---- */

static char **json_strv(json_t *a)
{
	char **v = calloc(1, sizeof(*v));
	size_t i;
	json_t *x;

	json_array_foreach(a, i, x)
		if (v && json_string_value(x) && strv_push(&v, json_string_value(x)) < 0) {
			strv_free(v);
			return NULL;
		}
	return v;
}

/* A volume's members, as its record and info.json show them. Lock held. */
static void volume_write_locked(struct volume *v, struct jw *w)
{
	jw_kstr(w, "name", v->name);
	jw_kstr(w, "plugin", v->plugin);
	if (v->profile)
		jw_kstr(w, "profile", v->profile);
	if (v->access_mode)
		jw_kstr(w, "access_mode", v->access_mode);
	if (v->fs_type)
		jw_kstr(w, "fs_type", v->fs_type);
	jw_kstrv(w, "mount_flags", v->mount_flags);
	jw_kstrv(w, "parameters", v->params);
	jw_kint(w, "size_requested", (long long)v->size_req);
	jw_kbool(w, "imported", v->imported);
	jw_kstr(w, "state", vstate_to_string(v->state));
	if (v->csi_name)
		jw_kstr(w, "csi_name", v->csi_name);
	if (v->id)
		jw_kstr(w, "id", v->id);
	jw_kint(w, "capacity", v->capacity);
	jw_kstrv(w, "volume_context", v->vctx);
	jw_kstrv(w, "publish_context", v->pctx);
	jw_kbool(w, "controller_published", v->ctl_published);
	jw_kbool(w, "staged", v->staged);
	if (v->node_expand_to)
		jw_kint(w, "node_expand_to", v->node_expand_to);
	if (v->target)
		jw_kstr(w, "target", v->target);
	jw_kbool(w, "readonly", v->ro);
	if (v->staging[0])
		jw_kstr(w, "staging_path", v->staging);
}

/* The staging path of a volume: one per volume id under the state dir.
 * Ids are the plugin's strings: bytes outside [A-Za-z0-9._-] are written
 * %XX, so any id is one path component. Lock held or v not yet shared. */
static void staging_from_id_locked(struct volume *v)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t off;

	if (v->staging[0] || !v->id)
		return;
	off = (size_t)snprintf(v->staging, sizeof(v->staging), "%s/staging/",
			       v->b->cfg->state_dir);
	for (const unsigned char *c = (const unsigned char *)v->id; *c && off + 4 < sizeof(v->staging); c++) {
		if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		    *c == '_' || *c == '-' || (*c == '.' && c != (const unsigned char *)v->id)) {
			v->staging[off++] = (char)*c;
		} else {
			v->staging[off++] = '%';
			v->staging[off++] = hex[*c >> 4];
			v->staging[off++] = hex[*c & 15];
		}
	}
	v->staging[off] = '\0';
}

static int checkpoint(struct volume *v, struct nerr *err)
{
	struct sbuf sb = SBUF_INIT(0);
	struct jw w;
	int r;

	store_record_begin(&w, &sb);
	pthread_mutex_lock(&v->lock);
	volume_write_locked(v, &w);
	pthread_mutex_unlock(&v->lock);
	r = store_put_record(v->b->cfg->state_dir, "volumes", v->name, &w, err);
	sbuf_free(&sb);
	return r;
}

static enum vstate get_state(struct volume *v)
{
	enum vstate s;

	pthread_mutex_lock(&v->lock);
	s = v->state;
	pthread_mutex_unlock(&v->lock);
	return s;
}

static void set_state(struct volume *v, enum vstate s)
{
	enum vstate old;

	pthread_mutex_lock(&v->lock);
	old = v->state;
	v->state = s;
	pthread_mutex_unlock(&v->lock);
	if (old == s)
		return;
	bnode_changed(v->node);
	events_emit(v->b->events, "volume", v->name, vstate_to_string(old), vstate_to_string(s),
		    NULL, NULL);
}

/* ---- the steps: one storage call each ---- */

struct vctx {
	struct volume *v;
	struct plugin *p;
	struct bnode *pnode;
	const struct storage_ops *ops;
	void *h;
	struct storage_caps caps;
	struct operation *op;
	unsigned attempts;
	bool dirty;			/* state changed since the last checkpoint */
	char node_id[256];
};

/* What a call ended with, for the step and the operation. */
static void note_result(struct vctx *x, const struct storage_result *res)
{
	if (!res->call)
		return;		/* nothing was sent */
	x->v->last_uncertain = res->uncertain;
	/* the operation shows the most attempts one call of it needed: a
	 * retried step stays visible after the steps that followed it */
	if (res->attempts > x->attempts)
		x->attempts = res->attempts;
	if (x->op) {
		char remote[64];
		op_set_attempts(x->op, x->attempts);
		snprintf(remote, sizeof(remote), "%d %s", res->code, res->code_name);
		op_set_remote(x->op, remote);
	}
}

#define HAS_CTL(x, c) STORAGE_CAP((x)->caps.controller, STORAGE_CTL_##c)
#define HAS_NODE(x, c) STORAGE_CAP((x)->caps.node, STORAGE_NODE_##c)

/* The request naming v: id, capability, parameters and contexts. The
 * strings are v's; the volume's lock is not needed, as only the action
 * running on the volume's queue changes them. */
static struct storage_req req_of(struct volume *v)
{
	return (struct storage_req){
		.name = v->csi_name,
		.id = v->id,
		.cap = storage_cap_of(v->access_mode, v->fs_type, v->mount_flags),
		.params = v->params,
		.vctx = v->vctx,
		.pctx = v->pctx,
		.staging = v->staged ? v->staging : "",
		.target = v->target,
		.readonly = v->ro,
	};
}

static int do_create_volume(struct vctx *x, struct nerr *err)
{
	struct volume *v = x->v;
	struct storage_req rq = req_of(v);
	struct storage_result res = { 0 };
	struct storage_volume sv = { 0 };
	int r;

	rq.bytes = (int64_t)v->size_req;
	r = x->ops->create(x->h, &rq, &sv, &res, err);
	note_result(x, &res);
	if (r < 0)
		return r;
	pthread_mutex_lock(&v->lock);
	free(v->id);
	v->id = TAKE_PTR(sv.id);
	v->capacity = sv.capacity;
	storage_strv_free(v->vctx);
	v->vctx = TAKE_PTR(sv.vctx);
	staging_from_id_locked(v);
	pthread_mutex_unlock(&v->lock);
	return 0;
}

static int do_validate(struct vctx *x, struct nerr *err)
{
	struct storage_req rq = req_of(x->v);
	struct storage_result res = { 0 };
	int r = x->ops->validate(x->h, &rq, &res, err);

	note_result(x, &res);
	return r;
}

/* An imported volume's capacity and context, from ListVolumes when the
 * plugin lists volumes; best effort (the volume is usable without them). */
static void import_listed(struct vctx *x)
{
	struct volume *v = x->v;
	char *token = NULL;
	bool found = false;

	if (!HAS_CTL(x, LIST_VOLUMES))
		return;
	for (int pages = 0; pages < 1000 && !found; pages++) {
		struct storage_page pg = { 0 };
		struct nerr e = { 0 };

		if (x->ops->list(x->h, token, &pg, NULL, &e) < 0)
			break;
		for (size_t i = 0; i < pg.n && !found; i++) {
			if (strcmp(pg.v[i].id, v->id) != 0)
				continue;
			found = true;
			pthread_mutex_lock(&v->lock);
			v->capacity = pg.v[i].capacity;
			storage_strv_free(v->vctx);
			v->vctx = TAKE_PTR(pg.v[i].vctx);
			pthread_mutex_unlock(&v->lock);
		}
		free(token);
		token = TAKE_PTR(pg.next_token);
		storage_page_clear(&pg);
		if (!token)
			break;
	}
	free(token);
}

static int do_controller_publish(struct vctx *x, struct nerr *err)
{
	struct volume *v = x->v;
	struct storage_req rq;
	struct storage_result res = { 0 };
	char **pctx = NULL;
	int r;

	r = plugin_node_id(x->p, x->node_id, sizeof(x->node_id), err);
	if (r < 0)
		return r;
	rq = req_of(v);
	rq.node_id = x->node_id;
	r = x->ops->controller_publish(x->h, &rq, &pctx, &res, err);
	note_result(x, &res);
	if (r < 0)
		return r;
	pthread_mutex_lock(&v->lock);
	storage_strv_free(v->pctx);
	v->pctx = pctx;
	v->ctl_published = true;
	pthread_mutex_unlock(&v->lock);
	return 0;
}

static int do_controller_unpublish(struct vctx *x, struct nerr *err)
{
	struct storage_req rq;
	struct storage_result res = { 0 };
	int r;

	r = plugin_node_id(x->p, x->node_id, sizeof(x->node_id), err);
	if (r < 0)
		return r;
	rq = req_of(x->v);
	rq.node_id = x->node_id;
	r = x->ops->controller_unpublish(x->h, &rq, &res, err);
	note_result(x, &res);
	if (r >= 0) {
		pthread_mutex_lock(&x->v->lock);
		x->v->ctl_published = false;
		strv_free(x->v->pctx);
		x->v->pctx = NULL;
		pthread_mutex_unlock(&x->v->lock);
	}
	return r;
}

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];

	/* usually only the last component is missing, or none */
	if (mkdir(path, mode) == 0 || errno == EEXIST)
		return 0;
	if (errno != ENOENT)
		return -errno;
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int do_stage(struct vctx *x, struct nerr *err)
{
	struct volume *v = x->v;
	struct storage_req rq;
	struct storage_result res = { 0 };
	int r;

	if (!v->staging[0])
		return nerr_set(err, EINVAL, "volume %s has no id to stage", v->name);
	r = mkdir_p(v->staging, 0750);
	if (r < 0)
		return nerr_set(err, -r, "cannot make the staging path %s: %s", v->staging, strerror(-r));
	rq = req_of(v);
	rq.staging = v->staging;
	r = x->ops->stage(x->h, &rq, &res, err);
	note_result(x, &res);
	if (r >= 0) {
		pthread_mutex_lock(&v->lock);
		v->staged = true;
		pthread_mutex_unlock(&v->lock);
	}
	return r;
}

static int do_unstage(struct vctx *x, struct nerr *err)
{
	struct storage_req rq = req_of(x->v);
	struct storage_result res = { 0 };
	int r;

	rq.staging = x->v->staging;
	r = x->ops->unstage(x->h, &rq, &res, err);
	note_result(x, &res);
	if (r >= 0) {
		pthread_mutex_lock(&x->v->lock);
		x->v->staged = false;
		pthread_mutex_unlock(&x->v->lock);
		rmdir(x->v->staging);
	}
	return r;
}

static int do_publish(struct vctx *x, struct nerr *err)
{
	struct volume *v = x->v;
	struct storage_req rq;
	struct storage_result res = { 0 };
	char parent[PATH_MAX], *slash;
	int r;

	/* the target's parent must exist (some plugins need it) */
	snprintf(parent, sizeof(parent), "%s", v->target);
	slash = strrchr(parent, '/');
	if (slash && slash != parent) {
		*slash = '\0';
		r = mkdir_p(parent, 0755);
		if (r < 0)
			return nerr_set(err, -r, "cannot make %s: %s", parent, strerror(-r));
	}
	rq = req_of(v);
	r = x->ops->publish(x->h, &rq, &res, err);
	note_result(x, &res);
	return r;
}

static int do_unpublish(struct vctx *x, struct nerr *err)
{
	struct storage_req rq = req_of(x->v);
	struct storage_result res = { 0 };
	int r = x->ops->unpublish(x->h, &rq, &res, err);

	note_result(x, &res);
	return r;
}

static int do_delete(struct vctx *x, struct nerr *err)
{
	struct storage_req rq = req_of(x->v);
	struct storage_result res = { 0 };
	int r = x->ops->delete(x->h, &rq, &res, err);

	note_result(x, &res);
	return r;
}

/*
 * One step: the transient state is checkpointed before the call and the
 * stable state after it. A call whose outcome is unknown leaves the volume
 * in the transient state (the next command re-drives it); a call that
 * failed for certain puts it back to `back`.
 *
 * The stable state after a call is written with the next step's transient
 * record when another call follows at once (that record holds everything
 * the call returned), else by flush() before the command is answered: one
 * fsync'd write fewer per call, and a crash in between only re-drives an
 * idempotent call whose result was not yet recorded.
 */
static int step(struct vctx *x, enum vstate transient, int (*fn)(struct vctx *, struct nerr *),
		enum vstate done, enum vstate back, struct nerr *err)
{
	struct volume *v = x->v;
	struct nerr cerr = { 0 };
	int r;

	set_state(v, transient);
	r = checkpoint(v, err);
	if (r < 0) {
		set_state(v, back);
		return r;
	}
	x->dirty = false;
	v->last_uncertain = false;
	r = fn(x, err);
	if (r < 0) {
		if (!v->last_uncertain) {
			set_state(v, back);
			checkpoint(v, &cerr);
		} else {
			nerr_prefix(err, "left in %s, the next command retries", vstate_to_string(transient));
		}
		return r;
	}
	set_state(v, done);
	x->dirty = true;
	return 0;
}

/* The stable state a step or a walk left, checkpointed if not yet. */
static int flush(struct vctx *x, struct nerr *err)
{
	if (!x->dirty)
		return 0;
	x->dirty = false;
	return checkpoint(x->v, err);
}

/* The state an up-walk resumes from: a transient state of either
 * direction re-drives the call that goes up from there. */
static int walk_up(struct vctx *x, bool want_publish, struct nerr *err)
{
	struct volume *v = x->v;
	bool stage = HAS_NODE(x, STAGE_UNSTAGE_VOLUME);
	bool ctl = HAS_CTL(x, PUBLISH_UNPUBLISH_VOLUME);
	int r = 0;

	for (int guard = 0; guard < 16 && r >= 0; guard++) {
		switch (get_state(v)) {
		case V_CREATING:
			r = step(x, V_CREATING, do_create_volume, V_CREATED, V_CREATING, err);
			break;
		case V_CREATED:
		case V_CONTROLLER_PUBLISH:
		case V_CONTROLLER_UNPUBLISH:
			if (ctl)
				r = step(x, V_CONTROLLER_PUBLISH, do_controller_publish, V_NODE_READY,
					 V_CREATED, err);
			else {
				set_state(v, V_NODE_READY);
				x->dirty = true;
			}
			break;
		case V_NODE_READY:
		case V_NODE_STAGE:
		case V_NODE_UNSTAGE:
			if (!stage) {
				if (!want_publish)
					return 0;
				r = step(x, V_NODE_PUBLISH, do_publish, V_PUBLISHED, V_NODE_READY, err);
			} else {
				r = step(x, V_NODE_STAGE, do_stage, V_VOL_READY, V_NODE_READY, err);
			}
			break;
		case V_VOL_READY:
			if (!want_publish)
				return 0;
			r = step(x, V_NODE_PUBLISH, do_publish, V_PUBLISHED, V_VOL_READY, err);
			break;
		case V_NODE_PUBLISH:
		case V_NODE_UNPUBLISH:
			r = step(x, V_NODE_PUBLISH, do_publish, V_PUBLISHED,
				 v->staged ? V_VOL_READY : V_NODE_READY, err);
			break;
		case V_PUBLISHED:
			return 0;
		case V_DELETING:
			return nerr_set(err, EBUSY, "volume %s is being deleted: destroy it", v->name);
		}
	}
	return r;
}

enum down_goal { DOWN_UNPUBLISHED, DOWN_CREATED, DOWN_DELETED };

static int walk_down(struct vctx *x, enum down_goal goal, struct nerr *err)
{
	struct volume *v = x->v;
	int r = 0;

	for (int guard = 0; guard < 16 && r >= 0; guard++) {
		switch (get_state(v)) {
		case V_PUBLISHED:
		case V_NODE_PUBLISH:
		case V_NODE_UNPUBLISH:
			r = step(x, V_NODE_UNPUBLISH, do_unpublish, v->staged ? V_VOL_READY : V_NODE_READY,
				 V_PUBLISHED, err);
			if (r >= 0) {
				pthread_mutex_lock(&v->lock);
				free(v->target);
				v->target = NULL;
				v->ro = false;
				pthread_mutex_unlock(&v->lock);
				x->dirty = true;
			}
			if (r >= 0 && goal == DOWN_UNPUBLISHED)
				return 0;
			break;
		case V_VOL_READY:
		case V_NODE_STAGE:
		case V_NODE_UNSTAGE:
			if (goal == DOWN_UNPUBLISHED)
				return 0;
			r = step(x, V_NODE_UNSTAGE, do_unstage, V_NODE_READY, V_VOL_READY, err);
			break;
		case V_NODE_READY:
		case V_CONTROLLER_PUBLISH:
		case V_CONTROLLER_UNPUBLISH:
			if (goal == DOWN_UNPUBLISHED)
				return 0;
			if (v->ctl_published || get_state(v) != V_NODE_READY)
				r = step(x, V_CONTROLLER_UNPUBLISH, do_controller_unpublish, V_CREATED,
					 V_NODE_READY, err);
			else {
				set_state(v, V_CREATED);
				x->dirty = true;
			}
			break;
		case V_CREATING:
			/* a create whose outcome is unknown: finish it to learn the id */
			r = step(x, V_CREATING, do_create_volume, V_CREATED, V_CREATING, err);
			break;
		case V_CREATED:
			if (goal != DOWN_DELETED)
				return 0;
			/* fall through */
		case V_DELETING:
			r = step(x, V_DELETING, do_delete, V_DELETING, V_CREATED, err);
			return r < 0 ? r : 1;
		}
	}
	return r;
}

/* ---- actions ---- */

enum { VA_CREATE, VA_IMPORT, VA_PUBLISH, VA_STAGE, VA_UNPUBLISH, VA_UNSTAGE, VA_EXPAND,
       VA_DESTROY };

struct vact {
	struct action a;
	struct volume *v;
	struct bnode *node;
	int kind;
	char *target;
	bool ro;
	uint64_t size;
};

/* After run, before the writer is answered. */
static void vact_done(struct action *a, int result)
{
	struct volume *v = ((struct vact *)a)->v;

	(void)result;
	if (atomic_fetch_sub(&v->inflight, 1) == 1)
		bnode_changed(v->node);	/* settled: wakes `wait` readers */
}

static void vact_free(struct action *a)
{
	struct vact *x = (struct vact *)a;

	free(x->target);
	bnode_unref(x->node);
	free(x);
}

/* The volume is gone (destroyed, or a create or import that never made
 * it): its record and directory go, and its story on the event stream
 * ends with DELETED. */
static void volume_forget(struct volume *v, const char *op_id)
{
	struct bnode *n = bnode_ref(v->node);	/* v lives until the event is out */

	store_del(v->b->cfg->state_dir, "volumes", v->name, NULL);
	bnode_remove(n);
	events_emit(v->b->events, "volume", v->name, vstate_to_string(get_state(v)), "DELETED",
		    op_id, NULL);
	bnode_unref(n);
}

/*
 * expand: ControllerExpandVolume when the plugin has the controller
 * capability, then NodeExpandVolume when it has the node one (and the
 * controller says the node must act) while the volume is on this node.
 * A NodeExpand that failed after the ControllerExpand went through is owed
 * (node_expand_to, checkpointed): `expand` to that size again makes only
 * the node call. Off the node, NodeStage/NodePublish see the new size.
 */
static int do_expand(struct vctx *x, uint64_t size, struct nerr *err)
{
	struct volume *v = x->v;
	bool ctl = HAS_CTL(x, EXPAND_VOLUME), node = HAS_NODE(x, EXPAND_VOLUME);
	bool node_needed = node, finish_node, on_node;
	int64_t cap, owed;
	int r;

	pthread_mutex_lock(&v->lock);
	cap = v->capacity;
	owed = v->node_expand_to;
	on_node = v->staged || (v->target && v->state == V_PUBLISHED);
	pthread_mutex_unlock(&v->lock);
	finish_node = owed && owed == (int64_t)size;
	if (!finish_node && (int64_t)size <= cap)
		return nerr_set(err, EINVAL, "expand: %llu bytes is not more than the capacity %lld",
				(unsigned long long)size, (long long)cap);
	if (!ctl && !node)
		return nerr_set(err, ENOTSUP, "expand: plugin %s cannot expand volumes (no EXPAND_VOLUME)",
				v->plugin);
	if (ctl && !finish_node) {
		struct storage_req rq = req_of(v);
		struct storage_result res = { 0 };
		int64_t newcap = 0;
		bool needed = false;

		rq.bytes = (int64_t)size;
		r = x->ops->controller_expand(x->h, &rq, &newcap, &needed, &res, err);
		note_result(x, &res);
		if (r < 0)
			return r;
		node_needed = node && needed;
		pthread_mutex_lock(&v->lock);
		v->capacity = newcap ? newcap : (int64_t)size;
		v->node_expand_to = node_needed && on_node ? (int64_t)size : 0;
		pthread_mutex_unlock(&v->lock);
		bnode_changed(v->node);
		r = checkpoint(v, err);
		if (r < 0)
			return r;
	}
	if (node_needed && on_node) {
		struct storage_req rq = req_of(v);
		struct storage_result res = { 0 };
		int64_t newcap = 0;

		rq.bytes = (int64_t)size;
		rq.path = v->target && v->state == V_PUBLISHED ? v->target : v->staging;
		r = x->ops->node_expand(x->h, &rq, &newcap, &res, err);
		note_result(x, &res);
		if (r < 0) {
			if (ctl)
				nerr_prefix(err, "the controller expanded it; `expand %llu` finishes on the node",
					    (unsigned long long)size);
			return r;
		}
		pthread_mutex_lock(&v->lock);
		if (newcap)
			v->capacity = newcap;
		else if (!ctl)
			v->capacity = (int64_t)size;
		v->node_expand_to = 0;
		pthread_mutex_unlock(&v->lock);
	} else if (finish_node) {
		pthread_mutex_lock(&v->lock);
		v->node_expand_to = 0;
		pthread_mutex_unlock(&v->lock);
	}
	bnode_changed(v->node);
	return checkpoint(v, err);
}

static int run_action(struct action *a, struct nerr *err)
{
	struct vact *act = (struct vact *)a;
	struct volume *v = act->v;
	struct vctx x = { .v = v, .op = a->op };
	int r;

	/* queued behind the destroy that forgot it: no call, no checkpoint
	 * (a step would write the record of a volume that is gone) */
	if (atomic_load(&v->node->dead))
		return nerr_set(err, ENOENT, "volume %s was destroyed", v->name);
	x.p = plugin_get(v->b, v->plugin, &x.pnode);
	if (!x.p)
		return nerr_set(err, ENOENT, "plugin %s of volume %s is gone", v->plugin, v->name);
	x.ops = plugin_ops(x.p);
	x.h = plugin_handle(x.p);
	r = plugin_caps(x.p, &x.caps, err);
	if (r < 0) {
		nerr_prefix(err, "plugin %s", v->plugin);
		if (act->kind == VA_CREATE || act->kind == VA_IMPORT)
			volume_forget(v, a->op ? a->op->id : NULL);
		goto out;
	}
	switch (act->kind) {
	case VA_CREATE:
		if (!HAS_CTL(&x, CREATE_DELETE_VOLUME)) {
			r = nerr_set(err, ENOTSUP, "plugin %s cannot create volumes (no CREATE_DELETE_VOLUME); use import",
				     v->plugin);
			volume_forget(v, a->op ? a->op->id : NULL);
			break;
		}
		r = step(&x, V_CREATING, do_create_volume, V_CREATED, V_CREATING, err);
		if (r < 0 && !v->last_uncertain)
			volume_forget(v, a->op ? a->op->id : NULL);	/* it never existed: nothing changed */
		break;
	case VA_IMPORT:
		r = do_validate(&x, err);
		if (r >= 0) {
			import_listed(&x);
			r = checkpoint(v, err);
		}
		if (r < 0)
			volume_forget(v, a->op ? a->op->id : NULL);
		else {
			set_state(v, V_CREATED);
			events_emit(v->b->events, "volume", v->name, NULL, "CREATED", a->op ? a->op->id : NULL,
				    "imported");
		}
		break;
	case VA_PUBLISH:
		if (get_state(v) == V_PUBLISHED) {
			r = nerr_set(err, EBUSY, "volume %s is already published at %s", v->name, v->target);
			break;
		}
		pthread_mutex_lock(&v->lock);
		free(v->target);
		v->target = act->target;
		act->target = NULL;
		v->ro = act->ro;
		pthread_mutex_unlock(&v->lock);
		r = walk_up(&x, true, err);
		break;
	case VA_STAGE:
		r = walk_up(&x, false, err);
		break;
	case VA_UNPUBLISH: {
		enum vstate s = get_state(v);
		if (s != V_PUBLISHED && s != V_NODE_PUBLISH && s != V_NODE_UNPUBLISH) {
			r = nerr_set(err, EINVAL, "volume %s is not published (%s)", v->name, vstate_to_string(s));
			break;
		}
		r = walk_down(&x, DOWN_UNPUBLISHED, err);
		break;
	}
	case VA_UNSTAGE:
		if (get_state(v) == V_PUBLISHED) {
			r = nerr_set(err, EBUSY, "volume %s is published at %s: unpublish it first",
				     v->name, v->target);
			break;
		}
		r = walk_down(&x, DOWN_CREATED, err);
		break;
	case VA_EXPAND:
		r = do_expand(&x, act->size, err);
		break;
	case VA_DESTROY:
		r = walk_down(&x, DOWN_DELETED, err);
		if (r > 0) {
			volume_forget(v, a->op ? a->op->id : NULL);
			r = 0;
		}
		break;
	}
	/* the stable state the walk ended in, before the command is answered */
	if (!atomic_load(&v->node->dead)) {
		struct nerr ferr = { 0 };
		int fr = flush(&x, r < 0 ? &ferr : err);

		if (fr < 0 && r >= 0)
			r = fr;
	}
out:
	if (act->kind == VA_CREATE || act->kind == VA_IMPORT || act->kind == VA_DESTROY)
		plugin_lists_stale(v->b, v->plugin);
	bnode_unref(x.pnode);
	return r < 0 ? r : 0;
}

static int submit(struct volume *v, int kind, const char *cmdline, struct breq *rq, struct vact *t)
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
	x->a.run = run_action;
	x->a.done = vact_done;
	x->a.free = vact_free;
	snprintf(object, sizeof(object), "volumes/%s", v->name);
	r = op_begin(v->b, types[kind], object, cmdline, &x->a.op, &rq->err);
	if (r < 0) {
		vact_free(&x->a);
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
	r = actq_submit(&v->q, &x->a);
	if (r == -EBUSY) {
		atomic_fetch_sub(&v->inflight, 1);
		op_drop(x->a.op, "the volume had a command in flight");
		op_unref(x->a.op);
		x->a.op = NULL;
		vact_free(&x->a);
		return nerr_set(&rq->err, EBUSY, "volume %s has a command in flight", v->name);
	}
	if (r >= 0 || r == -EINPROGRESS)
		atomic_store(&v->queued, true);
	return r;
}

/* ---- files ---- */

static int show_state(struct bnode *n, struct sbuf *out)
{
	return sbuf_printf(out, "%s\n", vstate_to_string(get_state(vof(n))));
}

#define V_SHOW_STR(fname, expr)						\
	static int fname(struct bnode *n, struct sbuf *out)		\
	{								\
		struct volume *v = vof(n);				\
		int r = 0;						\
		pthread_mutex_lock(&v->lock);				\
		if (expr)						\
			r = sbuf_printf(out, "%s\n", expr);		\
		pthread_mutex_unlock(&v->lock);				\
		return r;						\
	}
V_SHOW_STR(show_id, v->id)
V_SHOW_STR(show_plugin, v->plugin)
V_SHOW_STR(show_profile, v->profile)
V_SHOW_STR(show_target, v->target)

static int show_capacity(struct bnode *n, struct sbuf *out)
{
	struct volume *v = vof(n);
	int r;

	pthread_mutex_lock(&v->lock);
	r = sbuf_printf(out, "%lld\n", (long long)v->capacity);
	pthread_mutex_unlock(&v->lock);
	return r;
}

/* NodeGetVolumeStats for a volume on this node: one quick call with a short
 * deadline and no retries (a read must not hang on a plugin). Fills
 * {used, available, total} of bytes and inodes (-1: not reported) and
 * keeps bytes used/available for the metrics. 1 when measured, 0 when the
 * volume is on no node or the plugin cannot measure, -errno with err. */
static int volume_stats(struct volume *v, long long used[3], long long ino[3], bool *ret_unsupported,
			struct nerr *err)
{
	struct storage_req rq = { 0 };
	struct storage_stats st;
	struct bnode *pn = NULL;
	struct plugin *p;
	struct storage_caps caps;
	char path[PATH_MAX] = "", id[1024] = "", staging[PATH_MAX];
	int r;

	*ret_unsupported = false;
	pthread_mutex_lock(&v->lock);
	if (v->target && v->state == V_PUBLISHED)
		snprintf(path, sizeof(path), "%s", v->target);
	else if (v->staged && v->state == V_VOL_READY)
		snprintf(path, sizeof(path), "%s", v->staging);
	if (v->id)
		snprintf(id, sizeof(id), "%s", v->id);
	snprintf(staging, sizeof(staging), "%s", v->staged ? v->staging : "");
	if (!path[0])
		v->have_stats = false;
	pthread_mutex_unlock(&v->lock);
	if (!path[0])
		return 0;	/* not on this node: nothing to measure */
	p = plugin_get(v->b, v->plugin, &pn);
	if (!p)
		return 0;
	if (!plugin_caps_cached(p, &caps) || !STORAGE_CAP(caps.node, STORAGE_NODE_GET_VOLUME_STATS)) {
		bnode_unref(pn);
		*ret_unsupported = true;
		return 0;
	}
	rq.id = id;
	rq.path = path;
	rq.staging = staging;
	r = plugin_ops(p)->stats(plugin_handle(p), &rq, 5000, &st, NULL, err);
	bnode_unref(pn);
	if (r < 0)
		return r;
	for (int k = 0; k < 3; k++) {
		used[k] = st.bytes[k];
		ino[k] = st.inodes[k];
	}
	pthread_mutex_lock(&v->lock);
	v->have_stats = used[0] >= 0;
	v->stats_used = used[0];
	v->stats_available = used[1];
	pthread_mutex_unlock(&v->lock);
	return 1;
}

static int show_stats(struct bnode *n, struct sbuf *out)
{
	struct volume *v = vof(n);
	long long used[3], ino[3];
	struct nerr err = { 0 };
	bool unsupported;
	int r = volume_stats(v, used, ino, &unsupported, &err);

	if (r < 0) {
		bnode_set_error(n, err.msg);
		return 0;
	}
	if (unsupported)
		return sbuf_printf(out, "unsupported: plugin has no GET_VOLUME_STATS\n");
	if (r == 0)
		return 0;
	if (used[0] >= 0)
		r = sbuf_printf(out, "bytes_used %lld\nbytes_available %lld\nbytes_total %lld\n",
				used[0], used[1], used[2]);
	if (r >= 0 && ino[0] >= 0)
		r = sbuf_printf(out, "inodes_used %lld\ninodes_available %lld\ninodes_total %lld\n",
				ino[0], ino[1], ino[2]);
	return r;
}

/* From a plugin's refresh (a worker): measure its volumes on this node for
 * the metrics. */
void volumes_refresh_stats(struct backend *b, const char *plugin)
{
	struct bnode **v;
	size_t n;

	if (bnode_list(b->volumes, &v, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct volume *x = vof(v[i]);
		long long used[3], ino[3];
		struct nerr err = { 0 };
		bool unsupported;

		if (strcmp(x->plugin, plugin) == 0 && !actq_busy(&x->q))
			volume_stats(x, used, ino, &unsupported, &err);
	}
	bnode_list_free(v, n);
}

static int show_info(struct bnode *n, struct sbuf *out)
{
	struct volume *v = vof(n);
	struct jw w;

	jw_init(&w, out, 2);
	jw_obj(&w);
	pthread_mutex_lock(&v->lock);
	volume_write_locked(v, &w);
	pthread_mutex_unlock(&v->lock);
	jw_obj_end(&w);
	return jw_end(&w) ?: sbuf_addc(out, '\n');
}

/*
 * wait: blocks while a command on the volume is queued or running, then one
 * line, `state=PUBLISHED` (the state it settled in), then end of file. A
 * volume destroyed meanwhile is gone: the read fails with ENOENT (fs). With O_NONBLOCK ctl writes a script issues commands and
 * waits for them with `cat wait`.
 */
static bool volume_settled(struct bnode *n)
{
	return atomic_load(&n->dead) || atomic_load(&vof(n)->inflight) == 0;
}

static int volume_wait_line(struct bnode *n, struct sbuf *out)
{
	if (atomic_load(&n->dead))
		return -ENOENT;
	return sbuf_printf(out, "state=%s\n", vstate_to_string(get_state(vof(n))));
}

BWAIT_STREAM(vwait_stream, volume_settled, volume_wait_line);

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

	if (bnode_list(b->volumes, &v, &n) < 0)
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
	if (r < 0)
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
	return submit(v, VA_PUBLISH, cmdline_of(cmd, line, sizeof(line)), rq, &t);
}

static int cmd_unpublish(struct bnode *n, const struct ctl_cmd *cmd, struct breq *rq)
{
	struct volume *v = vof(n);
	enum vstate s = get_state(v);
	char line[512];

	if (s != V_PUBLISHED && s != V_NODE_PUBLISH && s != V_NODE_UNPUBLISH && !actq_busy(&v->q))
		return nerr_set(&rq->err, EINVAL, "volume %s is not published (%s)", v->name,
				vstate_to_string(s));
	return submit(v, VA_UNPUBLISH, cmdline_of(cmd, line, sizeof(line)), rq, NULL);
}

static int cmd_stage(struct bnode *n, const struct ctl_cmd *cmd, struct breq *rq)
{
	char line[512];

	return submit(vof(n), VA_STAGE, cmdline_of(cmd, line, sizeof(line)), rq, NULL);
}

static int cmd_unstage(struct bnode *n, const struct ctl_cmd *cmd, struct breq *rq)
{
	struct volume *v = vof(n);
	char line[512];

	if (get_state(v) == V_PUBLISHED && !actq_busy(&v->q))
		return nerr_set(&rq->err, EBUSY, "volume %s is published at %s: unpublish it first",
				v->name, v->target);
	return submit(v, VA_UNSTAGE, cmdline_of(cmd, line, sizeof(line)), rq, NULL);
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
	return submit(vof(n), VA_EXPAND, cmdline_of(cmd, line, sizeof(line)), rq, &t);
}

static int cmd_destroy(struct bnode *n, const struct ctl_cmd *cmd, struct breq *rq)
{
	char line[512];

	return submit(vof(n), VA_DESTROY, cmdline_of(cmd, line, sizeof(line)), rq, NULL);
}

static const struct ctl_spec volume_specs[] = {
	{ .name = "publish", .min_args = 1, .max_args = 2, .usage = "publish TARGET [ro]" },
	{ .name = "unpublish", .min_args = 0, .max_args = 0, .usage = "unpublish" },
	{ .name = "stage", .min_args = 0, .max_args = 0, .usage = "stage" },
	{ .name = "unstage", .min_args = 0, .max_args = 0, .usage = "unstage" },
	{ .name = "expand", .min_args = 1, .max_args = 1, .usage = "expand SIZE" },
	{ .name = "destroy", .min_args = 0, .max_args = 0, .usage = "destroy" },
};
static const bctl_fn volume_fns[] = {
	cmd_publish, cmd_unpublish, cmd_stage, cmd_unstage, cmd_expand, cmd_destroy,
};
static const struct bctl_table volume_ctl = { volume_specs, volume_fns, 6 };
BCTL_FUNCS(volume_ctl, volume_ctl)

static const struct battr volume_attrs[] = {
	BCTL_ATTR(volume_ctl),
	{ .name = "state", .flags = BATTR_POLL, .show = show_state },
	{ .name = "id", .show = show_id },
	{ .name = "plugin", .show = show_plugin },
	{ .name = "profile", .show = show_profile },
	{ .name = "capacity", .show = show_capacity },
	{ .name = "target", .show = show_target },
	{ .name = "stats", .show = show_stats },
	{ .name = "error", .show = battr_show_error },
	{ .name = "info.json", .show = show_info },
	{ .name = "wait", .stream = &vwait_stream },
};

static void volume_node_free(struct bnode *n)
{
	/* actq_run frees the last action only after its last touch of the
	 * queue, so the queue inside the volume is idle here */
	volume_free(n->priv);
}

static const struct btype volume_type = {
	.name = "volume",
	.attrs = volume_attrs,
	.nattrs = sizeof(volume_attrs) / sizeof(volume_attrs[0]),
	.free = volume_node_free,
};

/* ---- volumes/ctl: create, import; mkdir, rmdir ---- */

static struct volume *volume_alloc(struct backend *b, const char *name)
{
	struct volume *v = calloc(1, sizeof(*v));

	if (!v)
		return NULL;
	v->b = b;
	snprintf(v->name, sizeof(v->name), "%s", name);
	actq_init(&v->q);
	pthread_mutex_init(&v->lock, NULL);
	return v;
}

/* Everything a create or import names, checked before anything happens. */
static int build_volume(struct backend *b, const struct ctl_cmd *c, const char *name,
			const char *id, struct volume **ret, struct nerr *err)
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
		prof = config_profile_find(b->cfg, s);
		if (!prof)
			return nerr_set(err, EINVAL, "no profile '%s'", s);
		plugin = prof->plugin;
	}
	if (c && (s = ctl_opt_get(c, "plugin"))) {
		if (prof && prof->plugin && strcmp(prof->plugin, s) != 0)
			return nerr_set(err, EINVAL, "profile %s is for plugin %s, not %s", prof->name,
					prof->plugin, s);
		plugin = s;
	}
	if (!plugin) {
		struct bnode **v2;
		size_t n2;
		const struct config_plugin *dp = config_default_plugin(b->cfg);
		if (dp)
			plugin = dp->name;
		else if (bnode_list(b->plugins, &v2, &n2) == 0) {
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
	k = bnode_lookup(b->volumes, name);
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
	v->plugin = strdup(plugin);
	v->profile = prof ? strdup(prof->name) : NULL;
	v->access_mode = mode ? strdup(mode) : prof && prof->access_mode ? strdup(prof->access_mode) : NULL;
	v->fs_type = fs ? strdup(fs) : prof && prof->fs_type ? strdup(prof->fs_type) : NULL;
	v->mount_flags = strv_dup(prof ? prof->mount_flags : NULL);
	v->params = strv_dup(prof ? prof->params : NULL);
	v->size_req = size;
	for (size_t i = 0; c && i < c->nopts; i++) {
		char buf[4200];
		if (strncmp(c->opts[i].key, "param.", 6) != 0)
			continue;
		if (!c->opts[i].key[6]) {
			volume_free(v);
			return nerr_set(err, EINVAL, "param.: empty parameter name");
		}
		snprintf(buf, sizeof(buf), "%s=%s", c->opts[i].key + 6, c->opts[i].val);
		if (strv_push(&v->params, buf) < 0) {
			volume_free(v);
			return nerr_set(err, ENOMEM, "out of memory");
		}
	}
	if (id) {
		v->id = strdup(id);
		v->imported = true;
		if (v->id)
			staging_from_id_locked(v);
	}
	v->state = id ? V_CREATED : V_CREATING;
	if (!v->plugin || !v->mount_flags || !v->params || (id && !v->id)) {
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
	r = bnode_add(b->volumes, v->node);
	bnode_unref(v->node);	/* the tree holds it, or it is freed */
	if (r < 0)
		return nerr_set(&rq->err, -r, "volume '%s': %s", v->name,
				r == -EEXIST ? "exists" : strerror(-r));
	if (kind == VA_CREATE)
		events_emit(b->events, "volume", v->name, NULL, "CREATING", NULL, NULL);
	r = submit(v, kind, cmdline, rq, NULL);
	if (r < 0 && r != -EINPROGRESS)
		volume_forget(v, NULL);
	return r;
}

static int cmd_create(struct bnode *n, const struct ctl_cmd *c, struct breq *rq)
{
	struct backend *b = node_backend(n);
	struct volume *v;
	char line[512];
	int r = build_volume(b, c, c->argv[1], NULL, &v, &rq->err);

	return r < 0 ? r : volume_start(b, v, VA_CREATE, cmdline_of(c, line, sizeof(line)), rq);
}

static int cmd_import(struct bnode *n, const struct ctl_cmd *c, struct breq *rq)
{
	struct backend *b = node_backend(n);
	struct volume *v;
	char line[512];
	int r;

	if (!c->argv[2][0] || strlen(c->argv[2]) > 1024)
		return nerr_set(&rq->err, EINVAL, "import: bad volume id");
	r = build_volume(b, c, c->argv[1], c->argv[2], &v, &rq->err);
	return r < 0 ? r : volume_start(b, v, VA_IMPORT, cmdline_of(c, line, sizeof(line)), rq);
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
	r = build_volume(b, NULL, name, NULL, &v, &rq->err);
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
	s = get_state(v);

	if (s == V_PUBLISHED || s == V_NODE_PUBLISH || s == V_NODE_UNPUBLISH)
		return nerr_set(&rq->err, EBUSY, "volume %s is published at %s: unpublish it first",
				v->name, v->target);
	return submit(v, VA_DESTROY, "rmdir", rq, NULL);
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

/* ---- for the other modules ---- */

int volume_mount_source(struct backend *b, const char *name, char **ret_path, struct nerr *err)
{
	struct bnode *k = bnode_lookup(b->volumes, name);
	struct volume *v;
	int r = 0;

	if (!k)
		return nerr_set(err, ENOENT, "no volume '%s'", name);
	v = vof(k);
	pthread_mutex_lock(&v->lock);
	if (v->state != V_PUBLISHED || !v->target)
		r = nerr_set(err, EBUSY, "volume '%s' is not published (%s): publish it first", name,
			     vstate_to_string(v->state));
	else if (!(*ret_path = strdup(v->target)))
		r = nerr_set(err, ENOMEM, "out of memory");
	pthread_mutex_unlock(&v->lock);
	bnode_unref(k);
	return r;
}

static bool find_volume(struct backend *b, const char *plugin, const char *id, char *buf, size_t len)
{
	struct bnode **v;
	size_t n;
	bool found = false;

	if (bnode_list(b->volumes, &v, &n) < 0)
		return false;
	for (size_t i = 0; i < n && !found; i++) {
		struct volume *x = vof(v[i]);
		pthread_mutex_lock(&x->lock);
		if (strcmp(x->plugin, plugin) == 0 && (!id || (x->id && strcmp(x->id, id) == 0))) {
			found = true;
			snprintf(buf, len, "%s", x->name);
		}
		pthread_mutex_unlock(&x->lock);
	}
	bnode_list_free(v, n);
	return found;
}

/* The volumes of one plugin by id, for the plugin's refresh: one pass over
 * the volumes, then a binary search per listed volume (ListVolumes of
 * 10,000 volumes must not walk 10,000 volumes each). */
struct volume_index {
	size_t n;
	struct { char *id; char name[65]; } *v;
};

static int vix_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct volume_index *volume_index_new(struct backend *b, const char *plugin)
{
	struct volume_index *ix = calloc(1, sizeof(*ix));
	struct bnode **v;
	size_t n;

	if (!ix || bnode_list(b->volumes, &v, &n) < 0) {
		free(ix);
		return NULL;
	}
	ix->v = calloc(n ? n : 1, sizeof(*ix->v));
	for (size_t i = 0; ix->v && i < n; i++) {
		struct volume *x = vof(v[i]);
		pthread_mutex_lock(&x->lock);
		if (x->id && strcmp(x->plugin, plugin) == 0 && (ix->v[ix->n].id = strdup(x->id))) {
			snprintf(ix->v[ix->n].name, sizeof(ix->v[ix->n].name), "%s", x->name);
			ix->n++;
		}
		pthread_mutex_unlock(&x->lock);
	}
	bnode_list_free(v, n);
	if (!ix->v) {
		free(ix);
		return NULL;
	}
	qsort(ix->v, ix->n, sizeof(*ix->v), vix_cmp);	/* id is the first member */
	return ix;
}

const char *volume_index_find(const struct volume_index *ix, const char *id)
{
	size_t lo = 0, hi = ix->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(ix->v[mid].id, id);
		if (c == 0)
			return ix->v[mid].name;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

void volume_index_free(struct volume_index *ix)
{
	if (!ix)
		return;
	for (size_t i = 0; i < ix->n; i++)
		free(ix->v[i].id);
	free(ix->v);
	free(ix);
}

bool volume_name_by_id(struct backend *b, const char *plugin, const char *id, char *buf, size_t len)
{
	return find_volume(b, plugin, id, buf, len);
}

bool volume_uses_plugin(struct backend *b, const char *plugin, char *buf, size_t len)
{
	return find_volume(b, plugin, NULL, buf, len);
}

/* ---- recovery ---- */

static void recover_one(void *ctx, const char *name, json_t *j)
{
	struct backend *b = ctx;
	struct volume *v;
	const char *s;
	int st;

	s = json_string_value(json_object_get(j, "plugin"));
	if (valid_name(name, NULL) < 0 || !s || !s[0]) {
		log_err("volume checkpoint %s: no plugin", name);
		atomic_fetch_add(&b->bad_records, 1);
		return;
	}
	v = volume_alloc(b, name);
	if (!v)
		return;
#define S(field, key) if ((s = json_string_value(json_object_get(j, key))) && s[0]) v->field = strdup(s)
	S(plugin, "plugin");
	S(profile, "profile");
	S(access_mode, "access_mode");
	S(fs_type, "fs_type");
	S(csi_name, "csi_name");
	S(id, "id");
	S(target, "target");
#undef S
	if ((s = json_string_value(json_object_get(j, "staging_path"))))
		snprintf(v->staging, sizeof(v->staging), "%s", s);
	staging_from_id_locked(v);
	v->mount_flags = json_strv(json_object_get(j, "mount_flags"));
	v->params = json_strv(json_object_get(j, "parameters"));
	v->vctx = json_strv(json_object_get(j, "volume_context"));
	v->pctx = json_strv(json_object_get(j, "publish_context"));
	v->size_req = (uint64_t)json_integer_value(json_object_get(j, "size_requested"));
	v->imported = json_is_true(json_object_get(j, "imported"));
	v->capacity = json_integer_value(json_object_get(j, "capacity"));
	v->ctl_published = json_is_true(json_object_get(j, "controller_published"));
	v->staged = json_is_true(json_object_get(j, "staged"));
	v->node_expand_to = json_integer_value(json_object_get(j, "node_expand_to"));
	v->ro = json_is_true(json_object_get(j, "readonly"));
	atomic_store(&v->queued, true);
	st = vstate_from_string(json_string_value(json_object_get(j, "state")));
	v->state = st < 0 ? V_CREATED : (enum vstate)st;
	if (b->rebooted && v->state >= V_NODE_STAGE && v->state <= V_NODE_UNSTAGE) {
		/* the node rebooted: its mounts are gone; back to NODE_READY, and
		 * publish or stage again on demand (Mesos does the same) */
		v->state = V_NODE_READY;
		v->staged = false;
		free(v->target);
		v->target = NULL;
	}
	v->node = bnode_new(&volume_type, name, v);
	if (!v->node) {
		volume_free(v);
		return;
	}
	if (bnode_add(b->volumes, v->node) < 0)
		log_err("volume checkpoint %s: cannot add it", name);
	bnode_unref(v->node);
}

static void recover_bad(void *ctx, const char *name, const char *why)
{
	struct backend *b = ctx;

	log_err("checkpoint of volume %s is unreadable: %s", name, why);
	atomic_fetch_add(&b->bad_records, 1);
}

int volumes_recover(struct backend *b, struct nerr *err)
{
	int r = store_load(b->cfg->state_dir, "volumes", recover_one, recover_bad, b);

	if (r < 0)
		return nerr_set(err, -r, "cannot read the volume checkpoints: %s", strerror(-r));
	return 0;
}

int volumes_render_metrics(struct backend *b, struct sbuf *out)
{
	struct bnode **v;
	size_t n;
	int r;

	if (bnode_list(b->volumes, &v, &n) < 0)
		return -ENOMEM;
	r = sbuf_adds(out, "# HELP nodefs_volumes Volumes by plugin and state.\n# TYPE nodefs_volumes gauge\n");
	/* count (plugin, state) pairs in one pass: few plugins, few states */
	struct { const char *plugin; enum vstate s; size_t count; } *pairs = NULL;
	size_t npairs = 0;

	pairs = calloc(n ? n : 1, sizeof(*pairs));
	if (!pairs)
		r = -ENOMEM;
	for (size_t i = 0; r >= 0 && i < n; i++) {
		struct volume *x = vof(v[i]);
		enum vstate st = get_state(x);
		size_t k;

		for (k = 0; k < npairs; k++)
			if (pairs[k].s == st && strcmp(pairs[k].plugin, x->plugin) == 0)
				break;
		if (k == npairs) {
			pairs[npairs].plugin = x->plugin;
			pairs[npairs].s = st;
			npairs++;
		}
		pairs[k].count++;
	}
	for (size_t k = 0; r >= 0 && k < npairs; k++)
		r = sbuf_printf(out, "nodefs_volumes{plugin=\"%s\",state=\"%s\"} %zu\n", pairs[k].plugin,
				vstate_to_string(pairs[k].s), pairs[k].count);
	free(pairs);
	if (r >= 0)
		r = sbuf_adds(out, "# HELP nodefs_volume_capacity_bytes Capacity of the volume.\n"
				   "# TYPE nodefs_volume_capacity_bytes gauge\n");
	for (size_t i = 0; r >= 0 && i < n; i++) {
		struct volume *x = vof(v[i]);
		long long cap;
		pthread_mutex_lock(&x->lock);
		cap = x->capacity;
		pthread_mutex_unlock(&x->lock);
		r = sbuf_printf(out, "nodefs_volume_capacity_bytes{volume=\"%s\"} %lld\n", x->name, cap);
	}
	for (int f = 0; f < 2 && r >= 0; f++) {
		r = sbuf_printf(out, "# HELP nodefs_volume_%s_bytes Bytes %s in the volume as the plugin last "
				     "reported them (NodeGetVolumeStats).\n# TYPE nodefs_volume_%s_bytes gauge\n",
				f ? "available" : "used", f ? "available" : "used", f ? "available" : "used");
		for (size_t i = 0; r >= 0 && i < n; i++) {
			struct volume *x = vof(v[i]);
			long long val;
			bool have;
			pthread_mutex_lock(&x->lock);
			have = x->have_stats;
			val = f ? x->stats_available : x->stats_used;
			pthread_mutex_unlock(&x->lock);
			if (have)
				r = sbuf_printf(out, "nodefs_volume_%s_bytes{volume=\"%s\"} %lld\n",
						f ? "available" : "used", x->name, val);
		}
	}
	bnode_list_free(v, n);
	return r;
}

/*
 * Recovery: a PENDING operation on a volume is driven to an end as if its
 * command had just been written again (the calls are idempotent, and the
 * CreateVolume name is kept in the record, so nothing is made twice). Its
 * answer goes to the operation, there being no writer any more.
 */
int volume_resume(struct backend *b, struct operation *op)
{
	static const struct { const char *cmd; int kind; } kinds[] = {
		{ "create", VA_CREATE }, { "mkdir", VA_CREATE }, { "import", VA_IMPORT },
		{ "publish", VA_PUBLISH }, { "stage", VA_STAGE }, { "unpublish", VA_UNPUBLISH },
		{ "unstage", VA_UNSTAGE }, { "expand", VA_EXPAND }, { "destroy", VA_DESTROY },
		{ "rmdir", VA_DESTROY },
	};
	struct ctl_cmd cmd = { 0 };
	struct bnode *n;
	struct volume *v;
	struct vact *x;
	int kind = -1, r;

	if (strncmp(op->object, "volumes/", 8) != 0)
		return -EINVAL;
	n = bnode_lookup(b->volumes, op->object + 8);
	if (!n)
		return -ENOENT;	/* it never reached its first checkpoint */
	v = vof(n);
	r = ctl_parse(op->command, strlen(op->command), &cmd, NULL);
	for (size_t i = 0; r >= 0 && i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(cmd.argv[0], kinds[i].cmd) == 0)
			kind = kinds[i].kind;
	x = kind >= 0 ? calloc(1, sizeof(*x)) : NULL;
	if (!x) {
		ctl_cmd_free(&cmd);
		bnode_unref(n);
		return -EINVAL;
	}
	if (kind == VA_PUBLISH && cmd.argc > 1) {
		x->target = strdup(cmd.argv[1]);
		x->ro = cmd.argc > 2 && strcmp(cmd.argv[2], "ro") == 0;
	} else if (kind == VA_PUBLISH) {
		pthread_mutex_lock(&v->lock);
		x->target = v->target ? strdup(v->target) : NULL;
		x->ro = v->ro;
		pthread_mutex_unlock(&v->lock);
	}
	if (kind == VA_EXPAND && cmd.argc > 1)
		parse_size(cmd.argv[1], &x->size, NULL);
	ctl_cmd_free(&cmd);
	if ((kind == VA_PUBLISH && !x->target) || (kind == VA_EXPAND && !x->size)) {
		free(x->target);
		free(x);
		bnode_unref(n);
		return -EINVAL;
	}
	x->v = v;
	x->node = n;	/* the lookup's reference */
	x->kind = kind;
	x->a.b = b;
	x->a.op = op;
	bnode_ref(op->node);	/* the action's reference, dropped when it ends */
	x->a.run = run_action;
	x->a.done = vact_done;
	x->a.free = vact_free;
	op->claimed = true;
	events_emit(b->events, "operation", op->id, "PENDING", "PENDING", op->id,
		    "resumed after a restart");
	atomic_fetch_add(&v->inflight, 1);
	actq_submit(&v->q, &x->a);
	return 0;
}
