/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_csi_load: many calls and big messages on one connection: 3 MB replies
 * and 2 MB requests across flow-control windows, the 4 MiB cap both ways, 16
 * threads calling at once, 100 calls in flight together, and a lone caller's
 * direct call handed over to the loop when another call comes. It reaches the
 * client only through csi.h and the fixture only through csi_test.h.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "csi_test.h"

Test(csi, large_messages_both_ways_and_the_cap)
{
	const char *flags[] = { "--pad-info", "3000000", NULL };
	struct nerr err = { 0 };
	struct csi_result res;
	ProtobufCMessage *resp;

	plugin_start(flags);
	client_start(10, 1, 10000);
	/* A 3 MB reply crosses many DATA frames and window updates. */
	Csi__V1__GetPluginInfoRequest ir = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	cr_assert(csi_call(plugin, CSI_RPC_GET_PLUGIN_INFO, &ir.base, &resp, &res, &err) == 0, "%s", err.msg);
	Csi__V1__GetPluginInfoResponse *info = (void *)resp;
	size_t padded = 0;
	for (size_t i = 0; i < info->n_manifest; i++)
		if (strcmp(info->manifest[i]->key, "pad") == 0)
			padded = strlen(info->manifest[i]->value);
	cr_assert_eq(padded, 3000000);
	protobuf_c_message_free_unpacked(resp, NULL);

	/* A 2 MB request: our DATA frames paced by the server's windows. */
	Csi__V1__VolumeCapability cap;
	Csi__V1__VolumeCapability__MountVolume mnt;
	Csi__V1__VolumeCapability__AccessMode mode;
	Csi__V1__VolumeCapability *caps[1] = { mount_cap(&cap, &mnt, &mode) };
	Csi__V1__CreateVolumeRequest__ParametersEntry kv = CSI__V1__CREATE_VOLUME_REQUEST__PARAMETERS_ENTRY__INIT;
	Csi__V1__CreateVolumeRequest__ParametersEntry *kvs[1] = { &kv };
	char *big = malloc(2000001);
	memset(big, 'b', 2000000);
	big[2000000] = 0;
	kv.key = "blob";
	kv.value = big;
	Csi__V1__CreateVolumeRequest cr = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	cr.name = "big";
	cr.n_volume_capabilities = 1;
	cr.volume_capabilities = caps;
	cr.n_parameters = 1;
	cr.parameters = kvs;
	cr_assert(csi_call(plugin, CSI_RPC_CREATE_VOLUME, &cr.base, NULL, &res, &err) == 0, "%s", err.msg);

	/* Over 4 MiB is refused before anything is sent. */
	big = realloc(big, 5000001);
	memset(big, 'b', 5000000);
	big[5000000] = 0;
	kv.value = big;
	cr_assert_eq(csi_call(plugin, CSI_RPC_CREATE_VOLUME, &cr.base, NULL, &res, &err), -E2BIG);
	free(big);

	/* A reply over 4 MiB is cut off: RESOURCE_EXHAUSTED, the connection lives. */
	plugin_kill(SIGTERM);
	const char *huge[] = { "--pad-info", "5000000", NULL };
	plugin_start(huge);
	cr_assert_eq(csi_call_ex(plugin, CSI_RPC_GET_PLUGIN_INFO, &ir.base, 0, 1, &resp, &res, &err), -ENOSPC);
	cr_assert_eq(res.code, GRPC_RESOURCE_EXHAUSTED);
	cr_assert(strstr(res.message, "4 MiB"), "%s", res.message);
	bool ready;
	cr_assert(csi_probe(plugin, &ready, &err) == 0, "%s", err.msg);
}

#define NTHREADS 16
#define NCALLS 50

