/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fs-loop: the FUSE request loop, a leader and followers.
 *
 * libfuse's multi-threaded loop keeps every idle worker blocked in read()
 * on /dev/fuse, and the kernel wakes the one that has waited longest: the
 * requests of one `cat` (OPEN, GETATTR, READ, READ, RELEASE) each land on
 * a different thread, and on a small loaded machine most wake-ups cross
 * CPUs. Here one thread, the leader, reads the device and answers requests
 * itself, one after another, so a reader meets the same warm thread each
 * time. Handing the device to a follower costs a wake-up too, so the leader
 * does it only before a request the caller says may wait (a mkdir or rmdir,
 * a render or ctl write of a file whose last ones were slow), and a watchdog does it for a request that
 * turns out to hold the leader for WATCH_MS: a slow request never holds up
 * the others for longer than that.
 *
 * The stop signals are this file's too (fs_serve_signals): their handler
 * ends the session and posts the semaphore the serving thread waits on, so
 * a stop never hangs on where or when the signal lands.
 *
 * Must not know: the tree, the backend; what may wait is the caller's call.
 */
#define FUSE_USE_VERSION 312

#include "fs-internal.h"
#include "loop.h"
#include "nodefs-config.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define WATCH_MS 10

struct serve;

struct serve_worker {
	struct serve *s;
	pthread_t thread;
	struct fuse_buf buf;
	/* odd while this worker, as the leader, answers a request itself */
	atomic_uint_fast64_t busy;
	struct serve_worker *prev, *next;	/* s->workers, under s->lock */
};

struct serve {
	struct fuse_session *se;
	fs_may_wait_fn may_wait;
	void *ctx;
	unsigned max_threads, max_idle;

	pthread_mutex_t lock;
	pthread_cond_t cond;	/* followers wait here for the device */
	bool leader;		/* some thread reads the device */
	bool exit;
	unsigned nthreads, nidle;
	struct serve_worker *workers;
	int error;

	/* the watchdog */
	_Atomic(struct serve_worker *) leader_w;	/* NULL: deposed or handing over */
	atomic_bool watch_parked;	/* idle: wake it at the next request */
	pthread_cond_t wcond;
	pthread_t watchdog;
	bool watchdog_running;
#if NODEFS_TEST_HOOKS
	uint64_t hang_at;	/* NODEFS_TEST_HANG_FUSE_AFTER_MS, as loop_now_ms */
#endif
};

static void *worker_main(void *arg);

/*
 * Posted when a worker sees the session end, and by a stop signal's
 * handler; fs_serve's caller waits on it. One for the process, never
 * destroyed: a handler may still post it while fs_serve returns.
 */
static sem_t serve_end;
static pthread_once_t serve_end_once = PTHREAD_ONCE_INIT;
/* the session a stop signal ends (fs_serve_signals) */
static struct fuse_session *_Atomic signal_se;
static const int stop_signals[] = { SIGHUP, SIGINT, SIGTERM };
static bool signal_taken[3], pipe_taken;

static void serve_end_init(void)
{
	sem_init(&serve_end, 0, 0);
}

/*
 * libfuse's own handler (fuse_set_signal_handlers) only marks the session
 * exited and counts on the signal interrupting the thread's sem_wait in
 * fs_serve. A signal taken by another thread (the daemon's container
 * actions run with nothing blocked) then wakes nobody: the leader stays in
 * read() and the daemon never stops. sem_post is async-signal-safe and
 * wakes the waiter wherever the handler runs.
 */
static void on_stop_signal(int sig)
{
	struct fuse_session *se = atomic_load(&signal_se);
	int e = errno;

	(void)sig;
	if (se)
		fuse_session_exit(se);	/* a store of a flag (libfuse 3.14) */
	sem_post(&serve_end);
	errno = e;
}

static void on_pipe(int sig)
{
	(void)sig;
}

int fs_serve_signals(struct fuse_session *se)
{
	struct sigaction sa = { .sa_handler = on_stop_signal };

	pthread_once(&serve_end_once, serve_end_init);
	atomic_store(&signal_se, se);
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(stop_signals) / sizeof(stop_signals[0]); i++) {
		struct sigaction old;

		/* as libfuse: a signal the caller handles or ignores stays so
		 * (nodefs's SIGHUP reloads) */
		if (signal_taken[i] || sigaction(stop_signals[i], NULL, &old) != 0 ||
		    old.sa_handler != SIG_DFL)
			continue;
		if (sigaction(stop_signals[i], &sa, NULL) != 0)
			return -errno;
		signal_taken[i] = true;
	}
	/* an answer to a reader that went away must not kill the daemon; a
	 * handler, not SIG_IGN, which the programs it starts would inherit */
	if (!pipe_taken) {
		struct sigaction old;

		sa.sa_handler = on_pipe;
		if (sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_DFL) {
			if (sigaction(SIGPIPE, &sa, NULL) != 0)
				return -errno;
			pipe_taken = true;
		}
	}
	return 0;
}

