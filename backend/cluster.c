/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cluster: this node in a fleet through etcd (nodefs(5) [cluster]). Owns
 * the [cluster] keys, the node's lease and its keep-alive, publishing the
 * node's volumes and containers under PREFIX/nodes/NODE/ (coalesced: a
 * scan of the objects' change counters every few milliseconds writes only
 * what changed since the last pass, so a burst costs one write per object),
 * the full re-publish after a reconnect, and remote commands: writing them
 * to a target's inbox and, on the target, taking them by transaction and
 * running them through the same ctl entry points as a local write.
 *
 * Key layout below PREFIX (docs/design.md):
 *   nodes/NODE/alive            {version, boot_id, started} on the lease
 *   nodes/NODE/info             the same and `updated`, no lease
 *   nodes/NODE/volumes/NAME     {"state": TEXT, "info": OBJECT}
 *   nodes/NODE/containers/NAME  same
 *   nodes/NODE/inbox/ID         {"from", "path", "line", "state": new|taken|done,
 *                                "errno", "error", "reply"}
 * cluster-view.c serves the tree from the Watch's cache. Knows the tree and
 * the etcd client; never FUSE.
 */
#include "backend-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster-internal.h"
#include "kind.h"
#include "log.h"
#include "macro.h"
#include "nodefs-config.h"
#include "units.h"
#include "valid.h"

#define SCAN_MS 10		/* how often the objects' counters are compared */
#define TIMEOUT_MS 1000		/* each etcd call */

struct pubrec {
	char key[160];		/* "volumes/NAME" */
	uint64_t version, serial;
	char *val;
	bool seen;
};

static bool pub_eq(const void *v, const void *k)
{
	return strcmp(((const struct pubrec *)v)->key, k) == 0;
}

void cluster_fmt_time(time_t t, char *buf, size_t len)
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void cluster_wake_locked(struct cluster *c)
{
	pthread_cond_signal(&c->cond);
}

/* ---- config ---- */

static const char *const cluster_keys[] = {
	"etcd", "node", "prefix", "lease_ttl", "accept_remote", "ca", "cert", "key",
};

static int cluster_config(struct cluster *c, const struct config_section *s, struct nerr *err)
{
	const char *v;
	char host[256] = "";
	uint64_t ms = 10000;

	for (size_t i = 0; i < s->nkv; i++) {
		bool known = false;
		for (size_t k = 0; k < ARRAY_SIZE(cluster_keys); k++)
			known |= strcmp(s->kv[i].key, cluster_keys[k]) == 0;
		if (!known)
			return nerr_set(err, EINVAL, "%s:%d: [cluster]: unknown key '%.64s'",
					c->b->cfg->path ? c->b->cfg->path : "config", s->kv[i].line,
					s->kv[i].key);
	}
	v = config_section_get(s, "etcd");
	if (!v || !*v)
		return nerr_set(err, EINVAL, "[cluster]: etcd = URL... is required");
	c->endpoints = strdup(v);
	v = config_section_get(s, "node");
	if (!v) {
		gethostname(host, sizeof(host) - 1);
		char *dot = strchr(host, '.');
		if (dot)
			*dot = '\0';
		v = host;
	}
	if (valid_name(v, err) < 0)
		return nerr_set(err, EINVAL, "[cluster]: node: %s", err->msg);
	c->node = strdup(v);
	v = config_section_get(s, "prefix");
	if (!v)
		v = "/nodefs";
	if (v[0] != '/' || strlen(v) > 200 || (strlen(v) > 1 && v[strlen(v) - 1] == '/'))
		return nerr_set(err, EINVAL, "[cluster]: prefix '%.64s' must start with '/' and not end with one", v);
	c->prefix = strdup(v);
	v = config_section_get(s, "lease_ttl");
	if (v && parse_duration_ms(v, &ms, err) < 0)
		return nerr_set(err, EINVAL, "[cluster]: lease_ttl: %s", err->msg);
	if (ms < 2000 || ms > 3600000)
		return nerr_set(err, EINVAL, "[cluster]: lease_ttl must be 2s to 1h");
	c->ttl_s = (long)(ms / 1000);
	v = config_section_get(s, "accept_remote");
	if (v && parse_bool(v, &c->accept_remote, err) < 0)
		return nerr_set(err, EINVAL, "[cluster]: accept_remote: %s", err->msg);
	c->ca = (v = config_section_get(s, "ca")) ? strdup(v) : NULL;
	c->cert = (v = config_section_get(s, "cert")) ? strdup(v) : NULL;
	c->key = (v = config_section_get(s, "key")) ? strdup(v) : NULL;
	if (!c->endpoints || !c->node || !c->prefix)
		return nerr_set(err, ENOMEM, "out of memory");
	/* the endpoints' syntax, now rather than at the first call */
	struct etcd_tls tls = { c->ca, c->cert, c->key };
	struct etcd *e;
	int r = etcd_new(c->endpoints, &tls, TIMEOUT_MS, &e, err);
	if (r < 0)
		return nerr_set(err, -r, "[cluster]: %s", err->msg);
	etcd_free(e);
	return 0;
}

