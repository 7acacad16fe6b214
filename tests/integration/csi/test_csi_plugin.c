/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The CSI client against a real gRPC plugin: tests/fixtures/csi/plugin.py on
 * Debian's python3-grpcio, started on a temporary unix socket per test. Every
 * RPC runs for real (bind mounts included: root), plus the spec's
 * idempotency rules, deadlines, retries, UNIMPLEMENTED, a plugin killed
 * mid-call and restarted, a connection the plugin drops while it lives on,
 * many concurrent calls and 100 in flight at once on one connection, and
 * shutdown with calls pending. Each test kills its plugin, unmounts and
 * removes its directory, even when it fails.
 * Exits 77 without root, python3-grpcio or grpc_python_plugin.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "../test_time.h"
#include "csi.h"
#include "loop.h"

static char dir[PATH_MAX], sock[PATH_MAX + 16], base[PATH_MAX + 16], endpoint[PATH_MAX + 32];
static pid_t plugin_pid = -1;
static struct loop *loop;
static pthread_t loop_thread;
static struct csi_plugin *plugin;

static const char *plugin_py(void)
{
	static char path[PATH_MAX];
	const char *src = getenv("NODEFS_SRC");

	snprintf(path, sizeof(path), "%s/tests/fixtures/csi/plugin.py", src ? src : ".");
	return path;
}

/* Start the plugin with extra flags (NULL-terminated); wait for its socket. */
static void plugin_start(const char *const *flags)
{
	const char *argv[32] = { "/usr/bin/python3", plugin_py(), "--endpoint", endpoint,
				 "--base", base };
	int n = 6;

	for (; flags && *flags && n < 30; flags++)
		argv[n++] = *flags;
	argv[n] = NULL;
	unlink(sock);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		/* Die with the test, whatever happens to it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		char proto[PATH_MAX];
		const char *src = getenv("NODEFS_SRC");
		snprintf(proto, sizeof(proto), "CSI_PROTO=%s/csi/csi.proto", src ? src : ".");
		putenv(proto);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	plugin_pid = pid;
	/* The socket file exists from bind(); wait until it accepts. */
	for (int i = 0; i < 200; i++) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
		int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		close(fd);
		if (r == 0)
			return;
		usleep(50000);
	}
	cr_assert_fail("plugin did not listen on %s", sock);
}

static void plugin_kill(int sig)
{
	if (plugin_pid <= 0)
		return;
	kill(plugin_pid, sig);
	for (int i = 0; i < 100; i++) {
		if (waitpid(plugin_pid, NULL, WNOHANG) == plugin_pid) {
			plugin_pid = -1;
			return;
		}
		usleep(20000);
	}
	kill(plugin_pid, SIGKILL);
	waitpid(plugin_pid, NULL, 0);
	plugin_pid = -1;
}

static void *loop_main(void *arg)
{
	loop_run(arg);
	return NULL;
}

static void client_start(uint64_t backoff_ms, unsigned attempts, uint64_t timeout_ms)
{
	struct csi_retry retry = { .backoff_ms = backoff_ms, .max_ms = 200, .max_attempts = attempts };
	struct nerr err = { 0 };

	cr_assert(csi_plugin_new(loop, "hostpath", endpoint, &retry, timeout_ms, &plugin, &err) == 0,
		  "%s", err.msg);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/nodefs-csi-XXXXXX");
	cr_assert(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/csi.sock", dir);
	snprintf(base, sizeof(base), "%s/base", dir);
	snprintf(endpoint, sizeof(endpoint), "unix://%s", sock);
	cr_assert(loop_new(&loop) == 0);
	cr_assert(pthread_create(&loop_thread, NULL, loop_main, loop) == 0);
}

/* Unmount whatever the plugin left under dir, deepest first. */
static void unmount_under(const char *d)
{
	for (int pass = 0; pass < 8; pass++) {
		FILE *f = fopen("/proc/self/mountinfo", "r");
		char line[4096], found[PATH_MAX] = "";

		if (!f)
			return;
		while (fgets(line, sizeof(line), f)) {
			char mp[PATH_MAX];

			if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) == 1
			    && strncmp(mp, d, strlen(d)) == 0 && strlen(mp) > strlen(found))
				snprintf(found, sizeof(found), "%s", mp);
		}
		fclose(f);
		if (!found[0])
			return;
		umount2(found, MNT_DETACH);
	}
}

