/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lxc-watch: the LXC driver's one event thread. It waits in epoll on
 *   - each running container's init pidfd (edge-triggered: one edge when
 *     init becomes a zombie, one when lxc's monitor reaps it),
 *   - each container's memory events (v1: an eventfd registered through
 *     cgroup.event_control on memory.oom_control; v2: memory.events, which
 *     signals EPOLLPRI on change; see kernfs_rearm for why it is read
 *     through that very descriptor at every wake-up; a cgroup already gone
 *     at the exit is asked of the kernel's log, runtimes/rt-oomlog.h),
 *   - an eventfd other threads use to post events and to stop it.
 * It never polls on a timer and never calls liblxc (c->wait() would hold the
 * container lock for as long as it waits).
 *
 * The cgroup directories of each watched container, found from
 * /proc/PID/cgroup when the watch starts, are what stats reads: a stats
 * read (a FUSE thread) takes only this watcher's lock, long enough to copy
 * the paths, and never liblxc's.
 *
 * The real exit status: init's parent is lxc's monitor, so waitid() on the
 * pidfd is refused to us. Since Linux 6.15 the kernel keeps the exit status
 * of a reaped task for any pidfd holder (PIDFD_GET_INFO, PIDFD_INFO_EXIT);
 * that is read once the monitor has reaped init. Older kernels (Debian 12's
 * 6.1) keep nothing once init is reaped, and lxc's monitor reaps it as soon
 * as it is a zombie: reading /proc/PID/stat (field 52) at the pidfd's edge
 * lost that race every time, measured. There the watcher also listens to
 * the kernel's process events (the proc connector, NETLINK_CONNECTOR, root
 * only), whose exit event every exiting process sends with its status
 * whoever reaps it, filtered in the kernel to thread-group leaders' exits.
 * That event is sent just after the pidfd's edge, so a death whose status
 * is not in yet waits for it, at most EXIT_EVENT_WAIT_MS (a deadline, not
 * a poll), then /proc's status, else -1 (unknown).
 *
 * On death the record in nodefs.json is written before RT_EV_DIE goes out, so
 * an inspect after the event sees the exit code. Callbacks run on this
 * thread with no lock held.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lxc-internal.h"
#include "nodefs-config.h"
#include "macro.h"
#include "loop.h"
#include "rt-oomlog.h"

/* linux/pidfd.h of Debian 12 predates PIDFD_GET_INFO (6.13) and
 * PIDFD_INFO_EXIT (6.15); the ioctl is extensible by size. */
struct rt_lxc_pidfd_info {
	uint64_t mask;
	uint64_t cgroupid;
	uint32_t pid, tgid, ppid;
	uint32_t ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
	int32_t exit_code;
	uint32_t coredump_mask;
	uint32_t spare1;
};
#define RT_LXC_PIDFD_GET_INFO _IOWR(0xFF, 11, struct rt_lxc_pidfd_info)
#define RT_LXC_PIDFD_INFO_EXIT 8ull

enum { TOK_WAKE = 0, TOK_PIDFD = 1, TOK_OOM = 2, TOK_PROC = 3 };
#define EXIT_EVENT_WAIT_MS 250
#define TOK(id, kind) (((id) << 2) | (uint64_t)(kind))

struct wentry {
	struct wentry *next;
	uint64_t id;
	char name[RT_LXC_NAME_MAX + 1];
	pid_t pid;
	int pidfd;
	int oom_fd;		/* v1 eventfd or v2 memory.events; -1 */
	int gate_fd;		/* the open start gate (see lxc.c); -1 */
	struct rt_lxc_cgpaths cgp;
	bool have_cgp;
	bool oom;
	bool halting;		/* our stop asked init to halt, no kill since */
	time_t since;		/* watched since: an OOM kill ending this run is later */
	uint64_t oom_kills;	/* last oom_kill count seen */
	int zombie_status;	/* from /proc on old kernels; -1 */
	int event_status;	/* from the proc connector's exit event; -1 */
	bool dead;		/* init died; waiting for its exit event */
	uint64_t dead_until;	/* CLOCK_MONOTONIC ms: then without it */
};

