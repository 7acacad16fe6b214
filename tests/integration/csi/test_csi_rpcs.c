/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_csi_rpcs: every CSI RPC nodefs makes, run for real against the test
 * plugin (bind mounts included: root): identity and capabilities (and the
 * capabilities a plugin's flags take away), a volume's whole life through
 * every controller and node call, the spec's idempotency rules, and a
 * plugin's state kept across its restart. It reaches the client only through
 * csi.h and the fixture only through csi_test.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "csi_test.h"

Test(csi, identity_and_capabilities)
{
	struct nerr err = { 0 };
	char *name = NULL, *version = NULL;
	struct csi_caps caps;
	bool ready = false;

	plugin_start(NULL);
	client_start(10, 3, 5000);
	cr_assert(csi_get_plugin_info(plugin, &name, &version, &err) == 0, "%s", err.msg);
	cr_assert_str_eq(name, "hostpath.csi.nodefs.test");
	cr_assert_str_eq(version, "1.0.0");
	free(name);
	free(version);
	cr_assert(csi_probe(plugin, &ready, &err) == 0, "%s", err.msg);
	cr_assert(ready);
	wait_health(CSI_HEALTH_READY, 3000);
	cr_assert(csi_get_caps(plugin, &caps, &err) == 0, "%s", err.msg);
	cr_assert(CSI_CAP(caps.plugin, CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE));
	cr_assert(CSI_CAP(caps.expansion, CSI__V1__PLUGIN_CAPABILITY__VOLUME_EXPANSION__TYPE__ONLINE));
	cr_assert(CSI_CAP(caps.controller, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME));
	cr_assert(CSI_CAP(caps.controller, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_VOLUME));
	cr_assert(CSI_CAP(caps.node, CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME));
	cr_assert(CSI_CAP(caps.node, CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME_STATS));
}

Test(csi, capabilities_follow_flags)
{
	const char *flags[] = { "--no-stage", "--no-controller", "--no-expand", "--not-ready", NULL };
	struct nerr err = { 0 };
	struct csi_caps caps;
	struct csi_result res;
	bool ready = true;

	plugin_start(flags);
	client_start(10, 3, 5000);
	cr_assert(csi_probe(plugin, &ready, &err) == 0, "%s", err.msg);
	cr_assert(!ready);
	wait_health(CSI_HEALTH_NOT_READY, 3000);
	cr_assert(csi_get_caps(plugin, &caps, &err) == 0, "%s", err.msg);
	cr_assert_eq(caps.plugin, 0);
	cr_assert_eq(caps.controller, 0);
	cr_assert(!CSI_CAP(caps.node, CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME));
	/* The Controller service is not registered: a real trailers-only
	 * UNIMPLEMENTED from grpcio, never retried. */
	Csi__V1__ControllerGetCapabilitiesRequest req = CSI__V1__CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
	ProtobufCMessage *resp;
	cr_assert_eq(csi_call(plugin, CSI_RPC_CONTROLLER_GET_CAPABILITIES, &req.base, &resp, &res, &err),
		     -EOPNOTSUPP);
	cr_assert_eq(res.code, GRPC_UNIMPLEMENTED);
	cr_assert_eq(res.attempts, 1);
	cr_assert_eq(err.code, EOPNOTSUPP);
}

Test(csi, volume_lifecycle_every_rpc)
{
	struct nerr err = { 0 };
	struct csi_result res;
	ProtobufCMessage *resp;
	Csi__V1__VolumeCapability cap;
	Csi__V1__VolumeCapability__MountVolume mnt;
	Csi__V1__VolumeCapability__AccessMode mode;
	Csi__V1__VolumeCapability *caps[1] = { mount_cap(&cap, &mnt, &mode) };
	Csi__V1__CapacityRange range = CSI__V1__CAPACITY_RANGE__INIT;
	char voldir[PATH_MAX + 64], staging[PATH_MAX + 64], target[PATH_MAX + 64], target_ro[PATH_MAX + 64];
	char file[PATH_MAX + 128];

	plugin_start(NULL);
	client_start(10, 3, 10000);

	/* CreateVolume, idempotent by name; ALREADY_EXISTS on another size. */
	Csi__V1__CreateVolumeRequest cr = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	range.required_bytes = 10 << 20;
	cr.name = "db";
	cr.capacity_range = &range;
	cr.n_volume_capabilities = 1;
	cr.volume_capabilities = caps;
	cr_assert(csi_call(plugin, CSI_RPC_CREATE_VOLUME, &cr.base, &resp, &res, &err) == 0, "%s", err.msg);
	cr_assert_eq(res.attempts, 1);
	Csi__V1__Volume *vol = ((Csi__V1__CreateVolumeResponse *)resp)->volume;
	cr_assert_eq(vol->capacity_bytes, 10 << 20);
	char *id = strdup(vol->volume_id);
	protobuf_c_message_free_unpacked(resp, NULL);
	snprintf(voldir, sizeof(voldir), "%s/volumes/%s", base, id);
	struct stat st;
	cr_assert(stat(voldir, &st) == 0 && S_ISDIR(st.st_mode), "no %s", voldir);

	cr_assert(csi_call(plugin, CSI_RPC_CREATE_VOLUME, &cr.base, &resp, &res, &err) == 0, "%s", err.msg);
	cr_assert_str_eq(((Csi__V1__CreateVolumeResponse *)resp)->volume->volume_id, id);
	protobuf_c_message_free_unpacked(resp, NULL);
	range.required_bytes = 20 << 20;
	cr_assert_eq(csi_call(plugin, CSI_RPC_CREATE_VOLUME, &cr.base, &resp, &res, &err), -EEXIST);
	cr_assert_eq(res.code, GRPC_ALREADY_EXISTS);
	cr_assert_eq(res.attempts, 1);
	cr_assert(strstr(err.msg, "CreateVolume: ALREADY_EXISTS: volume db exists"), "%s", err.msg);

	/* ValidateVolumeCapabilities, ListVolumes, GetCapacity. */
	Csi__V1__ValidateVolumeCapabilitiesRequest vr = CSI__V1__VALIDATE_VOLUME_CAPABILITIES_REQUEST__INIT;
	vr.volume_id = id;
	vr.n_volume_capabilities = 1;
	vr.volume_capabilities = caps;
	cr_assert(csi_call(plugin, CSI_RPC_VALIDATE_VOLUME_CAPABILITIES, &vr.base, &resp, &res, &err) == 0, "%s", err.msg);
	cr_assert_not_null(((Csi__V1__ValidateVolumeCapabilitiesResponse *)resp)->confirmed);
	protobuf_c_message_free_unpacked(resp, NULL);

	Csi__V1__ListVolumesRequest lr = CSI__V1__LIST_VOLUMES_REQUEST__INIT;
	cr_assert(csi_call(plugin, CSI_RPC_LIST_VOLUMES, &lr.base, &resp, &res, &err) == 0, "%s", err.msg);
	Csi__V1__ListVolumesResponse *lv = (void *)resp;
	cr_assert_eq(lv->n_entries, 1);
	cr_assert_str_eq(lv->entries[0]->volume->volume_id, id);
	protobuf_c_message_free_unpacked(resp, NULL);

	Csi__V1__GetCapacityRequest gc = CSI__V1__GET_CAPACITY_REQUEST__INIT;
	cr_assert(csi_call(plugin, CSI_RPC_GET_CAPACITY, &gc.base, &resp, &res, &err) == 0, "%s", err.msg);
	cr_assert_gt(((Csi__V1__GetCapacityResponse *)resp)->available_capacity, 0);
	protobuf_c_message_free_unpacked(resp, NULL);

	/* ControllerPublish to our node (NodeGetInfo), NOT_FOUND for another. */
	char *node = NULL;
	cr_assert(node_get_info(&res, &err, &node) == 0, "%s", err.msg);
	cr_assert_str_eq(node, "node-1");
	Csi__V1__ControllerPublishVolumeRequest cp = CSI__V1__CONTROLLER_PUBLISH_VOLUME_REQUEST__INIT;
	cp.volume_id = id;
	cp.node_id = "elsewhere";
	cp.volume_capability = &cap;
	cr_assert_eq(csi_call(plugin, CSI_RPC_CONTROLLER_PUBLISH_VOLUME, &cp.base, &resp, &res, &err), -ENOENT);
	cr_assert_eq(res.code, GRPC_NOT_FOUND);
	cr_assert_eq(res.attempts, 1);
	cp.node_id = node;
	cr_assert(csi_call(plugin, CSI_RPC_CONTROLLER_PUBLISH_VOLUME, &cp.base, &resp, &res, &err) == 0, "%s", err.msg);
	Csi__V1__ControllerPublishVolumeResponse *cpr = (void *)resp;
	cr_assert_eq(cpr->n_publish_context, 1);
	cr_assert_str_eq(cpr->publish_context[0]->key, "device");
	protobuf_c_message_free_unpacked(resp, NULL);

	/* NodeStage: a real bind mount on the staging path. */
	snprintf(staging, sizeof(staging), "%s/staging/db", dir);
	Csi__V1__NodeStageVolumeRequest ns = CSI__V1__NODE_STAGE_VOLUME_REQUEST__INIT;
	ns.volume_id = id;
	ns.staging_target_path = staging;
	ns.volume_capability = &cap;
	cr_assert(csi_call(plugin, CSI_RPC_NODE_STAGE_VOLUME, &ns.base, &resp, &res, &err) == 0, "%s", err.msg);
	protobuf_c_message_free_unpacked(resp, NULL);
	cr_assert(is_mountpoint(staging));
	cr_assert(csi_call(plugin, CSI_RPC_NODE_STAGE_VOLUME, &ns.base, NULL, &res, &err) == 0, "%s", err.msg);

	/* NodePublish; a file written through the target shows in the volume. */
	snprintf(target, sizeof(target), "%s/mnt/db", dir);
	snprintf(target_ro, sizeof(target_ro), "%s/mnt/db-ro", dir);
	Csi__V1__NodePublishVolumeRequest np = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	np.volume_id = id;
	np.staging_target_path = staging;
	np.target_path = target;
	np.volume_capability = &cap;
	cr_assert(csi_call(plugin, CSI_RPC_NODE_PUBLISH_VOLUME, &np.base, NULL, &res, &err) == 0, "%s", err.msg);
	cr_assert(is_mountpoint(target));
	snprintf(file, sizeof(file), "%s/hello", target);
	int fd = open(file, O_CREAT | O_WRONLY, 0644);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, "hi\n", 3), 3);
	close(fd);
	snprintf(file, sizeof(file), "%s/hello", voldir);
	cr_assert(access(file, F_OK) == 0);
	cr_assert(csi_call(plugin, CSI_RPC_NODE_PUBLISH_VOLUME, &np.base, NULL, &res, &err) == 0, "%s", err.msg);
	/* A second target of a SINGLE_NODE_WRITER volume is refused
	 * (read-only and the rest in idempotency_follows_the_spec). */
	np.target_path = target_ro;
	np.readonly = 1;
	cr_assert_eq(csi_call(plugin, CSI_RPC_NODE_PUBLISH_VOLUME, &np.base, NULL, &res, &err), -EBUSY);
	cr_assert_eq(res.code, GRPC_FAILED_PRECONDITION);
	cr_assert(!is_mountpoint(target_ro));

	/* NodeGetVolumeStats from statvfs. */
	Csi__V1__NodeGetVolumeStatsRequest vs = CSI__V1__NODE_GET_VOLUME_STATS_REQUEST__INIT;
	vs.volume_id = id;
	vs.volume_path = target;
	cr_assert(csi_call(plugin, CSI_RPC_NODE_GET_VOLUME_STATS, &vs.base, &resp, &res, &err) == 0, "%s", err.msg);
	Csi__V1__NodeGetVolumeStatsResponse *vsr = (void *)resp;
	cr_assert_eq(vsr->n_usage, 2);
	cr_assert_eq(vsr->usage[0]->unit, CSI__V1__VOLUME_USAGE__UNIT__BYTES);
	cr_assert_gt(vsr->usage[0]->total, 0);
	cr_assert_eq(vsr->usage[1]->unit, CSI__V1__VOLUME_USAGE__UNIT__INODES);
	protobuf_c_message_free_unpacked(resp, NULL);

	/* ControllerExpand and NodeExpand update the recorded size. */
	Csi__V1__ControllerExpandVolumeRequest ce = CSI__V1__CONTROLLER_EXPAND_VOLUME_REQUEST__INIT;
	ce.volume_id = id;
	range.required_bytes = 50 << 20;
	ce.capacity_range = &range;
	cr_assert(csi_call(plugin, CSI_RPC_CONTROLLER_EXPAND_VOLUME, &ce.base, &resp, &res, &err) == 0, "%s", err.msg);
	cr_assert_eq(((Csi__V1__ControllerExpandVolumeResponse *)resp)->capacity_bytes, 50 << 20);
	cr_assert(((Csi__V1__ControllerExpandVolumeResponse *)resp)->node_expansion_required);
	protobuf_c_message_free_unpacked(resp, NULL);
	Csi__V1__NodeExpandVolumeRequest ne = CSI__V1__NODE_EXPAND_VOLUME_REQUEST__INIT;
	ne.volume_id = id;
	ne.volume_path = target;
	range.required_bytes = 60 << 20;
	ne.capacity_range = &range;
	cr_assert(csi_call(plugin, CSI_RPC_NODE_EXPAND_VOLUME, &ne.base, &resp, &res, &err) == 0, "%s", err.msg);
	cr_assert_eq(((Csi__V1__NodeExpandVolumeResponse *)resp)->capacity_bytes, 60 << 20);
	protobuf_c_message_free_unpacked(resp, NULL);

	/* DeleteVolume of a published volume is refused (FAILED_PRECONDITION
	 * -> EBUSY, not retried). */
	Csi__V1__DeleteVolumeRequest dv = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
	dv.volume_id = id;
	cr_assert_eq(csi_call(plugin, CSI_RPC_DELETE_VOLUME, &dv.base, NULL, &res, &err), -EBUSY);
	cr_assert_eq(res.code, GRPC_FAILED_PRECONDITION);
	cr_assert_eq(res.attempts, 1);

	/* Walk back down: NodeUnpublish (and again: idempotent), NodeUnstage,
	 * ControllerUnpublish, Delete. */
	Csi__V1__NodeUnpublishVolumeRequest nu = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
	nu.volume_id = id;
	nu.target_path = target;
	cr_assert(csi_call(plugin, CSI_RPC_NODE_UNPUBLISH_VOLUME, &nu.base, NULL, &res, &err) == 0, "%s", err.msg);
	cr_assert(!is_mountpoint(target));
	cr_assert(csi_call(plugin, CSI_RPC_NODE_UNPUBLISH_VOLUME, &nu.base, NULL, &res, &err) == 0, "%s", err.msg);
	Csi__V1__NodeUnstageVolumeRequest nus = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;
	nus.volume_id = id;
	nus.staging_target_path = staging;
	cr_assert(csi_call(plugin, CSI_RPC_NODE_UNSTAGE_VOLUME, &nus.base, NULL, &res, &err) == 0, "%s", err.msg);
	cr_assert(!is_mountpoint(staging));
	cr_assert(csi_call(plugin, CSI_RPC_NODE_UNSTAGE_VOLUME, &nus.base, NULL, &res, &err) == 0, "%s", err.msg);
	Csi__V1__ControllerUnpublishVolumeRequest cu = CSI__V1__CONTROLLER_UNPUBLISH_VOLUME_REQUEST__INIT;
	cu.volume_id = id;
	cu.node_id = node;
	cr_assert(csi_call(plugin, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME, &cu.base, NULL, &res, &err) == 0, "%s", err.msg);
	cr_assert(csi_call(plugin, CSI_RPC_DELETE_VOLUME, &dv.base, NULL, &res, &err) == 0, "%s", err.msg);
	cr_assert(access(voldir, F_OK) < 0 && errno == ENOENT);
	cr_assert(csi_call(plugin, CSI_RPC_DELETE_VOLUME, &dv.base, NULL, &res, &err) == 0, "%s", err.msg);

	/* Wrong request type for the RPC is refused locally. */
	cr_assert_eq(csi_call(plugin, CSI_RPC_DELETE_VOLUME, &cu.base, NULL, &res, &err), -EINVAL);

	struct csi_metrics m;
	csi_plugin_metrics(plugin, &m);
	cr_assert_eq(m.rpc[CSI_RPC_CREATE_VOLUME].successes, 2);
	cr_assert_eq(m.rpc[CSI_RPC_CREATE_VOLUME].errors[GRPC_ALREADY_EXISTS], 1);
	cr_assert_eq(m.rpc[CSI_RPC_CREATE_VOLUME].count, 3);
	uint64_t in_buckets = 0;
	for (int k = 0; k <= CSI_LATENCY_BUCKETS; k++)
		in_buckets += m.rpc[CSI_RPC_CREATE_VOLUME].hist[k];
	cr_assert_eq(in_buckets, 3);
	cr_assert_eq(m.rpc[CSI_RPC_CREATE_VOLUME].hist[CSI_LATENCY_BUCKETS], 0, "no 120 s CreateVolume");
	cr_assert_gt(m.rpc[CSI_RPC_CREATE_VOLUME].latency_sum, 0);
	cr_assert_eq(m.rpc[CSI_RPC_CREATE_VOLUME].pending, 0);
	cr_assert_eq(m.rpc[CSI_RPC_DELETE_VOLUME].successes, 2);
	cr_assert_eq(m.connects, 1, "one connection carried every call");
	free(node);
	free(id);
}

