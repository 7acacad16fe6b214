/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lxc-internal: what the pieces of the LXC driver share (lxc.c the ops,
 * the error table and shared helpers, lxc-create.c the create, lxc-run.c
 * the calls on an existing container,
 * lxc-cgroup.c the host's cgroup layout and files, lxc-meta.c the owner mark
 * and run record beside each container, lxc-watch.c the exit watcher).
 * Private to runtimes/lxc; knows nothing of backend/ or fs/.
 */
#ifndef NODEFS_RT_LXC_INTERNAL_H
#define NODEFS_RT_LXC_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <lxc/lxccontainer.h>

#include "runtime.h"

struct nerr;
struct sbuf;

/* A container's name on liblxc's side: name_prefix + the nodefs name. */
#define RT_LXC_NAME_MAX 128
#define RT_LXC_NODEFS_NAME_MAX 64	/* the nodefs name, in the marks */
#define RT_LXC_META_FILE "nodefs.json"	/* the owner mark, beside config */
#define RT_LXC_CMD_FILE "nodefs-cmd.sh"	/* the command, run by /bin/sh */
#define RT_LXC_GATE_FILE "nodefs-gate"	/* FIFO the command waits on */
#define RT_LXC_BINDS_FILE "nodefs-binds"	/* bind sources, resolved, one a line */
/* rshared binds: source, resolved, and target lines, in pairs */
#define RT_LXC_SHARED_FILE "nodefs-shared"
#define RT_LXC_BINDS_CAP (256u << 10)
/* In LXCPATH, beside the container directories: the in-progress mark of a
 * create, .nodefs-creating-NAME (written before liblxc makes anything,
 * removed once the owner mark is in place). The create's other files there,
 * .nodefs-create-NAME.{sh,out,log,pgid}, are the template's wrapper, its
 * output, liblxc's log of the create and the template's process group. */
#define RT_LXC_CREATING_PREFIX ".nodefs-creating-"
#define RT_LXC_CONSOLE_LOG "console.log"
#define RT_LXC_LXC_LOG "lxc.log"
#define RT_LXC_EXEC_CAP (1u << 20)	/* exec output cap: 1 MiB */
#define RT_LXC_META_CAP (64u << 10)	/* nodefs.json is small */

/* The cgroup layout of the host, probed once at open. */
enum rt_lxc_cg_mode {
	RT_LXC_CG_V1,		/* legacy or hybrid: controllers on v1 mounts */
	RT_LXC_CG_V2,		/* unified only */
};

struct rt_lxc_cgroup {
	enum rt_lxc_cg_mode mode;
	char v2_root[PATH_MAX];		/* unified mount ("" if none) */
	char memory[PATH_MAX];		/* v1 mount points per controller */
	char cpu[PATH_MAX];
	char cpuacct[PATH_MAX];
	char pids[PATH_MAX];
	char freezer[PATH_MAX];
	bool memsw;			/* v1 memory.memsw.* present */
	bool swap_max;			/* v2 memory.swap.max present */
};

/* Where one container's cgroup files live while it runs. */
struct rt_lxc_cgpaths {
	char memory[PATH_MAX];
	char cpu[PATH_MAX];
	char cpuacct[PATH_MAX];
	char pids[PATH_MAX];
	char freezer[PATH_MAX];		/* v1 freezer ("" on v2) */
	char unified[PATH_MAX];		/* v2: the one directory */
};

/* A (key, value) config item the driver writes into the container config. */
struct rt_lxc_item {
	char key[96];
	char val[64];
};
#define RT_LXC_LIMIT_ITEMS_MAX 8

/* What nodefs.json holds: the mark and the last run's record. */
struct rt_lxc_meta {
	char name[RT_LXC_NAME_MAX + 1];	/* nodefs name (RT_NAME_LABEL) */
	char instance[RT_INSTANCE_MAX + 1];	/* RT_INSTANCE_LABEL, "" when none */
	char role[16];			/* RT_ROLE_LABEL, "" for a user's container */
	time_t created_at;
	time_t started_at;		/* 0: never started */
	time_t finished_at;		/* 0: not finished since the last start */
	int exit_code;			/* -1: unknown */
	bool oom_killed;
	/* the user's labels, written with the mark at create (borrowed;
	 * never read back: NULL after rt_lxc_meta_read) */
	const struct rt_kv *labels;
	size_t nlabels;
};

struct rt_lxc_watch;

/* The daemon's own cgroup in every hierarchy (v1 controllers, v2),
 * read once at open. liblxc 5.0's daemonized start enters its caller, not
 * the monitor it forks, into lxc.monitor.NAME: without a way back the
 * daemon would be accounted to the first container's monitor cgroup (out
 * of its own memory cgroup too), and each such cgroup, never empty while
 * nodefs runs, would outlive its container. */