static void *hammer(void *arg)
{
	int *failures = arg;

	for (int i = 0; i < NCALLS; i++) {
		struct bg_call b = { .max_attempts = 1 };

		bg_node_get_info(&b);
		if (b.r < 0)
			__atomic_add_fetch(failures, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

Test(csi, many_concurrent_calls_one_connection)
{
	const char *flags[] = { "--delay", "NodeGetInfo=0.05", "--workers", "64", NULL };
	pthread_t t[NTHREADS];
	int failures = 0;

	plugin_start(flags);
	client_start(10, 1, 10000);
	csi_plugin_set_probe_interval(plugin, 0);
	for (int i = 0; i < NTHREADS; i++)
		cr_assert(pthread_create(&t[i], NULL, hammer, &failures) == 0);
	/* Watch the calls overlap on the wire. */
	uint64_t max_pending = 0;
	for (int i = 0; i < 50; i++) {
		struct csi_metrics m;

		csi_plugin_metrics(plugin, &m);
		if (m.rpc[CSI_RPC_NODE_GET_INFO].pending > max_pending)
			max_pending = m.rpc[CSI_RPC_NODE_GET_INFO].pending;
		usleep(10000);
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(failures, 0);
	struct csi_metrics m;
	csi_plugin_metrics(plugin, &m);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].successes, NTHREADS * NCALLS);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].pending, 0);
	cr_assert_eq(m.connects, 1);
	cr_assert_gt(max_pending, 4, "calls were not multiplexed (max pending %llu)",
		     (unsigned long long)max_pending);
}

/* 100 calls in flight at once on one connection: 100 threads each make one
 * NodeGetInfo that the plugin holds for a second, so they must all be open
 * streams together. The client's pending gauge reaches 100, the plugin's
 * own count of handlers running at once (GetPluginInfo's manifest) reaches
 * 100, all succeed, and the whole takes about one delay, not a hundred. */
#define NINFLIGHT 100

struct inflight {
	pthread_barrier_t *go;
	struct bg_call b;
};

static void *one_call(void *arg)
{
	struct inflight *f = arg;

	pthread_barrier_wait(f->go);
	bg_node_get_info(&f->b);
	return NULL;
}

static long manifest_long(const char *key)
{
	Csi__V1__GetPluginInfoRequest ir = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	struct nerr err = { 0 };
	struct csi_result res;
	ProtobufCMessage *resp;
	long v = -1;

	cr_assert(csi_call(plugin, CSI_RPC_GET_PLUGIN_INFO, &ir.base, &resp, &res, &err) == 0, "%s", err.msg);
	Csi__V1__GetPluginInfoResponse *info = (void *)resp;
	for (size_t i = 0; i < info->n_manifest; i++)
		if (strcmp(info->manifest[i]->key, key) == 0)
			v = strtol(info->manifest[i]->value, NULL, 10);
	protobuf_c_message_free_unpacked(resp, NULL);
	return v;
}

Test(csi, hundred_calls_in_flight_one_connection)
{
	const char *flags[] = { "--delay", "NodeGetInfo=1", "--workers", "128", NULL };
	static struct inflight f[NINFLIGHT];
	pthread_t t[NINFLIGHT];
	pthread_barrier_t go;
	uint64_t max_pending = 0, t0;
	struct csi_metrics m;

	plugin_start(flags);
	client_start(10, 1, 10000);
	csi_plugin_set_probe_interval(plugin, 0);
	/* Connected before the burst, so all of it goes on that connection. */
	cr_assert_eq(manifest_long("max_in_flight"), 1);
	cr_assert(pthread_barrier_init(&go, NULL, NINFLIGHT + 1) == 0);
	for (int i = 0; i < NINFLIGHT; i++) {
		f[i] = (struct inflight){ .go = &go, .b = { .max_attempts = 1 } };
		cr_assert(pthread_create(&t[i], NULL, one_call, &f[i]) == 0);
	}
	t0 = loop_now_ms();
	pthread_barrier_wait(&go);
	/* Watch the gauge until every call is pending, or all are done. */
	for (int i = 0; i < 1000; i++) {
		csi_plugin_metrics(plugin, &m);
		if (m.rpc[CSI_RPC_NODE_GET_INFO].pending > max_pending)
			max_pending = m.rpc[CSI_RPC_NODE_GET_INFO].pending;
		if (max_pending == NINFLIGHT || m.rpc[CSI_RPC_NODE_GET_INFO].count == NINFLIGHT)
			break;
		usleep(2000);
	}
	for (int i = 0; i < NINFLIGHT; i++)
		pthread_join(t[i], NULL);
	uint64_t took = loop_now_ms() - t0;
	pthread_barrier_destroy(&go);
	for (int i = 0; i < NINFLIGHT; i++)
		cr_assert_eq(f[i].b.r, 0, "call %d: %s", i, f[i].b.err.msg);
	csi_plugin_metrics(plugin, &m);
	cr_assert_eq(max_pending, NINFLIGHT, "at most %llu calls pending at once",
		     (unsigned long long)max_pending);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].successes, NINFLIGHT);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].count, NINFLIGHT);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].pending, 0);
	cr_assert_eq(m.connects, 1);
	cr_assert_eq(m.disconnects, 0);
	/* The plugin ran them side by side: they overlapped on the wire, not
	 * just in our queue. */
	long most = manifest_long("max_in_flight");
	cr_assert_geq(most, NINFLIGHT, "the plugin ran at most %ld at once", most);
	cr_assert_lt(took, SCALED(5000), "100 one-second calls took %llu ms", (unsigned long long)took);
}

