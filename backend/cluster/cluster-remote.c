/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cluster-remote: ctl lines carried to other nodes through etcd, both
 * sides, in two raft commits (docs/design.md, "A remote command"). The
 * writer creates PREFIX/nodes/NODE/inbox/ID in a transaction that fails if
 * it exists (and that carries the deletions of its earlier answered
 * records) and waits for the answer in the watch of its own inbox; the
 * target, seeing the record in the watch of its inbox, runs the line
 * through the ctl file's own check and store (so the same operation
 * records, checkpoints and events as a local write) and writes the answer
 * in one transaction conditional on the record's revision as seen, in the
 * record's place and at PREFIX/nodes/WRITER/inbox/ID; the writer deletes
 * both with its next create. Each node watches only its own inbox. There
 * is no "taken" write.
 *
 * At most once: the command's id goes into the first checkpoint of the
 * operation it starts (breq.cluster_cmd, operation.cluster_cmd). Within a
 * run a record is queued once per revision (centry.queued_rev), so a
 * re-list does not run it again. A record an earlier run of this node may
 * have seen (listed at or below this run's first list's revision) waits
 * until recovery has read the checkpoints: an operation carrying its id
 * answers it (ended: at once; PENDING: when recovery has driven it to its
 * end), and with none it runs now: nothing of it had been acted on, since
 * the checkpoint comes before any action.
 *
 * Runs on its own thread (cluster_remote_main, with its own etcd client)
 * and the watch thread (records seen, under c->lock). Knows the tree's ctl
 * entry points and the etcd client; never FUSE.
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

#include <jansson.h>

#include "cluster-internal.h"
#include "jw.h"
#include "log.h"
#include "macro.h"
#include "nodefs-config.h"
#include "operation.h"
#include "valid.h"

#if NODEFS_TEST_HOOKS
/* Crash tests: NODEFS_CRASH_AT=cluster:run kills the daemon right before
 * it runs a remote command it has decided to run. */
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

#if NODEFS_TEST_HOOKS
/* Tests: NODEFS_TEST_CLUSTER_CREATE_RETRY=1 makes every create of a
 * command record behave as one whose first attempt committed and whose
 * reply was lost: the call is made again (as the client does on another
 * member) once the target has answered the first, or after a second. */
static int lost_reply_hook(struct cluster *c, struct cluster_rcmd *rc, struct etcd *e,
			   const char *key, const char *rec, int r, struct nerr *err)
{
	if (r != 0 || !getenv("NODEFS_TEST_CLUSTER_CREATE_RETRY"))
		return r;
	for (int i = 0; i < 100; i++) {
		pthread_mutex_lock(&c->lock);
		bool answered = rc->answered;
		pthread_mutex_unlock(&c->lock);
		if (answered)
			break;
		usleep(10000);
	}
	return etcd_create_and(e, key, rec, strlen(rec), NULL, 0, err);
}
#else
static int lost_reply_hook(struct cluster *c, struct cluster_rcmd *rc, struct etcd *e,
			   const char *key, const char *rec, int r, struct nerr *err)
{
	return r;
}
#endif

/* ---- the writer ---- */

int cluster_remote_write(struct cluster *c, const char *node, const char *path, const char *line,
			 size_t len, struct breq *rq)
{
	struct cluster_rcmd *rc;
	struct sbuf rec = SBUF_INIT(64u << 10);
	struct jw w;
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
	_cleanup_free_ char *ln = strndup(line, len);
	jw_init(&w, &rec, 0);
	jw_obj(&w);
	jw_kstr(&w, "from", c->node);
	jw_kstr(&w, "by", rq->by);
	jw_kstr(&w, "path", path);
	jw_kstr(&w, "line", ln ? ln : "");
	jw_kstr(&w, "state", "new");
	jw_kbool(&w, "nonblock", rq->nonblock);
	jw_kint(&w, "written", (long long)time(NULL));
	jw_obj_end(&w);
	if (!ln)
		jw_fail(&w, -ENOMEM);
	if (jw_end(&w) < 0)
		sbuf_free(&rec);
	rc->record = rec.buf;
	if (!rc->record) {
		pthread_mutex_unlock(&c->lock);
		free(rc);
		return nerr_set(&rq->err, ENOMEM, "out of memory");
	}
	rc->rq = rq;
	/* looked at again then: extended while the target is UP */
	rc->deadline = ts_after_ms(CLOCK_MONOTONIC, (uint64_t)c->ttl_s * 3000);
	rc->next = c->rcmds;
	c->rcmds = rc;
	pthread_mutex_unlock(&c->lock);
	cluster_wake_remote(c);
	return -EINPROGRESS;
}