#define RT_LXC_HOME_MAX 16
struct rt_lxc_home {
	struct { char mnt[PATH_MAX]; char dir[PATH_MAX]; } h[RT_LXC_HOME_MAX];
	size_t n;
};

struct rt_lxc {
	char lxcpath[PATH_MAX];
	char instance[RT_INSTANCE_MAX + 1];	/* rt_config.instance, "" when none */
	char template_dir[PATH_MAX];
	char network_type[32];
	char apparmor_profile[128];
	char log_level[16];
	int stop_timeout;		/* seconds */
	uint64_t console_size;		/* lxc.console.size, rotated once */
	struct rt_lxc_cgroup cg;
	struct rt_lxc_home home;	/* the daemon's own cgroups */
	pthread_mutex_t meta_lock;	/* serialises nodefs.json rewrites */
	struct rt_lxc_watch *watch;
};

/* lxc.c: what the pieces of the driver share. */
static inline void rt_lxc_putp(struct lxc_container **c)
{
	if (*c)
		lxc_container_put(*c);
}
#define _cleanup_lxc_ __attribute__((cleanup(rt_lxc_putp)))

static inline void rt_lxc_closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}
#define _cleanup_close_ __attribute__((cleanup(rt_lxc_closep)))

/* The one liblxc error table: which errno each failure becomes (lxc.c).
 * Every failure of a liblxc call, and of the template it runs, goes
 * through it; checks of nodefs's own (names, paths, options) say EINVAL or
 * ENOENT directly. */
enum rt_lxc_fail {
	LF_NEW,			/* lxc_container_new returned NULL */
	LF_NOT_DEFINED,
	LF_NOT_OURS,
	LF_EXISTS,
	LF_TEMPLATE,		/* the template ran and failed */
	LF_CREATE,
	LF_CONFIG,		/* set_config_item / save_config */
	LF_START,
	LF_NOT_RUNNING,
	LF_RUNNING,
	LF_PAUSED,
	LF_FREEZE,
	LF_UNFREEZE,
	LF_STOP,
	LF_SIGNAL,
	LF_CGROUP,
	LF_ATTACH,
	LF_DESTROY,
};

/* "lxc NAME: WHAT[: WHY][: LIBLXC'S WORDS]" with the table's errno. why, our
 * own words on what failed (the item, the signal, the template's last
 * line), is a printf format; NULL for none. */
int rt_lxc_failf(struct rt_lxc *h, struct lxc_container *c, const char *name,
		 enum rt_lxc_fail f, struct nerr *err, const char *why, ...)
	__attribute__((format(printf, 6, 7)));
int rt_lxc_fail(struct rt_lxc *h, struct lxc_container *c, const char *name,
		enum rt_lxc_fail f, struct nerr *err);
/* 1 to RT_LXC_NAME_MAX of [A-Za-z0-9._-], no leading dot. */
bool rt_lxc_name_valid(const char *s);
/* An absolute path without quotes, backslashes or newlines, that fits. */
bool rt_lxc_path_ok(const char *p);
/* Is id one of our containers? From the owner mark alone, no liblxc:
 * ENOENT if missing or not ours. ret_meta may be NULL. */
int rt_lxc_check_ours(struct rt_lxc *h, const char *id, struct rt_lxc_meta *ret_meta,
		      struct nerr *err);
/* lxc-helper.c: liblxc's start and create, run in a helper process
 * (argv[0] RT_LXC_START_HELPER or RT_LXC_CREATE_HELPER) so their forks
 * are made by a process of one thread. */
#define RT_LXC_START_HELPER "nodefs-lxc-start"
#define RT_LXC_CREATE_HELPER "nodefs-lxc-create"
/* 1 started, 0 failed (the container's log says why), -errno when the
 * helper (runtime_helper()) could not run. */
int rt_lxc_start_in_helper(const struct rt_lxc *h, const char *id);
/* liblxc's create of id with template tpath and its arguments targv
 * (NULL-ended) in the helper, liblxc's log going to logfile while it runs
 * (NULL: none): as rt_lxc_start_in_helper. */
int rt_lxc_create_in_helper(const struct rt_lxc *h, const char *id, const char *logfile,
			    const char *tpath, char *const targv[]);
/* A handle on one of our containers: ENOENT if missing or not ours. */
int rt_lxc_open_ours(struct rt_lxc *h, const char *id, struct lxc_container **ret,
		     struct rt_lxc_meta *ret_meta, struct nerr *err);
