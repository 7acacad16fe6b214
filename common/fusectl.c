/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fusectl: the record of a nodefs's FUSE connection and the abort of a
 * stuck one; see fusectl.h. Reads /proc and /sys only.
 *
 * Must not know: FUSE's protocol, the backend, the tree.
 */
#include "fusectl.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "nerr.h"

#define FUSECTL_SUPER_MAGIC 0x65735543

/* The start time of pid (clock ticks since boot, /proc/PID/stat field 22),
 * and its state letter; 0 when it cannot be read. */
static unsigned long long proc_start(const char *stat_path, char *ret_state)
{
	char buf[1024], *p;
	unsigned long long start = 0;
	ssize_t n;
	int fd = open(stat_path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')');	/* comm may hold spaces and parentheses */
	if (!p || p[1] != ' ')
		return 0;
	if (ret_state)
		*ret_state = p[2];
	/* after ")": state is field 3; starttime field 22, 19 fields on */
	p += 2;
	for (int field = 3; field < 22 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (p)
		start = strtoull(p, NULL, 10);
	return start;
}

int fusectl_record(const char *state_dir, const char *mnt, struct nerr *err)
{
	char path[4200], tmp[4300], self[64];
	unsigned long long start;
	struct statx stx;
	FILE *fp;

	/* the mount's device without a request: its loop may not serve yet
	 * (FUSE_INIT unanswered, a stat would wait for it) */
	if (statx(AT_FDCWD, mnt, AT_STATX_DONT_SYNC, STATX_TYPE, &stx) < 0)
		return nerr_set(err, errno, "%s: %s", mnt, strerror(errno));
	snprintf(self, sizeof(self), "/proc/%d/stat", (int)getpid());
	start = proc_start(self, NULL);
	snprintf(path, sizeof(path), "%s/" FUSECTL_RECORD, state_dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fp = fopen(tmp, "we");
	if (!fp)
		return nerr_set(err, errno, "cannot write %s: %s", tmp, strerror(errno));
	fprintf(fp, "connection %u\npid %d\nstart %llu\nmountpoint %s\n", stx.stx_dev_minor,
		(int)getpid(), start, mnt);
	if (fclose(fp) != 0 || rename(tmp, path) < 0) {
		int e = errno;

		unlink(tmp);
		return nerr_set(err, e, "cannot write %s: %s", path, strerror(e));
	}
	return 0;
}

struct record {
	unsigned conn;
	int pid;
	unsigned long long start;
};

/* 0, or -ENOENT when there is no usable record */
static int record_read(const char *state_dir, struct record *r)
{
	char path[4200], line[4200];
	int have = 0;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/" FUSECTL_RECORD, state_dir);
	fp = fopen(path, "re");
	if (!fp)
		return -ENOENT;
	while (fgets(line, sizeof(line), fp)) {
		if (sscanf(line, "connection %u", &r->conn) == 1)
			have |= 1;
		else if (sscanf(line, "pid %d", &r->pid) == 1)
			have |= 2;
		else if (sscanf(line, "start %llu", &r->start) == 1)
			have |= 4;
	}
	fclose(fp);
	return have == 7 && r->pid > 0 && r->start ? 0 : -ENOENT;
}

/* Whether thread dir (/proc/PID/task/TID) has SIGKILL pending (the
 * process is being killed: a group exit sets it in every thread). */
static bool sigkill_pending(const char *dir)
{
	char path[700], line[256];
	bool pending = false;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/status", dir);
	fp = fopen(path, "re");
	if (!fp)
		return false;
	while (fgets(line, sizeof(line), fp)) {
		unsigned long long mask;

		if ((sscanf(line, "SigPnd: %llx", &mask) == 1 ||
		     sscanf(line, "ShdPnd: %llx", &mask) == 1) && (mask & (1ull << (9 - 1))))
			pending = true;
	}
	fclose(fp);
	return pending;
}

enum proc_is { PROC_GONE, PROC_LIVE, PROC_DYING };

/*
 * What became of the recorded process: gone (no such pid, another process
 * under it, or no live thread: its files are closed), live, or dying (its
 * main thread a zombie, or every live thread with SIGKILL pending, while
 * some thread still lives).
 */
static enum proc_is proc_state(const struct record *r)
{
	char path[256], leader_state = 0;
	unsigned live = 0, killed = 0;
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/stat", r->pid);
	if (proc_start(path, &leader_state) != r->start)
		return PROC_GONE;
	snprintf(path, sizeof(path), "/proc/%d/task", r->pid);
	d = opendir(path);
	if (!d)
		return PROC_GONE;
	while ((de = readdir(d))) {
		char tdir[600], tstat[700], state = 0;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		snprintf(tdir, sizeof(tdir), "%s/%s", path, de->d_name);
		snprintf(tstat, sizeof(tstat), "%s/stat", tdir);
		if (!proc_start(tstat, &state) || state == 'Z' || state == 'X')
			continue;
		live++;
		if (sigkill_pending(tdir))
			killed++;
	}
	closedir(d);
	if (!live)
		return PROC_GONE;
	if (leader_state == 'Z' || leader_state == 'X' || killed == live)
		return PROC_DYING;
	return PROC_LIVE;
}

/* Whether a mount visible here has device 0:conn and is not a nodefs (the
 * number was given to another filesystem). A detached mount is not seen:
 * then the dying process's connection is still its own (the process holds
 * it, and with it the number). */
static bool conn_is_another_fs(unsigned conn)
{
	char line[8192], want[32];
	bool other = false;
	FILE *fp = fopen("/proc/self/mountinfo", "re");

	if (!fp)
		return false;
	snprintf(want, sizeof(want), "0:%u", conn);
	while (fgets(line, sizeof(line), fp)) {
		char dev[32], *sep;
		char type[128];

		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS...] - TYPE SOURCE SUPER */
		if (sscanf(line, "%*s %*s %31s", dev) != 1 || strcmp(dev, want) != 0)
			continue;
		sep = strstr(line, " - ");
		if (sep && sscanf(sep + 3, "%127s", type) == 1 && strcmp(type, "fuse.nodefs") != 0)
			other = true;
	}
	fclose(fp);
	return other;
}

static int fusectl_mounted(struct nerr *err)
{
	struct statfs sfs;

	if (statfs(FUSECTL_DIR, &sfs) == 0 && (unsigned long)sfs.f_type == FUSECTL_SUPER_MAGIC)
		return 0;
	if (mount("fusectl", FUSECTL_DIR, "fusectl", 0, NULL) < 0)
		return nerr_set(err, errno, "cannot mount fusectl on %s: %s", FUSECTL_DIR,
				strerror(errno));
	return 0;
}

int fusectl_abort_stale(const char *state_dir, unsigned wait_ms, struct nerr *err)
{
	struct record rec = { 0 };
	char path[256];
	enum proc_is is;
	int fd, r;

	if (record_read(state_dir, &rec) < 0)
		return 0;
	is = proc_state(&rec);
	if (is != PROC_DYING)
		return 0;	/* live: never taken over; gone: its connection ended */
	r = fusectl_mounted(err);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), FUSECTL_DIR "/%u/abort", rec.conn);
	if (access(path, F_OK) < 0)
		return 0;
	if (conn_is_another_fs(rec.conn))
		return 0;
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "1", 1) != 1) {
		r = nerr_set(err, errno, "cannot abort FUSE connection %u (%s): %s", rec.conn,
			     path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return r;
	}
	close(fd);
	log_warn("state dir %s: nodefs %d was killed but one of its threads is stuck in the "
		 "kernel on FUSE connection %u, holding the mount and the state dir: aborted "
		 "the connection (%s)", state_dir, rec.pid, rec.conn, path);
	/* the stuck thread now gets its lock, returns and exits: the process
	 * ends, and its files (/dev/fuse, STATE_DIR/lock) close */
	for (unsigned waited = 0; waited < wait_ms; waited += 10) {
		if (proc_state(&rec) == PROC_GONE)
			break;
		usleep(10 * 1000);
	}
	return 1;
}