void fs_serve_signals_remove(void)
{
	atomic_store(&signal_se, NULL);
}

static void block_signals(sigset_t *old)
{
	sigset_t block;

	sigemptyset(&block);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGQUIT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, old);
}

/* A new worker; s->lock held. -errno. */
static int worker_start(struct serve *s)
{
	struct serve_worker *w = calloc(1, sizeof(*w));
	sigset_t old;
	int r;

	if (!w)
		return -ENOMEM;
	w->s = s;
	/* signals go to the thread waiting in fs_serve, as with libfuse */
	block_signals(&old);
	r = pthread_create(&w->thread, NULL, worker_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		free(w);
		return -r;
	}
	w->next = s->workers;
	if (s->workers)
		s->workers->prev = w;
	s->workers = w;
	s->nthreads++;
	return 0;
}

/* Let another thread read the device: a follower, or a new thread. s->lock
 * held. false when there is none (at max_threads, all busy). */
static bool pass_device_locked(struct serve *s)
{
	if (s->exit)
		return false;
	if (s->nidle) {
		pthread_cond_signal(&s->cond);
	} else if (s->nthreads >= s->max_threads || worker_start(s) < 0) {
		return false;
	}
	s->leader = false;
	atomic_store(&s->leader_w, NULL);
	return true;
}

#if NODEFS_TEST_HOOKS
/* Test builds: NODEFS_TEST_HANG_FUSE_AFTER_MS=MS makes the loop hang MS ms
 * after it starts: the leader keeps the request it read unanswered and
 * reads no other, as a wedged daemon would, until the session ends. The
 * systemd watchdog must see it (no WATCHDOG=1). */
static void hang_hook_init(struct serve *s)
{
	const char *v = getenv("NODEFS_TEST_HANG_FUSE_AFTER_MS");

	if (v && *v)
		s->hang_at = loop_now_ms() + (uint64_t)atoll(v);
}

static bool hang_hook(struct serve *s)
{
	if (!s->hang_at || loop_now_ms() < s->hang_at)
		return false;
	pthread_mutex_lock(&s->lock);
	while (!s->exit)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
	return true;
}
#endif

static void session_ended(struct serve *s, int error)
{
	pthread_mutex_lock(&s->lock);
	if (error < 0 && !s->error)
		s->error = error;
	s->exit = true;
	pthread_cond_broadcast(&s->cond);
	pthread_cond_signal(&s->wcond);
	pthread_mutex_unlock(&s->lock);
	sem_post(&serve_end);
}

/* Read and answer requests until one that may wait (answered after the
 * device is passed on), a watchdog takeover, or the end of the session. */
static void lead(struct serve_worker *w)
{
	struct serve *s = w->s;

	for (;;) {
		int res;

		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		res = fuse_session_receive_buf(s->se, &w->buf);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if (fuse_session_exited(s->se)) {
			session_ended(s, 0);
			return;
		}
		if (res == -EINTR || res == -EAGAIN)
			continue;
		if (res <= 0) {
			fuse_session_exit(s->se);
			session_ended(s, res);
			return;
		}
#if NODEFS_TEST_HOOKS
		if (hang_hook(s))
			return;
#endif
		if (!(w->buf.flags & FUSE_BUF_IS_FD) && s->may_wait(s->ctx, w->buf.mem, w->buf.size)) {
			bool passed;

			pthread_mutex_lock(&s->lock);
			passed = pass_device_locked(s);
			pthread_mutex_unlock(&s->lock);
			if (passed) {
				fuse_session_process_buf(s->se, &w->buf);
				return;
			}
		}
		atomic_fetch_add(&w->busy, 1);
		if (atomic_load_explicit(&s->watch_parked, memory_order_relaxed)) {
			pthread_mutex_lock(&s->lock);
			atomic_store(&s->watch_parked, false);
			pthread_cond_signal(&s->wcond);
			pthread_mutex_unlock(&s->lock);
		}
		fuse_session_process_buf(s->se, &w->buf);
		atomic_fetch_add(&w->busy, 1);
		if (atomic_load(&s->leader_w) != w)
			return;	/* the watchdog passed the device on meanwhile */
	}
}

