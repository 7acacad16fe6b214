/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * docker-cgroup: the Docker driver's stats (dk_stats), read from the
 * container's cgroup files (v1 or v2), never through the Engine API, so a
 * read on a FUSE thread never waits on the engine. The files of up to
 * DK_CG_MAX containers are kept open; workers learn a container's cgroups
 * at start and at each inspect of a running one (dk_cg_note_running).
 *
 * Must not know: the Engine API (only dk_inspect, to find init's pid),
 * the backend, FUSE or checkpoints.
 */
#include <ctype.h>
#include "lazycurl.h"	/* libcurl, loaded on first need */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "docker-driver-internal.h"
#include "macro.h"
#include "nerr.h"
#include "runtime.h"
#include "sbuf.h"

/* --- stats from cgroup files ---------------------------------------------- */

static int read_small(const char *dir, const char *file, char *buf, size_t n)
{
	char path[DK_CG_PATH + 64];
	ssize_t k;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	k = read(fd, buf, n - 1);
	if (k < 0)
		k = -errno;
	close(fd);
	if (k < 0)
		return (int)k;
	buf[k] = '\0';
	return 0;
}

static bool is_dir(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Where the engine put the container's cgroups, from what it usually does
 * (Docker's cgroupfs driver: <ctrl>/docker/<id>; its systemd driver:
 * system.slice/docker-<id>.scope; Podman's cgroupfs manager:
 * libpod_parent/libpod-<id>; its systemd manager: machine.slice/
 * libpod-<id>.scope), else from /proc/<pid>/cgroup of its init (pid 0:
 * unknown, -EBUSY). No Engine API call: stats() runs on FUSE threads. */
static int cg_resolve(struct docker *d, const char *id, pid_t pid, struct dk_cgpath *cg,
		      struct nerr *err)
{
	static const char *const v2_fmt[] = { "/sys/fs/cgroup/system.slice/docker-%s.scope",
					      "/sys/fs/cgroup/docker/%s",
					      "/sys/fs/cgroup/machine.slice/libpod-%s.scope",
					      "/sys/fs/cgroup/libpod_parent/libpod-%s" };
	static const char *const v1_fmt[] = { "/sys/fs/cgroup/%s/docker/%s",
					      "/sys/fs/cgroup/%s/system.slice/docker-%s.scope",
					      "/sys/fs/cgroup/%s/libpod_parent/libpod-%s",
					      "/sys/fs/cgroup/%s/machine.slice/libpod-%s.scope" };
	char path[DK_CG_PATH], buf[4096];
	int r;

	memset(cg, 0, sizeof(*cg));
	snprintf(cg->id, sizeof(cg->id), "%s", id);
	cg->v2 = d->cgroup_v2;
	if (strlen(id) == 64) {
		for (size_t i = 0; cg->v2 && i < ARRAY_SIZE(v2_fmt); i++) {
			snprintf(path, sizeof(path), v2_fmt[i], id);
			if (is_dir(path)) {
				strcpy(cg->cpu, path);
				strcpy(cg->mem, path);
				strcpy(cg->pids, path);
				return 0;
			}
		}
		for (size_t i = 0; !cg->v2 && i < ARRAY_SIZE(v1_fmt); i++) {
			snprintf(cg->mem, sizeof(cg->mem), v1_fmt[i], "memory", id);
			snprintf(cg->cpu, sizeof(cg->cpu), v1_fmt[i], "cpuacct", id);
			snprintf(cg->pids, sizeof(cg->pids), v1_fmt[i], "pids", id);
			if (is_dir(cg->mem) && is_dir(cg->cpu) && is_dir(cg->pids))
				return 0;
		}
	}
	if (pid <= 0)
		return nerr_set(err, EBUSY, "container is not running, or its cgroups are not "
				"known yet: no stats");
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	r = read_small(path, "cgroup", buf, sizeof(buf));
	if (r < 0)
		return nerr_set(err, EBUSY, "container init %d gone: no stats", (int)pid);
	if (docker_cg_dirs_from_proc(buf, cg->v2, "/sys/fs/cgroup", cg->cpu, cg->mem, cg->pids,
				     sizeof(cg->cpu)) < 0)
		return nerr_set(err, ENOENT, "cannot find the cgroups of container %s", id);
	return 0;
}

static int pread_text(int fd, char *buf, size_t n)
{
	ssize_t k = pread(fd, buf, n - 1, 0);

	if (k < 0)
		return -errno;
	buf[k] = '\0';
	return 0;
}

static int pread_u64(int fd, uint64_t *ret)
{
	char buf[64];
	int r = pread_text(fd, buf, sizeof(buf));

	if (r < 0)
		return r;
	return docker_cg_parse_u64(buf, ret);
}

/* Open the four files stats reads; kept open, since an open of a cgroup
 * file costs ~9 us here and a pread ~1 us. */
static int cg_open(const struct dk_cgpath *p, struct dk_cg *cg)
{
	static const char *const v1[DK_CG_NFD] = { "cpuacct.stat", "memory.usage_in_bytes",
						   "memory.limit_in_bytes", "pids.current" };
	static const char *const v2[DK_CG_NFD] = { "cpu.stat", "memory.current", "memory.max",
						   "pids.current" };
	const char *const dirs[DK_CG_NFD] = { p->cpu, p->mem, p->mem, p->pids };
	char path[DK_CG_PATH + 64];

	snprintf(cg->id, sizeof(cg->id), "%s", p->id);
	cg->v2 = p->v2;
	for (int i = 0; i < DK_CG_NFD; i++)
		cg->fd[i] = -1;
	for (int i = 0; i < DK_CG_NFD; i++) {
		snprintf(path, sizeof(path), "%s/%s", dirs[i], (p->v2 ? v2 : v1)[i]);
		cg->fd[i] = open(path, O_RDONLY | O_CLOEXEC);
		if (cg->fd[i] < 0) {
			int r = -errno;

			dk_cg_close(cg);
			return r;
		}
	}
	return 0;
}

void dk_cg_close(struct dk_cg *cg)
{
	for (int i = 0; i < DK_CG_NFD; i++)
		if (cg->fd[i] >= 0)
			close(cg->fd[i]);
	for (int i = 0; i < DK_CG_NFD; i++)
		cg->fd[i] = -1;
	cg->id[0] = '\0';
}

static int cg_read(const struct dk_cg *cg, struct rt_stats *s)
{
	long hz = sysconf(_SC_CLK_TCK);
	char buf[1024];
	int r;

	memset(s, 0, sizeof(*s));
	r = pread_text(cg->fd[0], buf, sizeof(buf));
	if (r < 0)
		return r;
	docker_cg_parse_cpu(buf, cg->v2, hz, &s->cpu_user_seconds, &s->cpu_system_seconds);
	r = pread_u64(cg->fd[1], &s->memory_bytes);
	if (r == 0)
		r = pread_u64(cg->fd[2], &s->memory_limit_bytes);
	/* v1 says "unlimited" with a huge page-rounded number */
	if (s->memory_limit_bytes >= (UINT64_C(1) << 62))
		s->memory_limit_bytes = 0;
	if (r == 0)
		r = pread_u64(cg->fd[3], &s->pids);
	return r;
}

static struct dk_cg *cg_find(struct docker *d, const char *id)
{
	for (size_t i = 0; i < DK_CG_MAX; i++)
		if (d->cg[i].id[0] && strcmp(d->cg[i].id, id) == 0)
			return &d->cg[i];
	return NULL;
}

void dk_cg_forget(struct docker *d, const char *id)
{
	struct dk_cg *cg;

	pthread_rwlock_wrlock(&d->cglock);
	cg = cg_find(d, id);
	if (cg)
		dk_cg_close(cg);
	pthread_rwlock_unlock(&d->cglock);
}

/* Resolve and open id's cgroups and keep them for stats(); 0 or -errno. */
static int cg_learn(struct docker *d, const char *id, pid_t pid, struct nerr *err)
{
	struct dk_cgpath p;
	struct dk_cg cg, *e;
	int r;

	r = cg_resolve(d, id, pid, &p, err);
	if (r < 0)
		return r;
	r = cg_open(&p, &cg);
	if (r < 0)
		return nerr_set(err, EBUSY, "container is not running: no stats");
	pthread_rwlock_wrlock(&d->cglock);
	if (cg_find(d, id)) {
		dk_cg_close(&cg);	/* another thread was first */
	} else {
		e = NULL;
		for (size_t i = 0; i < DK_CG_MAX && !e; i++)
			if (!d->cg[i].id[0])
				e = &d->cg[i];
		if (!e) {	/* full: evict round robin */
			e = &d->cg[d->cg_next];
			d->cg_next = (d->cg_next + 1) % DK_CG_MAX;
			dk_cg_close(e);
		}
		*e = cg;
	}
	pthread_rwlock_unlock(&d->cglock);
	return 0;
}

/* A worker saw id running with init pid: learn its cgroups if stats() does
 * not know them, so that stats() never needs to ask the engine. */
void dk_cg_note_running(struct docker *d, const char *id, pid_t pid)
{
	struct nerr e2 = { 0 };
	bool known;

	pthread_rwlock_rdlock(&d->cglock);
	known = cg_find(d, id) != NULL;
	pthread_rwlock_unlock(&d->cglock);
	if (!known)
		(void)cg_learn(d, id, pid, &e2);
}

/*
 * On a FUSE thread: cgroup files only, never the Engine API (a slow or hung
 * engine must not hold a read). Cgroups in a layout the paths do not
 * guess are learnt by the workers: at start, and at each inspect
 * (recovery, reconciliation) of a running container.
 */
int dk_stats(void *h, const char *id, struct rt_stats *ret, struct nerr *err)
{
	struct docker *d = h;
	struct dk_cg *e;
	int r;

	if (dk_check_id(id, err) < 0)
		return -EINVAL;
	for (int attempt = 0; attempt < 2; attempt++) {
		/* the hot path: four preads under a read lock */
		pthread_rwlock_rdlock(&d->cglock);
		e = cg_find(d, id);
		r = e ? cg_read(e, ret) : -ENOENT;
		pthread_rwlock_unlock(&d->cglock);
		if (e && r == 0)
			return 0;
		if (e && r != -ENODEV && r != -ENOENT)
			return nerr_set(err, -r, "reading cgroup files of %s: %s", id, strerror(-r));
		/* ENODEV: the cgroup went away (stopped, maybe restarted) */
		if (e)
			dk_cg_forget(d, id);
		r = cg_learn(d, id, 0, err);
		if (r < 0)
			return r;
	}
	return nerr_set(err, EBUSY, "container is not running: no stats");
}
