/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of common/units: sizes, durations, booleans, CPUs, integers. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "nerr.h"
#include "units.h"

static uint64_t size_ok(const char *s)
{
	uint64_t v = 0;
	struct nerr e = { 0 };

	cr_assert_eq(parse_size(s, &v, &e), 0, "'%s': %s", s, e.msg);
	return v;
}

static void size_err(const char *s, int code, const char *msg)
{
	uint64_t v = 42;
	struct nerr e = { 0 };

	cr_assert_eq(parse_size(s, &v, &e), -code, "'%s'", s);
	cr_assert_eq(v, 42, "output untouched");
	if (msg)
		cr_assert_str_eq(e.msg, msg);
}

Test(units, size)
{
	cr_assert_eq(size_ok("0"), 0);
	cr_assert_eq(size_ok("1024"), 1024);
	cr_assert_eq(size_ok("1024B"), 1024);
	cr_assert_eq(size_ok("64K"), 64 << 10);
	cr_assert_eq(size_ok("64k"), 64 << 10);
	cr_assert_eq(size_ok("64KiB"), 64 << 10);
	cr_assert_eq(size_ok("64Ki"), 64 << 10);
	cr_assert_eq(size_ok("64KB"), 64 << 10);
	cr_assert_eq(size_ok("512M"), 512ull << 20);
	cr_assert_eq(size_ok("1G"), 1ull << 30);
	cr_assert_eq(size_ok("1Gi"), 1ull << 30);
	cr_assert_eq(size_ok("2T"), 2ull << 40);
	cr_assert_eq(size_ok("2TiB"), 2ull << 40);
	cr_assert_eq(size_ok("3P"), 3ull << 50);
	cr_assert_eq(size_ok("15E"), 15ull << 60);
	cr_assert_eq(size_ok("18446744073709551615"), UINT64_MAX);
	cr_assert_eq(size_ok("16777215T"), 16777215ull << 40);
}

Test(units, size_errors)
{
	size_err("", EINVAL, "empty size");
	size_err("G", EINVAL, "invalid size 'G' (expected bytes, or a whole number with K, M, G or T)");
	size_err("1.5G", EINVAL, NULL);
	size_err("-1", EINVAL, NULL);
	size_err("+1", EINVAL, NULL);
	size_err(" 1", EINVAL, NULL);
	size_err("1 ", EINVAL, NULL);
	size_err("1X", EINVAL, NULL);
	size_err("1GG", EINVAL, NULL);
	size_err("1iB", EINVAL, NULL);
	size_err("1GBx", EINVAL, NULL);
	size_err("0x10", EINVAL, NULL);
	size_err("18446744073709551616", ERANGE, "size '18446744073709551616' is too large");
	size_err("16E", ERANGE, "size '16E' is too large");
	size_err("16777216T", ERANGE, NULL);
}

Test(units, format_size)
{
	char b[32];
	static const uint64_t vals[] = { 0, 1, 1000, 1024, 1536, 1ull << 30, 3ull << 29,
					 (1ull << 40) + 1, UINT64_MAX, 15ull << 60 };

	cr_assert_eq(format_size(1ull << 30, b, sizeof(b)), 2);
	cr_assert_str_eq(b, "1G");
	format_size(3ull << 29, b, sizeof(b));
	cr_assert_str_eq(b, "1536M");
	format_size(0, b, sizeof(b));
	cr_assert_str_eq(b, "0");
	format_size(1000, b, sizeof(b));
	cr_assert_str_eq(b, "1000");
	format_size(15ull << 60, b, sizeof(b));
	cr_assert_str_eq(b, "15E");
	cr_assert_eq(format_size(1ull << 30, b, 2), -E2BIG);
	cr_assert_eq(format_size(1ull << 30, b, 3), 2);
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		uint64_t back;

		cr_assert_gt(format_size(vals[i], b, sizeof(b)), 0);
		cr_assert_eq(parse_size(b, &back, NULL), 0);
		cr_assert_eq(back, vals[i], "round trip of %s", b);
	}
}