/* An answered or abandoned command's record, to delete with the next
 * create (or alone once none has come for a while); c->lock held. */
static void add_delete_locked(struct cluster *c, const char *key)
{
	char **nd = realloc(c->deletes, (c->ndeletes + 1) * sizeof(*nd));

	if (!nd)
		return;
	c->deletes = nd;
	if ((c->deletes[c->ndeletes] = strdup(key))) {
		if (c->ndeletes++ == 0)
			clock_gettime(CLOCK_MONOTONIC, &c->deletes_since);
	}
}

static void rcmd_free(struct cluster_rcmd *rc)
{
	free(rc->record);
	free(rc->amsg);
	free(rc->areply);
	free(rc);
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
	rcmd_free(rc);
	pthread_mutex_lock(&c->lock);
}

/* An answer in this node's inbox (key below the prefix; c->lock held):
 * complete the command written here it answers. Returns false when no
 * command waits for it (an answer its writer gave up on, or an earlier
 * run's): the caller deletes it. */
/* Complete rc (unlinked, c->lock held, dropped meanwhile) with the
 * target's answer: errno e, message m, reply. */
static void rcmd_complete_locked(struct cluster *c, struct cluster_rcmd *rc, int e, const char *m,
				 const char *reply)
{
	/* the target: the node whose inbox the command went to */
	const char *node = rc->key + strlen(c->prefix) + strlen("/nodes/");
	int nl = (int)strcspn(node, "/");
	struct breq *rq = rc->rq;

	if (e > 0) {
		nerr_set(&rq->err, e, "node %.*s: %s", nl, node, m && *m ? m : strerror(e));
		c->remote_err++;
	} else {
		if (reply && *reply)
			sbuf_printf(&rq->reply, "%s", reply);
		c->remote_ok++;
	}
	/* completing may run the writer's next line: not under our lock.
	 * The writer first: the inbox thread, woken for the deletions, would
	 * take a core from the answer */
	pthread_mutex_unlock(&c->lock);
	breq_complete(rq, e > 0 ? -e : 0);
	cluster_wake_remote(c);
	pthread_mutex_lock(&c->lock);
}

/* An answer in this node's inbox (key below the prefix; c->lock held):
 * complete the command written here it answers. Returns false when no
 * command waits for it (an answer its writer gave up on, or an earlier
 * run's): the caller deletes it. */
static bool rcmd_answered_locked(struct cluster *c, const char *key, const char *val, size_t vlen)
{
	const char *id = strrchr(key, '/');
	char full[512];

	for (struct cluster_rcmd **pp = &c->rcmds; id && *pp; pp = &(*pp)->next) {
		struct cluster_rcmd *rc = *pp;
		if (strcmp(rc->id, id + 1) != 0)
			continue;
		json_t *j = json_loadb(val, vlen, 0, NULL);
		const char *st = json_string_value(json_object_get(j, "state"));
		if (!st || strcmp(st, "done") != 0 || rc->answered) {
			json_decref(j);
			return true;
		}
		int e = (int)json_integer_value(json_object_get(j, "errno"));
		const char *m = json_string_value(json_object_get(j, "error"));
		const char *reply = json_string_value(json_object_get(j, "reply"));

		/* both go with the next create: the answer here, and the
		 * record in the target's inbox (kept there until now, so that
		 * a create retried on another member finds it and is not made
		 * again) */
		snprintf(full, sizeof(full), "%s/%s", c->prefix, key);
		add_delete_locked(c, full);
		if (strcmp(full, rc->key) != 0)
			add_delete_locked(c, rc->key);
		if (rc->inflight) {
			/* its create has not returned yet: completed then */
			rc->answered = true;
			rc->aerrno = e;
			rc->amsg = m ? strdup(m) : NULL;
			rc->areply = reply ? strdup(reply) : NULL;
			json_decref(j);
			return true;
		}
		*pp = rc->next;
		rcmd_complete_locked(c, rc, e, m, reply);
		rcmd_free(rc);
		json_decref(j);
		return true;
	}
	return false;
}

