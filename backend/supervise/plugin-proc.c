/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plugin-proc: the plugins nodefs starts and supervises, and the plugins'
 * checkpoint records; see plugin-proc.h.
 *
 * Threads: the supervisor thread owns each pproc's process state (its
 * `sup only` fields, its timer, pidfd and FIFO); other threads hand it work
 * with loop_submit and read what the files show under pp->lock. Probes run
 * on the worker pool (a call blocks) and post their answer back. This file
 * is the state machine (start, adopt, probe, backoff, restart, remove,
 * stop) and the files but the log; the process plumbing it drives (FIFO,
 * spawn, pidfd, socket) is plugin-launch.c, and what a plugin run as a
 * container needs instead (made on the worker pool, signalled, reaped and
 * removed through the runtime seam) is plugin-container.c. It knows nothing of fs, and of
 * CSI only the one Probe it has made.
 */
#include "plugin-proc.h"
#include "plugin-record.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend-internal.h"
#include "jw.h"
#include "kind.h"
#include "links.h"
#include "log.h"
#include "macro.h"
#include "sbuf.h"
#include "store.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

#include "plugin-proc-internal.h"

/* ---- small helpers ---- */


static void set_why(struct pproc *pp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_why(struct pproc *pp, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&pp->lock);
	va_start(ap, fmt);
	vsnprintf(pp->why, sizeof(pp->why), fmt, ap);
	va_end(ap);
	if (!pp->down_since)
		pp->down_since = time(NULL);
	pthread_mutex_unlock(&pp->lock);
}

static struct bnode *node_ref(struct pproc *pp)
{
	struct bnode *n;

	pthread_mutex_lock(&pp->lock);
	n = pp->node ? bnode_ref(pp->node) : NULL;
	pthread_mutex_unlock(&pp->lock);
	return n;
}

static void changed(struct pproc *pp)
{
	struct bnode *n = node_ref(pp);

	if (n) {
		bnode_changed(n);
		bnode_unref(n);
	}
}

/* One log line per plugin per LOG_EVERY_S: a crash loop does not flood the
 * log; the lines left out are counted in the next one. */
