/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_volumes: one volume's whole life, timed two ways against the same
 * CSI plugin, so run.sh can compare them in one run.
 *
 *   bench_volumes csi SOCKET TARGET_DIR STAGING_DIR CYCLES
 *	the CSI call sequence nodefs makes for create, publish, unpublish,
 *	destroy (CreateVolume, ControllerPublishVolume, NodeStageVolume,
 *	NodePublishVolume, NodeUnpublishVolume, NodeUnstageVolume,
 *	ControllerUnpublishVolume, DeleteVolume; the controller and stage
 *	calls only where the plugin's capabilities have them, as nodefs
 *	does), made directly with nodefs's
 *	CSI client library (csi_call on one connection), with the staging and
 *	target directories made as nodefs makes them.
 *   bench_volumes fs MOUNTPOINT TARGET_DIR CYCLES
 *	the same life through a mounted nodefs: "create" written to
 *	volumes/ctl, then "publish TARGET", "unpublish", "destroy" to the
 *	volume's ctl, each an open + write + close as `echo > ctl` does.
 *
 * and the two floors under the difference, what no implementation of the
 * interface can skip:
 *
 *   bench_volumes blank MOUNTPOINT CYCLES
 *	four ctl writes of a blank line to volumes/ctl per cycle (open, write,
 *	close: the FUSE round trips of the cycle's four commands, with no
 *	command behind them).
 *   bench_volumes put STATE_DIR COUNT
 *	COUNT checkpoints of a volume record as nodefs writes them (store.c:
 *	temporary file, fsync, rename, fsync of the directory); per record.
 *
 * Each prints one line: "median_us p90_us cycles". And what a read of an
 * unchanged file costs, against its two baselines:
 *
 *   bench_volumes reads MOUNTPOINT WORK_DIR COUNT {direct_io|keep_cache}:FILE...
 *	for each FILE (relative to MOUNTPOINT): the FUSE requests nodefs
 *	serves per read (its metrics, over 1,000 reads), then COUNT reads
 *	(open, one read of up to 4 KiB, close) of it, of the FUSE floor
 *	(bench/fuse-floor.h, mounted on WORK_DIR/floor) serving the same
 *	bytes with the flags given (those nodefs opens FILE with), and of a
 *	copy at WORK_DIR/copy (WORK_DIR on tmpfs), interleaved in blocks of
 *	10; prints the medians and the ratios to tmpfs and to the floor.
 *
 * It knows the plugin only through csi.h and the mount only through its
 * files.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "csi.h"
#include "fuse-floor.h"
#include "jw.h"
#include "loop.h"
#include "nerr.h"
#include "sbuf.h"
#include "store.h"

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void report(double *lat, size_t n)
{
	qsort(lat, n, sizeof(double), cmp);
	printf("%.1f %.1f %zu\n", lat[n / 2], lat[n * 9 / 10], n);
}

/* ---- direct CSI ---- */

static struct csi_plugin *plugin;
static char node_id[256];

static void *loop_main(void *l)
{
	loop_run(l);
	return NULL;
}

static int call(enum csi_rpc rpc, ProtobufCMessage *req, ProtobufCMessage **resp)
{
	ProtobufCMessage *r0 = NULL;
	struct nerr err = { 0 };
	int r = csi_call(plugin, rpc, req, resp ? resp : &r0, NULL, &err);

	if (r < 0) {
		fprintf(stderr, "%s\n", err.msg);
		exit(1);
	}
	if (!resp)
		protobuf_c_message_free_unpacked(r0, NULL);
	return r;
}

static void capability(Csi__V1__VolumeCapability *cap, Csi__V1__VolumeCapability__MountVolume *mnt,
		       Csi__V1__VolumeCapability__AccessMode *am)
{
	*cap = (Csi__V1__VolumeCapability)CSI__V1__VOLUME_CAPABILITY__INIT;
	*mnt = (Csi__V1__VolumeCapability__MountVolume)CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	*am = (Csi__V1__VolumeCapability__AccessMode)CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
	am->mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	mnt->fs_type = (char *)"";
	cap->access_mode = am;
	cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	cap->mount = mnt;
}

static bool has_ctrl_publish, has_stage;

