/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cluster-view: the cluster/ directory, served from a local cache that
 * cluster-watch.c's watches keep: every node's summary (status, counts,
 * resources), this node's inbox, and another node's objects only while
 * someone reads under cluster/nodes/NODE/volumes/ or containers/ (the
 * directories' touch hook, the objects' files call cluster_detail_touch).
 * Reads take the cache's lock and never wait on etcd but for a node's
 * first range read. What the cache shows is never stale without saying
 * so: cluster/nodes/NODE/status names the revision and its age. Records that are not what nodefs writes (by hand,
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

bool cluster_centry_eq(const void *v, const void *k)
{
	return strcmp(((const struct centry *)v)->key, k) == 0;
}

struct centry *cluster_cache_get_locked(struct cluster *c, const char *key)
{
	return hmap_get(&c->cache, hmap_hash_str(key), key, cluster_centry_eq);
}

/* The summary view's age in seconds: how long since it was last known
 * current (its watch up on a member that answers); -1: never. */
static double view_age_locked(struct cluster *c)
{
	if (!c->sum_live_at.tv_sec && !c->sum_live_at.tv_nsec)
		return -1;
	if (c->watching && c->nms && c->sum_ep < c->nms && !c->ms_bad[c->sum_ep])
		return 0;
	return cluster_mono_s() - cluster_ts_s(&c->sum_live_at);
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
	return cluster_cache_get_locked(c, key) != NULL;
}

struct cdetail *cluster_detail_find_locked(struct cluster *c, const char *node)
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
	alive = cluster_cache_get_locked(c, key);
	snprintf(key, sizeof(key), "summary/%s/info", node);
	info = cluster_cache_get_locked(c, key);
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
	struct cdetail *d = cluster_detail_find_locked(c, n->name);
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
	ce = cluster_cache_get_locked(c, key);
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

/* A read of an object's file: its node's detail watch stays open. */
static void touch_obj(struct bnode *n)
{
	if (n->parent && n->parent->parent)
		cluster_detail_touch(cl_of(n), n->parent->parent->name);
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
		cluster_detail_touch(cl_of(n), n->parent->name);
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
	struct centry *ce = cluster_cache_get_locked(c, key);

	if (!val) {
		if (ce) {
			hmap_del(&c->cache, hmap_hash_str(key), key, cluster_centry_eq);
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