static void log_event(struct pproc *pp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_event(struct pproc *pp, const char *fmt, ...)
{
	time_t now = time(NULL);
	char msg[NERR_MSG_MAX + 128];
	va_list ap;

	if (pp->last_log && now - pp->last_log < LOG_EVERY_S) {
		pp->unlogged++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (pp->unlogged)
		log_warn("plugin %s: %s (%u more not logged in the last %d s)", pp->name, msg,
			 pp->unlogged, LOG_EVERY_S);
	else
		log_warn("plugin %s: %s", pp->name, msg);
	pp->unlogged = 0;
	pp->last_log = now;
}

static void tally(struct pproc *pp, const char *family, int64_t delta)
{
	char series[256];

	snprintf(series, sizeof(series), "%s{plugin=\"%s\"}", family, pp->name);
	events_tally(pp->b->events, series, delta);
}

/* ---- records ---- */

int pproc_checkpoint(struct pproc *pp, struct nerr *err)
{
	struct plugin_def def = { .name = pp->name, .endpoint = pp->endpoint,
				  .command = pp->argv[0] ? pp->argv : NULL, .runtime = pp->runtime,
				  .image = pp->image, .mounts = pp->mounts, .node = pp->node_plugin,
				  .privileged = pp->privileged, .secrets = pp->secrets,
				  .keep_running = pp->keep_running, .from_config = pp->from_config };
	struct sbuf sb = SBUF_INIT(0);
	struct jw w;
	char boot[64];
	int r;

	plugin_boot_id(boot, sizeof(boot));
	store_record_begin(&w, &sb);
	plugin_record_write(&w, &def);
	pthread_mutex_lock(&pp->lock);
	jw_kint(&w, "pid", pp->pid);
	jw_kint(&w, "pgid", pp->pgid);
	jw_kint(&w, "starttime", (long long)pp->starttime);
	jw_kstr(&w, "boot_id", boot);
	jw_kint(&w, "restarts", pp->restarts);
	if (pp->cid[0])
		jw_kstr(&w, "container", pp->cid);
	pthread_mutex_unlock(&pp->lock);
	r = store_put_record(pp->b->store, "plugins", pp->name, &w, STORE_DURABLE, err);
	sbuf_free(&sb);
	return r;
}

/* ---- objects ---- */

static void pproc_free(struct pproc *pp)
{
	free(pp->name);
	free(pp->endpoint);
	free(pp->sock);
	free(pp->fifo);
	ctl_strv_free(pp->argv);
	free(pp->runtime);
	free(pp->image);
	free(pp->secrets);
	free(pp->engine_name);
	ctl_strv_free(pp->mounts);
	free(pp->ring);
	pthread_mutex_destroy(&pp->lock);
	free(pp);
}

static struct pproc *pp_ref(struct pproc *pp)
{
	atomic_fetch_add(&pp->refs, 1);
	return pp;
}

void pproc_unref(struct pproc *pp)
{
	if (pp && atomic_fetch_sub(&pp->refs, 1) == 1)
		pproc_free(pp);
}

int pproc_new(struct backend *b, const struct plugin_def *def, struct bnode *node,
	      struct pproc **ret, struct nerr *err)
{
	struct pproc *pp = calloc(1, sizeof(*pp));
	const char *sock = def->endpoint + strlen("unix://");

	if (!pp)
		return nerr_set(err, ENOMEM, "out of memory");
	atomic_init(&pp->refs, 1);
	pthread_mutex_init(&pp->lock, NULL);
	pp->b = b;
	pp->node = node;
	pp->pidfd = pp->logfd = -1;
	pp->keep_running = def->keep_running;
	pp->from_config = def->from_config;
	pp->name = strdup(def->name);
	pp->endpoint = strdup(def->endpoint);
	while (sock[0] == '/' && sock[1] == '/')
		sock++;
	pp->sock = strdup(sock);
	pp->argv = plugin_strv_dup(def->command ? def->command : (char *const[]){ NULL });
	pp->mounts = plugin_strv_dup(def->mounts ? def->mounts : (char *const[]){ NULL });
	pp->node_plugin = def->node;
	pp->privileged = def->privileged;
	pp->secrets = def->secrets ? strdup(def->secrets) : NULL;
	pp->ring = malloc(LOG_RING);
	if (asprintf(&pp->fifo, "%s/plugins/%s.log", b->cfg->state_dir, def->name) < 0)
		pp->fifo = NULL;
	if (def->runtime && (!(pp->runtime = strdup(def->runtime)) || !(pp->image = strdup(def->image)) ||
			     asprintf(&pp->engine_name, "%s.plugin-%s", b->name_prefix, def->name) < 0))
		pp->engine_name = NULL;
	if (!pp->name || !pp->endpoint || !pp->sock || !pp->argv || !pp->mounts || !pp->ring ||
	    (def->secrets && !pp->secrets) ||
	    !pp->fifo || (def->runtime && !pp->engine_name)) {
		pproc_free(pp);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	pp->rng = (uint64_t)loop_now_us() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)pp;
	snprintf(pp->why, sizeof(pp->why), "not started yet");
	pp->down_since = time(NULL);
	plugin_record_read(b, def->name, &pp->rec_pid, &pp->rec_pgid, &pp->rec_start, pp->rec_boot,
		 sizeof(pp->rec_boot), &pp->rec_restarts, pp->rec_cid, sizeof(pp->rec_cid));
	*ret = pp;
	return 0;
}

/* ---- the supervisor thread ---- */

static void *sup_main(void *arg)
{
	struct plugin_sup *s = arg;
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_setname_np(pthread_self(), "nodefs-superv");
	loop_run(s->loop);
	return NULL;
}

/* The supervisor of b's plugins, kept in the kind's slot (kind_state). */
struct supervise_state {
	pthread_mutex_t lock;	/* guards sup */
	bool inited;
	struct plugin_sup *sup;	/* made at first use */
};

static struct supervise_state *sv_of(struct backend *b)
{
	return kind_state(b, &supervise_kind);
}

static struct plugin_sup *sup_get(struct backend *b, struct nerr *err)
{
	struct supervise_state *sv = sv_of(b);
	struct plugin_sup *s;
	sigset_t all, old;
	int r;

	pthread_mutex_lock(&sv->lock);
	s = sv->sup;
	if (s) {
		pthread_mutex_unlock(&sv->lock);
		return s;
	}
	s = calloc(1, sizeof(*s));
	if (!s || loop_new(&s->loop) < 0) {
		pthread_mutex_unlock(&sv->lock);
		free(s);
		nerr_set(err, ENOMEM, "cannot make the plugin supervisor's loop");
		return NULL;
	}
	s->b = b;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	r = pthread_create(&s->thread, NULL, sup_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		pthread_mutex_unlock(&sv->lock);
		loop_free(s->loop);
		free(s);
		nerr_set(err, r, "cannot start the plugin supervisor thread");
		return NULL;
	}
	sv->sup = s;
	pthread_mutex_unlock(&sv->lock);
	return s;
}

static void arm(struct pproc *pp, uint64_t ms, loop_timer_fn fn)
{
	if (pp->timer)
		loop_del_timer(pp->sup->loop, pp->timer);
	pp->timer = loop_add_timer(pp->sup->loop, ms, fn, pp);
}

static void disarm(struct pproc *pp)
{
	if (pp->timer)
		loop_del_timer(pp->sup->loop, pp->timer);
	pp->timer = NULL;
}

static void try_spawn(struct pproc *pp);
static void on_tick(struct loop *l, struct loop_timer *t, void *ud);

static void on_backoff_done(struct loop *l, struct loop_timer *t, void *ud)
{
	struct pproc *pp = ud;

	pp->timer = NULL;
	if (pp->exit_note[0]) {
		log_event(pp, "%s; restarted after %llu ms", pp->exit_note,
			  (unsigned long long)pp->exit_delay_ms);
		pp->exit_note[0] = '\0';
	}
	try_spawn(pp);
}

/* The wait before the next start: retry_backoff doubling up to retry_max,
 * scaled by a uniform jitter in [0.5, 1.0] (the CSI retries' rule). */
static uint64_t next_delay(struct pproc *pp)
{
	uint64_t base = pp->b->cfg->retry_backoff_ms ? pp->b->cfg->retry_backoff_ms : 1000;
	uint64_t max = pp->b->cfg->retry_max_ms ? pp->b->cfg->retry_max_ms : 120000;
	uint64_t ms = base;

	pp->attempt++;
	for (unsigned i = 1; i < pp->attempt && ms < max; i++)
		ms *= 2;
	if (ms > max)
		ms = max;
	pp->rng ^= pp->rng << 13;
	pp->rng ^= pp->rng >> 7;
	pp->rng ^= pp->rng << 17;
	return ms / 2 + (pp->rng % (ms / 2 + 1));
}


static void gone(struct pproc *pp);


/* Signal what runs: the process group, or the container. */
static void signal_it(struct pproc *pp, int sig)
{
	if (pp->runtime)
		pc_signal(pp, sig);
	else if (pp->pgid > 0)
		kill(-pp->pgid, sig);
}

static void try_spawn(struct pproc *pp)
{
	struct nerr err = { 0 };
	pid_t pid = 0;
	int r = 0;

	if (pp->stopping) {
		gone(pp);
		return;
	}
	if (!pp->runtime)	/* a container's log is the engine's */
		r = pp_open_fifo(pp, &err);
	if (r >= 0)
		r = pp_make_sock_dir(pp, &err);
	if (r >= 0 && pp_sock_free(pp, &pid) < 0) {
		if (pid)
			r = nerr_set(&err, EADDRINUSE, "%s is served by pid %d, which nodefs did not "
				     "start: not starting a second copy", pp->sock, (int)pid);
		else
			r = nerr_set(&err, EADDRINUSE, "%s is served by a process nodefs did not "
				     "start: not starting a second copy", pp->sock);
		pid = 0;
	}
	if (r >= 0 && pp->runtime) {
		pc_spawn_submit(pp);	/* pp_spawned follows */
		return;
	}
	if (r >= 0)
		r = pp_spawn(pp, &pid, &err);
	pp_spawned(pp, r, pid, &err);
}

/* The outcome of a start: r < 0 a failure (err), else pid runs. */
void pp_spawned(struct pproc *pp, int r, pid_t pid, struct nerr *errp)
{
	struct nerr err = *errp;
	unsigned long long start = 0;
	char what[128];

	if (pp->stopping) {	/* a container made while it was removed */
		if (r >= 0)
			pc_reap(pp, what, sizeof(what));
		gone(pp);
		return;
	}
	if (r >= 0 && (r = pp_watch_pid(pp, pid, &err)) < 0) {
		if (pp->runtime) {
			pc_reap(pp, what, sizeof(what));
		} else {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
	}
	if (r < 0) {
		uint64_t ms = next_delay(pp);

		set_why(pp, "%s; next try in %llu ms", err.msg, (unsigned long long)ms);
		log_event(pp, "%s; next try in %llu ms", err.msg, (unsigned long long)ms);
		events_emit(pp->b->events, "plugin", pp->name, NULL, "failed", NULL, err.msg);
		/* a runtime that does not answer (yet: engines are probed after
		 * the plugins start) started nothing: no restart to count */
		if (pp->spawned_once && r != -EHOSTDOWN) {
			pthread_mutex_lock(&pp->lock);
			pp->restarts++;
			pthread_mutex_unlock(&pp->lock);
			tally(pp, "nodefs_csi_plugin_restarts_total", 1);
		}
		pp->spawned_once |= r != -EHOSTDOWN;
		pp->st = PP_BACKOFF;
		arm(pp, ms, on_backoff_done);
		changed(pp);
		return;
	}
	pid_t pgid = pp->runtime ? 0 : pid;
	pp->exit_note[0] = '\0';	/* started again, by whatever path */
	plugin_proc_stat(pid, &start, NULL);
	pp->child = !pp->runtime;
	pp->gen++;
	pthread_mutex_lock(&pp->lock);
	pp->pid = pid;
	pp->pgid = pgid;
	pp->starttime = start;
	pp->started = start ? plugin_start_time(start) : time(NULL);
	pp->adopted = false;
	pp->running = true;
	if (pp->spawned_once)
		pp->restarts++;
	snprintf(pp->why, sizeof(pp->why), "started (%s%.12s pid %d): waiting for its socket and Probe",
		 pp->runtime ? "container " : "", pp->cid, (int)pid);
	pthread_mutex_unlock(&pp->lock);
	if (pp->spawned_once) {
		tally(pp, "nodefs_csi_plugin_restarts_total", 1);
		log_event(pp, "restarted (pid %d, restart %u)", (int)pid, pp->restarts);
	} else {
		log_info("plugin %s: started (pid %d)", pp->name, (int)pid);
	}
	events_emit(pp->b->events, "plugin", pp->name, NULL, pp->spawned_once ? "restarted" : "started",
		    NULL, NULL);
	pp->spawned_once = true;
	if (pproc_checkpoint(pp, &err) < 0)
		log_warn("plugin %s: %s", pp->name, err.msg);
	pp->st = PP_STARTING;
	pp->probe_fails = 0;
	pp->deadline_ms = loop_now_ms() + START_TIMEOUT_MS;
	arm(pp, SOCKET_POLL_MS, on_tick);
	changed(pp);
}

/* Kill what is left of the process (group): SIGKILL at once, or SIGTERM
 * and SIGKILL after grace_ms. The exit comes through the pidfd. */
static void on_kill_grace(struct loop *l, struct loop_timer *t, void *ud)
{
	struct pproc *pp = ud;

	pp->timer = NULL;
	signal_it(pp, SIGKILL);
}

static void end_process(struct pproc *pp, int sig, unsigned grace_ms)
{
	if (pp->pidfd < 0) {
		gone(pp);
		return;
	}
	pp->st = PP_KILLING;
	signal_it(pp, sig);
	if (sig != SIGKILL)
		arm(pp, grace_ms, on_kill_grace);
	else
		disarm(pp);
}

/* The supervisor is done with pp: a removed or stopping plugin. */
static void gone(struct pproc *pp)
{
	struct plugin_sup *s = pp->sup;
	struct nerr err = { 0 };
	bool removing;

	disarm(pp);
	pp_close_fifo(pp);
	pthread_mutex_lock(&pp->lock);
	removing = pp->removing;
	pthread_mutex_unlock(&pp->lock);
	if (removing) {
		if (plugin_record_del(pp->b, pp->name, &err) < 0)
			log_warn("plugin %s: %s", pp->name, err.msg);
		unlink(pp->fifo);
	}
	pp->st = PP_GONE;
	pthread_mutex_lock(&s->lock);
	for (struct pproc **q = &s->list; *q; q = &(*q)->next)
		if (*q == pp) {
			*q = pp->next;
			break;
		}
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pproc_unref(pp);	/* the list's */
}

void pp_on_exit_fd(struct loop *l, int fd, unsigned events, void *ud)
{
	struct pproc *pp = ud;
	char what[128] = "exited";
	siginfo_t si = { 0 };
	pid_t pid = pp->pid;

	if (pp->child) {
		/* look without reaping: the unreaped leader still holds the
		 * group's id while the rest of the group is killed */
		int w = waitid((idtype_t)P_PIDFD, (id_t)fd, &si, WEXITED | WNOHANG | WNOWAIT);

		if (w == 0 && si.si_pid == 0)
			return;		/* not yet */
		if (pp->pgid > 0)
			kill(-pp->pgid, SIGKILL);
		memset(&si, 0, sizeof(si));
		if (waitid((idtype_t)P_PIDFD, (id_t)fd, &si, WEXITED | WNOHANG) == 0 && si.si_pid)
			pp_describe_exit(&si, what, sizeof(what));
		else
			snprintf(what, sizeof(what), "exited (status unknown)");
	} else if (pp->runtime) {
		pc_reap(pp, what, sizeof(what));
	} else {
		if (pp->pgid > 0)
			kill(-pp->pgid, SIGKILL);
		snprintf(what, sizeof(what), "exited (status unknown: adopted, not our child)");
	}
	loop_del_fd(l, fd);
	close(fd);
	pp->pidfd = -1;
	pp->gen++;
	pthread_mutex_lock(&pp->lock);
	pp->pid = pp->pgid = 0;
	pp->running = false;
	pp->terminations++;
	snprintf(pp->last_exit, sizeof(pp->last_exit), "%s", what);
	pthread_mutex_unlock(&pp->lock);
	tally(pp, "nodefs_csi_plugin_terminations_total", 1);
	events_emit(pp->b->events, "plugin", pp->name, NULL, "exited", NULL, what);
	/* The daemon stops: whoever ended the plugin (nodefs, or a service
	 * manager signalling the daemon's whole group at once, before
	 * plugins_proc_stop), it is not a failure and there is no restart. */
	if (pp->stopping || atomic_load(&pp->b->state) == BACKEND_STOPPING) {
		log_info("plugin %s (pid %d): %s", pp->name, (int)pid, what);
		pp->stopping = true;
		gone(pp);
		return;
	}
	uint64_t ms = next_delay(pp);

	/* A failure, but the daemon may be stopping and not know it yet (the
	 * same SIGTERM, to the daemon and its plugins at once): the warning
	 * waits for the restart, and a stop before then ends it quietly. */
	snprintf(pp->exit_note, sizeof(pp->exit_note), "pid %d %s", (int)pid, what);
	pp->exit_delay_ms = ms;
	set_why(pp, "pid %d %s; restart in %llu ms", (int)pid, what, (unsigned long long)ms);
	pp->st = PP_BACKOFF;
	arm(pp, ms, on_backoff_done);
	changed(pp);
}

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
	j->node = node_ref(pp);
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
			arm(pp, probe_every_ms(pp), on_tick);
			changed(pp);
		} else if (pp->st == PP_UP &&
			   loop_now_ms() - pp->up_since_ms >= pp->b->cfg->retry_max_ms) {
			pp->attempt = 0;	/* it lived longer than the longest wait */
		}
		goto out;
	}
	if (pp->st == PP_UP && ++pp->probe_fails >= PROBE_FAILS_MAX) {
		log_event(pp, "pid %d stopped answering Probe (%s): killing it", (int)pp->pid, j->why);
		set_why(pp, "stopped answering Probe: %s", j->why);
		end_process(pp, SIGKILL, 0);
	}
out:
	bnode_unref(j->node);
	pproc_unref(j->pp);
	free(j);
}

