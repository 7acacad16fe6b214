/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plugin-record: what plugin-proc keeps of a plugin on disk and reads back
 * of a process. STATE_DIR/plugins/NAME.json holds the plugin's definition
 * (a plugin added at run time comes back from it) and, for a plugin nodefs
 * starts, its process: pid, process group, start time (/proc/PID/stat field
 * 22, clock ticks since boot) and boot id, so a later run knows the very
 * process it started and no other. The public calls on records
 * (plugin_record_put, _del, _retire, plugin_records_load) are declared in
 * plugin-proc.h; these are the helpers the two files share.
 * Must not know: the supervisor's state machine, fs, CSI.
 */
#ifndef NODEFS_PLUGIN_RECORD_H
#define NODEFS_PLUGIN_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include <jansson.h>

struct backend;
struct plugin_def;

/* The kernel's boot id ("" when unreadable). */
void plugin_boot_id(char *buf, size_t len);
/* pid's start time and process group; -ESRCH for a zombie, -errno. */
int plugin_proc_stat(pid_t pid, unsigned long long *ret_start, pid_t *ret_pgid);
/* The wall clock time of a start time in ticks. */
time_t plugin_start_time(unsigned long long ticks);
/* A record's definition part: its members, written into w's open object
 * (store_record_begin; common/jw.c, the one writer of what nodefs
 * writes). */
struct jw;
void plugin_record_write(struct jw *w, const struct plugin_def *def);
/* The process part of NAME's record (zeros when none): for a container,
 * its id in cid (may be NULL) and its init's pid. */
void plugin_record_read(struct backend *b, const char *name, pid_t *pid, pid_t *pgid,
			unsigned long long *start, char *boot, size_t blen, unsigned *restarts,
			char *cid, size_t clen);
/* True when the process a record names still runs (same boot, same pid,
 * same start time). */
bool plugin_record_alive(pid_t pid, unsigned long long start, const char *boot);
/* A copy of a NULL-terminated vector (NULL on OOM). */
char **plugin_strv_dup(char *const *v);

#endif