struct qevent {
	struct qevent *next;
	enum rt_event_kind kind;
	char name[RT_LXC_NAME_MAX + 1];
	int exit_code;
	time_t time;
	int64_t time_ns;
};

struct rt_lxc_watch {
	struct rt_lxc *h;
	pthread_t thread;
	bool thread_ok;
	int epfd;
	int wakefd;
	pthread_mutex_t lock;
	pthread_cond_t gone;	/* broadcast when an entry is removed */
	rt_event_fn fn;
	void *ctx;
	struct wentry *entries;
	struct qevent *qhead, **qtail;
	uint64_t next_id;
	bool stop;
	bool exit_info;		/* kernel >= 6.15: PIDFD_INFO_EXIT after reap */
	int procfd;		/* proc connector (older kernels); -1 */
	const char *v2_events;	/* the v2 file watched: "memory.events" */
	uint64_t wakeups;	/* epoll_wait returns, for tests */
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void wake(struct rt_lxc_watch *w)
{
	uint64_t one = 1;

	(void)!write(w->wakefd, &one, sizeof(one));
}

static void queue_locked(struct rt_lxc_watch *w, enum rt_event_kind kind, const char *name,
			 int exit_code)
{
	struct qevent *q = calloc(1, sizeof(*q));

	if (!q)
		return;	/* an event lost to OOM; the record in nodefs.json stays */
	q->kind = kind;
	snprintf(q->name, sizeof(q->name), "%s", name ? name : "");
	q->exit_code = exit_code;
	q->time = time(NULL);
	q->time_ns = rt_now_ns();
	*w->qtail = q;
	w->qtail = &q->next;
}

void rt_lxc_watch_post(struct rt_lxc_watch *w, enum rt_event_kind kind, const char *name,
		       int exit_code)
{
	pthread_mutex_lock(&w->lock);
	queue_locked(w, kind, name, exit_code);
	pthread_mutex_unlock(&w->lock);
	wake(w);
}

static struct wentry *find_locked(struct rt_lxc_watch *w, const char *name)
{
	for (struct wentry *e = w->entries; e; e = e->next)
		if (strcmp(e->name, name) == 0)
			return e;
	return NULL;
}

static struct wentry *find_id_locked(struct rt_lxc_watch *w, uint64_t id)
{
	for (struct wentry *e = w->entries; e; e = e->next)
		if (e->id == id)
			return e;
	return NULL;
}

static void entry_free(struct rt_lxc_watch *w, struct wentry *e)
{
	if (e->pidfd >= 0) {
		epoll_ctl(w->epfd, EPOLL_CTL_DEL, e->pidfd, NULL);
		close(e->pidfd);
	}
	if (e->oom_fd >= 0) {
		epoll_ctl(w->epfd, EPOLL_CTL_DEL, e->oom_fd, NULL);
		close(e->oom_fd);
	}
	if (e->gate_fd >= 0)
		close(e->gate_fd);
	free(e);
}

static void remove_locked(struct rt_lxc_watch *w, struct wentry *e)
{
	for (struct wentry **pp = &w->entries; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			break;
		}
	}
	entry_free(w, e);
	pthread_cond_broadcast(&w->gone);
}

/* A kernfs file (cgroup v2 memory.events) polled for EPOLLPRI reports an
 * event for as long as the descriptor that polls it has not read the file
 * since the last change: kernfs compares the file's event count with the
 * one the descriptor saw at its last read, and a new descriptor has seen
 * none. A level-triggered epoll on it that is never read returns at once,
 * forever (one CPU at 100%). Reading it from offset 0 through the same
 * descriptor re-arms it; what it says is read by check_oom_locked. */
static int kernfs_rearm(int fd)
{
	char buf[512];
	ssize_t n;

	while ((n = pread(fd, buf, sizeof(buf), 0)) < 0 && errno == EINTR)
		;
	return n < 0 ? -errno : 0;
}

