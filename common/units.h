/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * units: sizes, durations, booleans, CPU counts and bounded integers as
 * operators write them in ctl lines and in the config file.
 *
 * Pure functions: the whole string must be the value (no blanks, no sign
 * unless stated); anything else is -EINVAL, a value that does not fit is
 * -ERANGE. The message quotes the value and says what was expected; callers
 * prefix it with the key once. Out-parameters are written only on success.
 * Any thread.
 * Nothing here knows about the layers above common/.
 */
#ifndef NODEFS_UNITS_H
#define NODEFS_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nerr;

/* Bytes: "1024", "64K", "512M", "1G", "2T", "1P", "1E" (powers of 1024,
 * case-insensitive), also with "i" ("64Ki") and/or a trailing "B" ("64KiB",
 * "1024B"). -EINVAL for junk, -ERANGE past UINT64_MAX. */
int parse_size(const char *s, uint64_t *ret, struct nerr *err);

/* The shortest exact rendering: "1G" when bytes is a multiple of 1 GiB, "1536M",
 * else plain bytes ("0", "1000"). Returns the length written (without NUL),
 * -E2BIG when buf (len bytes) is too small. A result always parses back
 * with parse_size() to the same value. */
int format_size(uint64_t bytes, char *buf, size_t len);

/* "500ms", "30s", "2m", "1h", "1d"; a bare number is seconds. Case-sensitive
 * units ("m" is minutes, "ms" milliseconds). -EINVAL for junk, -ERANGE past
 * UINT64_MAX milliseconds. */
int parse_duration_ms(const char *s, uint64_t *ret_ms, struct nerr *err);

/* yes/no, true/false, on/off, 1/0 (case-insensitive). -EINVAL otherwise. */
int parse_bool(const char *s, bool *ret, struct nerr *err);

/* A CPU count in plain decimal ("0.5", "2", "1.25"): > 0 and <= 1024, at most
 * 9 fractional digits. No exponents, hex, inf or nan. -EINVAL for junk,
 * -ERANGE out of range. */
int parse_cpus(const char *s, double *ret, struct nerr *err);

/* A decimal integer with an optional leading '-' or '+', min <= value <= max.
 * -EINVAL for junk, -ERANGE out of [min, max] (the message gives the range). */
int parse_int(const char *s, long long min, long long max, long long *ret,
	      struct nerr *err);

#endif
