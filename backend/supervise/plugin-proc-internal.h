/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plugin-proc-internal: what the two halves of plugin supervision share.
 * plugin-proc.c runs the state machine (start, adopt, probe, backoff,
 * restart, remove, stop) on the supervisor thread; plugin-launch.c holds
 * the process plumbing it drives (the log FIFO and its ring, the spawn
 * with CSI_ENDPOINT set, the pidfd, the socket's directory and whether a
 * stranger serves the socket), and plugin-container.c what a plugin run as
 * a container needs instead (create, start, signal, reap through the
 * runtime seam), plugin-files.c the files plugins/NAME/process shows,
 * and supervisor.c the thread and loop it runs on (shared with
 * containers' restart policies), and plugin-probe.c the Probes that say
 * whether it answers. Private to those files.
 * Must not know: the plugin object (plugins/: a probe goes through
 * links.h), volumes, containers.
 */
#ifndef NODEFS_PLUGIN_PROC_INTERNAL_H
#define NODEFS_PLUGIN_PROC_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "loop.h"
#include "nerr.h"
#include "restart.h"

struct backend;
struct bnode;
struct loop;
struct loop_timer;
struct sbuf;

#define LOG_RING (64u << 10)		/* plugins/NAME/log */
#define FIFO_SIZE (1u << 20)		/* what a plugin may write while nodefs is away */
#define SOCKET_POLL_MS 100		/* waiting for the socket after a start */
#define START_TIMEOUT_MS 60000		/* a start must answer Probe within this */
#define ADOPT_TIMEOUT_MS 10000		/* an adopted process must answer within this */
#define PROBE_FAILS_MAX 2		/* unanswered Probes in a row: hung */
#define REMOVE_GRACE_MS 5000		/* SIGTERM to SIGKILL at remove */
#define LOG_EVERY_S 10			/* one log line per plugin per this, at most */

/* PP_SPAWNING: a container is being made on the worker pool */
enum pp_state { PP_IDLE, PP_BACKOFF, PP_SPAWNING, PP_STARTING, PP_UP, PP_KILLING, PP_GONE };

#define PC_ID_MAX 80			/* a container id, NUL included */

struct plugin_sup {
	struct backend *b;
	struct loop *loop;
	pthread_t thread;
	pthread_mutex_t lock;		/* list, stopping */
	pthread_cond_t cond;		/* a pproc is gone while stopping */
	struct pproc *list;
	bool stopping;
	unsigned grace_ms;		/* SIGTERM to SIGKILL at the daemon's stop */
	/* supervisor.c: the jobs other rooms handed it (loop thread), and
	 * whether the loop is ended (no job is armed any more) */
	struct sup_job *jobs;
	bool closed;
};

/* supervisor.c: the supervisor, made at first use; NULL with err when it
 * cannot be (or the daemon stops). Any thread. */
struct plugin_sup *supervisor_get(struct backend *b, struct nerr *err);
/* supervisor_stop, with release(s) called once the thread is ended and
 * before the loop is freed (the plugins' stop lets go of what is left). */
void supervisor_stop_with(struct backend *b, void (*release)(struct plugin_sup *s));
/* The supervisor if it is made, else NULL (nothing is made). Any thread. */
struct plugin_sup *supervisor_peek(struct backend *b);

struct pproc {
	atomic_int refs;
	struct backend *b;
	struct plugin_sup *sup;		/* set by pproc_start */
	struct pproc *next;		/* sup->list */
	char *name, *endpoint, *sock, *fifo;
	char **argv;			/* never NULL; empty: a container's image default */
	bool keep_running, from_config;
	/* a container (plugin-container.c); runtime NULL: a process */
	char *runtime, *image, *engine_name;
	char **mounts;			/* never NULL */
	bool node_plugin;		/* may mount, target roots rshared */
	bool privileged;
	char *secrets;			/* NULL, or add's secrets= (kept in the record) */

	pthread_mutex_t lock;		/* the fields below, as the files show them */
	struct bnode *node;		/* borrowed; NULL once removed */
	pid_t pid, pgid;		/* 0: no process */
	unsigned long long starttime;	/* /proc/PID/stat field 22 */
	time_t started, down_since;
	unsigned restarts;
	unsigned long long terminations;
	bool adopted, running;
	char last_exit[128];
	char cid[PC_ID_MAX];		/* the container now; "" none */
	char why[NERR_MSG_MAX];		/* no process to talk to: why */
	char *ring;			/* LOG_RING bytes */
	size_t ring_head;
	bool ring_full;
	bool removing;			/* also read by pproc_stopping */

	/* sup thread only */
	enum pp_state st;
	int pidfd, logfd;
	bool child;			/* ours to reap */
	bool spawned_once;
	struct loop_timer *timer;
	unsigned gen, probe_fails;
	bool probing, stopping;
	struct backoff bo;		/* restart.c: every plugin restarts as `always` */
	uint64_t deadline_ms, up_since_ms, probe_sent_ms;
	time_t last_log;
	unsigned unlogged;
	/* the exit a backoff follows, logged when the restart comes (a
	 * daemon that stops meanwhile logs it as part of its stop) */
	char exit_note[160];		/* "pid N exit status S" */
	uint64_t exit_delay_ms;
	/* the record of a previous run, for adoption */
	pid_t rec_pid, rec_pgid;
	unsigned long long rec_start;
	unsigned rec_restarts;
	char rec_boot[64];
	char rec_cid[PC_ID_MAX];
};

/* plugin-proc.c, for plugin-probe.c: why it has no process to talk to
 * (the files show it), a reference to its node (NULL once removed), its
 * readers told of a change, a rate-limited log line, a reference to pp,
 * its one timer (re)armed, and its process ended (SIGKILL at once, or sig
 * then SIGKILL after grace_ms). Supervisor thread, but pp_set_why and
 * pp_node_ref (any thread). */
void pp_set_why(struct pproc *pp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
struct bnode *pp_node_ref(struct pproc *pp);
void pp_changed(struct pproc *pp);
void pp_log_event(struct pproc *pp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
struct pproc *pp_ref(struct pproc *pp);
void pp_arm(struct pproc *pp, uint64_t ms, loop_timer_fn fn);
void pp_end_process(struct pproc *pp, int sig, unsigned grace_ms);

/* plugin-probe.c: the timer of a starting or running plugin: the socket
 * looked for, a Probe sent, a plugin that does not answer killed. */
void pp_on_tick(struct loop *l, struct loop_timer *t, void *ud);

/* plugin-launch.c; all on the supervisor thread. -errno with err. */
int pp_open_fifo(struct pproc *pp, struct nerr *err);	/* idempotent */
void pp_close_fifo(struct pproc *pp);			/* drains it first */
/* Watch pid through a pidfd: its exit calls pp_on_exit_fd (plugin-proc.c). */
int pp_watch_pid(struct pproc *pp, pid_t pid, struct nerr *err);
void pp_on_exit_fd(struct loop *l, int fd, unsigned events, void *ud);
/* Spawn argv in its own process group, stdout and stderr to the FIFO; a
 * kept plugin under systemd in a scope of its own (pp_scope_argv). */
int pp_spawn(struct pproc *pp, pid_t *ret_pid, struct nerr *err);
/* Whether the host runs systemd as its init (sd_booted()'s test:
 * /run/systemd/system exists). */
bool pp_systemd_booted(void);
/* The command line that starts argv (NULL-ended) for plugin name: argv
 * itself (a copy of the vector) unless kept under systemd, then
 * `systemd-run --scope --unit=nodefs-plugin-NAME --collect --quiet --`
 * before it. One allocation, the vector and the unit's name: free() it.
 * The strings of argv are borrowed. -ENOMEM. */
int pp_scope_argv(const char *name, char *const *argv, bool keep, bool systemd,
		  char ***ret);
int pp_make_sock_dir(struct pproc *pp, struct nerr *err);
/* 0: nobody serves the socket (a stale one is removed); -EADDRINUSE with
 * the server's pid (0: unknown) in *ret_pid. */
int pp_sock_free(struct pproc *pp, pid_t *ret_pid);
void pp_describe_exit(const siginfo_t *si, char *buf, size_t len);

/* plugin-container.c. The container is made on the worker pool (a create
 * may pull an image): pc_spawn_submit moves pp to PP_SPAWNING and
 * pp_spawned (plugin-proc.c) gets the outcome on the supervisor thread:
 * r, the container's init pid (on the host) and, in pp->cid, its id. */
void pc_spawn_submit(struct pproc *pp);
void pp_spawned(struct pproc *pp, int r, pid_t pid, struct nerr *err);
/* Signal the container (the runtime's kill; the host pid of its init when
 * the runtime does not answer). Supervisor thread. */
void pc_signal(struct pproc *pp, int sig);
/* Its init exited: its exit status from the runtime into what, then the
 * container is removed (pp->cid cleared). Supervisor thread. */
void pc_reap(struct pproc *pp, char *what, size_t len);
/* The container of the record (rec_cid) still runs with the recorded init:
 * true and the id copied to pp->cid. Supervisor thread. */
bool pc_adoptable(struct pproc *pp);
/* plugins/NAME/log of a container: the runtime's log of it. Any thread. */
int pc_show_log(struct pproc *pp, struct sbuf *out);

#endif
