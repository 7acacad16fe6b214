/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * container-restart: a container's restart policy (restart=), kept by
 * nodefs with the decision, backoff and bounds the plugin supervisor uses
 * (supervise/restart.c) and due starts run on the same supervisor thread
 * (supervise/supervisor.c). The engine's own policy stays off, so every
 * exit reaches nodefs through the engine's events (container-sync.c) and
 * is judged here, under the container's lock, before EXITED is shown: a
 * waiter never sees an exit that is about to be restarted as final.
 *
 * It also owns what the service shows and records: the restarts and ports
 * files and the record's members of network=, port=, health= and restart=,
 * and the bindings the engine made (learned on a worker, served from
 * memory: a read of ports never waits on an engine).
 * Must not know ctl syntax or the engines' wire formats.
 */
#include "container-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "jw.h"
#include "log.h"
#include "supervisor.h"

static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The bounds follow the config, as the plugins' do (a reload changes them). */
static void bounds_locked(struct container *c)
{
	c->bo.base_ms = c->b->cfg->retry_backoff_ms ? c->b->cfg->retry_backoff_ms : 1000;
	c->bo.max_ms = c->b->cfg->retry_max_ms ? c->b->cfg->retry_max_ms : 120000;
	if (!c->bo.rng)
		c->bo.rng = (uint64_t)(uintptr_t)c ^ wall_ms();
}

bool container_final_locked(const struct container *c)
{
	return c->removed || (c->state == C_EXITED && !c->rs.due_ms);
}

int64_t container_policy_exit_locked(struct container *c, char *msg, size_t len)
{
	struct restart_exit ex = {
		.code = c->exit_code, .oom = c->oom_killed, .unhealthy = c->unhealthy_kill,
		.signal = c->exit_code > 128 && c->exit_code < 192 ? c->exit_code - 128 : 0,
	};
	uint64_t d = 0;

	c->has_last_exit = true;
	c->last_exit_code = c->exit_code;
	c->last_signal = ex.signal;
	c->last_oom = ex.oom;
	c->last_unhealthy = ex.unhealthy;
	c->unhealthy_kill = false;
	if (c->spec.restart.mode == RESTART_NO)
		return -1;
	bounds_locked(c);
	/* it ran longer than the longest wait: the doubling starts over (a run
	 * nodefs did not see begin, across a restart of nodefs, is not judged:
	 * the engine's times have whole seconds only) */
	if (c->run_start_ms)
		backoff_ran(&c->bo, loop_now_ms() - c->run_start_ms);
	c->run_start_ms = 0;
	if (restart_decide(&c->spec.restart, &c->rs, &c->bo, &ex, wall_ms(), &d) == RESTART_FINAL) {
		if (!c->rs.held && c->spec.restart.mode == RESTART_ON_FAILURE && restart_exit_failed(&ex))
			snprintf(msg, len, "final: %u restarts of %u made", c->rs.count, c->spec.restart.max);
		return -1;
	}
	c->restart_gen++;
	c->restart_delay_ms = d;
	if (c->spec.restart.max)
		snprintf(msg, len, "restart %u of %u in %llu ms", c->rs.count, c->spec.restart.max,
			 (unsigned long long)d);
	else
		snprintf(msg, len, "restart %u in %llu ms", c->rs.count, (unsigned long long)d);
	return (int64_t)d;
}

struct due {
	char name[65];
	unsigned gen;
};

/* On the supervisor thread: the start is due. The start itself is an
 * action on the container's queue (the engine call blocks). */
static void on_due(struct backend *b, void *ctx)
{
	struct due *d = ctx;
	struct bnode *n = atomic_load(&b->state) == BACKEND_STOPPING ? NULL :
			  bnode_lookup(containers_dir(b), d->name);
	struct container *c;
	bool go;

	if (!n)
		return;
	c = cof(n);
	pthread_mutex_lock(&c->lock);
	go = !c->removed && c->restart_gen == d->gen && c->rs.due_ms && c->state == C_EXITED;
	pthread_mutex_unlock(&c->lock);
	if (go)
		container_submit(c, CA_START, "start (restart policy)", NULL,
				 &(struct cact){ .by_policy = true, .gen = d->gen });
	bnode_unref(n);
}