static void *worker_main(void *arg)
{
	struct serve_worker *w = arg;
	struct serve *s = w->s;

	pthread_setname_np(pthread_self(), "nodefs-fuse");
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (s->leader && !s->exit) {
			s->nidle++;
			pthread_cond_wait(&s->cond, &s->lock);
			s->nidle--;
		}
		if (s->exit)
			break;
		s->leader = true;
		atomic_store(&s->leader_w, w);
		pthread_mutex_unlock(&s->lock);
		lead(w);
		pthread_mutex_lock(&s->lock);
		if (s->exit)
			break;
		if (s->leader && s->nidle >= s->max_idle) {
			/* enough threads wait already: leave (fs_serve joins
			 * only the listed ones) */
			if (w->prev)
				w->prev->next = w->next;
			else
				s->workers = w->next;
			if (w->next)
				w->next->prev = w->prev;
			s->nthreads--;
			pthread_mutex_unlock(&s->lock);
			pthread_detach(pthread_self());
			free(w->buf.mem);
			free(w);
			return NULL;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/*
 * Every WATCH_MS while requests come: if the leader has been answering the
 * same request since the last look, pass the device on; the old leader
 * becomes a follower when it is done. Parked while no request comes, so an
 * idle daemon has no timer.
 */
static void *watchdog_main(void *arg)
{
	struct serve *s = arg;
	struct serve_worker *seen_w = NULL;
	uint64_t seen = 0;

	pthread_mutex_lock(&s->lock);
	while (!s->exit) {
		struct serve_worker *w = atomic_load(&s->leader_w);
		uint64_t busy = w ? atomic_load(&w->busy) : 0;
		struct timespec t;

	pthread_setname_np(pthread_self(), "nodefs-watchdog");
		if (w && (busy & 1) && w == seen_w && busy == seen) {
			pass_device_locked(s);
			seen_w = NULL;
			continue;
		}
		if (w == seen_w && busy == seen) {
			/* nothing answered since the last look: park until
			 * the leader takes a request */
			atomic_store(&s->watch_parked, true);
			while (atomic_load(&s->watch_parked) && !s->exit)
				pthread_cond_wait(&s->wcond, &s->lock);
			seen_w = NULL;
			continue;
		}
		seen_w = w;
		seen = busy;
		t = ts_after_ms(CLOCK_MONOTONIC, WATCH_MS);
		pthread_cond_timedwait(&s->wcond, &s->lock, &t);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

int fs_serve(struct fuse_session *se, fs_may_wait_fn may_wait, void *ctx, unsigned max_threads,
	     unsigned max_idle)
{
	struct serve s = {
		.se = se, .may_wait = may_wait, .ctx = ctx,
		.max_threads = max_threads ? max_threads : 1, .max_idle = max_idle,
	};
	pthread_condattr_t ca;
	sigset_t old;
	int r;

	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cond, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s.wcond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_once(&serve_end_once, serve_end_init);
	while (sem_trywait(&serve_end) == 0)
		;	/* an earlier session's posts; this one's end is se's flag */
	atomic_init(&s.leader_w, NULL);
	atomic_init(&s.watch_parked, false);
#if NODEFS_TEST_HOOKS
	hang_hook_init(&s);
#endif

	pthread_mutex_lock(&s.lock);
	block_signals(&old);
	r = -pthread_create(&s.watchdog, NULL, watchdog_main, &s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	s.watchdog_running = r == 0;
	if (r == 0)
		r = worker_start(&s);
	pthread_mutex_unlock(&s.lock);
	if (r == 0) {
		/* a stop signal's handler ends the session and posts
		 * serve_end; so does a worker that sees it end */
		while (!fuse_session_exited(se))
			sem_wait(&serve_end);
	}
	pthread_mutex_lock(&s.lock);
	s.exit = true;
	pthread_cond_broadcast(&s.cond);
	pthread_cond_signal(&s.wcond);
	/* the leader may be blocked in read(): cancellable only there */
	for (struct serve_worker *w = s.workers; w; w = w->next)
		pthread_cancel(w->thread);
	pthread_mutex_unlock(&s.lock);
	/* first the watchdog, which looks at the leader's worker */
	if (s.watchdog_running)
		pthread_join(s.watchdog, NULL);
	while (s.workers) {
		struct serve_worker *w = s.workers;

		pthread_join(w->thread, NULL);
		s.workers = w->next;
		free(w->buf.mem);
		free(w);
	}
	if (r == 0)
		r = s.error;
	fuse_session_reset(se);
	pthread_cond_destroy(&s.wcond);
	pthread_cond_destroy(&s.cond);
	pthread_mutex_destroy(&s.lock);
	return r;
}
