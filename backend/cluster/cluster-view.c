/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cluster-view: the cluster/ directory, served from a local cache that
 * watches keep, none of which fans out with the cluster's objects:
 *   - one Watch of summary/ (every node's alive and info records: status,
 *     counts, resources), on this thread's own client;
 *   - one of this node's inbox (nodes/SELF/inbox/: commands to run, and
 *     the answers to its own);
 *   - one of another node's objects (nodes/NODE/) only while someone reads
 *     under cluster/nodes/NODE/volumes/ or containers/ (the directories'
 *     touch hook, the objects' files), dropped after detail_idle without a
 *     read. A first read waits for that watch's range read, at most.
 * Each is resumed from its revision after a reconnect and re-listed when
 * that revision was compacted. Reads take the cache's lock and never wait
 * on etcd but for that first range read. What the cache shows is never
 * stale without saying so: cluster/nodes/NODE/status names the revision
 * and its age. Records that are not what nodefs writes (by hand,
 * truncated, wrong types) show as INVALID with the reason in that
 * object's error file. Knows the tree and the etcd client, not FUSE.
 *
 *   cluster/status, cluster/resources
 *   cluster/nodes/NODE/{status,resources}
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
#include "jw.h"
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

static double mono_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double ts_s(const struct timespec *t)
{
	return (double)t->tv_sec + (double)t->tv_nsec / 1e9;
}

/* The summary view's age in seconds: how long since it was last known
 * current (its watch up on a member that answers); -1: never. */
static double view_age_locked(struct cluster *c)
{
	if (!c->sum_live_at.tv_sec && !c->sum_live_at.tv_nsec)
		return -1;
	if (c->watching && c->nms && c->sum_ep < c->nms && !c->ms_bad[c->sum_ep])
		return 0;
	return mono_s() - ts_s(&c->sum_live_at);
}

void cluster_view_live_locked(struct cluster *c)
{
	if (c->watching && c->sum_ep < c->nms && !c->ms_bad[c->sum_ep])
		clock_gettime(CLOCK_MONOTONIC, &c->sum_live_at);
}

/* ---- files ---- */

static int show_root_status(struct bnode *n, struct sbuf *out)
{
	struct cluster *c = cl_of(n);
	char t[32];
	struct timespec now;
	uint64_t leader = 0;
	size_t ndet = 0;

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
	sbuf_printf(out, "inbox watch: %s\n", c->inbox_watching ? "up" : "down");
	for (struct cdetail *d = c->details; d; d = d->next)
		ndet += !d->closing;
	sbuf_printf(out, "detail watches: %zu", ndet);
	for (struct cdetail *d = c->details; d; d = d->next)
		if (!d->closing)
			sbuf_printf(out, " %s", d->node);
	sbuf_printf(out, "\n");
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

	snprintf(key, sizeof(key), "summary/%.*s/alive", (int)len, node);
	return cache_get_locked(c, key) != NULL;
}

static struct cdetail *detail_find_locked(struct cluster *c, const char *node)
{
	for (struct cdetail *d = c->details; d; d = d->next)
		if (!d->closing && strcmp(d->node, node) == 0)
			return d;
	return NULL;
}

/* The node's summary (its info record, else its alive one) parsed into
 * ret; false when it has neither, or only an invalid one (why). */
static bool summary_locked(struct cluster *c, const char *node, struct cinfo *ret, bool *ret_up,
			   char *why, size_t wlen)
{
	char key[256];
	struct centry *alive, *info;

	snprintf(key, sizeof(key), "summary/%s/alive", node);
	alive = cache_get_locked(c, key);
	snprintf(key, sizeof(key), "summary/%s/info", node);
	info = cache_get_locked(c, key);
	*ret_up = alive != NULL;
	why[0] = '\0';
	memset(ret, 0, sizeof(*ret));
	if (info && cluster_info_parse(info->val, info->vlen, ret, why, wlen) == 0)
		return true;
	char w2[200];
	return alive && cluster_info_parse(alive->val, alive->vlen, ret, w2, sizeof(w2)) == 0;
}

static int show_node_status(struct bnode *n, struct sbuf *out)
{
	struct cluster *c = cl_of(n);
	struct cnode *cn = n->priv;
	char t[32], why[200];
	struct cinfo ci;
	bool up;

	pthread_mutex_lock(&c->lock);
	bool ok = summary_locked(c, n->name, &ci, &up, why, sizeof(why));
	double age = view_age_locked(c);
	if (up)
		sbuf_printf(out, "UP\n");
	else {
		time_t since = cn->down_since ? cn->down_since : (time_t)ci.updated;
		cluster_fmt_time(since, t, sizeof(t));
		sbuf_printf(out, "DOWN since %s\n", since ? t : "unknown");
	}
	sbuf_printf(out, "version: %s\nboot_id: %s\n", ci.version, ci.boot_id);
	cluster_fmt_time((time_t)ci.updated, t, sizeof(t));
	sbuf_printf(out, "updated: %s\n", ci.updated ? t : "");
	if (ci.has_counts)
		sbuf_printf(out, "volumes: %lld\ncontainers: %lld\n", ci.volumes, ci.containers);
	if (why[0])
		sbuf_printf(out, "invalid summary: %s\n", why);
	(void)ok;
	sbuf_printf(out, "revision: %" PRId64 "\n", c->rev_seen);
	if (age < 0)
		sbuf_printf(out, "age: unknown\nview: stale: never listed\n");
	else if (age < 2.0 && c->watching)
		sbuf_printf(out, "age: %.1fs\nview: live\n", age);
	else
		sbuf_printf(out, "age: %.1fs\nview: stale: %s\n", age,
			    c->watching ? "its etcd member does not answer" : "the watch is down");
	struct cdetail *d = detail_find_locked(c, n->name);
	if (d) {
		cluster_fmt_time(d->since, t, sizeof(t));
		sbuf_printf(out, "detail: watched since %s, revision %" PRId64 "%s\n", t, d->rev,
			    d->watching ? "" : " (stale: its watch is down)");
	} else
		sbuf_printf(out, "detail: not watched\n");
	pthread_mutex_unlock(&c->lock);
	return 0;
}

static int show_node_resources(struct bnode *n, struct sbuf *out)
{
	struct cluster *c = cl_of(n);
	struct cinfo *ci = calloc(1, sizeof(*ci));
	char why[200];
	bool up;
	int r = 0;

	if (!ci)
		return -ENOMEM;
	pthread_mutex_lock(&c->lock);
	bool ok = summary_locked(c, n->name, ci, &up, why, sizeof(why));
	pthread_mutex_unlock(&c->lock);
	if (ok && ci->has_res)
		r = cluster_res_text(&ci->res, out);
	free(ci);
	return r;
}

/* cluster/resources: the sums over the nodes UP, and the node with the
 * most free of each. */
static int show_root_resources(struct bnode *n, struct sbuf *out)
{
	struct cluster *c = cl_of(n);
	struct cres *sum = calloc(1, sizeof(*sum));
	struct cinfo *ci = calloc(1, sizeof(*ci));
	struct {
		char node[65];
		double v;
		bool set;
	} best_cpu = { 0 }, best_mem = { 0 }, best_prof[CRES_MAX_PROF];
	char names[CRES_MAX_PROF][65];
	size_t nprof = 0, up_n = 0, nodes_n = 0;
	struct bnode **v = NULL;
	size_t nv = 0;
	char why[200], a[32];
	int r = 0;

	if (!sum || !ci || bnode_list(c->nodes, &v, &nv) < 0) {
		free(sum);
		free(ci);
		return -ENOMEM;
	}
	memset(best_prof, 0, sizeof(best_prof));
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < nv; i++) {
		bool up;
		nodes_n++;
		if (!summary_locked(c, v[i]->name, ci, &up, why, sizeof(why)) || !up || !ci->has_res)
			continue;
		up_n++;
		struct cres *x = &ci->res;
		sum->cpus_total += x->cpus_total;
		sum->cpus_allocated += x->cpus_allocated;
		sum->cpus_free += x->cpus_free;
		sum->memory_total += x->memory_total;
		sum->memory_allocated += x->memory_allocated;
		sum->memory_free += x->memory_free;
		sum->containers_unlimited += x->containers_unlimited;
		sum->volumes_bytes_provisioned += x->volumes_bytes_provisioned;
		if (!best_cpu.set || x->cpus_free > best_cpu.v) {
			snprintf(best_cpu.node, sizeof(best_cpu.node), "%s", v[i]->name);
			best_cpu.v = x->cpus_free;
			best_cpu.set = true;
		}
		if (!best_mem.set || (double)x->memory_free > best_mem.v) {
			snprintf(best_mem.node, sizeof(best_mem.node), "%s", v[i]->name);
			best_mem.v = (double)x->memory_free;
			best_mem.set = true;
		}
		for (size_t k = 0; k < x->nprof; k++) {
			size_t j;
			for (j = 0; j < nprof && strcmp(names[j], x->prof[k].name) != 0; j++)
				;
			if (j == nprof) {
				if (nprof == CRES_MAX_PROF)
					continue;
				snprintf(names[nprof++], sizeof(names[0]), "%s", x->prof[k].name);
			}
			if (!best_prof[j].set || (double)x->prof[k].bytes > best_prof[j].v) {
				snprintf(best_prof[j].node, sizeof(best_prof[j].node), "%s", v[i]->name);
				best_prof[j].v = (double)x->prof[k].bytes;
				best_prof[j].set = true;
			}
		}
	}
	pthread_mutex_unlock(&c->lock);
	bnode_list_free(v, nv);
	r = sbuf_printf(out, "nodes %zu\nnodes_up %zu\n", nodes_n, up_n);
	if (r >= 0)
		r = cluster_res_text(sum, out);
	if (r >= 0 && best_cpu.set) {
		cluster_fmt_cpus(best_cpu.v, a, sizeof(a));
		r = sbuf_printf(out, "most_free.cpus %s %s\n", best_cpu.node, a);
	}
	if (r >= 0 && best_mem.set)
		r = sbuf_printf(out, "most_free.memory %s %.0f\n", best_mem.node, best_mem.v);
	for (size_t j = 0; r >= 0 && j < nprof; j++)
		r = sbuf_printf(out, "most_free.profile.%s.capacity_bytes %s %.0f\n", names[j],
				best_prof[j].node, best_prof[j].v);
	free(sum);
	free(ci);
	return r < 0 ? r : 0;
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

static void detail_touch(struct cluster *c, const char *node);

/* A read of an object's file: its node's detail watch stays open. */
static void touch_obj(struct bnode *n)
{
	if (n->parent && n->parent->parent)
		detail_touch(cl_of(n), n->parent->parent->name);
}

static int show_obj_state(struct bnode *n, struct sbuf *out)
{
	struct cluster *c = cl_of(n);
	char why[200];
	int64_t rev = 0;
	int r = 0;

	if (!n->parent || !n->parent->parent)
		return -ENOENT;
	touch_obj(n);
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
	touch_obj(n);
	pthread_mutex_lock(&c->lock);
	json_t *j = obj_record_locked(c, n, why, sizeof(why), &rev);
	json_t *info = j ? json_incref(json_object_get(j, "info")) : NULL;
	pthread_mutex_unlock(&c->lock);
	json_decref(j);
	if (info)
		return show_json(out, info);
	/* nodefs' own words: through jw */
	struct jw w;
	jw_init(&w, out, 2);
	jw_obj(&w);
	jw_kstr(&w, "error", why);
	jw_obj_end(&w);
	int r = jw_end(&w);
	return r < 0 ? r : sbuf_adds(out, "\n");
}

static int show_obj_error(struct bnode *n, struct sbuf *out)
{
	struct cluster *c = cl_of(n);
	char why[200];
	int64_t rev = 0;

	if (!n->parent || !n->parent->parent)
		return -ENOENT;
	touch_obj(n);
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

/* A lookup in or a listing of cluster/nodes/NODE/{volumes,containers}/. */
static void touch_coll(struct bnode *n)
{
	if (n->parent)
		detail_touch(cl_of(n), n->parent->name);
}

static const struct battr root_attrs[] = {
	{ .name = "status", .flags = BATTR_POLL, .show = show_root_status },
	{ .name = "resources", .flags = BATTR_POLL, .show = show_root_resources },
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
	{ .name = "resources", .flags = BATTR_POLL, .show = show_node_resources },
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
	.touch = touch_coll,
};
static const struct battr obj_attrs[] = {
	{ .name = "state", .flags = BATTR_POLL, .show = show_obj_state },
	{ .name = "info.json", .show = show_obj_info },
	{ .name = "ctl", .flags = BATTR_CTL, .store = store_obj_ctl },
	{ .name = "error", .show = show_obj_error },
};
static const struct btype cluster_obj_type = {
	.name = "cluster-object", .attrs = obj_attrs, .nattrs = ARRAY_SIZE(obj_attrs),
	.touch = touch_obj,
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

/* Split "WHAT/NODE/REST" (WHAT: "nodes" or "summary") */
static bool split_key(const char *key, const char *what, char *node, size_t nlen,
		      const char **rest)
{
	const char *p;
	size_t wl = strlen(what);
	struct nerr e;

	if (strncmp(key, what, wl) != 0 || key[wl] != '/')
		return false;
	key += wl + 1;
	p = strchr(key, '/');
	if (!p || (size_t)(p - key) >= nlen)
		return false;
	snprintf(node, nlen, "%.*s", (int)(p - key), key);
	*rest = p + 1;
	return valid_name(node, &e) == 0;
}

/* The node directory of a summary record (made when present). */
static struct bnode *node_dir(struct cluster *c, const char *node, bool make)
{
	struct bnode *nd;

	if (!make) {
		nd = bnode_lookup(c->nodes, node);
		bnode_unref(nd);	/* the tree keeps it */
		return nd;
	}
	struct cnode *cn = calloc(1, sizeof(*cn));
	nd = cn ? child(c->nodes, &cluster_node_type, node, cn) : NULL;
	if (!nd)
		return NULL;
	/* both ctl files from the first record on: a node with no container
	 * yet can be sent its first `run` */
	child(nd, &cluster_coll_type, "volumes", NULL);
	child(nd, &cluster_coll_type, "containers", NULL);
	return nd;
}

static void tree_update_locked(struct cluster *c, const char *key, bool present)
{
	char node[65], coll[65], name[65];
	const char *rest;
	struct bnode *nd, *cd;
	struct nerr e;

	if (split_key(key, "summary", node, sizeof(node), &rest)) {
		nd = node_dir(c, node, present);
		if (!nd)
			return;
		if (strcmp(rest, "alive") == 0)
			((struct cnode *)nd->priv)->down_since = present ? 0 : time(NULL);
		bnode_changed(nd);
		bnode_changed(c->dir);	/* cluster/resources */
		return;
	}
	if (!split_key(key, "nodes", node, sizeof(node), &rest))
		return;
	if (sscanf(rest, "%64[^/]/%64s", coll, name) != 2 ||
	    (strcmp(coll, "volumes") != 0 && strcmp(coll, "containers") != 0) ||
	    valid_name(name, &e) < 0)
		return;
	/* objects of a node no summary names yet show in its directory too */
	nd = node_dir(c, node, present);
	if (!nd)
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

/* ---- the watches ---- */

static const char *below(struct cluster *c, const char *key)
{
	size_t l = strlen(c->prefix);

	if (strncmp(key, c->prefix, l) != 0 || key[l] != '/')
		return NULL;
	return key + l + 1;
}

enum wkind { W_SUMMARY, W_INBOX, W_DETAIL };

struct wctx {
	struct cluster *c;
	struct etcd *e;
	enum wkind kind;
	struct cdetail *d;	/* W_DETAIL */
	char sub[300];		/* what it watches, below the prefix, '/'-terminated */
	int64_t rev;		/* applied through */
	bool stale;	/* its member stopped answering: watch through another */
	bool move;	/* the leader is another member: watch there */
};

/* Whether key (below the prefix) is one w keeps: a detail watch of
 * nodes/NODE/ leaves the inbox (its own watch's, on that node) out. */
static bool w_keeps(const struct wctx *w, const char *k)
{
	if (strncmp(k, w->sub, strlen(w->sub)) != 0)
		return false;
	if (w->kind == W_DETAIL) {
		const char *r = k + strlen(w->sub);
		return strncmp(r, "volumes/", 8) == 0 || strncmp(r, "containers/", 11) == 0;
	}
	return true;
}

static void w_set_watching_locked(struct wctx *w, bool on)
{
	struct cluster *c = w->c;

	switch (w->kind) {
	case W_SUMMARY:
		if (on && !c->watching) {
			c->sum_ep = etcd_current(w->e);
			clock_gettime(CLOCK_MONOTONIC, &c->sum_live_at);
		}
		if (!on && c->watching)
			clock_gettime(CLOCK_MONOTONIC, &c->sum_live_at);
		c->watching = on;
		break;
	case W_INBOX:
		c->inbox_watching = on;
		break;
	case W_DETAIL:
		w->d->watching = on;
		break;
	}
}

static void on_events(void *ctx, const struct etcd_event *ev, size_t n, int64_t rev)
{
	struct wctx *w = ctx;
	struct cluster *c = w->c;

	pthread_mutex_lock(&c->lock);
	w_set_watching_locked(w, true);
	c->watch_events += n;
	for (size_t i = 0; i < n; i++) {
		const char *k = below(c, ev[i].kv.key);
		if (!k || !w_keeps(w, k))
			continue;
		if (ev[i].type == ETCD_EV_DELETE)
			cluster_view_set_locked(c, k, NULL, 0, ev[i].kv.mod_rev);
		else
			cluster_view_set_locked(c, k, ev[i].kv.val, ev[i].kv.vlen, ev[i].kv.mod_rev);
		if (ev[i].kv.mod_rev > w->rev)
			w->rev = ev[i].kv.mod_rev;
	}
	if (rev > w->rev && n == 0)
		w->rev = rev;
	if (w->kind == W_SUMMARY) {
		c->rev_seen = w->rev;
		if (c->rev_seen > c->rev_store)
			c->rev_store = c->rev_seen;
		bnode_changed(c->dir);
	} else if (w->kind == W_DETAIL)
		w->d->rev = w->rev;
	cluster_unlock_kick(c);
}

static bool detail_idle_locked(struct cluster *c, struct cdetail *d)
{
	return mono_s() - ts_s(&d->last_read) >= (double)c->detail_idle_ms / 1000.0;
}

static bool watch_stop(void *ctx)
{
	struct wctx *w = ctx;
	struct cluster *c = w->c;
	size_t i = etcd_current(w->e);
	bool stop, on;

	/* a member that stops answering (SIGSTOP, a hung host) keeps its
	 * connections open, and the stream just goes quiet: the status
	 * thread's look at it decides */
	pthread_mutex_lock(&c->lock);
	stop = c->stopping;
	if (!stop && w->kind == W_DETAIL && detail_idle_locked(c, w->d))
		stop = true;
	if (!stop && i < c->nms && c->ms_bad[i] >= 2)
		stop = w->stale = true;
	/* the leader's watchers see a write first (a follower applies it a
	 * hop later): a remote command's answer arrives sooner there */
	on = w->kind == W_SUMMARY ? c->watching : w->kind == W_INBOX ? c->inbox_watching
								      : w->d->watching;
	if (!stop && c->leader_ep && c->leader_ep - 1 != i && on)
		stop = w->move = true;
	pthread_mutex_unlock(&c->lock);
	return stop;
}

/* List w's range into the cache: what is not listed any more goes. */
static int relist(struct wctx *w, struct nerr *err)
{
	struct cluster *c = w->c;
	struct etcd_kv *kvs = NULL;
	size_t n = 0, pos;
	char pre[512];
	struct centry *ce;
	struct hmap listed;
	int64_t rev = 0;
	int r;

	snprintf(pre, sizeof(pre), "%s/%s", c->prefix, w->sub);
	r = etcd_list(w->e, pre, &kvs, &n, &rev, err);
	if (r < 0)
		return r;
	hmap_init(&listed);
	pthread_mutex_lock(&c->lock);
	if (w->kind == W_INBOX && !c->boot_rev)
		c->boot_rev = rev;	/* what an earlier run may have seen */
	for (size_t i = 0; i < n; i++) {
		const char *k = below(c, kvs[i].key);
		if (!k || !w_keeps(w, k))
			continue;
		cluster_view_set_locked(c, k, kvs[i].val, kvs[i].vlen, kvs[i].mod_rev);
		ce = cache_get_locked(c, k);
		if (ce)
			hmap_put(&listed, hmap_hash_str(k), ce);
	}
	for (pos = 0; (ce = hmap_next(&c->cache, &pos));)
		if (w_keeps(w, ce->key) &&
		    !hmap_get(&listed, hmap_hash_str(ce->key), ce->key, centry_eq)) {
			char *k = strdup(ce->key);
			if (k) {
				cluster_view_set_locked(c, k, NULL, 0, 0);
				free(k);
				pos = 0;
			}
		}
	w->rev = rev;
	if (w->kind == W_SUMMARY) {
		c->rev_seen = rev;
		bnode_changed(c->dir);
	} else if (w->kind == W_DETAIL)
		w->d->rev = rev;
	cluster_unlock_kick(c);
	hmap_free(&listed);
	etcd_kvs_free(kvs, n);
	return 0;
}

/* Drop what a detail watch kept (its node's objects); c->lock held. */
static void detail_drop_locked(struct cluster *c, struct wctx *w)
{
	size_t pos;
	struct centry *ce;

	for (pos = 0; (ce = hmap_next(&c->cache, &pos));)
		if (w_keeps(w, ce->key)) {
			char *k = strdup(ce->key);
			if (k) {
				cluster_view_set_locked(c, k, NULL, 0, 0);
				free(k);
				pos = 0;
			}
		}
}

/* A watch's life: list, watch from there, resume after a failure, list
 * again after a compaction, until the daemon stops (or, a detail watch,
 * its node is no longer read). */
static void watch_run(struct wctx *w)
{
	struct cluster *c = w->c;
	struct nerr err = { 0 };
	struct etcd_watch_cb cb = { .events = on_events, .stop = watch_stop, .ctx = w };
	char pre[512];

	snprintf(pre, sizeof(pre), "%s/%s", c->prefix, w->sub);
	cluster_prefer_leader(c, w->e);
	while (!__atomic_load_n(&c->stopping, __ATOMIC_RELAXED)) {
		int64_t compact = 0;
		int r = 0;

		nerr_clear(&err);
		if (w->rev == 0) {
			r = relist(w, &err);
			if (w->kind == W_DETAIL) {
				pthread_mutex_lock(&c->lock);
				if (r == 0)
					w->d->listed = true;
				else
					w->d->list_failed = true;
				pthread_cond_broadcast(&c->detail_cond);
				pthread_mutex_unlock(&c->lock);
			}
		}
		if (r == 0)
			r = etcd_watch(w->e, pre, w->rev + 1, &cb, &compact, &err);
		pthread_mutex_lock(&c->lock);
		w_set_watching_locked(w, false);
		if (w->kind == W_SUMMARY)
			bnode_changed(c->dir);
		if (w->kind == W_DETAIL && (c->stopping || detail_idle_locked(c, w->d))) {
			/* idle: closed, and what it kept goes with it (the
			 * directories change, so no listing is kept past it) */
			w->d->closing = true;
			detail_drop_locked(c, w);
			struct bnode *nd = bnode_lookup(c->nodes, w->d->node);
			for (size_t k = 0; nd && k < 2; k++) {
				struct bnode *cd = bnode_lookup(nd, k ? "containers" : "volumes");
				if (cd)
					bnode_changed(cd);
				bnode_unref(cd);
			}
			bnode_unref(nd);
			pthread_mutex_unlock(&c->lock);
			break;
		}
		pthread_mutex_unlock(&c->lock);
		if (r == -ERANGE)
			w->rev = 0;	/* compacted: list again */
		if (__atomic_load_n(&c->stopping, __ATOMIC_RELAXED))
			break;
		if (w->stale) {
			log_msg(LOG_LVL_INFO, "cluster: watch of %s: %s stopped answering; resuming "
				"through the next member", w->sub, etcd_endpoint(w->e));
			etcd_rotate(w->e);
			w->stale = false;
			continue;
		}
		if (w->move) {
			w->move = false;
			cluster_prefer_leader(c, w->e);
			continue;
		}
		if (r < 0 && r != -ERANGE)
			log_msg(LOG_LVL_DEBUG, "cluster: watch of %s: %s", w->sub, err.msg);
		struct timespec t = ts_after_ms(CLOCK_MONOTONIC, 200);
		pthread_mutex_lock(&c->lock);
		if (!c->stopping)
			pthread_cond_timedwait(&c->cond, &c->lock, &t);
		pthread_mutex_unlock(&c->lock);
	}
}

static void *watch_thread(struct wctx *w, const char *name)
{
	struct cluster *c = w->c;
	struct etcd_tls tls = { c->ca, c->cert, c->key };
	struct nerr err = { 0 };

	pthread_setname_np(pthread_self(), name);
	if (etcd_new(c->endpoints, &tls, 1000, &w->e, &err) < 0) {
		if (w->kind == W_DETAIL) {
			pthread_mutex_lock(&c->lock);
			w->d->list_failed = w->d->closing = true;
			pthread_cond_broadcast(&c->detail_cond);
			pthread_mutex_unlock(&c->lock);
		}
		return NULL;
	}
	watch_run(w);
	etcd_free(w->e);
	return NULL;
}

void *cluster_watch_main(void *arg)
{
	struct wctx w = { .c = arg, .kind = W_SUMMARY };

	snprintf(w.sub, sizeof(w.sub), "summary/");
	return watch_thread(&w, "nodefs-cwatch");
}

void *cluster_inbox_watch_main(void *arg)
{
	struct cluster *c = arg;
	struct wctx w = { .c = c, .kind = W_INBOX };

	snprintf(w.sub, sizeof(w.sub), "nodes/%s/inbox/", c->node);
	return watch_thread(&w, "nodefs-cinwatch");
}

static void *detail_main(void *arg)
{
	struct cdetail *d = arg;
	struct cluster *c = d->c;
	struct wctx w = { .c = c, .kind = W_DETAIL, .d = d };

	snprintf(w.sub, sizeof(w.sub), "nodes/%s/", d->node);
	watch_thread(&w, "nodefs-cdetail");
	pthread_mutex_lock(&c->lock);
	d->closing = d->done = true;
	d->watching = false;
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* Join and free the details whose threads have ended; c->lock held (an
 * ended thread takes it no more). */
static void details_reap_locked(struct cluster *c)
{
	for (struct cdetail **pp = &c->details; *pp;) {
		struct cdetail *d = *pp;
		if (!d->done) {
			pp = &d->next;
			continue;
		}
		*pp = d->next;
		pthread_join(d->th, NULL);
		free(d);
	}
}

#define DETAILS_MAX 4096

/* Someone reads under cluster/nodes/NODE/{volumes,containers}/: keep its
 * detail watch open, or open one and wait for its first range read (at
 * most about one etcd call's timeout). A FUSE thread. */
static void detail_touch(struct cluster *c, const char *node)
{
	struct cdetail *d;
	size_t n = 0;

	pthread_mutex_lock(&c->lock);
	d = detail_find_locked(c, node);
	if (d) {
		clock_gettime(CLOCK_MONOTONIC, &d->last_read);
		if (d->listed || d->list_failed) {
			pthread_mutex_unlock(&c->lock);
			return;
		}
	} else {
		details_reap_locked(c);
		for (struct cdetail *x = c->details; x; x = x->next)
			n++;
		if (c->stopping || n >= DETAILS_MAX || !(d = calloc(1, sizeof(*d)))) {
			pthread_mutex_unlock(&c->lock);
			return;
		}
		d->c = c;
		snprintf(d->node, sizeof(d->node), "%s", node);
		clock_gettime(CLOCK_MONOTONIC, &d->last_read);
		d->since = time(NULL);
		if (pthread_create(&d->th, NULL, detail_main, d) != 0) {
			free(d);
			pthread_mutex_unlock(&c->lock);
			return;
		}
		d->next = c->details;
		c->details = d;
		c->details_opened++;
	}
	/* the first read waits for the range read, no longer */
	struct timespec t = ts_after_ms(CLOCK_MONOTONIC, 1500);
	while (!d->listed && !d->list_failed && !c->stopping)
		if (pthread_cond_timedwait(&c->detail_cond, &c->lock, &t) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&c->lock);
}

void cluster_details_stop(struct cluster *c)
{
	pthread_mutex_lock(&c->lock);
	pthread_cond_broadcast(&c->detail_cond);
	for (;;) {
		struct cdetail *d = c->details;
		if (!d)
			break;
		c->details = d->next;
		pthread_mutex_unlock(&c->lock);
		pthread_join(d->th, NULL);
		free(d);
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
}