static int cluster_init(struct backend *b, struct nerr *err)
{
	const struct config_section *s = config_section_find(b->cfg, "cluster", NULL);
	struct cluster *c;
	pthread_condattr_t ca;
	FILE *fp;
	int r;

	if (!s)
		return 0;	/* no [cluster]: no cluster/ */
	c = calloc(1, sizeof(*c));
	if (!c)
		return nerr_set(err, ENOMEM, "out of memory");
	b->cluster = c;
	c->b = b;
	c->started = time(NULL);
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &ca);
	pthread_condattr_destroy(&ca);
	hmap_init(&c->cache);
	hmap_init(&c->pubs);
	c->jobs_tail = &c->jobs;
	c->done_tail = &c->done;
	c->since = time(NULL);
	snprintf(c->reason, sizeof(c->reason), "not connected yet");
	fp = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (fp) {
		if (fgets(c->boot_id, sizeof(c->boot_id), fp))
			c->boot_id[strcspn(c->boot_id, "\n")] = '\0';
		fclose(fp);
	}
	r = cluster_config(c, s, err);
	if (r < 0)
		return r;
	return cluster_view_init(c) < 0 ? nerr_set(err, ENOMEM, "out of memory") : 0;
}

/* ---- publishing ---- */

static void cluster_key(const struct cluster *c, char *buf, size_t len, const char *rest)
{
	snprintf(buf, len, "%s/nodes/%s/%s", c->prefix, c->node, rest);
}

static void set_state(struct cluster *c, bool connected, const char *reason)
{
	pthread_mutex_lock(&c->lock);
	if (c->connected != connected) {
		c->since = time(NULL);
		log_msg(connected ? LOG_LVL_INFO : LOG_LVL_WARN, "cluster: %s%s%s",
			connected ? "connected to etcd" : "etcd unavailable",
			reason ? ": " : "", reason ? reason : "");
	}
	c->connected = connected;
	snprintf(c->reason, sizeof(c->reason), "%s", reason ? reason : "");
	bnode_changed(c->dir);
	pthread_mutex_unlock(&c->lock);
}

static char *node_record(struct cluster *c, bool with_updated)
{
	json_t *j = json_pack("{s:s,s:s,s:I}", "version", NODEFS_VERSION, "boot_id", c->boot_id,
			      "started", (json_int_t)c->started);
	char *s;

	if (j && with_updated)
		json_object_set_new(j, "updated", json_integer(time(NULL)));
	s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	return s;
}

/* The record of object n: its state and info.json as its files show them. */
static char *object_record(struct bnode *n)
{
	const struct battr *st = bnode_attr(n, "state", NULL), *in = bnode_attr(n, "info.json", NULL);
	struct sbuf a, i;
	json_t *j = json_object(), *info = NULL;
	char *s = NULL;

	sbuf_init(&a, 256);
	sbuf_init(&i, 1024);
	if (st && st->show && st->show(n, &a) >= 0)
		json_object_set_new(j, "state", json_stringn(a.buf ? a.buf : "", a.len));
	if (in && in->show && in->show(n, &i) >= 0 && i.len)
		info = json_loadb(i.buf, i.len, 0, NULL);
	json_object_set_new(j, "info", info ? info : json_object());
	s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	sbuf_free(&a);
	sbuf_free(&i);
	return s;
}

static const char *const colls[] = { "volumes", "containers" };

/* One pass over the objects: publish what changed, delete what went.
 * full: every object, whatever its counter says. */
