/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_csi_status: what the CSI client does with each gRPC status: a deadline
 * that expires (retried on idempotent calls), UNAVAILABLE retried until OK,
 * ABORTED retried up to the limit, UNIMPLEMENTED and INVALID_ARGUMENT never
 * retried (with the percent-encoded message decoded), CANCELLED counted, and
 * a missing socket reported as down. It reaches the client only through csi.h
 * and the fixture only through csi_test.h.
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

Test(csi, deadline_exceeded)
{
	const char *flags[] = { "--delay", "NodeGetInfo=3", NULL };
	struct nerr err = { 0 };
	struct csi_result res;
	Csi__V1__NodeGetInfoRequest req = CSI__V1__NODE_GET_INFO_REQUEST__INIT;

	plugin_start(flags);
	client_start(10, 3, 5000);
	cr_assert_eq(csi_call_ex(plugin, CSI_RPC_NODE_GET_INFO, &req.base, 300, 1, NULL, &res, &err),
		     -ETIMEDOUT);
	cr_assert_eq(res.code, GRPC_DEADLINE_EXCEEDED);
	cr_assert_eq(res.attempts, 1);
	cr_assert_geq(res.elapsed_us, 290000);
	cr_assert_lt(res.elapsed_us, SCALED(1500000), "took %llu us", (unsigned long long)res.elapsed_us);
	/* DEADLINE_EXCEEDED is retried on idempotent calls. */
	cr_assert_eq(csi_call_ex(plugin, CSI_RPC_NODE_GET_INFO, &req.base, 200, 2, NULL, &res, &err),
		     -ETIMEDOUT);
	cr_assert_eq(res.attempts, 2);
	/* The connection survives reset streams: other calls still work. */
	bool ready;
	cr_assert(csi_probe(plugin, &ready, &err) == 0, "%s", err.msg);
	struct csi_metrics m;
	csi_plugin_metrics(plugin, &m);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].errors[GRPC_DEADLINE_EXCEEDED], 3);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].cancelled, 0, "a deadline is not a cancel");
	cr_assert_eq(m.connects, 1);
}

Test(csi, retries_unavailable_then_ok)
{
	const char *flags[] = { "--fail", "NodeGetInfo=UNAVAILABLE:2", NULL };
	struct nerr err = { 0 };
	struct csi_result res;

	plugin_start(flags);
	client_start(10, 5, 5000);
	cr_assert(node_get_info(&res, &err, NULL) == 0, "%s", err.msg);
	cr_assert_eq(res.code, GRPC_OK);
	cr_assert_eq(res.attempts, 3);
	struct csi_metrics m;
	csi_plugin_metrics(plugin, &m);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].errors[GRPC_UNAVAILABLE], 2);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].successes, 1);
}

Test(csi, aborted_retried_up_to_the_limit)
{
	const char *flags[] = { "--fail", "DeleteVolume=ABORTED", NULL };
	struct nerr err = { 0 };
	struct csi_result res;
	Csi__V1__DeleteVolumeRequest dv = CSI__V1__DELETE_VOLUME_REQUEST__INIT;

	plugin_start(flags);
	client_start(10, 4, 5000);
	dv.volume_id = "x";
	cr_assert_eq(csi_call(plugin, CSI_RPC_DELETE_VOLUME, &dv.base, NULL, &res, &err), -EBUSY);
	cr_assert_eq(res.code, GRPC_ABORTED);
	cr_assert_eq(res.attempts, 4);
}

Test(csi, unimplemented_not_retried_message_decoded)
{
	const char *flags[] = { "--fail", "GetCapacity=UNIMPLEMENTED", "--fail",
				"ListVolumes=INVALID_ARGUMENT", NULL };
	struct nerr err = { 0 };
	struct csi_result res;
	Csi__V1__GetCapacityRequest gc = CSI__V1__GET_CAPACITY_REQUEST__INIT;
	Csi__V1__ListVolumesRequest lr = CSI__V1__LIST_VOLUMES_REQUEST__INIT;

	plugin_start(flags);
	client_start(10, 5, 5000);
	cr_assert_eq(csi_call(plugin, CSI_RPC_GET_CAPACITY, &gc.base, NULL, &res, &err), -EOPNOTSUPP);
	cr_assert_eq(res.attempts, 1);
	cr_assert_eq(res.code, GRPC_UNIMPLEMENTED);
	/* grpcio percent-encodes '%' and non-ASCII bytes; we decode them. */
	cr_assert_str_eq(res.message, "injected UNIMPLEMENTED for GetCapacity (100% sure: ünïcödé)");
	cr_assert_str_eq(err.msg, "GetCapacity: UNIMPLEMENTED: injected UNIMPLEMENTED for GetCapacity (100% sure: ünïcödé)");
	cr_assert_eq(csi_call(plugin, CSI_RPC_LIST_VOLUMES, &lr.base, NULL, &res, &err), -EINVAL);
	cr_assert_eq(res.attempts, 1);
}

/* A plugin that answers CANCELLED: counted in cancelled (and errors), never
 * retried; the other failures (deadline, connection loss) are not. */
Test(csi, cancelled_status_counted)
{
	const char *flags[] = { "--fail", "NodeGetInfo=CANCELLED:1", NULL };
	struct nerr err = { 0 };
	struct csi_result res;
	struct csi_metrics m;

	plugin_start(flags);
	client_start(10, 5, 5000);
	cr_assert_eq(node_get_info(&res, &err, NULL), -ECANCELED);
	cr_assert_eq(res.code, GRPC_CANCELLED);
	cr_assert_eq(res.attempts, 1);
	cr_assert(node_get_info(&res, &err, NULL) == 0, "%s", err.msg);
	csi_plugin_metrics(plugin, &m);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].cancelled, 1);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].errors[GRPC_CANCELLED], 1);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].successes, 1);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].count, 2);
}

Test(csi, missing_socket_is_down_not_fatal)
{
	struct nerr err = { 0 };
	struct csi_result res;

	client_start(10, 2, 1000);
	wait_health(CSI_HEALTH_DOWN, 1000);
	cr_assert_eq(node_get_info(&res, &err, NULL), -EAGAIN);
	cr_assert_eq(res.attempts, 2);
	cr_assert(strstr(err.msg, "No such file or directory"), "%s", err.msg);
	struct csi_plugin *bad;
	cr_assert_eq(csi_plugin_new(loop, "x", "tcp://1.2.3.4:5", NULL, 0, &bad, &err), -EINVAL);
}
