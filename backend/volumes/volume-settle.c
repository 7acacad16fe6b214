/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * volume-settle: a volume's calls whose answer never came (a deadline,
 * unavailable, or a crash), settled in the background as kubelet settles
 * an uncertain mount. A watch per volume (uncertain.c runs its timer) puts
 * a look on the volume's own queue, so it runs in order with the commands:
 *
 * - CreateVolume or DeleteVolume (the volume still CREATING or DELETING):
 *   repeated (idempotent by name and id) until answered, then the volume
 *   goes where the command that left it wanted (CREATED, or gone; a create
 *   for a destroy is undone with DeleteVolume).
 * - ControllerPublish, NodeStage, NodePublish and their undoing calls
 *   (v->unc, recorded with what they act on before they were sent, and
 *   kept in the record until settled, across a restart):
 *   - the volume still in that call's transient state: the call is
 *     repeated and the volume goes on to the state it leads to;
 *   - a later command moved the volume where the call would have taken it:
 *     settled by that command ("redriven");
 *   - a later command took it the other way (an unpublish after a publish
 *     that timed out, a publish after an unpublish that did): the late
 *     call may still act, and would leave a mount nodefs does not know of,
 *     or take away one it believes is there. The node calls are watched
 *     in the mount table (the target or staging path showing up mounted,
 *     or unmounted) and undone or redone when they do; a controller call,
 *     which the node cannot see, has its opposite repeated at each look,
 *     until uncertain_timeout.
 * Each end is counted in nodefs_uncertain_outcomes_total{kind="csi.RPC",
 * result}, an "uncertain" event and a line in the operation's outcome
 * (uncertain.h).
 *
 * Owns: the watch and the looks. Must not know: CSI messages, ctl parsing,
 * files; plugins only through the steps (volume-steps.c).
 */
#include "volume-internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "macro.h"
#include "operation.h"
#include "uncertain.h"

/* ---- the watch ---- */

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What the watcher holds between two looks. */
struct vwatch {
	struct bnode *node;		/* the volume's */
	int64_t deadline_ms;
	uint64_t delay_ms;
};

/* The watch ends (settled, closed, or the watcher stopped). */
void volume_watch_end(struct volume *v)
{
	struct operation *op;

	pthread_mutex_lock(&v->lock);
	op = TAKE_PTR(v->unc_op);
	v->unc_undo = false;
	atomic_store(&v->watched, false);
	pthread_mutex_unlock(&v->lock);
	op_unref(op);
}

static void vwatch_drop(void *ctx)
{
	struct vwatch *w = ctx;

	volume_watch_end(vof(w->node));
	bnode_unref(w->node);
	free(w);
}

/* On the watcher thread: the next look is an action on the volume's queue,
 * so it runs in order with the commands. */
static void vwatch_fire(struct backend *b, void *ctx)
{
	struct vwatch *w = ctx;
	struct volume *v = vof(w->node);
	struct vact *x = calloc(1, sizeof(*x));

	if (!x) {
		vwatch_drop(w);
		return;
	}
	x->v = v;
	x->node = TAKE_PTR(w->node);
	x->kind = VA_SETTLE;
	x->deadline_ms = w->deadline_ms;
	x->delay_ms = w->delay_ms;
	free(w);
	x->a.b = b;
	x->a.run = volume_run_action;
	x->a.free = volume_act_free;
	actq_submit(&v->q, &x->a);
}

void volume_watch_arm(struct volume *v, int64_t deadline_ms, uint64_t delay_ms)
{
	struct vwatch *w = calloc(1, sizeof(*w));

	if (!w) {
		volume_watch_end(v);
		log_err("volume %s: out of memory: the answer of its last call is left to the "
			"next command", v->name);
		return;
	}
	w->node = bnode_ref(v->node);
	w->deadline_ms = deadline_ms;
	w->delay_ms = delay_ms;
	if (uncertain_watch_call(v->b, v->name, delay_ms, vwatch_fire, vwatch_drop, w) < 0)
		vwatch_drop(w);
}

void volume_watch_uncertain(struct volume *v, struct operation *op, bool undo)
{
	struct operation *old;

	pthread_mutex_lock(&v->lock);
	old = v->unc_op;
	v->unc_op = op ? (bnode_ref(op->node), op) : NULL;
	v->unc_undo = undo;
	pthread_mutex_unlock(&v->lock);
	op_unref(old);
	if (!atomic_exchange(&v->watched, true))
		volume_watch_arm(v, mono_ms() + (int64_t)v->b->cfg->uncertain_timeout_ms, 1000);
}

