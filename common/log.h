/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * log: one line per event to stderr (foreground) or syslog (daemon).
 * Transport and object code do not log; whoever finishes a request logs once.
 */
#ifndef NODEFS_LOG_H
#define NODEFS_LOG_H

#include <stdbool.h>

enum log_level { LOG_LVL_ERR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

void log_setup(enum log_level max, bool use_syslog);
void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...) log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
