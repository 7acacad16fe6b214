/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cluster: this node in a fleet through etcd (nodefs(5) [cluster]). Owns
 * the [cluster] keys, the node's lease and its keep-alive, publishing the
 * node's volumes and containers under PREFIX/nodes/NODE/ (woken by the
 * tree's watcher on each change; a pass writes what changed since the last
 * in one transaction, so a burst costs one write per etcd round trip), the
 * full re-publish after a reconnect, the members' status, and the threads
 * that run cluster-remote.c (remote commands) and cluster-view.c (the
 * watch and the cluster/ tree).
 *
 * Key layout below PREFIX (docs/design.md):
 *   summary/NODE/alive          {version, boot_id, started} on the lease
 *   summary/NODE/info           the same, `updated`, the counts of volumes
 *                               and containers, `resources` (resources.json)
 *   nodes/NODE/volumes/NAME     {"state": TEXT, "info": OBJECT}
 *   nodes/NODE/containers/NAME  same
 *   nodes/NODE/inbox/ID         {"from", "path", "line", "state": new|done,
 *                                "errno", "error", "reply"}: commands to
 *                               NODE, and the answers to NODE's own
 * Every node watches summary/ and its own inbox; another node's objects
 * only while someone reads them (cluster-view.c).
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
#include <sys/random.h>
#include <unistd.h>

#include "cluster-internal.h"
#include "jw.h"
#include "kind.h"
#include "links.h"
#include "log.h"
#include "macro.h"
#include "nodefs-config.h"
#include "units.h"
#include "valid.h"

#define TIMEOUT_MS 1000		/* each etcd call */

