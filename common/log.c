/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * log: stderr or syslog, chosen at start; see log.h. Under systemd
 * (stderr is the journal stream $JOURNAL_STREAM names) each line starts
 * with its syslog priority, "<4>", which journald takes as the entry's
 * priority, so `journalctl -p warning -u nodefs` sees warnings and errors.
 */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

static atomic_int log_max = LOG_LVL_INFO;
static bool log_syslog;		/* set before threads start */
static bool log_journal;	/* same */

static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
static const char *const tag[] = { "error", "warning", "info", "debug" };

/* Whether fd 2 is the stream systemd connected to the journal:
 * $JOURNAL_STREAM is "DEVICE:INODE" of it (systemd.exec(5)). A stderr
 * redirected elsewhere by a child's caller keeps plain lines. */
static bool stderr_is_journal(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_setup(enum log_level max, bool use_syslog)
{
	atomic_store(&log_max, max);
	log_syslog = use_syslog;
	log_journal = !use_syslog && stderr_is_journal();
	if (use_syslog)
		openlog("nodefs", LOG_PID, LOG_DAEMON);
}

void log_set_level(enum log_level max)
{
	atomic_store(&log_max, max);
}

enum log_level log_get_level(void)
{
	return (enum log_level)atomic_load(&log_max);
}

const char *log_level_to_string(enum log_level lvl)
{
	return lvl <= LOG_LVL_DEBUG ? tag[lvl] : "unknown";
}

int log_level_from_string(const char *s)
{
	for (int i = LOG_LVL_ERR; i <= LOG_LVL_DEBUG; i++)
		if (strcasecmp(s, tag[i]) == 0)
			return i;
	return -1;
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	char line[1024], out[1100];
	va_list ap;
	int n;

	if ((int)lvl > atomic_load_explicit(&log_max, memory_order_relaxed))
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (log_syslog) {
		syslog(prio[lvl], "%s", line);
		return;
	}
	/* one write per line, so threads' lines never interleave */
	if (log_journal)
		n = snprintf(out, sizeof(out), "<%d>%s: %s\n", prio[lvl], tag[lvl], line);
	else
		n = snprintf(out, sizeof(out), "nodefs: %s: %s\n", tag[lvl], line);
	if (n > (int)sizeof(out) - 1)
		n = (int)sizeof(out) - 1;
	if (n > 0 && write(STDERR_FILENO, out, (size_t)n) < 0)
		return;	/* nowhere left to say it */
}