/* A pidfd (CLOEXEC) for the container's init, or -errno (-ESRCH: none). */
int rt_lxc_init_pidfd(struct lxc_container *c, pid_t *ret_pid);
/* The state from liblxc's, EXITED or CREATED by the run record m (NULL:
 * CREATED) when stopped. */
enum rt_state rt_lxc_state_of(struct lxc_container *c, const struct rt_lxc_meta *m);

/* lxc-create.c */
int rt_lxc_create(void *hv, const struct rt_spec *s, struct rt_progress *prog,
		  char **ret_id, struct nerr *err);

/* lxc-halfmade.c */
/* Is there an in-progress mark for name (a create under way or cut short)? */
bool rt_lxc_creating_marked(const struct rt_lxc *h, const char *name);
/* Is the in-progress mark of name (the container's liblxc name) this
 * instance's? (Any, when the driver was given no instance.) ret_name gets
 * the nodefs name the mark records (name itself when it records none). */
bool rt_lxc_creating_ours(const struct rt_lxc *h, const char *name, char *ret_name,
			  size_t size);
/* Remove what a create cut short made: the template if it still runs, the
 * container, the create's files, the mark last. */
int rt_lxc_remove_half_made(struct rt_lxc *h, const char *name, struct nerr *err);
/* LXCPATH/.nodefs-create-NAME.EXT, the files of a create under way (ext
 * NULL: its mark, .nodefs-creating-NAME). -ENAMETOOLONG. */
int rt_lxc_create_file(const struct rt_lxc *h, const char *name, const char *ext, char *buf,
		       size_t size);
/* Write the in-progress mark of name (synced with its directory) before
 * anything of the container is made. */
int rt_lxc_creating_mark(struct rt_lxc *h, const char *name, const char *nodefs_name,
			 const char *role, struct nerr *err);
/* The create is over (made whole, or undone): its files go, the mark last. */
void rt_lxc_creating_clear(struct rt_lxc *h, const char *name);
/* Remove a container a create made in this call: liblxc's destroy (c may
 * be NULL), then whatever files are left. */
void rt_lxc_create_undo(struct rt_lxc *h, struct lxc_container *c, const char *name);

/* lxc-run.c */
int rt_lxc_start(void *hv, const char *id, struct nerr *err);
int rt_lxc_stop(void *hv, const char *id, int timeout_s, struct nerr *err);
int rt_lxc_kill(void *hv, const char *id, int sig, struct nerr *err);
int rt_lxc_pause(void *hv, const char *id, struct nerr *err);
int rt_lxc_resume(void *hv, const char *id, struct nerr *err);
int rt_lxc_update(void *hv, const char *id, const struct rt_limits *lim, struct nerr *err);
int rt_lxc_exec(void *hv, const char *id, char *const argv[], struct sbuf *out,
		int *ret_exit_code, struct nerr *err);
/* Open the gate a command container's script waits on and put a line in
 * it; the fd (to keep until init dies), or -1 if there is no gate. */
int rt_lxc_open_gate(struct rt_lxc *h, const char *id);
/* Wait (bounded) for the container to be down and its exit recorded. */
void rt_lxc_wait_down(struct rt_lxc *h, struct lxc_container *c, const char *id, int pidfd,
		      int timeout_ms);

/* lxc-cgroup.c */
/* Probe mounts in /proc/self/mountinfo. -errno only on a read failure. */
int rt_lxc_cg_probe(struct rt_lxc_cgroup *cg, struct nerr *err);
/* The config items (lxc.cgroup.* or lxc.cgroup2.*, without the prefix when
 * prefix is false: the names set_cgroup_item takes) for these limits.
 * Returns the count, -EINVAL for a value out of range. */
int rt_lxc_cg_items(const struct rt_lxc_cgroup *cg, const struct rt_limits *lim,
		    bool prefix, struct rt_lxc_item *items, size_t max, struct nerr *err);
/* Resolve the cgroup directories of a running process from /proc/PID/cgroup. */
int rt_lxc_cg_paths(const struct rt_lxc_cgroup *cg, pid_t pid, struct rt_lxc_cgpaths *ret);
int rt_lxc_cg_stats(const struct rt_lxc_cgroup *cg, const struct rt_lxc_cgpaths *p,
		    struct rt_stats *ret);
/* cgroup v1: freeze (or thaw) p's freezer cgroup and wait until
 * freezer.state says FROZEN (THAWED), at most timeout_ms, writing the state
 * again on every look. -ESRCH when the cgroup is gone (the container went
 * down), -ETIMEDOUT (a freeze is undone first), -ENOTSUP with no v1
 * freezer. */