static void on_tick(struct loop *l, struct loop_timer *t, void *ud)
{
	struct pproc *pp = ud;
	struct stat st;

	pp->timer = NULL;
	if (pp->st == PP_STARTING) {
		if (loop_now_ms() >= pp->deadline_ms) {
			bool adopted = pp->adopted;

			log_event(pp, "pid %d did not answer Probe within %u s: killing it", (int)pp->pid,
				  (adopted ? ADOPT_TIMEOUT_MS : START_TIMEOUT_MS) / 1000);
			set_why(pp, "pid %d did not answer Probe within %u s", (int)pp->pid,
				(adopted ? ADOPT_TIMEOUT_MS : START_TIMEOUT_MS) / 1000);
			end_process(pp, SIGKILL, 0);
			return;
		}
		if (stat(pp->sock, &st) == 0 && S_ISSOCK(st.st_mode))
			probe_submit(pp);
		arm(pp, SOCKET_POLL_MS, on_tick);
	} else if (pp->st == PP_UP) {
		/* a Probe unanswered for as long as PROBE_FAILS_MAX deadlines:
		 * hung (the call itself may wait for csi_timeout) */
		if (pp->probing &&
		    loop_now_ms() - pp->probe_sent_ms >= PROBE_FAILS_MAX * probe_deadline_ms(pp)) {
			log_event(pp, "pid %d stopped answering Probe (none for %llu ms): killing it",
				  (int)pp->pid, (unsigned long long)(loop_now_ms() - pp->probe_sent_ms));
			set_why(pp, "stopped answering Probe");
			end_process(pp, SIGKILL, 0);
			return;
		}
		probe_submit(pp);
		arm(pp, probe_every_ms(pp), on_tick);
	}
}

