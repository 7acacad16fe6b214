/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * uncertain: settling the creates whose outcome a crash left unknown
 * (uncertain.h). A create is sent after its operation's PENDING record,
 * which names what it would make (intent); the engine may finish it after
 * the daemon died, even after the restart's recovery looked at the
 * engine's list. So recovery hands each such create here, and a thread of
 * its own (nodefs-uncert, started with the first one, gone with the last)
 * keeps looking for it: at once, then after 1 s, 2 s, 4 s ... up to
 * reconcile_interval (60 s when that is off), for uncertain_timeout.
 *
 * The other kind is a call whose answer never came (a CSI CreateVolume or
 * DeleteVolume that timed out, or that a crash cut): its owner hands a
 * function here (uncertain_watch_call) that this thread runs once after a
 * delay; the owner repeats the call on the object's own queue (the calls
 * are idempotent by name) and hands it back while the answer stays
 * unknown, each time with a longer delay, until its deadline.
 *
 * A look lists the engine, which reports only what carries this
 * instance's id (rt_config.instance), and removes an entry with the
 * create's name that nodefs does not know by id and is not making now:
 * never anything without this instance's marks. Each end (removed, or
 * closed as never seen) is an event of kind "uncertain", a line in the
 * operation's outcome, a log line and a count.
 *
 * It must not know the ctl syntax, the files or the drivers' internals;
 * it calls the engines through struct runtime_ops, holding no lock of the
 * backend's.
 */
#include "uncertain.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engines.h"
#include "links.h"
#include "log.h"
#include "operation.h"
#include "events.h"

struct unc_entry {
	struct unc_entry *next;
	struct engine *e;		/* a container create; NULL for a call */
	void (*fn)(struct backend *, void *);	/* a call: run once, takes ctx */
	void (*drop)(void *);
	void *ctx;
	char name[65];
	char engine_name[112];
	struct operation *op;		/* referenced; NULL when none */
	char opid[32];
	int64_t deadline_ms, next_ms;	/* CLOCK_MONOTONIC */
	int64_t delay_ms;
};

struct uncertain {
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* CLOCK_MONOTONIC */
	struct unc_entry *head;
	bool running, stopping;
	pthread_t thread;
};

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct uncertain *get(struct backend *b, bool make)
{
	struct uncertain *u;

	pthread_mutex_lock(&init_lock);
	u = b->uncertain;
	/* a stop has freed it, or is about to: nothing new is watched */
	if (!u && make && atomic_load(&b->state) != BACKEND_STOPPING && (u = calloc(1, sizeof(*u)))) {
		pthread_condattr_t ca;

		pthread_mutex_init(&u->lock, NULL);
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&u->cond, &ca);
		pthread_condattr_destroy(&ca);
		b->uncertain = u;
	}
	pthread_mutex_unlock(&init_lock);
	return u;
}

static void entry_free(struct unc_entry *x)
{
	if (x->ctx && x->drop)
		x->drop(x->ctx);
	if (x->op)
		op_unref(x->op);
	free(x);
}

void uncertain_settled(struct backend *b, const char *kind, const char *name,
		       struct operation *op, const char *result, const char *line)
{
	char series[160];

	snprintf(series, sizeof(series), "nodefs_uncertain_outcomes_total{kind=\"%s\",result=\"%s\"}",
		 kind, result);
	events_tally(b->events, series, 1);
	events_emit(b->events, "uncertain", name, "UNCERTAIN", result, op ? op->id : NULL, line);
	if (op)
		op_note_outcome(op, line);
	/* each line names its object (volume, snapshot or container) */
	log_info("uncertain %s, %s: %s", kind, result, line);
}

static void settle(struct backend *b, struct unc_entry *x, const char *result, const char *line)
{
	char kind[64];

	snprintf(kind, sizeof(kind), "%s.create", x->e->ops->name);
	uncertain_settled(b, kind, x->name, x->op, result, line);
}

