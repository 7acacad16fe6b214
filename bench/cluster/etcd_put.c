// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * etcd_put: the latency of nodefs' etcd client (the v3 JSON gateway over
 * one kept-alive libcurl connection): N puts of a 200-byte value, then N
 * linearizable ranges, each timed. Prints "put_p50_us P put_p99_us P
 * range_p50_us P range_p99_us P". Usage: etcd_put URL N. Used by
 * bench_cluster.py; knows nothing of nodefs' objects.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etcd.h"
#include "nerr.h"

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct etcd *e;
	struct nerr err = { 0 };
	int n = argc > 2 ? atoi(argv[2]) : 200;
	double *put = calloc(n, sizeof(double)), *rng = calloc(n, sizeof(double));
	char val[201];

	if (argc < 2 || !put || !rng || etcd_new(argv[1], NULL, 5000, &e, &err) < 0) {
		fprintf(stderr, "usage: etcd_put URL N (%s)\n", err.msg);
		return 1;
	}
	memset(val, 'x', 200);
	val[200] = 0;
	for (int i = 0; i < n; i++) {
		double t = now_us();
		if (etcd_put(e, "/bench/k", val, 200, 0, NULL, &err) < 0) {
			fprintf(stderr, "put: %s\n", err.msg);
			return 1;
		}
		put[i] = now_us() - t;
	}
	for (int i = 0; i < n; i++) {
		struct etcd_kv *kv;
		size_t nk;
		int64_t rev;
		double t = now_us();
		if (etcd_list(e, "/bench/", &kv, &nk, &rev, &err) < 0) {
			fprintf(stderr, "range: %s\n", err.msg);
			return 1;
		}
		rng[i] = now_us() - t;
		etcd_kvs_free(kv, nk);
	}
	qsort(put, n, sizeof(double), cmp);
	qsort(rng, n, sizeof(double), cmp);
	printf("put_p50_us %.0f put_p99_us %.0f range_p50_us %.0f range_p99_us %.0f\n",
	       put[n / 2], put[n * 99 / 100], rng[n / 2], rng[n * 99 / 100]);
	etcd_free(e);
	free(put);
	free(rng);
	return 0;
}
