/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * csi_storage_ops (csi/csi-storage.c) against an in-process gRPC server
 * (csi/h2server.c) on a unix socket: the requests the backend's calls
 * become (capability, string maps, ids, paths, sizes), the replies read
 * back into the backend's types (volume, contexts, pages, stats), and the
 * error classes the backend sees (errno, raw code, uncertain, attempts).
 * The server decodes each request with the generated descriptors and
 * answers what the test set for that method.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "csi.h"
#include "h2server.h"
#include "loop.h"
#include "nerr.h"
#include "sbuf.h"
#include "storage.h"

/* ---- the server ---- */

struct answer {
	int code;			/* gRPC status; 0 OK with msg */
	const char *message;
	ProtobufCMessage *msg;		/* the reply (the test's) */
};

static struct {
	pthread_mutex_t lock;
	struct answer answers[_CSI_RPC_MAX];
	ProtobufCMessage *last[_CSI_RPC_MAX];	/* the last request of each RPC, unpacked */
	unsigned count[_CSI_RPC_MAX];
} srv = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void on_request(void *ud, struct grpc_srv_call *call, const char *path,
		       const uint8_t *msg, size_t len, uint64_t timeout_ms)
{
	int rpc = -1;

	for (int i = 0; i < _CSI_RPC_MAX && rpc < 0; i++)
		if (strcmp(csi_rpc_path(i), path) == 0)
			rpc = i;
	if (rpc < 0) {
		h2_server_reply(call, GRPC_UNIMPLEMENTED, "unknown method", NULL, 0);
		return;
	}
	pthread_mutex_lock(&srv.lock);
	if (srv.last[rpc])
		protobuf_c_message_free_unpacked(srv.last[rpc], NULL);
	srv.last[rpc] = protobuf_c_message_unpack(csi_rpc_request_descriptor(rpc), NULL, len, msg);
	srv.count[rpc]++;
	struct answer a = srv.answers[rpc];
	pthread_mutex_unlock(&srv.lock);
	if (a.code) {
		h2_server_reply(call, a.code, a.message, NULL, 0);
		return;
	}
	if (!a.msg) {
		/* an empty reply of the right type */
		uint8_t none[1];
		h2_server_reply(call, GRPC_OK, NULL, none, 0);
		return;
	}
	size_t n = protobuf_c_message_get_packed_size(a.msg);
	uint8_t *buf = malloc(n ? n : 1);

	protobuf_c_message_pack(a.msg, buf);
	h2_server_reply(call, GRPC_OK, NULL, buf, n);
	free(buf);
}

static void answer(enum csi_rpc rpc, int code, const char *message, ProtobufCMessage *msg)
{
	pthread_mutex_lock(&srv.lock);
	srv.answers[rpc] = (struct answer){ code, message, msg };
	pthread_mutex_unlock(&srv.lock);
}

static void *last(enum csi_rpc rpc)
{
	void *m;

	pthread_mutex_lock(&srv.lock);
	m = srv.last[rpc];
	pthread_mutex_unlock(&srv.lock);
	cr_assert_not_null(m, "no %s request", csi_rpc_to_string(rpc));
	return m;
}

/* ---- the fixture: loop, server, handle ---- */

static struct loop *loop;
static pthread_t loop_thread;
static struct h2_server *server;
static void *h;
static char dir[128], sock[200];

static void *loop_main(void *arg)
{
	loop_run(loop);
	return NULL;
}

/* Run fn on the loop thread and wait for it (the server lives there). */
struct loop_job {
	void (*fn)(void);
	bool done;
	pthread_mutex_t m;
	pthread_cond_t c;
};

static void job_run(struct loop *l, void *ud)
{
	struct loop_job *j = ud;

	j->fn();
	pthread_mutex_lock(&j->m);
	j->done = true;
	pthread_cond_signal(&j->c);
	pthread_mutex_unlock(&j->m);
}

static void on_loop(void (*fn)(void))
{
	struct loop_job j = { .fn = fn, .m = PTHREAD_MUTEX_INITIALIZER, .c = PTHREAD_COND_INITIALIZER };

	cr_assert_eq(loop_submit(loop, job_run, &j), 0);
	pthread_mutex_lock(&j.m);
	while (!j.done)
		pthread_cond_wait(&j.c, &j.m);
	pthread_mutex_unlock(&j.m);
}

