/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * volume-files: what volumes/NAME/ shows (state, id, plugin, profile,
 * capacity, target, stats, error, info.json, wait; ctl is volume-ctl.c's
 * table), and the volume families of metrics/nodefs.prom. Renders only:
 * `stats` is the one read that calls a plugin (NodeGetVolumeStats, one
 * attempt, 5 s), as plugin refreshes do for the metrics.
 *
 * Must not know: commands, the state machine's steps, checkpoints.
 */
#include "volume-internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jw.h"

/* ---- files ---- */

static int show_state(struct bnode *n, struct sbuf *out)
{
	return sbuf_printf(out, "%s\n", vstate_to_string(volume_state(vof(n))));
}

#define V_SHOW_STR(fname, expr)						\
	static int fname(struct bnode *n, struct sbuf *out)		\
	{								\
		struct volume *v = vof(n);				\
		int r = 0;						\
		pthread_mutex_lock(&v->lock);				\
		if (expr)						\
			r = sbuf_printf(out, "%s\n", expr);		\
		pthread_mutex_unlock(&v->lock);				\
		return r;						\
	}
V_SHOW_STR(show_id, v->id)
V_SHOW_STR(show_plugin, v->plugin)
V_SHOW_STR(show_profile, v->profile)
V_SHOW_STR(show_target, v->target)

static int show_capacity(struct bnode *n, struct sbuf *out)
{
	struct volume *v = vof(n);
	int r;

	pthread_mutex_lock(&v->lock);
	r = sbuf_printf(out, "%lld\n", (long long)v->capacity);
	pthread_mutex_unlock(&v->lock);
	return r;
}

/* NodeGetVolumeStats for a volume on this node: one quick call with a short
 * deadline and no retries (a read must not hang on a plugin). Fills
 * {used, available, total} of bytes and inodes (-1: not reported) and
 * keeps bytes used/available for the metrics. 1 when measured, 0 when the
 * volume is on no node or the plugin cannot measure, -errno with err. */
static int volume_stats(struct volume *v, long long used[3], long long ino[3], bool *ret_unsupported,
			struct nerr *err)
{
	struct storage_req rq = { 0 };
	struct storage_stats st;
	struct bnode *pn = NULL;
	struct plugin *p;
	struct storage_caps caps;
	char path[PATH_MAX] = "", id[1024] = "", staging[PATH_MAX];
	int r;

	*ret_unsupported = false;
	pthread_mutex_lock(&v->lock);
	if (v->target && v->state == V_PUBLISHED)
		snprintf(path, sizeof(path), "%s", v->target);
	else if (v->staged && v->state == V_VOL_READY)
		snprintf(path, sizeof(path), "%s", VSTAGING(v));
	if (v->id)
		snprintf(id, sizeof(id), "%s", v->id);
	snprintf(staging, sizeof(staging), "%s", v->staged ? VSTAGING(v) : "");
	if (!path[0])
		v->have_stats = false;
	pthread_mutex_unlock(&v->lock);
	if (!path[0])
		return 0;	/* not on this node: nothing to measure */
	p = plugin_get(v->b, v->plugin, &pn);
	if (!p)
		return 0;
	if (!plugin_caps_cached(p, &caps) || !STORAGE_CAP(caps.node, STORAGE_NODE_GET_VOLUME_STATS)) {
		bnode_unref(pn);
		*ret_unsupported = true;
		return 0;
	}
	rq.id = id;
	rq.path = path;
	rq.staging = staging;
	r = plugin_ops(p)->stats(plugin_handle(p), &rq, 5000, &st, NULL, NULL, NULL, err);
	bnode_unref(pn);
	if (r < 0)
		return r;
	for (int k = 0; k < 3; k++) {
		used[k] = st.bytes[k];
		ino[k] = st.inodes[k];
	}
	pthread_mutex_lock(&v->lock);
	v->have_stats = used[0] >= 0;
	v->stats_used = used[0];
	v->stats_available = used[1];
	pthread_mutex_unlock(&v->lock);
	return 1;
}

