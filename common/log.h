/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * log: one line per event to stderr (foreground) or syslog (daemon). Under
 * systemd (stderr is $JOURNAL_STREAM) lines carry syslog priority prefixes
 * ("<3>" error, "<4>" warning, "<6>" info, "<7>" debug) for the journal.
 * A line about an object names it ("volume db: ...", "container web: ...")
 * and the operation id when there is one ("(operation 42)").
 * Transport and object code do not log; whoever finishes a request logs once.
 */
#ifndef NODEFS_LOG_H
#define NODEFS_LOG_H

#include <stdbool.h>

enum log_level { LOG_LVL_ERR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

/* Where lines go; before other threads start. */
void log_setup(enum log_level max, bool use_syslog);
/* The most verbose level logged; changeable at any time (a reload). */
void log_set_level(enum log_level max);
enum log_level log_get_level(void);
/* "error", "warning", "info", "debug"; from_string: -1 when unknown. */
const char *log_level_to_string(enum log_level lvl);
int log_level_from_string(const char *s);
void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...) log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