/* A call the plugin must refuse, once (never retried), saying why. */
static void expect_refused(enum csi_rpc rpc, const ProtobufCMessage *req, int want_errno,
			   int want_code, const char *words)
{
	struct nerr err = { 0 };
	struct csi_result res;

	cr_assert_eq(csi_call(plugin, rpc, req, NULL, &res, &err), -want_errno, "%s: %s",
		     csi_rpc_to_string(rpc), err.msg);
	cr_assert_eq(res.code, want_code, "%s: %s", csi_rpc_to_string(rpc), err.msg);
	cr_assert_eq(res.attempts, 1);
	cr_assert(strstr(err.msg, words), "%s", err.msg);
}

static char *create_volume(const char *name, Csi__V1__VolumeCapability **caps)
{
	Csi__V1__CreateVolumeRequest cr = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	struct nerr err = { 0 };
	struct csi_result res;
	ProtobufCMessage *resp;
	char *id;

	cr.name = (char *)name;
	cr.n_volume_capabilities = 1;
	cr.volume_capabilities = caps;
	cr_assert(csi_call(plugin, CSI_RPC_CREATE_VOLUME, &cr.base, &resp, &res, &err) == 0, "%s", err.msg);
	id = strdup(((Csi__V1__CreateVolumeResponse *)resp)->volume->volume_id);
	protobuf_c_message_free_unpacked(resp, NULL);
	return id;
}

