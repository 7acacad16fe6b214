/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * operation: operation records (the action queues that run them are
 * actq.c); see operation.h. The operations kind (kind.h): operations/, its records
 * loaded first at recovery, and the PENDING ones handed at its end to the
 * kind their type names (its op_prefix), found in b->kinds. It must not
 * know any other kind by name.
 */
#include "backend-internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "intern.h"
#include "jw.h"
#include "kind.h"
#include "links.h"
#include "log.h"
#include "nodefs-config.h"
#include "operation.h"
#include "pool.h"
#include "redact.h"
#include "store.h"

/* The operations' own state (their slot in the hub, kind_state). */
struct ops_state {
	/* Operations and their texts, in a region of their own: the kept
	 * ones are made among the volumes a mass destroy frees, and in
	 * malloc's heap would hold a page of it each (common/pool.c) */
	struct pool *pool;
	atomic_ullong next;		/* the next operation id */
	/* Ended operations, oldest end first, each holding a node reference:
	 * ops_trim drops from the front, so keeping operations_keep of them
	 * costs the same at 10 or 100,000 operations. */
	pthread_mutex_t ended_lock;
	struct bnode **ended;		/* a ring of cap slots */
	size_t head, len, cap;
};

static struct ops_state *ops_of(struct backend *b)
{
	return kind_state(b, &operations_kind);
}

const char *op_state_to_string(enum op_state s)
{
	switch (s) {
	case OP_PENDING: return "PENDING";
	case OP_FINISHED: return "FINISHED";
	case OP_FAILED: return "FAILED";
	case OP_DROPPED: return "DROPPED";
	}
	return "UNKNOWN";
}

static enum op_state op_state_from_string(const char *s)
{
	for (int i = OP_PENDING; i <= OP_DROPPED; i++)
		if (s && strcmp(s, op_state_to_string(i)) == 0)
			return i;
	return OP_DROPPED;
}

static struct operation *opof(struct bnode *n)
{
	return n->priv;
}

/* An operation's strings: "" is this one shared byte, anything else a
 * copy of its own, cut at cap - 1 bytes as the fixed arrays they replace
 * were (an operation costs a few hundred bytes, not the 2 KB of its
 * longest possible strings). */
static char op_empty[1];

/* Set *dst to a copy of s (NULL: "") from the operations' pool, freeing
 * what it held. -ENOMEM leaves *dst as it was. */
static int op_str_set(struct pool *pool, char **dst, const char *s, size_t cap)
{
	size_t n = s ? strnlen(s, cap - 1) : 0;
	char *c = op_empty;

	if (n) {
		c = pool_alloc(pool, n + 1);
		if (!c)
			return -ENOMEM;
		memcpy(c, s, n);
		c[n] = '\0';
	}
	if (*dst && *dst != op_empty)
		pool_free(*dst);
	*dst = c;
	return 0;
}

static void op_str_free(char **p)
{
	if (*p && *p != op_empty)
		pool_free(*p);
	*p = op_empty;
}

/* object (79 bytes), command (511) and by (95), set once before the
 * operation is shown: one block, object first. */
static int op_set_fixed(struct operation *op, const char *object, const char *command,
			const char *by)
{
	size_t lo = object ? strnlen(object, 79) : 0, lc = command ? strnlen(command, 511) : 0;
	size_t lb = by ? strnlen(by, 95) : 0;
	char *p;

	if (!lo && !lc && !lb)
		return 0;
	p = pool_alloc(ops_of(op->b)->pool, lo + lc + lb + 3);
	if (!p)
		return -ENOMEM;
	op->object = p;
	memcpy(p, object ? object : "", lo);
	p[lo] = '\0';
	op->command = p += lo + 1;
	memcpy(p, command ? command : "", lc);
	p[lc] = '\0';
	op->by = p += lc + 1;
	memcpy(p, by ? by : "", lb);
	p[lb] = '\0';
	return 0;
}

/* The type, interned (types are a handful of names shared by thousands
 * of operations), cut at 31 bytes. Once, before the operation is shown. */
