/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lxc-cgroup: the host's cgroup layout (v1 controllers, hybrid, or unified
 * v2 only), the lxc.cgroup.* / lxc.cgroup2.* items for a set of limits (cpu
 * shares converted to weight on v2), and the files stats and OOM detection
 * read from a running container's cgroups, and the removal of the empty
 * cgroups a stopped container leaves. Reads /proc and /sys only; no liblxc
 * calls, nothing of backend/ or fs/.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lxc-internal.h"
#include "macro.h"
#include "nerr.h"

int rt_lxc_read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t n = 0;

	if (fd < 0)
		return -errno;
	while (n + 1 < size) {
		ssize_t r = read(fd, buf + n, size - 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;

			close(fd);
			return -e;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = '\0';
	return (int)n;
}

/* Does the comma list opts contain word? */
static bool has_word(const char *opts, const char *word)
{
	size_t wl = strlen(word);

	for (const char *p = opts; p && *p;) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);

		if (l == wl && memcmp(p, word, wl) == 0)
			return true;
		p = c ? c + 1 : NULL;
	}
	return false;
}

static void set_path(char *dst, const char *src)
{
	snprintf(dst, PATH_MAX, "%s", src);
}

int rt_lxc_cg_probe(struct rt_lxc_cgroup *cg, struct nerr *err)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	char path[PATH_MAX + 64];

	memset(cg, 0, sizeof(*cg));
	if (!f)
		return nerr_set(err, errno, "cannot read /proc/self/mountinfo: %s", strerror(errno));
	while (getline(&line, &cap, f) > 0) {
		char mnt[PATH_MAX], fstype[64], opts[512];
		char *dash = strstr(line, " - ");

		/* id parent maj:min root mountpoint ... - fstype source superopts */
		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
			continue;
		if (sscanf(dash + 3, "%63s %*s %511s", fstype, opts) != 2)
			continue;
		if (strcmp(fstype, "cgroup2") == 0) {
			if (!cg->v2_root[0])
				set_path(cg->v2_root, mnt);
		} else if (strcmp(fstype, "cgroup") == 0) {
			if (has_word(opts, "memory"))
				set_path(cg->memory, mnt);
			if (has_word(opts, "cpu"))
				set_path(cg->cpu, mnt);
			if (has_word(opts, "cpuacct"))
				set_path(cg->cpuacct, mnt);
			if (has_word(opts, "pids"))
				set_path(cg->pids, mnt);
			if (has_word(opts, "freezer"))
				set_path(cg->freezer, mnt);
		}
	}
	free(line);
	fclose(f);

	/* A controller on a v1 mount is not usable on v2 (hybrid hosts keep
	 * an empty unified hierarchy): v1 whenever memory is on v1. */
	cg->mode = cg->memory[0] ? RT_LXC_CG_V1 : RT_LXC_CG_V2;
	if (cg->mode == RT_LXC_CG_V1) {
		snprintf(path, sizeof(path), "%s/memory.memsw.limit_in_bytes", cg->memory);
		cg->memsw = access(path, F_OK) == 0;
	} else {
		if (!cg->v2_root[0])
			return nerr_set(err, ENOENT, "no cgroup mount found");
		/* memory.swap.max exists in non-root cgroups when swap is
		 * accounted: look at our own cgroup. */
		struct rt_lxc_cgpaths self;

		if (rt_lxc_cg_paths(cg, getpid(), &self) == 0) {
			snprintf(path, sizeof(path), "%s/memory.swap.max", self.unified);
			cg->swap_max = access(path, F_OK) == 0;
		}
	}
	return 0;
}

static int add_item(struct rt_lxc_item *items, size_t max, size_t *n, bool prefix,
		    bool v2, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));

static int add_item(struct rt_lxc_item *items, size_t max, size_t *n, bool prefix,
		    bool v2, const char *key, const char *fmt, ...)
{
	va_list ap;

	if (*n >= max)
		return -E2BIG;
	snprintf(items[*n].key, sizeof(items[*n].key), "%s%s",
		 prefix ? (v2 ? "lxc.cgroup2." : "lxc.cgroup.") : "", key);
	va_start(ap, fmt);
	vsnprintf(items[*n].val, sizeof(items[*n].val), fmt, ap);
	va_end(ap);
	(*n)++;
	return 0;
}