/* ---- what other threads ask ---- */

static void do_start(struct loop *l, void *ud)
{
	struct pproc *pp = ud;
	struct nerr err = { 0 };

	if (pp->stopping) {
		gone(pp);
		return;
	}
	if (plugin_record_alive(pp->rec_pid, pp->rec_start, pp->rec_boot) &&
	    (!pp->runtime || pc_adoptable(pp)) && pp_watch_pid(pp, pp->rec_pid, &err) >= 0) {
		/* ours from an earlier run: adopted once it answers Probe, or
		 * ended (then started anew) if it does not */
		unsigned long long start = pp->rec_start;

		if (!pp->runtime && pp_open_fifo(pp, &err) < 0)
			log_warn("plugin %s: %s", pp->name, err.msg);
		pp->child = false;
		pp->spawned_once = true;
		pp->gen++;
		pthread_mutex_lock(&pp->lock);
		pp->pid = pp->rec_pid;
		pp->pgid = pp->runtime ? 0 : pp->rec_pgid > 0 ? pp->rec_pgid : pp->rec_pid;
		pp->starttime = start;
		pp->started = plugin_start_time(start);
		pp->restarts = pp->rec_restarts;
		pp->adopted = true;
		pp->running = true;
		snprintf(pp->why, sizeof(pp->why), "pid %d from an earlier run: waiting for Probe",
			 (int)pp->rec_pid);
		pthread_mutex_unlock(&pp->lock);
		pp->st = PP_STARTING;
		pp->deadline_ms = loop_now_ms() + ADOPT_TIMEOUT_MS;
		arm(pp, 1, on_tick);
		return;
	}
	try_spawn(pp);
}

