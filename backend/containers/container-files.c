/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * container-files: what containers/ and containers/NAME/ show (state, id,
 * pid, exit_code, stats, logs, wait, info.json, ...), the two directories'
 * types, and the container families of metrics/nodefs.prom. stats and logs
 * are read from the reading thread (the drivers' contract: cgroup files and
 * a log, microseconds); nothing else here calls an engine.
 *
 * It must not change a container: every function reads under its lock.
 */
#include "container-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fstree.h"
#include "jw.h"

/* ---- files ---- */

static int show_state(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	enum cstate s;

	pthread_mutex_lock(&c->lock);
	s = c->state;
	pthread_mutex_unlock(&c->lock);
	return sbuf_printf(out, "%s\n", cstate_to_string(s));
}

static int show_runtime(struct bnode *n, struct sbuf *out)
{
	return sbuf_printf(out, "%s\n", cof(n)->eng->ops->name);
}

static int show_image(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);

	const struct cspec *s = &c->spec;

	if (s->image)
		return sbuf_printf(out, "%s\n", s->image);
	if (s->template_name)
		return sbuf_printf(out, "%s%s%s%s%s\n", s->template_name,
				   s->distro ? ":" : "", s->distro ? s->distro : "",
				   s->release ? ":" : "", s->release ? s->release : "");
	return 0;
}