/* The spec's idempotency rules, as the plugin must follow them (and nodefs
 * must not rely on their absence): a repeat with the same arguments is OK;
 * with other parameters (CreateVolume) or another volume_capability or
 * readonly flag (ControllerPublish, NodeStage, NodePublish) it is
 * ALREADY_EXISTS, as is NodeStage at a second staging path; NodePublish at
 * a second target of a volume that is not MULTI_NODE is FAILED_PRECONDITION,
 * and so is DeleteVolume of a volume still ControllerPublished. None of them
 * is retried. */
Test(csi, idempotency_follows_the_spec)
{
	struct nerr err = { 0 };
	struct csi_result res;
	Csi__V1__VolumeCapability cap, xfs, multi;
	Csi__V1__VolumeCapability__MountVolume mnt, xfs_mnt, multi_mnt;
	Csi__V1__VolumeCapability__AccessMode mode, xfs_mode, multi_mode;
	Csi__V1__VolumeCapability *caps[1] = { mount_cap(&cap, &mnt, &mode) };
	char staging[PATH_MAX + 64], staging2[PATH_MAX + 64], target[PATH_MAX + 64],
		target2[PATH_MAX + 64], file[PATH_MAX + 128];

	/* The same access mode with another fs_type; and a MULTI_NODE one. */
	mount_cap(&xfs, &xfs_mnt, &xfs_mode);
	xfs_mnt.fs_type = "xfs";
	mount_cap(&multi, &multi_mnt, &multi_mode);
	multi_mode.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY;
	plugin_start(NULL);
	client_start(10, 3, 10000);
	char *id = create_volume("idem", caps);

	/* CreateVolume of the same name with other parameters. */
	Csi__V1__CreateVolumeRequest cr = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__CreateVolumeRequest__ParametersEntry kv = CSI__V1__CREATE_VOLUME_REQUEST__PARAMETERS_ENTRY__INIT;
	Csi__V1__CreateVolumeRequest__ParametersEntry *kvs[1] = { &kv };
	kv.key = "tier";
	kv.value = "slow";
	cr.name = "idem";
	cr.n_volume_capabilities = 1;
	cr.volume_capabilities = caps;
	cr.n_parameters = 1;
	cr.parameters = kvs;
	expect_refused(CSI_RPC_CREATE_VOLUME, &cr.base, EEXIST, GRPC_ALREADY_EXISTS, "other parameters");

	/* ControllerPublishVolume. */
	Csi__V1__ControllerPublishVolumeRequest cp = CSI__V1__CONTROLLER_PUBLISH_VOLUME_REQUEST__INIT;
	cp.volume_id = id;
	cp.node_id = "node-1";
	cp.volume_capability = &cap;
	cr_assert(csi_call(plugin, CSI_RPC_CONTROLLER_PUBLISH_VOLUME, &cp.base, NULL, &res, &err) == 0, "%s", err.msg);
	cr_assert(csi_call(plugin, CSI_RPC_CONTROLLER_PUBLISH_VOLUME, &cp.base, NULL, &res, &err) == 0, "%s", err.msg);
	cp.readonly = 1;
	expect_refused(CSI_RPC_CONTROLLER_PUBLISH_VOLUME, &cp.base, EEXIST, GRPC_ALREADY_EXISTS, "incompatible");
	cp.readonly = 0;
	cp.volume_capability = &xfs;
	expect_refused(CSI_RPC_CONTROLLER_PUBLISH_VOLUME, &cp.base, EEXIST, GRPC_ALREADY_EXISTS, "incompatible");
	cp.volume_capability = &cap;

	/* DeleteVolume of a volume still ControllerPublished. */
	Csi__V1__DeleteVolumeRequest dv = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
	dv.volume_id = id;
	expect_refused(CSI_RPC_DELETE_VOLUME, &dv.base, EBUSY, GRPC_FAILED_PRECONDITION, "node-1");

	/* NodeStageVolume: same path and capability OK; another capability or
	 * a second staging path ALREADY_EXISTS, and nothing is mounted there. */
	snprintf(staging, sizeof(staging), "%s/staging/idem", dir);
	snprintf(staging2, sizeof(staging2), "%s/staging/idem2", dir);
	Csi__V1__NodeStageVolumeRequest ns = CSI__V1__NODE_STAGE_VOLUME_REQUEST__INIT;
	ns.volume_id = id;
	ns.staging_target_path = staging;
	ns.volume_capability = &cap;
	cr_assert(csi_call(plugin, CSI_RPC_NODE_STAGE_VOLUME, &ns.base, NULL, &res, &err) == 0, "%s", err.msg);
	cr_assert(csi_call(plugin, CSI_RPC_NODE_STAGE_VOLUME, &ns.base, NULL, &res, &err) == 0, "%s", err.msg);
	ns.volume_capability = &xfs;
	expect_refused(CSI_RPC_NODE_STAGE_VOLUME, &ns.base, EEXIST, GRPC_ALREADY_EXISTS, "incompatible");
	ns.volume_capability = &cap;
	ns.staging_target_path = staging2;
	expect_refused(CSI_RPC_NODE_STAGE_VOLUME, &ns.base, EEXIST, GRPC_ALREADY_EXISTS, "already staged");
	cr_assert(!is_mountpoint(staging2));
	cr_assert(is_mountpoint(staging));

	/* NodePublishVolume read-only: a repeat is OK; read-write or another
	 * capability at the same target ALREADY_EXISTS; a second target of this
	 * SINGLE_NODE_WRITER volume FAILED_PRECONDITION. */
	snprintf(target, sizeof(target), "%s/mnt/idem", dir);
	snprintf(target2, sizeof(target2), "%s/mnt/idem2", dir);
	Csi__V1__NodePublishVolumeRequest np = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	np.volume_id = id;
	np.staging_target_path = staging;
	np.target_path = target;
	np.volume_capability = &cap;
	np.readonly = 1;
	cr_assert(csi_call(plugin, CSI_RPC_NODE_PUBLISH_VOLUME, &np.base, NULL, &res, &err) == 0, "%s", err.msg);
	snprintf(file, sizeof(file), "%s/nope", target);
	cr_assert(open(file, O_CREAT | O_WRONLY, 0644) < 0 && errno == EROFS);
	cr_assert(csi_call(plugin, CSI_RPC_NODE_PUBLISH_VOLUME, &np.base, NULL, &res, &err) == 0, "%s", err.msg);
	np.readonly = 0;
	expect_refused(CSI_RPC_NODE_PUBLISH_VOLUME, &np.base, EEXIST, GRPC_ALREADY_EXISTS, "incompatible");
	np.readonly = 1;
	np.volume_capability = &xfs;
	expect_refused(CSI_RPC_NODE_PUBLISH_VOLUME, &np.base, EEXIST, GRPC_ALREADY_EXISTS, "incompatible");
	np.volume_capability = &cap;
	np.target_path = target2;
	expect_refused(CSI_RPC_NODE_PUBLISH_VOLUME, &np.base, EBUSY, GRPC_FAILED_PRECONDITION, "MULTI_NODE");
	cr_assert(!is_mountpoint(target2));
	/* Still read-only: the refused calls changed nothing. */
	cr_assert(open(file, O_CREAT | O_WRONLY, 0644) < 0 && errno == EROFS);

	/* Walk down; DeleteVolume waits for ControllerUnpublish. */
	Csi__V1__NodeUnpublishVolumeRequest nu = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
	nu.volume_id = id;
	nu.target_path = target;
	cr_assert(csi_call(plugin, CSI_RPC_NODE_UNPUBLISH_VOLUME, &nu.base, NULL, &res, &err) == 0, "%s", err.msg);
	Csi__V1__NodeUnstageVolumeRequest nus = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;
	nus.volume_id = id;
	nus.staging_target_path = staging;
	cr_assert(csi_call(plugin, CSI_RPC_NODE_UNSTAGE_VOLUME, &nus.base, NULL, &res, &err) == 0, "%s", err.msg);
	expect_refused(CSI_RPC_DELETE_VOLUME, &dv.base, EBUSY, GRPC_FAILED_PRECONDITION, "node-1");
	/* Unstaged and unpublished: the other arguments are welcome again. */
	ns.volume_capability = &xfs;
	ns.staging_target_path = staging2;
	cr_assert(csi_call(plugin, CSI_RPC_NODE_STAGE_VOLUME, &ns.base, NULL, &res, &err) == 0, "%s", err.msg);
	nus.staging_target_path = staging2;
	cr_assert(csi_call(plugin, CSI_RPC_NODE_UNSTAGE_VOLUME, &nus.base, NULL, &res, &err) == 0, "%s", err.msg);
	Csi__V1__ControllerUnpublishVolumeRequest cu = CSI__V1__CONTROLLER_UNPUBLISH_VOLUME_REQUEST__INIT;
	cu.volume_id = id;
	cu.node_id = "node-1";
	cr_assert(csi_call(plugin, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME, &cu.base, NULL, &res, &err) == 0, "%s", err.msg);
	cp.readonly = 1;
	cr_assert(csi_call(plugin, CSI_RPC_CONTROLLER_PUBLISH_VOLUME, &cp.base, NULL, &res, &err) == 0, "%s", err.msg);
	cr_assert(csi_call(plugin, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME, &cu.base, NULL, &res, &err) == 0, "%s", err.msg);
	cr_assert(csi_call(plugin, CSI_RPC_DELETE_VOLUME, &dv.base, NULL, &res, &err) == 0, "%s", err.msg);
	free(id);

	/* A MULTI_NODE_READER_ONLY volume may be published at two targets. */
	Csi__V1__VolumeCapability *mcaps[1] = { &multi };
	id = create_volume("shared", mcaps);
	snprintf(staging, sizeof(staging), "%s/staging/shared", dir);
	ns.volume_id = id;
	ns.staging_target_path = staging;
	ns.volume_capability = &multi;
	cr_assert(csi_call(plugin, CSI_RPC_NODE_STAGE_VOLUME, &ns.base, NULL, &res, &err) == 0, "%s", err.msg);
	np.volume_id = id;
	np.staging_target_path = staging;
	np.volume_capability = &multi;
	np.readonly = 1;
	np.target_path = target;
	cr_assert(csi_call(plugin, CSI_RPC_NODE_PUBLISH_VOLUME, &np.base, NULL, &res, &err) == 0, "%s", err.msg);
	np.target_path = target2;
	cr_assert(csi_call(plugin, CSI_RPC_NODE_PUBLISH_VOLUME, &np.base, NULL, &res, &err) == 0, "%s", err.msg);
	cr_assert(is_mountpoint(target) && is_mountpoint(target2));
	/* DeleteVolume of a published volume: FAILED_PRECONDITION too. */
	dv.volume_id = id;
	expect_refused(CSI_RPC_DELETE_VOLUME, &dv.base, EBUSY, GRPC_FAILED_PRECONDITION, "in use");
	free(id);

	struct csi_metrics m;
	csi_plugin_metrics(plugin, &m);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_PUBLISH_VOLUME].errors[GRPC_ALREADY_EXISTS], 2);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_PUBLISH_VOLUME].errors[GRPC_FAILED_PRECONDITION], 1);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_STAGE_VOLUME].errors[GRPC_ALREADY_EXISTS], 2);
	cr_assert_eq(m.rpc[CSI_RPC_CONTROLLER_PUBLISH_VOLUME].errors[GRPC_ALREADY_EXISTS], 2);
	cr_assert_eq(m.rpc[CSI_RPC_DELETE_VOLUME].errors[GRPC_FAILED_PRECONDITION], 3);
}