/* Subscribe to the container's memory events; best effort (-1 if none). */
static int oom_subscribe(struct rt_lxc_watch *w, struct wentry *e)
{
	const struct rt_lxc_cgroup *cg = &w->h->cg;
	char path[PATH_MAX + 32];
	int fd;

	if (!e->have_cgp)
		return -1;
	if (cg->mode == RT_LXC_CG_V2) {
		snprintf(path, sizeof(path), "%s/%s", e->cgp.unified, w->v2_events);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			(void)kernfs_rearm(fd);	/* or the first epoll_wait returns at once */
		return fd;
	}
	int cfd, ctl, efd;
	char line[64];

	snprintf(path, sizeof(path), "%s/memory.oom_control", e->cgp.memory);
	cfd = open(path, O_RDONLY | O_CLOEXEC);
	if (cfd < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/cgroup.event_control", e->cgp.memory);
	ctl = open(path, O_WRONLY | O_CLOEXEC);
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	fd = -1;
	if (ctl >= 0 && efd >= 0) {
		int n = snprintf(line, sizeof(line), "%d %d", efd, cfd);

		if (write(ctl, line, (size_t)n) == n) {
			fd = efd;
			efd = -1;
		}
	}
	if (efd >= 0)
		close(efd);
	if (ctl >= 0)
		close(ctl);
	close(cfd);	/* the registration holds what it needs */
	return fd;
}

int rt_lxc_watch_add(struct rt_lxc_watch *w, const char *name, int pidfd, pid_t pid,
		     int gate_fd)
{
	struct wentry *e, *old;
	struct epoll_event ev = { 0 };
	uint64_t kills = 0;

	e = calloc(1, sizeof(*e));
	if (!e) {
		close(pidfd);
		if (gate_fd >= 0)
			close(gate_fd);
		return -ENOMEM;
	}
	e->gate_fd = gate_fd;
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->pidfd = pidfd;
	e->pid = pid;
	e->oom_fd = -1;
	e->since = time(NULL);
	e->zombie_status = -1;
	e->event_status = -1;
	e->have_cgp = rt_lxc_cg_paths(&w->h->cg, pid, &e->cgp) == 0;
	if (e->have_cgp && rt_lxc_cg_oom_kills(&w->h->cg, &e->cgp, &kills) == 0)
		e->oom_kills = kills;
	e->oom_fd = oom_subscribe(w, e);

	pthread_mutex_lock(&w->lock);
	old = find_locked(w, name);
	if (old)
		remove_locked(w, old);	/* a restart replaces the old watch */
	e->id = ++w->next_id;
	ev.events = EPOLLIN | EPOLLET;
	ev.data.u64 = TOK(e->id, TOK_PIDFD);
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, e->pidfd, &ev) < 0) {
		int r = -errno;

		pthread_mutex_unlock(&w->lock);
		entry_free(w, e);
		return r;
	}
	if (e->oom_fd >= 0) {
		ev.events = w->h->cg.mode == RT_LXC_CG_V2 ? EPOLLPRI : EPOLLIN;
		ev.data.u64 = TOK(e->id, TOK_OOM);
		if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, e->oom_fd, &ev) < 0) {
			close(e->oom_fd);
			e->oom_fd = -1;
		}
	}
	e->next = w->entries;
	w->entries = e;
	pthread_mutex_unlock(&w->lock);
	return 0;
}

void rt_lxc_watch_del(struct rt_lxc_watch *w, const char *name)
{
	struct wentry *e;

	pthread_mutex_lock(&w->lock);
	e = find_locked(w, name);
	if (e)
		remove_locked(w, e);
	pthread_mutex_unlock(&w->lock);
}

void rt_lxc_watch_halting(struct rt_lxc_watch *w, const char *name, bool halting)
{
	struct wentry *e;

	pthread_mutex_lock(&w->lock);
	e = find_locked(w, name);
	if (e)
		e->halting = halting;
	pthread_mutex_unlock(&w->lock);
}

bool rt_lxc_watch_has(struct rt_lxc_watch *w, const char *name)
{
	bool r;

	pthread_mutex_lock(&w->lock);
	r = find_locked(w, name) != NULL;
	pthread_mutex_unlock(&w->lock);
	return r;
}

int rt_lxc_watch_wait(struct rt_lxc_watch *w, const char *name, int timeout_ms)
{
	struct timespec dl;
	int r = 0;

	dl = ts_after_ms(CLOCK_REALTIME, timeout_ms);
	pthread_mutex_lock(&w->lock);
	if (!find_locked(w, name))
		r = -ENOENT;
	while (r == 0 && find_locked(w, name)) {
		if (pthread_cond_timedwait(&w->gone, &w->lock, &dl) == ETIMEDOUT) {
			r = find_locked(w, name) ? -ETIMEDOUT : 0;
			break;
		}
	}
	pthread_mutex_unlock(&w->lock);
	return r;
}

