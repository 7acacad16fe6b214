/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * snapshot-files: what snapshots/SNAP/ shows (ctl, id, source, size,
 * created, ready, state, plugin, info.json, error, wait) and the
 * snapshots' metrics.
 *
 * Must not know: how a call is made (a `ready` read that waits on the
 * plugin asks snapshot-run.c), commands.
 */
#include "snapshot-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jw.h"


static int show_state(struct bnode *n, struct sbuf *out)
{
	return sbuf_printf(out, "%s\n", sstate_to_string(snapshot_state(sof(n))));
}

#define S_SHOW(fname, fmt, ...)						\
	static int fname(struct bnode *n, struct sbuf *out)		\
	{								\
		struct snapshot *s = sof(n);				\
		int r;							\
		pthread_mutex_lock(&s->lock);				\
		r = sbuf_printf(out, fmt, __VA_ARGS__);			\
		pthread_mutex_unlock(&s->lock);				\
		return r;						\
	}

S_SHOW(show_id, "%s%s", s->id ? s->id : "", s->id ? "\n" : "")
S_SHOW(show_plugin, "%s\n", s->plugin)
S_SHOW(show_size, "%lld\n", (long long)s->size)
S_SHOW(show_source, "%s %s\n", s->volume && s->volume[0] ? s->volume : "-",
       s->volume_id ? s->volume_id : "-")

static int show_created(struct bnode *n, struct sbuf *out)
{
	struct snapshot *s = sof(n);
	char t[64];

	pthread_mutex_lock(&s->lock);
	fmt_time((time_t)s->created_s, t, sizeof(t));
	pthread_mutex_unlock(&s->lock);
	return t[0] ? sbuf_printf(out, "%s\n", t) : 0;
}

/* ready: the plugin's ready_to_use; while it says no, each read asks it
 * again (ListSnapshots: a bounded call, as a volume's stats). */
static int show_ready(struct bnode *n, struct sbuf *out)
{
	struct snapshot *s = sof(n);
	struct nerr err = { 0 };
	bool ready;

	pthread_mutex_lock(&s->lock);
	ready = s->ready;
	pthread_mutex_unlock(&s->lock);
	if (!ready && snapshot_state(s) == S_READY && !actq_busy(&s->q)) {
		if (snapshot_look(s, &err) < 0)
			bnode_set_error(n, err.msg);
		pthread_mutex_lock(&s->lock);
		ready = s->ready;
		pthread_mutex_unlock(&s->lock);
	}
	return sbuf_printf(out, "%s\n", ready ? "yes" : "no");
}

static int show_info(struct bnode *n, struct sbuf *out)
{
	struct snapshot *s = sof(n);
	struct jw w;

	jw_init(&w, out, 2);
	jw_obj(&w);
	pthread_mutex_lock(&s->lock);
	snapshot_write_locked(s, &w);
	pthread_mutex_unlock(&s->lock);
	jw_obj_end(&w);
	return jw_end(&w) ?: sbuf_addc(out, '\n');
}

/* wait: blocks while a command is queued or running, then state=STATE. */
static bool snapshot_settled(struct bnode *n)
{
	return atomic_load(&n->dead) || atomic_load(&sof(n)->inflight) == 0;
}

static int snapshot_wait_line(struct bnode *n, struct sbuf *out)
{
	if (atomic_load(&n->dead))
		return -ENOENT;
	return sbuf_printf(out, "state=%s\n", sstate_to_string(snapshot_state(sof(n))));
}

BWAIT_STREAM(swait_stream, snapshot_settled, snapshot_wait_line);

BCTL_FUNCS(snapshot_ctl, snapshot_ctl_table)

static const struct battr snapshot_attrs[] = {
	BCTL_ATTR(snapshot_ctl),
	{ .name = "state", .flags = BATTR_POLL | BATTR_VERSIONED, .show = show_state },
	{ .name = "id", .flags = BATTR_VERSIONED, .show = show_id },
	{ .name = "source", .flags = BATTR_VERSIONED, .show = show_source },
	{ .name = "size", .flags = BATTR_VERSIONED, .show = show_size },
	{ .name = "created", .flags = BATTR_VERSIONED, .show = show_created },
	{ .name = "ready", .show = show_ready },
	{ .name = "plugin", .flags = BATTR_CACHE, .show = show_plugin },
	{ .name = "info.json", .show = show_info },
	{ .name = "error", .show = battr_show_error },
	{ .name = "wait", .stream = &swait_stream },
};

static void snapshot_node_free(struct bnode *n)
{
	snapshot_free(n->priv);
}

const struct btype snapshot_type = {
	.name = "snapshot",
	.attrs = snapshot_attrs,
	.nattrs = sizeof(snapshot_attrs) / sizeof(snapshot_attrs[0]),
	.free = snapshot_node_free,
};

int snapshots_render_metrics(struct backend *b, struct sbuf *out)
{
	struct bnode *dir = snapshots_dir(b);
	size_t count[S_GONE] = { 0 };
	struct bnode **v;
	size_t n;
	int r;

	if (!dir)
		return 0;
	r = bnode_list(dir, &v, &n);
	bnode_unref(dir);
	if (r < 0)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		count[snapshot_state(sof(v[i]))]++;
	bnode_list_free(v, n);
	r = sbuf_adds(out, "# HELP nodefs_snapshots Snapshots by state.\n# TYPE nodefs_snapshots gauge\n");
	for (int i = 0; r >= 0 && i < S_GONE; i++)
		r = sbuf_printf(out, "nodefs_snapshots{state=\"%s\"} %zu\n", sstate_to_string(i), count[i]);
	return r < 0 ? r : 0;
}