Test(csi, state_survives_plugin_restart)
{
	struct nerr err = { 0 };
	struct csi_result res;
	ProtobufCMessage *resp;
	Csi__V1__VolumeCapability cap;
	Csi__V1__VolumeCapability__MountVolume mnt;
	Csi__V1__VolumeCapability__AccessMode mode;
	Csi__V1__VolumeCapability *caps[1] = { mount_cap(&cap, &mnt, &mode) };

	plugin_start(NULL);
	client_start(10, 5, 5000);
	Csi__V1__CreateVolumeRequest cr = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	cr.name = "keep";
	cr.n_volume_capabilities = 1;
	cr.volume_capabilities = caps;
	cr_assert(csi_call(plugin, CSI_RPC_CREATE_VOLUME, &cr.base, NULL, &res, &err) == 0, "%s", err.msg);
	plugin_kill(SIGTERM);
	plugin_start(NULL);
	/* The client reconnects by itself (retry on UNAVAILABLE). */
	Csi__V1__ListVolumesRequest lr = CSI__V1__LIST_VOLUMES_REQUEST__INIT;
	cr_assert(csi_call(plugin, CSI_RPC_LIST_VOLUMES, &lr.base, &resp, &res, &err) == 0, "%s", err.msg);
	Csi__V1__ListVolumesResponse *lv = (void *)resp;
	cr_assert_eq(lv->n_entries, 1);
	cr_assert_eq(lv->entries[0]->volume->capacity_bytes, 1 << 30);
	protobuf_c_message_free_unpacked(resp, NULL);
}