/* ---- CreateVolume and DeleteVolume ---- */

/* One look, on the volume's queue: the call is repeated (idempotent: the
 * CreateVolume name, the volume id). Answered, the volume goes where the
 * command that left it wanted: a create goes on (CREATED), a destroy undoes
 * what a late create made (DeleteVolume) or ends (gone). A command run
 * meanwhile that moved the volume settled it itself. Still unknown: looked
 * at again later, up to the deadline, then closed with the reason and left
 * in its transient state for the next command. */
static int settle_volume(struct vctx *x, struct vact *act, struct operation *uop, bool undo,
		       struct nerr *err)
{
	struct volume *v = x->v;
	struct backend *b = v->b;
	uint64_t cap = b->cfg->reconcile_interval_ms ? b->cfg->reconcile_interval_ms : 60000;
	enum vstate s = volume_state(v);
	const char *call = s == V_CREATING ? "CreateVolume" : "DeleteVolume";
	const char *result = NULL;
	char kind[48], line[512];
	int r;

	snprintf(kind, sizeof(kind), "csi.%s", call);
	if (s != V_CREATING && s != V_DELETING) {
		/* a command run meanwhile repeated the call and said so */
		events_tally(b->events, "nodefs_uncertain_outcomes_total{kind=\"csi.volume\","
			     "result=\"redriven\"}", 1);
		volume_watch_end(v);
		return 0;
	}
	if (s == V_CREATING) {
		r = volume_step_create(x, err);
		if (r >= 0 && undo) {
			r = volume_walk_down(x, DOWN_DELETED, err);
			if (r > 0) {
				result = "undone";
				snprintf(line, sizeof(line), "CreateVolume of volume %s (CSI name %s) made "
					 "it after all, for a destroy: DeleteVolume removed it",
					 v->name, v->csi_name ? v->csi_name : "-");
				volume_forget(v, NULL);
			}
		} else if (r >= 0) {
			result = "made";
			snprintf(line, sizeof(line), "CreateVolume of volume %s (CSI name %s) answered "
				 "after all: id %s, CREATED", v->name, v->csi_name ? v->csi_name : "-",
				 v->id ? v->id : "-");
		} else if (!v->last_uncertain) {
			result = "not_made";
			snprintf(line, sizeof(line), "CreateVolume of volume %s answered that it made "
				 "nothing (%s): the volume is forgotten", v->name, err->msg);
			volume_forget(v, NULL);
		}
	} else {
		r = volume_step_delete(x, err);
		if (r >= 0) {
			result = "deleted";
			snprintf(line, sizeof(line), "DeleteVolume of volume %s (id %s) answered after "
				 "all: the volume is gone", v->name, v->id ? v->id : "-");
			volume_forget(v, NULL);
		} else if (!v->last_uncertain) {
			result = "not_deleted";
			snprintf(line, sizeof(line), "DeleteVolume of volume %s answered that it did "
				 "not delete it (%s): back to CREATED", v->name, err->msg);
		}
	}
	if (!result && mono_ms() >= act->deadline_ms) {
		result = "never_answered";
		snprintf(line, sizeof(line), "%s of volume %s had no answer within uncertain_timeout "
			 "(%llu s; last: %s): closed, the volume stays %s for the next command", call,
			 v->name, (unsigned long long)(b->cfg->uncertain_timeout_ms / 1000), err->msg,
			 vstate_to_string(volume_state(v)));
	}
	if (result) {
		uncertain_settled(b, kind, v->name, uop, result, line);
		volume_watch_end(v);
		return 0;
	}
	volume_watch_arm(v, act->deadline_ms, act->delay_ms * 2 > cap ? cap : act->delay_ms * 2);
	return 0;
}


/* ---- publish-side calls ---- */

/* Whether path is a mount point now: /proc/self/mountinfo's fifth field,
 * with its octal escapes undone, against the path resolved. 0 when the
 * path does not exist; -errno when the table cannot be read. */
static int mounted_at(const char *path)
{
	char want[PATH_MAX], mp[PATH_MAX], *line = NULL;
	size_t cap = 0;
	int found = 0;
	FILE *f;

	if (!path || !realpath(path, want))
		return 0;
	if (!(f = fopen("/proc/self/mountinfo", "re")))
		return -errno;
	while (!found && getline(&line, &cap, f) > 0) {
		char *p = line;
		size_t n = 0;

		for (int i = 0; i < 4 && p; i++)
			if ((p = strchr(p, ' ')))
				p++;
		if (!p)
			continue;
		for (; *p && *p != ' ' && *p != '\n' && n + 1 < sizeof(mp); p++) {
			if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
			    p[3] >= '0' && p[3] <= '7') {
				mp[n++] = (char)(((p[1] - '0') << 6) | ((p[2] - '0') << 3) | (p[3] - '0'));
				p += 3;
			} else {
				mp[n++] = *p;
			}
		}
		mp[n] = '\0';
		found = strcmp(mp, want) == 0;
	}
	free(line);
	fclose(f);
	return found;
}