static void csi_cycle(const char *tdir, const char *sdir, int i)
{
	Csi__V1__VolumeCapability cap, *caps[1] = { &cap };
	Csi__V1__VolumeCapability__MountVolume mnt;
	Csi__V1__VolumeCapability__AccessMode am;
	char name[64], target[512], staging[512];
	char *id;

	capability(&cap, &mnt, &am);
	snprintf(name, sizeof(name), "bench-csi-%d-%d", (int)getpid(), i);

	Csi__V1__CreateVolumeRequest cr = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__CapacityRange range = CSI__V1__CAPACITY_RANGE__INIT;
	Csi__V1__CreateVolumeResponse *cresp;
	range.required_bytes = 1 << 20;
	cr.name = name;
	cr.capacity_range = &range;
	cr.n_volume_capabilities = 1;
	cr.volume_capabilities = caps;
	call(CSI_RPC_CREATE_VOLUME, &cr.base, (ProtobufCMessage **)&cresp);
	id = strdup(cresp->volume->volume_id);
	protobuf_c_message_free_unpacked(&cresp->base, NULL);

	Csi__V1__ControllerPublishVolumeRequest cp = CSI__V1__CONTROLLER_PUBLISH_VOLUME_REQUEST__INIT;
	cp.volume_id = id;
	cp.node_id = node_id;
	cp.volume_capability = &cap;
	if (has_ctrl_publish)
		call(CSI_RPC_CONTROLLER_PUBLISH_VOLUME, &cp.base, NULL);

	snprintf(staging, sizeof(staging), "%s/%s", sdir, id);
	mkdir(staging, 0750);
	Csi__V1__NodeStageVolumeRequest ns = CSI__V1__NODE_STAGE_VOLUME_REQUEST__INIT;
	ns.volume_id = id;
	ns.staging_target_path = staging;
	ns.volume_capability = &cap;
	if (has_stage)
		call(CSI_RPC_NODE_STAGE_VOLUME, &ns.base, NULL);

	snprintf(target, sizeof(target), "%s/b%d", tdir, i);
	Csi__V1__NodePublishVolumeRequest np = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	np.volume_id = id;
	np.staging_target_path = has_stage ? staging : NULL;
	np.target_path = target;
	np.volume_capability = &cap;
	call(CSI_RPC_NODE_PUBLISH_VOLUME, &np.base, NULL);

	Csi__V1__NodeUnpublishVolumeRequest nu = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
	nu.volume_id = id;
	nu.target_path = target;
	call(CSI_RPC_NODE_UNPUBLISH_VOLUME, &nu.base, NULL);

	Csi__V1__NodeUnstageVolumeRequest nus = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;
	nus.volume_id = id;
	nus.staging_target_path = staging;
	if (has_stage)
		call(CSI_RPC_NODE_UNSTAGE_VOLUME, &nus.base, NULL);
	rmdir(staging);

	Csi__V1__ControllerUnpublishVolumeRequest cu = CSI__V1__CONTROLLER_UNPUBLISH_VOLUME_REQUEST__INIT;
	cu.volume_id = id;
	cu.node_id = node_id;
	if (has_ctrl_publish)
		call(CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME, &cu.base, NULL);

	Csi__V1__DeleteVolumeRequest dv = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
	dv.volume_id = id;
	call(CSI_RPC_DELETE_VOLUME, &dv.base, NULL);
	free(id);
}

