/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench.h: the clock and the statistics the C benchmarks share (a monotonic
 * time in µs or ms, the median of a sample). Header-only: each benchmark is
 * one program of its own. Benchmarks print their figures and ratios against
 * a baseline of the same run, and a goal line saying met or missed; they exit
 * 0 whatever the figures, 1 only when they could not measure, 77 when what
 * they need is missing.
 */
#ifndef NODEFS_BENCH_H
#define NODEFS_BENCH_H

#include <stdlib.h>
#include <time.h>

static inline double bench_now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static inline double bench_now_ms(void)
{
	return bench_now_us() / 1e3;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of v[0..n) (n > 0); sorts v. */
static inline double bench_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static inline const char *bench_met(int met)
{
	return met ? "met" : "MISSED";
}

#endif