static int publish_pass(struct cluster *c, struct etcd *e, bool full, struct nerr *err)
{
	int r = 0;
	size_t pos;
	struct pubrec *p;
	unsigned wrote = 0;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (pos = 0; (p = hmap_next(&c->pubs, &pos));)
		p->seen = false;
	for (size_t k = 0; k < ARRAY_SIZE(colls) && r >= 0; k++) {
		struct bnode *dir = bnode_lookup(c->b->root, colls[k]), **v = NULL;
		size_t n = 0;

		if (!dir)
			continue;
		if (bnode_list(dir, &v, &n) < 0) {
			bnode_unref(dir);
			return nerr_set(err, ENOMEM, "out of memory");
		}
		for (size_t i = 0; i < n && r >= 0; i++) {
			char pk[160], key[512];
			uint64_t ver = atomic_load(&v[i]->version);

			snprintf(pk, sizeof(pk), "%s/%s", colls[k], v[i]->name);
			p = hmap_get(&c->pubs, hmap_hash_str(pk), pk, pub_eq);
			if (p && !full && p->version == ver && p->serial == v[i]->serial) {
				p->seen = true;
				continue;
			}
			_cleanup_free_ char *rec = object_record(v[i]);
			if (!rec)
				continue;
			if (!p) {
				p = calloc(1, sizeof(*p));
				if (!p || hmap_put(&c->pubs, hmap_hash_str(pk), p) < 0) {
					free(p);
					r = nerr_set(err, ENOMEM, "out of memory");
					break;
				}
				snprintf(p->key, sizeof(p->key), "%s", pk);
			}
			p->seen = true;
			if (!full && p->val && strcmp(p->val, rec) == 0) {
				p->version = ver;
				p->serial = v[i]->serial;
				continue;
			}
			cluster_key(c, key, sizeof(key), pk);
			r = etcd_put(e, key, rec, strlen(rec), 0, NULL, err);
			if (r < 0)
				break;
			wrote++;
			free(p->val);
			p->val = TAKE_PTR(rec);
			p->version = ver;
			p->serial = v[i]->serial;
		}
		bnode_list_free(v, n);
		bnode_unref(dir);
	}
	if (r < 0)
		return r;
	/* gone since the last pass */
	for (pos = 0; (p = hmap_next(&c->pubs, &pos));) {
		char key[512];

		if (p->seen)
			continue;
		cluster_key(c, key, sizeof(key), p->key);
		r = etcd_delete(e, key, err);
		if (r < 0)
			return r;
		wrote++;
		hmap_del(&c->pubs, hmap_hash_str(p->key), p->key, pub_eq);
		free(p->val);
		free(p);
		pos = 0;	/* the table may have moved */
	}
	if (wrote) {
		_cleanup_free_ char *info = node_record(c, true);
		char key[512];

		cluster_key(c, key, sizeof(key), "info");
		if (info && (r = etcd_put(e, key, info, strlen(info), 0, NULL, err)) < 0)
			return r;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		pthread_mutex_lock(&c->lock);
		c->publishes++;
		c->publish_us += (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000 +
					    (t1.tv_nsec - t0.tv_nsec) / 1000);
		pthread_mutex_unlock(&c->lock);
	}
	return 0;
}

/* After a (re)connect: a new lease, the alive key, everything published,
 * and whatever of this node is in etcd but no longer here deleted. */