static int run_csi(const char *sock, const char *tdir, const char *sdir, int cycles)
{
	struct loop *loop;
	pthread_t lt;
	char endpoint[512];
	struct nerr err = { 0 };

	snprintf(endpoint, sizeof(endpoint), "unix://%s", sock);
	if (loop_new(&loop) < 0 || pthread_create(&lt, NULL, loop_main, loop) != 0)
		return 1;
	if (csi_plugin_new(loop, "bench", endpoint, NULL, 30000, &plugin, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	csi_plugin_set_probe_interval(plugin, 0);
	Csi__V1__NodeGetInfoRequest ni = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
	ProtobufCMessage *resp;
	call(CSI_RPC_NODE_GET_INFO, &ni.base, &resp);
	snprintf(node_id, sizeof(node_id), "%s", ((Csi__V1__NodeGetInfoResponse *)resp)->node_id);
	protobuf_c_message_free_unpacked(resp, NULL);
	/* the calls nodefs makes depend on what the plugin says it has */
	Csi__V1__ControllerGetCapabilitiesRequest cg = CSI__V1__CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
	call(CSI_RPC_CONTROLLER_GET_CAPABILITIES, &cg.base, &resp);
	{
		Csi__V1__ControllerGetCapabilitiesResponse *c = (void *)resp;

		for (size_t k = 0; k < c->n_capabilities; k++)
			if (c->capabilities[k]->rpc && c->capabilities[k]->rpc->type ==
			    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME)
				has_ctrl_publish = true;
	}
	protobuf_c_message_free_unpacked(resp, NULL);
	Csi__V1__NodeGetCapabilitiesRequest ng = CSI__V1__NODE_GET_CAPABILITIES_REQUEST__INIT;
	call(CSI_RPC_NODE_GET_CAPABILITIES, &ng.base, &resp);
	{
		Csi__V1__NodeGetCapabilitiesResponse *c = (void *)resp;

		for (size_t k = 0; k < c->n_capabilities; k++)
			if (c->capabilities[k]->rpc && c->capabilities[k]->rpc->type ==
			    CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME)
				has_stage = true;
	}
	protobuf_c_message_free_unpacked(resp, NULL);

	double *lat = calloc((size_t)cycles, sizeof(double));
	csi_cycle(tdir, sdir, -1);	/* warm-up */
	for (int i = 0; i < cycles; i++) {
		uint64_t t0 = loop_now_us();
		csi_cycle(tdir, sdir, i);
		lat[i] = (double)(loop_now_us() - t0);
	}
	report(lat, (size_t)cycles);
	free(lat);
	csi_plugin_free(plugin);
	loop_stop(loop);
	pthread_join(lt, NULL);
	loop_free(loop);
	return 0;
}

/* ---- through nodefs ---- */

static void ctl(const char *path, const char *line)
{
	int fd = open(path, O_WRONLY | O_TRUNC);
	ssize_t n;

	if (fd < 0) {
		fprintf(stderr, "open %s: %s\n", path, strerror(errno));
		exit(1);
	}
	n = write(fd, line, strlen(line));
	if (n != (ssize_t)strlen(line)) {
		fprintf(stderr, "%s <- %s: %s\n", path, line, n < 0 ? strerror(errno) : "short");
		exit(1);
	}
	close(fd);
}

static void fs_cycle(const char *mnt, const char *tdir, int i)
{
	char path[512], line[600];

	snprintf(path, sizeof(path), "%s/volumes/ctl", mnt);
	snprintf(line, sizeof(line), "create bench-%d-%d size=1M\n", (int)getpid(), i + 1);
	ctl(path, line);
	snprintf(path, sizeof(path), "%s/volumes/bench-%d-%d/ctl", mnt, (int)getpid(), i + 1);
	snprintf(line, sizeof(line), "publish %s/f%d\n", tdir, i + 1);
	ctl(path, line);
	ctl(path, "unpublish\n");
	ctl(path, "destroy\n");
}

static int run_fs(const char *mnt, const char *tdir, int cycles)
{
	double *lat = calloc((size_t)cycles, sizeof(double));

	fs_cycle(mnt, tdir, -1);	/* warm-up */
	for (int i = 0; i < cycles; i++) {
		uint64_t t0 = loop_now_us();
		fs_cycle(mnt, tdir, i);
		lat[i] = (double)(loop_now_us() - t0);
	}
	report(lat, (size_t)cycles);
	free(lat);
	return 0;
}

/* ---- floors ---- */

static int run_blank(const char *mnt, int cycles)
{
	double *lat = calloc((size_t)cycles, sizeof(double));
	char path[512];

	snprintf(path, sizeof(path), "%s/volumes/ctl", mnt);
	for (int i = -1; i < cycles; i++) {
		uint64_t t0 = loop_now_us();
		for (int k = 0; k < 4; k++)
			ctl(path, "\n");
		if (i >= 0)
			lat[i] = (double)(loop_now_us() - t0);
	}
	report(lat, (size_t)cycles);
	free(lat);
	return 0;
}

/* A published volume's record, with the sizes a hostpath volume has. */
static void volume_record(struct jw *w, int i)
{
	static char *const vctx[] = {
		"path=/var/lib/csi-hostpath/volumes/vol-3f2a9c1e-1234-5678-9abc-def012345678",
		"name=nodefs-bench-1-000123-deadbeef", NULL,
	};
	char name[32];

	snprintf(name, sizeof(name), "bench-%d", i);
	jw_kstr(w, "name", name);
	jw_kstr(w, "plugin", "hostpath");
	jw_kstrv(w, "mount_flags", NULL);
	jw_kstrv(w, "parameters", NULL);
	jw_kint(w, "size_requested", 1 << 20);
	jw_kbool(w, "imported", false);
	jw_kstr(w, "state", "NODE_PUBLISH");
	jw_kstr(w, "csi_name", "nodefs-bench-1-000123-deadbeef");
	jw_kstr(w, "id", "vol-3f2a9c1e-1234-5678-9abc-def012345678");
	jw_kint(w, "capacity", 1 << 20);
	jw_kstrv(w, "volume_context", vctx);
	jw_kstrv(w, "publish_context", NULL);
	jw_kbool(w, "controller_published", true);
	jw_kbool(w, "staged", true);
	jw_kstr(w, "target", "/mnt/volumes/bench/target");
	jw_kbool(w, "readonly", false);
	jw_kstr(w, "staging_path", "/var/lib/nodefs/staging/vol-3f2a9c1e-1234-5678-9abc-def012345678");
}

static int run_put(const char *state_dir, int count)
{
	double *lat = calloc((size_t)count, sizeof(double));
	struct nerr err = { 0 };
	struct store *st;

	if (store_open(state_dir, &st, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	for (int i = -1; i < count; i++) {
		struct sbuf sb = SBUF_INIT(0);
		struct jw w;
		uint64_t t0 = loop_now_us();

		store_record_begin(&w, &sb);
		volume_record(&w, i & 7);
		if (store_put_record(st, "volumes", "bench", &w, STORE_DURABLE, &err) < 0) {
			fprintf(stderr, "%s\n", err.msg);
			return 1;
		}
		sbuf_free(&sb);
		if (i >= 0)
			lat[i] = (double)(loop_now_us() - t0);
	}
	store_close(st);
	report(lat, (size_t)count);
	free(lat);
	return 0;
}

/* ---- reads: nodefs, the FUSE floor, tmpfs ---- */

/* The read the goal speaks of: open, one read of up to 4 KiB, close. The
 * length read, or -errno. */
static ssize_t read_once(const char *path)
{
	char buf[4096];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf));
	if (n < 0)
		n = -errno;
	close(fd);
	return n;
}

/* The file's bytes as nodefs serves them now, up to FUSE_FLOOR_MAX. */
static ssize_t slurp(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	size_t len = 0;
	ssize_t n;

	if (fd < 0)
		return -errno;
	while (len < size && (n = read(fd, buf + len, size - len)) > 0)
		len += (size_t)n;
	close(fd);
	return (ssize_t)len;
}

static int put_file(const char *path, const char *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, buf, len);
	close(fd);
	return n == (ssize_t)len ? 0 : -EIO;
}

#define READ_OPS 5
static const char *const read_ops[READ_OPS] = { "open", "read", "release", "lookup", "getattr" };

/* The FUSE requests nodefs served per read of path, over 1,000 reads. */
static int print_requests(const char *mnt, const char *name, const char *path)
{
	unsigned long long c0[READ_OPS], c1[READ_OPS];
	int r = fuse_floor_requests(mnt, read_ops, READ_OPS, c0);

	for (int i = 0; r >= 0 && i < 1000; i++)
		if (read_once(path) < 0)
			r = -EIO;
	if (r >= 0)
		r = fuse_floor_requests(mnt, read_ops, READ_OPS, c1);
	if (r < 0) {
		fprintf(stderr, "bench_volumes: FUSE requests of %s: %s\n", name, strerror(-r));
		return r;
	}
	printf("  FUSE requests nodefs served per read of %s (1,000 reads; one read of"
	       " metrics between):", name);
	for (int i = 0; i < READ_OPS; i++)
		printf(" %s %.2f", read_ops[i], (double)(c1[i] - c0[i]) / 1000);
	printf("\n");
	return 0;
}

enum { R_NODEFS, R_FLOOR, R_TMPFS, R_TARGETS };

/* One file: COUNT reads of the nodefs file, of a floor serving its bytes
 * with the open flags nodefs gives it, and of a tmpfs copy, interleaved in
 * blocks of 10 so the noise of a shared machine falls on all three. */
static int read_file3(const char *mnt, const char *work, const char *spec, int count, double **t)
{
	static char bytes[FUSE_FLOOR_MAX];
	/* entry and attribute timeouts as nodefs's (nodefs.c) */
	struct fuse_floor_opts o = { .timeout = 60.0 };
	const char *rel = strchr(spec, ':') ? strchr(spec, ':') + 1 : "";
	struct fuse_floor *fl = NULL;
	char path[4096], copy[4096], fdir[4096];
	const char *paths[R_TARGETS];
	double med[R_TARGETS];
	ssize_t len;
	int r;

	if (strncmp(spec, "direct_io:", 10) == 0)
		o.keep_cache = false;
	else if (strncmp(spec, "keep_cache:", 11) == 0)
		o.keep_cache = true;
	else {
		fprintf(stderr, "bench_volumes: %s: not direct_io:FILE or keep_cache:FILE\n", spec);
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "%s/%s", mnt, rel);
	snprintf(copy, sizeof(copy), "%s/copy", work);
	snprintf(fdir, sizeof(fdir), "%s/floor", work);
	len = slurp(path, bytes, sizeof(bytes));
	if (len <= 0) {
		fprintf(stderr, "bench_volumes: %s: %s\n", path, len < 0 ? strerror((int)-len) : "empty");
		return -EIO;
	}
	r = put_file(copy, bytes, (size_t)len);
	if (r < 0) {
		fprintf(stderr, "bench_volumes: %s: %s\n", copy, strerror(-r));
		return r;
	}
	r = fuse_floor_start(fdir, bytes, (size_t)len, &o, &fl);
	if (r < 0) {
		fprintf(stderr, "bench_volumes: the FUSE floor on %s: %s\n", fdir, strerror(-r));
		goto out;
	}
	paths[R_NODEFS] = path;
	paths[R_FLOOR] = fuse_floor_file(fl);
	paths[R_TMPFS] = copy;
	r = print_requests(mnt, rel, path);
	if (r < 0)
		goto out;
	for (int i = -100; i < count; i += 10)	/* the first 100 warm up */
		for (int k = 0; k < R_TARGETS; k++)
			for (int j = i; j < i + 10; j++) {
				double t0 = bench_now_us();
				ssize_t n = read_once(paths[k]);

				if (n <= 0) {
					fprintf(stderr, "bench_volumes: reading %s: %s\n", paths[k],
						n < 0 ? strerror((int)-n) : "empty");
					r = -EIO;
					goto out;
				}
				if (j >= 0 && j < count)
					t[k][j] = bench_now_us() - t0;
			}
	for (int k = 0; k < R_TARGETS; k++)
		med[k] = bench_median(t[k], count);
	printf("  read %s: nodefs %.1f us, FUSE floor (%s) %.1f us, tmpfs %.1f us;"
	       " ratio %.1f to tmpfs (goal <= 2), %.2f to the floor\n",
	       rel, med[R_NODEFS], o.keep_cache ? "keep_cache" : "direct_io", med[R_FLOOR],
	       med[R_TMPFS], med[R_NODEFS] / med[R_TMPFS], med[R_NODEFS] / med[R_FLOOR]);
	fflush(stdout);
out:
	fuse_floor_stop(fl);
	unlink(copy);
	rmdir(fdir);
	return r;
}

static int run_reads(const char *mnt, const char *work, int count, char **specs, int n)
{
	double *t[R_TARGETS];
	int r = 0;

	/* the 10-read blocks are whole */
	count = (count + 9) / 10 * 10;
	for (int k = 0; k < R_TARGETS; k++)
		t[k] = calloc((size_t)count, sizeof(double));
	if (!t[R_NODEFS] || !t[R_FLOOR] || !t[R_TMPFS])
		r = -ENOMEM;
	printf("reads: open, one read of up to 4 KiB, close (the same for all three), median of"
	       " %d each, interleaved in blocks of 10 with the FUSE floor (a process of its own,"
	       " one thread, the same bytes, the open flags nodefs gives the file, noflush, 60 s"
	       " timeouts) and a tmpfs copy:\n", count);
	for (int i = 0; r >= 0 && i < n; i++)
		r = read_file3(mnt, work, specs[i], count, t);
	for (int k = 0; k < R_TARGETS; k++)
		free(t[k]);
	return r < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc >= 6 && strcmp(argv[1], "reads") == 0 && atoi(argv[4]) > 0)
		return run_reads(argv[2], argv[3], atoi(argv[4]), argv + 5, argc - 5);
	if (argc == 6 && strcmp(argv[1], "csi") == 0 && atoi(argv[5]) > 0)
		return run_csi(argv[2], argv[3], argv[4], atoi(argv[5]));
	if (argc == 5 && strcmp(argv[1], "fs") == 0 && atoi(argv[4]) > 0)
		return run_fs(argv[2], argv[3], atoi(argv[4]));
	if (argc == 4 && strcmp(argv[1], "blank") == 0 && atoi(argv[3]) > 0)
		return run_blank(argv[2], atoi(argv[3]));
	if (argc == 4 && strcmp(argv[1], "put") == 0 && atoi(argv[3]) > 0)
		return run_put(argv[2], atoi(argv[3]));
	fprintf(stderr, "usage: %s csi SOCKET TARGET_DIR STAGING_DIR CYCLES\n"
			"       %s fs MOUNTPOINT TARGET_DIR CYCLES\n"
			"       %s blank MOUNTPOINT CYCLES\n"
			"       %s put STATE_DIR COUNT\n"
			"       %s reads MOUNTPOINT WORK_DIR COUNT {direct_io|keep_cache}:FILE...\n",
		argv[0], argv[0], argv[0], argv[0], argv[0]);
	return 2;
}