int pproc_start(struct pproc *pp, struct nerr *err)
{
	struct plugin_sup *s = sup_get(pp->b, err);

	if (!s)
		return -err->code;
	pp->sup = s;
	tally(pp, "nodefs_csi_plugin_terminations_total", 0);
	tally(pp, "nodefs_csi_plugin_restarts_total", 0);
	pthread_mutex_lock(&s->lock);
	pp->next = s->list;
	s->list = pp_ref(pp);
	pthread_mutex_unlock(&s->lock);
	if (loop_submit(s->loop, do_start, pp) < 0) {
		pthread_mutex_lock(&s->lock);
		s->list = pp->next;
		pthread_mutex_unlock(&s->lock);
		pproc_unref(pp);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	return 0;
}

static void do_remove(struct loop *l, void *ud)
{
	struct pproc *pp = ud;

	pp->stopping = true;
	if (pp->st == PP_GONE)
		return;
	if (pp->st == PP_KILLING || pp->st == PP_SPAWNING)
		return;		/* its exit, or the end of its start, ends it */
	if (pp->pidfd >= 0) {
		end_process(pp, SIGTERM, REMOVE_GRACE_MS);
		return;
	}
	gone(pp);
}

void pproc_remove(struct pproc *pp)
{
	pthread_mutex_lock(&pp->lock);
	pp->node = NULL;
	pp->removing = true;
	pthread_mutex_unlock(&pp->lock);
	if (!pp->sup) {
		struct nerr err = { 0 };

		plugin_record_del(pp->b, pp->name, &err);	/* never started */
		return;
	}
	/* the list's reference keeps pp until gone() */
	if (loop_submit(pp->sup->loop, do_remove, pp) < 0)
		log_warn("plugin %s: out of memory: its process is left running", pp->name);
}

bool pproc_stopping(struct backend *b, const char *name)
{
	struct supervise_state *sv = sv_of(b);
	struct plugin_sup *s;
	bool found = false;

	pthread_mutex_lock(&sv->lock);
	s = sv->sup;
	pthread_mutex_unlock(&sv->lock);
	if (!s)
		return false;
	pthread_mutex_lock(&s->lock);
	for (struct pproc *pp = s->list; pp && !found; pp = pp->next) {
		pthread_mutex_lock(&pp->lock);
		found = pp->removing && strcmp(pp->name, name) == 0;
		pthread_mutex_unlock(&pp->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return found;
}

/* The daemon stops: end what must end, let go of what keeps running. */
static void do_stop_all(struct loop *l, void *ud)
{
	struct plugin_sup *s = ud;
	struct pproc *v[256];
	size_t n = 0;

	pthread_mutex_lock(&s->lock);
	for (struct pproc *pp = s->list; pp && n < 256; pp = pp->next)
		v[n++] = pp_ref(pp);
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		struct pproc *pp = v[i];

		if (pp->st != PP_GONE && !pp->stopping) {
			pp->stopping = true;
			if (pp->keep_running && pp->pidfd >= 0) {
				/* left running: the next start adopts it (the record
				 * names it) */
				log_info("plugin %s: left running (pid %d, keep_running)", pp->name,
					 (int)pp->pid);
				loop_del_fd(l, pp->pidfd);
				close(pp->pidfd);
				pp->pidfd = -1;
				gone(pp);
			} else if (pp->st != PP_KILLING && pp->st != PP_SPAWNING) {
				if (pp->exit_note[0])	/* a backoff: no restart now */
					log_info("plugin %s: %s; not restarted: stopping", pp->name,
						 pp->exit_note);
				end_process(pp, SIGTERM, s->grace_ms);
			}
		}
		pproc_unref(pp);
	}
}

void plugins_proc_stop(struct backend *b, unsigned grace_ms)
{
	struct supervise_state *sv = sv_of(b);
	struct plugin_sup *s = sv->sup;
	struct timespec t;

	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	s->grace_ms = grace_ms;
	pthread_mutex_unlock(&s->lock);
	if (loop_submit(s->loop, do_stop_all, s) == 0) {
		/* SIGTERM, grace_ms, SIGKILL: the exits come soon after */
		t = ts_after_ms(CLOCK_REALTIME, grace_ms + 3000);
		pthread_mutex_lock(&s->lock);
		while (s->list && pthread_cond_timedwait(&s->cond, &s->lock, &t) == 0)
			;
		if (s->list)
			log_warn("plugins still running %u ms after SIGTERM: left", grace_ms + 3000);
		pthread_mutex_unlock(&s->lock);
	}
	loop_stop(s->loop);
	pthread_join(s->thread, NULL);
	/* what is left (a process that would not die) is let go */
	while (s->list) {
		struct pproc *pp = s->list;

		s->list = pp->next;
		if (pp->pidfd >= 0)
			close(pp->pidfd);
		if (pp->logfd >= 0)
			close(pp->logfd);
		disarm(pp);
		pproc_unref(pp);
	}
	loop_free(s->loop);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
	sv->sup = NULL;
}

/* The plugins nodefs starts: tallied here as they end and start again (a
 * series is made, at 0, when a plugin is first started). */
static int supervise_render_metrics(struct backend *b, struct sbuf *out)
{
	static const struct {
		const char *name, *help;
	} fam[] = {
		{ "nodefs_csi_plugin_terminations_total",
		  "Exits of the plugin processes nodefs started (crashes, kills, stops), by plugin." },
		{ "nodefs_csi_plugin_restarts_total",
		  "Starts of a plugin process after the first (after an exit, a hang or a failed "
		  "exec), by plugin." },
	};
	int r = 0;

	for (size_t i = 0; r >= 0 && i < sizeof(fam) / sizeof(fam[0]); i++) {
		r = sbuf_printf(out, "# HELP %s %s\n# TYPE %s counter\n", fam[i].name, fam[i].help,
				fam[i].name);
		if (r >= 0)
			r = events_render_tallies(b->events, fam[i].name, out);
	}
	return r;
}

static int supervise_init(struct backend *b, struct nerr *err)
{
	struct supervise_state *sv = sv_of(b);

	(void)err;
	pthread_mutex_init(&sv->lock, NULL);
	sv->inited = true;
	return 0;
}

static void supervise_free(struct backend *b)
{
	struct supervise_state *sv = sv_of(b);

	if (sv->inited)
		pthread_mutex_destroy(&sv->lock);
}

/* No directory of its own (the plugins' show each process): the hub keeps
 * its state and renders its metrics, after every other kind's. */
const struct kind_ops supervise_kind = {
	.name = "supervise",
	.state_size = sizeof(struct supervise_state),
	.init = supervise_init,
	.render_metrics = supervise_render_metrics,
	.free = supervise_free,
};

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
