/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * container-health: a container's health check (health=). A Docker `cmd`
 * check is the engine's own Healthcheck (so `docker inspect` agrees):
 * nodefs takes in its health_status events, and where the engine does not
 * time its checks itself (Podman without systemd) has the driver run it
 * at each interval and takes the engine's word. Every other check (http, tcp,
 * an LXC cmd) nodefs makes itself: each is due on the supervisor thread
 * (supervise/supervisor.c) and made on the worker pool, never on a FUSE
 * thread. An http or tcp probe opens its socket inside the container's
 * network namespace (setns on the worker, then back), so it reaches the
 * container's own port at 127.0.0.1 on any network; an LXC cmd runs
 * through the driver's exec.
 *
 * It owns the health state (starting, healthy, unhealthy), the file, the
 * events of a change, and health_restart=yes (an unhealthy container is
 * killed, and its exit counts as a failure for its restart policy). Must
 * not know the engines' wire formats or ctl syntax.
 */
#include "container-internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "supervisor.h"

const char *const health_names[4] = { "none", "starting", "healthy", "unhealthy" };

struct probe {
	char name[65];
	unsigned gen;
	struct backend *b;
};

static void arm_probe(struct container *c, unsigned gen, uint64_t ms);

/* A new state: the file's readers and the event stream are told. Lock
 * not held. */
static void health_changed(struct container *c, int old, int now, const char *why)
{
	bnode_changed(c->node);
	events_emit(c->b->events, "health", c->name, health_names[old], health_names[now], NULL,
		    why && why[0] ? why : NULL);
}

/* The check is the engine's own (a Docker cmd check). */
static bool engine_check(const struct container *c)
{
	return c->spec.health.kind == SVC_HEALTH_CMD && strcmp(c->eng->ops->name, "docker") == 0;
}

/* Whether nodefs times the probes: every check but the engine's own, and
 * the engine's own too where the driver runs it on demand (Podman, whose
 * own timers need systemd); the first answer -ENOTSUP (dockerd) ends
 * that for the run. */
static bool ours(const struct container *c)
{
	return !engine_check(c) || c->eng->ops->health_run;
}

void container_health_run(struct container *c)
{
	int old;
	unsigned gen;

	if (c->spec.health.kind == SVC_HEALTH_NONE)
		return;
	pthread_mutex_lock(&c->lock);
	old = c->hstate;
	c->hstate = HEALTH_STARTING;
	c->hsince = time(NULL);
	c->hstreak = 0;
	c->hout[0] = '\0';
	gen = ++c->hgen;
	c->hstarted_ms = loop_now_ms();
	pthread_mutex_unlock(&c->lock);
	if (old != HEALTH_STARTING)
		health_changed(c, old, HEALTH_STARTING, "a new run");
	if (ours(c))
		arm_probe(c, gen, c->spec.health.interval_ms);
}

void container_health_resume(struct container *c)
{
	unsigned gen;

	if (c->spec.health.kind == SVC_HEALTH_NONE || !ours(c))
		return;
	pthread_mutex_lock(&c->lock);
	gen = ++c->hgen;	/* a probe of before the pause is void */
	pthread_mutex_unlock(&c->lock);
	arm_probe(c, gen, c->spec.health.interval_ms);
}

/* Take one outcome: ok or not, with what the probe said. */
static void take(struct container *c, unsigned gen, bool ok, const char *out)
{
	int old, now;
	bool kill_it = false;
	char why[160];

	pthread_mutex_lock(&c->lock);
	if (gen != c->hgen || c->removed || c->state != C_RUNNING) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	old = now = c->hstate;
	snprintf(c->hout, sizeof(c->hout), "%s", out);
	for (char *q = c->hout; *q; q++)	/* one line in the file */
		if (*q == '\n' || *q == '\r')
			*q = ' ';
	if (ok) {
		c->hstreak = 0;
		now = HEALTH_HEALTHY;
	} else if (loop_now_ms() - c->hstarted_ms >= c->spec.health.start_period_ms ||
		   c->hstate == HEALTH_HEALTHY) {
		/* in the start period a failure does not count (Docker's rule) */
		if (++c->hstreak >= c->spec.health.retries)
			now = HEALTH_UNHEALTHY;
	}
	if (now != old) {
		c->hstate = now;
		c->hsince = time(NULL);
		kill_it = now == HEALTH_UNHEALTHY && c->spec.health.restart;
	}
	why[0] = '\0';
	if (!ok)
		snprintf(why, sizeof(why), "failing streak %u: %.120s", c->hstreak, out);
	pthread_mutex_unlock(&c->lock);
	if (now != old)
		health_changed(c, old, now, why);
	else
		bnode_changed(c->node);
	if (kill_it) {
		log_warn("container %s: unhealthy (%s): killed for its restart policy (health_restart=yes)",
			 c->name, why);
		container_submit(c, CA_KILL, "kill (health_restart)", NULL,
				 &(struct cact){ .sig = SIGKILL });
		return;
	}
	arm_probe(c, gen, c->spec.health.interval_ms);
}