static void teardown(void)
{
	csi_plugin_free(plugin);
	plugin = NULL;
	loop_stop(loop);
	pthread_join(loop_thread, NULL);
	loop_free(loop);
	plugin_kill(SIGTERM);
	unmount_under(dir);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	(void)!system(cmd);
}

TestSuite(csi, .init = setup, .fini = teardown, .timeout = 90);

static bool is_mountpoint(const char *path)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[4096], mp[PATH_MAX];
	bool found = false;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) == 1 && strcmp(mp, path) == 0)
			found = true;
	if (f)
		fclose(f);
	return found;
}

static Csi__V1__VolumeCapability *mount_cap(Csi__V1__VolumeCapability *cap,
					    Csi__V1__VolumeCapability__MountVolume *mnt,
					    Csi__V1__VolumeCapability__AccessMode *mode)
{
	*cap = (Csi__V1__VolumeCapability)CSI__V1__VOLUME_CAPABILITY__INIT;
	*mnt = (Csi__V1__VolumeCapability__MountVolume)CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	*mode = (Csi__V1__VolumeCapability__AccessMode)CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
	mode->mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	cap->mount = mnt;
	cap->access_mode = mode;
	return cap;
}

static int node_get_info(struct csi_result *res, struct nerr *err, char **ret_node)
{
	Csi__V1__NodeGetInfoRequest req = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
	ProtobufCMessage *resp;
	int r = csi_call(plugin, CSI_RPC_NODE_GET_INFO, &req.base, &resp, res, err);

	if (r < 0)
		return r;
	if (ret_node)
		*ret_node = strdup(((Csi__V1__NodeGetInfoResponse *)resp)->node_id);
	protobuf_c_message_free_unpacked(resp, NULL);
	return 0;
}

static void wait_health(enum csi_health want, int ms)
{
	struct csi_health_info h;

	for (int i = 0; i < SCALED(ms) / 20; i++) {
		csi_plugin_health(plugin, &h);
		if (h.health == want)
			return;
		usleep(20000);
	}
	csi_plugin_health(plugin, &h);
	cr_assert_eq(h.health, want, "health %s (%s), wanted %s", csi_health_to_string(h.health),
		     h.reason, csi_health_to_string(want));
}

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

struct bg_call {
	int r;
	struct csi_result res;
	struct nerr err;
	unsigned max_attempts;
};

static void *bg_node_get_info(void *arg)
{
	struct bg_call *b = arg;
	Csi__V1__NodeGetInfoRequest req = CSI__V1__NODE_GET_INFO_REQUEST__INIT;

	b->r = csi_call_ex(plugin, CSI_RPC_NODE_GET_INFO, &req.base, 0, b->max_attempts, NULL, &b->res, &b->err);
	return NULL;
}

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
	cr_assert(node_get_info(&res, &err, NULL) == 0, "%s", err.msg);
	cr_assert_eq(res.attempts, 1);

	csi_plugin_metrics(plugin, &m);
	cr_assert_eq(m.connects, 3);
	cr_assert_eq(m.disconnects, 2);
	cr_assert_eq(m.rpc[CSI_RPC_NODE_GET_INFO].errors[GRPC_UNAVAILABLE], 2);
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

int main(int argc, char **argv)
{
	/* what the test plugin needs; a skip says why, on stdout like the
	 * Python harness (scripts/test.sh reads "Debian package NAME") */
	const char *why = NULL;
	if (geteuid() != 0)
		why = "needs root (bind mounts)";
	else if (access("/usr/bin/grpc_python_plugin", X_OK) != 0)
		why = "/usr/bin/grpc_python_plugin missing (Debian package protobuf-compiler-grpc)";
	else if (access("/usr/bin/protoc", X_OK) != 0)
		why = "/usr/bin/protoc missing (Debian package protobuf-compiler)";
	else if (system("/usr/bin/python3 -c 'import grpc' 2>/dev/null") != 0)
		why = "python3 module grpc missing (Debian package python3-grpcio)";
	if (why) {
		printf("SKIP: %s\n", why);
		return 77;
	}
	struct criterion_test_set *tests = criterion_initialize();
	int result = 0;
	if (criterion_handle_args(argc, argv, true))
		result = !criterion_run_all_tests(tests);
	criterion_finalize(tests);
	return result;
}
