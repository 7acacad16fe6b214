/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_grpc: nodefs's CSI client making unary Probe calls through the
 * blocking API the backend uses (csi_call_ex), all on one plugin connection,
 * N calls split over T threads. Prints "median_us p99_us calls", the same
 * line as ref_client, so run.sh can compare them in one run.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csi.h"
#include "loop.h"

static struct csi_plugin *plugin;
static long per_thread;

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int probe(void)
{
	Csi__V1__ProbeRequest req = CSI__V1__PROBE_REQUEST__INIT;
	ProtobufCMessage *resp;
	struct nerr err = { 0 };
	int r = csi_call_ex(plugin, CSI_RPC_PROBE, &req.base, 10000, 1, &resp, NULL, &err);

	if (r < 0) {
		fprintf(stderr, "Probe: %s\n", err.msg);
		return r;
	}
	Csi__V1__ProbeResponse *pr = (Csi__V1__ProbeResponse *)resp;
	r = pr->ready && pr->ready->value ? 0 : -1;
	protobuf_c_message_free_unpacked(resp, NULL);
	return r;
}

static void *worker(void *arg)
{
	double *lat = arg;

	for (long i = 0; i < per_thread; i++) {
		uint64_t t0 = loop_now_us();

		if (probe() < 0)
			abort();
		lat[i] = (double)(loop_now_us() - t0);
	}
	return NULL;
}

static void *loop_main(void *l)
{
	loop_run(l);
	return NULL;
}

int main(int argc, char **argv)
{
	struct loop *loop;
	pthread_t lt;
	char endpoint[256];
	struct nerr err = { 0 };

	if (argc != 4) {
		fprintf(stderr, "usage: %s SOCKET_PATH CALLS THREADS\n", argv[0]);
		return 2;
	}
	long calls = atol(argv[2]);
	int threads = atoi(argv[3]);
	if (threads < 1 || calls < threads)
		return 2;
	per_thread = calls / threads;
	snprintf(endpoint, sizeof(endpoint), "unix://%s", argv[1]);
	if (loop_new(&loop) < 0 || pthread_create(&lt, NULL, loop_main, loop) != 0)
		return 1;
	struct csi_retry retry = { .max_attempts = 1 };
	if (csi_plugin_new(loop, "bench", endpoint, &retry, 10000, &plugin, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	csi_plugin_set_probe_interval(plugin, 0);
	for (int i = 0; i < 200; i++)
		if (probe() < 0)
			return 1;

	double *lat = calloc((size_t)(per_thread * threads), sizeof(double));
	pthread_t *ts = calloc((size_t)threads, sizeof(pthread_t));
	for (int t = 0; t < threads; t++)
		pthread_create(&ts[t], NULL, worker, lat + t * per_thread);
	for (int t = 0; t < threads; t++)
		pthread_join(ts[t], NULL);
	size_t n = (size_t)(per_thread * threads);
	qsort(lat, n, sizeof(double), cmp);
	printf("%.1f %.1f %zu\n", lat[n / 2], lat[n * 99 / 100], n);

	csi_plugin_free(plugin);
	loop_stop(loop);
	pthread_join(lt, NULL);
	loop_free(loop);
	free(lat);
	free(ts);
	return 0;
}
