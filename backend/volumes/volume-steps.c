/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * volume-steps: the volume state machine. Publish walks CREATED ->
 * CONTROLLER_PUBLISH -> NODE_READY -> NODE_STAGE -> VOL_READY ->
 * NODE_PUBLISH -> PUBLISHED, skipping what the plugin's capabilities do not
 * have; unpublish, unstage and destroy walk back down (NodeUnpublish before
 * NodeUnstage before ControllerUnpublish before DeleteVolume); expand is
 * ControllerExpand then NodeExpand (volume-change.c, with modify). One
 * action runs one command.
 *
 * Rules kept (from Mesos and kubelet): the calls of one volume run strictly
 * in order on its action queue; CreateVolume's name derives from the
 * operation id, so a retried create never makes two volumes; the transient
 * state is checkpointed before each call and the stable state after it; a
 * call whose outcome is unknown (deadline, unavailable, aborted) leaves the
 * volume in its transient state, with the call kept as uncertain, and the
 * next command, or the background settling (volume-settle.c), re-drives
 * that call (NodeStage is re-sent after a failed NodeUnstage); a call that
 * failed for certain puts the volume back where it was. After a reboot a
 * publish is believed only once its target is a mount point, and is redone
 * once when it is not (volume_check_mounted_after_reboot, republish).
 *
 * Owns: the steps and walks. Plugins are reached only through struct
 * storage_ops (storage.h). Must not know: CSI messages, ctl parsing, files.
 */
#include "volume-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "profiles.h"
#include "macro.h"
#include "operation.h"
#include "secrets.h"
#include "store.h"

/* ---- the steps: one storage call each ---- */


/* The id of the operation whose command runs (NULL: none). */
static const char *xop(const struct vctx *x)
{
	return x->op ? x->op->id : NULL;
}

static int do_create_volume(struct vctx *x, struct nerr *err)
{
	struct volume *v = x->v;
	struct storage_req rq = volume_req_of(x);
	struct storage_result res = { 0 };
	struct storage_volume sv = { 0 };
	int r;

	rq.bytes = (int64_t)v->size_req;
	rq.mparams = v->mparams;
	if (v->src && v->src_id && strncmp(v->src, "snapshot:", 9) == 0)
		rq.from_snapshot = v->src_id;
	else if (v->src && v->src_id)
		rq.from_volume = v->src_id;
	r = x->ops->create(x->h, &rq, &sv, volume_retry_note, x, &res, err);
	volume_note_result(x, &res);
	if (r < 0)
		return r;
	pthread_mutex_lock(&v->lock);
	free(v->id);
	v->id = TAKE_PTR(sv.id);
	v->capacity = sv.capacity;
	storage_strv_free(v->vctx);
	v->vctx = TAKE_PTR(sv.vctx);
	volume_staging_locked(v);
	pthread_mutex_unlock(&v->lock);
	return 0;
}