static int srv_new_result;
static struct nerr srv_new_err;

static void srv_new(void)
{
	srv_new_result = h2_server_new(loop, sock, on_request, NULL, &server, &srv_new_err);
}

static void srv_free(void)
{
	h2_server_free(server);
	server = NULL;
}

static double scale(void)
{
	const char *s = getenv("NODEFS_TIME_SCALE");

	return s && atof(s) > 0 ? atof(s) : 1.0;
}

static void setup(void)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	char endpoint[220];
	struct nerr err = { 0 };
	struct storage_health_info hi;

	snprintf(dir, sizeof(dir), "%s/nodefs-st.XXXXXX", tmp);
	cr_assert_not_null(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/csi.sock", dir);
	cr_assert_eq(loop_new(&loop), 0);
	cr_assert_eq(pthread_create(&loop_thread, NULL, loop_main, NULL), 0);
	on_loop(srv_new);
	cr_assert_eq(srv_new_result, 0, "%s", srv_new_err.msg);

	snprintf(endpoint, sizeof(endpoint), "unix://%s", sock);
	struct storage_config cfg = {
		.name = "t", .endpoint = endpoint, .retry_backoff_ms = 1, .retry_max_ms = 2,
		.timeout_ms = 5000,
	};
	cr_assert_eq(csi_storage_ops.open(loop, &cfg, &h, &err), 0, "%s", err.msg);
	/* connected and probed: the first Probe answers ready */
	for (int i = 0;; i++) {
		csi_storage_ops.health(h, &hi);
		if (hi.health == STORAGE_HEALTH_READY)
			break;
		cr_assert_lt(i, 10000 * scale(), "not READY: %s", hi.reason);
		usleep(1000);
	}
}