static void cgpaths_copy(struct rt_lxc_cgpaths *d, const struct rt_lxc_cgpaths *s)
{
	/* the strings, not the 24 KiB of buffers around them */
	strcpy(d->memory, s->memory);
	strcpy(d->cpu, s->cpu);
	strcpy(d->cpuacct, s->cpuacct);
	strcpy(d->pids, s->pids);
	strcpy(d->freezer, s->freezer);
	strcpy(d->unified, s->unified);
}

int rt_lxc_watch_stats(struct rt_lxc_watch *w, const char *name, struct rt_stats *ret)
{
	struct rt_lxc_cgpaths p;
	struct wentry *e;
	bool have;
	pid_t pid;
	int r;

	pthread_mutex_lock(&w->lock);
	e = find_locked(w, name);
	if (!e) {
		pthread_mutex_unlock(&w->lock);
		return -ENOENT;
	}
	pid = e->pid;
	have = e->have_cgp;
	if (have)
		cgpaths_copy(&p, &e->cgp);
	pthread_mutex_unlock(&w->lock);
	/* Not found at add (init not yet in its cgroup): /proc has it now,
	 * and init is alive while its entry is here. */
	r = have ? 0 : rt_lxc_cg_paths(&w->h->cg, pid, &p);
	if (r == 0)
		r = rt_lxc_cg_stats(&w->h->cg, &p, ret);
	/* the cgroup went with init, before the watcher saw the death */
	return r == -ENOENT || r == -ENODEV ? -ESRCH : r;
}

uint64_t rt_lxc_watch_wakeups(struct rt_lxc_watch *w)
{
	uint64_t n;

	pthread_mutex_lock(&w->lock);
	n = w->wakeups;
	pthread_mutex_unlock(&w->lock);
	return n;
}

void rt_lxc_watch_set_fn(struct rt_lxc_watch *w, rt_event_fn fn, void *ctx)
{
	pthread_mutex_lock(&w->lock);
	w->fn = fn;
	w->ctx = ctx;
	pthread_mutex_unlock(&w->lock);
}

/* Exit status in waitpid(2) form to a shell-style code. */
static int status_to_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return -1;
}