static int op_set_type(struct operation *op, const char *type)
{
	char t[32];
	const char *i;

	if (!type || !type[0])
		return 0;
	snprintf(t, sizeof(t), "%s", type);
	i = intern_get(&op->b->names, t);
	if (!i)
		return -ENOMEM;
	op->type = i;
	return 0;
}

#define OP_SHOW_STR(field)						\
	static int show_##field(struct bnode *n, struct sbuf *out)	\
	{								\
		struct operation *op = opof(n);				\
		int r;							\
		pthread_mutex_lock(&op->lock);				\
		r = op->field[0] ? sbuf_printf(out, "%s\n", op->field) : 0; \
		pthread_mutex_unlock(&op->lock);			\
		return r;						\
	}
OP_SHOW_STR(type)
OP_SHOW_STR(object)
OP_SHOW_STR(by)

/* The command as any user may read it: environment values and the
 * parameters named by the config's redact list hidden (the record keeps it
 * whole). */
static int put_command(struct operation *op, struct sbuf *out)
{
	return redact_line(op->command, strlen(op->command),
			   (const char *const *)op->b->cfg->redact_keys, out);
}

static int show_command(struct bnode *n, struct sbuf *out)
{
	struct operation *op = opof(n);
	int r;

	pthread_mutex_lock(&op->lock);
	r = op->command[0] ? put_command(op, out) ?: sbuf_addc(out, '\n') : 0;
	pthread_mutex_unlock(&op->lock);
	return r;
}
OP_SHOW_STR(error)
OP_SHOW_STR(remote)

static int show_state(struct bnode *n, struct sbuf *out)
{
	struct operation *op = opof(n);
	int r;

	pthread_mutex_lock(&op->lock);
	r = sbuf_printf(out, "%s\n", op_state_to_string(op->state));
	pthread_mutex_unlock(&op->lock);
	return r;
}

static int show_attempts(struct bnode *n, struct sbuf *out)
{
	struct operation *op = opof(n);
	int r;

	pthread_mutex_lock(&op->lock);
	r = sbuf_printf(out, "%u\n", op->attempts);
	pthread_mutex_unlock(&op->lock);
	return r;
}

static int show_created(struct bnode *n, struct sbuf *out)
{
	char t[64];

	fmt_time(opof(n)->created, t, sizeof(t));
	return sbuf_printf(out, "%s\n", t);
}

static int show_finished(struct bnode *n, struct sbuf *out)
{
	struct operation *op = opof(n);
	char t[64];

	pthread_mutex_lock(&op->lock);
	fmt_time(op->finished, t, sizeof(t));
	pthread_mutex_unlock(&op->lock);
	return t[0] ? sbuf_printf(out, "%s\n", t) : 0;
}

/* An operation's members, as its record and info.json show them. Lock held. */
static void op_write_locked(struct operation *op, struct jw *w, bool redact)
{
	struct sbuf cmd = SBUF_INIT(0);

	char c[64], f[64];

	fmt_time(op->created, c, sizeof(c));
	fmt_time(op->finished, f, sizeof(f));
	jw_kstr(w, "id", op->id);
	jw_kstr(w, "type", op->type);
	jw_kstr(w, "object", op->object);
	if (redact && put_command(op, &cmd) == 0 && sbuf_addc(&cmd, '\0') == 0)
		jw_kstr(w, "command", cmd.buf);
	else
		jw_kstr(w, "command", redact ? REDACTED : op->command);
	sbuf_free(&cmd);
	jw_kstr(w, "by", op->by);
	jw_kstr(w, "state", op_state_to_string(op->state));
	jw_kstr(w, "error", op->error);
	jw_kstr(w, "remote", op->remote);
	if (op->intent[0])
		jw_kstr(w, "intent", op->intent);
	if (op->outcome[0])
		jw_kstr(w, "outcome", op->outcome);
	if (op->cluster_cmd[0])
		jw_kstr(w, "cluster_command", op->cluster_cmd);
	jw_kint(w, "attempts", (int)op->attempts);
	jw_kint(w, "created_unix", (long long)op->created);
	jw_kint(w, "finished_unix", (long long)op->finished);
	jw_kstr(w, "created", c);
	jw_kstr(w, "finished", f);
}