static void teardown(void)
{
	char cmd[200];

	csi_storage_ops.close(h);
	on_loop(srv_free);
	loop_stop(loop);
	pthread_join(loop_thread, NULL);
	loop_free(loop);
	for (int i = 0; i < _CSI_RPC_MAX; i++)
		if (srv.last[i])
			protobuf_c_message_free_unpacked(srv.last[i], NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	(void)!system(cmd);
}

TestSuite(storage, .init = setup, .fini = teardown, .timeout = 60);

static const char *map_get(size_t n, void *const *entries, const char *key)
{
	for (size_t i = 0; i < n; i++) {
		const Csi__V1__CreateVolumeRequest__ParametersEntry *e = entries[i];

		if (strcmp(e->key, key) == 0)
			return e->value;
	}
	return NULL;
}

/* ---- requests and replies ---- */

Test(storage, create)
{
	char *params[] = { "type=fast", "k=a=b", "nokey", NULL };
	char *flags[] = { "noatime", "nodev", NULL };
	struct storage_req rq = {
		.name = "nodefs-db-000001-abcd", .bytes = 1 << 20, .params = params,
		.cap = { .mode = STORAGE_MODE_MULTI_NODE_READER_ONLY, .fs_type = "ext4",
			 .mount_flags = flags },
	};
	Csi__V1__CreateVolumeResponse resp = CSI__V1__CREATE_VOLUME_RESPONSE__INIT;
	Csi__V1__Volume vol = CSI__V1__VOLUME__INIT;
	Csi__V1__Volume__VolumeContextEntry ctx = CSI__V1__VOLUME__VOLUME_CONTEXT_ENTRY__INIT, *ctxs[] = { &ctx };
	struct storage_volume v = { 0 };
	struct storage_result res = { 0 };
	struct nerr err = { 0 };

	vol.volume_id = "vol-7";
	vol.capacity_bytes = 2 << 20;
	ctx.key = "zone";
	ctx.value = "a";
	vol.n_volume_context = 1;
	vol.volume_context = ctxs;
	resp.volume = &vol;
	answer(CSI_RPC_CREATE_VOLUME, 0, NULL, &resp.base);
	cr_assert_eq(csi_storage_ops.create(h, &rq, &v, NULL, NULL, &res, &err), 0, "%s", err.msg);
	cr_expect_str_eq(v.id, "vol-7");
	cr_expect_eq(v.capacity, 2 << 20);
	cr_assert_not_null(v.vctx);
	cr_expect_str_eq(v.vctx[0], "zone=a");
	cr_expect_null(v.vctx[1]);
	cr_expect_str_eq(res.call, "CreateVolume");
	cr_expect_eq(res.code, 0);
	cr_expect_eq(res.attempts, 1);
	storage_volume_clear(&v);

	Csi__V1__CreateVolumeRequest *r = last(CSI_RPC_CREATE_VOLUME);
	cr_expect_str_eq(r->name, "nodefs-db-000001-abcd");
	cr_assert_not_null(r->capacity_range);
	cr_expect_eq(r->capacity_range->required_bytes, 1 << 20);
	cr_assert_eq(r->n_volume_capabilities, 1);
	Csi__V1__VolumeCapability *c = r->volume_capabilities[0];
	cr_expect_eq(c->access_mode->mode, CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY);
	cr_assert_eq(c->access_type_case, CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT);
	cr_expect_str_eq(c->mount->fs_type, "ext4");
	cr_assert_eq(c->mount->n_mount_flags, 2);
	cr_expect_str_eq(c->mount->mount_flags[1], "nodev");
	/* "k=v" split at the first '=', one without '=' skipped */
	cr_expect_eq(r->n_parameters, 2);
	cr_expect_str_eq(map_get(r->n_parameters, (void *const *)r->parameters, "type"), "fast");
	cr_expect_str_eq(map_get(r->n_parameters, (void *const *)r->parameters, "k"), "a=b");

	/* no size: no capacity range; no volume id in the reply: EIO */
	rq.bytes = 0;
	vol.volume_id = "";
	cr_expect_eq(csi_storage_ops.create(h, &rq, &v, NULL, NULL, &res, &err), -EIO);
	cr_expect(strstr(err.msg, "no volume id"), "%s", err.msg);
	r = last(CSI_RPC_CREATE_VOLUME);
	cr_expect_null(r->capacity_range);
}

Test(storage, block_capability_and_capacity)
{
	struct storage_req rq = { .cap = { .access = STORAGE_ACCESS_BLOCK } };
	Csi__V1__GetCapacityResponse resp = CSI__V1__GET_CAPACITY_RESPONSE__INIT;
	struct nerr err = { 0 };
	int64_t bytes = 0;

	resp.available_capacity = 12345;
	answer(CSI_RPC_GET_CAPACITY, 0, NULL, &resp.base);
	cr_assert_eq(csi_storage_ops.capacity(h, &rq, &bytes, NULL, NULL, NULL, &err), 0, "%s", err.msg);
	cr_expect_eq(bytes, 12345);
	Csi__V1__GetCapacityRequest *r = last(CSI_RPC_GET_CAPACITY);
	cr_assert_eq(r->n_volume_capabilities, 1);
	cr_expect_eq(r->volume_capabilities[0]->access_type_case,
		     CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK);
	/* unknown mode: single-node-writer */
	cr_expect_eq(r->volume_capabilities[0]->access_mode->mode,
		     CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER);
}

Test(storage, validate)
{
	struct storage_req rq = { .id = "vol-1" };
	Csi__V1__ValidateVolumeCapabilitiesResponse resp = CSI__V1__VALIDATE_VOLUME_CAPABILITIES_RESPONSE__INIT;
	Csi__V1__ValidateVolumeCapabilitiesResponse__Confirmed conf =
		CSI__V1__VALIDATE_VOLUME_CAPABILITIES_RESPONSE__CONFIRMED__INIT;
	struct nerr err = { 0 };

	resp.message = "fs ext4 unsupported";
	answer(CSI_RPC_VALIDATE_VOLUME_CAPABILITIES, 0, NULL, &resp.base);
	cr_expect_eq(csi_storage_ops.validate(h, &rq, NULL, NULL, NULL, &err), -EINVAL);
	cr_expect(strstr(err.msg, "does not confirm volume vol-1") && strstr(err.msg, "ext4"), "%s",
		  err.msg);
	resp.confirmed = &conf;
	cr_expect_eq(csi_storage_ops.validate(h, &rq, NULL, NULL, NULL, &err), 0, "%s", err.msg);
	cr_expect_str_eq(((Csi__V1__ValidateVolumeCapabilitiesRequest *)
			  last(CSI_RPC_VALIDATE_VOLUME_CAPABILITIES))->volume_id, "vol-1");
}

Test(storage, controller_publish_and_node_calls)
{
	char *vctx[] = { "zone=a", NULL };
	char *pctx_in[] = { "device=/dev/x", NULL };
	struct storage_req rq = {
		.id = "vol-1", .node_id = "node-9", .readonly = true, .vctx = vctx, .pctx = pctx_in,
		.staging = "/s/vol-1", .target = "/mnt/db", .path = "/mnt/db", .bytes = 4096,
	};
	Csi__V1__ControllerPublishVolumeResponse cresp = CSI__V1__CONTROLLER_PUBLISH_VOLUME_RESPONSE__INIT;
	Csi__V1__ControllerPublishVolumeResponse__PublishContextEntry pe =
		CSI__V1__CONTROLLER_PUBLISH_VOLUME_RESPONSE__PUBLISH_CONTEXT_ENTRY__INIT, *pes[] = { &pe };
	struct nerr err = { 0 };
	char **pctx = NULL;

	pe.key = "device";
	pe.value = "/dev/y";
	cresp.n_publish_context = 1;
	cresp.publish_context = pes;
	answer(CSI_RPC_CONTROLLER_PUBLISH_VOLUME, 0, NULL, &cresp.base);
	cr_assert_eq(csi_storage_ops.controller_publish(h, &rq, &pctx, NULL, NULL, NULL, &err), 0, "%s", err.msg);
	cr_assert_not_null(pctx);
	cr_expect_str_eq(pctx[0], "device=/dev/y");
	storage_strv_free(pctx);
	Csi__V1__ControllerPublishVolumeRequest *cp = last(CSI_RPC_CONTROLLER_PUBLISH_VOLUME);
	cr_expect_str_eq(cp->node_id, "node-9");
	cr_expect(cp->readonly);
	cr_expect_str_eq(map_get(cp->n_volume_context, (void *const *)cp->volume_context, "zone"), "a");

	cr_assert_eq(csi_storage_ops.stage(h, &rq, NULL, NULL, NULL, &err), 0, "%s", err.msg);
	Csi__V1__NodeStageVolumeRequest *ns = last(CSI_RPC_NODE_STAGE_VOLUME);
	cr_expect_str_eq(ns->staging_target_path, "/s/vol-1");
	cr_expect_str_eq(map_get(ns->n_publish_context, (void *const *)ns->publish_context, "device"),
			 "/dev/x");

	cr_assert_eq(csi_storage_ops.publish(h, &rq, NULL, NULL, NULL, &err), 0, "%s", err.msg);
	Csi__V1__NodePublishVolumeRequest *np = last(CSI_RPC_NODE_PUBLISH_VOLUME);
	cr_expect_str_eq(np->target_path, "/mnt/db");
	cr_expect_str_eq(np->staging_target_path, "/s/vol-1");
	cr_expect(np->readonly);
	cr_expect_str_eq(map_get(np->n_volume_context, (void *const *)np->volume_context, "zone"), "a");

	cr_assert_eq(csi_storage_ops.unpublish(h, &rq, NULL, NULL, NULL, &err), 0, "%s", err.msg);
	cr_expect_str_eq(((Csi__V1__NodeUnpublishVolumeRequest *)last(CSI_RPC_NODE_UNPUBLISH_VOLUME))->target_path,
			 "/mnt/db");
	cr_assert_eq(csi_storage_ops.unstage(h, &rq, NULL, NULL, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(csi_storage_ops.controller_unpublish(h, &rq, NULL, NULL, NULL, &err), 0, "%s", err.msg);
	cr_expect_str_eq(((Csi__V1__ControllerUnpublishVolumeRequest *)
			  last(CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME))->node_id, "node-9");
	cr_assert_eq(csi_storage_ops.delete(h, &rq, NULL, NULL, NULL, &err), 0, "%s", err.msg);
	cr_expect_str_eq(((Csi__V1__DeleteVolumeRequest *)last(CSI_RPC_DELETE_VOLUME))->volume_id, "vol-1");

	/* expands */
	Csi__V1__ControllerExpandVolumeResponse xr = CSI__V1__CONTROLLER_EXPAND_VOLUME_RESPONSE__INIT;
	int64_t cap = 0;
	bool node_needed = false;

	xr.capacity_bytes = 8192;
	xr.node_expansion_required = true;
	answer(CSI_RPC_CONTROLLER_EXPAND_VOLUME, 0, NULL, &xr.base);
	cr_assert_eq(csi_storage_ops.controller_expand(h, &rq, &cap, &node_needed, NULL, NULL, NULL, &err), 0);
	cr_expect_eq(cap, 8192);
	cr_expect(node_needed);
	cr_expect_eq(((Csi__V1__ControllerExpandVolumeRequest *)last(CSI_RPC_CONTROLLER_EXPAND_VOLUME))
		     ->capacity_range->required_bytes, 4096);
	cr_assert_eq(csi_storage_ops.node_expand(h, &rq, &cap, NULL, NULL, NULL, &err), 0);
	cr_expect_eq(cap, 0, "an empty reply reports no capacity");
	Csi__V1__NodeExpandVolumeRequest *ne = last(CSI_RPC_NODE_EXPAND_VOLUME);
	cr_expect_str_eq(ne->volume_path, "/mnt/db");
	cr_expect_str_eq(ne->staging_target_path, "/s/vol-1");
}

Test(storage, list_pages_and_stats)
{
	Csi__V1__ListVolumesResponse lr = CSI__V1__LIST_VOLUMES_RESPONSE__INIT;
	Csi__V1__ListVolumesResponse__Entry e1 = CSI__V1__LIST_VOLUMES_RESPONSE__ENTRY__INIT,
		e2 = CSI__V1__LIST_VOLUMES_RESPONSE__ENTRY__INIT, *es[] = { &e1, &e2 };
	Csi__V1__Volume v1 = CSI__V1__VOLUME__INIT;
	struct storage_page pg = { 0 };
	struct nerr err = { 0 };

	v1.volume_id = "a";
	v1.capacity_bytes = 7;
	e1.volume = &v1;	/* e2 has no volume: skipped */
	lr.n_entries = 2;
	lr.entries = es;
	lr.next_token = "p2";
	answer(CSI_RPC_LIST_VOLUMES, 0, NULL, &lr.base);
	cr_assert_eq(csi_storage_ops.list(h, NULL, &pg, NULL, NULL, NULL, &err), 0, "%s", err.msg);
	cr_assert_eq(pg.n, 1);
	cr_expect_str_eq(pg.v[0].id, "a");
	cr_expect_eq(pg.v[0].capacity, 7);
	cr_assert_not_null(pg.v[0].vctx);
	cr_expect_null(pg.v[0].vctx[0]);
	cr_expect_str_eq(pg.next_token, "p2");
	storage_page_clear(&pg);
	lr.next_token = "";
	cr_assert_eq(csi_storage_ops.list(h, "p2", &pg, NULL, NULL, NULL, &err), 0);
	cr_expect_null(pg.next_token, "an empty token ends the listing");
	cr_expect_str_eq(((Csi__V1__ListVolumesRequest *)last(CSI_RPC_LIST_VOLUMES))->starting_token, "p2");
	storage_page_clear(&pg);

	Csi__V1__NodeGetVolumeStatsResponse sr = CSI__V1__NODE_GET_VOLUME_STATS_RESPONSE__INIT;
	Csi__V1__VolumeUsage ub = CSI__V1__VOLUME_USAGE__INIT, ui = CSI__V1__VOLUME_USAGE__INIT,
		*us[] = { &ub, &ui };
	struct storage_req rq = { .id = "a", .path = "/mnt/a" };
	struct storage_stats st;

	ub.unit = CSI__V1__VOLUME_USAGE__UNIT__BYTES;
	ub.used = 1, ub.available = 2, ub.total = 3;
	ui.unit = CSI__V1__VOLUME_USAGE__UNIT__INODES;
	ui.used = 4, ui.available = 5, ui.total = 9;
	sr.n_usage = 2;
	sr.usage = us;
	answer(CSI_RPC_NODE_GET_VOLUME_STATS, 0, NULL, &sr.base);
	cr_assert_eq(csi_storage_ops.stats(h, &rq, 1000, &st, NULL, NULL, NULL, &err), 0, "%s", err.msg);
	cr_expect(st.bytes[0] == 1 && st.bytes[1] == 2 && st.bytes[2] == 3);
	cr_expect(st.inodes[0] == 4 && st.inodes[1] == 5 && st.inodes[2] == 9);
	sr.n_usage = 0;
	cr_assert_eq(csi_storage_ops.stats(h, &rq, 1000, &st, NULL, NULL, NULL, &err), 0);
	cr_expect(st.bytes[0] == -1 && st.inodes[2] == -1, "not reported: -1");
}

Test(storage, identity)
{
	Csi__V1__GetPluginInfoResponse ir = CSI__V1__GET_PLUGIN_INFO_RESPONSE__INIT;
	Csi__V1__NodeGetInfoResponse nr = CSI__V1__NODE_GET_INFO_RESPONSE__INIT;
	Csi__V1__NodeGetCapabilitiesResponse nc = CSI__V1__NODE_GET_CAPABILITIES_RESPONSE__INIT;
	Csi__V1__NodeServiceCapability c1 = CSI__V1__NODE_SERVICE_CAPABILITY__INIT, *cs[] = { &c1 };
	Csi__V1__NodeServiceCapability__RPC rpc = CSI__V1__NODE_SERVICE_CAPABILITY__RPC__INIT;
	struct storage_caps caps;
	struct nerr err = { 0 };
	char *name = NULL, *ver = NULL, *node = NULL;

	ir.name = "x.example";
	ir.vendor_version = "9";
	answer(CSI_RPC_GET_PLUGIN_INFO, 0, NULL, &ir.base);
	cr_assert_eq(csi_storage_ops.plugin_info(h, &name, &ver, &err), 0, "%s", err.msg);
	cr_expect_str_eq(name, "x.example");
	cr_expect_str_eq(ver, "9");
	free(name);
	free(ver);
	nr.node_id = "n1";
	answer(CSI_RPC_NODE_GET_INFO, 0, NULL, &nr.base);
	cr_assert_eq(csi_storage_ops.node_info(h, &node, &err), 0, "%s", err.msg);
	cr_expect_str_eq(node, "n1");
	free(node);
	/* no controller service: no controller capabilities asked */
	rpc.type = CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME;
	c1.type_case = CSI__V1__NODE_SERVICE_CAPABILITY__TYPE_RPC;
	c1.rpc = &rpc;
	nc.n_capabilities = 1;
	nc.capabilities = cs;
	answer(CSI_RPC_NODE_GET_CAPABILITIES, 0, NULL, &nc.base);
	cr_assert_eq(csi_storage_ops.capabilities(h, &caps, &err), 0, "%s", err.msg);
	cr_expect(STORAGE_CAP(caps.node, STORAGE_NODE_STAGE_UNSTAGE_VOLUME));
	cr_expect_eq(caps.controller, 0);
	cr_expect_eq(srv.count[CSI_RPC_CONTROLLER_GET_CAPABILITIES], 0);
}

/* ---- error classes ---- */

/* What the retry callback was told: each call, and the last result. */
struct retries {
	unsigned calls;
	struct storage_result last;
};

static void count_retry(void *ctx, const struct storage_result *so_far)
{
	struct retries *rt = ctx;

	rt->calls++;
	rt->last = *so_far;
}

Test(storage, error_classes)
{
	static const struct {
		int code, err;
		bool uncertain;
		unsigned attempts;	/* retried codes take every attempt */
	} cases[] = {
		{ GRPC_NOT_FOUND, ENOENT, false, 1 },
		{ GRPC_INVALID_ARGUMENT, EINVAL, false, 1 },
		{ GRPC_FAILED_PRECONDITION, EBUSY, false, 1 },
		{ GRPC_UNIMPLEMENTED, EOPNOTSUPP, false, 1 },
		{ GRPC_UNAVAILABLE, EAGAIN, true, 5 },
		{ GRPC_ABORTED, EBUSY, true, 5 },
		{ GRPC_DEADLINE_EXCEEDED, ETIMEDOUT, true, 5 },
		{ GRPC_RESOURCE_EXHAUSTED, ENOSPC, false, 5 },
	};
	struct storage_req rq = { .id = "vol-1", .staging = "/s" };

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct storage_result res = { 0 };
		struct retries rt = { 0 };
		struct nerr err = { 0 };
		int r;

		answer(CSI_RPC_NODE_STAGE_VOLUME, cases[k].code, "injected", NULL);
		r = csi_storage_ops.stage(h, &rq, count_retry, &rt, &res, &err);
		cr_expect_eq(r, -cases[k].err, "%s: %d", grpc_code_to_string(cases[k].code), r);
		cr_expect_eq(res.code, cases[k].code);
		cr_expect_str_eq(res.code_name, grpc_code_to_string(cases[k].code));
		cr_expect_eq(res.uncertain, cases[k].uncertain, "%s", res.code_name);
		cr_expect_eq(res.attempts, cases[k].attempts, "%s: %u attempts", res.code_name,
			     res.attempts);
		cr_expect_str_eq(res.call, "NodeStageVolume");
		cr_expect(strstr(err.msg, "NodeStageVolume") && strstr(err.msg, "injected"), "%s",
			  err.msg);
		/* told once before each retry, with the attempts so far */
		cr_expect_eq(rt.calls, cases[k].attempts - 1, "%s: told %u times", res.code_name,
			     rt.calls);
		if (rt.calls) {
			cr_expect_eq(rt.last.attempts, cases[k].attempts - 1);
			cr_expect_eq(rt.last.code, cases[k].code);
			cr_expect_str_eq(rt.last.call, "NodeStageVolume");
		}
	}
}

Test(storage, metrics)
{
	struct storage_req rq = { .id = "vol-1" };
	struct sbuf out = SBUF_INIT(1u << 20);
	struct nerr err = { 0 };
	void *hs[] = { h, NULL };
	const char *names[] = { "t", "gone" };

	cr_assert_eq(csi_storage_ops.delete(h, &rq, NULL, NULL, NULL, &err), 0, "%s", err.msg);
	answer(CSI_RPC_DELETE_VOLUME, GRPC_NOT_FOUND, "x", NULL);
	cr_assert_eq(csi_storage_ops.delete(h, &rq, NULL, NULL, NULL, &err), -ENOENT);
	cr_assert_geq(csi_storage_ops.render_metrics(hs, names, 2, &out), 0);
	cr_assert_not_null(out.buf);
	cr_expect(strstr(out.buf, "# TYPE nodefs_csi_rpc_duration_seconds histogram\n"), "%s", out.buf);
	cr_expect(strstr(out.buf, "nodefs_csi_rpcs_total{plugin=\"t\",rpc=\"DeleteVolume\",code=\"OK\"} 1\n"));
	cr_expect(strstr(out.buf, "nodefs_csi_rpcs_total{plugin=\"t\",rpc=\"DeleteVolume\",code=\"NOT_FOUND\"} 1\n"));
	cr_expect(strstr(out.buf, "nodefs_csi_rpc_duration_seconds_bucket{plugin=\"t\",rpc=\"DeleteVolume\",le=\"+Inf\"} 2\n"),
		  "%s", out.buf);
	cr_expect(strstr(out.buf, "nodefs_csi_rpc_duration_seconds_count{plugin=\"t\",rpc=\"DeleteVolume\"} 2\n"));
	cr_expect(strstr(out.buf, "nodefs_csi_rpcs_pending{plugin=\"t\",rpc=\"DeleteVolume\"} 0\n"));
	cr_expect_null(strstr(out.buf, "plugin=\"gone\""), "a NULL handle is skipped");
	cr_expect_null(strstr(out.buf, "rpc=\"NodeExpandVolume\",le="), "no histogram without calls");
	sbuf_free(&out);
}
