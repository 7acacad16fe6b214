/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cluster-remote: ctl lines carried to other nodes through etcd, both
 * sides. The writer creates PREFIX/nodes/NODE/inbox/ID in a transaction
 * that fails if it exists and waits for the target's answer in its watch;
 * the target takes the record with a transaction on its mod revision,
 * runs the line through the ctl file's own check and store (so the same
 * operation records, checkpoints and events as a local write) and writes
 * the answer.
 *
 * At most once: the command's id goes into the first checkpoint of the
 * operation it starts (breq.cluster_cmd, operation.cluster_cmd). A record
 * found `taken` by an earlier run of this node (a crash between taking and
 * answering) is, once recovery has read the checkpoints, answered from
 * that operation when one carries its id (ended: at once; PENDING: when
 * recovery has driven it to its end), and run now when none does: nothing
 * of it had been acted on, since the checkpoint comes before any action.
 *
 * Runs on its own thread (cluster_remote_main, with its own etcd client)
 * and the watch thread (records seen, under c->lock). Knows the tree's ctl entry points and the etcd
 * client; never FUSE.
 */
#include "backend-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster-internal.h"
#include "log.h"
#include "macro.h"
#include "nodefs-config.h"
#include "operation.h"

#if NODEFS_TEST_HOOKS
/* Crash tests: NODEFS_CRASH_AT=cluster:taken kills the daemon right after
 * it has taken a remote command in etcd, before it runs it. */
static void crash_hook(const char *point)
{
	const char *spec = getenv("NODEFS_CRASH_AT");
	char want[64];

	snprintf(want, sizeof(want), "cluster:%s", point);
	if (spec && strcmp(spec, want) == 0) {
		fprintf(stderr, "nodefs: test hook: crashing at %s\n", want);
		kill(getpid(), SIGKILL);
	}
}
#else
static void crash_hook(const char *point)
{
	(void)point;
}
#endif

/* ---- the writer ---- */

int cluster_remote_write(struct cluster *c, const char *node, const char *path, const char *line,
			 size_t len, struct breq *rq)
{
	struct cluster_rcmd *rc;
	json_t *j;
	char up[NERR_MSG_MAX + 64];

	pthread_mutex_lock(&c->lock);
	if (!c->connected) {
		char t[32];
		cluster_fmt_time(c->since, t, sizeof(t));
		snprintf(up, sizeof(up), "etcd unavailable since %s: %s", t, c->reason);
		pthread_mutex_unlock(&c->lock);
		return nerr_set(&rq->err, EHOSTUNREACH, "%s", up);
	}
	rc = calloc(1, sizeof(*rc));
	if (!rc) {
		pthread_mutex_unlock(&c->lock);
		return nerr_set(&rq->err, ENOMEM, "out of memory");
	}
	snprintf(rc->id, sizeof(rc->id), "%s-%s-%" PRIu64, c->node, c->token, ++c->seq);
	snprintf(rc->key, sizeof(rc->key), "%s/nodes/%s/inbox/%s", c->prefix, node, rc->id);
	j = json_pack("{s:s,s:s,s:s,s:s%,s:s,s:b,s:I}", "from", c->node, "by", rq->by, "path", path,
		      "line", line, len, "state", "new", "nonblock", rq->nonblock,
		      "written", (json_int_t)time(NULL));
	rc->record = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!rc->record) {
		pthread_mutex_unlock(&c->lock);
		free(rc);
		return nerr_set(&rq->err, ENOMEM, "out of memory");
	}
	rc->rq = rq;
	rc->deadline = ts_after_ms(CLOCK_MONOTONIC, (uint64_t)c->ttl_s * 3000);
	rc->next = c->rcmds;
	c->rcmds = rc;
	pthread_mutex_unlock(&c->lock);
	cluster_wake_remote(c);
	return -EINPROGRESS;
}

/* Unlink rc (lock held) and complete it with r (lock dropped meanwhile). */
static void rcmd_fail_locked(struct cluster *c, struct cluster_rcmd *rc, int r, const char *msg)
{
	for (struct cluster_rcmd **pp = &c->rcmds; *pp; pp = &(*pp)->next)
		if (*pp == rc) {
			*pp = rc->next;
			break;
		}
	nerr_set(&rc->rq->err, -r, "%s", msg);
	if (r == 0)
		nerr_clear(&rc->rq->err);
	c->remote_err += r < 0;
	pthread_mutex_unlock(&c->lock);
	breq_complete(rc->rq, r);
	free(rc->record);
	free(rc);
	pthread_mutex_lock(&c->lock);
}