static int show_info(struct bnode *n, struct sbuf *out)
{
	struct operation *op = opof(n);
	struct jw w;

	jw_init(&w, out, 2);
	jw_obj(&w);
	pthread_mutex_lock(&op->lock);
	op_write_locked(op, &w, true);
	pthread_mutex_unlock(&op->lock);
	jw_obj_end(&w);
	return jw_end(&w) ?: sbuf_addc(out, '\n');
}

/* wait: blocks while the operation is PENDING, then one line,
 * `state=FINISHED` (or FAILED, DROPPED; the reason is in `error`), then end
 * of file. */
static enum op_state op_state_of(struct bnode *n)
{
	struct operation *op = opof(n);
	enum op_state st;

	pthread_mutex_lock(&op->lock);
	st = op->state;
	pthread_mutex_unlock(&op->lock);
	return st;
}

static bool op_settled(struct bnode *n)
{
	return op_state_of(n) != OP_PENDING || atomic_load(&n->dead);
}

static int op_wait_line(struct bnode *n, struct sbuf *out)
{
	return sbuf_printf(out, "state=%s\n", op_state_to_string(op_state_of(n)));
}

BWAIT_STREAM(opwait_stream, op_settled, op_wait_line);

/* outcome: how an outcome a crash left uncertain was settled (uncertain.c) */
static int show_outcome(struct bnode *n, struct sbuf *out)
{
	struct operation *op = opof(n);
	int r;

	pthread_mutex_lock(&op->lock);
	r = op->outcome[0] ? sbuf_printf(out, "%s\n", op->outcome) : 0;
	pthread_mutex_unlock(&op->lock);
	return r;
}

static const struct battr op_attrs[] = {
	{ .name = "type", .flags = BATTR_CACHE, .show = show_type },
	{ .name = "object", .flags = BATTR_CACHE, .show = show_object },
	{ .name = "command", .flags = BATTR_CACHE, .show = show_command },
	{ .name = "by", .flags = BATTR_CACHE, .show = show_by },
	{ .name = "state", .flags = BATTR_POLL | BATTR_VERSIONED, .show = show_state },
	{ .name = "error", .show = show_error },
	{ .name = "remote_status", .show = show_remote },
	{ .name = "attempts", .show = show_attempts },
	{ .name = "outcome", .show = show_outcome },
	{ .name = "created", .show = show_created },
	{ .name = "finished", .show = show_finished },
	{ .name = "info.json", .show = show_info },
	{ .name = "wait", .stream = &opwait_stream },
};

static void op_node_free(struct bnode *n)
{
	struct operation *op = n->priv;

	if (op->type[0])
		intern_put(&op->b->names, op->type);
	if (op->object != op_empty)
		pool_free(op->object);	/* command and by share its block */
	op_str_free(&op->error);
	op_str_free(&op->remote);
	op_str_free(&op->intent);
	op_str_free(&op->outcome);
	op_str_free(&op->cluster_cmd);
	pthread_mutex_destroy(&op->lock);
	/* op is in its node's block */
}

static const struct btype op_type = {
	.name = "operation",
	.attrs = op_attrs,
	.nattrs = sizeof(op_attrs) / sizeof(op_attrs[0]),
	.free = op_node_free,
};

static int op_checkpoint(struct operation *op, unsigned flags, struct nerr *err)
{
	struct sbuf sb = SBUF_INIT(0);
	struct jw w;
	int r;

	store_record_begin(&w, &sb);
	pthread_mutex_lock(&op->lock);
	op_write_locked(op, &w, false);
	pthread_mutex_unlock(&op->lock);
	r = store_put_record(op->b->store, "operations", op->id, &w, flags, err);
	sbuf_free(&sb);
	return r;
}

/* Metrics: nodefs_operations_pending{type} and
 * nodefs_operations_total{type,outcome}, kept as tallies (events.h) since
 * ended operations are trimmed. Types are ours ("volume.publish"): no label
 * escaping is needed. */
