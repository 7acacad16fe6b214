/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nerr: error values with a message; see nerr.h. Knows nothing above common/. */
#include "nerr.h"

#include <stdio.h>
#include <string.h>

int nerr_setv(struct nerr *err, int code, const char *fmt, va_list ap)
{
	if (code < 0)
		code = -code;
	if (err) {
		err->code = code;
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
		/* one line: the error file shows exactly one */
		for (char *p = err->msg; *p; p++)
			if (*p == '\n' || *p == '\r')
				*p = ' ';
	}
	return -code;
}

int nerr_set(struct nerr *err, int code, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = nerr_setv(err, code, fmt, ap);
	va_end(ap);
	return r;
}

void nerr_prefix(struct nerr *err, const char *fmt, ...)
{
	char pre[NERR_MSG_MAX], old[NERR_MSG_MAX];
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(pre, sizeof(pre), fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof(old));
	int n = snprintf(err->msg, sizeof(err->msg), "%s: ", pre);

	if (n > 0 && (size_t)n < sizeof(err->msg))
		snprintf(err->msg + n, sizeof(err->msg) - (size_t)n, "%s", old);
}

void nerr_clear(struct nerr *err)
{
	if (err) {
		err->code = 0;
		err->msg[0] = '\0';
	}
}