/* The transient state kind's call is sent in. */
static enum vstate transient_of(int kind)
{
	switch (kind) {
	case VC_CTL_PUBLISH: return V_CONTROLLER_PUBLISH;
	case VC_STAGE: return V_NODE_STAGE;
	case VC_PUBLISH: return V_NODE_PUBLISH;
	case VC_UNPUBLISH: return V_NODE_UNPUBLISH;
	case VC_UNSTAGE: return V_NODE_UNSTAGE;
	default: return V_CONTROLLER_UNPUBLISH;
	}
}

/* The call that undoes kind's (and the reverse). */
static int opposite(int kind)
{
	switch (kind) {
	case VC_CTL_PUBLISH: return VC_CTL_UNPUBLISH;
	case VC_STAGE: return VC_UNSTAGE;
	case VC_PUBLISH: return VC_UNPUBLISH;
	case VC_UNPUBLISH: return VC_PUBLISH;
	case VC_UNSTAGE: return VC_STAGE;
	default: return VC_CTL_PUBLISH;
	}
}

static bool makes(int kind)
{
	return kind == VC_CTL_PUBLISH || kind == VC_STAGE || kind == VC_PUBLISH;
}

/* Whether nodefs now believes in what u's call does (published at its
 * target, staged, controller-published; or, for an undoing call, not).
 * Lock held. */
static bool believed(const struct volume *v, const struct vcall *u)
{
	bool on;

	switch (u->kind) {
	case VC_CTL_PUBLISH:
	case VC_CTL_UNPUBLISH:
		on = v->ctl_published;
		break;
	case VC_STAGE:
	case VC_UNSTAGE:
		on = v->staged;
		break;
	default:
		on = v->target && u->path && strcmp(v->target, u->path) == 0 &&
		     (v->state == V_PUBLISHED || v->state == V_NODE_PUBLISH);
		break;
	}
	return makes(u->kind) ? on : !on;
}

/*
 * One look at v->unc (a copy in u): see the comment at the top. Returns the
 * result word once settled (line filled), NULL to look again.
 */
static const char *settle_call_look(struct vctx *x, const struct vcall *u, bool last,
				    char *line, size_t len, struct nerr *err)
{
	struct volume *v = x->v;
	const char *rpc = vcall_name(u->kind), *where = u->path ? u->path : u->node ? u->node : "-";
	bool on;
	int r, m;

	if (volume_state(v) == transient_of(u->kind)) {
		/* untouched since: the call again, and on to where it leads */
		r = volume_step_call(x, u->kind, err);
		if (r >= 0) {
			snprintf(line, len, "%s of volume %s (%s) answered after all: %s", rpc, v->name,
				 where, vstate_to_string(volume_state(v)));
			return "done";
		}
		if (!v->last_uncertain) {
			snprintf(line, len, "%s of volume %s (%s) answered that it did not act (%s): "
				 "back to %s", rpc, v->name, where, err->msg,
				 vstate_to_string(volume_state(v)));
			return "not_done";
		}
		if (last) {
			snprintf(line, len, "%s of volume %s (%s) had no answer within uncertain_timeout "
				 "(%llu s; last: %s): closed, the volume stays %s for the next command",
				 rpc, v->name, where,
				 (unsigned long long)(v->b->cfg->uncertain_timeout_ms / 1000), err->msg,
				 vstate_to_string(volume_state(v)));
			return "never_answered";
		}
		return NULL;
	}
	pthread_mutex_lock(&v->lock);
	on = believed(v, u);
	pthread_mutex_unlock(&v->lock);
	if (on) {
		snprintf(line, len, "%s of volume %s (%s), whose answer was lost: a later command did "
			 "what it would have (now %s)", rpc, v->name, where,
			 vstate_to_string(volume_state(v)));
		return "redriven";
	}
	/* a later command took the volume the other way: the late call must
	 * not leave what nodefs does not believe in */
	if (u->kind == VC_CTL_PUBLISH || u->kind == VC_CTL_UNPUBLISH) {
		/* not seen from the node: its opposite again at each look */
		r = volume_call_raw(x, opposite(u->kind), NULL, u->node, err);
		if (r < 0)
			log_warn("volume %s: %s, against a late %s: %s", v->name,
				 vcall_name(opposite(u->kind)), rpc, err->msg);
		if (!last || r < 0)
			return NULL;
		snprintf(line, len, "%s of volume %s (node %s) had its answer lost and a later command "
			 "took the volume the other way: %s was sent again at each look until "
			 "uncertain_timeout, so a late one does not stay", rpc, v->name, where,
			 vcall_name(opposite(u->kind)));
		return makes(u->kind) ? "unpublished" : "republished";
	}
	m = mounted_at(u->path);
	if (m >= 0 && (m == 1) == makes(u->kind)) {
		/* mounted late, or unmounted late: undone, or done again. Each
		 * attempt of the call may act late, so the watch goes on to the
		 * deadline; the first is reported at once. */
		r = volume_call_raw(x, opposite(u->kind), u->path, NULL, err);
		if (r < 0) {
			log_warn("volume %s: %s at %s, against a late %s: %s", v->name,
				 vcall_name(opposite(u->kind)), u->path, rpc, err->msg);
		} else {
			snprintf(line, len, "%s of volume %s at %s acted after its answer was lost, "
				 "once a later command had taken the volume the other way: %s %s it",
				 rpc, v->name, u->path, vcall_name(opposite(u->kind)),
				 makes(u->kind) ? "undid" : "redid");
			return makes(u->kind) ? "undone" : "redone";
		}
	}
	if (!last)
		return NULL;
	if (u->told) {
		snprintf(line, len, "%s of volume %s at %s: watched until uncertain_timeout", rpc,
			 v->name, u->path);
		return "closed";
	}
	snprintf(line, len, "%s of volume %s at %s, whose answer was lost, did not act within "
		 "uncertain_timeout (%llu s): closed", rpc, v->name, u->path,
		 (unsigned long long)(v->b->cfg->uncertain_timeout_ms / 1000));
	return "never_seen";
}