static int show_id(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	int r = 0;

	pthread_mutex_lock(&c->lock);
	if (c->id)
		r = sbuf_printf(out, "%s\n", c->id);
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int show_pid(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	int r;

	pthread_mutex_lock(&c->lock);
	r = c->pid ? sbuf_printf(out, "%d\n", (int)c->pid) : 0;
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int show_exit_code(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	int r;

	pthread_mutex_lock(&c->lock);
	char t[16];

	r = c->has_exit ? sbuf_printf(out, "%s\n", container_exit_text(c->exit_code, t, sizeof(t)))
			: 0;
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int show_oom(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	int r;

	pthread_mutex_lock(&c->lock);
	r = sbuf_printf(out, "%d\n", c->oom_killed);
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int show_started(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	char t[64];

	pthread_mutex_lock(&c->lock);
	fmt_time(c->started_at, t, sizeof(t));
	pthread_mutex_unlock(&c->lock);
	return t[0] ? sbuf_printf(out, "%s\n", t) : 0;
}

static int show_finished(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	char t[64];

	pthread_mutex_lock(&c->lock);
	fmt_time(c->finished_at, t, sizeof(t));
	pthread_mutex_unlock(&c->lock);
	return t[0] ? sbuf_printf(out, "%s\n", t) : 0;
}

static int show_progress(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	int r;

	pthread_mutex_lock(&c->lock);
	r = c->progress[0] ? sbuf_printf(out, "%s\n", c->progress) : 0;
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* "key value\n" for show_stats; value in decimal, with six decimals when
 * micro is set (v is then in millionths), as "%.6f" would. */
static char *stats_line(char *p, const char *key, uint64_t v, bool micro)
{
	char d[24];
	int k = 0;

	while (*key)
		*p++ = *key++;
	*p++ = ' ';
	do {
		d[k++] = (char)('0' + v % 10);
		v /= 10;
		if (micro && k == 6)
			d[k++] = '.';
	} while (v || (micro && k < 8));
	while (k)
		*p++ = d[--k];
	*p++ = '\n';
	return p;
}

static uint64_t stats_micros(double s)
{
	return s > 0 && s < 1e12 ? (uint64_t)(s * 1e6 + 0.5) : 0;
}

/* stats and logs read the container's cgroup files and log (microseconds,
 * per the drivers' contract), so they are served from the reading thread.
 * Formatted by hand: sbuf_printf's two vsnprintf passes over two doubles
 * cost more than the four cgroup reads. */
static int show_stats(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	struct rt_stats st = { 0 };
	struct nerr err = { 0 };
	char id[256], buf[6 * 48], *p = buf, *sandbox = NULL;
	uint64_t sb = 0;
	bool running;

	pthread_mutex_lock(&c->lock);
	running = (c->state == C_RUNNING || c->state == C_PAUSED || c->state == C_STOPPING) &&
		  c->id && !c->removed && strlen(c->id) < sizeof(id);
	if (running)
		strcpy(id, c->id);
	if (c->sandbox)
		sandbox = strdup(c->sandbox);
	pthread_mutex_unlock(&c->lock);
	if (sandbox)
		(void)fstree_bytes(sandbox, &sb);
	free(sandbox);
	if (running) {
		_cleanup_engine_ struct engine_ref *h = engine_hold(c->eng);

		if (h)
			c->eng->ops->stats(h->h, id, &st, &err);
	}
	p = stats_line(p, "cpu_user_seconds", stats_micros(st.cpu_user_seconds), true);
	p = stats_line(p, "cpu_system_seconds", stats_micros(st.cpu_system_seconds), true);
	p = stats_line(p, "memory_bytes", st.memory_bytes, false);
	p = stats_line(p, "memory_limit_bytes", st.memory_limit_bytes, false);
	p = stats_line(p, "pids", st.pids, false);
	p = stats_line(p, "sandbox_bytes", sb, false);
	return sbuf_add(out, buf, (size_t)(p - buf));
}

static int show_logs(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	_cleanup_engine_ struct engine_ref *h = NULL;
	struct nerr err = { 0 };
	char id[256];
	int r;

	if (!container_current_id(c, id, sizeof(id)) || !(h = engine_hold(c->eng)))
		return 0;
	r = c->eng->ops->logs(h->h, id, LOGS_MAX, out, &err);
	if (r < 0)
		bnode_set_error(n, err.msg);
	return r < 0 && r != -ENOENT ? r : 0;
}

static int show_exec_output(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	int r;

	pthread_mutex_lock(&c->lock);
	r = c->exec_out.len ? sbuf_add(out, c->exec_out.buf, c->exec_out.len) : 0;
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int show_exec_exit_code(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	int r;

	pthread_mutex_lock(&c->lock);
	r = c->has_exec ? sbuf_printf(out, "%d\n", c->exec_exit) : 0;
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int show_sandbox(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	int r;

	pthread_mutex_lock(&c->lock);
	r = c->sandbox ? sbuf_printf(out, "%s\n", c->sandbox) : 0;
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* fetch: one line per fetch=: URI, state, bytes, total, how it was
 * served, sha256, seconds (its own time, so far while it runs) */
static int show_fetch(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	uint64_t now = fetch_now_ns();
	int r = 0;

	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; r >= 0 && i < c->spec.fetches.n; i++) {
		struct fetch_status st = c->fst ? c->fst[i] : (struct fetch_status){ 0 };

		r = sbuf_printf(out, "%s %s %llu %llu %s %s %.6f\n", c->spec.fetches.v[i].uri,
				fetch_state_to_string(st.state), (unsigned long long)st.bytes,
				(unsigned long long)st.total, fetch_served_to_string(st.served),
				st.sha256[0] ? st.sha256 : "-", fetch_status_seconds(&st, now));
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int show_limits(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	int r;

	pthread_mutex_lock(&c->lock);
	r = sbuf_printf(out, "cpus %g\nmemory_bytes %llu\npids %lld\n", c->spec.cpus,
			(unsigned long long)c->spec.memory, (long long)c->spec.pids);
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int write_info(struct bnode *n, struct sbuf *out, bool redact)
{
	struct container *c = cof(n);
	struct jw w;

	jw_init(&w, out, 2);
	jw_obj(&w);
	pthread_mutex_lock(&c->lock);
	container_write_locked(c, &w, redact);
	pthread_mutex_unlock(&c->lock);
	jw_obj_end(&w);
	return jw_end(&w) ?: sbuf_addc(out, '\n');
}

/* info.json: any user's, environment values "<redacted>"; spec.json: the
 * whole record, root's and the read group's. */
static int show_info(struct bnode *n, struct sbuf *out)
{
	return write_info(n, out, true);
}

static int show_spec(struct bnode *n, struct sbuf *out)
{
	return write_info(n, out, false);
}

/* wait: blocks until the container has exited, then one line, then EOF. */
static bool container_ended(struct bnode *n)
{
	struct container *c = cof(n);
	bool e;

	/* an exit its restart policy restarts is not the end */
	pthread_mutex_lock(&c->lock);
	e = container_final_locked(c);
	pthread_mutex_unlock(&c->lock);
	return e;
}

static int container_wait_line(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	int r;

	char t[16];
	int code;

	pthread_mutex_lock(&c->lock);
	code = c->has_exit ? c->exit_code : -1;
	/* why the code is unknown: the engine lost it (LXC: init died while
	 * nodefs was down), its container was removed outside nodefs, or
	 * nodefs destroyed it before it ended */
	r = sbuf_printf(out, "exit_code=%s oom_killed=%d%s\n", container_exit_text(code, t, sizeof(t)),
			c->oom_killed, c->removed ? " reason=destroyed" : code >= 0 ? ""
			: !c->id ? " reason=gone" : " reason=lost");
	pthread_mutex_unlock(&c->lock);
	return r;
}

BWAIT_STREAM(wait_stream, container_ended, container_wait_line);

BCTL_FUNCS(container_ctl, container_ctl)

static const struct battr container_attrs[] = {
	BCTL_ATTR(container_ctl),
	{ .name = "state", .flags = BATTR_POLL | BATTR_VERSIONED, .show = show_state },
	{ .name = "runtime", .flags = BATTR_CACHE, .show = show_runtime },
	{ .name = "image", .flags = BATTR_CACHE, .show = show_image },
	{ .name = "id", .flags = BATTR_CACHE, .show = show_id },
	{ .name = "pid", .show = show_pid },
	{ .name = "exit_code", .show = show_exit_code },
	{ .name = "oom_killed", .show = show_oom },
	{ .name = "started_at", .show = show_started },
	{ .name = "finished_at", .show = show_finished },
	{ .name = "limits", .show = show_limits },
	{ .name = "sandbox", .show = show_sandbox },
	{ .name = "fetch", .flags = BATTR_POLL, .show = show_fetch },
	{ .name = "stats", .flags = BATTR_AGED, .show = show_stats },
	{ .name = "logs", .flags = BATTR_PRIV, .show = show_logs },
	{ .name = "progress", .flags = BATTR_POLL, .show = show_progress },
	{ .name = "exec_output", .flags = BATTR_PRIV, .show = show_exec_output },
	{ .name = "exec_exit_code", .show = show_exec_exit_code },
	{ .name = "wait", .stream = &wait_stream },
	{ .name = "restarts", .flags = BATTR_POLL, .show = container_show_restarts },
	{ .name = "ports", .show = container_show_ports },
	{ .name = "health", .flags = BATTR_POLL, .show = container_show_health },
	{ .name = "error", .show = battr_show_error },
	{ .name = "info.json", .show = show_info },
	{ .name = "spec.json", .flags = BATTR_PRIV, .show = show_spec },
};

static void container_node_free(struct bnode *n)
{
	container_free(n->priv);
}

const struct btype container_type = {
	.name = "container",
	.attrs = container_attrs,
	.nattrs = sizeof(container_attrs) / sizeof(container_attrs[0]),
	.free = container_node_free,
};

static int containers_ctl_store(struct bnode *n, const char *l, size_t len, struct breq *rq)
{
	return bctl_dispatch(&containers_ctl, n, l, len, rq);
}

static int containers_ctl_check(struct bnode *n, const char *l, size_t len, struct nerr *err)
{
	return bctl_check(&containers_ctl, n, l, len, err);
}

/* containers/ctl: the command lines, then the option table's lines */
static int containers_ctl_usage(struct bnode *n, struct sbuf *out)
{
	int r = bctl_usage(&containers_ctl, out);

	if (r >= 0)
		r = sbuf_adds(out, "options (name=VALUE, runtimes, what):\n");
	return r < 0 ? r : copts_usage(out);
}

static const struct battr containers_attrs[] = {
	{ .name = "ctl", .flags = BATTR_CTL, .show = containers_ctl_usage,
	  .store = containers_ctl_store, .check = containers_ctl_check },
	{ .name = "error", .show = battr_show_error },
};

const struct btype containers_type = {
	.name = "containers",
	.attrs = containers_attrs,
	.nattrs = sizeof(containers_attrs) / sizeof(containers_attrs[0]),
};

int containers_render_metrics(struct backend *b, struct sbuf *out)
{
	struct cm {
		bool has_stats;
		struct rt_stats st;
		uint64_t exits[ARRAY_SIZE(exit_reasons)];
		unsigned long long restarts;
		int hstate;
	} *m;
	struct bnode **v;
	size_t n;
	int r;

	if (bnode_list(containers_dir(b), &v, &n) < 0)
		return -ENOMEM;
	m = calloc(n ? n : 1, sizeof(*m));
	if (!m) {
		bnode_list_free(v, n);
		return -ENOMEM;
	}
	/* one pass collects, so every family shows the same moment and each
	 * family's samples stay together, as the format requires */
	for (size_t i = 0; i < n; i++) {
		struct container *c = cof(v[i]);
		struct nerr err = { 0 };
		char id[256];
		bool running;

		pthread_mutex_lock(&c->lock);
		running = c->state == C_RUNNING || c->state == C_PAUSED;
		memcpy(m[i].exits, c->exits, sizeof(m[i].exits));
		m[i].restarts = c->rs.total;
		m[i].hstate = c->hstate;
		pthread_mutex_unlock(&c->lock);
		if (running && container_current_id(c, id, sizeof(id))) {
			_cleanup_engine_ struct engine_ref *h = engine_hold(c->eng);

			m[i].has_stats = h && c->eng->ops->stats(h->h, id, &m[i].st, &err) >= 0;
		}
	}
	r = sbuf_adds(out, "# HELP nodefs_containers Containers by runtime and state.\n"
			   "# TYPE nodefs_containers gauge\n");
	for (size_t e = 0; r >= 0 && e < engines_of(b)->n; e++)
		for (int s = 0; r >= 0 && s <= C_LAST; s++) {
			size_t count = 0;
			for (size_t i = 0; i < n; i++)
				count += cof(v[i])->eng == &engines_of(b)->v[e] && cof(v[i])->state == (enum cstate)s;
			if (count)
				r = sbuf_printf(out, "nodefs_containers{runtime=\"%s\",state=\"%s\"} %zu\n",
						engines_of(b)->v[e].ops->name, cstate_names[s], count);
		}
	if (r >= 0)
		r = sbuf_adds(out, "# HELP nodefs_container_memory_bytes Memory the container uses.\n"
				   "# TYPE nodefs_container_memory_bytes gauge\n");
	for (size_t i = 0; r >= 0 && i < n; i++)
		if (m[i].has_stats)
			r = sbuf_printf(out, "nodefs_container_memory_bytes{container=\"%s\"} %llu\n",
					cof(v[i])->name, (unsigned long long)m[i].st.memory_bytes);
	if (r >= 0)
		r = sbuf_adds(out, "# HELP nodefs_container_cpu_seconds_total CPU time the container used, by mode.\n"
				   "# TYPE nodefs_container_cpu_seconds_total counter\n");
	for (size_t i = 0; r >= 0 && i < n; i++)
		if (m[i].has_stats)
			r = sbuf_printf(out, "nodefs_container_cpu_seconds_total{container=\"%s\",mode=\"user\"} %.6f\n"
					"nodefs_container_cpu_seconds_total{container=\"%s\",mode=\"system\"} %.6f\n",
					cof(v[i])->name, m[i].st.cpu_user_seconds,
					cof(v[i])->name, m[i].st.cpu_system_seconds);
	if (r >= 0)
		r = sbuf_adds(out, "# HELP nodefs_container_exits_total Times the container reached EXITED "
				   "since the daemon started, by reason (completed, error, signal, oom, lost).\n"
				   "# TYPE nodefs_container_exits_total counter\n");
	for (size_t i = 0; r >= 0 && i < n; i++)
		for (size_t k = 0; r >= 0 && k < ARRAY_SIZE(exit_reasons); k++)
			r = sbuf_printf(out, "nodefs_container_exits_total{container=\"%s\",reason=\"%s\"} %llu\n",
					cof(v[i])->name, exit_reasons[k], (unsigned long long)m[i].exits[k]);
	if (r >= 0)
		r = sbuf_adds(out, "# HELP nodefs_container_restarts_total Restarts its restart policy made.\n"
				   "# TYPE nodefs_container_restarts_total counter\n");
	for (size_t i = 0; r >= 0 && i < n; i++)
		r = sbuf_printf(out, "nodefs_container_restarts_total{container=\"%s\"} %llu\n",
				cof(v[i])->name, m[i].restarts);
	if (r >= 0)
		r = sbuf_adds(out, "# HELP nodefs_container_health The state of the container's health "
				   "check (1 for the state it is in).\n"
				   "# TYPE nodefs_container_health gauge\n");
	for (size_t i = 0; r >= 0 && i < n; i++)
		for (int k = HEALTH_STARTING; r >= 0 && m[i].hstate != HEALTH_NONE && k <= HEALTH_UNHEALTHY; k++)
			r = sbuf_printf(out, "nodefs_container_health{container=\"%s\",state=\"%s\"} %d\n",
					cof(v[i])->name, health_names[k], m[i].hstate == k);
	free(m);
	bnode_list_free(v, n);
	return r < 0 ? r : container_fetch_render_metrics(b, out);
}