/* Field 52 of /proc/PID/stat: the exit status of a zombie (Linux 3.5+). */
static int zombie_status(pid_t pid)
{
	char path[64], buf[2048];
	char *p;
	int field = 2;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (rt_lxc_read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	p = strrchr(buf, ')');	/* comm may hold spaces and parens */
	if (!p || p[1] != ' ' || p[2] != 'Z')
		return -1;
	for (p++; *p && field < 52; p++)
		if (*p == ' ')
			field++;
	return field == 52 ? atoi(p) : -1;
}

/* Check the OOM counter; queue RT_EV_OOM on a new kill. Called locked. */
static void check_oom_locked(struct rt_lxc_watch *w, struct wentry *e, bool notified)
{
	uint64_t kills = 0;
	bool read_ok = e->have_cgp && rt_lxc_cg_oom_kills(&w->h->cg, &e->cgp, &kills) == 0;
	bool fresh = (read_ok && kills > e->oom_kills) || notified;

	/* the cgroup gone already (on cgroup v2 the monitor may remove it
	 * before we look, and the kernel drops a change notice it had
	 * deferred): the kernel's own record of the kill outlives it */
	if (!read_ok && !fresh && !e->oom && e->have_cgp)
		fresh = rt_oomlog_find_cgroup(e->cgp.unified[0] ? e->cgp.unified : e->cgp.memory,
					      e->since) == 1;

	if (read_ok)
		e->oom_kills = kills;
	if (fresh && !e->oom) {
		e->oom = true;
		queue_locked(w, RT_EV_OOM, e->name, 0);
	}
}

/* init died with status (waitpid form, -1 unknown): write the record,
 * queue RT_EV_DIE, drop the entry. */
static void finish_locked(struct rt_lxc_watch *w, struct wentry *e, int status)
{
	int code;

	/* A system init halts with reboot(2), which in a pid namespace ends
	 * it with SIGKILL in its own record while its parent, lxc's monitor,
	 * is told SIGINT ("halt"). Report what the parent sees when our stop
	 * asked for the halt and nothing killed it since. */
	if (status >= 0 && e->halting && !e->oom && WIFSIGNALED(status) &&
	    WTERMSIG(status) == SIGKILL)
		status = SIGINT;
	code = status >= 0 ? status_to_code(status) : -1;
	(void)rt_lxc_meta_finished(w->h, e->name, time(NULL), code, e->oom);
	queue_locked(w, RT_EV_DIE, e->name, code);
	remove_locked(w, e);
}

static struct wentry *find_pid_locked(struct rt_lxc_watch *w, pid_t pid)
{
	for (struct wentry *e = w->entries; e; e = e->next)
		if (e->pid == pid)
			return e;
	return NULL;
}

/* Read the proc connector's queued exit events; a watched init's status is
 * kept, and a death waiting for it is finished. */
static void proc_drain_locked(struct rt_lxc_watch *w)
{
	char buf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));

	if (w->procfd < 0)
		return;
	for (;;) {
		ssize_t n = recv(w->procfd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n < 0 && (errno == EINTR || errno == ENOBUFS))
			continue;	/* ENOBUFS: events lost to a full buffer */
		if (n <= 0)
			return;
		for (struct nlmsghdr *nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, (size_t)n);
		     nh = NLMSG_NEXT(nh, n)) {
			struct cn_msg *cn = NLMSG_DATA(nh);
			struct proc_event ev;
			struct wentry *e;

			if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*cn) + sizeof(ev)))
				continue;
			/* 4-aligned in the message, and the struct wants 8 */
			memcpy(&ev, cn->data, sizeof(ev));
			if (ev.what != PROC_EVENT_EXIT ||
			    ev.event_data.exit.process_pid != ev.event_data.exit.process_tgid)
				continue;
			e = find_pid_locked(w, ev.event_data.exit.process_pid);
			if (!e)
				continue;
			e->event_status = (int)ev.event_data.exit.exit_code;
			if (e->dead)
				finish_locked(w, e, e->event_status);
		}
	}
}

/* Handle an edge on a pidfd. */
static void pidfd_edge_locked(struct rt_lxc_watch *w, struct wentry *e, uint32_t events)
{
	int status = -1;

	/* The cgroup still exists until the monitor tears it down: look now. */
	if (!e->dead)
		check_oom_locked(w, e, false);
	/* While init is a zombie its status is in /proc: keep it in case the
	 * pidfd cannot tell us later. */
	if (e->zombie_status < 0)
		e->zombie_status = zombie_status(e->pid);

	if (w->exit_info) {
		struct rt_lxc_pidfd_info info = { .mask = RT_LXC_PIDFD_INFO_EXIT };

		if (ioctl(e->pidfd, RT_LXC_PIDFD_GET_INFO, &info) == 0 &&
		    (info.mask & RT_LXC_PIDFD_INFO_EXIT))
			status = info.exit_code;
		else if (!(events & EPOLLHUP))
			return;	/* a zombie: the reap edge follows */
	} else {
		uint64_t id = e->id;

		/* Before 6.15 a pidfd signals at the zombie and tells no
		 * more: the exit event brings the status. */
		proc_drain_locked(w);
		if (!find_id_locked(w, id))
			return;	/* finished by its event */
		status = e->event_status;
		if (status < 0 && e->zombie_status < 0 && w->procfd >= 0) {
			if (!e->dead) {
				e->dead = true;
				e->dead_until = mono_ms() + EXIT_EVENT_WAIT_MS;
			}
			return;	/* its event is on the way */
		}
	}
	if (status < 0)
		status = e->zombie_status;
	finish_locked(w, e, status);
}

/* Deaths whose exit event did not come in time: finish them without it. */
static int overdue_locked(struct rt_lxc_watch *w)
{
	uint64_t now = mono_ms(), next = UINT64_MAX;

	for (struct wentry *e = w->entries, *nx; e; e = nx) {
		nx = e->next;
		if (!e->dead)
			continue;
		if (e->dead_until <= now)
			finish_locked(w, e, e->zombie_status);
		else if (e->dead_until < next)
			next = e->dead_until;
	}
	return next == UINT64_MAX ? -1 : (int)(next - now);
}

