/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cluster-view: the cluster/ directory, served from a local cache of the
 * whole prefix that one Watch keeps (resumed from its revision after a
 * reconnect; re-listed when that revision was compacted). Reads take the
 * cache's lock and never wait on etcd. Records that are not what nodefs
 * writes (by hand, truncated, wrong types) show as INVALID with the reason
 * in that object's error file. Knows the tree and the etcd client, not FUSE.
 *
 *   cluster/status
 *   cluster/nodes/NODE/status
 *   cluster/nodes/NODE/{volumes,containers}/{ctl,error}
 *   cluster/nodes/NODE/{volumes,containers}/NAME/{state,info.json,ctl,error}
 */
#include "backend-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cluster-internal.h"
#include "log.h"
#include "macro.h"
#include "valid.h"

/* per node directory */
struct cnode {
	time_t down_since;	/* when its alive key went, as seen here; 0 unknown */
};

static struct cluster *cl_of(struct bnode *n)
{
	return cluster_of(node_backend(n));
}

static bool centry_eq(const void *v, const void *k)
{
	return strcmp(((const struct centry *)v)->key, k) == 0;
}

static struct centry *cache_get_locked(struct cluster *c, const char *key)
{
	return hmap_get(&c->cache, hmap_hash_str(key), key, centry_eq);
}

/* ---- files ---- */

static int show_root_status(struct bnode *n, struct sbuf *out)
{
	struct cluster *c = cl_of(n);
	char t[32];
	struct timespec now;
	uint64_t leader = 0;

	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&c->lock);
	cluster_fmt_time(c->since, t, sizeof(t));
	if (c->connected)
		sbuf_printf(out, "state: connected\n");
	else
		sbuf_printf(out, "state: unavailable since %s: %s\n", t, c->reason);
	sbuf_printf(out, "node: %s\nprefix: %s\n", c->node, c->prefix);
	for (size_t i = 0; i < c->nms; i++)
		if (c->ms[i].ok && c->ms[i].leader)
			leader = c->ms[i].leader;
	for (size_t i = 0; i < c->nms; i++) {
		const struct etcd_member_status *m = &c->ms[i];
		char url[256];
		const char *u = c->endpoints;
		/* the i-th word of the endpoints */
		for (size_t k = 0; k < i && u; k++) {
			u += strcspn(u, " \t,");
			u += strspn(u, " \t,");
		}
		snprintf(url, sizeof(url), "%.*s", u ? (int)strcspn(u, " \t,") : 0, u ? u : "");
		if (m->ok)
			sbuf_printf(out, "endpoint: %s healthy member %" PRIx64 "%s\n", url, m->member,
				    m->member == leader ? " leader" : "");
		else
			sbuf_printf(out, "endpoint: %s unhealthy: %s\n", url, m->error);
	}
	if (leader)
		sbuf_printf(out, "leader: %" PRIx64 "\n", leader);
	else
		sbuf_printf(out, "leader: none\n");
	sbuf_printf(out, "revision: %" PRId64 "\n", c->rev_seen);
	sbuf_printf(out, "watch: %s\n", c->watching ? "up" : "down");
	if (c->lease) {
		long left = c->lease_ttl - (long)(now.tv_sec - c->lease_at.tv_sec);
		sbuf_printf(out, "lease: %" PRIx64 " ttl %lds\n", (uint64_t)c->lease, left > 0 ? left : 0);
	} else
		sbuf_printf(out, "lease: none\n");
	pthread_mutex_unlock(&c->lock);
	return 0;
}

bool cluster_node_up_locked(struct cluster *c, const char *node, size_t len)
{
	char key[256];

	snprintf(key, sizeof(key), "nodes/%.*s/alive", (int)len, node);
	return cache_get_locked(c, key) != NULL;
}

