/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * oomlog-kernel: rt_oomlog_find (runtimes/rt-oomlog.c) against the real
 * kernel. The test makes a memory cgroup of its own whose name carries an
 * engine-like id, lets the kernel OOM-kill a shell in it, removes the
 * cgroup, and then asks: the kill is found by that id (the cgroup is gone,
 * the record is not), not by another id, and not for a run that began
 * after it; and by the cgroup's directory, as the LXC driver asks. Root,
 * a memory controller and a readable /dev/kmsg (exit 77 otherwise).
 * cgroup v1 or v2.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rt-oomlog.h"

static char cg[256], id[65], dir[400];

static int put(const char *dir, const char *file, const char *val)
{
	char p[512];
	int fd, r = 0;

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, val, strlen(val)) < 0)
		r = -errno;
	close(fd);
	return r;
}

static void need(void)
{
	struct stat st;

	if (geteuid() != 0 || access("/dev/kmsg", R_OK) != 0) {
		fprintf(stderr, "SKIP: needs root and a readable /dev/kmsg\n");
		exit(77);
	}
	if (stat("/sys/fs/cgroup/cgroup.controllers", &st) == 0)
		snprintf(cg, sizeof(cg), "/sys/fs/cgroup/nodefs-oomlog-%d", getpid());
	else if (stat("/sys/fs/cgroup/memory/tasks", &st) == 0)
		snprintf(cg, sizeof(cg), "/sys/fs/cgroup/memory/nodefs-oomlog-%d", getpid());
	else {
		fprintf(stderr, "SKIP: no memory cgroup controller\n");
		exit(77);
	}
}

/* A shell the kernel kills for memory, in a cgroup (dir) named for id;
 * waits, and removes the cgroup. */
static int oom_in_cgroup(const char *name_id)
{
	char pid[32];
	int status;
	pid_t c;

	snprintf(dir, sizeof(dir), "%s-%s.scope", cg, name_id);
	cr_assert_eq(mkdir(dir, 0755), 0, "mkdir %s: %s", dir, strerror(errno));
	if (put(dir, "memory.max", "16777216") == -ENOENT) {	/* v1 */
		cr_assert_eq(put(dir, "memory.limit_in_bytes", "16777216"), 0);
		put(dir, "memory.memsw.limit_in_bytes", "16777216");	/* where swap accounting is on */
	} else {
		put(dir, "memory.swap.max", "0");
	}
	c = fork();
	cr_assert_geq(c, 0);
	if (c == 0) {
		snprintf(pid, sizeof(pid), "%d", getpid());
		if (put(dir, "cgroup.procs", pid) < 0)
			_exit(3);
		execl("/bin/sh", "sh", "-c", "a=xxxxxxxxxxxxxxxx; while :; do a=$a$a; done", (char *)NULL);
		_exit(4);
	}
	cr_assert_eq(waitpid(c, &status, 0), c);
	for (int i = 0; i < 100 && rmdir(dir) < 0 && errno == EBUSY; i++)
		usleep(20000);
	cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		  "the shell was not killed (status 0x%x)", status);
	return 0;
}

Test(oomlog, kernel_record_outlives_the_cgroup)
{
	time_t start = time(NULL);
	unsigned seed = (unsigned)getpid() * 2654435761u ^ (unsigned)start;
	char other[65];

	need();
	for (int i = 0; i < 64; i++) {
		seed = seed * 1103515245u + 12345u;
		id[i] = "0123456789abcdef"[(seed >> 16) & 15];
		other[i] = "0123456789abcdef"[(seed >> 20) & 15];
	}
	id[64] = other[64] = '\0';
	other[0] = id[0] == 'f' ? 'e' : 'f';
	oom_in_cgroup(id);
	cr_assert_eq(access(cg, F_OK), -1, "the cgroup is gone");
	cr_assert_eq(rt_oomlog_find(id, start), 1, "the kill of %s is in the log", id);
	char prefix[13];
	memcpy(prefix, id, 12);
	prefix[12] = '\0';
	cr_assert_eq(rt_oomlog_find(prefix, start), 1, "a short id finds it too");
	cr_assert_eq(rt_oomlog_find(other, start), 0, "another id's is not");
	cr_assert_eq(rt_oomlog_find(id, time(NULL) + 3), 0, "a run begun later had no kill");
	/* by the cgroup's directory, as the LXC driver asks */
	cr_assert_eq(rt_oomlog_find_cgroup(dir, start), 1, "the kill in %s is in the log", dir);
	cr_assert_eq(rt_oomlog_find_cgroup(cg, start), 0, "%s is not that cgroup", cg);
	cr_assert_eq(rt_oomlog_find_cgroup(dir, time(NULL) + 3), 0);
}