static void op_tally(struct operation *op, int pending_delta, enum op_state outcome)
{
	char series[160];

	snprintf(series, sizeof(series), "nodefs_operations_pending{type=\"%s\"}", op->type);
	events_tally(op->b->events, series, pending_delta);
	if (pending_delta < 0) {
		snprintf(series, sizeof(series), "nodefs_operations_total{type=\"%s\",outcome=\"%s\"}",
			 op->type, outcome == OP_FINISHED ? "finished" :
			 outcome == OP_FAILED ? "failed" : "dropped");
		events_tally(op->b->events, series, 1);
	}
}

static struct operation *op_alloc(struct backend *b, const char *id)
{
	struct bnode *n = bnode_new_priv(&op_type, id, sizeof(struct operation), ops_of(b)->pool);
	struct operation *op;

	if (!n)
		return NULL;
	op = n->priv;
	op->b = b;
	op->node = n;
	snprintf(op->id, sizeof(op->id), "%s", id);
	op->type = "";	/* interned once set */
	op->object = op->command = op->by = op_empty;
	op->error = op->remote = op->intent = op->outcome = op->cluster_cmd = op_empty;
	pthread_mutex_init(&op->lock, NULL);
	return op;
}

int op_begin(struct backend *b, const char *type, const char *object, const char *command,
	     const struct breq *rq, struct operation **ret, struct nerr *err)
{
	return op_begin_intent(b, type, object, command, rq, NULL, ret, err);
}

void op_note_outcome(struct operation *op, const char *line)
{
	struct nerr err = { 0 };
	size_t n;

	char t[512];

	pthread_mutex_lock(&op->lock);
	n = strlen(op->outcome);
	snprintf(t, sizeof(t), "%s%s%s", op->outcome, n ? "; " : "", line);
	if (op_str_set(ops_of(op->b)->pool, &op->outcome, t, sizeof(t)) < 0)
		log_err("operation %s: outcome not kept: out of memory", op->id);
	pthread_mutex_unlock(&op->lock);
	if (!atomic_load(&op->node->dead))
		op_checkpoint(op, STORE_DURABLE, &err);
	bnode_changed(op->node);
}

int op_begin_intent(struct backend *b, const char *type, const char *object, const char *command,
		    const struct breq *rq, const char *intent, struct operation **ret,
		    struct nerr *err)
{
	const char *by = rq ? rq->by : NULL;
	struct sbuf shown = SBUF_INIT(0);
	unsigned long long seq = atomic_fetch_add(&ops_of(b)->next, 1);
	char id[32];
	struct operation *op;
	int r;

	snprintf(id, sizeof(id), "%06llu", seq);
	op = op_alloc(b, id);
	if (!op)
		return nerr_set(err, ENOMEM, "out of memory");
	if (op_set_type(op, type) < 0 || op_set_fixed(op, object, command, by) < 0 ||
	    op_str_set(ops_of(op->b)->pool, &op->intent, intent, 256) < 0 ||
	    op_str_set(ops_of(op->b)->pool, &op->cluster_cmd, rq ? rq->cluster_cmd : NULL, 128) < 0) {
		bnode_unref(op->node);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	op->state = OP_PENDING;
	op->created = time(NULL);
	/* durable with the command's first flush: before its first outside
	 * call (actq_run, or the action's own first checkpoint) */
	r = op_checkpoint(op, STORE_LAZY, err);
	if (r < 0) {
		nerr_prefix(err, "cannot checkpoint the operation");
		bnode_unref(op->node);
		return r;
	}
	r = bnode_add(operations_dir(b), op->node);
	if (r < 0) {
		store_del(b->store, "operations", id, STORE_LAZY, NULL);
		bnode_unref(op->node);
		return nerr_set(err, -r, "operation %s: %s", id, strerror(-r));
	}
	op_tally(op, 1, OP_PENDING);
	/* events are any user's: the command as operations/ID/command shows it */
	if (put_command(op, &shown) < 0 || sbuf_addc(&shown, '\0') < 0)
		sbuf_free(&shown);
	events_emit_by(b->events, "operation", id, NULL, "PENDING", id,
		       shown.buf ? shown.buf : REDACTED, op->by[0] ? op->by : NULL);
	sbuf_free(&shown);
	*ret = op;	/* the caller's reference is the node's */
	return 0;
}

void op_set_attempts(struct operation *op, unsigned attempts)
{
	pthread_mutex_lock(&op->lock);
	op->attempts = attempts;
	pthread_mutex_unlock(&op->lock);
	bnode_changed(op->node);
}

void op_set_remote(struct operation *op, const char *remote)
{
	pthread_mutex_lock(&op->lock);
	if (op_str_set(ops_of(op->b)->pool, &op->remote, remote, 64) < 0)
		op_str_free(&op->remote);	/* not an old one's */
	pthread_mutex_unlock(&op->lock);
}

void op_note_call(struct operation *op, unsigned attempts, int code, const char *code_name)
{
	char remote[64];

	if (!op)
		return;
	op_set_attempts(op, attempts);
	snprintf(remote, sizeof(remote), "%d %s", code, code_name);
	op_set_remote(op, remote);
}

/* Queue an ended operation (its node referenced) behind the others. */
static void ended_push(struct backend *b, struct operation *op)
{
	struct ops_state *os = ops_of(b);

	pthread_mutex_lock(&os->ended_lock);
	if (os->len == os->cap) {
		size_t cap = os->cap ? 2 * os->cap : 64;
		struct bnode **q = malloc(cap * sizeof(*q));

		if (!q) {
			pthread_mutex_unlock(&os->ended_lock);
			return;	/* kept, untrimmed: memory, not correctness */
		}
		for (size_t i = 0; i < os->len; i++)
			q[i] = os->ended[(os->head + i) % os->cap];
		free(os->ended);
		os->ended = q;
		os->head = 0;
		os->cap = cap;
	}
	os->ended[(os->head + os->len++) % os->cap] = bnode_ref(op->node);
	pthread_mutex_unlock(&os->ended_lock);
}

/* The oldest ended operation when more than keep are queued, else NULL. */
static struct bnode *ended_pop_over(struct backend *b, size_t keep)
{
	struct ops_state *os = ops_of(b);
	struct bnode *n = NULL;