static int connect_pass(struct cluster *c, struct etcd *e, struct nerr *err)
{
	_cleanup_free_ char *alive = node_record(c, false);
	char key[512], pre[512];
	struct etcd_kv *kvs = NULL;
	size_t n = 0;
	int64_t lease, rev;
	int r;

	r = etcd_lease_grant(e, c->ttl_s, &lease, err);
	if (r < 0)
		return r;
	cluster_key(c, key, sizeof(key), "alive");
	r = etcd_put(e, key, alive ? alive : "{}", alive ? strlen(alive) : 2, lease, NULL, err);
	if (r < 0)
		return r;
	/* forget what was published: all of it again, in one pass */
	size_t pos;
	struct pubrec *p;
	while ((pos = 0, p = hmap_next(&c->pubs, &pos))) {
		hmap_del(&c->pubs, hmap_hash_str(p->key), p->key, pub_eq);
		free(p->val);
		free(p);
	}
	r = publish_pass(c, e, true, err);
	if (r < 0)
		return r;
	for (size_t k = 0; k < ARRAY_SIZE(colls); k++) {
		snprintf(pre, sizeof(pre), "%s/nodes/%s/%s/", c->prefix, c->node, colls[k]);
		r = etcd_list(e, pre, &kvs, &n, &rev, err);
		if (r < 0)
			return r;
		for (size_t i = 0; i < n && r >= 0; i++) {
			const char *rest = kvs[i].key + strlen(c->prefix) + strlen("/nodes/") +
					   strlen(c->node) + 1;
			if (!hmap_get(&c->pubs, hmap_hash_str(rest), rest, pub_eq))
				r = etcd_delete(e, kvs[i].key, err);
		}
		etcd_kvs_free(kvs, n);
		if (r < 0)
			return r;
	}
	pthread_mutex_lock(&c->lock);
	c->lease = lease;
	c->lease_ttl = c->ttl_s;
	clock_gettime(CLOCK_MONOTONIC, &c->lease_at);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* ---- remote commands: the target ---- */

static const char *taken_path(struct cluster *c, char *buf, size_t len)
{
	snprintf(buf, len, "%s/cluster-taken", c->b->cfg->state_dir);
	return buf;
}

/* Was command key taken here before (a crash between taking and
 * answering)? The record of taken ids is appended and synced before a
 * command runs: a command runs at most once. */
static bool taken_before(struct cluster *c, const char *key)
{
	char path[4200], line[600];
	FILE *fp = fopen(taken_path(c, path, sizeof(path)), "re");
	bool found = false;

	if (!fp)
		return false;
	while (!found && fgets(line, sizeof(line), fp)) {
		line[strcspn(line, "\n")] = '\0';
		found = strcmp(line, key) == 0;
	}
	fclose(fp);
	return found;
}

static int mark_taken(struct cluster *c, const char *key)
{
	char path[4200];
	int fd = open(taken_path(c, path, sizeof(path)), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	int r = 0;

	if (fd < 0)
		return -errno;
	if (dprintf(fd, "%s\n", key) < 0 || fsync(fd) < 0)
		r = -errno;
	close(fd);
	return r;
}

void cluster_inbox_seen_locked(struct cluster *c, const char *key, const char *val, size_t vlen,
			       int64_t mod_rev)
{
	char mine[512];
	json_t *j;
	const char *st;

	snprintf(mine, sizeof(mine), "nodes/%s/inbox/", c->node);
	if (strncmp(key, mine, strlen(mine)) == 0) {
		j = json_loadb(val, vlen, 0, NULL);
		st = json_string_value(json_object_get(j, "state"));
		if (st && strcmp(st, "new") == 0) {
			struct cluster_job *jb = calloc(1, sizeof(*jb));
			if (jb && (jb->val = strndup(val, vlen))) {
				snprintf(jb->key, sizeof(jb->key), "%s/%s", c->prefix, key);
				jb->mod_rev = mod_rev;
				jb->c = c;
				*c->jobs_tail = jb;
				c->jobs_tail = &jb->next;
				cluster_wake_locked(c);
			} else
				free(jb);
		}
		json_decref(j);
	}
	/* an answer to a command written here? */
	const char *id = strrchr(key, '/');
	for (struct cluster_rcmd **pp = &c->rcmds; id && *pp; pp = &(*pp)->next) {
		struct cluster_rcmd *rc = *pp;
		if (strcmp(rc->id, id + 1) != 0 || strcmp(rc->key + strlen(c->prefix) + 1, key) != 0)
			continue;
		j = json_loadb(val, vlen, 0, NULL);
		st = json_string_value(json_object_get(j, "state"));
		if (st && strcmp(st, "done") == 0) {
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
			cluster_wake_locked(c);
			free(rc->record);
			free(rc);
			json_decref(j);
			/* completing may run the writer's next line: not under our lock */
			pthread_mutex_unlock(&c->lock);
			breq_complete(rq, e > 0 ? -e : 0);
			pthread_mutex_lock(&c->lock);
			return;
		}
		json_decref(j);
		break;
	}
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
	cluster_wake_locked(c);
	pthread_mutex_unlock(&c->lock);
}

/* Run a taken command as a local write of its line to its ctl. */
static void job_run(struct cluster *c, struct cluster_job *jb, json_t *rec)
{
	const char *path = json_string_value(json_object_get(rec, "path"));
	const char *line = json_string_value(json_object_get(rec, "line"));
	const char *from = json_string_value(json_object_get(rec, "from"));
	char coll[65] = "", obj[65] = "";
	struct bnode *dir = NULL, *n = NULL;
	const struct battr *a;
	int r;

	jb->rq.done = job_done;
	jb->rq.uid = 0;
	jb->rq.gid = 0;
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
	log_msg(LOG_LVL_INFO, "cluster: remote command from %s to %s: %s", from ? from : "?", path, line);
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

static void answer(struct cluster *c, struct etcd *e, struct cluster_job *jb, json_t *rec,
		   int result, const char *msg)
{
	struct nerr err = { 0 };

	json_object_set_new(rec, "state", json_string("done"));
	json_object_set_new(rec, "errno", json_integer(result < 0 ? -result : 0));
	json_object_set_new(rec, "error", json_string(msg ? msg : ""));
	json_object_set_new(rec, "reply", json_stringn(jb->rq.reply.buf ? jb->rq.reply.buf : "",
						       jb->rq.reply.len));
	_cleanup_free_ char *s = json_dumps(rec, JSON_COMPACT);
	if (s && etcd_put(e, jb->key, s, strlen(s), 0, NULL, &err) < 0)
		log_msg(LOG_LVL_WARN, "cluster: cannot answer %s: %s", jb->key, err.msg);
}

static void take_jobs(struct cluster *c, struct etcd *e)
{
	struct cluster_job *jb, *done;

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
		json_t *rec = json_loads(jb->val, 0, NULL);
		struct nerr err = { 0 };
		bool run = false;

		if (!rec) {
			rec = json_object();
			answer(c, e, jb, rec, -EINVAL, "malformed command record");
		} else if (!c->accept_remote) {
			char m[160];
			snprintf(m, sizeof(m), "node %s refuses remote commands (accept_remote = no)",
				 c->node);
			answer(c, e, jb, rec, -EPERM, m);
			pthread_mutex_lock(&c->lock);
			c->remote_refused++;
			pthread_mutex_unlock(&c->lock);
		} else if (taken_before(c, jb->key)) {
			answer(c, e, jb, rec, -EIO, "the node restarted after taking this command: "
			       "it ran at most once, its outcome is in the node's operations");
		} else {
			json_object_set_new(rec, "state", json_string("taken"));
			_cleanup_free_ char *s = json_dumps(rec, JSON_COMPACT);
			int r = s ? etcd_put_if(e, jb->key, s, strlen(s), jb->mod_rev, &err) : -ENOMEM;
			if (r == 0 && mark_taken(c, jb->key) == 0)
				run = true;
			else if (r == 0)
				answer(c, e, jb, rec, -EIO, "cannot record the command as taken");
		}
		if (run) {
			pthread_mutex_lock(&c->lock);
			c->remote_run++;
			pthread_mutex_unlock(&c->lock);
			jb->val = (free(jb->val), json_dumps(rec, JSON_COMPACT));
			job_run(c, jb, rec);	/* job_done queues it to c->done */
		} else {
			sbuf_free(&jb->rq.reply);
			free(jb->val);
			free(jb);
		}
		json_decref(rec);
		jb = next;
	}
	while (done) {
		struct cluster_job *next = done->next;
		json_t *rec = json_loads(done->val, 0, NULL);

		if (rec)
			answer(c, e, done, rec, done->result, done->msg);
		json_decref(rec);
		sbuf_free(&done->rq.reply);
		free(done->val);
		free(done);
		done = next;
	}
}

/* ---- remote commands: the writer ---- */

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
	snprintf(rc->id, sizeof(rc->id), "%s-%llx-%" PRIu64, c->node, (unsigned long long)c->started,
		 ++c->seq);
	snprintf(rc->key, sizeof(rc->key), "%s/nodes/%s/inbox/%s", c->prefix, node, rc->id);
	j = json_pack("{s:s,s:s,s:s%,s:s,s:I}", "from", c->node, "path", path, "line", line, len,
		      "state", "new", "written", (json_int_t)time(NULL));
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
	cluster_wake_locked(c);
	pthread_mutex_unlock(&c->lock);
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

static bool ts_past(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

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
		bool nonblock = rc->rq->nonblock;
		pthread_mutex_unlock(&c->lock);
		int r = etcd_create(e, key, rec, strlen(rec), 0, &err);
		pthread_mutex_lock(&c->lock);
		if (r < 0)
			rcmd_fail_locked(c, rc, r == -ETIMEDOUT || r == -EHOSTUNREACH ? r : -EIO, err.msg);
		else if (nonblock) {
			sbuf_printf(&rc->rq->reply, "%s\n", rc->id);
			rcmd_fail_locked(c, rc, 0, "");
		}
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

/* ---- the publisher thread ---- */

static void refresh_members(struct cluster *c, struct etcd *e)
{
	struct etcd_member_status ms[CLUSTER_MAX_ENDPOINTS];
	size_t n = etcd_nendpoints(e);

	if (n > CLUSTER_MAX_ENDPOINTS)
		n = CLUSTER_MAX_ENDPOINTS;
	for (size_t i = 0; i < n; i++)
		etcd_status(e, i, &ms[i]);
	pthread_mutex_lock(&c->lock);
	memcpy(c->ms, ms, n * sizeof(ms[0]));
	c->nms = n;
	for (size_t i = 0; i < n; i++)
		if (ms[i].ok && ms[i].revision > c->rev_store)
			c->rev_store = ms[i].revision;
	pthread_mutex_unlock(&c->lock);
}

static void *pub_main(void *arg)
{
	struct cluster *c = arg;
	struct etcd_tls tls = { c->ca, c->cert, c->key };
	struct etcd *e = NULL, *es = NULL;
	struct nerr err = { 0 };
	uint64_t last_ka = 0, last_status = 0, backoff = 0;
	bool up = false;

	pthread_setname_np(pthread_self(), "nodefs-cluster");
	if (etcd_new(c->endpoints, &tls, TIMEOUT_MS, &e, &err) < 0 ||
	    etcd_new(c->endpoints, &tls, 300, &es, &err) < 0) {
		set_state(c, false, err.msg);
		etcd_free(e);
		return NULL;
	}
	for (;;) {
		uint64_t now = loop_now_ms();
		int r = 0;

		pthread_mutex_lock(&c->lock);
		if (c->stopping) {
			pthread_mutex_unlock(&c->lock);
			break;
		}
		pthread_mutex_unlock(&c->lock);
		if (now - last_status >= 1000) {
			refresh_members(c, es);
			last_status = now;
		}
		nerr_clear(&err);
		if (!up) {
			if (now >= backoff) {
				r = connect_pass(c, e, &err);
				if (r == 0) {
					up = true;
					last_ka = now;
					set_state(c, true, NULL);
				} else {
					set_state(c, false, err.msg);
					backoff = now + 500;
				}
			}
		} else {
			if (now - last_ka >= (uint64_t)c->ttl_s * 1000 / 4) {
				long ttl = 0;
				r = etcd_lease_keepalive(e, c->lease, &ttl, &err);
				if (r == 0) {
					last_ka = now;
					pthread_mutex_lock(&c->lock);
					c->lease_ttl = ttl;
					clock_gettime(CLOCK_MONOTONIC, &c->lease_at);
					pthread_mutex_unlock(&c->lock);
				}
			}
			/* answers first: a destroy's answer goes out before the
			 * deletion of the object it removed */
			if (r == 0)
				take_jobs(c, e);
			if (r == 0)
				r = publish_pass(c, e, false, &err);
			if (r < 0) {
				up = false;
				set_state(c, false, err.msg);
				backoff = now + 200;
			}
		}
		send_rcmds(c, e);

		struct timespec t = ts_after_ms(CLOCK_MONOTONIC, SCAN_MS);
		pthread_mutex_lock(&c->lock);
		if (!c->stopping && !c->jobs && !c->done)
			pthread_cond_timedwait(&c->cond, &c->lock, &t);
		pthread_mutex_unlock(&c->lock);
	}
	etcd_free(e);
	etcd_free(es);
	return NULL;
}

static int cluster_start(struct backend *b, struct nerr *err)
{
	struct cluster *c = b->cluster;
	int r;

	if (!c)
		return 0;
	r = pthread_create(&c->pub_thread, NULL, pub_main, c);
	if (r)
		return nerr_set(err, r, "cannot start the cluster thread: %s", strerror(r));
	r = pthread_create(&c->watch_thread, NULL, cluster_watch_main, c);
	if (r) {
		pthread_mutex_lock(&c->lock);
		c->stopping = true;
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
		pthread_join(c->pub_thread, NULL);
		return nerr_set(err, r, "cannot start the cluster thread: %s", strerror(r));
	}
	c->threads = true;
	return 0;
}

static void cluster_quiesce(struct backend *b)
{
	struct cluster *c = b->cluster;

	if (!c || !c->threads)
		return;
	pthread_mutex_lock(&c->lock);
	c->stopping = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->pub_thread, NULL);
	pthread_join(c->watch_thread, NULL);
	c->threads = false;
	/* commands still waiting for an answer end now */
	pthread_mutex_lock(&c->lock);
	while (c->rcmds)
		rcmd_fail_locked(c, c->rcmds, -ESHUTDOWN, "nodefs is stopping");
	pthread_mutex_unlock(&c->lock);
}

static void cluster_stop(struct backend *b)
{
	struct cluster *c = b->cluster;
	size_t pos;
	struct pubrec *p;
	struct centry *ce;

	if (!c)
		return;
	cluster_quiesce(b);
	for (pos = 0; (p = hmap_next(&c->pubs, &pos));) {
		free(p->val);
		free(p);
	}
	hmap_free(&c->pubs);
	pthread_mutex_lock(&c->lock);
	for (pos = 0; (ce = hmap_next(&c->cache, &pos));) {
		free(ce->key);
		free(ce->val);
		free(ce);
	}
	hmap_free(&c->cache);
	while (c->jobs) {
		struct cluster_job *n = c->jobs->next;
		free(c->jobs->val);
		free(c->jobs);
		c->jobs = n;
	}
	while (c->done) {
		struct cluster_job *n = c->done->next;
		sbuf_free(&c->done->rq.reply);
		free(c->done->val);
		free(c->done);
		c->done = n;
	}
	for (size_t i = 0; i < c->ndeletes; i++)
		free(c->deletes[i]);
	free(c->deletes);
	pthread_mutex_unlock(&c->lock);
	free(c->endpoints);
	free(c->node);
	free(c->prefix);
	free(c->ca);
	free(c->cert);
	free(c->key);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c);
	b->cluster = NULL;
}

static int cluster_metrics(struct backend *b, struct sbuf *out)
{
	struct cluster *c = b->cluster;

	if (!c)
		return 0;
	pthread_mutex_lock(&c->lock);
	int64_t lag = c->rev_store > c->rev_seen ? c->rev_store - c->rev_seen : 0;
	sbuf_printf(out,
		    "# HELP nodefs_cluster_connected 1 when etcd answers this node.\n"
		    "# TYPE nodefs_cluster_connected gauge\n"
		    "nodefs_cluster_connected %d\n"
		    "# HELP nodefs_cluster_publish_seconds Time of the publish passes that wrote.\n"
		    "# TYPE nodefs_cluster_publish_seconds summary\n"
		    "nodefs_cluster_publish_seconds_sum %.6f\n"
		    "nodefs_cluster_publish_seconds_count %" PRIu64 "\n"
		    "# HELP nodefs_cluster_watch_lag_revisions Revisions the watch is behind.\n"
		    "# TYPE nodefs_cluster_watch_lag_revisions gauge\n"
		    "nodefs_cluster_watch_lag_revisions %" PRId64 "\n"
		    "# HELP nodefs_cluster_remote_commands_total Remote commands, by result.\n"
		    "# TYPE nodefs_cluster_remote_commands_total counter\n"
		    "nodefs_cluster_remote_commands_total{side=\"writer\",result=\"ok\"} %" PRIu64 "\n"
		    "nodefs_cluster_remote_commands_total{side=\"writer\",result=\"error\"} %" PRIu64 "\n"
		    "nodefs_cluster_remote_commands_total{side=\"target\",result=\"run\"} %" PRIu64 "\n"
		    "nodefs_cluster_remote_commands_total{side=\"target\",result=\"refused\"} %" PRIu64 "\n",
		    c->connected ? 1 : 0, (double)c->publish_us / 1e6, c->publishes, lag,
		    c->remote_ok, c->remote_err, c->remote_run, c->remote_refused);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

const struct kind_ops cluster_kind = {
	.name = "cluster",
	.type = NULL,	/* its directory is made by init, with [cluster] only */
	.dir = offsetof(struct backend, cluster_dir),
	.init = cluster_init,
	.start = cluster_start,
	.render_metrics = cluster_metrics,
	.quiesce = cluster_quiesce,
	.stop = cluster_stop,
};
