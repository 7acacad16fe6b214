/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * snapshot-run: a snapshot's actions, one at a time on its queue, on the
 * worker pool: create (CreateSnapshot, idempotent by the name the record
 * keeps), import (the plugin's listing, when it lists), delete
 * (DeleteSnapshot), and the settling of a call whose answer never came
 * (a crash, a deadline): the same call repeated, as volumes do. The state
 * is checkpointed durable before each call and after it.
 *
 * Must not know: commands, files, volumes/ and plugins/ (reached through
 * links.h).
 */
#include "snapshot-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "log.h"
#include "macro.h"
#include "secrets.h"
#include "storage.h"
#include "store.h"

/* What one action's calls share. */
struct sctx {
	struct snapshot *s;
	struct operation *op;
	const struct storage_ops *ops;
	void *h;
	struct storage_caps caps;
	char **secrets;
	struct bnode *pnode;
	unsigned attempts;
	bool uncertain;
};

#define HAS_CTL(x, c) STORAGE_CAP((x)->caps.controller, STORAGE_CTL_##c)

static const char *xop(const struct sctx *x)
{
	return x->op ? x->op->id : NULL;
}

static void note(struct sctx *x, const struct storage_result *res)
{
	if (!res->call)
		return;
	x->uncertain = res->uncertain;
	if (res->attempts > x->attempts)
		x->attempts = res->attempts;
	op_note_call(x->op, x->attempts, res->code, res->code_name);
}

static void retry_note(void *ctx, const struct storage_result *so_far)
{
	struct sctx *x = ctx;

	op_note_call(x->op, so_far->attempts > x->attempts ? so_far->attempts : x->attempts,
		     so_far->code, so_far->code_name);
}

/* CreateSnapshot: the answer fills the record. */
static int call_create(struct sctx *x, struct nerr *err)
{
	struct snapshot *s = x->s;
	struct storage_result res = { 0 };
	struct storage_snapshot ss = { 0 };
	struct storage_req rq = { .secrets = x->secrets, .params = s->params };
	int r;

	if (!x->ops->snapshot_create)
		return nerr_set(err, ENOTSUP, "plugin %s cannot take snapshots (no CREATE_DELETE_SNAPSHOT)",
				s->plugin);
	pthread_mutex_lock(&s->lock);
	rq.name = s->csi_name;
	rq.id = s->volume_id;
	pthread_mutex_unlock(&s->lock);
	r = x->ops->snapshot_create(x->h, &rq, &ss, retry_note, x, &res, err);
	note(x, &res);
	if (r < 0)
		return r;
	pthread_mutex_lock(&s->lock);
	free(s->id);
	s->id = TAKE_PTR(ss.id);
	if (ss.source_id && ss.source_id[0] && !s->volume_id)
		s->volume_id = TAKE_PTR(ss.source_id);
	s->size = ss.size;
	s->created_s = ss.created_s;
	s->created_ns = ss.created_ns;
	s->ready = ss.ready;
	pthread_mutex_unlock(&s->lock);
	storage_snapshot_clear(&ss);
	return 0;
}

/* The plugin's word on snapshot id (ListSnapshots by id, paged): 1 found
 * (the record updated), 0 not listed, -errno. */
static int call_look(struct sctx *x, uint64_t timeout_ms, struct nerr *err)
{
	struct snapshot *s = x->s;
	char *token = NULL;
	int found = 0, r = 0;

	if (!x->ops->snapshot_list)
		return -ENOTSUP;
	for (int pages = 0; pages < 1000 && !found; pages++) {
		struct storage_snap_page pg = { 0 };
		struct storage_result res = { 0 };
		struct storage_req rq = { .secrets = x->secrets, .timeout_ms = timeout_ms };

		r = x->ops->snapshot_list(x->h, &rq, token, &pg, retry_note, x, &res, err);
		note(x, &res);
		free(token);
		token = NULL;
		if (r < 0)
			return r;
		pthread_mutex_lock(&s->lock);
		for (size_t i = 0; i < pg.n && !found; i++) {
			if (strcmp(pg.s[i].id, s->id) != 0)
				continue;
			found = 1;
			s->size = pg.s[i].size;
			s->created_s = pg.s[i].created_s;
			s->created_ns = pg.s[i].created_ns;
			s->ready = pg.s[i].ready;
			if (!s->volume_id && pg.s[i].source_id[0])
				s->volume_id = TAKE_PTR(pg.s[i].source_id);
		}
		pthread_mutex_unlock(&s->lock);
		token = TAKE_PTR(pg.next_token);
		storage_snap_page_clear(&pg);
		if (!token)
			break;
	}
	free(token);
	return found;
}

static int call_delete(struct sctx *x, struct nerr *err)
{
	struct snapshot *s = x->s;
	struct storage_result res = { 0 };
	struct storage_req rq = { .secrets = x->secrets };
	int r;

	if (!x->ops->snapshot_delete)
		return nerr_set(err, ENOTSUP, "plugin %s cannot delete snapshots (no CREATE_DELETE_SNAPSHOT)",
				s->plugin);
	pthread_mutex_lock(&s->lock);
	rq.id = s->id;
	pthread_mutex_unlock(&s->lock);
	r = x->ops->snapshot_delete(x->h, &rq, retry_note, x, &res, err);
	note(x, &res);
	return r;
}

/* Create, from CREATING: the call, then READY; a certain failure FAILED,
 * an uncertain one stays CREATING (the next look repeats the call). */
static int run_create(struct sctx *x, struct nerr *err)
{
	struct snapshot *s = x->s;
	int r;

	if (!HAS_CTL(x, CREATE_DELETE_SNAPSHOT)) {
		r = nerr_set(err, ENOTSUP, "plugin %s cannot take snapshots (no CREATE_DELETE_SNAPSHOT)",
			     s->plugin);
		snapshot_forget(s, xop(x));
		return r;
	}
	r = snapshot_checkpoint(s, STORE_DURABLE, err);
	if (r < 0)
		return r;
	r = call_create(x, err);
	if (r < 0 && x->uncertain) {
		snapshot_apply(s, SE_UNCERTAIN, xop(x));
		nerr_prefix(err, "CreateSnapshot's answer never came (repeated in the background)");
		return r;
	}
	snapshot_apply(s, r < 0 ? SE_CREATE_FAILED : SE_CREATED, xop(x));
	struct nerr cerr = { 0 };
	int cr = snapshot_checkpoint(s, STORE_DURABLE, &cerr);
	if (r >= 0 && cr < 0) {
		*err = cerr;
		r = cr;
	}
	return r;
}

static int run_import(struct sctx *x, struct nerr *err)
{
	struct snapshot *s = x->s;
	int r = 0;

	if (HAS_CTL(x, LIST_SNAPSHOTS)) {
		r = call_look(x, 0, err);
		if (r == 0)
			r = nerr_set(err, ENOENT, "plugin %s lists no snapshot %s", s->plugin, s->id);
		if (r < 0) {
			snapshot_forget(s, xop(x));
			return r;
		}
	} else
		s->ready = true;	/* no way to ask: taken on the user's word */
	snapshot_apply(s, SE_CREATED, xop(x));
	return snapshot_checkpoint(s, STORE_DURABLE, err);
}

static int run_delete(struct sctx *x, struct nerr *err)
{
	struct snapshot *s = x->s;
	enum sstate was = snapshot_state(s);
	bool has_id;
	int r;

	if (was == S_CREATING && !s->imported && HAS_CTL(x, CREATE_DELETE_SNAPSHOT)) {
		/* a create whose answer never came: repeat it to learn the id
		 * (idempotent by name), then delete what it made */
		r = call_create(x, err);
		if (r < 0 && x->uncertain)
			return r;
	}
	r = snapshot_apply(s, SE_DELETE, xop(x));
	if (r < 0)
		return nerr_set(err, EINVAL, "snapshot %s cannot be deleted now", s->name);
	r = snapshot_checkpoint(s, STORE_DURABLE, err);
	if (r < 0)
		return r;
	pthread_mutex_lock(&s->lock);
	has_id = s->id != NULL;
	pthread_mutex_unlock(&s->lock);
	if (has_id) {
		if (!HAS_CTL(x, CREATE_DELETE_SNAPSHOT))
			r = nerr_set(err, ENOTSUP, "plugin %s cannot delete snapshots (no CREATE_DELETE_SNAPSHOT)",
				     s->plugin);
		else
			r = call_delete(x, err);
		if (r < 0 && x->uncertain) {
			nerr_prefix(err, "DeleteSnapshot's answer never came (repeated in the background)");
			return r;
		}
		if (r < 0) {
			snapshot_apply(s, SE_DELETE_FAILED, xop(x));
			struct nerr e2 = { 0 };
			snapshot_checkpoint(s, STORE_DURABLE, &e2);
			return r;
		}
	}
	snapshot_apply(s, SE_DELETED, xop(x));
	snapshot_forget(s, xop(x));
	return 0;
}

/* The plugin's handle, capabilities and secrets for one action. */
static int reach(struct sctx *x, struct nerr *err)
{
	const struct backend_links *ln = x->s->b->links;

	if (!ln || !ln->plugin_reach)
		return nerr_set(err, ENOENT, "no plugins");
	return ln->plugin_reach(x->s->b, x->s->plugin, &x->ops, &x->h, &x->caps, &x->secrets,
				&x->pnode, err);
}

/* ---- the background settling (uncertain.c runs the timer) ---- */

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What the watcher holds between two looks. */
struct swatch {
	struct bnode *node;		/* the snapshot's */
	struct operation *op;		/* the command's; referenced, may be NULL */
	int64_t deadline_ms;
	uint64_t delay_ms;
};

static void swatch_drop(void *ctx)
{
	struct swatch *w = ctx;

	atomic_store(&sof(w->node)->watched, false);
	op_unref(w->op);
	bnode_unref(w->node);
	free(w);
}

static int submit_settle(struct snapshot *s, struct operation *op, int64_t deadline_ms,
			 uint64_t delay_ms);

/* On the watcher thread: the look is an action on the snapshot's queue, so
 * it runs in order with the commands. */
static void swatch_fire(struct backend *b, void *ctx)
{
	struct swatch *w = ctx;

	(void)b;
	if (submit_settle(sof(w->node), TAKE_PTR(w->op), w->deadline_ms, w->delay_ms) < 0) {
		swatch_drop(w);
		return;
	}
	bnode_unref(w->node);	/* the op's reference went to the look */
	free(w);
}

/* Takes op's reference. */
static void watch_arm(struct snapshot *s, struct operation *op, int64_t deadline_ms,
		      uint64_t delay_ms)
{
	const struct backend_links *ln = s->b->links;
	struct swatch *w;

	if (!ln || !ln->uncertain_watch_call || !(w = calloc(1, sizeof(*w)))) {
		atomic_store(&s->watched, false);
		op_unref(op);
		return;
	}
	w->node = bnode_ref(s->node);
	w->op = op;
	w->deadline_ms = deadline_ms;
	w->delay_ms = delay_ms;
	if (ln->uncertain_watch_call(s->b, s->name, delay_ms, swatch_fire, swatch_drop, w) < 0)
		swatch_drop(w);
}

/* A call whose answer never came: watched until settled or until
 * uncertain_timeout; one watch a snapshot. */
static void watch_start(struct snapshot *s, struct operation *op)
{
	if (!atomic_exchange(&s->watched, true))
		watch_arm(s, op ? (bnode_ref(op->node), op) : NULL,
			  mono_ms() + (int64_t)s->b->cfg->uncertain_timeout_ms, 1000);
}

/* After a look of the watch (was: the state it found). */
static void watch_after(struct sctx *x, struct sact *act, enum sstate was, int r,
			struct nerr *err)
{
	struct snapshot *s = x->s;
	struct backend *b = s->b;
	const struct backend_links *ln = b->links;
	uint64_t cap = b->cfg->reconcile_interval_ms ? b->cfg->reconcile_interval_ms : 60000;
	const char *call = was == S_CREATING ? "CreateSnapshot" : "DeleteSnapshot";
	const char *result;
	char kind[48], line[512];

	if (was != S_CREATING && was != S_DELETING) {
		/* a command run meanwhile settled it */
		atomic_store(&s->watched, false);
		return;
	}
	if (r < 0 && x->uncertain) {
		if (mono_ms() < act->deadline_ms) {
			uint64_t d = act->delay_ms * 2 > cap ? cap : act->delay_ms * 2;

			watch_arm(s, TAKE_PTR(act->uop), act->deadline_ms, d);
			return;
		}
		result = "never_answered";
		snprintf(line, sizeof(line), "%s of snapshot %s had no answer within "
			 "uncertain_timeout (%llu s): %s; left %s for the next command", call, s->name,
			 (unsigned long long)(b->cfg->uncertain_timeout_ms / 1000), err->msg,
			 sstate_to_string(snapshot_state(s)));
	} else if (was == S_CREATING) {
		result = r >= 0 ? "made" : "not_made";
		if (r >= 0)
			snprintf(line, sizeof(line), "CreateSnapshot of snapshot %s answered after all: "
				 "READY", s->name);
		else
			snprintf(line, sizeof(line), "CreateSnapshot of snapshot %s answered that it "
				 "made nothing: %s", s->name, err->msg);
	} else {
		result = r >= 0 ? "deleted" : "not_deleted";
		if (r >= 0)
			snprintf(line, sizeof(line), "DeleteSnapshot of snapshot %s answered after all: "
				 "the snapshot is gone", s->name);
		else
			snprintf(line, sizeof(line), "DeleteSnapshot of snapshot %s answered: %s",
				 s->name, err->msg);
	}
	atomic_store(&s->watched, false);
	snprintf(kind, sizeof(kind), "csi.%s", call);
	if (ln && ln->uncertain_settled)
		ln->uncertain_settled(b, kind, s->name, act->uop, result, line);
	if (r < 0 && !atomic_load(&s->node->dead))
		bnode_set_error(s->node, err->msg);
}

static int run_action(struct action *a, struct nerr *err)
{
	struct sact *act = (struct sact *)a;
	struct snapshot *s = act->s;
	struct sctx x = { .s = s, .op = a->op };
	int r;

	if (atomic_load(&s->node->dead))
		return nerr_set(err, ENOENT, "snapshot %s was deleted", s->name);
	r = reach(&x, err);
	if (r < 0) {
		nerr_prefix(err, "plugin %s", s->plugin);
		if (act->kind == SA_CREATE || act->kind == SA_IMPORT)
			snapshot_forget(s, xop(&x));
		goto out;
	}
	switch (act->kind) {
	case SA_CREATE:
		r = run_create(&x, err);
		break;
	case SA_IMPORT:
		r = run_import(&x, err);
		break;
	case SA_DELETE:
		r = run_delete(&x, err);
		break;
	case SA_SETTLE: {
		/* recovery, or the watch: a call whose answer no one has,
		 * repeated */
		enum sstate was = snapshot_state(s);

		if (was == S_CREATING)
			r = run_create(&x, err);
		else if (was == S_DELETING)
			r = run_delete(&x, err);
		if (r < 0)
			log_err("snapshot %s: settling: %s", s->name, err->msg);
		if (act->deadline_ms) {
			watch_after(&x, act, was, r, err);
			goto out;
		}
		break;
	}
	}
	/* a call whose answer never came: settled in the background, not
	 * left for the next command */
	if (r < 0 && x.uncertain && !atomic_load(&s->node->dead) &&
	    !(act->kind == SA_DELETE && snapshot_state(s) == S_CREATING))
		watch_start(s, a->op);
out:
	if (r < 0 && act->kind != SA_SETTLE && !atomic_load(&s->node->dead))
		bnode_set_error(s->node, err->msg);
	secrets_free(x.secrets);
	bnode_unref(x.pnode);
	return r;
}

static void act_done(struct action *a, int result)
{
	struct snapshot *s = ((struct sact *)a)->s;
	const struct backend_links *ln = s->b->links;

	(void)result;
	if (ln && ln->plugin_lists_stale)
		ln->plugin_lists_stale(s->b, s->plugin);
	if (atomic_fetch_sub(&s->inflight, 1) == 1)
		bnode_changed(s->node);
}

static void act_free(struct action *a)
{
	struct sact *x = (struct sact *)a;

	op_unref(x->uop);
	bnode_unref(x->node);
	free(x);
}

int snapshot_submit(struct snapshot *s, int kind, const char *cmdline, struct breq *rq)
{
	static const char *const types[] = { "snapshot.create", "snapshot.import", "snapshot.delete" };
	struct sact *x = calloc(1, sizeof(*x));
	struct nerr scratch = { 0 };
	struct nerr *err = rq ? &rq->err : &scratch;
	char object[80];
	int r;

	if (!x)
		return nerr_set(err, ENOMEM, "out of memory");
	if (rq && rq->nonblock && atomic_load(&s->inflight) > 0) {
		free(x);
		return nerr_set(err, EBUSY, "snapshot %s has a command in flight", s->name);
	}
	x->s = s;
	x->node = bnode_ref(s->node);
	x->kind = kind;
	x->a.b = s->b;
	x->a.rq = rq;
	x->a.run = run_action;
	x->a.done = act_done;
	x->a.free = act_free;
	x->a.self_sync = true;	/* each call's first checkpoint is durable */
	if (kind != SA_SETTLE) {
		snprintf(object, sizeof(object), "snapshots/%s", s->name);
		r = op_begin(s->b, types[kind], object, cmdline, rq, &x->a.op, err);
		if (r < 0) {
			act_free(&x->a);
			return r;
		}
	}
	if (kind == SA_CREATE && !s->csi_name) {
		/* the name CreateSnapshot gets: repeated, it makes the same one */
		char cn[160];
		uint32_t salt = 0;

		if (getrandom(&salt, sizeof(salt), GRND_NONBLOCK) != sizeof(salt))
			salt = (uint32_t)time(NULL) ^ (uint32_t)getpid();
		snprintf(cn, sizeof(cn), "nodefs-%s-%s-%08x", s->name, x->a.op->id, salt);
		pthread_mutex_lock(&s->lock);
		s->csi_name = strdup(cn);
		pthread_mutex_unlock(&s->lock);
	}
	atomic_fetch_add(&s->inflight, 1);
	if ((kind == SA_CREATE || kind == SA_IMPORT) && x->a.op)
		op_events_emit(s->b, "snapshot", s->name, NULL, "CREATING", x->a.op->id, NULL);
	r = actq_submit(&s->q, &x->a);
	if (r == -EBUSY) {
		atomic_fetch_sub(&s->inflight, 1);
		if (x->a.op) {
			op_drop(x->a.op, "the snapshot had a command in flight");
			op_unref(x->a.op);
			x->a.op = NULL;
		}
		act_free(&x->a);
		return nerr_set(err, EBUSY, "snapshot %s has a command in flight", s->name);
	}
	return r;
}

/* A look of the background watch, on s's queue (no operation). */
/* Takes op's reference (also when it fails). */
static int submit_settle(struct snapshot *s, struct operation *op, int64_t deadline_ms,
			 uint64_t delay_ms)
{
	struct sact *x = calloc(1, sizeof(*x));
	int r;

	if (!x) {
		op_unref(op);
		return -ENOMEM;
	}
	x->s = s;
	x->node = bnode_ref(s->node);
	x->kind = SA_SETTLE;
	x->uop = op;
	x->deadline_ms = deadline_ms;
	x->delay_ms = delay_ms;
	x->a.b = s->b;
	x->a.run = run_action;
	x->a.done = act_done;
	x->a.free = act_free;
	x->a.self_sync = true;
	atomic_fetch_add(&s->inflight, 1);
	r = actq_submit(&s->q, &x->a);
	if (r < 0 && r != -EINPROGRESS) {
		atomic_fetch_sub(&s->inflight, 1);
		act_free(&x->a);
		return r;
	}
	return 0;
}

/* ---- recovery ---- */

int snapshot_resume(struct backend *b, struct operation *op)
{
	static const struct { const char *cmd; int kind; } kinds[] = {
		{ "create", SA_CREATE }, { "import", SA_IMPORT }, { "delete", SA_DELETE },
		{ "rmdir", SA_DELETE },
	};
	struct ctl_cmd cmd = { 0 };
	struct bnode *dir, *n;
	int kind = -1, r;

	if (strncmp(op->object, "snapshots/", 10) != 0)
		return -EINVAL;
	dir = snapshots_dir(b);
	n = dir ? bnode_lookup(dir, op->object + 10) : NULL;
	bnode_unref(dir);
	if (!n)
		return -ENOENT;	/* it never reached its first checkpoint */
	r = ctl_parse(op->command, strlen(op->command), &cmd, NULL);
	for (size_t i = 0; r >= 0 && i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(cmd.argv[0], kinds[i].cmd) == 0)
			kind = kinds[i].kind;
	ctl_cmd_free(&cmd);
	if (kind < 0) {
		bnode_unref(n);
		return -EINVAL;
	}
	struct snapshot *s = sof(n);
	struct sact *x = calloc(1, sizeof(*x));
	if (!x) {
		bnode_unref(n);
		return -ENOMEM;
	}
	x->s = s;
	x->node = n;	/* the lookup's reference */
	x->kind = kind;
	x->a.b = b;
	x->a.op = op;
	bnode_ref(op->node);	/* the action's reference, dropped when it ends */
	x->a.run = run_action;
	x->a.done = act_done;
	x->a.free = act_free;
	x->a.self_sync = true;
	op->claimed = true;
	s->resumed = true;
	op_note_outcome(op, kind == SA_CREATE ? "resumed at start: CreateSnapshot repeated (idempotent by name)"
			: "resumed at start");
	atomic_fetch_add(&s->inflight, 1);
	r = actq_submit(&s->q, &x->a);
	return r == -EINPROGRESS ? 0 : r;
}

void snapshots_settle(struct backend *b)
{
	struct bnode *dir = snapshots_dir(b);
	struct bnode **v;
	size_t n;

	if (!dir)
		return;
	if (bnode_list(dir, &v, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			struct snapshot *s = sof(v[i]);
			enum sstate st = snapshot_state(s);

			if (!s->resumed && (st == S_CREATING || st == S_DELETING))
				snapshot_submit(s, SA_SETTLE, NULL, NULL);
		}
		bnode_list_free(v, n);
	}
	bnode_unref(dir);
}

/* ---- the `ready` file's look ---- */

int snapshot_look(struct snapshot *s, struct nerr *err)
{
	struct sctx x = { .s = s };
	int r = reach(&x, err);

	if (r >= 0 && !HAS_CTL(&x, LIST_SNAPSHOTS))
		r = 0;	/* no way to ask again */
	else if (r >= 0 && (r = call_look(&x, 5000, err)) >= 0) {
		bool ready;

		pthread_mutex_lock(&s->lock);
		ready = s->ready;
		pthread_mutex_unlock(&s->lock);
		if (ready) {
			snapshot_checkpoint(s, STORE_LAZY, err);
			bnode_changed(s->node);
		}
	}
	secrets_free(x.secrets);
	bnode_unref(x.pnode);
	return r;
}