static int do_validate(struct vctx *x, struct nerr *err)
{
	struct storage_req rq = volume_req_of(x);
	struct storage_result res = { 0 };
	int r = x->ops->validate(x->h, &rq, volume_retry_note, x, &res, err);

	volume_note_result(x, &res);
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

		if (x->ops->list(x->h, token, &pg, NULL, NULL, NULL, &e) < 0)
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
	rq = volume_req_of(x);
	rq.node_id = x->node_id;
	r = x->ops->controller_publish(x->h, &rq, &pctx, volume_retry_note, x, &res, err);
	volume_note_result(x, &res);
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
	rq = volume_req_of(x);
	rq.node_id = x->node_id;
	r = x->ops->controller_unpublish(x->h, &rq, volume_retry_note, x, &res, err);
	volume_note_result(x, &res);
	if (r >= 0) {
		pthread_mutex_lock(&x->v->lock);
		x->v->ctl_published = false;
		storage_strv_free(x->v->pctx);
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

	if (!VSTAGING(v)[0])
		return nerr_set(err, EINVAL, "volume %s has no id to stage", v->name);
	r = mkdir_p(VSTAGING(v), 0750);
	if (r < 0)
		return nerr_set(err, -r, "cannot make the staging path %s: %s", VSTAGING(v), strerror(-r));
	rq = volume_req_of(x);
	rq.staging = VSTAGING(v);
	r = x->ops->stage(x->h, &rq, volume_retry_note, x, &res, err);
	volume_note_result(x, &res);
	if (r >= 0) {
		pthread_mutex_lock(&v->lock);
		v->staged = true;
		pthread_mutex_unlock(&v->lock);
	}
	return r;
}

static int do_unstage(struct vctx *x, struct nerr *err)
{
	struct storage_req rq = volume_req_of(x);
	struct storage_result res = { 0 };
	int r;

	rq.staging = VSTAGING(x->v);
	r = x->ops->unstage(x->h, &rq, volume_retry_note, x, &res, err);
	volume_note_result(x, &res);
	if (r >= 0) {
		pthread_mutex_lock(&x->v->lock);
		x->v->staged = false;
		pthread_mutex_unlock(&x->v->lock);
		rmdir(VSTAGING(x->v));
	}
	return r;
}

/* Is path the root of a mount: statx's word (Linux 5.8+), else a device
 * other than its parent's. 1, 0, -errno. */
static int is_mount_point(const char *path)
{
	char parent[PATH_MAX];
	struct statx sx;
	struct stat a, b;
	char *slash;

	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx) < 0)
		return -errno;
	if (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)
		return !!(sx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
	snprintf(parent, sizeof(parent), "%s", path);
	slash = strrchr(parent, '/');
	if (!slash)
		return -EINVAL;
	slash[slash == parent] = '\0';
	if (lstat(path, &a) < 0 || stat(parent, &b) < 0)
		return -errno;
	return a.st_dev != b.st_dev;
}

static int volume_check_mounted_after_reboot(struct volume *v, const char *target, struct nerr *err)
{
	int m;

	if (!v->b->rebooted || !target)
		return 0;
	m = is_mount_point(target);
	if (m > 0)
		return 0;
	log_warn("volume %s: NodePublishVolume answered OK, but %s is not a mount point%s%s", v->name,
		 target, m < 0 ? ": " : "", m < 0 ? strerror(-m) : "");
	return nerr_set(err, EIO, "NodePublishVolume answered OK, but %s is not a mount point "
			"(%s): the node rebooted since the plugin last published this volume, and "
			"the plugin answered from its records", target,
			m < 0 ? strerror(-m) : "nothing mounted there");
}

/* After a reboot the plugin answered a publish "done" from its records
 * and nothing is mounted at the target (err says so): make it forget them
 * (NodeUnpublish, NodeUnstage) and do it again (NodeStage, NodePublish),
 * once. Still no mount: the error stands, and the volume is not
 * published. */
static int republish(struct vctx *x, struct nerr *err)
{
	struct volume *v = x->v;
	struct storage_req rq = volume_req_of(x);
	struct storage_result res = { 0 };
	struct nerr e = { 0 };
	bool stage = v->staged && HAS_NODE(x, STAGE_UNSTAGE_VOLUME);
	int r;

	log_info("volume %s: unpublished%s and published again", v->name,
		 stage ? ", unstaged, staged" : "");
	r = x->ops->unpublish(x->h, &rq, volume_retry_note, x, &res, &e);
	if (r >= 0 && stage) {
		r = x->ops->unstage(x->h, &rq, volume_retry_note, x, &res, &e);
		if (r >= 0)
			r = x->ops->stage(x->h, &rq, volume_retry_note, x, &res, &e);
	}
	if (r >= 0)
		r = x->ops->publish(x->h, &rq, volume_retry_note, x, &res, &e);
	volume_note_result(x, &res);
	if (r < 0) {
		nerr_prefix(&e, "%s; redoing it", err->msg);
		*err = e;
		return r;
	}
	memset(err, 0, sizeof(*err));
	r = volume_check_mounted_after_reboot(v, v->target, err);
	if (r < 0)
		nerr_set(err, -r, "after a reboot NodePublishVolume answered OK twice (the second "
			 "after NodeUnpublish%s), but %s is not a mount point: not published (see "
			 "the plugin's log)", stage ? ", NodeUnstage and NodeStage" : "", v->target);
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
	rq = volume_req_of(x);
	r = x->ops->publish(x->h, &rq, volume_retry_note, x, &res, err);
	volume_note_result(x, &res);
	if (r >= 0 && volume_check_mounted_after_reboot(v, v->target, err) < 0)
		r = republish(x, err);
	return r;
}

