/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * csi_test: the fixture the CSI client's tests share (test_csi_*.c, one
 * program, test_csi_plugin): a real gRPC plugin, tests/fixtures/csi/plugin.py
 * on Debian's python3-grpcio, started by each test on a temporary unix socket
 * with the flags it needs, and a client loop. Each test kills its plugin,
 * unmounts and removes its directory, even when it fails.
 * main() exits 77 without root, python3-grpcio or grpc_python_plugin.
 * Knows no test.
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
#include "csi_test.h"

char dir[PATH_MAX], sock[PATH_MAX + 16], base[PATH_MAX + 16], endpoint[PATH_MAX + 32];
pid_t plugin_pid = -1;
struct loop *loop;
static pthread_t loop_thread;
struct csi_plugin *plugin;

static const char *plugin_py(void)
{
	static char path[PATH_MAX];
	const char *src = getenv("NODEFS_SRC");

	snprintf(path, sizeof(path), "%s/tests/fixtures/csi/plugin.py", src ? src : ".");
	return path;
}

/* Start the plugin with extra flags (NULL-terminated); wait for its socket. */
void plugin_start(const char *const *flags)
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

void plugin_kill(int sig)
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

void client_start(uint64_t backoff_ms, unsigned attempts, uint64_t timeout_ms)
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

bool is_mountpoint(const char *path)
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

Csi__V1__VolumeCapability *mount_cap(Csi__V1__VolumeCapability *cap,
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

int node_get_info(struct csi_result *res, struct nerr *err, char **ret_node)
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

void wait_health(enum csi_health want, int ms)
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

void *bg_node_get_info(void *arg)
{
	struct bg_call *b = arg;
	Csi__V1__NodeGetInfoRequest req = CSI__V1__NODE_GET_INFO_REQUEST__INIT;

	b->r = csi_call_ex(plugin, CSI_RPC_NODE_GET_INFO, &req.base, 0, b->max_attempts, NULL, &b->res, &b->err);
	return NULL;
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