/* ---- the probes (worker pool) ---- */

/* A TCP socket in pid's network namespace: the worker enters it for the
 * socket() and goes back (a socket stays in the namespace it was made in). */
static int socket_in(pid_t pid, char *out, size_t len)
{
	char path[64];
	int self, ns, s = -1;

	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	ns = open(path, O_RDONLY | O_CLOEXEC);
	if (ns < 0) {
		snprintf(out, len, "cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (self < 0) {
		snprintf(out, len, "cannot open the worker's network namespace: %s", strerror(errno));
		close(ns);
		return -1;
	}
	if (setns(ns, CLONE_NEWNET) < 0) {
		snprintf(out, len, "setns into the container's network namespace: %s", strerror(errno));
	} else {
		s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (s < 0)
			snprintf(out, len, "socket: %s", strerror(errno));
		if (setns(self, CLONE_NEWNET) < 0) {
			/* a worker left in another namespace must not serve on */
			log_err("health: cannot return a worker to its network namespace: %s",
				strerror(errno));
			abort();
		}
	}
	close(self);
	close(ns);
	return s;
}

static bool wait_fd(int fd, short ev, uint64_t deadline)
{
	for (;;) {
		uint64_t now = loop_now_ms();
		struct pollfd p = { .fd = fd, .events = ev };
		int r;

		if (now >= deadline)
			return false;
		r = poll(&p, 1, (int)(deadline - now));
		if (r > 0)
			return true;
		if (r == 0 || errno != EINTR)
			return false;
	}
}

static bool probe_net(const struct svc_health *h, pid_t pid, char *out, size_t len)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)h->port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	uint64_t deadline = loop_now_ms() + h->timeout_ms;
	int s = socket_in(pid, out, len), e = 0;
	socklen_t el = sizeof(e);
	bool ok = false;

	if (s < 0)
		return false;
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
		snprintf(out, len, "connect to port %u: %s", h->port, strerror(errno));
		goto out;
	}
	if (!wait_fd(s, POLLOUT, deadline)) {
		snprintf(out, len, "connect to port %u: timed out after %llu ms", h->port,
			 (unsigned long long)h->timeout_ms);
		goto out;
	}
	getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &el);
	if (e) {
		snprintf(out, len, "connect to port %u: %s", h->port, strerror(e));
		goto out;
	}
	if (h->kind == SVC_HEALTH_TCP) {
		snprintf(out, len, "port %u accepts connections", h->port);
		ok = true;
		goto out;
	}
	{
		char req[400], resp[512];
		size_t got = 0;
		int code = 0;
		int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: 127.0.0.1:%u\r\n"
				 "User-Agent: nodefs-health\r\nConnection: close\r\n\r\n", h->path, h->port);

		if (send(s, req, (size_t)n, MSG_NOSIGNAL) != n) {
			snprintf(out, len, "GET %s: send: %s", h->path, strerror(errno));
			goto out;
		}
		while (got < sizeof(resp) - 1 && !memchr(resp, '\n', got)) {
			ssize_t k;

			if (!wait_fd(s, POLLIN, deadline)) {
				snprintf(out, len, "GET %s: no answer within %llu ms", h->path,
					 (unsigned long long)h->timeout_ms);
				goto out;
			}
			k = recv(s, resp + got, sizeof(resp) - 1 - got, 0);
			if (k <= 0)
				break;
			got += (size_t)k;
		}
		resp[got] = '\0';
		if (sscanf(resp, "HTTP/%*d.%*d %d", &code) != 1) {
			snprintf(out, len, "GET %s: not an HTTP answer", h->path);
			goto out;
		}
		resp[strcspn(resp, "\r\n")] = '\0';
		snprintf(out, len, "GET %.100s: %.200s", h->path, resp);
		ok = code >= 200 && code < 400;
	}
out:
	close(s);
	return ok;
}

static bool probe_exec(struct container *c, char *out, size_t len)
{
	_cleanup_engine_ struct engine_ref *h = engine_hold(c->eng);
	struct sbuf o = SBUF_INIT(4096);
	struct nerr err = { 0 };
	char id[256];
	int code = -1, r;

	if (!h || !container_current_id(c, id, sizeof(id))) {
		snprintf(out, len, "the runtime is not reachable");
		return false;
	}
	r = c->eng->ops->exec(h->h, id, c->spec.health.argv, &o, &code, &err);
	if (r < 0)
		snprintf(out, len, "%s", err.msg);
	else
		snprintf(out, len, "exit_code=%d %.*s", code, (int)(o.len > 400 ? 400 : o.len),
			 o.buf ? o.buf : "");
	sbuf_free(&o);
	return r >= 0 && code == 0;
}

/* The engine's own check, run by the driver now (Podman): the engine
 * judges the streak and the start period; nodefs takes its word. -ENOTSUP:
 * the engine times its checks itself. */