static void deliver(struct rt_lxc_watch *w)
{
	for (;;) {
		struct qevent *q;
		rt_event_fn fn;
		void *ctx;

		pthread_mutex_lock(&w->lock);
		q = w->qhead;
		if (q) {
			w->qhead = q->next;
			if (!w->qhead)
				w->qtail = &w->qhead;
		}
		fn = w->fn;
		ctx = w->ctx;
		pthread_mutex_unlock(&w->lock);
		if (!q)
			return;
		if (fn) {
			struct rt_event ev = {
				.kind = q->kind,
				.id = q->name[0] ? q->name : NULL,
				.exit_code = q->exit_code,
				.time = q->time,
				.time_ns = q->time_ns,
			};
			fn(ctx, &ev);
		}
		free(q);
	}
}

static void *watch_main(void *arg)
{
	struct rt_lxc_watch *w = arg;
	struct epoll_event evs[16];
	int timeout = -1;	/* until a death waits for its exit event */

	pthread_setname_np(pthread_self(), "nodefs-lxcexit");
	for (;;) {
		int n = epoll_wait(w->epfd, evs, ARRAY_SIZE(evs), timeout);

		if (n < 0 && errno != EINTR)
			break;
		pthread_mutex_lock(&w->lock);
		w->wakeups++;
		for (int i = 0; i < n; i++) {
			uint64_t tok = evs[i].data.u64;
			struct wentry *e;

			if (tok == TOK_WAKE) {
				uint64_t v;

				(void)!read(w->wakefd, &v, sizeof(v));
				continue;
			}
			if (tok == TOK_PROC) {
				proc_drain_locked(w);
				continue;
			}
			e = find_id_locked(w, tok >> 2);
			if (!e)
				continue;	/* removed meanwhile */
			if ((tok & 3) == TOK_PIDFD) {
				pidfd_edge_locked(w, e, evs[i].events);
			} else if ((tok & 3) == TOK_OOM) {
				if (w->h->cg.mode == RT_LXC_CG_V1) {
					uint64_t v;

					(void)!read(e->oom_fd, &v, sizeof(v));
					/* v1 also signals when the cgroup is
					 * removed, which only happens after
					 * init died and this entry went away;
					 * while init lives it is an OOM. */
					check_oom_locked(w, e, true);
				} else if (kernfs_rearm(e->oom_fd) < 0) {
					/* the cgroup is gone (init died, the
					 * monitor removed it): its file polls
					 * as an event for good and reads
					 * ENODEV; the pidfd tells the rest */
					epoll_ctl(w->epfd, EPOLL_CTL_DEL, e->oom_fd, NULL);
					close(e->oom_fd);
					e->oom_fd = -1;
				} else {
					check_oom_locked(w, e, false);
				}
			}
		}
		timeout = overdue_locked(w);
		bool stop = w->stop;

		pthread_mutex_unlock(&w->lock);
		deliver(w);
		if (stop)
			break;
	}
	return NULL;
}

/* Tell the proc connector to start (PROC_CN_MCAST_LISTEN) or stop
 * (PROC_CN_MCAST_IGNORE) sending events: 0, or -1. */
static int proc_tell(int fd, uint32_t op)
{
	struct {
		struct nlmsghdr nh;
		struct cn_msg cn;
		uint32_t op;
	} __attribute__((packed)) req = {
		.nh = { .nlmsg_len = sizeof(req), .nlmsg_type = NLMSG_DONE },
		.cn = { .id = { .idx = CN_IDX_PROC, .val = CN_VAL_PROC }, .len = sizeof(uint32_t) },
		.op = op,
	};

	return send(fd, &req, sizeof(req), 0) == (ssize_t)sizeof(req) ? 0 : -1;
}

/* Subscribe to the kernel's process events, the exits of thread-group
 * leaders only (a socket filter drops the rest in the kernel: forks, execs
 * and thread exits of the whole host). -1 when refused (not root, no
 * CONFIG_PROC_EVENTS): deaths then get /proc's status, or -1. */