struct pubrec {
	char key[160];		/* "volumes/NAME" */
	uint64_t version, serial;
	char *val;
	bool seen;
	bool pending;		/* in the transaction being made */
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

/* ---- config ---- */

static const char *const cluster_keys[] = {
	"etcd", "node", "prefix", "lease_ttl", "accept_remote", "ca", "cert", "key", "detail_idle",
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
	ms = 60000;
	v = config_section_get(s, "detail_idle");
	if (v && parse_duration_ms(v, &ms, err) < 0)
		return nerr_set(err, EINVAL, "[cluster]: detail_idle: %s", err->msg);
	if (ms < 100 || ms > 86400000)
		return nerr_set(err, EINVAL, "[cluster]: detail_idle must be 100ms to 24h");
	c->detail_idle_ms = ms;
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
	*cluster_slot(b) = c;
	c->b = b;
	c->started = time(NULL);
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &ca);
	pthread_cond_init(&c->detail_cond, &ca);
	pthread_condattr_destroy(&ca);
	cwake_init(&c->pub_wake);
	cwake_init(&c->remote_wake);
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
	uint64_t tok = 0;
	if (getrandom(&tok, sizeof(tok), GRND_NONBLOCK) != sizeof(tok))
		tok = (uint64_t)time(NULL) << 20 ^ (uint64_t)getpid();
	snprintf(c->token, sizeof(c->token), "%016" PRIx64, tok);
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

static void summary_key(const struct cluster *c, char *buf, size_t len, const char *rest)
{
	snprintf(buf, len, "%s/summary/%s/%s", c->prefix, c->node, rest);
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

/* Copy the JSON text in (len bytes, valid JSON) into out without the
 * whitespace outside its strings. */
static void json_compact_into(const char *in, size_t len, struct sbuf *out)
{
	bool str = false, esc = false;

	for (size_t i = 0; i < len; i++) {
		char ch = in[i];

		if (str) {
			if (esc)
				esc = false;
			else if (ch == '\\')
				esc = true;
			else if (ch == '"')
				str = false;
		} else if (ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r')
			continue;
		else if (ch == '"')
			str = true;
		sbuf_addc(out, ch);
	}
}

static size_t count_of(struct cluster *c, const char *coll)
{
	struct bnode *d = bnode_lookup(c->b->root, coll);
	size_t n = d ? bnode_count(d) : 0;

	bnode_unref(d);
	return n;
}

/* The node's alive record ({version, boot_id, started}) or, summary, its
 * info record: the same, the counts, the resources, and `updated` when
 * updated is not 0. Malloc'd, NULL on OOM. */
static char *node_record(struct cluster *c, bool summary, time_t updated)
{
	struct sbuf out = SBUF_INIT(1u << 20), res = SBUF_INIT(1u << 20);
	struct jw w;

	jw_init(&w, &out, 0);
	jw_obj(&w);
	jw_kstr(&w, "version", NODEFS_VERSION);
	jw_kstr(&w, "boot_id", c->boot_id);
	jw_kint(&w, "started", (long long)c->started);
	if (summary) {
		const struct backend_links *l = c->b->links;

		if (updated)
			jw_kint(&w, "updated", (long long)updated);
		jw_kint(&w, "volumes", (long long)count_of(c, "volumes"));
		jw_kint(&w, "containers", (long long)count_of(c, "containers"));
		if (l && l->resources_show && l->resources_show(c->b, &res, 2) >= 0 && res.len) {
			jw_key(&w, "resources");
			jw_raw(&w, res.buf, res.len);
		}
	}
	jw_obj_end(&w);
	sbuf_free(&res);
	if (jw_end(&w) < 0) {
		sbuf_free(&out);
		return NULL;
	}
	return out.buf;	/* NUL-terminated by sbuf */
}

/* The record of object n: its state and info.json as its files show them. */
static char *object_record(struct bnode *n)
{
	const struct battr *st = bnode_attr(n, "state", NULL), *in = bnode_attr(n, "info.json", NULL);
	struct sbuf a, i, out = SBUF_INIT(1u << 22), info = SBUF_INIT(1u << 22);
	struct jw w;

	sbuf_init(&a, 256);
	sbuf_init(&i, 1024);
	if (in && in->show && in->show(n, &i) >= 0 && i.len)
		json_compact_into(i.buf, i.len, &info);
	jw_init(&w, &out, 0);
	jw_obj(&w);
	jw_key(&w, "info");
	if (info.len)
		jw_raw(&w, info.buf, info.len);
	else
		jw_raw(&w, "{}", 2);
	if (st && st->show && st->show(n, &a) >= 0)
		jw_kstr(&w, "state", a.buf ? a.buf : "");
	jw_obj_end(&w);
	sbuf_free(&a);
	sbuf_free(&i);
	sbuf_free(&info);
	if (jw_end(&w) < 0) {
		sbuf_free(&out);
		return NULL;
	}
	return out.buf;
}

static const char *const colls[] = { "volumes", "containers" };

/* What one transaction writes: object records to put or delete, and the
 * node's info; applied to c->pubs only once etcd has committed it. */
#define BATCH_BYTES (1u << 20)	/* under etcd's 1.5 MiB request limit */
struct pend {
	struct pubrec *p;
	char key[512];
	char *val;		/* NULL: delete */
	uint64_t version, serial;
};
struct batch {
	struct pend v[ETCD_TXN_MAX - 1];	/* and the info put */
	size_t n, bytes;
};

static int batch_flush(struct cluster *c, struct etcd *e, struct batch *bt, struct nerr *err)
{
	struct etcd_op ops[ETCD_TXN_MAX];
	size_t n = 0;
	int r;

	if (!bt->n)
		return 0;
	for (size_t i = 0; i < bt->n; i++)
		ops[n++] = (struct etcd_op){ .del = !bt->v[i].val, .key = bt->v[i].key,
					     .val = bt->v[i].val,
					     .vlen = bt->v[i].val ? strlen(bt->v[i].val) : 0 };
	/* the summary is not in it: every node watches the summaries, and a
	 * record there per object change would fan each out to all of them
	 * (publish_summary writes it, at most every SUMMARY_MIN_MS) */
	r = etcd_txn(e, ops, n, NULL, err);
	for (size_t i = 0; i < bt->n; i++) {
		struct pend *x = &bt->v[i];
		struct pubrec *p = x->p;

		if (r < 0) {
			free(x->val);
			p->pending = false;
			continue;
		}
		if (x->val) {
			free(p->val);
			p->val = x->val;
			p->version = x->version;
			p->serial = x->serial;
		} else {
			hmap_del(&c->pubs, hmap_hash_str(p->key), p->key, pub_eq);
			free(p->val);
			free(p);
		}
	}
	bt->n = bt->bytes = 0;
	if (r == 0) {
		pthread_mutex_lock(&c->lock);
		c->publish_writes++;
		pthread_mutex_unlock(&c->lock);
	}
	return r;
}

/* Add a put (val owned) or a delete (val NULL) of p to bt, flushing bt
 * first when it is full. */
static int batch_add(struct cluster *c, struct etcd *e, struct batch *bt, struct pubrec *p,
		     char *val, uint64_t version, uint64_t serial, struct nerr *err)
{
	size_t len = val ? strlen(val) : 0;
	int r = 0;

	if (bt->n == ARRAY_SIZE(bt->v) || (bt->n && bt->bytes + len > BATCH_BYTES))
		r = batch_flush(c, e, bt, err);
	if (r < 0) {
		free(val);
		return r;
	}
	struct pend *x = &bt->v[bt->n++];
	x->p = p;
	cluster_key(c, x->key, sizeof(x->key), p->key);
	x->val = val;
	x->version = version;
	x->serial = serial;
	bt->bytes += len + strlen(x->key);
	p->pending = true;
	return 0;
}

/* The summary (summary/NODE/info: the counts, the resources) when it
 * changed (a volume made, a container's limits, a profile's capacity), at
 * most once every SUMMARY_MIN_MS, or SUMMARY_PER_NODE_MS times the number
 * of nodes when that is longer: every node watches every summary, so N
 * nodes writing theirs every T send N * N / T events; with T growing as N
 * each node receives at most 1000 / SUMMARY_PER_NODE_MS (5) summaries a
 * second, whatever the fleet's size, and etcd sends 5 * N. (At 20 a
 * second, 50 ms, etcd's 2,000 summary events a second at 100 nodes were
 * what set visibility's tail: bench/cluster-scale, docs/design.md.) A
 * change held back sets c->summary_due for the publisher's sleep. */
#define SUMMARY_MIN_MS 5000
#define SUMMARY_PER_NODE_MS 200
static int publish_summary(struct cluster *c, struct etcd *e, struct nerr *err)
{
	_cleanup_free_ char *now = node_record(c, true, 0);
	uint64_t t = loop_now_ms(), every = SUMMARY_MIN_MS;
	size_t nodes = bnode_count(c->nodes);
	int r;

	if (nodes * SUMMARY_PER_NODE_MS > every)
		every = nodes * SUMMARY_PER_NODE_MS;
	c->summary_due = 0;
	if (!now || (c->pub_summary && strcmp(now, c->pub_summary) == 0))
		return 0;
	if (c->pub_summary && t < c->summary_at + every) {
		c->summary_due = c->summary_at + every;
		return 0;
	}
	_cleanup_free_ char *info = node_record(c, true, time(NULL));
	char ik[512];
	summary_key(c, ik, sizeof(ik), "info");
	r = info ? etcd_put(e, ik, info, strlen(info), 0, NULL, err) : 0;
	if (r < 0)
		return r;
	free(c->pub_summary);
	c->pub_summary = TAKE_PTR(now);
	c->summary_at = t;
	pthread_mutex_lock(&c->lock);
	c->publish_writes++;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* One pass over the objects: publish what changed and delete what went,
 * in as few transactions as fit (one, up to 127 records or 1 MiB), with
 * the node's info in each. full: every object, whatever its counter says.
 * Changes made while a pass writes are the next pass's: a burst costs one
 * transaction per etcd round trip, not one write per change. */
static int publish_pass(struct cluster *c, struct etcd *e, bool full, struct nerr *err)
{
	int r = 0;
	size_t pos;
	struct pubrec *p;
	struct batch *bt = calloc(1, sizeof(*bt));
	uint64_t writes0 = c->publish_writes;
	struct timespec t0, t1;

	if (!bt)
		return nerr_set(err, ENOMEM, "out of memory");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (pos = 0; (p = hmap_next(&c->pubs, &pos));)
		p->seen = p->pending = false;
	for (size_t k = 0; k < ARRAY_SIZE(colls) && r >= 0; k++) {
		struct bnode *dir = bnode_lookup(c->b->root, colls[k]), **v = NULL;
		size_t n = 0;

		if (!dir)
			continue;
		if (bnode_list(dir, &v, &n) < 0) {
			bnode_unref(dir);
			r = nerr_set(err, ENOMEM, "out of memory");
			break;
		}
		for (size_t i = 0; i < n && r >= 0; i++) {
			char pk[160];
			uint64_t ver = atomic_load(&v[i]->version);

			snprintf(pk, sizeof(pk), "%s/%s", colls[k], v[i]->name);
			p = hmap_get(&c->pubs, hmap_hash_str(pk), pk, pub_eq);
			if (p && !full && p->version == ver && p->serial == v[i]->serial) {
				p->seen = true;
				continue;
			}
			char *rec = object_record(v[i]);
			if (!rec)
				continue;
			if (!p) {
				p = calloc(1, sizeof(*p));
				if (!p || hmap_put(&c->pubs, hmap_hash_str(pk), p) < 0) {
					free(p);
					free(rec);
					r = nerr_set(err, ENOMEM, "out of memory");
					break;
				}
				snprintf(p->key, sizeof(p->key), "%s", pk);
			}
			p->seen = true;
			if (!full && p->val && strcmp(p->val, rec) == 0) {
				free(rec);
				p->version = ver;
				p->serial = v[i]->serial;
				continue;
			}
			r = batch_add(c, e, bt, p, rec, ver, v[i]->serial, err);
		}
		bnode_list_free(v, n);
		bnode_unref(dir);
	}
	/* gone since the last pass (a flush may move the table: start over);
	 * not while a remote command runs here: its answer (a destroy's)
	 * goes out before the deletion of what it removed */
	pthread_mutex_lock(&c->lock);
	bool hold = c->jobs_running || c->adopted;
	pthread_mutex_unlock(&c->lock);
	for (pos = 0; r >= 0 && !hold && (p = hmap_next(&c->pubs, &pos));) {
		if (p->seen || p->pending)
			continue;
		size_t before = bt->n;
		r = batch_add(c, e, bt, p, NULL, 0, 0, err);
		if (bt->n <= before)
			pos = 0;
	}
	if (r >= 0)
		r = batch_flush(c, e, bt, err);
	if (r >= 0)
		r = publish_summary(c, e, err);
	else {
		for (size_t i = 0; i < bt->n; i++)
			free(bt->v[i].val);
	}
	free(bt);
	if (r < 0)
		return r;
	if (c->publish_writes != writes0) {
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
	_cleanup_free_ char *alive = node_record(c, false, 0);
	char key[512], pre[512];
	struct etcd_kv *kvs = NULL;
	size_t n = 0;
	int64_t lease, rev;
	int r;

	r = etcd_lease_grant(e, c->ttl_s, &lease, err);
	if (r < 0)
		return r;
	summary_key(c, key, sizeof(key), "alive");
	r = etcd_put(e, key, alive ? alive : "{}", alive ? strlen(alive) : 2, lease, NULL, err);
	if (r < 0)
		return r;
	/* forget what was published: all of it again, in one pass */
	free(c->pub_summary);
	c->pub_summary = NULL;
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

/* ---- the threads ---- */

void cwake_init(struct cwake *w)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	w->set = false;
}

void cwake_destroy(struct cwake *w)
{
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
}

void cwake_set(struct cwake *w)
{
	pthread_mutex_lock(&w->lock);
	w->set = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

void cwake_clear(struct cwake *w)
{
	pthread_mutex_lock(&w->lock);
	w->set = false;
	pthread_mutex_unlock(&w->lock);
}

void cwake_wait(struct cwake *w, uint64_t ms)
{
	struct timespec t = ts_after_ms(CLOCK_MONOTONIC, ms);

	pthread_mutex_lock(&w->lock);
	while (!w->set && ms)
		if (pthread_cond_timedwait(&w->cond, &w->lock, &t) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&w->lock);
}

void cluster_wake(struct cluster *c)
{
	cwake_set(&c->pub_wake);
}

void cluster_wake_remote(struct cluster *c)
{
	cwake_set(&c->remote_wake);
}

/* The tree's watcher: a change of a volume or container, or of the set of
 * them, wakes the publisher (under the tree's change lock: only the leaf
 * wake lock is taken). */
static void on_tree_change(void *ctx, struct bnode *n)
{
	const char *t = n->type ? n->type->name : NULL;

	if (t && (strcmp(t, "volume") == 0 || strcmp(t, "container") == 0 ||
		  strcmp(t, "volumes") == 0 || strcmp(t, "containers") == 0))
		cluster_wake(ctx);
}

bool cluster_stopping(struct cluster *c)
{
	pthread_mutex_lock(&c->lock);
	bool s = c->stopping;
	pthread_mutex_unlock(&c->lock);
	return s;
}

void cluster_prefer_leader(struct cluster *c, struct etcd *e)
{
	pthread_mutex_lock(&c->lock);
	size_t l = c->leader_ep;
	pthread_mutex_unlock(&c->lock);
	if (l)
		etcd_prefer(e, l - 1);
}

/* The members' health, leader and revision for cluster/status, once a
 * second (longer in a large fleet) on a thread of its own: an unreachable
 * member costs its timeout here, never the publisher's time. */
#define STATUS_MIN_MS 1000
#define STATUS_PER_NODE_MS 50
static void *status_main(void *arg)
{
	struct cluster *c = arg;
	struct etcd_tls tls = { c->ca, c->cert, c->key };
	struct etcd *e = NULL;
	struct nerr err = { 0 };

	pthread_setname_np(pthread_self(), "nodefs-cstatus");
	if (etcd_new(c->endpoints, &tls, 300, &e, &err) < 0)
		return NULL;
	for (unsigned round = 0; !cluster_stopping(c); round++) {
		struct etcd_member_status ms[CLUSTER_MAX_ENDPOINTS];
		bool look[CLUSTER_MAX_ENDPOINTS];
		size_t n = etcd_nendpoints(e);

		if (n > CLUSTER_MAX_ENDPOINTS)
			n = CLUSTER_MAX_ENDPOINTS;
		/* the leader (every thread talks to it) and any member found
		 * bad each second, the others every third: each is a request
		 * every node makes of etcd however idle, the first thing that
		 * costs at a thousand nodes (docs/design.md) */
		pthread_mutex_lock(&c->lock);
		for (size_t i = 0; i < n; i++) {
			look[i] = round % 3 == 0 || !c->leader_ep || c->leader_ep - 1 == i ||
				  i >= c->nms || !c->ms[i].ok;
			ms[i] = i < c->nms ? c->ms[i] : (struct etcd_member_status){ 0 };
		}
		pthread_mutex_unlock(&c->lock);
		for (size_t i = 0; i < n; i++)
			if (look[i])
				etcd_status(e, i, &ms[i]);
		pthread_mutex_lock(&c->lock);
		memcpy(c->ms, ms, n * sizeof(ms[0]));
		c->nms = n;
		for (size_t i = 0; i < n; i++)
			if (look[i])
				c->ms_bad[i] = ms[i].ok ? 0 : c->ms_bad[i] + 1;
		for (size_t i = 0; i < n; i++)
			if (ms[i].ok && ms[i].revision > c->rev_store)
				c->rev_store = ms[i].revision;
		c->leader_ep = 0;
		for (size_t i = 0; i < n; i++)
			if (ms[i].ok && ms[i].member && ms[i].member == ms[i].leader)
				c->leader_ep = i + 1;
		cluster_view_live_locked(c);
		/* once a second, or STATUS_PER_NODE_MS times the number of
		 * nodes when that is longer: every node's looks reach etcd,
		 * whose gateway spends about a millisecond of CPU on each, so
		 * a fleet's looks stay about 1000 / STATUS_PER_NODE_MS a
		 * second at the leader whatever its size; a member found bad
		 * is looked at each second (bench/cluster-scale at 100 nodes,
		 * before anything is written: etcd's members at 0.26 to 0.31
		 * cores with 20 ms, 0.19 to 0.22 with 50 ms and the keep-alives
		 * every TTL/3, which a lease lost to an election made TTL/4
		 * again) */
		uint64_t every = STATUS_MIN_MS, nodes = bnode_count(c->nodes);
		bool bad = false;
		for (size_t i = 0; i < n; i++)
			bad |= !ms[i].ok;
		if (!bad && nodes * STATUS_PER_NODE_MS > every)
			every = nodes * STATUS_PER_NODE_MS;
		struct timespec t = ts_after_ms(CLOCK_MONOTONIC, every);
		if (!c->stopping)
			pthread_cond_timedwait(&c->cond, &c->lock, &t);
		pthread_mutex_unlock(&c->lock);
	}
	etcd_free(e);
	return NULL;
}

/* The publisher: the lease and its keep-alive, the objects' records. It
 * sleeps until woken (a change of an object) or until the next keep-alive. */
static void *pub_main(void *arg)
{
	struct cluster *c = arg;
	struct etcd_tls tls = { c->ca, c->cert, c->key };
	struct etcd *e = NULL;
	struct nerr err = { 0 };
	/* a keep-alive every TTL/4: one lost to a leader's election (a
	 * request's timeout and the next member) still leaves half the TTL */
	uint64_t last_ka = 0, backoff = 0, ka_every = (uint64_t)c->ttl_s * 1000 / 4;
	bool up = false;

	pthread_setname_np(pthread_self(), "nodefs-cluster");
	if (etcd_new(c->endpoints, &tls, TIMEOUT_MS, &e, &err) < 0) {
		set_state(c, false, err.msg);
		return NULL;
	}
	while (!cluster_stopping(c)) {
		uint64_t now = loop_now_ms(), wait_ms;
		int r = 0;

		cwake_clear(&c->pub_wake);
		nerr_clear(&err);
		cluster_prefer_leader(c, e);
		if (!up && atomic_load(&c->b->state) == BACKEND_RECOVERING) {
			/* publishing before every record is read would delete
			 * the keys of objects not loaded yet */
			backoff = now + 50;
		} else if (!up && now >= backoff) {
			r = connect_pass(c, e, &err);
			if (r == 0) {
				up = true;
				last_ka = now;
				set_state(c, true, NULL);
			} else {
				set_state(c, false, err.msg);
				backoff = now + 500;
			}
		} else if (up && now - last_ka >= ka_every) {
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
		if (up && r == 0)
			r = publish_pass(c, e, false, &err);
		if (up && r < 0) {
			up = false;
			set_state(c, false, err.msg);
			backoff = now + 200;
		}
		now = loop_now_ms();
		if (up)
			wait_ms = last_ka + ka_every > now ? last_ka + ka_every - now : 0;
		else
			wait_ms = backoff > now ? backoff - now : 0;
		/* a summary held back: written when due */
		if (up && c->summary_due && (c->summary_due > now ? c->summary_due - now : 0) < wait_ms)
			wait_ms = c->summary_due > now ? c->summary_due - now : 0;
		cwake_wait(&c->pub_wake, wait_ms);
	}
	etcd_free(e);
	return NULL;
}

static void cluster_halt(struct cluster *c, int nthreads)
{
	pthread_t *th[] = { &c->pub_thread, &c->remote_thread, &c->watch_thread, &c->status_thread,
			    &c->inbox_thread };

	pthread_mutex_lock(&c->lock);
	c->stopping = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	cluster_wake(c);
	cluster_wake_remote(c);
	for (int i = 0; i < nthreads; i++)
		pthread_join(*th[i], NULL);
	cluster_details_stop(c);
}

static int cluster_start(struct backend *b, struct nerr *err)
{
	struct cluster *c = cluster_of(b);
	int r;

	if (!c)
		return 0;
	void *(*mains[])(void *) = { pub_main, cluster_remote_main, cluster_watch_main, status_main,
				     cluster_inbox_watch_main };
	pthread_t *th[] = { &c->pub_thread, &c->remote_thread, &c->watch_thread, &c->status_thread,
			    &c->inbox_thread };

	tree_set_watcher(b->root, on_tree_change, c);
	for (int i = 0; i < (int)ARRAY_SIZE(mains); i++) {
		r = pthread_create(th[i], NULL, mains[i], c);
		if (r) {
			tree_set_watcher(b->root, NULL, NULL);
			cluster_halt(c, i);
			return nerr_set(err, r, "cannot start the cluster threads: %s", strerror(r));
		}
	}
	c->threads = true;
	return 0;
}

static void cluster_quiesce(struct backend *b)
{
	struct cluster *c = cluster_of(b);

	if (!c || !c->threads)
		return;
	tree_set_watcher(b->root, NULL, NULL);
	cluster_halt(c, 5);
	c->threads = false;
	/* commands still waiting for an answer end now */
	cluster_remote_stop(c);
}

static void cluster_stop(struct backend *b)
{
	struct cluster *c = cluster_of(b);
	size_t pos;
	struct pubrec *p;
	struct centry *ce;

	if (!c)
		return;
	cluster_quiesce(b);
	cluster_remote_stop(c);	/* what completed since */
	for (pos = 0; (p = hmap_next(&c->pubs, &pos));) {
		free(p->val);
		free(p);
	}
	hmap_free(&c->pubs);
	free(c->pub_summary);
	pthread_mutex_lock(&c->lock);
	for (pos = 0; (ce = hmap_next(&c->cache, &pos));) {
		free(ce->key);
		free(ce->val);
		free(ce);
	}
	hmap_free(&c->cache);
	pthread_mutex_unlock(&c->lock);
	free(c->endpoints);
	free(c->node);
	free(c->prefix);
	free(c->ca);
	free(c->cert);
	free(c->key);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	pthread_cond_destroy(&c->detail_cond);
	cwake_destroy(&c->pub_wake);
	cwake_destroy(&c->remote_wake);
	free(c);
	*cluster_slot(b) = NULL;
}

static int cluster_metrics(struct backend *b, struct sbuf *out)
{
	struct cluster *c = cluster_of(b);

	if (!c)
		return 0;
	pthread_mutex_lock(&c->lock);
	int64_t lag = c->rev_store > c->rev_seen ? c->rev_store - c->rev_seen : 0;
	size_t ndet = 0;
	for (struct cdetail *d = c->details; d; d = d->next)
		ndet += !d->closing;
	sbuf_printf(out,
		    "# HELP nodefs_cluster_connected 1 when etcd answers this node.\n"
		    "# TYPE nodefs_cluster_connected gauge\n"
		    "nodefs_cluster_connected %d\n"
		    "# HELP nodefs_cluster_publish_seconds Time of the publish passes that wrote.\n"
		    "# TYPE nodefs_cluster_publish_seconds summary\n"
		    "nodefs_cluster_publish_seconds_sum %.6f\n"
		    "nodefs_cluster_publish_seconds_count %" PRIu64 "\n"
		    "# HELP nodefs_cluster_publish_writes_total etcd transactions the publisher wrote.\n"
		    "# TYPE nodefs_cluster_publish_writes_total counter\n"
		    "nodefs_cluster_publish_writes_total %" PRIu64 "\n"
		    "# HELP nodefs_cluster_watch_lag_revisions Revisions the watch is behind.\n"
		    "# TYPE nodefs_cluster_watch_lag_revisions gauge\n"
		    "nodefs_cluster_watch_lag_revisions %" PRId64 "\n"
		    "# HELP nodefs_cluster_remote_commands_total Remote commands, by result.\n"
		    "# TYPE nodefs_cluster_remote_commands_total counter\n"
		    "nodefs_cluster_remote_commands_total{side=\"writer\",result=\"ok\"} %" PRIu64 "\n"
		    "nodefs_cluster_remote_commands_total{side=\"writer\",result=\"error\"} %" PRIu64 "\n"
		    "nodefs_cluster_remote_commands_total{side=\"target\",result=\"run\"} %" PRIu64 "\n"
		    "nodefs_cluster_remote_commands_total{side=\"target\",result=\"refused\"} %" PRIu64 "\n"
		    "nodefs_cluster_remote_commands_total{side=\"target\",result=\"adopted\"} %" PRIu64 "\n"
		    "# HELP nodefs_cluster_watches etcd watches open now: every node's summary, "
		    "this node's inbox, other nodes' objects while read (detail).\n"
		    "# TYPE nodefs_cluster_watches gauge\n"
		    "nodefs_cluster_watches{kind=\"summary\"} %d\n"
		    "nodefs_cluster_watches{kind=\"inbox\"} %d\n"
		    "nodefs_cluster_watches{kind=\"detail\"} %zu\n"
		    "# HELP nodefs_cluster_detail_watches_opened_total Watches opened on other "
		    "nodes' objects.\n"
		    "# TYPE nodefs_cluster_detail_watches_opened_total counter\n"
		    "nodefs_cluster_detail_watches_opened_total %" PRIu64 "\n"
		    "# HELP nodefs_cluster_watch_events_total Events the watches received.\n"
		    "# TYPE nodefs_cluster_watch_events_total counter\n"
		    "nodefs_cluster_watch_events_total %" PRIu64 "\n",
		    c->connected ? 1 : 0, (double)c->publish_us / 1e6, c->publishes, c->publish_writes,
		    lag, c->remote_ok, c->remote_err, c->remote_run, c->remote_refused,
		    c->remote_adopted, c->watching ? 1 : 0, c->inbox_watching ? 1 : 0, ndet,
		    c->details_opened, c->watch_events);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

struct cluster **cluster_slot(struct backend *b)
{
	return kind_state(b, &cluster_kind);
}

const struct kind_ops cluster_kind = {
	.name = "cluster",
	.type = NULL,	/* its directory is made by init, with [cluster] only */
	.state_size = sizeof(struct cluster *),
	.init = cluster_init,
	.start = cluster_start,
	.render_metrics = cluster_metrics,
	.quiesce = cluster_quiesce,
	.stop = cluster_stop,
};