static bool ts_past(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

/* How long answered records wait for a create to carry their deletion. */
#define DELETE_LINGER_MS 100

/* Up to max pending deletions as transaction ops (c->lock held); the keys
 * move to the caller (free each ops[i].key). */
static size_t take_deletes_locked(struct cluster *c, struct etcd_op *ops, size_t max)
{
	size_t n = c->ndeletes < max ? c->ndeletes : max;

	for (size_t i = 0; i < n; i++)
		ops[i] = (struct etcd_op){ .del = true, .key = c->deletes[c->ndeletes - n + i] };
	c->ndeletes -= n;
	if (c->ndeletes == 0) {
		free(c->deletes);
		c->deletes = NULL;
	}
	return n;
}

/* Deletions that did not get through go back (c->lock held). */
static void put_back_deletes_locked(struct cluster *c, struct etcd_op *ops, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		add_delete_locked(c, ops[i].key);
		free((char *)ops[i].key);
	}
}

static void free_ops_keys(struct etcd_op *ops, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free((char *)ops[i].key);
}

/* Create the inbox records of commands not sent yet (each in one
 * transaction with the pending deletions), time out the unanswered, and
 * delete answered records no create has carried within DELETE_LINGER_MS.
 * Returns true while deletions are pending. */
static bool send_rcmds(struct cluster *c, struct etcd *e)
{
	struct etcd_op ops[ETCD_TXN_MAX - 1];
	bool pending;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		struct cluster_rcmd *rc = NULL;
		for (struct cluster_rcmd *x = c->rcmds; x && !rc; x = x->next)
			if ((!x->sent && ts_past(&x->retry_at)) || (x->sent && ts_past(&x->deadline)))
				rc = x;
		if (!rc)
			break;
		if (rc->sent) {
			const char *node = rc->key + strlen(c->prefix) + strlen("/nodes/");
			size_t nl = strcspn(node, "/");
			char m[NERR_MSG_MAX];
			/* a command runs as long as it takes there (a stop
			 * waits for its timeout, a create for its plugin), as
			 * a local write would: wait while the target is UP;
			 * three TTLs in all give one that crashed time to
			 * come back and answer */
			if (c->connected && cluster_node_up_locked(c, node, nl)) {
				rc->deadline = ts_after_ms(CLOCK_MONOTONIC, (uint64_t)c->ttl_s * 1000);
				continue;
			}
			snprintf(m, sizeof(m), "no answer from node %.*s: %s", (int)nl, node,
				 c->connected ? "it is DOWN" : "etcd unavailable");
			/* unanswered: gone, so a target that comes back
			 * later does not run what its writer gave up on */
			add_delete_locked(c, rc->key);
			rcmd_fail_locked(c, rc, -ETIMEDOUT, m);
			continue;
		}
		if (!c->connected) {
			rcmd_fail_locked(c, rc, -EHOSTUNREACH, "etcd unavailable");
			continue;
		}
		rc->sent = rc->inflight = true;
		char key[512], *rec = rc->record;
		struct nerr err = { 0 };
		size_t nd = take_deletes_locked(c, ops, ARRAY_SIZE(ops));
		snprintf(key, sizeof(key), "%s", rc->key);
		pthread_mutex_unlock(&c->lock);
		/* rc stays ours while inflight: an answer that comes meanwhile
		 * is kept in it (rcmd_answered_locked) */
		int r = etcd_create_and(e, key, rec, strlen(rec), ops, nd, &err);
		r = lost_reply_hook(c, rc, e, key, rec, r, &err);
		pthread_mutex_lock(&c->lock);
		rc->inflight = false;
		/* -EEXIST: the key (this run's token and sequence) is made by
		 * no one else, so it is this create's own, its first attempt
		 * committed and its reply lost (the client then tries another
		 * member), whatever the target has written in it since: made,
		 * and never made again (the record stays until the answer is
		 * in, so a retry cannot find it gone and create it anew). The
		 * transaction's other branch deleted the deletions. */
		if (r == -EEXIST)
			r = 0;
		if (r == 0)
			free_ops_keys(ops, nd);
		else
			put_back_deletes_locked(c, ops, nd);
		if (rc->answered) {
			for (struct cluster_rcmd **pp = &c->rcmds; *pp; pp = &(*pp)->next)
				if (*pp == rc) {
					*pp = rc->next;
					break;
				}
			rcmd_complete_locked(c, rc, rc->aerrno, rc->amsg, rc->areply);
			rcmd_free(rc);
			continue;
		}
		if (r == -ETIMEDOUT && rc->tries < 3) {
			/* every member timed out (an election after the leader
			 * went): made again in a moment, which is safe, as a
			 * create that finds its key counts as made */
			rc->tries++;
			rc->sent = false;
			rc->retry_at = ts_after_ms(CLOCK_MONOTONIC, 300);
			continue;
		}
		if (r < 0) {
			/* a timeout may have committed it: deleted, so the target
			 * does not run what its writer was told failed */
			if (r == -ETIMEDOUT)
				add_delete_locked(c, key);
			rcmd_fail_locked(c, rc, r == -ETIMEDOUT || r == -EHOSTUNREACH ? r : -EIO, err.msg);
		}
	}
	struct timespec due = c->deletes_since;
	due.tv_nsec += DELETE_LINGER_MS * 1000000L;
	due.tv_sec += due.tv_nsec / 1000000000L;
	due.tv_nsec %= 1000000000L;
	while (c->ndeletes && c->connected && ts_past(&due)) {
		struct nerr err = { 0 };
		size_t nd = take_deletes_locked(c, ops, ARRAY_SIZE(ops));
		pthread_mutex_unlock(&c->lock);
		int r = etcd_txn(e, ops, nd, NULL, &err);
		pthread_mutex_lock(&c->lock);
		if (r < 0) {
			put_back_deletes_locked(c, ops, nd);
			break;
		}
		free_ops_keys(ops, nd);
	}
	pending = c->ndeletes > 0;
	pthread_mutex_unlock(&c->lock);
	return pending;
}