static int proc_open(void)
{
	const uint32_t ev_off = NLMSG_LENGTH(sizeof(struct cn_msg));
	const uint32_t pid_off = ev_off + offsetof(struct proc_event, event_data.exit.process_pid);
	const uint32_t tgid_off = ev_off + offsetof(struct proc_event, event_data.exit.process_tgid);
	struct sock_filter code[] = {
		/* what == PROC_EVENT_EXIT (loads are big-endian) */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ev_off + offsetof(struct proc_event, what)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, htonl(PROC_EVENT_EXIT), 0, 5),
		/* process_pid == process_tgid */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, tgid_off),
		BPF_STMT(BPF_ST, 0),
		BPF_STMT(BPF_LDX | BPF_W | BPF_MEM, 0),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, pid_off),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_X, 0, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, 0),
		BPF_STMT(BPF_RET | BPF_K, 0xffffffff),
	};
	struct sock_fprog prog = { .len = ARRAY_SIZE(code), .filter = code };
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = CN_IDX_PROC };
	int fd, rcvbuf = 1 << 20;

	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_CONNECTOR);
	if (fd < 0)
		return -1;
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    proc_tell(fd, PROC_CN_MCAST_LISTEN) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void proc_close(int fd)
{
	if (fd < 0)
		return;
	(void)proc_tell(fd, PROC_CN_MCAST_IGNORE);
	close(fd);
}

static bool kernel_at_least(int major, int minor)
{
	struct utsname u;
	int ma = 0, mi = 0;

	if (uname(&u) < 0 || sscanf(u.release, "%d.%d", &ma, &mi) != 2)
		return false;
	return ma > major || (ma == major && mi >= minor);
}

int rt_lxc_watch_new(struct rt_lxc *h, struct rt_lxc_watch **ret)
{
	struct rt_lxc_watch *w = calloc(1, sizeof(*w));
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TOK_WAKE };
	int r;

	if (!w)
		return -ENOMEM;
	w->h = h;
	w->qtail = &w->qhead;
	w->exit_info = kernel_at_least(6, 15);
	w->v2_events = "memory.events";
#if NODEFS_TEST_HOOKS
	/* Exercise the pre-6.15 path on a new kernel. */
	if (getenv("NODEFS_LXC_NO_PIDFD_EXIT"))
		w->exit_info = false;
	/* Watch another kernfs file of the same cgroup (cgroup.events): a v1
	 * host's cgroup2 mount has no memory controller, and its
	 * cgroup.events polls as memory.events does. */
	if (getenv("NODEFS_LXC_V2_EVENTS_FILE"))
		w->v2_events = getenv("NODEFS_LXC_V2_EVENTS_FILE");
#endif
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	w->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	w->procfd = w->exit_info ? -1 : proc_open();
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->gone, NULL);
	if (w->epfd < 0 || w->wakefd < 0 ||
	    epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wakefd, &ev) < 0) {
		r = -errno;
		goto fail;
	}
	if (w->procfd >= 0) {
		struct epoll_event pev = { .events = EPOLLIN, .data.u64 = TOK_PROC };

		if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->procfd, &pev) < 0) {
			proc_close(w->procfd);
			w->procfd = -1;
		}
	}
	r = -pthread_create(&w->thread, NULL, watch_main, w);
	if (r < 0)
		goto fail;
	w->thread_ok = true;
	*ret = w;
	return 0;
fail:
	rt_lxc_watch_free(w);
	return r;
}

void rt_lxc_watch_free(struct rt_lxc_watch *w)
{
	if (!w)
		return;
	if (w->thread_ok) {
		pthread_mutex_lock(&w->lock);
		w->stop = true;
		pthread_mutex_unlock(&w->lock);
		wake(w);
		pthread_join(w->thread, NULL);
	}
	while (w->entries) {
		struct wentry *e = w->entries;

		w->entries = e->next;
		entry_free(w, e);
	}
	while (w->qhead) {
		struct qevent *q = w->qhead;

		w->qhead = q->next;
		free(q);
	}
	proc_close(w->procfd);
	if (w->wakefd >= 0)
		close(w->wakefd);
	if (w->epfd >= 0)
		close(w->epfd);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->gone);
	free(w);
}