/* cpu.shares range of v1 and its mapping onto cpu.weight (1..10000), the
 * formula runc and systemd use. */
#define SHARES_MIN 2ull
#define SHARES_MAX 262144ull
#define CFS_PERIOD_US 100000ull

static uint64_t shares_to_weight(uint64_t shares)
{
	return 1 + ((shares - SHARES_MIN) * 9999) / (SHARES_MAX - SHARES_MIN);
}

int rt_lxc_cg_items(const struct rt_lxc_cgroup *cg, const struct rt_limits *lim,
		    bool prefix, struct rt_lxc_item *items, size_t max, struct nerr *err)
{
	bool v2 = cg->mode == RT_LXC_CG_V2;
	size_t n = 0;
	int r = 0;

	if (lim->set & RT_LIMIT_MEMORY) {
		/* Below a few MiB the container cannot even start init. */
		if (lim->memory < (4u << 20))
			return nerr_set(err, EINVAL, "memory limit %" PRIu64 " below 4M", lim->memory);
		if (v2) {
			r |= add_item(items, max, &n, prefix, v2, "memory.max", "%" PRIu64, lim->memory);
			if (cg->swap_max)
				r |= add_item(items, max, &n, prefix, v2, "memory.swap.max", "0");
		} else {
			r |= add_item(items, max, &n, prefix, v2, "memory.limit_in_bytes", "%" PRIu64,
				      lim->memory);
			if (cg->memsw)
				r |= add_item(items, max, &n, prefix, v2, "memory.memsw.limit_in_bytes",
					      "%" PRIu64, lim->memory);
		}
	}
	if (lim->set & RT_LIMIT_CPUS) {
		uint64_t shares, quota;

		if (!(lim->cpus > 0) || lim->cpus > 1024)
			return nerr_set(err, EINVAL, "cpus %g out of range (0, 1024]", lim->cpus);
		shares = (uint64_t)llround(lim->cpus * 1024);
		if (shares < SHARES_MIN)
			shares = SHARES_MIN;
		if (shares > SHARES_MAX)
			shares = SHARES_MAX;
		quota = (uint64_t)llround(lim->cpus * (double)CFS_PERIOD_US);
		if (quota < 1000)
			quota = 1000;
		if (v2) {
			r |= add_item(items, max, &n, prefix, v2, "cpu.weight", "%" PRIu64,
				      shares_to_weight(shares));
			r |= add_item(items, max, &n, prefix, v2, "cpu.max", "%" PRIu64 " %llu", quota,
				      CFS_PERIOD_US);
		} else {
			r |= add_item(items, max, &n, prefix, v2, "cpu.shares", "%" PRIu64, shares);
			r |= add_item(items, max, &n, prefix, v2, "cpu.cfs_period_us", "%llu",
				      CFS_PERIOD_US);
			r |= add_item(items, max, &n, prefix, v2, "cpu.cfs_quota_us", "%" PRIu64, quota);
		}
	}
	if (lim->set & RT_LIMIT_PIDS) {
		if (lim->pids < 1)
			return nerr_set(err, EINVAL, "pids %" PRId64 " must be at least 1", lim->pids);
		r |= add_item(items, max, &n, prefix, v2, "pids.max", "%" PRId64, lim->pids);
	}
	if (r)
		return nerr_set(err, E2BIG, "too many cgroup items");
	return (int)n;
}