void container_policy_arm(struct container *c, uint64_t delay_ms)
{
	struct due *d = calloc(1, sizeof(*d));
	struct nerr err = { 0 };

	if (!d) {
		bnode_set_error(c->node, "restart policy: out of memory: no restart armed");
		return;
	}
	snprintf(d->name, sizeof(d->name), "%s", c->name);
	pthread_mutex_lock(&c->lock);
	d->gen = c->restart_gen;
	pthread_mutex_unlock(&c->lock);
	if (supervisor_after(c->b, delay_ms, on_due, d, &err) < 0 && err.code != ESHUTDOWN) {
		log_warn("container %s: restart policy: %s", c->name, err.msg);
		bnode_set_error(c->node, err.msg);
	}
}

void container_policy_user_start(struct container *c)
{
	pthread_mutex_lock(&c->lock);
	restart_on_user_start(&c->rs);
	c->bo.attempt = 0;
	c->restart_gen++;
	pthread_mutex_unlock(&c->lock);
}

bool container_policy_user_stop(struct container *c)
{
	bool was;

	pthread_mutex_lock(&c->lock);
	was = c->rs.due_ms != 0 && c->state == C_EXITED;
	restart_on_user_stop(&c->rs);
	c->restart_gen++;
	pthread_mutex_unlock(&c->lock);
	if (was)
		bnode_changed(c->node);	/* the waiters: this exit is final now */
	return was;
}

void container_policy_start_failed(struct container *c, const char *why)
{
	char msg[96] = "";
	int64_t d;

	pthread_mutex_lock(&c->lock);
	c->exit_code = -1;
	d = container_policy_exit_locked(c, msg, sizeof(msg));
	pthread_mutex_unlock(&c->lock);
	log_warn("container %s: the restart policy's start failed: %s%s%s", c->name, why,
		 msg[0] ? "; " : "", msg);
	bnode_set_error(c->node, why);
	op_events_emit(c->b, "container", c->name, "EXITED", "EXITED", NULL, msg[0] ? msg : why);
	container_checkpoint(c, &(struct nerr){ 0 });
	if (d >= 0)
		container_policy_arm(c, (uint64_t)d);
	else
		bnode_changed(c->node);
}