static int probe_engine(struct container *c, unsigned gen)
{
	_cleanup_engine_ struct engine_ref *h = engine_hold(c->eng);
	struct rt_status st = { 0 };
	struct nerr err = { 0 };
	char id[256];
	bool cur;
	int r;

	if (!h || !container_current_id(c, id, sizeof(id)))
		r = nerr_set(&err, EHOSTDOWN, "the runtime is not reachable");	/* again at the next interval */
	else
		r = c->eng->ops->health_run(h->h, id, &st, &err);
	if (r == -ENOTSUP) {
		/* its events say each change; one look takes in where it
		 * stands now (a run nodefs's restart found already judged) */
		container_submit(c, CA_SYNC, "sync", NULL, NULL);
		return r;
	}
	pthread_mutex_lock(&c->lock);
	cur = gen == c->hgen && !c->removed && c->state == C_RUNNING;
	if (cur && r >= 0 && st.has_health) {
		c->hstreak = st.health_streak;
		snprintf(c->hout, sizeof(c->hout), "%s", st.health_output);
	} else if (cur && r < 0) {
		snprintf(c->hout, sizeof(c->hout), "%s", err.msg);
	}
	pthread_mutex_unlock(&c->lock);
	if (!cur)
		return 0;
	if (r >= 0)
		container_health_engine(c, st.health_status);
	bnode_changed(c->node);
	arm_probe(c, gen, c->spec.health.interval_ms);
	return 0;
}

static void probe_work(void *arg)
{
	struct probe *p = arg;
	struct bnode *n = bnode_lookup(containers_dir(p->b), p->name);
	struct container *c;
	char out[512] = "";
	bool ok;
	pid_t pid;

	if (!n) {
		free(p);
		return;
	}
	c = cof(n);
	if (engine_check(c)) {
		probe_engine(c, p->gen);	/* -ENOTSUP: no more this run */
		bnode_unref(n);
		free(p);
		return;
	}
	pthread_mutex_lock(&c->lock);
	pid = c->pid;
	pthread_mutex_unlock(&c->lock);
	if (c->spec.health.kind == SVC_HEALTH_CMD)
		ok = probe_exec(c, out, sizeof(out));
	else if (pid > 0)
		ok = probe_net(&c->spec.health, pid, out, sizeof(out));
	else
		ok = false, snprintf(out, sizeof(out), "no process");
	take(c, p->gen, ok, out);
	bnode_unref(n);
	free(p);
}

/* Due on the supervisor thread: made on the worker pool. */
static void on_probe_due(struct backend *b, void *ctx)
{
	struct probe *p = ctx, *w;

	if (atomic_load(&b->state) == BACKEND_STOPPING || !(w = malloc(sizeof(*w))))
		return;
	*w = *p;
	if (work_submit(b->work, probe_work, w) < 0)
		free(w);
}

static void arm_probe(struct container *c, unsigned gen, uint64_t ms)
{
	struct probe *p = calloc(1, sizeof(*p));

	if (!p)
		return;
	snprintf(p->name, sizeof(p->name), "%s", c->name);
	p->gen = gen;
	p->b = c->b;
	supervisor_after(c->b, ms, on_probe_due, p, &(struct nerr){ 0 });
}

void container_health_engine(struct container *c, const char *state)
{
	int old, now = HEALTH_NONE;

	for (int k = HEALTH_STARTING; k <= HEALTH_UNHEALTHY; k++)
		if (state && strcmp(state, health_names[k]) == 0)
			now = k;
	if (now == HEALTH_NONE || c->spec.health.kind == SVC_HEALTH_NONE)
		return;
	pthread_mutex_lock(&c->lock);
	old = c->hstate;
	if (now != old) {
		c->hstate = now;
		c->hsince = time(NULL);
		c->hstreak = now == HEALTH_UNHEALTHY ? c->spec.health.retries : 0;
	}
	pthread_mutex_unlock(&c->lock);
	if (now == old)
		return;
	health_changed(c, old, now, "the engine's health_status");
	if (now == HEALTH_UNHEALTHY && c->spec.health.restart) {
		log_warn("container %s: unhealthy: killed for its restart policy (health_restart=yes)",
			 c->name);
		container_submit(c, CA_KILL, "kill (health_restart)", NULL,
				 &(struct cact){ .sig = SIGKILL });
	}
}

/* health: the state, since when, the failing streak and the last
 * probe's output (capped); empty without a check. */
int container_show_health(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	char t[64], spec[300];
	int r;

	if (c->spec.health.kind == SVC_HEALTH_NONE)
		return 0;
	svc_health_format(&c->spec.health, spec, sizeof(spec));
	pthread_mutex_lock(&c->lock);
	fmt_time(c->hsince, t, sizeof(t));
	r = sbuf_printf(out, "state: %s\nsince: %s\nfailing_streak: %u\ncheck: %s\noutput: %s\n",
			c->hstate == HEALTH_NONE ? "starting" : health_names[c->hstate],
			t[0] ? t : "never", c->hstreak, spec, c->hout);
	pthread_mutex_unlock(&c->lock);
	return r;
}