/* One look for x: 1 settled (removed), 0 not there (yet), <0 cannot tell. */
static int look(struct backend *b, struct unc_entry *x)
{
	struct rt_listing *l = NULL;
	struct nerr err = { 0 };
	size_t n = 0;
	int found = 0;

	_cleanup_engine_ struct engine_ref *h = engine_hold(x->e);

	if (engine_ready(x->e, &err) < 0 || !h || x->e->ops->list(h->h, &l, &n, &err) < 0)
		return -EAGAIN;
	for (size_t i = 0; i < n; i++) {
		struct bnode *node = NULL;
		char line[400];

		if (!l[i].name || !l[i].id || strcmp(l[i].name, x->name) != 0)
			continue;
		/* a create of the same name made since the restart is not
		 * this one */
		if (b->links->container_creating_now(b, x->e, x->name))
			continue;
		if (b->links->container_find_by_id(b, x->e, l[i].id, &node)) {
			bnode_unref(node);
			continue;
		}
		if (x->e->ops->destroy(h->h, l[i].id, &err) < 0) {
			log_warn("container %s: cannot remove the %s container %.12s an uncertain "
				 "create made: %s", x->name, x->e->ops->name, l[i].id, err.msg);
			continue;
		}
		snprintf(line, sizeof(line), "the %s container %s%s%.12s, made by a create whose "
			 "answer a crash lost, turned up after the restart and was removed",
			 x->e->ops->name, x->engine_name, x->engine_name[0] ? " " : "", l[i].id);
		settle(b, x, "removed", line);
		found = 1;
	}
	rt_listing_free(l, n);
	return found;
}

static void *unc_main(void *arg)
{
	struct backend *b = arg;
	struct uncertain *u = b->uncertain;
	uint64_t cap = b->cfg->reconcile_interval_ms ? b->cfg->reconcile_interval_ms : 60000;

	pthread_setname_np(pthread_self(), "nodefs-uncert");
	pthread_mutex_lock(&u->lock);
	while (!u->stopping && u->head) {
		int64_t now = now_ms(), wake = INT64_MAX;
		struct unc_entry **pp = &u->head;

		while (*pp && !u->stopping) {
			struct unc_entry *x = *pp;
			int r;

			if (x->next_ms > now) {
				wake = x->next_ms < wake ? x->next_ms : wake;
				pp = &x->next;
				continue;
			}
			/* look unlocked: uncertain_claims and new watches go on */
			pthread_mutex_unlock(&u->lock);
			if (x->fn) {
				/* a call: its owner repeats it and hands it back */
				x->fn(b, x->ctx);
				x->ctx = NULL;
				r = 1;
			} else
				r = look(b, x);
			if (r == 0 && now_ms() >= x->deadline_ms) {
				char line[300];

				snprintf(line, sizeof(line), "nothing a create whose answer a crash lost "
					 "could have made (%s%s%s) turned up within uncertain_timeout "
					 "(%llu s): closed as never made", x->e->ops->name,
					 x->engine_name[0] ? " " : "", x->engine_name,
					 (unsigned long long)(b->cfg->uncertain_timeout_ms / 1000));
				settle(b, x, "never_seen", line);
				r = 1;
			}
			pthread_mutex_lock(&u->lock);
			if (r == 1) {
				/* x is still where pp points: only this thread unlinks */
				*pp = x->next;
				entry_free(x);
				continue;
			}
			x->next_ms = now_ms() + x->delay_ms;
			if (x->next_ms > x->deadline_ms)
				x->next_ms = x->deadline_ms;
			x->delay_ms = x->delay_ms * 2 > (int64_t)cap ? (int64_t)cap : x->delay_ms * 2;
			wake = x->next_ms < wake ? x->next_ms : wake;
			pp = &x->next;
		}
		if (u->stopping || !u->head)
			break;
		if (wake != INT64_MAX) {
			struct timespec ts = { .tv_sec = wake / 1000, .tv_nsec = (wake % 1000) * 1000000 };

			pthread_cond_timedwait(&u->cond, &u->lock, &ts);
		}
	}
	u->running = false;
	pthread_mutex_unlock(&u->lock);
	return NULL;
}

