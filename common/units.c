/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * units: parsing and formatting of sizes, durations, booleans, CPU counts
 * and integers; see units.h. Pure; nothing above common/.
 */
#include "units.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "nerr.h"
#include "valid.h"

#define ESC(s, buf) valid_escape((s), strlen(s), 40, (buf), sizeof(buf))

/* Leading decimal digits into *v; returns how many were read, or -ERANGE. */
static int parse_digits(const char *s, uint64_t *v)
{
	uint64_t x = 0;
	int n = 0;

	while (s[n] >= '0' && s[n] <= '9') {
		unsigned d = (unsigned)(s[n] - '0');

		if (x > (UINT64_MAX - d) / 10)
			return -ERANGE;
		x = x * 10 + d;
		n++;
	}
	*v = x;
	return n;
}

int parse_size(const char *s, uint64_t *ret, struct nerr *err)
{
	static const char units[] = "KMGTPE";
	char esc[64];
	const char *p, *u;
	uint64_t v;
	unsigned shift = 0;
	int n;

	if (!s || !*s)
		return nerr_set(err, EINVAL, "empty size");
	n = parse_digits(s, &v);
	if (n == -ERANGE)
		return nerr_set(err, ERANGE, "size '%s' is too large", ESC(s, esc));
	if (n == 0)
		goto junk;
	p = s + n;
	if (*p && (u = strchr(units, *p >= 'a' && *p <= 'z' ? *p - 32 : *p))) {
		shift = 10 * (unsigned)(u - units + 1);
		p++;
		if (*p == 'i')
			p++;
	}
	if (*p == 'B' || *p == 'b')
		p++;
	if (*p)
		goto junk;
	if (shift && v > (UINT64_MAX >> shift))
		return nerr_set(err, ERANGE, "size '%s' is too large", ESC(s, esc));
	*ret = v << shift;
	return 0;
junk:
	return nerr_set(err, EINVAL,
			"invalid size '%s' (expected bytes, or a whole number with K, M, G or T)",
			ESC(s, esc));
}

int format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "KMGTPE";
	int shift = 0, n;

	if (bytes)
		while (shift < 6 && (bytes & ((UINT64_C(1) << (10 * (shift + 1))) - 1)) == 0)
			shift++;
	if (shift)
		n = snprintf(buf, len, "%llu%c",
			     (unsigned long long)(bytes >> (10 * shift)), units[shift - 1]);
	else
		n = snprintf(buf, len, "%llu", (unsigned long long)bytes);
	if (n < 0 || (size_t)n >= len)
		return -E2BIG;
	return n;
}

int parse_duration_ms(const char *s, uint64_t *ret_ms, struct nerr *err)
{
	static const struct { const char *name; uint64_t ms; } units[] = {
		{ "ms", 1 }, { "s", 1000 }, { "", 1000 }, { "m", 60000 },
		{ "h", 3600000 }, { "d", 86400000 },
	};
	char esc[64];
	uint64_t v;
	int n;

	if (!s || !*s)
		return nerr_set(err, EINVAL, "empty duration");
	n = parse_digits(s, &v);
	if (n == -ERANGE)
		return nerr_set(err, ERANGE, "duration '%s' is too large", ESC(s, esc));
	if (n == 0)
		goto junk;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(s + n, units[i].name) != 0)
			continue;
		if (v > UINT64_MAX / units[i].ms)
			return nerr_set(err, ERANGE, "duration '%s' is too large", ESC(s, esc));
		*ret_ms = v * units[i].ms;
		return 0;
	}
junk:
	return nerr_set(err, EINVAL,
			"invalid duration '%s' (expected a whole number with ms, s, m, h or d; "
			"a bare number is seconds)", ESC(s, esc));
}

int parse_bool(const char *s, bool *ret, struct nerr *err)
{
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };
	char esc[64];

	if (s) {
		for (size_t i = 0; i < 4; i++) {
			if (strcasecmp(s, yes[i]) == 0) {
				*ret = true;
				return 0;
			}
			if (strcasecmp(s, no[i]) == 0) {
				*ret = false;
				return 0;
			}
		}
	}
	return nerr_set(err, EINVAL,
			"invalid boolean '%s' (expected yes/no, true/false, on/off or 1/0)",
			s ? ESC(s, esc) : "");
}

int parse_cpus(const char *s, double *ret, struct nerr *err)
{
	char esc[64];
	uint64_t ip, frac = 0, scale = 1;
	const char *p;
	int n, fd = 0;
	double v;

	if (!s || !*s)
		return nerr_set(err, EINVAL, "empty CPU count");
	/* our own decimal parser: strtod takes hex, inf, nan and the locale */
	n = parse_digits(s, &ip);
	if (n < 0 || ip > 1024)
		goto range;
	p = s + n;
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9') {
			if (++fd > 9)
				goto junk;
			frac = frac * 10 + (uint64_t)(*p - '0');
			scale *= 10;
			p++;
		}
		if (fd == 0)
			goto junk;
	}
	if (*p || (n == 0 && fd == 0))
		goto junk;
	v = (double)ip + (double)frac / (double)scale;
	if (v <= 0.0 || v > 1024.0)
		goto range;
	*ret = v;
	return 0;
junk:
	return nerr_set(err, EINVAL, "invalid CPU count '%s' (expected a decimal number like 0.5 or 2)",
			ESC(s, esc));
range:
	return nerr_set(err, ERANGE, "CPU count '%s' out of range (more than 0, at most 1024)",
			ESC(s, esc));
}

int parse_int(const char *s, long long min, long long max, long long *ret,
	      struct nerr *err)
{
	char esc[64];
	uint64_t mag;
	bool neg = false;
	long long v;
	int n, sign = 0;

	if (!s || !*s)
		return nerr_set(err, EINVAL, "empty number");
	if (*s == '-' || *s == '+') {
		neg = *s == '-';
		sign = 1;
	}
	n = parse_digits(s + sign, &mag);
	if (n >= 0) {
		if (n == 0 || s[sign + n])
			return nerr_set(err, EINVAL,
					"invalid number '%s' (expected a decimal integer)",
					ESC(s, esc));
	} else {
		/* too many digits: junk after them is still junk */
		const char *p = s + sign;

		while (*p >= '0' && *p <= '9')
			p++;
		if (*p)
			return nerr_set(err, EINVAL,
					"invalid number '%s' (expected a decimal integer)",
					ESC(s, esc));
		goto range;
	}
	if ((!neg && mag > (uint64_t)LLONG_MAX) || (neg && mag > (uint64_t)LLONG_MAX + 1))
		goto range;
	if (neg)
		v = mag == (uint64_t)LLONG_MAX + 1 ? LLONG_MIN : -(long long)mag;
	else
		v = (long long)mag;
	if (v < min || v > max)
		goto range;
	*ret = v;
	return 0;
range:
	return nerr_set(err, ERANGE, "number '%s' out of range (%lld to %lld)",
			ESC(s, esc), min, max);
}