	pthread_mutex_lock(&os->ended_lock);
	if (os->len > keep) {
		n = os->ended[os->head];
		os->head = (os->head + 1) % os->cap;
		os->len--;
	}
	pthread_mutex_unlock(&os->ended_lock);
	return n;
}

void ops_ended_free(struct backend *b)
{
	struct ops_state *os = ops_of(b);
	struct bnode *n;

	while ((n = ended_pop_over(b, 0)))
		bnode_unref(n);
	free(os->ended);
	os->ended = NULL;
	os->cap = 0;
}

/* Keep at most operations_keep ended operations: drop those that ended
 * first. */
static void ops_trim(struct backend *b)
{
	struct bnode *n;

	while ((n = ended_pop_over(b, b->cfg->operations_keep))) {
		store_drop(b->store, "operations", opof(n)->id, NULL);
		bnode_remove(n);
		atomic_fetch_add(&b->freed, 1);
		bnode_unref(n);
	}
}

/* "volume db: operation 42 (publish /srv/db) failed: why": the journal's
 * line for an operation, naming its object first. */
static void log_op(enum log_level lvl, const struct operation *op, const char *what,
		   const char *msg)
{
	const char *dot = strchr(op->type, '.');
	int kl = dot ? (int)(dot - op->type) : (int)strlen(op->type);

	log_msg(lvl, "%.*s %s: operation %s (%s) %s%s%s", kl, op->type, op->object, op->id,
		op->command, what, msg && *msg ? ": " : "", msg ? msg : "");
}

static void op_finish(struct operation *op, enum op_state st, const char *msg)
{
	struct nerr cerr = { 0 };
	enum op_state was;
	const char *old;

	pthread_mutex_lock(&op->lock);
	was = op->state;
	old = op_state_to_string(op->state);
	op->state = st;
	op->finished = time(NULL);
	if (op_str_set(ops_of(op->b)->pool, &op->error, msg, NERR_MSG_MAX) < 0 &&
	    op_str_set(ops_of(op->b)->pool, &op->error, "out of memory", NERR_MSG_MAX) < 0)
		op_str_free(&op->error);
	pthread_mutex_unlock(&op->lock);
	if (op_checkpoint(op, STORE_LAZY, &cerr) < 0)	/* flushed before the writer hears */
		log_op(LOG_LVL_ERR, op, "not checkpointed", cerr.msg);
	if (st == OP_FAILED)
		log_op(LOG_LVL_WARN, op, "failed", msg);
	else if (st == OP_DROPPED)
		log_op(LOG_LVL_INFO, op, "dropped", msg);
	if (was == OP_PENDING && st != OP_PENDING) {
		op_tally(op, -1, st);
		ended_push(op->b, op);
	}
	bnode_changed(op->node);	/* before the event: its reader sees the new files */
	events_emit_by(op->b->events, "operation", op->id, old, op_state_to_string(st), op->id, msg,
		       op->by[0] ? op->by : NULL);
	ops_trim(op->b);
}

void op_end(struct operation *op, int result, const struct nerr *err)
{
	if (result >= 0)
		op_finish(op, OP_FINISHED, NULL);
	else
		op_finish(op, OP_FAILED, err && err->msg[0] ? err->msg : strerror(-result));
}

void op_drop(struct operation *op, const char *reason)
{
	op_finish(op, OP_DROPPED, reason);
}

void op_unref(struct operation *op)
{
	if (op)
		bnode_unref(op->node);
}

static void recover_one(void *ctx, const char *name, json_t *j)
{
	struct backend *b = ctx;
	const char *s;
	struct operation *op = op_alloc(b, name);
	unsigned long long seq = strtoull(name, NULL, 10);

	if (!op)
		return;
	if (seq >= atomic_load(&ops_of(b)->next))
		atomic_store(&ops_of(b)->next, seq + 1);
#define STR(f, k, cap) ((s = json_string_value(json_object_get(j, k))) ? \
			op_str_set(ops_of(b)->pool, &op->f, s, cap) : 0)
	if (op_set_type(op, json_string_value(json_object_get(j, "type"))) < 0 ||
	    op_set_fixed(op, json_string_value(json_object_get(j, "object")),
			 json_string_value(json_object_get(j, "command")),
			 json_string_value(json_object_get(j, "by"))) < 0 ||
	    STR(error, "error", NERR_MSG_MAX) < 0 ||
	    STR(remote, "remote", 64) < 0 || STR(intent, "intent", 256) < 0 ||
	    STR(outcome, "outcome", 512) < 0 || STR(cluster_cmd, "cluster_command", 128) < 0) {
		log_err("operation %s: not recovered: out of memory", name);
		bnode_unref(op->node);
		return;
	}
#undef STR
	op->state = op_state_from_string(json_string_value(json_object_get(j, "state")));
	op->attempts = (unsigned)json_integer_value(json_object_get(j, "attempts"));
	op->created = (time_t)json_integer_value(json_object_get(j, "created_unix"));
	op->finished = (time_t)json_integer_value(json_object_get(j, "finished_unix"));
	if (bnode_add(operations_dir(b), op->node) < 0) {
		bnode_unref(op->node);
		return;
	}
	if (op->state == OP_PENDING)
		op_tally(op, 1, OP_PENDING);
	else
		ended_push(b, op);	/* the records load oldest first */
	bnode_unref(op->node);
}

