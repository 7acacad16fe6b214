/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_csi_connection: the CSI client's connection through a plugin's
 * troubles: the plugin killed mid-call and restarted (health follows), a
 * connection the plugin drops while it lives on, a GOAWAY that lets the call
 * in flight finish, and a client shut down with calls pending. It reaches the
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

Test(csi, plugin_killed_mid_call_then_reconnect)
{
	const char *slow[] = { "--delay", "NodeGetInfo=5", NULL };
	struct nerr err = { 0 };
	struct csi_result res;
	struct bg_call b = { .max_attempts = 1 };
	pthread_t t;

	plugin_start(slow);
	client_start(50, 1, 20000);
	csi_plugin_set_probe_interval(plugin, 200);
	wait_health(CSI_HEALTH_READY, 5000);
	cr_assert(pthread_create(&t, NULL, bg_node_get_info, &b) == 0);
	usleep(500000);
	plugin_kill(SIGKILL);
	pthread_join(t, NULL);
	cr_assert_eq(b.r, -EAGAIN, "r=%d %s", b.r, b.err.msg);
	cr_assert_eq(b.res.code, GRPC_UNAVAILABLE);
	cr_assert_eq(b.res.attempts, 1);
	wait_health(CSI_HEALTH_DOWN, 2000);
	cr_assert_eq(node_get_info(&res, &err, NULL), -EAGAIN);

	plugin_start(NULL);
	/* Reconnects on demand and in the background; health follows Probe. */
	wait_health(CSI_HEALTH_READY, 10000);
	cr_assert(node_get_info(&res, &err, NULL) == 0, "%s", err.msg);
	struct csi_metrics m;
	csi_plugin_metrics(plugin, &m);
	cr_assert_geq(m.connects, 2);
	cr_assert_geq(m.disconnects, 1);
}

/* The plugin drops the connection instead of answering (--close: it shuts
 * down the accepted socket and lives on): the call in flight fails with
 * UNAVAILABLE, the client reconnects by itself, and calls succeed again on
 * the new connection, a retried one on its second attempt. The plugin
 * process is the same throughout. */
Test(csi, dropped_connection_comes_back)
{
	const char *flags[] = { "--close", "NodeGetInfo:2", NULL };
	struct nerr err = { 0 };
	struct csi_result res;
	struct csi_metrics m;
	pid_t pid;
	unsigned retried;

	plugin_start(flags);
	pid = plugin_pid;
	client_start(10, 3, 5000);
	csi_plugin_set_probe_interval(plugin, 100);
	wait_health(CSI_HEALTH_READY, 5000);
	csi_plugin_metrics(plugin, &m);
	cr_assert_eq(m.connects, 1);

	Csi__V1__NodeGetInfoRequest req = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
	cr_assert_eq(csi_call_ex(plugin, CSI_RPC_NODE_GET_INFO, &req.base, 0, 1, NULL, &res, &err),
		     -EAGAIN, "%s", err.msg);
	cr_assert_eq(res.code, GRPC_UNAVAILABLE);
	cr_assert_eq(res.attempts, 1);
	cr_assert_lt(res.elapsed_us, SCALED(2000000), "took %llu us", (unsigned long long)res.elapsed_us);

	/* Back by itself: no call of ours, only the client's reconnect (the
	 * Probe then says READY over the new connection). */
	for (int i = 0; i < 150; i++) {
		csi_plugin_metrics(plugin, &m);
		if (m.connects == 2)
			break;
		usleep(20000);
	}
	cr_assert_eq(m.connects, 2, "no reconnect (connects %llu)", (unsigned long long)m.connects);
	cr_assert_eq(m.disconnects, 1);
	wait_health(CSI_HEALTH_READY, 3000);
	/* The second drop: retried (NodeGetInfo is idempotent) over a third
	 * connection. A retry sent before the client has read the dropped
	 * connection's EOF (a loaded machine: the backoff is 10 ms) fails on it
	 * too, and the next attempt goes over the new connection: 2 or 3. */
	cr_assert(node_get_info(&res, &err, NULL) == 0, "%s", err.msg);
	cr_assert(res.attempts == 2 || res.attempts == 3, "attempts %u", res.attempts);
	retried = res.attempts;
	cr_assert(node_get_info(&res, &err, NULL) == 0, "%s", err.msg);
	cr_assert_eq(res.attempts, 1);

	csi_plugin_metrics(plugin, &m);
	cr_assert_eq(m.connects, 3);
	cr_assert_eq(m.disconnects, 2);
	/* the first drop's one, and each attempt of the retried call but its last */
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].errors[GRPC_UNAVAILABLE], retried,
		     "UNAVAILABLE %llu, retried call's attempts %u",
		     (unsigned long long)m.rpc[CSI_RPC_NODE_GET_INFO].errors[GRPC_UNAVAILABLE], retried);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].successes, 2);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].cancelled, 0);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].pending, 0);
	/* Never restarted: the same process, still running. */
	cr_assert_eq(plugin_pid, pid);
	cr_assert_eq(waitpid(pid, NULL, WNOHANG), 0, "the plugin exited");
}

Test(csi, goaway_lets_calls_in_flight_finish)
{
	const char *flags[] = { "--delay", "NodeGetInfo=1", "--grace", "5", NULL };
	struct bg_call b = { .max_attempts = 1 };
	struct nerr err = { 0 };
	struct csi_result res;
	pthread_t t;

	plugin_start(flags);
	client_start(10, 1, 10000);
	csi_plugin_set_probe_interval(plugin, 0);
	cr_assert(pthread_create(&t, NULL, bg_node_get_info, &b) == 0);
	usleep(300000);
	/* The server sends GOAWAY and stops taking new streams, but finishes
	 * the one in flight. */
	kill(plugin_pid, SIGTERM);
	usleep(200000);
	pthread_join(t, NULL);
	cr_assert_eq(b.r, 0, "in-flight call: %s", b.err.msg);
	cr_assert_eq(b.res.code, GRPC_OK);
	plugin_kill(SIGTERM);
	/* The server is gone: a new call fails fast with UNAVAILABLE. */
	cr_assert_eq(node_get_info(&res, &err, NULL), -EAGAIN);
	cr_assert_eq(res.code, GRPC_UNAVAILABLE);
	/* And a restarted server is used again on a new connection. */
	plugin_start(NULL);
	cr_assert(node_get_info(&res, &err, NULL) == 0, "%s", err.msg);
	struct csi_metrics m;
	csi_plugin_metrics(plugin, &m);
	cr_assert_eq(m.connects, 2);
}

Test(csi, shutdown_cancels_pending_calls)
{
	const char *slow[] = { "--delay", "NodeGetInfo=10", NULL };
	struct bg_call b = { .max_attempts = 1 };
	pthread_t t;

	plugin_start(slow);
	client_start(10, 1, 30000);
	cr_assert(pthread_create(&t, NULL, bg_node_get_info, &b) == 0);
	usleep(500000);
	/* The metrics go with the plugin, so what the shutdown counts cannot
	 * be read after it: here the call is pending and nothing cancelled. */
	struct csi_metrics m;
	csi_plugin_metrics(plugin, &m);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].pending, 1);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].cancelled, 0);
	uint64_t t0 = loop_now_ms();
	csi_plugin_free(plugin);
	plugin = NULL;
	pthread_join(t, NULL);
	cr_assert_lt(loop_now_ms() - t0, SCALED(2000));
	cr_assert_eq(b.r, -ECANCELED);
	cr_assert_eq(b.res.code, GRPC_CANCELLED);
}