/* ---- the target ---- */

void cluster_inbox_seen_locked(struct cluster *c, struct centry *ce)
{
	char mine[512];

	snprintf(mine, sizeof(mine), "nodes/%s/inbox/", c->node);
	if (strncmp(ce->key, mine, strlen(mine)) != 0)
		return;
	json_t *j = json_loadb(ce->val, ce->vlen, 0, NULL);
	const char *st = json_string_value(json_object_get(j, "state"));
	/* "taken": written by an earlier version, which took commands with a
	 * write of their own before running them */
	bool open = !j || (st && (strcmp(st, "new") == 0 || strcmp(st, "taken") == 0));
	bool done = st && strcmp(st, "done") == 0;

	/* queued once per revision: a re-list shows it again */
	if (open && ce->queued_rev != ce->mod_rev) {
		struct cluster_job *jb = calloc(1, sizeof(*jb));
		if (jb && (jb->val = strndup(ce->val, ce->vlen))) {
			snprintf(jb->key, sizeof(jb->key), "%s/%s", c->prefix, ce->key);
			snprintf(jb->id, sizeof(jb->id), "%s", ce->key + strlen(mine));
			jb->mod_rev = ce->mod_rev;
			jb->orphan = ce->mod_rev <= c->boot_rev;
			jb->nonblock = json_is_true(json_object_get(j, "nonblock"));
			jb->c = c;
			ce->queued_rev = ce->mod_rev;
			*c->jobs_tail = jb;
			c->jobs_tail = &jb->next;
			c->jobs_kick = true;
		} else
			free(jb);
	}
	json_decref(j);
	if (done) {
		const char *id = ce->key + strlen(mine);
		size_t nl = strlen(c->node);
		char full[512];
		snprintf(full, sizeof(full), "%s/%s", c->prefix, ce->key);
		/* an answer to a command of this node's (its id starts with
		 * the node's name) that none here waits for (its writer gave
		 * up, or it is an earlier run's): gone with the next create.
		 * Other answered records are their writers' to delete. */
		bool ours = strncmp(id, c->node, nl) == 0 && id[nl] == '-';
		if (!rcmd_answered_locked(c, ce->key, ce->val, ce->vlen) && ours)
			add_delete_locked(c, full);
	}
}

void cluster_unlock_kick(struct cluster *c)
{
	bool kick = c->jobs_kick;

	c->jobs_kick = false;
	pthread_mutex_unlock(&c->lock);
	if (kick)
		cluster_wake_remote(c);
}

static void job_free(struct cluster_job *jb)
{
	sbuf_free(&jb->rq.reply);
	op_unref(jb->op);
	free(jb->val);
	free(jb);
}