/* The answer to a command written here (c->lock held): complete it. */
static void rcmd_answered_locked(struct cluster *c, const char *key, const char *val, size_t vlen)
{
	const char *id = strrchr(key, '/');

	for (struct cluster_rcmd **pp = &c->rcmds; id && *pp; pp = &(*pp)->next) {
		struct cluster_rcmd *rc = *pp;
		if (strcmp(rc->id, id + 1) != 0 || strcmp(rc->key + strlen(c->prefix) + 1, key) != 0)
			continue;
		json_t *j = json_loadb(val, vlen, 0, NULL);
		const char *st = json_string_value(json_object_get(j, "state"));
		if (!st || strcmp(st, "done") != 0) {
			json_decref(j);
			return;
		}
		int e = (int)json_integer_value(json_object_get(j, "errno"));
		const char *m = json_string_value(json_object_get(j, "error"));
		const char *reply = json_string_value(json_object_get(j, "reply"));
		const char *node = key + strlen("nodes/");
		int nl = (int)strcspn(node, "/");
		struct breq *rq = rc->rq;

		*pp = rc->next;
		if (e > 0) {
			nerr_set(&rq->err, e, "node %.*s: %s", nl, node, m ? m : strerror(e));
			c->remote_err++;
		} else {
			if (reply && *reply)
				sbuf_printf(&rq->reply, "%s", reply);
			c->remote_ok++;
		}
		char **nd = realloc(c->deletes, (c->ndeletes + 1) * sizeof(*nd));
		if (nd) {
			c->deletes = nd;
			c->deletes[c->ndeletes++] = strdup(rc->key);
		}
		free(rc->record);
		free(rc);
		json_decref(j);
		/* completing may run the writer's next line: not under our lock */
		pthread_mutex_unlock(&c->lock);
		cluster_wake_remote(c);
		breq_complete(rq, e > 0 ? -e : 0);
		pthread_mutex_lock(&c->lock);
		return;
	}
}