static int show_node_status(struct bnode *n, struct sbuf *out)
{
	struct cluster *c = cl_of(n);
	struct cnode *cn = n->priv;
	char key[256], t[32];
	struct centry *alive, *info;
	json_t *j = NULL;

	pthread_mutex_lock(&c->lock);
	snprintf(key, sizeof(key), "nodes/%s/alive", n->name);
	alive = cache_get_locked(c, key);
	snprintf(key, sizeof(key), "nodes/%s/info", n->name);
	info = cache_get_locked(c, key);
	if (alive)
		j = json_loadb(alive->val, alive->vlen, 0, NULL);
	json_t *ji = info ? json_loadb(info->val, info->vlen, 0, NULL) : NULL;
	if (!j && ji)
		j = json_incref(ji);
	json_int_t updated = json_integer_value(json_object_get(ji, "updated"));
	if (alive)
		sbuf_printf(out, "UP\n");
	else {
		time_t since = cn->down_since ? cn->down_since : (time_t)updated;
		cluster_fmt_time(since, t, sizeof(t));
		sbuf_printf(out, "DOWN since %s\n", since ? t : "unknown");
	}
	const char *v = json_string_value(json_object_get(j, "version"));
	const char *bid = json_string_value(json_object_get(j, "boot_id"));
	sbuf_printf(out, "version: %s\nboot_id: %s\n", v ? v : "", bid ? bid : "");
	cluster_fmt_time((time_t)updated, t, sizeof(t));
	sbuf_printf(out, "updated: %s\n", updated ? t : "");
	json_decref(j);
	json_decref(ji);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* The record of object n (cluster/nodes/NODE/KIND/NAME), parsed, or NULL
 * with why in why. c->lock held. */
static json_t *obj_record_locked(struct cluster *c, struct bnode *n, char *why, size_t wlen,
				 int64_t *ret_rev)
{
	char key[512];
	struct centry *ce;
	json_error_t je;
	json_t *j;

	snprintf(key, sizeof(key), "nodes/%s/%s/%s", n->parent->parent->name, n->parent->name,
		 n->name);
	ce = cache_get_locked(c, key);
	if (!ce) {
		snprintf(why, wlen, "no record");
		return NULL;
	}
	*ret_rev = ce->mod_rev;
	j = json_loadb(ce->val, ce->vlen, 0, &je);
	if (!j) {
		snprintf(why, wlen, "not JSON: %s", je.text);
		return NULL;
	}
	if (!json_is_object(j) || !json_is_string(json_object_get(j, "state")) ||
	    !json_is_object(json_object_get(j, "info"))) {
		snprintf(why, wlen, "expected {\"state\": string, \"info\": object}");
		json_decref(j);
		return NULL;
	}
	return j;
}

static int show_obj_state(struct bnode *n, struct sbuf *out)
{
	struct cluster *c = cl_of(n);
	char why[200];
	int64_t rev = 0;
	int r = 0;

	if (!n->parent || !n->parent->parent)
		return -ENOENT;
	pthread_mutex_lock(&c->lock);
	json_t *j = obj_record_locked(c, n, why, sizeof(why), &rev);
	if (j)
		r = sbuf_printf(out, "%s", json_string_value(json_object_get(j, "state")));
	else
		r = sbuf_printf(out, "INVALID\n");
	pthread_mutex_unlock(&c->lock);
	json_decref(j);
	return r;
}

/* Render j (consumed; NULL means out of memory) as indented JSON and a
 * newline. Only for a peer's record, passed through as etcd had it: what
 * nodefs renders of its own goes through common/jw.c. */
static int show_json(struct sbuf *out, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
	int r;

	json_decref(j);
	if (!s)
		return -ENOMEM;
	r = sbuf_printf(out, "%s\n", s);
	free(s);
	return r;
}

static int show_obj_info(struct bnode *n, struct sbuf *out)
{
	struct cluster *c = cl_of(n);
	char why[200];
	int64_t rev = 0;

	if (!n->parent || !n->parent->parent)
		return -ENOENT;
	pthread_mutex_lock(&c->lock);
	json_t *j = obj_record_locked(c, n, why, sizeof(why), &rev);
	json_t *info = j ? json_incref(json_object_get(j, "info"))
			 : json_pack("{s:s}", "error", why);
	pthread_mutex_unlock(&c->lock);
	json_decref(j);
	return show_json(out, info);
}

static int show_obj_error(struct bnode *n, struct sbuf *out)
{
	struct cluster *c = cl_of(n);
	char why[200];
	int64_t rev = 0;

	if (!n->parent || !n->parent->parent)
		return -ENOENT;
	battr_show_error(n, out);
	pthread_mutex_lock(&c->lock);
	json_t *j = obj_record_locked(c, n, why, sizeof(why), &rev);
	pthread_mutex_unlock(&c->lock);
	if (!j)
		sbuf_printf(out, "invalid record at revision %" PRId64 ": %s\n", rev, why);
	json_decref(j);
	return 0;
}

static int store_coll_ctl(struct bnode *n, const char *line, size_t len, struct breq *rq)
{
	if (!n->parent)
		return -ENOENT;
	return cluster_remote_write(cl_of(n), n->parent->name, n->name, line, len, rq);
}

static int store_obj_ctl(struct bnode *n, const char *line, size_t len, struct breq *rq)
{
	char path[160];

	if (!n->parent || !n->parent->parent)
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/%s", n->parent->name, n->name);
	return cluster_remote_write(cl_of(n), n->parent->parent->name, path, line, len, rq);
}

static const struct battr root_attrs[] = {
	{ .name = "status", .flags = BATTR_POLL, .show = show_root_status },
};
static const struct btype cluster_root_type = {
	.name = "cluster", .attrs = root_attrs, .nattrs = ARRAY_SIZE(root_attrs),
};
static const struct btype cluster_nodes_type = { .name = "cluster-nodes" };

static void cnode_free(struct bnode *n)
{
	free(n->priv);
}

static const struct battr node_attrs[] = {
	{ .name = "status", .flags = BATTR_POLL, .show = show_node_status },
};
static const struct btype cluster_node_type = {
	.name = "cluster-node", .attrs = node_attrs, .nattrs = ARRAY_SIZE(node_attrs),
	.free = cnode_free,
};
static const struct battr coll_attrs[] = {
	{ .name = "ctl", .flags = BATTR_CTL, .store = store_coll_ctl },
	{ .name = "error", .show = battr_show_error },
};
static const struct btype cluster_coll_type = {
	.name = "cluster-collection", .attrs = coll_attrs, .nattrs = ARRAY_SIZE(coll_attrs),
};
static const struct battr obj_attrs[] = {
	{ .name = "state", .flags = BATTR_POLL, .show = show_obj_state },
	{ .name = "info.json", .show = show_obj_info },
	{ .name = "ctl", .flags = BATTR_CTL, .store = store_obj_ctl },
	{ .name = "error", .show = show_obj_error },
};
static const struct btype cluster_obj_type = {
	.name = "cluster-object", .attrs = obj_attrs, .nattrs = ARRAY_SIZE(obj_attrs),
};

int cluster_view_init(struct cluster *c)
{
	struct bnode *d = bnode_new(&cluster_root_type, "cluster", NULL);
	struct bnode *nodes = bnode_new(&cluster_nodes_type, "nodes", NULL);

	if (!d || !nodes || bnode_add(c->b->root, d) < 0 || bnode_add(d, nodes) < 0) {
		bnode_unref(d);
		bnode_unref(nodes);
		return -ENOMEM;
	}
	c->dir = d;
	kind_set_dir(c->b, &cluster_kind, bnode_ref(d));	/* the hub's, dropped at free */
	c->nodes = nodes;
	bnode_unref(d);
	bnode_unref(nodes);
	return 0;
}

/* ---- the cache and the tree ---- */

/* dir's child name, made with type when missing; borrowed (the tree
 * keeps it), NULL on failure. */
static struct bnode *child(struct bnode *dir, const struct btype *t, const char *name, void *priv)
{
	struct bnode *k = bnode_lookup(dir, name);

	if (k) {
		free(priv);
		bnode_unref(k);
		return k;
	}
	k = bnode_new(t, name, priv);
	if (!k) {
		free(priv);
		return NULL;
	}
	if (bnode_add(dir, k) < 0) {
		bnode_unref(k);
		return NULL;
	}
	bnode_unref(k);
	return k;
}

/* Split "nodes/NODE/REST" */
static bool split_key(const char *key, char *node, size_t nlen, const char **rest)
{
	const char *p;
	struct nerr e;

	if (strncmp(key, "nodes/", 6) != 0)
		return false;
	key += 6;
	p = strchr(key, '/');
	if (!p || (size_t)(p - key) >= nlen)
		return false;
	snprintf(node, nlen, "%.*s", (int)(p - key), key);
	*rest = p + 1;
	return valid_name(node, &e) == 0;
}

static void tree_update_locked(struct cluster *c, const char *key, bool present)
{
	char node[65], coll[65], name[65];
	const char *rest;
	struct bnode *nd, *cd;
	struct nerr e;

	if (!split_key(key, node, sizeof(node), &rest))
		return;
	if (present) {
		struct cnode *cn = calloc(1, sizeof(*cn));
		nd = cn ? child(c->nodes, &cluster_node_type, node, cn) : NULL;
		if (!nd)
			return;
		/* both ctl files from the first record on: a node with no
		 * container yet can be sent its first `run` */
		child(nd, &cluster_coll_type, "volumes", NULL);
		child(nd, &cluster_coll_type, "containers", NULL);
		if (strcmp(rest, "alive") == 0) {
			((struct cnode *)nd->priv)->down_since = 0;
			bnode_changed(nd);
			return;
		}
		if (strcmp(rest, "info") == 0) {
			bnode_changed(nd);
			return;
		}
	} else {
		nd = bnode_lookup(c->nodes, node);
		if (!nd)
			return;
		bnode_unref(nd);	/* the tree keeps it */
		if (strcmp(rest, "alive") == 0) {
			((struct cnode *)nd->priv)->down_since = time(NULL);
			bnode_changed(nd);
			return;
		}
	}
	if (sscanf(rest, "%64[^/]/%64s", coll, name) != 2 ||
	    (strcmp(coll, "volumes") != 0 && strcmp(coll, "containers") != 0) ||
	    valid_name(name, &e) < 0)
		return;
	if (present) {
		cd = child(nd, &cluster_coll_type, coll, NULL);
		struct bnode *o = cd ? child(cd, &cluster_obj_type, name, NULL) : NULL;
		if (o)
			bnode_changed(o);
	} else {
		cd = bnode_lookup(nd, coll);
		struct bnode *o = cd ? bnode_lookup(cd, name) : NULL;
		if (o)
			bnode_remove(o);
		bnode_unref(o);
		bnode_unref(cd);
	}
}

void cluster_view_set_locked(struct cluster *c, const char *key, const char *val, size_t vlen,
			     int64_t mod_rev)
{
	struct centry *ce = cache_get_locked(c, key);

	if (!val) {
		if (ce) {
			hmap_del(&c->cache, hmap_hash_str(key), key, centry_eq);
			free(ce->key);
			free(ce->val);
			free(ce);
		}
		tree_update_locked(c, key, false);
		return;
	}
	if (!ce) {
		ce = calloc(1, sizeof(*ce));
		if (!ce || !(ce->key = strdup(key)) ||
		    hmap_put(&c->cache, hmap_hash_str(key), ce) < 0) {
			if (ce)
				free(ce->key);
			free(ce);
			return;
		}
	}
	char *nv = malloc(vlen + 1);
	if (!nv)
		return;
	memcpy(nv, val, vlen);
	nv[vlen] = '\0';
	free(ce->val);
	ce->val = nv;
	ce->vlen = vlen;
	ce->mod_rev = mod_rev;
	tree_update_locked(c, key, true);
	if (strstr(key, "/inbox/"))
		cluster_inbox_seen_locked(c, ce);
}

/* ---- the watch thread ---- */

static const char *below(struct cluster *c, const char *key)
{
	size_t l = strlen(c->prefix);

	if (strncmp(key, c->prefix, l) != 0 || key[l] != '/')
		return NULL;
	return key + l + 1;
}

struct wctx {
	struct cluster *c;
	struct etcd *e;
	bool stale;	/* its member stopped answering: watch through another */
	bool move;	/* the leader is another member: watch there */
};

static void on_events(void *ctx, const struct etcd_event *ev, size_t n, int64_t rev)
{
	struct cluster *c = ((struct wctx *)ctx)->c;

	pthread_mutex_lock(&c->lock);
	c->watching = true;
	for (size_t i = 0; i < n; i++) {
		const char *k = below(c, ev[i].kv.key);
		if (!k)
			continue;
		if (ev[i].type == ETCD_EV_DELETE)
			cluster_view_set_locked(c, k, NULL, 0, ev[i].kv.mod_rev);
		else
			cluster_view_set_locked(c, k, ev[i].kv.val, ev[i].kv.vlen, ev[i].kv.mod_rev);
		if (ev[i].kv.mod_rev > c->rev_seen)
			c->rev_seen = ev[i].kv.mod_rev;
	}
	if (rev > c->rev_seen && n == 0)
		c->rev_seen = rev;
	if (c->rev_seen > c->rev_store)
		c->rev_store = c->rev_seen;
	bnode_changed(c->dir);
	cluster_unlock_kick(c);
}

static bool watch_stop(void *ctx)
{
	struct wctx *w = ctx;
	struct cluster *c = w->c;
	size_t i = etcd_current(w->e);
	bool stop;

	/* a member that stops answering (SIGSTOP, a hung host) keeps its
	 * connections open, and the stream just goes quiet: the status
	 * thread's look at it decides */
	pthread_mutex_lock(&c->lock);
	stop = c->stopping;
	if (!stop && i < c->nms && c->ms_bad[i] >= 2)
		stop = w->stale = true;
	/* the leader's watchers see a write first (a follower applies it a
	 * hop later): a remote command's answer arrives sooner there */
	if (!stop && c->leader_ep && c->leader_ep - 1 != i && c->watching)
		stop = w->move = true;
	pthread_mutex_unlock(&c->lock);
	return stop;
}

/* List the prefix into the cache: what is not listed any more goes. */
static int relist(struct cluster *c, struct etcd *e, int64_t *ret_rev, struct nerr *err)
{
	struct etcd_kv *kvs = NULL;
	size_t n = 0, pos;
	char pre[256];
	struct centry *ce;
	struct hmap listed;
	int r;

	snprintf(pre, sizeof(pre), "%s/", c->prefix);
	r = etcd_list(e, pre, &kvs, &n, ret_rev, err);
	if (r < 0)
		return r;
	hmap_init(&listed);
	pthread_mutex_lock(&c->lock);
	if (!c->boot_rev)
		c->boot_rev = *ret_rev;	/* what an earlier run may have seen */
	for (size_t i = 0; i < n; i++) {
		const char *k = below(c, kvs[i].key);
		if (!k)
			continue;
		cluster_view_set_locked(c, k, kvs[i].val, kvs[i].vlen, kvs[i].mod_rev);
		ce = cache_get_locked(c, k);
		if (ce)
			hmap_put(&listed, hmap_hash_str(k), ce);
	}
	for (pos = 0; (ce = hmap_next(&c->cache, &pos));)
		if (!hmap_get(&listed, hmap_hash_str(ce->key), ce->key, centry_eq)) {
			char *k = strdup(ce->key);
			if (k) {
				cluster_view_set_locked(c, k, NULL, 0, 0);
				free(k);
				pos = 0;
			}
		}
	c->rev_seen = *ret_rev;
	bnode_changed(c->dir);
	cluster_unlock_kick(c);
	hmap_free(&listed);
	etcd_kvs_free(kvs, n);
	return 0;
}

void *cluster_watch_main(void *arg)
{
	struct cluster *c = arg;
	struct etcd_tls tls = { c->ca, c->cert, c->key };
	struct etcd *e = NULL;
	struct nerr err = { 0 };
	struct wctx w = { .c = c };
	struct etcd_watch_cb cb = { .events = on_events, .stop = watch_stop, .ctx = &w };
	int64_t rev = 0;
	char pre[256];

	pthread_setname_np(pthread_self(), "nodefs-cwatch");
	if (etcd_new(c->endpoints, &tls, 1000, &e, &err) < 0)
		return NULL;
	w.e = e;
	snprintf(pre, sizeof(pre), "%s/", c->prefix);
	while (!__atomic_load_n(&c->stopping, __ATOMIC_RELAXED)) {
		int64_t compact = 0;
		int r = 0;

		nerr_clear(&err);
		if (rev == 0)
			r = relist(c, e, &rev, &err);
		if (r == 0)
			r = etcd_watch(e, pre, rev + 1, &cb, &compact, &err);
		pthread_mutex_lock(&c->lock);
		c->watching = false;
		if (c->rev_seen > rev)
			rev = c->rev_seen;
		bnode_changed(c->dir);
		pthread_mutex_unlock(&c->lock);
		if (r == -ERANGE)
			rev = 0;	/* compacted: list again */
		if (__atomic_load_n(&c->stopping, __ATOMIC_RELAXED))
			break;
		if (w.stale) {
			log_msg(LOG_LVL_INFO, "cluster: watch: %s stopped answering; resuming "
				"through the next member", etcd_endpoint(e));
			etcd_rotate(e);
			w.stale = false;
			continue;
		}
		if (w.move) {
			w.move = false;
			cluster_prefer_leader(c, e);
			log_msg(LOG_LVL_DEBUG, "cluster: watch: resuming on the leader, %s",
				etcd_endpoint(e));
			continue;
		}
		if (r < 0 && r != -ERANGE)
			log_msg(LOG_LVL_DEBUG, "cluster: watch: %s", err.msg);
		struct timespec t = ts_after_ms(CLOCK_MONOTONIC, 200);
		pthread_mutex_lock(&c->lock);
		if (!c->stopping)
			pthread_cond_timedwait(&c->cond, &c->lock, &t);
		pthread_mutex_unlock(&c->lock);
	}
	etcd_free(e);
	return NULL;
}
