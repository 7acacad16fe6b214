/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plugin-probe: whether a supervised plugin answers. While it starts, the
 * socket is watched for and a Probe sent once it is there; while it is up,
 * a Probe goes out every probe interval. Probes run on the worker pool
 * (the call blocks: plugins/ makes it through links.h) and post their
 * answer back to the supervisor thread, which kills a plugin that does not
 * answer in time (plugin-proc.c ends and restarts it). It knows nothing of
 * the plugin's protocol but the one Probe, and nothing of spawning.
 */
#include "plugin-proc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend-internal.h"
#include "links.h"
#include "log.h"

#include "plugin-proc-internal.h"

/* ---- probes (worker pool) ---- */

struct probe_job {
	struct pproc *pp;
	struct bnode *node;	/* keeps the plugin, and its storage handle, alive */
	unsigned gen;
	bool answered;
	char why[NERR_MSG_MAX];
};

static void probe_done(struct loop *l, void *ud);

static void probe_work(void *arg)
{
	struct probe_job *j = arg;
	struct pproc *pp = j->pp;
	const struct backend_links *ln = pp->b->links;
	struct nerr err = { 0 };
	bool ready;
	int r = -ECANCELED;

	/* plugins/ probes through the plugin's storage handle (links.h):
	 * the supervisor knows processes, not the plugin's protocol */
	if (ln && ln->plugin_probe)
		r = ln->plugin_probe(j->node, &ready, &err);
	/* any reply of the plugin's, an error too, is an answer */
	j->answered = r >= 0 || (r != -EAGAIN && r != -ETIMEDOUT && r != -ECANCELED);
	if (r < 0)
		snprintf(j->why, sizeof(j->why), "%s", err.code ? err.msg : strerror(-r));
	if (loop_submit(pp->sup->loop, probe_done, j) < 0) {
		bnode_unref(j->node);
		pproc_unref(j->pp);
		free(j);
	}
}

static void probe_submit(struct pproc *pp)
{
	struct probe_job *j;

	if (pp->probing)
		return;
	j = calloc(1, sizeof(*j));
	if (!j)
		return;
	j->node = pp_node_ref(pp);
	if (!j->node) {
		free(j);
		return;
	}
	j->pp = pp_ref(pp);
	j->gen = pp->gen;
	pp->probing = true;
	pp->probe_sent_ms = loop_now_ms();
	if (work_submit(pp->b->work, probe_work, j) < 0) {
		pp->probing = false;
		bnode_unref(j->node);
		pproc_unref(j->pp);
		free(j);
	}
}

/* How long a Probe may take before it counts as unanswered. */
static uint64_t probe_deadline_ms(struct pproc *pp)
{
	uint64_t ms = pp->b->cfg->csi_timeout_ms;

	return ms == 0 || ms > 10000 ? 10000 : ms;
}

static uint64_t probe_every_ms(struct pproc *pp)
{
	uint64_t ms = pp->b->cfg->csi_timeout_ms;

	return ms < 1000 ? 1000 : ms > 5000 ? 5000 : ms;
}

static void probe_done(struct loop *l, void *ud)
{
	struct probe_job *j = ud;
	struct pproc *pp = j->pp;

	pp->probing = false;
	if (j->gen != pp->gen || pp->stopping || pp->st == PP_GONE || pp->st == PP_KILLING)
		goto out;
	if (j->answered) {
		pp->probe_fails = 0;
		if (pp->st == PP_STARTING) {
			pthread_mutex_lock(&pp->lock);
			pp->why[0] = '\0';
			pp->down_since = 0;
			bool adopted = pp->adopted;
			pid_t pid = pp->pid;
			pthread_mutex_unlock(&pp->lock);
			pp->st = PP_UP;
			pp->up_since_ms = loop_now_ms();
			if (adopted) {
				log_info("plugin %s: adopted pid %d, started by an earlier run", pp->name,
					 (int)pid);
				events_emit(pp->b->events, "plugin", pp->name, NULL, "adopted", NULL, NULL);
			}
			pp_arm(pp, probe_every_ms(pp), pp_on_tick);
			pp_changed(pp);
		} else if (pp->st == PP_UP) {
			/* it lived longer than the longest wait: the doubling starts over */
			backoff_ran(&pp->bo, loop_now_ms() - pp->up_since_ms);
		}
		goto out;
	}
	if (pp->st == PP_UP && ++pp->probe_fails >= PROBE_FAILS_MAX) {
		pp_log_event(pp, "pid %d stopped answering Probe (%s): killing it", (int)pp->pid, j->why);
		pp_set_why(pp, "stopped answering Probe: %s", j->why);
		pp_end_process(pp, SIGKILL, 0);
	}
out:
	bnode_unref(j->node);
	pproc_unref(j->pp);
	free(j);
}

void pp_on_tick(struct loop *l, struct loop_timer *t, void *ud)
{
	struct pproc *pp = ud;
	struct stat st;

	pp->timer = NULL;
	if (pp->st == PP_STARTING) {
		if (loop_now_ms() >= pp->deadline_ms) {
			bool adopted = pp->adopted;

			pp_log_event(pp, "pid %d did not answer Probe within %u s: killing it", (int)pp->pid,
				  (adopted ? ADOPT_TIMEOUT_MS : START_TIMEOUT_MS) / 1000);
			pp_set_why(pp, "pid %d did not answer Probe within %u s", (int)pp->pid,
				(adopted ? ADOPT_TIMEOUT_MS : START_TIMEOUT_MS) / 1000);
			pp_end_process(pp, SIGKILL, 0);
			return;
		}
		if (stat(pp->sock, &st) == 0 && S_ISSOCK(st.st_mode))
			probe_submit(pp);
		pp_arm(pp, SOCKET_POLL_MS, pp_on_tick);
	} else if (pp->st == PP_UP) {
		/* a Probe unanswered for as long as PROBE_FAILS_MAX deadlines:
		 * hung (the call itself may wait for csi_timeout) */
		if (pp->probing &&
		    loop_now_ms() - pp->probe_sent_ms >= PROBE_FAILS_MAX * probe_deadline_ms(pp)) {
			pp_log_event(pp, "pid %d stopped answering Probe (none for %llu ms): killing it",
				  (int)pp->pid, (unsigned long long)(loop_now_ms() - pp->probe_sent_ms));
			pp_set_why(pp, "stopped answering Probe");
			pp_end_process(pp, SIGKILL, 0);
			return;
		}
		probe_submit(pp);
		pp_arm(pp, probe_every_ms(pp), pp_on_tick);
	}
}