/* A lone caller drives its call on the socket itself (h2_conn_call). A call
 * made meanwhile must not wait behind it: the slow call is handed to the
 * loop, which multiplexes both, and a handed-over call keeps its deadline
 * (the loop arms it). One connection throughout. */
struct bg_timed {
	uint64_t timeout_ms;
	int r;
	struct csi_result res;
	struct nerr err;
};

static void *bg_node_get_info_timed(void *arg)
{
	struct bg_timed *b = arg;
	Csi__V1__NodeGetInfoRequest req = CSI__V1__NODE_GET_INFO_REQUEST__INIT;

	b->r = csi_call_ex(plugin, CSI_RPC_NODE_GET_INFO, &req.base, b->timeout_ms, 1, NULL,
			   &b->res, &b->err);
	return NULL;
}

Test(csi, direct_call_hands_over_to_company)
{
	const char *slow[] = { "--delay", "NodeGetInfo=1", NULL };
	struct nerr err = { 0 };
	struct csi_metrics m;
	pthread_t t;
	bool ready;

	plugin_start(slow);
	client_start(10, 1, 20000);
	csi_plugin_set_probe_interval(plugin, 0);
	cr_assert(csi_probe(plugin, &ready, &err) == 0, "%s", err.msg);

	for (int round = 0; round < 2; round++) {
		/* Round 0: the slow call answers (1 s); round 1: its 600 ms
		 * deadline, armed by the loop after the hand-over, ends it. */
		struct bg_timed b = { .timeout_ms = round ? 600 : 5000 };

		cr_assert(pthread_create(&t, NULL, bg_node_get_info_timed, &b) == 0);
		usleep(200000);
		uint64_t t0 = loop_now_us();
		cr_assert(csi_probe(plugin, &ready, &err) == 0, "%s", err.msg);
		uint64_t took = loop_now_us() - t0;
		cr_assert_lt(took, SCALED(500000), "the Probe waited %llu us behind the slow call",
			     (unsigned long long)took);
		pthread_join(t, NULL);
		if (round == 0) {
			cr_assert_eq(b.r, 0, "%s", b.err.msg);
			cr_assert_geq(b.res.elapsed_us, 1000000);
		} else {
			cr_assert_eq(b.r, -ETIMEDOUT, "r=%d %s", b.r, b.err.msg);
			cr_assert_eq(b.res.code, GRPC_DEADLINE_EXCEEDED);
			cr_assert_geq(b.res.elapsed_us, 590000);
			/* the deadline (600 ms) fired, promptly: well before the
			 * slow call's own second would have ended it */
			cr_assert_lt(b.res.elapsed_us, 590000 + SCALED(360000), "took %llu us",
				     (unsigned long long)b.res.elapsed_us);
		}
	}
	/* Alone again: the next call goes direct and the connection is the same. */
	cr_assert(csi_probe(plugin, &ready, &err) == 0, "%s", err.msg);
	csi_plugin_metrics(plugin, &m);
	cr_assert_eq(m.connects, 1);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].successes, 1);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].errors[GRPC_DEADLINE_EXCEEDED], 1);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].pending, 0);
	cr_assert_geq(m.rpc[CSI_RPC_PROBE].successes, 4);	/* + the loop's first */
	cr_assert_eq(m.rpc[CSI_RPC_PROBE].pending, 0);
}