/* jb has its answer (result, msg, rq.reply): queue it to be written. */
static void job_finish(struct cluster_job *jb, int result, const char *msg)
{
	struct cluster *c = jb->c;

	jb->result = result;
	snprintf(jb->msg, sizeof(jb->msg), "%s", msg ? msg : "");
	jb->next = NULL;
	pthread_mutex_lock(&c->lock);
	*c->done_tail = jb;
	c->done_tail = &jb->next;
	pthread_mutex_unlock(&c->lock);
	cluster_wake_remote(c);
}

static void job_done(struct breq *rq, int result)
{
	struct cluster_job *jb = (struct cluster_job *)((char *)rq - offsetof(struct cluster_job, rq));

	job_finish(jb, result, result >= 0 ? NULL : rq->err.msg[0] ? rq->err.msg :
		   strerror(-result));
}

/* Run a command as a local write of its line to its ctl. */
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
 * seen): a record the writer has deleted (it gave up) is not made again.
 * The answer goes in the record's place and, in the same transaction, to
 * the writer's inbox (the writer deletes both once it has it: the record
 * stays until then, so a create retried on another member finds it).
 * 0, -ESTALE (changed: nothing to answer), or etcd's failure. */
static int answer(struct cluster *c, struct etcd *e, struct cluster_job *jb)
{
	struct nerr err = { 0 };
	json_t *rec = json_loads(jb->val, 0, NULL);
	struct sbuf out = SBUF_INIT(8u << 20);
	struct jw w;
	const char *from = json_string_value(json_object_get(rec, "from"));
	const char *keys[] = { "from", "by", "path", "line" };
	char akey[512];
	struct etcd_op ops[2];
	size_t nops = 0;
	struct nerr ne;
	int r;

	jw_init(&w, &out, 0);
	jw_obj(&w);
	for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
		const char *v = json_string_value(json_object_get(rec, keys[i]));
		if (v)
			jw_kstr(&w, keys[i], v);
	}
	jw_kbool(&w, "nonblock", json_is_true(json_object_get(rec, "nonblock")));
	if (json_is_integer(json_object_get(rec, "written")))
		jw_kint(&w, "written", (long long)json_integer_value(json_object_get(rec, "written")));
	jw_kstr(&w, "state", "done");
	jw_kint(&w, "errno", jb->result < 0 ? -jb->result : 0);
	jw_kstr(&w, "error", jb->result < 0 ? jb->msg : "");
	jw_key(&w, "reply");
	{
		_cleanup_free_ char *reply = strndup(jb->rq.reply.buf ? jb->rq.reply.buf : "",
						     jb->rq.reply.len);
		jw_str(&w, reply ? reply : "");
	}
	jw_obj_end(&w);
	r = jw_end(&w);
	/* the writer's inbox, when the record names a writer that is
	 * another node (the id starts with its name) */
	ops[nops++] = (struct etcd_op){ .key = jb->key, .val = out.buf, .vlen = out.len };
	if (from && strcmp(from, c->node) != 0 && valid_name(from, &ne) == 0 &&
	    strncmp(jb->id, from, strlen(from)) == 0 && jb->id[strlen(from)] == '-') {
		snprintf(akey, sizeof(akey), "%s/nodes/%s/inbox/%s", c->prefix, from, jb->id);
		ops[nops++] = (struct etcd_op){ .key = akey, .val = out.buf, .vlen = out.len };
	}
	json_decref(rec);
	if (r >= 0)
		r = etcd_txn_if(e, jb->key, jb->mod_rev, ops, nops, &err);
	else
		r = -ENOMEM;
	sbuf_free(&out);
	if (r < 0 && r != -ESTALE)
		log_msg(LOG_LVL_WARN, "cluster: cannot answer %s (will retry): %s", jb->key, err.msg);
	return r;
}

/* The answer an earlier run's operation gives, queued once it has ended:
 * false while it is PENDING (unless the writer wanted only its id). */
