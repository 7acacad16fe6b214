/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * helpers: what the object modules share to render and record (times, an
 * operation's command line), declared in backend-internal.h. It
 * sits below every module and the hub alike: it must not know any object.
 */
#include "backend-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

void fmt_time(time_t t, char *buf, size_t len)
{
	struct tm tm;

	if (!t) {
		buf[0] = '\0';
		return;
	}
	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

char *cmdline_of(const struct ctl_cmd *cmd, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < cmd->argc && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? " " : "", cmd->argv[i]);
	for (size_t i = 0; i < cmd->nopts && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, " %s=%s", cmd->opts[i].key,
					cmd->opts[i].val);
	return buf;
}