int rt_lxc_cg_paths(const struct rt_lxc_cgroup *cg, pid_t pid, struct rt_lxc_cgpaths *ret)
{
	char fn[64];
	FILE *f;
	char *line = NULL;
	size_t cap = 0;
	struct rt_lxc_cgpaths p = { 0 };

	if (pid <= 0)
		return -ESRCH;
	snprintf(fn, sizeof(fn), "/proc/%d/cgroup", (int)pid);
	f = fopen(fn, "re");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char *c1 = strchr(line, ':'), *c2, *nl;

		if (!c1 || !(c2 = strchr(c1 + 1, ':')))
			continue;
		*c2 = '\0';
		if ((nl = strchr(c2 + 1, '\n')))
			*nl = '\0';
		const char *ctrls = c1 + 1, *rel = c2 + 1;

		if (!*ctrls) {
			if (cg->v2_root[0])
				snprintf(p.unified, PATH_MAX, "%s%s", cg->v2_root, rel);
			continue;
		}
		if (has_word(ctrls, "memory") && cg->memory[0])
			snprintf(p.memory, PATH_MAX, "%s%s", cg->memory, rel);
		if (has_word(ctrls, "cpu") && cg->cpu[0])
			snprintf(p.cpu, PATH_MAX, "%s%s", cg->cpu, rel);
		if (has_word(ctrls, "cpuacct") && cg->cpuacct[0])
			snprintf(p.cpuacct, PATH_MAX, "%s%s", cg->cpuacct, rel);
		if (has_word(ctrls, "pids") && cg->pids[0])
			snprintf(p.pids, PATH_MAX, "%s%s", cg->pids, rel);
		if (has_word(ctrls, "freezer") && cg->freezer[0])
			snprintf(p.freezer, PATH_MAX, "%s%s", cg->freezer, rel);
	}
	free(line);
	fclose(f);
	if (cg->mode == RT_LXC_CG_V2 && !p.unified[0])
		return -ESRCH;
	if (cg->mode == RT_LXC_CG_V1 && !p.memory[0])
		return -ESRCH;
	*ret = p;
	return 0;
}

static int write_at(const char *dir, const char *file, const char *v)
{
	char path[PATH_MAX + 64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = write(fd, v, strlen(v));
	n = n < 0 ? -errno : 0;
	close(fd);
	return (int)n;
}

int rt_lxc_cg_freeze(const struct rt_lxc_cgpaths *p, bool freeze, int timeout_ms)
{
	const char *want = freeze ? "FROZEN" : "THAWED";
	struct timespec nap = { .tv_sec = 0, .tv_nsec = 5 * 1000000 };
	char path[PATH_MAX + 64], buf[64];

	if (!p->freezer[0])
		return -ENOTSUP;
	snprintf(path, sizeof(path), "%s/freezer.state", p->freezer);
	for (int waited = 0;; waited += 5) {
		/* written again on every look: the kernel retries the tasks it
		 * could not freeze only on a write */
		int r = write_at(p->freezer, "freezer.state", want);

		if (r == 0)
			r = rt_lxc_read_file(path, buf, sizeof(buf));
		if (r == -ENOENT)
			return -ESRCH;
		if (r < 0)
			return r;
		if (strncmp(buf, want, strlen(want)) == 0)
			return 0;
		if (waited >= timeout_ms)
			break;
		nanosleep(&nap, NULL);
	}
	if (freeze)
		(void)write_at(p->freezer, "freezer.state", "THAWED");
	return -ETIMEDOUT;
}

/* Read dir/file into buf (NUL-terminated); -ENOENT for no dir. */
static int read_at(const char *dir, const char *file, char *buf, size_t size)
{
	char path[PATH_MAX + 64];

	if (!dir[0])
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	return rt_lxc_read_file(path, buf, size);
}

/* Read dir/file as one unsigned number; "max" reads as 0 (unlimited). */
static int read_u64(const char *dir, const char *file, uint64_t *ret)
{
	char buf[64];
	int r = read_at(dir, file, buf, sizeof(buf));

	if (r < 0)
		return r;
	if (strncmp(buf, "max", 3) == 0) {
		*ret = 0;
		return 0;
	}
	errno = 0;
	*ret = strtoull(buf, NULL, 10);
	return errno ? -errno : 0;
}

/* Find "key N" in a flat-keyed cgroup file. */
static int read_keyed(const char *dir, const char *file, const char *key, uint64_t *ret)
{
	char buf[4096];
	size_t kl = strlen(key);
	int r = read_at(dir, file, buf, sizeof(buf));

	if (r < 0)
		return r;
	for (char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, key, kl) == 0 && p[kl] == ' ') {
			*ret = strtoull(p + kl + 1, NULL, 10);
			return 0;
		}
	}
	return -ENOENT;
}