static int settle_call(struct vctx *x, struct vact *act, struct operation *uop, struct nerr *err)
{
	struct volume *v = x->v;
	struct backend *b = v->b;
	uint64_t cap = b->cfg->reconcile_interval_ms ? b->cfg->reconcile_interval_ms : 60000;
	struct vcall u = { 0 };
	const char *result;
	char kind[64], line[700];

	pthread_mutex_lock(&v->lock);
	vcall_set(&u, v->unc.kind, v->unc.path, v->unc.node);
	u.told = v->unc.told;
	pthread_mutex_unlock(&v->lock);
	result = settle_call_look(x, &u, mono_ms() >= act->deadline_ms, line, sizeof(line), err);
	snprintf(kind, sizeof(kind), "csi.%s", vcall_name(u.kind));
	if (result && (!strcmp(result, "undone") || !strcmp(result, "redone"))) {
		/* reported the first time; watched on to the deadline, soon
		 * again, for the call's other attempts */
		pthread_mutex_lock(&v->lock);
		if (v->unc.kind == u.kind)
			v->unc.told = true;
		pthread_mutex_unlock(&v->lock);
		if (!u.told)
			uncertain_settled(b, kind, v->name, uop, result, line);
		else
			log_info("volume %s: again: %s", v->name, line);
		volume_watch_arm(v, act->deadline_ms, 1000);
		vcall_clear(&u);
		return 0;
	}
	if (result) {
		pthread_mutex_lock(&v->lock);
		/* a repeat left uncertain again replaced it with itself */
		if (v->unc.kind == u.kind)
			vcall_clear(&v->unc);
		pthread_mutex_unlock(&v->lock);
		x->dirty = true;	/* the record without it */
		if (strcmp(result, "closed") != 0)
			uncertain_settled(b, kind, v->name, uop, result, line);
		else
			log_info("volume %s: %s", v->name, line);
		volume_watch_end(v);
	} else {
		volume_watch_arm(v, act->deadline_ms, act->delay_ms * 2 > cap ? cap : act->delay_ms * 2);
	}
	vcall_clear(&u);
	return 0;
}

int volume_settle_run(struct vctx *x, struct vact *act, struct nerr *err)
{
	struct volume *v = x->v;
	struct operation *uop;
	bool undo, call;
	int r;

	pthread_mutex_lock(&v->lock);
	uop = v->unc_op ? (bnode_ref(v->unc_op->node), v->unc_op) : NULL;
	undo = v->unc_undo;
	call = v->unc.kind != VC_NONE;
	pthread_mutex_unlock(&v->lock);
	r = call ? settle_call(x, act, uop, err) : settle_volume(x, act, uop, undo, err);
	op_unref(uop);
	return r;
}