static uint64_t dur_ok(const char *s)
{
	uint64_t v = 0;
	struct nerr e = { 0 };

	cr_assert_eq(parse_duration_ms(s, &v, &e), 0, "'%s': %s", s, e.msg);
	return v;
}

Test(units, duration)
{
	struct nerr e = { 0 };
	uint64_t v = 7;

	cr_assert_eq(dur_ok("500ms"), 500);
	cr_assert_eq(dur_ok("30s"), 30000);
	cr_assert_eq(dur_ok("30"), 30000);
	cr_assert_eq(dur_ok("0"), 0);
	cr_assert_eq(dur_ok("2m"), 120000);
	cr_assert_eq(dur_ok("1h"), 3600000);
	cr_assert_eq(dur_ok("1d"), 86400000);
	cr_assert_eq(parse_duration_ms("", &v, &e), -EINVAL);
	cr_assert_str_eq(e.msg, "empty duration");
	cr_assert_eq(parse_duration_ms("5x", &v, &e), -EINVAL);
	cr_assert_str_eq(e.msg, "invalid duration '5x' (expected a whole number with ms, s, m, "
			 "h or d; a bare number is seconds)");
	cr_assert_eq(parse_duration_ms("1.5s", &v, &e), -EINVAL);
	cr_assert_eq(parse_duration_ms("s", &v, &e), -EINVAL);
	cr_assert_eq(parse_duration_ms("-1s", &v, &e), -EINVAL);
	cr_assert_eq(parse_duration_ms("1S", &v, &e), -EINVAL);
	cr_assert_eq(parse_duration_ms("1 s", &v, &e), -EINVAL);
	cr_assert_eq(parse_duration_ms("1mss", &v, &e), -EINVAL);
	cr_assert_eq(parse_duration_ms("18446744073709551615s", &v, &e), -ERANGE);
	cr_assert_str_eq(e.msg, "duration '18446744073709551615s' is too large");
	cr_assert_eq(parse_duration_ms("99999999999999999999", &v, &e), -ERANGE);
	cr_assert_eq(v, 7);
	cr_assert_eq(dur_ok("18446744073709551615ms"), UINT64_MAX);
}

Test(units, bools)
{
	static const char *const t[] = { "yes", "YES", "true", "True", "on", "1" };
	static const char *const f[] = { "no", "No", "false", "FALSE", "off", "0" };
	struct nerr e = { 0 };
	bool b;

	for (size_t i = 0; i < 6; i++) {
		b = false;
		cr_assert_eq(parse_bool(t[i], &b, NULL), 0);
		cr_assert(b, "%s", t[i]);
		b = true;
		cr_assert_eq(parse_bool(f[i], &b, NULL), 0);
		cr_assert_not(b, "%s", f[i]);
	}
	cr_assert_eq(parse_bool("y", &b, &e), -EINVAL);
	cr_assert_str_eq(e.msg, "invalid boolean 'y' (expected yes/no, true/false, on/off or 1/0)");
	cr_assert_eq(parse_bool("", &b, &e), -EINVAL);
	cr_assert_eq(parse_bool("2", &b, &e), -EINVAL);
	cr_assert_eq(parse_bool(NULL, &b, &e), -EINVAL);
}

