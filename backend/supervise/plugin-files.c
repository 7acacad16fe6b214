/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plugin-files: what plugins/NAME/process shows of a supervised plugin,
 * the health shown while it has no process to talk to, and whether a
 * reload's definition is the one it runs (pproc_same). Reads pp under its
 * lock; never changes the supervisor's state (plugin-proc.c owns that).
 */
#include "plugin-proc.h"

#include <stdio.h>
#include <string.h>

#include "backend-internal.h"
#include "sbuf.h"

#include "plugin-proc-internal.h"

/* ---- files ---- */

static bool strv_same(char *const *a, char *const *b)
{
	size_t i;

	for (i = 0; a[i] && b[i]; i++)
		if (strcmp(a[i], b[i]) != 0)
			return false;
	return !a[i] && !b[i];
}

bool pproc_same(struct pproc *pp, const struct plugin_def *def)
{
	char *const none[] = { NULL };

	if (pp->keep_running != def->keep_running || !pp->runtime != !def->runtime)
		return false;
	if (pp->runtime && (strcmp(pp->runtime, def->runtime) != 0 ||
			    strcmp(pp->image, def->image) != 0 || pp->node_plugin != def->node ||
			    pp->privileged != def->privileged ||
			    !strv_same(pp->mounts, def->mounts ? def->mounts : none)))
		return false;
	return strv_same(pp->argv, def->command ? def->command : none);
}

bool pproc_health(struct pproc *pp, struct storage_health_info *h)
{
	bool r;

	pthread_mutex_lock(&pp->lock);
	r = !pp->running && pp->why[0];
	if (r) {
		h->health = STORAGE_HEALTH_DOWN;
		h->since = pp->down_since;
		snprintf(h->reason, sizeof(h->reason), "%s", pp->why);
	}
	pthread_mutex_unlock(&pp->lock);
	return r;
}

/* What the supervisor is doing with the plugin, as process shows it. */
static const char *pp_state_name(enum pp_state st)
{
	switch (st) {
	case PP_IDLE: return "idle";
	case PP_BACKOFF: return "backoff";
	case PP_SPAWNING: return "spawning";
	case PP_STARTING: return "starting";
	case PP_UP: return "up";
	case PP_KILLING: return "killing";
	default: return "stopped";
	}
}

int pproc_show_process(struct pproc *pp, struct sbuf *out)
{
	/* set on the loop thread: a snapshot */
	enum pp_state st = __atomic_load_n(&pp->st, __ATOMIC_RELAXED);
	char t[64];
	int r;

	pthread_mutex_lock(&pp->lock);
	fmt_time(pp->started, t, sizeof(t));
	if (pp->running)
		r = sbuf_printf(out, "pid: %d\n", (int)pp->pid);
	else
		r = sbuf_printf(out, "pid: none\n");
	if (r >= 0)
		r = sbuf_printf(out, "supervision: %s\n", pp_state_name(st));
	if (r >= 0 && pp->runtime)
		r = sbuf_printf(out, "runtime: %s\nimage: %s\ncontainer: %s\n", pp->runtime, pp->image,
				pp->cid[0] ? pp->cid : "none");
	if (r >= 0)
		r = sbuf_printf(out, "started: %s\nrestarts: %u\nterminations: %llu\nlast_exit: %s\n"
				"adopted: %s\nkeep_running: %s\n",
				t[0] ? t : "never", pp->restarts, pp->terminations,
				pp->last_exit[0] ? pp->last_exit : "none", pp->adopted ? "yes" : "no",
				pp->keep_running ? "yes" : "no");
	if (r >= 0 && !pp->running && pp->why[0])
		r = sbuf_printf(out, "why: %s\n", pp->why);
	pthread_mutex_unlock(&pp->lock);
	if (r >= 0) {
		r = sbuf_adds(out, "command:");
		for (size_t i = 0; r >= 0 && pp->argv[i]; i++)
			r = sbuf_printf(out, " %s", pp->argv[i]);
		if (r >= 0)
			r = sbuf_addc(out, '\n');
	}
	return r;
}