static int do_unpublish(struct vctx *x, struct nerr *err)
{
	struct storage_req rq = volume_req_of(x);
	struct storage_result res = { 0 };
	int r = x->ops->unpublish(x->h, &rq, volume_retry_note, x, &res, err);

	volume_note_result(x, &res);
	return r;
}

static int do_delete(struct vctx *x, struct nerr *err)
{
	struct storage_req rq = volume_req_of(x);
	struct storage_result res = { 0 };
	int r = x->ops->delete(x->h, &rq, volume_retry_note, x, &res, err);

	volume_note_result(x, &res);
	return r;
}

/* The publish-side call a step's transient state sends, recorded in the
 * volume (and so in the record written before it is sent) with what it
 * acts on. */
static void record_call(struct vctx *x, enum vstate transient)
{
	static const int kinds[] = {
		[V_CONTROLLER_PUBLISH] = VC_CTL_PUBLISH, [V_NODE_STAGE] = VC_STAGE,
		[V_NODE_PUBLISH] = VC_PUBLISH, [V_NODE_UNPUBLISH] = VC_UNPUBLISH,
		[V_NODE_UNSTAGE] = VC_UNSTAGE, [V_CONTROLLER_UNPUBLISH] = VC_CTL_UNPUBLISH,
	};
	struct volume *v = x->v;
	int kind = (size_t)transient < sizeof(kinds) / sizeof(kinds[0]) ? kinds[transient] : VC_NONE;
	const char *path = NULL;
	struct nerr e = { 0 };

	if (kind == VC_NONE)
		return;
	if (kind == VC_CTL_PUBLISH || kind == VC_CTL_UNPUBLISH) {
		/* the call fails the same way if the node id cannot be had */
		if (plugin_node_id(x->p, x->node_id, sizeof(x->node_id), &e) < 0)
			x->node_id[0] = '\0';
	} else if (kind == VC_STAGE || kind == VC_UNSTAGE) {
		path = VSTAGING(v);
	} else {
		path = v->target;
	}
	pthread_mutex_lock(&v->lock);
	vcall_set(&v->call, kind, path, kind == VC_CTL_PUBLISH || kind == VC_CTL_UNPUBLISH ?
		  x->node_id : NULL);
	snprintf(v->call.op_id, sizeof(v->call.op_id), "%s", x->op ? x->op->id : "");
	pthread_mutex_unlock(&v->lock);
}
_Static_assert(sizeof(((struct vcall *)0)->op_id) >= sizeof(((struct operation *)0)->id),
	       "a call record holds its operation's whole id");

/* The call in flight ended: for certain (forgotten), or with its answer
 * lost (kept as the volume's uncertain call, for the watch). */
static void call_ended(struct volume *v, bool uncertain)
{
	pthread_mutex_lock(&v->lock);
	if (uncertain && v->call.kind != VC_NONE)
		vcall_move(&v->unc, &v->call);
	else
		vcall_clear(&v->call);
	pthread_mutex_unlock(&v->lock);
}

/* Whether v holds a publish-side call whose answer never came. */
static int unc_kind(struct volume *v)
{
	int k;

	pthread_mutex_lock(&v->lock);
	k = v->unc.kind;
	pthread_mutex_unlock(&v->lock);
	return k;
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

	volume_set_state(v, transient, xop(x));
	record_call(x, transient);
	/* the one flush of the step: this record (with the call it sends),
	 * the stable state of the step before and whatever the command
	 * queued (its operation) */
	r = volume_checkpoint(v, STORE_DURABLE, err);
	if (r < 0) {
		call_ended(v, false);
		volume_set_state(v, back, xop(x));
		return r;
	}
	x->dirty = false;
	v->last_uncertain = false;
	r = fn(x, err);
	call_ended(v, r < 0 && v->last_uncertain);
	if (r < 0) {
		if (!v->last_uncertain) {
			volume_set_state(v, back, xop(x));
			volume_checkpoint(v, STORE_LAZY, &cerr);
		} else {
			/* the record says so: its call's answer is lost */
			volume_checkpoint(v, STORE_LAZY, &cerr);
			nerr_prefix(err, "left in %s, the next command retries", vstate_to_string(transient));
		}
		return r;
	}
	volume_set_state(v, done, xop(x));
	x->dirty = true;
	return 0;
}