Test(units, cpus)
{
	struct nerr e = { 0 };
	double d = 0;

	cr_assert_eq(parse_cpus("0.5", &d, &e), 0, "%s", e.msg);
	cr_assert_float_eq(d, 0.5, 1e-12);
	cr_assert_eq(parse_cpus("2", &d, &e), 0);
	cr_assert_float_eq(d, 2.0, 1e-12);
	cr_assert_eq(parse_cpus(".25", &d, &e), 0);
	cr_assert_float_eq(d, 0.25, 1e-12);
	cr_assert_eq(parse_cpus("1024", &d, &e), 0);
	cr_assert_eq(parse_cpus("1024.000", &d, &e), 0);
	cr_assert_eq(parse_cpus("0.000000001", &d, &e), 0);
	d = 9;
	cr_assert_eq(parse_cpus("0", &d, &e), -ERANGE);
	cr_assert_str_eq(e.msg, "CPU count '0' out of range (more than 0, at most 1024)");
	cr_assert_eq(parse_cpus("0.0", &d, &e), -ERANGE);
	cr_assert_eq(parse_cpus("1024.5", &d, &e), -ERANGE);
	cr_assert_eq(parse_cpus("1025", &d, &e), -ERANGE);
	cr_assert_eq(parse_cpus("99999999999999999999999", &d, &e), -ERANGE);
	cr_assert_eq(parse_cpus("abc", &d, &e), -EINVAL);
	cr_assert_str_eq(e.msg, "invalid CPU count 'abc' (expected a decimal number like 0.5 or 2)");
	cr_assert_eq(parse_cpus("", &d, &e), -EINVAL);
	cr_assert_eq(parse_cpus(".", &d, &e), -EINVAL);
	cr_assert_eq(parse_cpus("1.", &d, &e), -EINVAL);
	cr_assert_eq(parse_cpus("-1", &d, &e), -EINVAL);
	cr_assert_eq(parse_cpus("1e2", &d, &e), -EINVAL);
	cr_assert_eq(parse_cpus("0x1", &d, &e), -EINVAL);
	cr_assert_eq(parse_cpus("inf", &d, &e), -EINVAL);
	cr_assert_eq(parse_cpus("nan", &d, &e), -EINVAL);
	cr_assert_eq(parse_cpus("1,5", &d, &e), -EINVAL);
	cr_assert_eq(parse_cpus("0.0000000001", &d, &e), -EINVAL);
	cr_assert_float_eq(d, 9, 1e-12);
}

Test(units, ints)
{
	struct nerr e = { 0 };
	long long v = 0;

	cr_assert_eq(parse_int("42", 0, 100, &v, &e), 0);
	cr_assert_eq(v, 42);
	cr_assert_eq(parse_int("-5", -10, 10, &v, &e), 0);
	cr_assert_eq(v, -5);
	cr_assert_eq(parse_int("+7", 0, 10, &v, &e), 0);
	cr_assert_eq(v, 7);
	cr_assert_eq(parse_int("9223372036854775807", LLONG_MIN, LLONG_MAX, &v, &e), 0);
	cr_assert_eq(v, LLONG_MAX);
	cr_assert_eq(parse_int("-9223372036854775808", LLONG_MIN, LLONG_MAX, &v, &e), 0);
	cr_assert_eq(v, LLONG_MIN);
	v = 3;
	cr_assert_eq(parse_int("101", 0, 100, &v, &e), -ERANGE);
	cr_assert_str_eq(e.msg, "number '101' out of range (0 to 100)");
	cr_assert_eq(parse_int("-1", 0, 100, &v, &e), -ERANGE);
	cr_assert_eq(parse_int("9223372036854775808", LLONG_MIN, LLONG_MAX, &v, &e), -ERANGE);
	cr_assert_eq(parse_int("-9223372036854775809", LLONG_MIN, LLONG_MAX, &v, &e), -ERANGE);
	cr_assert_eq(parse_int("99999999999999999999999", 0, 1, &v, &e), -ERANGE);
	cr_assert_eq(parse_int("99999999999999999999999x", 0, 1, &v, &e), -EINVAL);
	cr_assert_eq(parse_int("", 0, 1, &v, &e), -EINVAL);
	cr_assert_str_eq(e.msg, "empty number");
	cr_assert_eq(parse_int("-", 0, 1, &v, &e), -EINVAL);
	cr_assert_eq(parse_int("1x", 0, 1, &v, &e), -EINVAL);
	cr_assert_str_eq(e.msg, "invalid number '1x' (expected a decimal integer)");
	cr_assert_eq(parse_int(" 1", 0, 1, &v, &e), -EINVAL);
	cr_assert_eq(parse_int("0x1", 0, 1, &v, &e), -EINVAL);
	cr_assert_eq(parse_int("--1", -5, 1, &v, &e), -EINVAL);
	cr_assert_eq(v, 3);
}
