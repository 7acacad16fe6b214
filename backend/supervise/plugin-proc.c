/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plugin-proc: the plugins nodefs starts and supervises, and the plugins'
 * checkpoint records; see plugin-proc.h.
 *
 * Threads: the supervisor thread owns each pproc's process state (its
 * `sup only` fields, its timer, pidfd and FIFO); other threads hand it work
 * with loop_submit and read what the files show under pp->lock. This file
 * is the state machine (start, adopt, backoff, restart, remove, stop); the
 * Probes that say whether the plugin answers are plugin-probe.c's (made on
 * the worker pool), its files plugin-files.c's, the backoff restart.c's
 * (shared with containers); the process plumbing it drives (FIFO,
 * spawn, pidfd, socket) is plugin-launch.c, and what a plugin run as a
 * container needs instead (made on the worker pool, signalled, reaped and
 * removed through the runtime seam) is plugin-container.c. It knows nothing of fs, and of
 * CSI only the one Probe it has made.
 */
#include "plugin-proc.h"
#include "plugin-record.h"
#include "supervisor.h"

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


void pp_set_why(struct pproc *pp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pp_set_why(struct pproc *pp, const char *fmt, ...)
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

struct bnode *pp_node_ref(struct pproc *pp)
{
	struct bnode *n;

	pthread_mutex_lock(&pp->lock);
	n = pp->node ? bnode_ref(pp->node) : NULL;
	pthread_mutex_unlock(&pp->lock);
	return n;
}

void pp_changed(struct pproc *pp)
{
	struct bnode *n = pp_node_ref(pp);

	if (n) {
		bnode_changed(n);
		bnode_unref(n);
	}
}

/* One log line per plugin per LOG_EVERY_S: a crash loop does not flood the
 * log; the lines left out are counted in the next one. */
void pp_log_event(struct pproc *pp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pp_log_event(struct pproc *pp, const char *fmt, ...)
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

struct pproc *pp_ref(struct pproc *pp)
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
	backoff_init(&pp->bo, b->cfg->retry_backoff_ms, b->cfg->retry_max_ms,
		     (uint64_t)loop_now_us() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)pp);
	snprintf(pp->why, sizeof(pp->why), "not started yet");
	pp->down_since = time(NULL);
	plugin_record_read(b, def->name, &pp->rec_pid, &pp->rec_pgid, &pp->rec_start, pp->rec_boot,
		 sizeof(pp->rec_boot), &pp->rec_restarts, pp->rec_cid, sizeof(pp->rec_cid));
	*ret = pp;
	return 0;
}

/* ---- the supervisor thread ---- */

void pp_arm(struct pproc *pp, uint64_t ms, loop_timer_fn fn)
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

static void on_backoff_done(struct loop *l, struct loop_timer *t, void *ud)
{
	struct pproc *pp = ud;

	pp->timer = NULL;
	if (pp->exit_note[0]) {
		pp_log_event(pp, "%s; restarted after %llu ms", pp->exit_note,
			  (unsigned long long)pp->exit_delay_ms);
		pp->exit_note[0] = '\0';
	}
	try_spawn(pp);
}

/* The wait before the next start (restart.c, as containers' policies
 * wait): the bounds followed as a reload changes them. */
static uint64_t next_delay(struct pproc *pp)
{
	pp->bo.base_ms = pp->b->cfg->retry_backoff_ms ? pp->b->cfg->retry_backoff_ms : 1000;
	pp->bo.max_ms = pp->b->cfg->retry_max_ms ? pp->b->cfg->retry_max_ms : 120000;
	return backoff_next(&pp->bo);
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

		pp_set_why(pp, "%s; next try in %llu ms", err.msg, (unsigned long long)ms);
		pp_log_event(pp, "%s; next try in %llu ms", err.msg, (unsigned long long)ms);
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
		pp_arm(pp, ms, on_backoff_done);
		pp_changed(pp);
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
		pp_log_event(pp, "restarted (pid %d, restart %u)", (int)pid, pp->restarts);
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
	pp_arm(pp, SOCKET_POLL_MS, pp_on_tick);
	pp_changed(pp);
}

/* Kill what is left of the process (group): SIGKILL at once, or SIGTERM
 * and SIGKILL after grace_ms. The exit comes through the pidfd. */
static void on_kill_grace(struct loop *l, struct loop_timer *t, void *ud)
{
	struct pproc *pp = ud;

	pp->timer = NULL;
	signal_it(pp, SIGKILL);
}

void pp_end_process(struct pproc *pp, int sig, unsigned grace_ms)
{
	if (pp->pidfd < 0) {
		gone(pp);
		return;
	}
	pp->st = PP_KILLING;
	signal_it(pp, sig);
	if (sig != SIGKILL)
		pp_arm(pp, grace_ms, on_kill_grace);
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
	pp_set_why(pp, "pid %d %s; restart in %llu ms", (int)pid, what, (unsigned long long)ms);
	pp->st = PP_BACKOFF;
	pp_arm(pp, ms, on_backoff_done);
	pp_changed(pp);
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
		pp_arm(pp, 1, pp_on_tick);
		return;
	}
	try_spawn(pp);
}

int pproc_start(struct pproc *pp, struct nerr *err)
{
	struct plugin_sup *s = supervisor_get(pp->b, err);

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
		pp_end_process(pp, SIGTERM, REMOVE_GRACE_MS);
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
	struct plugin_sup *s = supervisor_peek(b);
	bool found = false;

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
				pp_end_process(pp, SIGTERM, s->grace_ms);
			}
		}
		pproc_unref(pp);
	}
}

/* The supervisor thread is ended: what is left (a process that would not
 * die) is let go. */
static void let_go(struct plugin_sup *s)
{
	while (s->list) {
		struct pproc *pp = s->list;

		s->list = pp->next;
		if (pp->pidfd >= 0)
			close(pp->pidfd);
		if (pp->logfd >= 0)
			close(pp->logfd);
		if (pp->timer)
			loop_del_timer(s->loop, pp->timer);
		pp->timer = NULL;
		pproc_unref(pp);
	}
}

void plugins_proc_stop(struct backend *b, unsigned grace_ms)
{
	struct plugin_sup *s = supervisor_peek(b);
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
	supervisor_stop_with(b, let_go);
}