static bool ts_past(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

/* Create the inbox records of commands not sent yet, time out the
 * unanswered, delete the answered. */
static void send_rcmds(struct cluster *c, struct etcd *e)
{
	pthread_mutex_lock(&c->lock);
	for (;;) {
		struct cluster_rcmd *rc = NULL;
		for (struct cluster_rcmd *x = c->rcmds; x && !rc; x = x->next)
			if (!x->sent || ts_past(&x->deadline))
				rc = x;
		if (!rc)
			break;
		if (rc->sent) {
			rcmd_fail_locked(c, rc, -ETIMEDOUT, "no answer from the target node in time");
			continue;
		}
		if (!c->connected) {
			rcmd_fail_locked(c, rc, -EHOSTUNREACH, "etcd unavailable");
			continue;
		}
		rc->sent = true;
		char key[512], *rec = rc->record;
		struct nerr err = { 0 };
		snprintf(key, sizeof(key), "%s", rc->key);
		pthread_mutex_unlock(&c->lock);
		/* rc stays ours: only this thread unlinks a sent command before
		 * its answer, and the answer cannot precede the record */
		int r = etcd_create(e, key, rec, strlen(rec), 0, &err);
		pthread_mutex_lock(&c->lock);
		if (r < 0)
			rcmd_fail_locked(c, rc, r == -ETIMEDOUT || r == -EHOSTUNREACH ? r : -EIO, err.msg);
	}
	char **del = c->deletes;
	size_t nd = c->ndeletes;
	c->deletes = NULL;
	c->ndeletes = 0;
	pthread_mutex_unlock(&c->lock);
	for (size_t i = 0; i < nd; i++) {
		struct nerr err = { 0 };
		if (del[i])
			etcd_delete(e, del[i], &err);
		free(del[i]);
	}
	free(del);
}

/* ---- the target ---- */

void cluster_inbox_seen_locked(struct cluster *c, const char *key, const char *val, size_t vlen,
			       int64_t mod_rev)
{
	char mine[512];

	snprintf(mine, sizeof(mine), "nodes/%s/inbox/", c->node);
	if (strncmp(key, mine, strlen(mine)) == 0) {
		json_t *j = json_loadb(val, vlen, 0, NULL);
		const char *st = json_string_value(json_object_get(j, "state"));
		const char *taker = json_string_value(json_object_get(j, "taker"));
		bool fresh = st && strcmp(st, "new") == 0;
		/* taken, but not by this run: an earlier one crashed on it */
		bool orphan = st && strcmp(st, "taken") == 0 && (!taker || strcmp(taker, c->token) != 0);

		if (fresh || orphan || !j) {
			struct cluster_job *jb = calloc(1, sizeof(*jb));
			if (jb && (jb->val = strndup(val, vlen))) {
				snprintf(jb->key, sizeof(jb->key), "%s/%s", c->prefix, key);
				snprintf(jb->id, sizeof(jb->id), "%s", key + strlen(mine));
				jb->mod_rev = mod_rev;
				jb->orphan = orphan;
				jb->nonblock = json_is_true(json_object_get(j, "nonblock"));
				jb->c = c;
				*c->jobs_tail = jb;
				c->jobs_tail = &jb->next;
				cluster_wake_remote(c);
			} else
				free(jb);
		}
		json_decref(j);
	}
	rcmd_answered_locked(c, key, val, vlen);
}

static void job_free(struct cluster_job *jb)
{
	sbuf_free(&jb->rq.reply);
	op_unref(jb->op);
	free(jb->val);
	free(jb);
}

static void job_done(struct breq *rq, int result)
{
	struct cluster_job *jb = (struct cluster_job *)((char *)rq - offsetof(struct cluster_job, rq));
	struct cluster *c = jb->c;

	jb->result = result;
	if (result < 0)
		snprintf(jb->msg, sizeof(jb->msg), "%s", rq->err.msg[0] ? rq->err.msg : strerror(-result));
	pthread_mutex_lock(&c->lock);
	*c->done_tail = jb;
	c->done_tail = &jb->next;
	pthread_mutex_unlock(&c->lock);
	cluster_wake_remote(c);
}

/* Run a taken command as a local write of its line to its ctl. */
static void job_run(struct cluster *c, struct cluster_job *jb, json_t *rec)
{
	const char *path = json_string_value(json_object_get(rec, "path"));
	const char *line = json_string_value(json_object_get(rec, "line"));
	const char *from = json_string_value(json_object_get(rec, "from"));
	const char *by = json_string_value(json_object_get(rec, "by"));
	char coll[65] = "", obj[65] = "";
	struct bnode *dir = NULL, *n = NULL;
	const struct battr *a;
	int r;

	jb->rq.done = job_done;
	jb->rq.uid = 0;
	jb->rq.gid = 0;
	jb->rq.nonblock = jb->nonblock;
	jb->rq.cluster_cmd = jb->id;
	snprintf(jb->rq.by, sizeof(jb->rq.by), "node=%s%s%s", from ? from : "?", by && *by ? " " : "",
		 by ? by : "");
	sbuf_init(&jb->rq.reply, 64);
	if (!path || !line || sscanf(path, "%64[^/]/%64s", coll, obj) < 1 ||
	    (strcmp(coll, "volumes") != 0 && strcmp(coll, "containers") != 0)) {
		nerr_set(&jb->rq.err, EINVAL, "malformed command record");
		job_done(&jb->rq, -EINVAL);
		return;
	}
	dir = bnode_lookup(c->b->root, coll);
	n = obj[0] && dir ? bnode_lookup(dir, obj) : bnode_ref(dir);
	a = n ? bnode_attr(n, "ctl", NULL) : NULL;
	if (!n || !a || !a->store) {
		nerr_set(&jb->rq.err, ENOENT, "no such object: %s", path);
		job_done(&jb->rq, -ENOENT);
		goto out;
	}
	log_msg(LOG_LVL_INFO, "cluster: remote command %s from %s to %s: %s", jb->id,
		from ? from : "?", path, line);
	r = a->check ? a->check(n, line, strlen(line), &jb->rq.err) : 0;
	if (r >= 0)
		r = a->store(n, line, strlen(line), &jb->rq);
	if (r != -EINPROGRESS)
		job_done(&jb->rq, r < 0 ? r : 0);
	if (r < 0 && r != -EINPROGRESS) {
		/* the target's own error file says so too, as a local write's */
		char msg[BNODE_ERROR_MAX];
		snprintf(msg, sizeof(msg), "'%.48s' (remote, from %s): %s", line, from ? from : "?",
			 jb->rq.err.msg[0] ? jb->rq.err.msg : strerror(-r));
		bnode_set_error(n, msg);
	}
out:
	bnode_unref(n);
	bnode_unref(dir);
}

/* Write jb's answer, only while the record is still at jb->mod_rev (as
 * seen or as taken): a record seen twice (a re-list) is answered once, and
 * one the writer has deleted is not made again. */
static void answer(struct cluster *c, struct etcd *e, struct cluster_job *jb, int result,
		   const char *msg)
{
	struct nerr err = { 0 };
	json_t *rec = json_loads(jb->val, 0, NULL);

	if (!json_is_object(rec)) {
		json_decref(rec);
		rec = json_object();
	}
	json_object_set_new(rec, "state", json_string("done"));
	json_object_set_new(rec, "errno", json_integer(result < 0 ? -result : 0));
	json_object_set_new(rec, "error", json_string(msg ? msg : ""));
	json_object_set_new(rec, "reply", json_stringn(jb->rq.reply.buf ? jb->rq.reply.buf : "",
						       jb->rq.reply.len));
	_cleanup_free_ char *s = json_dumps(rec, JSON_COMPACT);
	json_decref(rec);
	int r = s ? etcd_put_if(e, jb->key, s, strlen(s), jb->mod_rev, NULL, &err) : -ENOMEM;
	if (r < 0 && r != -ESTALE)
		log_msg(LOG_LVL_WARN, "cluster: cannot answer %s: %s", jb->key, err.msg);
}

/* The answer an earlier run's operation gives, once it has ended: false
 * while it is PENDING (unless the writer wanted only its id). */
static bool answer_from_op(struct cluster *c, struct etcd *e, struct cluster_job *jb)
{
	struct operation *op = jb->op;
	char msg[NERR_MSG_MAX + 96];
	enum op_state st;
	int result = 0;

	pthread_mutex_lock(&op->lock);
	st = op->state;
	if (st == OP_FAILED)
		snprintf(msg, sizeof(msg), "operation %s FAILED: %s", op->id, op->error);
	else if (st == OP_DROPPED)
		snprintf(msg, sizeof(msg), "operation %s DROPPED: %s", op->id, op->error);
	else
		msg[0] = '\0';
	pthread_mutex_unlock(&op->lock);
	if (st == OP_PENDING && !jb->nonblock && !atomic_load(&op->node->dead))
		return false;
	if (st == OP_FAILED)
		result = -EIO;
	else if (st == OP_DROPPED)
		result = -ECANCELED;
	if (jb->nonblock || st == OP_FINISHED)
		sbuf_printf(&jb->rq.reply, "%s\n", op->id);
	log_msg(LOG_LVL_INFO, "cluster: remote command %s was taken before a restart: answered "
		"from operation %s (%s)", jb->id, op->id, op_state_to_string(st));
	answer(c, e, jb, result, msg);
	pthread_mutex_lock(&c->lock);
	c->remote_adopted++;
	pthread_mutex_unlock(&c->lock);
	return true;
}

/* One inbox record: refused, answered from an earlier run's operation,
 * or taken and run. Returns true when jb was kept (running, adopted or
 * put back), false when it can be freed. */
static bool take_one(struct cluster *c, struct etcd *e, struct cluster_job *jb)
{
	json_t *rec = json_loads(jb->val, 0, NULL);
	struct nerr err = { 0 };
	_cleanup_free_ char *s = NULL;
	bool kept = false;

	if (!json_is_object(rec)) {
		answer(c, e, jb, -EINVAL, "malformed command record");
		goto out;
	}
	if (!c->accept_remote) {
		char m[160];
		snprintf(m, sizeof(m), "node %s refuses remote commands (accept_remote = no)", c->node);
		answer(c, e, jb, -EPERM, m);
		pthread_mutex_lock(&c->lock);
		c->remote_refused++;
		pthread_mutex_unlock(&c->lock);
		goto out;
	}
	if (jb->orphan) {
		/* which operation carries it is known once recovery has read
		 * the checkpoints */
		if (atomic_load(&c->b->state) == BACKEND_RECOVERING) {
			pthread_mutex_lock(&c->lock);
			*c->jobs_tail = jb;
			c->jobs_tail = &jb->next;
			pthread_mutex_unlock(&c->lock);
			kept = true;
			goto out;
		}
		jb->op = op_find_cluster_cmd(c->b, jb->id);
		if (jb->op) {
			if (!answer_from_op(c, e, jb)) {
				pthread_mutex_lock(&c->lock);
				jb->next = c->adopted;
				c->adopted = jb;
				pthread_mutex_unlock(&c->lock);
				kept = true;
			}
			goto out;
		}
		log_msg(LOG_LVL_INFO, "cluster: remote command %s was taken before a restart and "
			"never started: running it now", jb->id);
	}
	json_object_set_new(rec, "state", json_string("taken"));
	json_object_set_new(rec, "taker", json_string(c->token));
	s = json_dumps(rec, JSON_COMPACT);
	int64_t rev = 0;
	int r = s ? etcd_put_if(e, jb->key, s, strlen(s), jb->mod_rev, &rev, &err) : -ENOMEM;
	if (r < 0) {
		/* -ESTALE: someone else changed it (deleted, another taker);
		 * else etcd went away: the record is seen again after the
		 * reconnect's re-list */
		if (r != -ESTALE)
			log_msg(LOG_LVL_WARN, "cluster: cannot take %s: %s", jb->key, err.msg);
		goto out;
	}
	crash_hook("taken");
	jb->mod_rev = rev;
	pthread_mutex_lock(&c->lock);
	c->remote_run++;
	c->jobs_running++;
	pthread_mutex_unlock(&c->lock);
	free(jb->val);
	jb->val = TAKE_PTR(s);
	job_run(c, jb, rec);	/* job_done queues it to c->done */
	kept = true;
out:
	json_decref(rec);
	return kept;
}

static bool remote_step(struct cluster *c, struct etcd *e, bool up)
{
	struct cluster_job *jb, *done, **pp;
	bool waiting;

	if (up) {
		pthread_mutex_lock(&c->lock);
		jb = c->jobs;
		c->jobs = NULL;
		c->jobs_tail = &c->jobs;
		done = c->done;
		c->done = NULL;
		c->done_tail = &c->done;
		pthread_mutex_unlock(&c->lock);
		while (jb) {
			struct cluster_job *next = jb->next;
			jb->next = NULL;
			if (!take_one(c, e, jb))
				job_free(jb);
			jb = next;
		}
		/* answers before the next publish: a destroy's answer goes out
		 * before the deletion of the object it removed */
		while (done) {
			struct cluster_job *next = done->next;
			answer(c, e, done, done->result, done->msg);
			pthread_mutex_lock(&c->lock);
			bool last = --c->jobs_running == 0;
			pthread_mutex_unlock(&c->lock);
			if (last)
				cluster_wake(c);	/* deletions it held back */
			job_free(done);
			done = next;
		}
		/* adopted operations that have ended since */
		pthread_mutex_lock(&c->lock);
		jb = c->adopted;
		c->adopted = NULL;
		pthread_mutex_unlock(&c->lock);
		for (pp = &jb; *pp;) {
			struct cluster_job *x = *pp;
			if (answer_from_op(c, e, x)) {
				*pp = x->next;
				job_free(x);
			} else
				pp = &x->next;
		}
		pthread_mutex_lock(&c->lock);
		*pp = c->adopted;
		c->adopted = jb;
		pthread_mutex_unlock(&c->lock);
	}
	send_rcmds(c, e);
	pthread_mutex_lock(&c->lock);
	waiting = c->rcmds || c->adopted || c->jobs;
	pthread_mutex_unlock(&c->lock);
	return waiting;
}

void *cluster_remote_main(void *arg)
{
	struct cluster *c = arg;
	struct etcd_tls tls = { c->ca, c->cert, c->key };
	struct etcd *e = NULL;
	struct nerr err = { 0 };

	pthread_setname_np(pthread_self(), "nodefs-cinbox");
	if (etcd_new(c->endpoints, &tls, 1000, &e, &err) < 0)
		return NULL;
	while (!cluster_stopping(c)) {
		cwake_clear(&c->remote_wake);
		pthread_mutex_lock(&c->lock);
		bool up = c->connected;
		pthread_mutex_unlock(&c->lock);
		/* waiting: deadlines of commands sent, adopted operations,
		 * commands held until recovery has ended */
		bool waiting = remote_step(c, e, up);
		cwake_wait(&c->remote_wake, waiting ? 50 : 1000);
	}
	etcd_free(e);
	return NULL;
}

void cluster_remote_stop(struct cluster *c)
{
	pthread_mutex_lock(&c->lock);
	while (c->rcmds)
		rcmd_fail_locked(c, c->rcmds, -ESHUTDOWN, "nodefs is stopping");
	struct cluster_job *lists[] = { c->jobs, c->done, c->adopted };
	c->jobs = c->done = c->adopted = NULL;
	c->jobs_tail = &c->jobs;
	c->done_tail = &c->done;
	for (size_t i = 0; i < c->ndeletes; i++)
		free(c->deletes[i]);
	free(c->deletes);
	c->deletes = NULL;
	c->ndeletes = 0;
	pthread_mutex_unlock(&c->lock);
	for (size_t i = 0; i < ARRAY_SIZE(lists); i++)
		while (lists[i]) {
			struct cluster_job *n = lists[i]->next;
			job_free(lists[i]);
			lists[i] = n;
		}
}