static bool answer_from_op(struct cluster *c, struct cluster_job *jb)
{
	struct operation *op = jb->op;
	char msg[NERR_MSG_MAX];
	enum op_state st;
	int result = 0;

	pthread_mutex_lock(&op->lock);
	st = op->state;
	if (st == OP_FAILED)
		snprintf(msg, sizeof(msg), "operation %s FAILED: %.200s", op->id, op->error);
	else if (st == OP_DROPPED)
		snprintf(msg, sizeof(msg), "operation %s DROPPED: %.200s", op->id, op->error);
	else
		msg[0] = '\0';
	pthread_mutex_unlock(&op->lock);
	if (st == OP_PENDING && !jb->nonblock && !atomic_load(&op->node->dead))
		return false;
	if (st == OP_FAILED)
		result = -EIO;
	else if (st == OP_DROPPED)
		result = -ECANCELED;
	sbuf_init(&jb->rq.reply, 64);
	if (jb->nonblock || st == OP_FINISHED)
		sbuf_printf(&jb->rq.reply, "%s\n", op->id);
	log_msg(LOG_LVL_INFO, "cluster: remote command %s was started before a restart: answered "
		"from operation %s (%s)", jb->id, op->id, op_state_to_string(st));
	pthread_mutex_lock(&c->lock);
	c->remote_adopted++;
	c->jobs_running++;
	pthread_mutex_unlock(&c->lock);
	job_finish(jb, result, msg);
	return true;
}

/* An answer that does not come from a run (refusal, malformed record). */
static void job_refuse(struct cluster *c, struct cluster_job *jb, int result, const char *msg)
{
	pthread_mutex_lock(&c->lock);
	c->jobs_running++;
	pthread_mutex_unlock(&c->lock);
	sbuf_init(&jb->rq.reply, 64);
	job_finish(jb, result, msg);
}

/* One inbox record: refused, answered from an earlier run's operation,
 * or run; jb goes on to the answers, the adopted, or back to the inbox
 * (held until recovery has ended). */
static void take_one(struct cluster *c, struct cluster_job *jb)
{
	json_t *rec = json_loads(jb->val, 0, NULL);

	if (!json_is_object(rec)) {
		job_refuse(c, jb, -EINVAL, "malformed command record");
		goto out;
	}
	if (!c->accept_remote) {
		char m[160];
		snprintf(m, sizeof(m), "node %s refuses remote commands (accept_remote = no)", c->node);
		pthread_mutex_lock(&c->lock);
		c->remote_refused++;
		pthread_mutex_unlock(&c->lock);
		job_refuse(c, jb, -EPERM, m);
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
			goto out;
		}
		jb->op = op_find_cluster_cmd(c->b, jb->id);
		if (jb->op) {
			if (!answer_from_op(c, jb)) {
				pthread_mutex_lock(&c->lock);
				jb->next = c->adopted;
				c->adopted = jb;
				pthread_mutex_unlock(&c->lock);
			}
			goto out;
		}
		jb->orphan = false;
	}
	crash_hook("run");
	pthread_mutex_lock(&c->lock);
	c->remote_run++;
	c->jobs_running++;
	pthread_mutex_unlock(&c->lock);
	sbuf_init(&jb->rq.reply, 64);
	job_run(c, jb, rec);	/* job_done queues its answer */
out:
	json_decref(rec);
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
		pthread_mutex_unlock(&c->lock);
		while (jb) {
			struct cluster_job *next = jb->next;
			jb->next = NULL;
			take_one(c, jb);
			jb = next;
		}
		/* adopted operations that have ended since */
		pthread_mutex_lock(&c->lock);
		jb = c->adopted;
		c->adopted = NULL;
		pthread_mutex_unlock(&c->lock);
		for (pp = &jb; *pp;) {
			struct cluster_job *x = *pp, *next = x->next;
			if (answer_from_op(c, x))
				*pp = next;	/* x is on the answers' list now */
			else
				pp = &x->next;
		}
		pthread_mutex_lock(&c->lock);
		*pp = c->adopted;
		c->adopted = jb;
		/* the answers, those of the runs above among them; before the
		 * next publish: a destroy's answer goes out before the
		 * deletion of the object it removed */
		done = c->done;
		c->done = NULL;
		c->done_tail = &c->done;
		pthread_mutex_unlock(&c->lock);
		while (done) {
			struct cluster_job *next = done->next;
			done->next = NULL;
			int r = answer(c, e, done);
			pthread_mutex_lock(&c->lock);
			if (r < 0 && r != -ESTALE) {
				/* etcd away: the same answer, later */
				*c->done_tail = done;
				c->done_tail = &done->next;
				done = NULL;
			}
			bool last = done && --c->jobs_running == 0;
			pthread_mutex_unlock(&c->lock);
			if (last)
				cluster_wake(c);	/* deletions it held back */
			if (done)
				job_free(done);
			done = next;
		}
	}
	waiting = send_rcmds(c, e);
	pthread_mutex_lock(&c->lock);
	waiting = waiting || c->rcmds || c->adopted || c->jobs || c->done;
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
		cluster_prefer_leader(c, e);
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