int rt_lxc_cg_stats(const struct rt_lxc_cgroup *cg, const struct rt_lxc_cgpaths *p,
		    struct rt_stats *ret)
{
	struct rt_stats s = { 0 };
	uint64_t u = 0, sy = 0, lim = 0;
	int r;

	if (cg->mode == RT_LXC_CG_V2) {
		if ((r = read_keyed(p->unified, "cpu.stat", "user_usec", &u)) < 0 ||
		    (r = read_keyed(p->unified, "cpu.stat", "system_usec", &sy)) < 0)
			return r;
		s.cpu_user_seconds = (double)u / 1e6;
		s.cpu_system_seconds = (double)sy / 1e6;
		if ((r = read_u64(p->unified, "memory.current", &s.memory_bytes)) < 0)
			return r;
		if ((r = read_u64(p->unified, "memory.max", &lim)) < 0)
			return r;
		s.memory_limit_bytes = lim;
		(void)read_u64(p->unified, "pids.current", &s.pids);
	} else {
		long hz = sysconf(_SC_CLK_TCK);

		if (hz <= 0)
			hz = 100;
		if ((r = read_keyed(p->cpuacct, "cpuacct.stat", "user", &u)) < 0 ||
		    (r = read_keyed(p->cpuacct, "cpuacct.stat", "system", &sy)) < 0)
			return r;
		s.cpu_user_seconds = (double)u / (double)hz;
		s.cpu_system_seconds = (double)sy / (double)hz;
		if ((r = read_u64(p->memory, "memory.usage_in_bytes", &s.memory_bytes)) < 0)
			return r;
		if ((r = read_u64(p->memory, "memory.limit_in_bytes", &lim)) < 0)
			return r;
		/* v1 spells "unlimited" as PAGE_COUNTER_MAX pages. */
		s.memory_limit_bytes = lim >= (1ull << 62) ? 0 : lim;
		(void)read_u64(p->pids, "pids.current", &s.pids);
	}
	*ret = s;
	return 0;
}

int rt_lxc_cg_oom_kills(const struct rt_lxc_cgroup *cg, const struct rt_lxc_cgpaths *p,
			uint64_t *ret)
{
	if (cg->mode == RT_LXC_CG_V2)
		return read_keyed(p->unified, "memory.events", "oom_kill", ret);
	return read_keyed(p->memory, "memory.oom_control", "oom_kill", ret);
}

/* ---- the daemon's own cgroups, and what a container's monitor leaves ---- */

/* Is every comma-separated word of ctrls in the mount options opts? */
static bool has_words(const char *opts, const char *ctrls)
{
	char w[128];

	for (const char *p = ctrls; *p;) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);

		if (l == 0 || l >= sizeof(w))
			return false;
		memcpy(w, p, l);
		w[l] = '\0';
		if (!has_word(opts, w))
			return false;
		p = c ? c + 1 : p + l;
	}
	return true;
}