static void recover_bad(void *ctx, const char *name, const char *why)
{
	struct backend *b = ctx;

	log_err("operation %s: checkpoint unreadable: %s", name, why);
	atomic_fetch_add(&b->bad_records, 1);
}

int ops_recover(struct backend *b, struct nerr *err)
{
	int r = store_load(b->store, "operations", recover_one, recover_bad, b);

	if (r < 0)
		return nerr_set(err, -r, "cannot read the operation checkpoints: %s", strerror(-r));
	return 0;
}

/* The kind whose operations have type's prefix, or NULL. */
static const struct kind_ops *kind_of_type(struct backend *b, const char *type)
{
	for (size_t i = 0; i < b->nkinds; i++) {
		const char *p = b->kinds[i]->op_prefix;

		if (p && b->kinds[i]->resume && strncmp(type, p, strlen(p)) == 0)
			return b->kinds[i];
	}
	return NULL;
}

/* Operations still PENDING after a restart are driven to an end by the
 * kind of their object (its resume: the calls are idempotent, so the
 * interrupted step is sent again); one that no kind takes is dropped, with
 * the reason. */
void ops_drop_orphans(struct backend *b)
{
	struct bnode **v;
	size_t n;

	if (bnode_list(operations_dir(b), &v, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct operation *op = opof(v[i]);
		const struct kind_ops *k;

		if (op->state != OP_PENDING || op->claimed)
			continue;
		k = kind_of_type(b, op->type);
		if (k && k->resume(b, op) == 0)
			continue;
		if (op->state == OP_PENDING && !op->claimed)
			op_drop(op, "nodefs restarted while the operation was in flight; "
				"the object was reconciled with what its plugin or engine reports");
	}
	bnode_list_free(v, n);
	if (store_sync(b->store, &(struct nerr){ 0 }) < 0)
		log_err("operations dropped at recovery: not checkpointed");
}

struct operation *op_find(struct backend *b, const char *id)
{
	struct bnode *n = bnode_lookup(operations_dir(b), id);

	return n ? opof(n) : NULL;	/* the caller holds the node's reference */
}

void op_events_emit(struct backend *b, const char *kind, const char *name, const char *old_state,
		    const char *new_state, const char *op_id, const char *msg)
{
	struct operation *op = op_id ? op_find(b, op_id) : NULL;
	char by[96] = "";

	if (op) {
		/* set at op_begin or recovery, before any event names it */
		snprintf(by, sizeof(by), "%s", op->by);
		op_unref(op);
	}
	events_emit_by(b->events, kind, name, old_state, new_state, op_id, msg, by[0] ? by : NULL);
}

struct operation *op_find_cluster_cmd(struct backend *b, const char *id)
{
	struct bnode **v = NULL;
	size_t n = 0;
	struct operation *found = NULL;

	if (!id[0] || bnode_list(operations_dir(b), &v, &n) < 0)
		return NULL;
	/* newest first: the one sought is among the last made */
	for (size_t i = n; i-- > 0 && !found;)
		if (strcmp(opof(v[i])->cluster_cmd, id) == 0)
			found = opof(bnode_ref(v[i]));
	bnode_list_free(v, n);
	return found;
}

/* ---- the kind ---- */

static const struct btype operations_type = { .name = "operations" };

/* Operations: tallied here as they begin and end (ended ones are trimmed
 * from operations/, so counting the directory would go backwards), in the
 * daemon's part of the metrics; then the uncertain outcomes' family
 * (links.h). */
static int ops_render_metrics(struct backend *b, struct sbuf *out)
{
	int r;

	r = sbuf_printf(out, "# HELP nodefs_operations_pending Operations checkpointed and not "
			"yet ended, by type.\n# TYPE nodefs_operations_pending gauge\n");
	if (r >= 0)
		r = events_render_tallies(b->events, "nodefs_operations_pending", out);
	if (r >= 0)
		r = sbuf_printf(out, "# HELP nodefs_operations_total Operations ended since the "
				"daemon started, by type and outcome (finished, failed, dropped).\n"
				"# TYPE nodefs_operations_total counter\n");
	if (r >= 0)
		r = events_render_tallies(b->events, "nodefs_operations_total", out);
	if (r >= 0)
		r = b->links && b->links->uncertain_render_metrics ?
			b->links->uncertain_render_metrics(b, out) : 0;
	return r;
}

static int ops_init(struct backend *b, struct nerr *err)
{
	struct ops_state *os = ops_of(b);

	os->pool = pool_new();
	if (!os->pool)
		return nerr_set(err, ENOMEM, "out of memory");
	pthread_mutex_init(&os->ended_lock, NULL);
	return 0;
}

/* After the tree: an operation's node frees its block after pool_close. */
static void ops_free(struct backend *b)
{
	struct ops_state *os = ops_of(b);

	if (!os->pool)
		return;	/* init never ran */
	pthread_mutex_destroy(&os->ended_lock);
	pool_close(os->pool);
}

const struct kind_ops operations_kind = {
	.name = "operations",
	.type = &operations_type,
	.state_size = sizeof(struct ops_state),
	.init = ops_init,
	.free = ops_free,
	.render_metrics_first = ops_render_metrics,
	.load = ops_recover,
	.settle = ops_drop_orphans,
	.stop = ops_ended_free,
};
