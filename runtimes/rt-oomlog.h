/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * rt-oomlog: the kernel's own account of OOM kills in memory cgroups, read
 * from /dev/kmsg. Since Linux 4.19 each kill logs one summary record,
 *   oom-kill:constraint=CONSTRAINT_MEMCG,...,oom_memcg=PATH,task_memcg=PATH,task=sh,pid=N,uid=0
 * and the record stays in the kernel's buffer after the cgroup is gone.
 * An engine's own report can lose that race (conmon reads memory.events
 * after systemd has removed the scope; containerd arms its watch after the
 * task starts); the record cannot.
 *
 * Threads: any; rt_oomlog_find opens its own reader, never holds a lock.
 * Must not know: engines, the backend.
 */
#ifndef NODEFS_RT_OOMLOG_H
#define NODEFS_RT_OOMLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* One oom-kill record: the time (µs since boot, the kernel's clock) and the
 * two cgroup paths, pointing into the record. */
struct rt_oomkill {
	uint64_t usec;
	const char *oom_memcg, *task_memcg;
	size_t oom_len, task_len;
};

/* One /dev/kmsg record ("PRIO,SEQ,USEC,FLAGS;MESSAGE\n" then " KEY=VALUE"
 * lines). 1 and *out filled for an oom-kill summary, 0 for any other
 * record, -EBADMSG for one that is not a kmsg record. */
int rt_oomlog_parse(const char *rec, size_t n, struct rt_oomkill *out);

/* Does the cgroup path name the container id (at least 12 hex digits, a
 * prefix of the engine's full id): docker-ID.scope, libpod-ID.scope,
 * /docker/ID and the like? */
bool rt_oomlog_names(const char *path, size_t n, const char *id);

/* Is the cgroup path of a record (relative to its hierarchy's root) the
 * cgroup at dir (a path in the file system, /sys/fs/cgroup/...), or below
 * it? The record's path, or a leading part of it ending at a '/', must end
 * dir. */
bool rt_oomlog_under(const char *path, size_t n, const char *dir);

/* Did the kernel OOM-kill a task in a cgroup naming id at or after since
 * (wall clock, whole seconds; the run's start)? 1 yes, 0 no, -errno when
 * /dev/kmsg cannot be read (no CAP_SYSLOG, no such device). */
int rt_oomlog_find(const char *id, time_t since);
/* The same for a task in the cgroup at dir or below it (rt_oomlog_under). */
int rt_oomlog_find_cgroup(const char *dir, time_t since);

#endif
