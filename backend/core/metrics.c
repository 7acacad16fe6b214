/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * metrics: metrics/nodefs.prom in the Prometheus text exposition format
 * (version 0.0.4: HELP and TYPE once per family, before its samples, the
 * samples of a family together, escaped label values, base units, _total
 * counters, a trailing newline).
 *
 * One read renders the whole file once (fs serves later offsets from that
 * snapshot), so a reader sees one consistent set of figures. The daemon's
 * own figures and the checkpoints' are rendered here; each kind renders its
 * families through its table (kind.h, in the kinds' order: its
 * render_metrics_first ones after the daemon's, its render_metrics ones
 * after the checkpoints'); counters that outlive their objects are kept as
 * tallies beside the event stream (events.h, events_render_tallies); fs
 * appends its FUSE request figures through the metrics hook. Names no
 * kind. Rendering never calls a plugin or an engine over the
 * network: it reads what the modules keep.
 */
#include "backend-internal.h"

#include <stdio.h>
#include <string.h>
#include "hist.h"
#include "kind.h"
#include "nodefs-config.h"
#include "store.h"

/* Append v as a label value: backslash, double quote and newline escaped,
 * as the format requires. Objects' names are checked to [A-Za-z0-9._-]
 * when made, but a label value may come from elsewhere (a version). -E2BIG/-ENOMEM from out. */
static int metrics_label(struct sbuf *out, const char *v)
{
	int r = 0;

	for (; r >= 0 && *v; v++) {
		switch (*v) {
		case '\\': r = sbuf_adds(out, "\\\\"); break;
		case '"': r = sbuf_adds(out, "\\\""); break;
		case '\n': r = sbuf_adds(out, "\\n"); break;
		default: r = sbuf_addc(out, *v);
		}
	}
	return r;
}

/* name{key="value"} value, the value escaped. */
static int sample1(struct sbuf *out, const char *name, const char *key, const char *value,
		   long long v)
{
	int r = sbuf_printf(out, "%s{%s=\"", name, key);

	if (r >= 0)
		r = metrics_label(out, value);
	if (r >= 0)
		r = sbuf_printf(out, "\"} %lld\n", v);
	return r;
}

static int family(struct sbuf *out, const char *name, const char *type, const char *help)
{
	return sbuf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static int render_daemon(struct backend *b, struct sbuf *out)
{
	struct timespec now;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &now);
	r = family(out, "nodefs_build_info", "gauge",
		   "Build of the running nodefs daemon; the value is always 1.");
	if (r >= 0)
		r = sample1(out, "nodefs_build_info", "version", NODEFS_VERSION, 1);
	if (r >= 0)
		r = family(out, "nodefs_up", "gauge", "1 when the daemon is READY, 0 while it recovers.");
	if (r >= 0)
		r = sbuf_printf(out, "nodefs_up %d\n", atomic_load(&b->state) == BACKEND_READY);
	if (r >= 0)
		r = family(out, "nodefs_start_time_seconds", "gauge",
			   "Start time of the daemon in seconds since the epoch.");
	if (r >= 0)
		r = sbuf_printf(out, "nodefs_start_time_seconds %lld\n", (long long)b->started);
	if (r >= 0)
		r = family(out, "nodefs_events_total", "counter",
			   "Events emitted on the events file since the daemon started.");
	if (r >= 0)
		r = sbuf_printf(out, "nodefs_events_total %llu\n",
				(unsigned long long)(events_head(b->events) - 1));
	return r;
}

/* Checkpoints: what each record write costs is the disk's fsync latency,
 * the figure to watch when commands slow down on a busy disk. */
static int render_checkpoints(struct backend *b, struct sbuf *out)
{
	static const char h[] = "nodefs_checkpoint_write_duration_seconds";
	struct store_kind_stats st[8];
	int n = store_stats(b->store, st, 8), r;

	struct store_io io;

	r = family(out, h, "histogram",
		   "Time from a checkpoint record queued to durable in the journal and written to its "
		   "file, by kind.");
	for (int i = 0; r >= 0 && i < n; i++) {
		char labels[32];

		snprintf(labels, sizeof(labels), "kind=\"%s\"", st[i].kind);
		r = hist_render(out, h, labels, store_bucket_le, STORE_BUCKETS, st[i].write);
	}
	static const struct {
		const char *name, *help;
	} counters[] = {
		{ "nodefs_checkpoint_write_errors_total",
		  "Checkpoint writes that failed (the action was not acknowledged), by kind." },
		{ "nodefs_checkpoint_removals_total",
		  "Checkpoint records removed (objects destroyed, operations trimmed), by kind." },
	};
	for (size_t c = 0; r >= 0 && c < sizeof(counters) / sizeof(counters[0]); c++) {
		r = family(out, counters[c].name, "counter", counters[c].help);
		for (int i = 0; r >= 0 && i < n; i++)
			r = sample1(out, counters[c].name, "kind", st[i].kind,
				    (long long)(c == 0 ? st[i].errors : st[i].removals));
	}
	/* the journal's disk flushes: per command, the figure group commit
	 * keeps low (one per step and one before the writer is answered,
	 * shared by the commands that flush together) */
	store_io_stats(b->store, &io);
	static const struct {
		const char *name, *help;
	} io_counters[] = {
		{ "nodefs_checkpoint_flushes_total",
		  "Journal flushes (one fdatasync each; concurrent commands share one)." },
		{ "nodefs_checkpoint_records_total",
		  "Checkpoint records and removals the journal's flushes carried." },
		{ "nodefs_checkpoint_syncfs_total",
		  "Times the record files were made durable with one syncfs and the journal emptied." },
	};
	const unsigned long long io_v[] = { io.flushes, io.records, io.syncfs };

	for (size_t c = 0; r >= 0 && c < sizeof(io_counters) / sizeof(io_counters[0]); c++) {
		r = family(out, io_counters[c].name, "counter", io_counters[c].help);
		if (r >= 0)
			r = sbuf_printf(out, "%s %llu\n", io_counters[c].name, io_v[c]);
	}
	return r;
}

int metrics_render(struct backend *b, struct sbuf *out)
{
	int r;

	r = render_daemon(b, out);
	for (size_t i = 0; r >= 0 && i < b->nkinds; i++)
		if (b->kinds[i]->render_metrics_first)
			r = b->kinds[i]->render_metrics_first(b, out);
	if (r >= 0)
		r = render_checkpoints(b, out);
	for (size_t i = 0; r >= 0 && i < b->nkinds; i++)
		if (b->kinds[i]->render_metrics)
			r = b->kinds[i]->render_metrics(b, out);
	if (r >= 0 && b->metrics_hook)
		r = b->metrics_hook(b->metrics_hook_ctx, out);	/* fs: FUSE requests */
	return r;
}