static int show_stats(struct bnode *n, struct sbuf *out)
{
	struct volume *v = vof(n);
	long long used[3], ino[3];
	struct nerr err = { 0 };
	bool unsupported;
	int r = volume_stats(v, used, ino, &unsupported, &err);

	if (r < 0) {
		bnode_set_error(n, err.msg);
		return 0;
	}
	if (unsupported)
		return sbuf_printf(out, "unsupported: plugin has no GET_VOLUME_STATS\n");
	if (r == 0)
		return 0;
	if (used[0] >= 0)
		r = sbuf_printf(out, "bytes_used %lld\nbytes_available %lld\nbytes_total %lld\n",
				used[0], used[1], used[2]);
	if (r >= 0 && ino[0] >= 0)
		r = sbuf_printf(out, "inodes_used %lld\ninodes_available %lld\ninodes_total %lld\n",
				ino[0], ino[1], ino[2]);
	return r;
}

/* From a plugin's refresh (a worker): measure its volumes on this node for
 * the metrics. */
void volumes_refresh_stats(struct backend *b, const char *plugin)
{
	struct bnode **v;
	size_t n;

	if (bnode_list(volumes_dir(b), &v, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct volume *x = vof(v[i]);
		long long used[3], ino[3];
		struct nerr err = { 0 };
		bool unsupported;

		if (strcmp(x->plugin, plugin) == 0 && !actq_busy(&x->q))
			volume_stats(x, used, ino, &unsupported, &err);
	}
	bnode_list_free(v, n);
}

static int write_info(struct bnode *n, struct sbuf *out, bool redact)
{
	struct volume *v = vof(n);
	struct jw w;

	jw_init(&w, out, 2);
	jw_obj(&w);
	pthread_mutex_lock(&v->lock);
	volume_write_locked(v, &w, redact);
	pthread_mutex_unlock(&v->lock);
	jw_obj_end(&w);
	return jw_end(&w) ?: sbuf_addc(out, '\n');
}

/*
 * wait: blocks while a command on the volume is queued or running, then one
 * line, `state=PUBLISHED` (the state it settled in), then end of file. A
 * volume destroyed meanwhile is gone: the read fails with ENOENT (fs). With O_NONBLOCK ctl writes a script issues commands and
 * waits for them with `cat wait`.
 */
static bool volume_settled(struct bnode *n)
{
	return atomic_load(&n->dead) || atomic_load(&vof(n)->inflight) == 0;
}

static int volume_wait_line(struct bnode *n, struct sbuf *out)
{
	if (atomic_load(&n->dead))
		return -ENOENT;
	return sbuf_printf(out, "state=%s\n", vstate_to_string(volume_state(vof(n))));
}

/* info.json: any user's, what the plugin returned and the parameters the
 * config's redact list names "<redacted>"; spec.json: the whole record,
 * root's and the read group's. */
static int show_info(struct bnode *n, struct sbuf *out)
{
	return write_info(n, out, true);
}

static int show_spec(struct bnode *n, struct sbuf *out)
{
	return write_info(n, out, false);
}

BWAIT_STREAM(vwait_stream, volume_settled, volume_wait_line);

BCTL_FUNCS(volume_ctl, volume_ctl_table)

static const struct battr volume_attrs[] = {
	BCTL_ATTR(volume_ctl),
	{ .name = "state", .flags = BATTR_POLL | BATTR_VERSIONED, .show = show_state },
	{ .name = "id", .flags = BATTR_CACHE, .show = show_id },
	{ .name = "plugin", .flags = BATTR_CACHE, .show = show_plugin },
	{ .name = "profile", .flags = BATTR_VERSIONED, .show = show_profile },
	{ .name = "capacity", .flags = BATTR_VERSIONED, .show = show_capacity },
	{ .name = "target", .flags = BATTR_VERSIONED, .show = show_target },
	{ .name = "stats", .flags = BATTR_AGED, .show = show_stats },
	{ .name = "error", .show = battr_show_error },
	{ .name = "info.json", .show = show_info },
	{ .name = "spec.json", .flags = BATTR_PRIV, .show = show_spec },
	{ .name = "wait", .stream = &vwait_stream },
};

static void volume_node_free(struct bnode *n)
{
	/* actq_run frees the last action only after its last touch of the
	 * queue, so the queue inside the volume is idle here */
	volume_free(n->priv);
}

const struct btype volume_type = {
	.name = "volume",
	.attrs = volume_attrs,
	.nattrs = sizeof(volume_attrs) / sizeof(volume_attrs[0]),
	.free = volume_node_free,
};

int volumes_render_metrics(struct backend *b, struct sbuf *out)
{
	struct bnode **v;
	size_t n;
	int r;

	if (bnode_list(volumes_dir(b), &v, &n) < 0)
		return -ENOMEM;
	r = sbuf_adds(out, "# HELP nodefs_volumes Volumes by plugin and state.\n# TYPE nodefs_volumes gauge\n");
	/* count (plugin, state) pairs in one pass: few plugins, few states */
	struct { const char *plugin; enum vstate s; size_t count; } *pairs = NULL;
	size_t npairs = 0;

	pairs = calloc(n ? n : 1, sizeof(*pairs));
	if (!pairs)
		r = -ENOMEM;
	for (size_t i = 0; r >= 0 && i < n; i++) {
		struct volume *x = vof(v[i]);
		enum vstate st = volume_state(x);
		size_t k;

		for (k = 0; k < npairs; k++)
			if (pairs[k].s == st && strcmp(pairs[k].plugin, x->plugin) == 0)
				break;
		if (k == npairs) {
			pairs[npairs].plugin = x->plugin;
			pairs[npairs].s = st;
			npairs++;
		}
		pairs[k].count++;
	}
	for (size_t k = 0; r >= 0 && k < npairs; k++)
		r = sbuf_printf(out, "nodefs_volumes{plugin=\"%s\",state=\"%s\"} %zu\n", pairs[k].plugin,
				vstate_to_string(pairs[k].s), pairs[k].count);
	free(pairs);
	if (r >= 0)
		r = sbuf_adds(out, "# HELP nodefs_volume_capacity_bytes Capacity of the volume.\n"
				   "# TYPE nodefs_volume_capacity_bytes gauge\n");
	for (size_t i = 0; r >= 0 && i < n; i++) {
		struct volume *x = vof(v[i]);
		long long cap;
		pthread_mutex_lock(&x->lock);
		cap = x->capacity;
		pthread_mutex_unlock(&x->lock);
		r = sbuf_printf(out, "nodefs_volume_capacity_bytes{volume=\"%s\"} %lld\n", x->name, cap);
	}
	for (int f = 0; f < 2 && r >= 0; f++) {
		r = sbuf_printf(out, "# HELP nodefs_volume_%s_bytes Bytes %s in the volume as the plugin last "
				     "reported them (NodeGetVolumeStats).\n# TYPE nodefs_volume_%s_bytes gauge\n",
				f ? "available" : "used", f ? "available" : "used", f ? "available" : "used");
		for (size_t i = 0; r >= 0 && i < n; i++) {
			struct volume *x = vof(v[i]);
			long long val;
			bool have;
			pthread_mutex_lock(&x->lock);
			have = x->have_stats;
			val = f ? x->stats_available : x->stats_used;
			pthread_mutex_unlock(&x->lock);
			if (have)
				r = sbuf_printf(out, "nodefs_volume_%s_bytes{volume=\"%s\"} %lld\n",
						f ? "available" : "used", x->name, val);
		}
	}
	bnode_list_free(v, n);
	return r;
}