int rt_lxc_cg_freeze(const struct rt_lxc_cgpaths *p, bool freeze, int timeout_ms);
/* Fill *ret from /proc/self/cgroup and mountinfo; the count, or -errno. */
int rt_lxc_cg_home(struct rt_lxc_home *ret);
/* Move the daemon (every thread) back to its own cgroups: after each
 * start. 0, or the -errno of a hierarchy that refused. */
int rt_lxc_cg_go_home(const struct rt_lxc_home *home);
/* Remove the empty cgroups a container named name leaves in every
 * hierarchy, beside the daemon's cgroup or at the root: lxc.monitor.NAME
 * (whose removal liblxc's monitor fails while the daemon is in it) and a
 * payload cgroup that outlived a crash, NAME-1, NAME-2... too. Waits
 * (bounded) for a monitor on its way out. Returns how many went, or the
 * -errno of one that could not (-EBUSY: something still runs in it). */
int rt_lxc_cg_remove_leftovers(const struct rt_lxc_home *home, const char *name);
/* oom_kill counter of the memory cgroup; -errno if unreadable. */
int rt_lxc_cg_oom_kills(const struct rt_lxc_cgroup *cg, const struct rt_lxc_cgpaths *p,
			uint64_t *ret);
/* Read a small file into buf (NUL-terminated); -errno. */
int rt_lxc_read_file(const char *path, char *buf, size_t size);

/* lxc-meta.c */
/* Container directory of name. */
int rt_lxc_dir(const struct rt_lxc *h, const char *name, const char *file,
	       char *buf, size_t size);
/* LXCPATH/.nodefs-create-NAME.log, liblxc's log while it creates name. */
void rt_lxc_create_log(const struct rt_lxc *h, const char *name, char *buf, size_t size);
/* Read the mark: 0 ours, -ENOENT no such container or not ours, -EIO bad
 * file. ret may be NULL. */
int rt_lxc_meta_read(const struct rt_lxc *h, const char *name, struct rt_lxc_meta *ret);
/* Write the mark and a fresh run record (at create), under h->meta_lock. */
int rt_lxc_meta_write(struct rt_lxc *h, const char *name, const struct rt_lxc_meta *m);
/* Read-modify-write of the run record, in place, under h->meta_lock. */
int rt_lxc_meta_started(struct rt_lxc *h, const char *name, time_t t);
int rt_lxc_meta_finished(struct rt_lxc *h, const char *name, time_t t, int exit_code,
			 bool oom);

/* lxc-watch.c: one thread, epoll over init pidfds and memory events. */
int rt_lxc_watch_new(struct rt_lxc *h, struct rt_lxc_watch **ret);
void rt_lxc_watch_free(struct rt_lxc_watch *w);
void rt_lxc_watch_set_fn(struct rt_lxc_watch *w, rt_event_fn fn, void *ctx);
/* How many times the watcher thread has woken (epoll_wait returned) since
 * rt_lxc_watch_new: what a test counts to tell a quiet watcher from a
 * spinning one. Any thread. */
uint64_t rt_lxc_watch_wakeups(struct rt_lxc_watch *w);
/* Start watching a running container; takes ownership of pidfd and of
 * gate_fd (-1 if none), which stays open until init dies. */
int rt_lxc_watch_add(struct rt_lxc_watch *w, const char *name, int pidfd, pid_t pid,
		     int gate_fd);
void rt_lxc_watch_del(struct rt_lxc_watch *w, const char *name);
bool rt_lxc_watch_has(struct rt_lxc_watch *w, const char *name);
/* stop() asked init to halt (true), or is about to kill it (false). */
void rt_lxc_watch_halting(struct rt_lxc_watch *w, const char *name, bool halting);
/* Queue an event for delivery from the watcher thread. */
void rt_lxc_watch_post(struct rt_lxc_watch *w, enum rt_event_kind kind, const char *name,
		       int exit_code);
/* Stats of a watched container (running, or paused, or going down) from
 * the cgroup directories cached at watch_add: no liblxc call and no liblxc
 * lock, so a FUSE thread may call it. -ENOENT not watched (not running),
 * -ESRCH its cgroup went meanwhile (it is going down), else a read's -errno. */
int rt_lxc_watch_stats(struct rt_lxc_watch *w, const char *name, struct rt_stats *ret);
/* Block until name's init has been reaped and its record written, or
 * timeout_ms passes: 0, -ETIMEDOUT, -ENOENT not watched. */
int rt_lxc_watch_wait(struct rt_lxc_watch *w, const char *name, int timeout_ms);

#endif
