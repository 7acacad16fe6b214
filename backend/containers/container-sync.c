/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * container-sync: the engines' word on nodefs's containers. Their event
 * stream (start, die, oom, pause, destroy) moves a container at once and
 * queues a sync (an inspect) for the rest; reconciliation (reconcile.h)
 * compares each runtime's listing with nodefs's containers, confirms each
 * difference with a fresh look, and takes in only what is plainly observed.
 *
 * It must not act on its own: it never removes an orphan, never repeats a
 * command; what it learns goes through a sync action like any other.
 */
#include "container-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "nodefs-config.h"
#include "reconcile.h"
#include "uncertain.h"

/* Queue an inspect of every container of e (engine back, or at start). */
static void resync_engine(struct backend *b, struct engine *e)
{
	struct bnode **v;
	size_t n;

	if (bnode_list(containers_dir(b), &v, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct container *c = cof(v[i]);
		if (c->eng == e)
			container_submit(c, CA_SYNC, "sync", NULL, NULL);
	}
	bnode_list_free(v, n);
}

#if NODEFS_TEST_HOOKS
/* Test builds: NODEFS_TEST_SLOW_EVENTS=MS hands each engine event of one
 * of nodefs's containers on MS milliseconds after it was matched to it,
 * as Podman's slower event delivery does. */
static void slow_events_hook(void)
{
	const char *ms = getenv("NODEFS_TEST_SLOW_EVENTS");

	if (ms && *ms)
		usleep((useconds_t)atoi(ms) * 1000);
}
#endif

/*
 * A start, pause or unpause event that happened before the container's
 * state last changed tells nothing the state does not: a pause, then a
 * resume whose look set RUNNING before the engine's pause event came, must
 * not read PAUSED again with no operation of its own, nor a stop that began
 * before the run's start event came read RUNNING. Events without a time
 * apply.
 */
static bool event_is_history(struct container *c, const struct rt_event *ev)
{
	bool old;

	if (!ev->time_ns)
		return false;
	pthread_mutex_lock(&c->lock);
	old = ev->time_ns < c->state_ns;
	pthread_mutex_unlock(&c->lock);
	return old;
}

static void on_engine_event(void *ctx, const struct rt_event *ev)
{
	struct engine *e = ctx;
	struct backend *b = e->b;
	struct bnode *node = NULL;
	struct container *c;

	if (ev->kind == RT_EV_ENGINE_UP) {
		resync_engine(b, e);
		return;
	}
	if (ev->kind == RT_EV_ENGINE_DOWN || !ev->id)
		return;
	c = container_find_by_id(b, e, ev->id, &node);
	if (!c)
		return;
#if NODEFS_TEST_HOOKS
	slow_events_hook();	/* only this daemon's: other tests' do not add up */
#endif
	switch (ev->kind) {
	case RT_EV_START: {
		bool ours, history = event_is_history(c, ev);

		pthread_mutex_lock(&c->lock);
		if (!c->started_at || ev->time > c->started_at)
			c->started_at = ev->time ? ev->time : time(NULL);
		/* STARTING is ours: the start action moves on from it; RUNNING
		 * is news we already have; history: a state set since; DESTROYING: a start event that came
		 * late (Podman's do) moves no container a destroy takes away */
		ours = c->state == C_STARTING || c->state == C_RUNNING ||
		       c->state == C_DESTROYING || c->removed || history;
		if (!ours) {
			/* started by the engine (a restart policy, a system
			 * container rebooting): the last run's end is history */
			c->has_exit = false;
			c->oom_killed = false;
			c->finished_at = 0;
		}
		pthread_mutex_unlock(&c->lock);
		if (!ours) {
			container_set_state(c, C_RUNNING, NULL, NULL);
			container_submit(c, CA_SYNC, "sync", NULL, NULL);	/* pid and checkpoint */
		}
		break;
	}
	case RT_EV_DIE: {
		/* the inspect queued here says EXITED, with the OOM flag */
		pthread_mutex_lock(&c->lock);
		c->exit_pending = true;
		c->exit_code = ev->exit_code;
		c->finished_at = ev->time ? ev->time : time(NULL);
		pthread_mutex_unlock(&c->lock);
		container_submit(c, CA_SYNC, "sync", NULL, NULL);
		break;
	}
	case RT_EV_OOM:
		pthread_mutex_lock(&c->lock);
		c->oom_killed = true;
		pthread_mutex_unlock(&c->lock);
		bnode_changed(c->node);
		break;
	case RT_EV_PAUSE:
	case RT_EV_UNPAUSE: {
		/* the pause or resume a command made, or one from outside */
		bool pause = ev->kind == RT_EV_PAUSE;
		char op[32];

		if (container_state_of(c) == C_DESTROYING)
			break;	/* late news of a container being destroyed */
		if (event_is_history(c, ev))
			break;
		container_set_state(c, pause ? C_PAUSED : C_RUNNING,
				    container_running_op(c, pause ? CA_PAUSE : CA_RESUME, op), NULL);
		break;
	}
	case RT_EV_DESTROY:
		if (container_state_of(c) != C_DESTROYING)
			container_mark_gone(c, NULL, "the engine container was removed outside nodefs");
		break;
	default:
		break;
	}
	bnode_unref(node);
}

bool containers_on(struct backend *b, struct engine *e)
{
	struct bnode **v;
	bool any = false;
	size_t n;

	if (bnode_list(containers_dir(b), &v, &n) < 0)
		return true;	/* cannot tell: as if it had */
	for (size_t i = 0; i < n && !any; i++)
		any = cof(v[i])->eng == e;
	bnode_list_free(v, n);
	return any;
}

int containers_watch(struct backend *b)
{
	for (size_t i = 0; i < engines_of(b)->n; i++) {
		struct engine *e = &engines_of(b)->v[i];
		struct nerr err = { 0 };

		if (engine_watch(e, on_engine_event, e, &err) < 0)
			log_warn("runtime %s: no event stream: %s", e->ops->name, err.msg);
	}
	return 0;
}

/* ---- reconciliation (reconcile.h) ---- */

#define RECONCILE_GRACE_S 2

/* Whether s and r say the same about running: CREATED and EXITED are both
 * "not running" (a start that failed leaves nodefs CREATED and LXC's record
 * EXITED), so only running, paused and down are told apart. */
static int run_class(enum cstate s)
{
	return s == C_RUNNING ? 1 : s == C_PAUSED ? 2 : 0;
}

static int rt_run_class(enum rt_state r)
{
	return r == RT_STATE_RUNNING ? 1 : r == RT_STATE_PAUSED ? 2 : 0;
}

static const char *rt_state_upper(enum rt_state r)
{
	switch (r) {
	case RT_STATE_CREATED: return "CREATED";
	case RT_STATE_RUNNING: return "RUNNING";
	case RT_STATE_PAUSED: return "PAUSED";
	case RT_STATE_EXITED: return "EXITED";
	case RT_STATE_GONE: return "GONE";
	default: return "UNKNOWN";
	}
}

/* Nothing in flight that the listing could have raced: no command queued
 * or running, no event waiting for its sync, a state that is no step of a
 * command. */
static bool settled(struct container *c)
{
	bool ok;

	if (actq_busy(&c->q))
		return false;
	pthread_mutex_lock(&c->lock);
	ok = !c->removed && !c->exit_pending &&
	     (c->state == C_CREATED || c->state == C_RUNNING || c->state == C_PAUSED ||
	      c->state == C_EXITED);
	pthread_mutex_unlock(&c->lock);
	return ok;
}

static int drift_add(struct drift_report *r, size_t *cap, enum drift_kind k, const char *name,
		     const char *id, const char *nodefs, const char *runtime, const char *note)
{
	struct drift *d;

	if (r->n == *cap) {
		size_t nc = *cap ? *cap * 2 : 8;
		struct drift *nv = realloc(r->v, nc * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		r->v = nv;
		*cap = nc;
	}
	d = &r->v[r->n++];
	memset(d, 0, sizeof(*d));
	d->kind = k;
	snprintf(d->name, sizeof(d->name), "%s", name ? name : "");
	snprintf(d->id, sizeof(d->id), "%s", id ? id : "");
	snprintf(d->nodefs, sizeof(d->nodefs), "%s", nodefs ? nodefs : "");
	snprintf(d->runtime, sizeof(d->runtime), "%s", runtime ? runtime : "");
	snprintf(d->note, sizeof(d->note), "%s", note ? note : "");
	return 0;
}

/* One of nodefs's containers against the listing: marks the entry it
 * matches in seen. */
static int reconcile_one(struct backend *b, struct engine *e, struct container *c,
			 const struct rt_listing *l, size_t n, bool *seen,
			 struct drift_report *rep, size_t *cap)
{
	char id[256], note[160];
	enum cstate s;
	bool has_id, gone;
	size_t i;

	pthread_mutex_lock(&c->lock);
	s = c->state;
	has_id = c->id != NULL;
	snprintf(id, sizeof(id), "%s", c->id ? c->id : "");
	gone = c->removed;
	pthread_mutex_unlock(&c->lock);
	if (gone)
		return 0;
	if (cstate_making(s) && !has_id) {
		/* its create is under way: what the engine has of it so far
		 * is no orphan */
		for (i = 0; i < n; i++)
			if (l[i].name && strcmp(l[i].name, c->name) == 0)
				seen[i] = true;
		return 0;
	}
	if (!has_id) {
		/* lost its engine container before (an event, recovery, or
		 * an earlier pass took it in): the difference stands until
		 * the container is destroyed */
		return drift_add(rep, cap, DRIFT_MISSING, c->name, "", cstate_to_string(s), "GONE",
				 "the runtime no longer has it; destroy removes containers/NAME");
	}
	for (i = 0; i < n; i++)
		if (l[i].id && strcmp(l[i].id, id) == 0)
			break;
	if (i < n)
		seen[i] = true;
	if (!settled(c))
		return 0;
	if (i == n || run_class(s) != rt_run_class(l[i].status.state)) {
		/* the listing is a moment old: look again at this one */
		struct rt_status st = { 0 };
		struct nerr err = { 0 };
		_cleanup_engine_ struct engine_ref *h = engine_hold(e);
		int r = h ? e->ops->inspect(h->h, id, &st, &err) : -EHOSTDOWN;

		if (r < 0 && r != -ENOENT)
			return 0;	/* cannot tell now; the next pass will */
		pthread_mutex_lock(&c->lock);
		if (!c->id || strcmp(c->id, id) != 0 || c->state != s)
			r = 1;	/* moved on meanwhile: no difference to report */
		pthread_mutex_unlock(&c->lock);
		if (r == 1 || !settled(c))
			return 0;
		if (r == -ENOENT) {
			snprintf(note, sizeof(note), "removed outside nodefs; taken in: %s with the reason in error",
				 s == C_EXITED ? "stays EXITED" : "now EXITED");
			r = drift_add(rep, cap, DRIFT_MISSING, c->name, id, cstate_to_string(s), "GONE",
				      note);
			container_submit(c, CA_SYNC, "sync", NULL, NULL);
			return r;
		}
		if (run_class(s) == rt_run_class(st.state))
			return 0;	/* the listing was behind */
		{
			/* a change the engine made a moment ago: its event may
			 * still be on the way (they take milliseconds), so the
			 * next pass judges */
			time_t when = st.state == RT_STATE_EXITED ? st.finished_at : st.started_at;

			if (when && time(NULL) - when < RECONCILE_GRACE_S)
				return 0;
		}
		snprintf(note, sizeof(note), "an event was missed; taken in: the runtime's %s",
			 rt_state_upper(st.state));
		r = drift_add(rep, cap, DRIFT_STATE, c->name, id, cstate_to_string(s),
			      rt_state_upper(st.state), note);
		container_submit(c, CA_SYNC, "sync", NULL, NULL);
		return r;
	}
	return 0;
}

int containers_reconcile(struct backend *b, struct engine *e, struct drift_report *ret,
			 struct nerr *err)
{
	_cleanup_engine_ struct engine_ref *h = engine_hold(e);
	struct drift_report rep = { 0 };
	struct rt_listing *l = NULL;
	struct bnode **v = NULL;
	bool *seen = NULL;
	size_t n = 0, nv = 0, cap = 0;
	int r;

	if (!h || !e->ops->list)
		return nerr_set(err, EHOSTDOWN, "runtime %s has no driver handle", e->ops->name);
	r = e->ops->list(h->h, &l, &n, err);
	if (r < 0)
		return r;
	seen = calloc(n ? n : 1, sizeof(*seen));
	if (!seen || bnode_list(containers_dir(b), &v, &nv) < 0) {
		r = nerr_set(err, ENOMEM, "out of memory");
		goto out;
	}
	rep.listed = n;
	for (size_t i = 0; r >= 0 && i < nv; i++)
		if (cof(v[i])->eng == e)
			r = reconcile_one(b, e, cof(v[i]), l, n, seen, &rep, &cap);
	for (size_t i = 0; r >= 0 && i < n; i++) {
		struct bnode *node = NULL;
		struct rt_status st;
		struct nerr e2 = { 0 };
		const char *note;

		if (seen[i] || !l[i].id)
			continue;
		/* made or destroyed by nodefs since the listing? */
		if (container_creating_now(b, e, l[i].name))
			continue;
		/* a create a crash left uncertain: uncertain.c removes it */
		if (uncertain_claims(b, e, l[i].name))
			continue;
		if (container_find_by_id(b, e, l[i].id, &node)) {
			bnode_unref(node);
			continue;
		}
		if (l[i].half_made) {
			note = "half-made: a create cut short by a crash; not removed (a restart "
			       "of nodefs removes it, or lxc-destroy)";
		} else {
			if (e->ops->inspect(h->h, l[i].id, &st, &e2) == -ENOENT)
				continue;
			note = "carries nodefs's marks but nodefs does not know it; not removed";
		}
		r = drift_add(&rep, &cap, DRIFT_ORPHAN, l[i].name, l[i].id, "",
			      l[i].half_made ? "HALF_MADE" : rt_state_upper(l[i].status.state), note);
	}
	if (r < 0)
		r = nerr_set(err, -r, "out of memory");
out:
	bnode_list_free(v, nv);
	free(seen);
	rt_listing_free(l, n);
	if (r < 0) {
		drift_report_free(&rep);
		return r;
	}
	*ret = rep;
	return 0;
}

