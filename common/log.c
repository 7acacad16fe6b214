/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* log: stderr or syslog, chosen once at start; see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>
#include <time.h>

static enum log_level log_max = LOG_LVL_INFO;	/* set once before threads start */
static bool log_syslog;

void log_setup(enum log_level max, bool use_syslog)
{
	log_max = max;
	log_syslog = use_syslog;
	if (use_syslog)
		openlog("nodefs", LOG_PID, LOG_DAEMON);
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	static const char *const tag[] = { "error", "warning", "info", "debug" };
	char line[1024];
	va_list ap;

	if (lvl > log_max)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (log_syslog)
		syslog(prio[lvl], "%s", line);
	else
		fprintf(stderr, "nodefs: %s: %s\n", tag[lvl], line);
}