static int watch(struct backend *b, struct uncertain *u, struct unc_entry *x)
{
	int r = 0;

	pthread_mutex_lock(&u->lock);
	if (u->stopping) {
		pthread_mutex_unlock(&u->lock);
		entry_free(x);
		return 0;
	}
	/* at the tail: the thread's cursor never moves under it */
	{
		struct unc_entry **pp = &u->head;

		while (*pp)
			pp = &(*pp)->next;
		*pp = x;
	}
	if (!u->running) {
		if (u->thread && pthread_join(u->thread, NULL) == 0)
			u->thread = 0;
		r = -pthread_create(&u->thread, NULL, unc_main, b);
		u->running = r == 0;
	}
	pthread_cond_broadcast(&u->cond);
	pthread_mutex_unlock(&u->lock);
	return r;
}

int uncertain_watch_container(struct backend *b, struct engine *e, const char *name,
			      const char *engine_name, struct operation *op)
{
	struct uncertain *u = get(b, true);
	struct unc_entry *x;

	if (!u)
		return atomic_load(&b->state) == BACKEND_STOPPING ? 0 : -ENOMEM;
	if (!(x = calloc(1, sizeof(*x))))
		return -ENOMEM;
	x->e = e;
	snprintf(x->name, sizeof(x->name), "%s", name);
	snprintf(x->engine_name, sizeof(x->engine_name), "%s", engine_name ? engine_name : "");
	if (op) {
		bnode_ref(op->node);
		x->op = op;
		snprintf(x->opid, sizeof(x->opid), "%s", op->id);
	}
	x->next_ms = now_ms();
	x->deadline_ms = x->next_ms + (int64_t)b->cfg->uncertain_timeout_ms;
	x->delay_ms = 1000;
	return watch(b, u, x);
}

int uncertain_watch_call(struct backend *b, const char *name, uint64_t delay_ms,
			 void (*fn)(struct backend *, void *), void (*drop)(void *), void *ctx)
{
	struct uncertain *u = get(b, true);
	struct unc_entry *x;

	if (!u) {
		if (atomic_load(&b->state) != BACKEND_STOPPING)
			return -ENOMEM;
		drop(ctx);	/* stopping: left to the next start */
		return 0;
	}
	if (!(x = calloc(1, sizeof(*x))))
		return -ENOMEM;
	snprintf(x->name, sizeof(x->name), "%s", name);
	x->fn = fn;
	x->drop = drop;
	x->ctx = ctx;
	x->next_ms = now_ms() + (int64_t)delay_ms;
	x->deadline_ms = x->next_ms;
	x->delay_ms = (int64_t)delay_ms;
	return watch(b, u, x);
}

bool uncertain_claims(struct backend *b, struct engine *e, const char *name)
{
	struct uncertain *u = get(b, false);
	bool yes = false;

	if (!u || !name)
		return false;
	pthread_mutex_lock(&u->lock);
	for (struct unc_entry *x = u->head; x && !yes; x = x->next)
		yes = x->e && x->e == e && strcmp(x->name, name) == 0;
	pthread_mutex_unlock(&u->lock);
	return yes;
}

void uncertain_stop(struct backend *b)
{
	struct uncertain *u = get(b, false);

	if (!u)
		return;
	pthread_mutex_lock(&u->lock);
	u->stopping = true;
	pthread_cond_broadcast(&u->cond);
	pthread_mutex_unlock(&u->lock);
	if (u->thread)
		pthread_join(u->thread, NULL);
	while (u->head) {
		struct unc_entry *x = u->head;

		u->head = x->next;
		entry_free(x);
	}
	pthread_mutex_lock(&init_lock);
	b->uncertain = NULL;
	pthread_mutex_unlock(&init_lock);
	pthread_cond_destroy(&u->cond);
	pthread_mutex_destroy(&u->lock);
	free(u);
}

int uncertain_render_metrics(struct backend *b, struct sbuf *out)
{
	int r = sbuf_printf(out, "# HELP nodefs_uncertain_outcomes_total Calls whose answer was "
			    "lost (a crash, a deadline), settled later, by kind and result (containers: "
			    "removed, never_seen; CSI: resumed, made, undone, not_made, deleted, "
			    "not_deleted, redriven, never_answered, done, not_done, redone, "
			    "unpublished, republished, never_seen).\n# TYPE nodefs_uncertain_outcomes_total counter\n");

	return r < 0 ? r : events_render_tallies(b->events, "nodefs_uncertain_outcomes_total", out);
}