void container_policy_recover(struct container *c)
{
	uint64_t now = wall_ms(), delay = 0;
	bool arm = false;

	pthread_mutex_lock(&c->lock);
	if (!c->removed && c->id && c->state == C_EXITED) {
		if (c->rs.due_ms) {
			arm = true;
			delay = c->rs.due_ms > now ? c->rs.due_ms - now : 0;
		} else if (c->rs.held && c->spec.restart.mode == RESTART_ALWAYS) {
			/* Docker's `always`: a container its user stopped comes
			 * back when the daemon does (unless-stopped does not) */
			restart_on_user_start(&c->rs);
			c->rs.count++;
			c->rs.total++;
			c->rs.due_ms = now;
			c->restart_gen++;
			arm = true;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (arm)
		container_policy_arm(c, delay);
}

/* ---- the record ---- */

/* The policy's state (the spec's restart=, ports and health are the
 * option table's members). */
void container_service_write_locked(struct container *c, struct jw *w)
{
	jw_kint(w, "restarts", c->rs.count);
	jw_kint(w, "restarts_total", (long long)c->rs.total);
	jw_kbool(w, "restart_held", c->rs.held);
	jw_kbool(w, "restart_final", c->rs.final);
	jw_kint(w, "restart_due_unix_ms", (long long)c->rs.due_ms);
	jw_kint(w, "restart_attempt", c->bo.attempt);
	if (c->has_last_exit) {
		jw_kint(w, "last_exit_code", c->last_exit_code);
		jw_kint(w, "last_signal", c->last_signal);
		jw_kbool(w, "last_oom", c->last_oom);
		jw_kbool(w, "last_unhealthy", c->last_unhealthy);
	}
	if (c->ports_seen)
		jw_kstr(w, "ports_seen", c->ports_seen);
}

void container_service_read(struct container *c, json_t *j)
{
	json_t *v;

	c->rs.count = (unsigned)json_integer_value(json_object_get(j, "restarts"));
	c->rs.total = (unsigned long long)json_integer_value(json_object_get(j, "restarts_total"));
	c->rs.held = json_is_true(json_object_get(j, "restart_held"));
	c->rs.final = json_is_true(json_object_get(j, "restart_final"));
	c->rs.due_ms = (uint64_t)json_integer_value(json_object_get(j, "restart_due_unix_ms"));
	c->bo.attempt = (unsigned)json_integer_value(json_object_get(j, "restart_attempt"));
	if ((v = json_object_get(j, "last_exit_code"))) {
		c->has_last_exit = true;
		c->last_exit_code = (int)json_integer_value(v);
		c->last_signal = (int)json_integer_value(json_object_get(j, "last_signal"));
		c->last_oom = json_is_true(json_object_get(j, "last_oom"));
		c->last_unhealthy = json_is_true(json_object_get(j, "last_unhealthy"));
	}
	/* the last run's bindings, shown until a look after recovery asks
	 * again (ports_gen differs) */
	if ((v = json_object_get(j, "ports_seen")) && json_is_string(v) &&
	    json_string_length(v) < 16384 &&
	    (c->ports_seen = strdup(json_string_value(v))))
		c->ports_gen = c->run_gen + 1;
}

/* ---- files ---- */

/* restarts: the policy, the count, the last exit and when the next start
 * is due. */
int container_show_restarts(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	char pol[32], t[64] = "", code[16];
	int r;

	pthread_mutex_lock(&c->lock);
	restart_policy_format(&c->spec.restart, pol, sizeof(pol));
	if (c->rs.due_ms)
		fmt_time((time_t)(c->rs.due_ms / 1000), t, sizeof(t));
	r = sbuf_printf(out, "policy: %s\ncount: %u\ntotal: %llu\n", pol, c->rs.count, c->rs.total);
	if (r >= 0 && c->has_last_exit)
		r = sbuf_printf(out, "last_exit: exit_code=%s signal=%d oom=%d%s\n",
				container_exit_text(c->last_exit_code, code, sizeof(code)),
				c->last_signal, c->last_oom, c->last_unhealthy ? " unhealthy=1" : "");
	else if (r >= 0)
		r = sbuf_adds(out, "last_exit: none\n");
	if (r >= 0)
		r = sbuf_printf(out, "next: %s\n", c->rs.due_ms ? t : c->rs.held ? "none (stopped by the user)" :
				c->rs.final ? "none (final exit)" : "none");
	pthread_mutex_unlock(&c->lock);
	return r;
}

void container_ports_new_run_locked(struct container *c)
{
	c->run_gen++;
	free(c->ports_seen);
	c->ports_seen = NULL;
}

void container_ports_learn(struct container *c, void *h, const char *id)
{
	struct sbuf out = SBUF_INIT(16384);
	struct nerr err = { 0 };
	unsigned gen;
	bool want;
	char *seen;

	if (!c->spec.ports.n || !c->eng->ops->ports)
		return;
	pthread_mutex_lock(&c->lock);
	want = (c->state == C_RUNNING || c->state == C_PAUSED) && !c->removed &&
	       (!c->ports_seen || c->ports_gen != c->run_gen);
	gen = c->run_gen;
	pthread_mutex_unlock(&c->lock);
	if (!want)
		return;
	if (c->eng->ops->ports(h, id, &out, &err) < 0 || !out.len ||
	    !(seen = strndup(out.buf, out.len))) {
		/* not known now (the engine not answering, or nothing bound
		 * yet): the file shows them as asked, the next look asks again */
		sbuf_free(&out);
		return;
	}
	sbuf_free(&out);
	pthread_mutex_lock(&c->lock);
	if (c->run_gen == gen && !c->removed) {
		free(c->ports_seen);
		c->ports_seen = seen;
		c->ports_gen = gen;
		seen = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	free(seen);
}

/* ports: as the engine reported them for this run (the host port it
 * chose), kept by container_ports_learn; before the container runs, or
 * while they are not known, as asked. Never an engine call: a FUSE thread
 * serves it. */
int container_show_ports(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	char line[128];
	int r = 0;

	if (!c->spec.ports.n)
		return 0;
	pthread_mutex_lock(&c->lock);
	if (c->ports_seen && (c->state == C_RUNNING || c->state == C_PAUSED))
		r = sbuf_adds(out, c->ports_seen);
	else
		for (size_t i = 0; r >= 0 && i < c->spec.ports.n; i++) {
			svc_port_format(&c->spec.ports.v[i], line, sizeof(line));
			r = sbuf_printf(out, "%s\n", line);
		}
	pthread_mutex_unlock(&c->lock);
	return r < 0 ? r : 0;
}
