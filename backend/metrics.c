/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * metrics: metrics/nodefs.prom in the Prometheus text exposition format
 * (HELP and TYPE lines, escaped label values, a trailing newline). Each
 * module's figures are rendered here from one snapshot per read.
 */
#include "backend-internal.h"

#include <stdio.h>
#include <string.h>
#include "nodefs-config.h"

/* Label values escape backslash, double quote and newline. */
int metrics_label(struct sbuf *out, const char *v)
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

static int family(struct sbuf *out, const char *name, const char *type, const char *help)
{
	return sbuf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

int metrics_render(struct backend *b, struct sbuf *out)
{
	struct timespec now;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &now);
	r = family(out, "nodefs_build_info", "gauge", "Build of the running nodefs daemon.");
	if (r >= 0)
		r = sbuf_printf(out, "nodefs_build_info{version=\"%s\"} 1\n", NODEFS_VERSION);
	if (r >= 0)
		r = family(out, "nodefs_up", "gauge", "1 when the daemon is READY.");
	if (r >= 0)
		r = sbuf_printf(out, "nodefs_up %d\n", atomic_load(&b->state) == BACKEND_READY);
	if (r >= 0)
		r = family(out, "nodefs_start_time_seconds", "gauge", "Start time of the daemon since the epoch.");
	if (r >= 0)
		r = sbuf_printf(out, "nodefs_start_time_seconds %lld\n", (long long)b->started);
	if (r >= 0)
		r = family(out, "nodefs_runtime_up", "gauge", "1 when the container runtime answers.");
	for (size_t i = 0; r >= 0 && i < b->nengines; i++) {
		struct engine *e = &b->engines[i];
		bool up;

		pthread_mutex_lock(&e->lock);
		up = e->healthy;
		pthread_mutex_unlock(&e->lock);
		r = sbuf_printf(out, "nodefs_runtime_up{runtime=\"%s\"} %d\n", e->ops->name, up);
	}
	if (r >= 0)
		r = plugins_render_metrics(b, out);
	if (r >= 0)
		r = volumes_render_metrics(b, out);
	if (r >= 0)
		r = containers_render_metrics(b, out);
	if (r >= 0 && b->metrics_hook)
		r = b->metrics_hook(b->metrics_hook_ctx, out);	/* fs: FUSE requests */
	return r;
}