/* The stable state a step or a walk left, checkpointed if not yet. */
static int flush(struct vctx *x, struct nerr *err)
{
	if (!x->dirty)
		return 0;
	x->dirty = false;
	return volume_checkpoint(x->v, STORE_LAZY, err);
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
		switch (volume_state(v)) {
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
				volume_set_state(v, V_NODE_READY, xop(x));
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

static int walk_down(struct vctx *x, enum down_goal goal, struct nerr *err)
{
	struct volume *v = x->v;
	int r = 0;

	for (int guard = 0; guard < 16 && r >= 0; guard++) {
		switch (volume_state(v)) {
		case V_PUBLISHED:
		case V_NODE_PUBLISH:
		case V_NODE_UNPUBLISH:
			r = volume_step_call(x, VC_UNPUBLISH, err);
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
			if (v->ctl_published || volume_state(v) != V_NODE_READY)
				r = step(x, V_CONTROLLER_UNPUBLISH, do_controller_unpublish, V_CREATED,
					 V_NODE_READY, err);
			else {
				volume_set_state(v, V_CREATED, xop(x));
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

/*
 * expand: ControllerExpandVolume when the plugin has the controller
 * capability, then NodeExpandVolume when it has the node one (and the
 * controller says the node must act) while the volume is on this node.
 * A NodeExpand that failed after the ControllerExpand went through is owed
 * (node_expand_to, checkpointed): `expand` to that size again makes only
 * the node call. Off the node, NodeStage/NodePublish see the new size.
 */
/* The secrets of v's calls: its profile's file, else its plugin's (the
 * current config's, or add's secrets=), read now; none when none names one. */
static int load_secrets(struct vctx *x, struct nerr *err)
{
	const struct config *c = profiles_config(x->v->b);
	const struct config_profile *pr = x->v->profile ? config_profile_find(c, x->v->profile) : NULL;
	const struct config_plugin *cp = config_plugin_find(c, x->v->plugin);
	const char *path = pr && pr->secrets ? pr->secrets : cp ? cp->secrets : NULL;
	_cleanup_free_ char *added = path || cp ? NULL : plugin_secrets_dup(x->v->b, x->v->plugin);

	if (added)
		path = added;
	if (!path)
		return 0;
	return secrets_read(path, &x->secrets, err);
}

/* ---- the steps the settling repeats (volume-settle.c) ---- */

int volume_step_create(struct vctx *x, struct nerr *err)
{
	return step(x, V_CREATING, do_create_volume, V_CREATED, V_CREATING, err);
}

int volume_step_delete(struct vctx *x, struct nerr *err)
{
	return step(x, V_DELETING, do_delete, V_DELETING, V_CREATED, err);
}

int volume_walk_down(struct vctx *x, enum down_goal goal, struct nerr *err)
{
	return walk_down(x, goal, err);
}

int volume_step_call(struct vctx *x, int kind, struct nerr *err)
{
	struct volume *v = x->v;
	enum vstate below = v->staged ? V_VOL_READY : V_NODE_READY;
	int r;

	switch (kind) {
	case VC_CTL_PUBLISH:
		return step(x, V_CONTROLLER_PUBLISH, do_controller_publish, V_NODE_READY, V_CREATED, err);
	case VC_STAGE:
		return step(x, V_NODE_STAGE, do_stage, V_VOL_READY, V_NODE_READY, err);
	case VC_PUBLISH:
		return step(x, V_NODE_PUBLISH, do_publish, V_PUBLISHED, below, err);
	case VC_UNPUBLISH:
		r = step(x, V_NODE_UNPUBLISH, do_unpublish, below, V_PUBLISHED, err);
		if (r >= 0) {
			pthread_mutex_lock(&v->lock);
			free(v->target);
			v->target = NULL;
			v->ro = false;
			pthread_mutex_unlock(&v->lock);
			x->dirty = true;
		}
		return r;
	case VC_UNSTAGE:
		return step(x, V_NODE_UNSTAGE, do_unstage, V_NODE_READY, V_VOL_READY, err);
	case VC_CTL_UNPUBLISH:
		return step(x, V_CONTROLLER_UNPUBLISH, do_controller_unpublish, V_CREATED, V_NODE_READY,
			    err);
	}
	return nerr_set(err, EINVAL, "volume %s: no such call", v->name);
}

int volume_call_raw(struct vctx *x, int kind, const char *path, const char *node,
		    struct nerr *err)
{
	struct storage_req rq = volume_req_of(x);
	struct storage_result res = { 0 };
	char **pctx = NULL;
	int r = -EINVAL;

	x->v->last_uncertain = false;
	if (kind == VC_PUBLISH || kind == VC_UNPUBLISH)
		rq.target = path;
	else if (kind == VC_STAGE || kind == VC_UNSTAGE)
		rq.staging = path;
	else
		rq.node_id = node;
	switch (kind) {
	case VC_CTL_PUBLISH:
		r = x->ops->controller_publish(x->h, &rq, &pctx, volume_retry_note, x, &res, err);
		storage_strv_free(pctx);
		break;
	case VC_STAGE:
		r = x->ops->stage(x->h, &rq, volume_retry_note, x, &res, err);
		break;
	case VC_PUBLISH:
		r = x->ops->publish(x->h, &rq, volume_retry_note, x, &res, err);
		break;
	case VC_UNPUBLISH:
		r = x->ops->unpublish(x->h, &rq, volume_retry_note, x, &res, err);
		break;
	case VC_UNSTAGE:
		r = x->ops->unstage(x->h, &rq, volume_retry_note, x, &res, err);
		break;
	case VC_CTL_UNPUBLISH:
		r = x->ops->controller_unpublish(x->h, &rq, volume_retry_note, x, &res, err);
		break;
	default:
		return nerr_set(err, EINVAL, "volume %s: no such call", x->v->name);
	}
	volume_note_result(x, &res);
	return r;
}
int volume_run_action(struct action *a, struct nerr *err)
{
	struct vact *act = (struct vact *)a;
	struct volume *v = act->v;
	struct vctx x = { .v = v, .op = a->op };
	int r;

	/* queued behind the destroy that forgot it: no call, no checkpoint
	 * (a step would write the record of a volume that is gone) */
	if (atomic_load(&v->node->dead)) {
		if (act->kind == VA_SETTLE)
			volume_watch_end(v);
		return nerr_set(err, ENOENT, "volume %s was destroyed", v->name);
	}
	x.p = plugin_get(v->b, v->plugin, &x.pnode);
	if (!x.p && act->kind == VA_SETTLE)
		volume_watch_end(v);
	if (!x.p)
		return nerr_set(err, ENOENT, "plugin %s of volume %s is gone", v->plugin, v->name);
	x.ops = plugin_ops(x.p);
	x.h = plugin_handle(x.p);
	r = plugin_caps(x.p, &x.caps, err);
	if (r < 0)
		nerr_prefix(err, "plugin %s", v->plugin);
	else
		r = load_secrets(&x, err);
	if (r < 0 && act->kind == VA_SETTLE) {
		/* the plugin is away, or its secrets unreadable: look again later */
		volume_watch_arm(v, act->deadline_ms, act->delay_ms);
		goto out;
	}
	if (r < 0) {
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
		if (v->src && (strncmp(v->src, "snapshot:", 9) == 0 ? !HAS_CTL(&x, CREATE_DELETE_SNAPSHOT)
							    : !HAS_CTL(&x, CLONE_VOLUME))) {
			r = nerr_set(err, ENOTSUP, "plugin %s cannot make a volume from %s (no %s)", v->plugin,
				     v->src, strncmp(v->src, "snapshot:", 9) == 0 ? "CREATE_DELETE_SNAPSHOT"
				     : "CLONE_VOLUME");
			volume_forget(v, a->op ? a->op->id : NULL);
			break;
		}
		r = step(&x, V_CREATING, do_create_volume, V_CREATED, V_CREATING, err);
		if (r < 0 && !v->last_uncertain)
			volume_forget(v, a->op ? a->op->id : NULL);	/* it never existed: nothing changed */
		break;
	case VA_IMPORT:
		/* the operation durable before the call (no step does it) */
		r = store_sync(v->b->store, err);
		if (r >= 0)
			r = do_validate(&x, err);
		if (r >= 0) {
			import_listed(&x);
			r = volume_checkpoint(v, STORE_LAZY, err);
		}
		if (r < 0)
			volume_forget(v, a->op ? a->op->id : NULL);
		else {
			volume_set_state(v, V_CREATED, xop(&x));
			op_events_emit(v->b, "volume", v->name, NULL, "CREATED", a->op ? a->op->id : NULL,
				    "imported");
		}
		break;
	case VA_PUBLISH:
		if (volume_state(v) == V_PUBLISHED) {
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
		/* refused for good (the walk ended in a stable state below
		 * PUBLISHED, no call left in doubt): not published anywhere.
		 * A transient state keeps the target its re-drive needs. */
		if (r < 0 && (volume_state(v) == V_CREATED || volume_state(v) == V_NODE_READY ||
			      volume_state(v) == V_VOL_READY)) {
			pthread_mutex_lock(&v->lock);
			free(v->target);
			v->target = NULL;
			v->ro = false;
			pthread_mutex_unlock(&v->lock);
			x.dirty = true;
		}
		break;
	case VA_STAGE:
		r = walk_up(&x, false, err);
		break;
	case VA_UNPUBLISH: {
		enum vstate s = volume_state(v);
		if (s != V_PUBLISHED && s != V_NODE_PUBLISH && s != V_NODE_UNPUBLISH) {
			r = nerr_set(err, EINVAL, "volume %s is not published (%s)", v->name, vstate_to_string(s));
			break;
		}
		r = walk_down(&x, DOWN_UNPUBLISHED, err);
		break;
	}
	case VA_UNSTAGE:
		if (volume_state(v) == V_PUBLISHED) {
			r = nerr_set(err, EBUSY, "volume %s is published at %s: unpublish it first",
				     v->name, v->target);
			break;
		}
		r = walk_down(&x, DOWN_CREATED, err);
		break;
	case VA_EXPAND:
		r = store_sync(v->b->store, err);	/* the operation, before the call */
		if (r >= 0)
			r = volume_expand(&x, act->size, err);
		break;
	case VA_DESTROY:
		r = walk_down(&x, DOWN_DELETED, err);
		if (r > 0) {
			volume_forget(v, a->op ? a->op->id : NULL);
			r = 0;
		}
		break;
	case VA_MODIFY:
		r = store_sync(v->b->store, err);	/* the operation, before the call */
		if (r >= 0)
			r = volume_modify(&x, act->mparams, err);
		break;
	case VA_SETTLE:
		r = volume_settle_run(&x, act, err);
		break;
	}
	/* a call whose answer never came: settled in the background, not
	 * only by the next command */
	if (r < 0 && act->kind != VA_SETTLE && v->last_uncertain && !atomic_load(&v->node->dead) &&
	    (volume_state(v) == V_CREATING || volume_state(v) == V_DELETING || unc_kind(v)))
		volume_watch_uncertain(v, a->op, act->kind == VA_DESTROY);
	/* the stable state the walk ended in, before the command is answered */
	if (!atomic_load(&v->node->dead)) {
		struct nerr ferr = { 0 };
		int fr = flush(&x, r < 0 ? &ferr : err);

		if (fr < 0 && r >= 0)
			r = fr;
	}
out:
	if (act->kind == VA_SETTLE) {
		/* no writer to answer, whose answer would flush what the look
		 * queued (a settled record, a forgotten volume's removal) */
		struct nerr serr = { 0 };

		store_sync(v->b->store, &serr);
	}
	if (act->kind == VA_CREATE || act->kind == VA_IMPORT || act->kind == VA_DESTROY ||
	    act->kind == VA_SETTLE)
		plugin_lists_stale(v->b, v->plugin);
	secrets_free(x.secrets);
	bnode_unref(x.pnode);
	return r < 0 ? r : 0;
}
