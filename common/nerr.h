/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * nerr: the one error convention of nodefs.
 *
 * A fallible function returns int: >= 0 on success, -errno on failure.
 * When the failure needs words, the caller passes a struct nerr as the last
 * argument; the callee fills it once, and outer layers may prefix context
 * once with nerr_prefix(). No thread-local error state: FUSE threads share it.
 */
#ifndef NODEFS_NERR_H
#define NODEFS_NERR_H

#include <stdarg.h>

#define NERR_MSG_MAX 256

struct nerr {
	int code;		/* positive errno, 0 when unset */
	char msg[NERR_MSG_MAX];	/* one human-readable line, no newline */
};

/* Fill err (if non-NULL) with code and a printf-style message.
 * Returns -code, so callers can write: return nerr_set(err, EINVAL, "..."). */
int nerr_set(struct nerr *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int nerr_setv(struct nerr *err, int code, const char *fmt, va_list ap);

/* Prefix the message already in err with context ("publish: ..."). */
void nerr_prefix(struct nerr *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Reset to "no error". NULL-safe. */
void nerr_clear(struct nerr *err);

#endif
