// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * etcd_put: the latency of nodefs' etcd client (the v3 JSON gateway over
 * one kept-alive libcurl connection) on the cluster's leader, where nodefs
 * writes and watches: N puts of a 200-byte value, N linearizable ranges,
 * and N transactions conditional on the key's revision (what a remote
 * command's answer is), each timed from its start until a watcher on the
 * same member, with a client of its own, has its event: one of the two
 * steps every remote command takes, etcd's share of it. Prints
 * "leader URL put_p50_us P put_p99_us P range_p50_us P range_p99_us P
 * txn_watch_p50_us P txn_watch_p99_us P". Usage: etcd_put 'URL...' N.
 * Used by bench_cluster.py; knows nothing of nodefs' objects.
 */
#include <pthread.h>
#include <stdbool.h>
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

/* the watcher: the time each value (its sequence number) was seen */
struct watcher {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	double *seen;
	int n;
	bool stop, up;
	const char *url;
};

static void on_events(void *ctx, const struct etcd_event *ev, size_t n, int64_t rev)
{
	struct watcher *w = ctx;
	double t = now_us();

	pthread_mutex_lock(&w->lock);
	w->up = true;
	for (size_t i = 0; i < n; i++) {
		int k = atoi(ev[i].kv.val);
		if (ev[i].type == ETCD_EV_PUT && k > 0 && k <= w->n)
			w->seen[k - 1] = t;
	}
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static bool on_stop(void *ctx)
{
	struct watcher *w = ctx;

	pthread_mutex_lock(&w->lock);
	bool s = w->stop;
	pthread_mutex_unlock(&w->lock);
	return s;
}

static void *watch_main(void *arg)
{
	struct watcher *w = arg;
	struct etcd *e;
	struct nerr err = { 0 };
	struct etcd_watch_cb cb = { .events = on_events, .stop = on_stop, .ctx = w };

	if (etcd_new(w->url, NULL, 5000, &e, &err) == 0) {
		etcd_watch(e, "/bench/w", 0, &cb, NULL, &err);
		etcd_free(e);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct etcd *e;
	struct nerr err = { 0 };
	int n = argc > 2 ? atoi(argv[2]) : 200;
	double *put = calloc(n, sizeof(double)), *rng = calloc(n, sizeof(double));
	double *txw = calloc(n, sizeof(double));
	struct watcher w = { .seen = calloc(n, sizeof(double)), .n = n };
	size_t leader = 0;
	int64_t rev = 0;
	pthread_t th;
	char val[201];

	if (argc < 2 || n < 1 || !put || !rng || !txw || !w.seen ||
	    etcd_new(argv[1], NULL, 5000, &e, &err) < 0) {
		fprintf(stderr, "usage: etcd_put 'URL...' N (%s)\n", err.msg);
		return 1;
	}
	for (size_t i = 0; i < etcd_nendpoints(e); i++) {
		struct etcd_member_status ms;
		if (etcd_status(e, i, &ms) == 0 && ms.member && ms.member == ms.leader)
			leader = i;
	}
	etcd_prefer(e, leader);
	w.url = etcd_endpoint_at(e, leader);
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.cond, NULL);
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
		int64_t r;
		double t = now_us();
		if (etcd_list(e, "/bench/k", &kv, &nk, &r, &err) < 0) {
			fprintf(stderr, "range: %s\n", err.msg);
			return 1;
		}
		rng[i] = now_us() - t;
		etcd_kvs_free(kv, nk);
	}
	if (etcd_put(e, "/bench/w", "0", 1, 0, &rev, &err) < 0 ||
	    pthread_create(&th, NULL, watch_main, &w) != 0) {
		fprintf(stderr, "watch: %s\n", err.msg);
		return 1;
	}
	pthread_mutex_lock(&w.lock);
	while (!w.up)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	for (int i = 0; i < n; i++) {
		char v[16];
		snprintf(v, sizeof(v), "%d", i + 1);
		double t = now_us();
		if (etcd_put_if(e, "/bench/w", v, strlen(v), rev, &rev, &err) < 0) {
			fprintf(stderr, "txn: %s\n", err.msg);
			return 1;
		}
		pthread_mutex_lock(&w.lock);
		while (!w.seen[i])
			pthread_cond_wait(&w.cond, &w.lock);
		txw[i] = w.seen[i] - t;
		pthread_mutex_unlock(&w.lock);
	}
	pthread_mutex_lock(&w.lock);
	w.stop = true;
	pthread_mutex_unlock(&w.lock);
	/* the watch ends at its next message or progress check */
	etcd_put(e, "/bench/w", "0", 1, 0, NULL, &err);
	pthread_join(th, NULL);
	qsort(put, n, sizeof(double), cmp);
	qsort(rng, n, sizeof(double), cmp);
	qsort(txw, n, sizeof(double), cmp);
	printf("leader %s put_p50_us %.0f put_p99_us %.0f range_p50_us %.0f range_p99_us %.0f "
	       "txn_watch_p50_us %.0f txn_watch_p99_us %.0f\n", etcd_endpoint_at(e, leader),
	       put[n / 2], put[n * 99 / 100], rng[n / 2], rng[n * 99 / 100], txw[n / 2],
	       txw[n * 99 / 100]);
	etcd_free(e);
	free(put);
	free(rng);
	free(txw);
	free(w.seen);
	return 0;
}