int rt_lxc_cg_home(struct rt_lxc_home *ret)
{
	struct { char ctrls[128]; char rel[PATH_MAX]; } self[RT_LXC_HOME_MAX];
	size_t nself = 0;
	char *line = NULL;
	size_t cap = 0;
	FILE *f = fopen("/proc/self/cgroup", "re");

	memset(ret, 0, sizeof(*ret));
	if (!f)
		return -errno;
	while (nself < ARRAY_SIZE(self) && getline(&line, &cap, f) > 0) {
		char *c1 = strchr(line, ':'), *c2, *nl;

		if (!c1 || !(c2 = strchr(c1 + 1, ':')))
			continue;
		*c2 = '\0';
		if ((nl = strchr(c2 + 1, '\n')))
			*nl = '\0';
		snprintf(self[nself].ctrls, sizeof(self[nself].ctrls), "%s", c1 + 1);
		snprintf(self[nself].rel, sizeof(self[nself].rel), "%s", c2 + 1);
		nself++;
	}
	fclose(f);
	f = fopen("/proc/self/mountinfo", "re");
	if (!f) {
		free(line);
		return -errno;
	}
	while (ret->n < RT_LXC_HOME_MAX && getline(&line, &cap, f) > 0) {
		char root[PATH_MAX], mnt[PATH_MAX], fstype[64], opts[512];
		char *dash = strstr(line, " - ");

		if (!dash || sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2)
			continue;
		if (sscanf(dash + 3, "%63s %*s %511s", fstype, opts) != 2)
			continue;
		bool v2 = strcmp(fstype, "cgroup2") == 0;

		if (!v2 && strcmp(fstype, "cgroup") != 0)
			continue;
		for (size_t i = 0; i < nself; i++) {
			const char *rel = self[i].rel;
			size_t rl = strlen(root);

			if (v2 ? self[i].ctrls[0] != '\0'
			       : !self[i].ctrls[0] || !has_words(opts, self[i].ctrls))
				continue;
			/* our cgroup as seen from the mount's root */
			if (strcmp(root, "/") != 0) {
				if (strncmp(rel, root, rl) != 0 || (rel[rl] && rel[rl] != '/'))
					break;
				rel += rl;
			}
			if (strcmp(rel, "/") == 0)
				rel = "";
			if ((size_t)snprintf(ret->h[ret->n].mnt, PATH_MAX, "%s", mnt) >= PATH_MAX ||
			    (size_t)snprintf(ret->h[ret->n].dir, PATH_MAX, "%s%s", mnt, rel) >= PATH_MAX)
				break;
			ret->n++;
			break;
		}
	}
	free(line);
	fclose(f);
	return (int)ret->n;
}

int rt_lxc_cg_go_home(const struct rt_lxc_home *home)
{
	char path[PATH_MAX + 32], pid[32];
	int ret = 0;

	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	for (size_t i = 0; i < home->n; i++) {
		snprintf(path, sizeof(path), "%s/cgroup.procs", home->h[i].dir);
		int fd = open(path, O_WRONLY | O_CLOEXEC);

		if (fd < 0 || write(fd, pid, strlen(pid)) < 0)
			ret = -errno;
		if (fd >= 0)
			close(fd);
	}
	return ret;
}

static bool is_leftover(const char *dname, const char *pre, size_t plen)
{
	if (strncmp(dname, pre, plen) != 0)
		return false;
	if (!dname[plen])
		return true;
	if (dname[plen] != '-' || !dname[plen + 1])
		return false;
	for (const char *p = dname + plen + 1; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;	/* NAME-1, NAME-2: liblxc's names when NAME was taken */
}

/* rmdir the leftovers of name in dir, waiting (bounded) for a monitor on
 * its way out to leave its cgroup. */
static int remove_in(const char *dir, const char *name, int *removed)
{
	static const char *const kinds[] = { "lxc.monitor.", "lxc.payload.", NULL };
	char pre[128], path[PATH_MAX + 256];
	int ret = 0;

	for (const char *const *k = kinds; *k; k++) {
		size_t plen = (size_t)snprintf(pre, sizeof(pre), "%s%s", *k, name);
		DIR *d = opendir(dir);
		struct dirent *de;

		if (!d)
			return errno == ENOENT ? 0 : -errno;
		while ((de = readdir(d))) {
			if (de->d_type != DT_DIR || !is_leftover(de->d_name, pre, plen))
				continue;
			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			for (int tries = 0;; tries++) {
				if (rmdir(path) == 0) {
					(*removed)++;
					break;
				}
				if (errno == ENOENT)
					break;
				if (errno != EBUSY || tries >= 100) {
					ret = -errno;
					break;
				}
				nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000 * 1000 }, NULL);
			}
		}
		closedir(d);
	}
	return ret;
}

int rt_lxc_cg_remove_leftovers(const struct rt_lxc_home *home, const char *name)
{
	int removed = 0, ret = 0;

	for (size_t i = 0; i < home->n; i++) {
		/* liblxc makes them beside the daemon's cgroup or at the root */
		int r = remove_in(home->h[i].dir, name, &removed);

		if (r < 0)
			ret = r;
		if (strcmp(home->h[i].dir, home->h[i].mnt) != 0 &&
		    (r = remove_in(home->h[i].mnt, name, &removed)) < 0)
			ret = r;
	}
	return ret < 0 ? ret : removed;
}
