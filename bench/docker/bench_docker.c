/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_docker: a container running `true`, from nothing to removed, three
 * ways in one run, rounds interleaved so the noise of a shared machine falls
 * on all of them:
 *   nodefs  echo "run bN runtime=docker image=... cmd='true'" > containers/ctl,
 *           read containers/bN/wait (blocks until the exit), echo destroy;
 *   api     the same create/start/wait/remove Engine API sequence made
 *           in-process with libcurl on one kept-alive connection;
 *   cli     docker run --rm IMAGE true.
 * Then 10,000 reads of containers/NAME/stats of a running container, as a
 * program reads a file (open, read until EOF, close) and as cat does (an
 * fstat too), interleaved in blocks of 10 with the same reads of baselines
 * in the same run: a copy of the content on tmpfs, /proc/loadavg, and the
 * FUSE floor (a minimal low-level FUSE file system in a process of its own
 * serving the same bytes with direct_io, the same 1 s timeouts, one thread:
 * what any FUSE file costs on this machine). Also the FUSE requests per read
 * (from metrics/nodefs.prom) and as many rt_docker_ops.stats() calls.
 * Prints medians, ratios and the goals (run at most 1.1x the API sequence;
 * a stats read, open to close, under 20 us); exits 0 whatever the figures,
 * 1 when it could not measure.
 *
 * The engine: NODEFS_TEST_DOCKER_HOST, else a dockerd of its own from
 * tests/fixtures/dockerd.sh (stopped at the end). nodefs: NODEFS_BIN or
 * argv[2], mounted on a temporary directory and unmounted at the end.
 * Exits 77 without root, dockerd or nodefs.
 *
 * Usage: bench_docker [ROUNDS [NODEFS_BIN]]   (default 20; 0: stats only)
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "fuse-floor.h"
#include "nerr.h"
#include "runtime.h"
#include "sbuf.h"

#define IMAGE "nodefs-test/busybox:latest"

static char sock[256];
static char mnt[64], state[64], conf[96], own_dk[64], floor_mnt[64], tmpfs_copy[64];
static pid_t nodefs_pid;

/* --- the raw API sequence ------------------------------------------------- */

static size_t to_sbuf(char *p, size_t sz, size_t nm, void *ctx)
{
	return sbuf_add(ctx, p, sz * nm) < 0 ? 0 : sz * nm;
}

static long api(CURL *c, const char *method, const char *path, const char *body, struct sbuf *out)
{
	char url[512];
	long status = 0;
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");

	snprintf(url, sizeof(url), "http://docker/v1.41%s", path);
	sbuf_reset(out);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, sock);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, to_sbuf);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
	if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
	} else {
		curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	}
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(h);
	return status;
}

static int api_round(CURL *c)
{
	struct sbuf out = SBUF_INIT(1 << 20);
	char path[256], id[80];
	const char *p;
	int r = -1;

	if (api(c, "POST", "/containers/create", "{\"Image\":\"" IMAGE "\",\"Cmd\":[\"true\"]}", &out) != 201)
		goto out;
	p = out.buf ? strstr(out.buf, "\"Id\":\"") : NULL;
	if (!p || sscanf(p + 6, "%64[0-9a-f]", id) != 1)
		goto out;
	snprintf(path, sizeof(path), "/containers/%s/start", id);
	if (api(c, "POST", path, NULL, &out) != 204)
		goto out;
	snprintf(path, sizeof(path), "/containers/%s/wait", id);
	if (api(c, "POST", path, NULL, &out) != 200)
		goto out;
	snprintf(path, sizeof(path), "/containers/%s?force=1", id);
	if (api(c, "DELETE", path, NULL, &out) != 204)
		goto out;
	r = 0;
out:
	sbuf_free(&out);
	return r;
}

/* --- docker run --rm ------------------------------------------------------ */

static int cli_round(void)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);

		dup2(fd, 1);
		execlp("docker", "docker", "run", "--rm", IMAGE, "true", (char *)NULL);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* --- nodefs --------------------------------------------------------------- */

static int write_file(const char *path, const char *line)
{
	int fd = open(path, O_WRONLY | O_TRUNC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, line, strlen(line));
	close(fd);
	return n == (ssize_t)strlen(line) ? 0 : -1;
}

static int read_file(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return (int)n;
}

static int nodefs_round(int i)
{
	char line[256], path[256], buf[256];

	snprintf(line, sizeof(line), "run b%d runtime=docker image=" IMAGE " cmd='true'\n", i);
	snprintf(path, sizeof(path), "%s/containers/ctl", mnt);
	if (write_file(path, line) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/containers/b%d/wait", mnt, i);
	if (read_file(path, buf, sizeof(buf)) <= 0 || strncmp(buf, "exit_code=0", 11) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/containers/b%d/ctl", mnt, i);
	return write_file(path, "destroy\n");
}

static int start_nodefs(const char *bin)
{
	char path[128], buf[512];
	FILE *f;

	snprintf(mnt, sizeof(mnt), "/tmp/nodefs-bdk.%d/mnt", (int)getpid());
	snprintf(state, sizeof(state), "/tmp/nodefs-bdk.%d/state", (int)getpid());
	snprintf(conf, sizeof(conf), "/tmp/nodefs-bdk.%d/nodefs.conf", (int)getpid());
	snprintf(path, sizeof(path), "/tmp/nodefs-bdk.%d", (int)getpid());
	if (mkdir(path, 0700) < 0 || mkdir(mnt, 0755) < 0 || mkdir(state, 0700) < 0)
		return -1;
	f = fopen(conf, "w");
	if (!f)
		return -1;
	fprintf(f, "[nodefs]\nstate_dir = %s\n\n[runtime docker]\nendpoint = unix://%s\n", state, sock);
	fclose(f);
	nodefs_pid = fork();
	if (nodefs_pid == 0) {
		int fd = open("/dev/null", O_WRONLY);

		dup2(fd, 1);
		dup2(fd, 2);
		execl(bin, bin, "-f", "--config", conf, "--state-dir", state, mnt, (char *)NULL);
		_exit(127);
	}
	if (nodefs_pid < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/status", mnt);
	for (int i = 0; i < 200; i++) {
		if (read_file(path, buf, sizeof(buf)) > 0 && strstr(buf, "state: READY"))
			return 0;
		usleep(50000);
	}
	return -1;
}

static void stop_nodefs(void)
{
	char path[256];
	int st;

	if (nodefs_pid > 0) {
		kill(nodefs_pid, SIGTERM);
		waitpid(nodefs_pid, &st, 0);
	}
	/* if it died without unmounting (and the floor, if the bench did) */
	snprintf(path, sizeof(path), "umount -l %s %s 2>/dev/null; rm -rf /tmp/nodefs-bdk.%d", mnt,
		 floor_mnt, (int)getpid());
	if (mnt[0])
		system(path);
}

static int start_engine(void)
{
	const char *h = getenv("NODEFS_TEST_DOCKER_HOST");
	const char *src = getenv("NODEFS_SRC");
	char cmd[512], line[256];
	FILE *p;

	if (h && strncmp(h, "unix://", 7) == 0) {
		snprintf(sock, sizeof(sock), "%s", h + 7);
		return 0;
	}
	if (!src)
		src = ".";
	snprintf(own_dk, sizeof(own_dk), "/tmp/nodefs-bdk-dk.%d", (int)getpid());
	snprintf(cmd, sizeof(cmd), "%s/tests/fixtures/dockerd.sh start %s", src, own_dk);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p))
		if (strncmp(line, "export NODEFS_TEST_DOCKER_HOST=unix://", 38) == 0)
			snprintf(sock, sizeof(sock), "%.*s", (int)strcspn(line + 38, "\n"), line + 38);
	if (pclose(p) != 0 || !sock[0])
		return -1;
	return 0;
}

static void stop_engine(void)
{
	const char *src = getenv("NODEFS_SRC");
	char cmd[512];

	if (!own_dk[0])
		return;
	snprintf(cmd, sizeof(cmd), "%s/tests/fixtures/dockerd.sh stop %s", src ? src : ".", own_dk);
	system(cmd);
}

/* --- stats reads ------------------------------------------------------- */

/* FUSE requests counted, by operation, from metrics/nodefs.prom. */
#define NOPS 6
static const char *const op_names[NOPS] = { "lookup", "getattr", "open", "read", "release", "poll" };

#define NREADS 10000
enum { T_STATS, T_FLOOR, T_TMPFS, T_PROC, NTARGETS };

/* NREADS whole-file reads of each target, interleaved in blocks of 10;
 * medians into ret[]. */
static int read_targets(const char *const *paths, bool with_fstat, double **t, double *ret)
{
	for (int i = 0; i < NREADS; i += 10)
		for (int k = 0; k < NTARGETS; k++)
			for (int j = i; j < i + 10; j++) {
				double t0 = bench_now_us();
				ssize_t n = fuse_floor_read_all(paths[k], with_fstat);

				if (n <= 0) {
					fprintf(stderr, "bench_docker: reading %s: %s\n", paths[k],
						n < 0 ? strerror((int)-n) : "empty");
					return -1;
				}
				t[k][j] = bench_now_us() - t0;
			}
	for (int k = 0; k < NTARGETS; k++)
		ret[k] = bench_median(t[k], NREADS);
	return 0;
}

static int bench_stats(char *env, double *ret_median)
{
	static const char *const names[NTARGETS] = { "nodefs stats", "FUSE floor", "tmpfs", "/proc/loadavg" };
	unsigned long long c0[NOPS], c1[NOPS];
	/* direct_io as nodefs serves stats; 1 s timeouts as this benchmark's
	 * floor always had (nodefs's are 60 s: an extra LOOKUP or GETATTR a
	 * second at most, nothing beside 10,000 reads a second) */
	const struct fuse_floor_opts floor_opts = { .keep_cache = false, .timeout = 1 };
	struct fuse_floor *fl = NULL;
	char stats[256], buf[512];
	const char *paths[NTARGETS];
	double *t[NTARGETS], med[2][NTARGETS], *td;
	int fd, r = -1;

	snprintf(stats, sizeof(stats), "%s/containers/st/stats", mnt);
	snprintf(tmpfs_copy, sizeof(tmpfs_copy), "/dev/shm/nodefs-bdk.%d", (int)getpid());
	if (read_file(stats, buf, sizeof(buf)) <= 0) {
		fprintf(stderr, "bench_docker: cannot read %s\n", stats);
		return -1;
	}
	fd = open(tmpfs_copy, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, buf, strlen(buf)) != (ssize_t)strlen(buf)) {
		if (fd >= 0)
			close(fd);
		fprintf(stderr, "bench_docker: cannot write %s\n", tmpfs_copy);
		return -1;
	}
	close(fd);
	snprintf(floor_mnt, sizeof(floor_mnt), "/tmp/nodefs-bdk.%d/floor", (int)getpid());
	r = fuse_floor_start(floor_mnt, buf, strlen(buf), &floor_opts, &fl);
	if (r < 0) {
		fprintf(stderr, "bench_docker: cannot mount the FUSE floor: %s\n", strerror(-r));
		return -1;
	}
	r = -1;
	paths[T_STATS] = stats;
	paths[T_FLOOR] = fuse_floor_file(fl);
	paths[T_TMPFS] = tmpfs_copy;
	paths[T_PROC] = "/proc/loadavg";
	td = calloc(NREADS, sizeof(double));
	for (int k = 0; k < NTARGETS; k++)
		t[k] = calloc(NREADS, sizeof(double));
	if (!td || !t[0] || !t[1] || !t[2] || !t[3])
		goto out;

	/* the requests one read makes: open, read, read at EOF (release is
	 * sent as the close returns, answered meanwhile) */
	if (fuse_floor_requests(mnt, op_names, NOPS, c0) < 0)
		goto out;
	for (int i = 0; i < 1000; i++)
		if (fuse_floor_read_all(stats, true) <= 0)
			goto out;
	if (fuse_floor_requests(mnt, op_names, NOPS, c1) < 0)
		goto out;
	printf("FUSE requests per stats read as cat does it (1000 reads; a read of metrics between):");
	for (int i = 0; i < NOPS; i++)
		printf(" %s %.2f", op_names[i], (double)(c1[i] - c0[i]) / 1000);
	printf("\n");

	if (read_targets(paths, false, t, med[0]) < 0 || read_targets(paths, true, t, med[1]) < 0)
		goto out;
	for (int m = 0; m < 2; m++) {
		printf("%s, median of %d (interleaved):\n",
		       m == 0 ? "open, read to EOF, close" : "as cat: open, fstat, read to EOF, close",
		       NREADS);
		for (int k = 0; k < NTARGETS; k++)
			printf("  %-14s %7.2f us%s", names[k], med[m][k], k == T_STATS ? "\n" : "");
		for (int k = 1; k < NTARGETS; k++)
			if (k != T_STATS)
				printf("  (nodefs/%s %.2f)", names[k], med[m][T_STATS] / med[m][k]);
		printf("\n");
	}
	printf("(the FUSE floor: one thread, a static file, direct_io, 1 s timeouts)\n");

	{
		struct rt_kv kv[] = { { "endpoint", env } };
		struct rt_config cfg = { kv, 1 };
		struct nerr err = { 0 };
		struct rt_stats s;
		char path[256], id[128];
		void *h = NULL;

		snprintf(path, sizeof(path), "%s/containers/st/id", mnt);
		if (read_file(path, id, sizeof(id)) <= 0 || rt_docker_ops.open(&cfg, &h, &err) < 0)
			goto out;
		id[strcspn(id, "\n")] = '\0';
		for (int i = 0; i < NREADS; i++) {
			double t0 = bench_now_us();

			if (rt_docker_ops.stats(h, id, &s, &err) < 0) {
				fprintf(stderr, "bench_docker: driver stats: %s\n", err.msg);
				rt_docker_ops.close(h);
				goto out;
			}
			td[i] = bench_now_us() - t0;
		}
		rt_docker_ops.close(h);
		printf("driver stats() alone (four cgroup file reads), median of %d: %.2f us\n", NREADS,
		       bench_median(td, NREADS));
	}
	*ret_median = med[0][T_STATS];
	r = 0;
out:
	fuse_floor_stop(fl);
	unlink(tmpfs_copy);
	for (int k = 0; k < NTARGETS; k++)
		free(t[k]);
	free(td);
	return r;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 20;
	const char *bin = argc > 2 ? argv[2] : getenv("NODEFS_BIN");
	double *tn = NULL, *ta = NULL, *tc = NULL, mn = 0, ma = 1, mc, msn = 0;
	char path[256], env[300];
	int rc = 1;
	CURL *c = NULL;

	if (geteuid() != 0 || !bin || access(bin, X_OK) != 0 || access("/usr/sbin/dockerd", X_OK) != 0) {
		fprintf(stderr, "bench_docker: needs root, dockerd and nodefs (NODEFS_BIN)\n");
		return 77;
	}
	if (rounds != 0 && rounds < 3)
		rounds = 3;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (start_engine() < 0) {
		fprintf(stderr, "bench_docker: no dockerd\n");
		stop_engine();
		return 77;
	}
	snprintf(env, sizeof(env), "unix://%s", sock);
	setenv("DOCKER_HOST", env, 1);
	if (start_nodefs(bin) < 0) {
		fprintf(stderr, "bench_docker: nodefs did not mount\n");
		goto out;
	}
	if (rounds > 0) {
		tn = calloc((size_t)rounds, sizeof(double));
		ta = calloc((size_t)rounds, sizeof(double));
		tc = calloc((size_t)rounds, sizeof(double));
		c = curl_easy_init();
		if (!tn || !ta || !tc || !c)
			goto out;

		/* one warm-up of each: page cache, connections, the engine's caches */
		if (api_round(c) < 0 || cli_round() < 0 || nodefs_round(rounds) < 0) {
			fprintf(stderr, "bench_docker: warm-up failed\n");
			goto out;
		}
		for (int i = 0; i < rounds; i++) {
			/* rotate the order so no side always follows another */
			for (int k = 0; k < 3; k++) {
				int which = (i + k) % 3;
				double t0 = bench_now_us();
				int r = which == 0 ? nodefs_round(i) : which == 1 ? api_round(c) : cli_round();
				double dt = (bench_now_us() - t0) / 1e3;

				if (r < 0) {
					fprintf(stderr, "bench_docker: round %d of %s failed\n", i,
						which == 0 ? "nodefs" : which == 1 ? "api" : "cli");
					goto out;
				}
				(which == 0 ? tn : which == 1 ? ta : tc)[i] = dt;
			}
		}
		mn = bench_median(tn, rounds);
		ma = bench_median(ta, rounds);
		mc = bench_median(tc, rounds);
		printf("run `true` until removed, median of %d: nodefs %.1f ms, api %.1f ms, docker run --rm %.1f ms\n",
		       rounds, mn, ma, mc);
		printf("nodefs/api %.3f (limit 1.1), docker-cli/api %.3f\n", mn / ma, mc / ma);
	}

	/* stats of a running container */
	snprintf(path, sizeof(path), "%s/containers/ctl", mnt);
	if (write_file(path, "run st runtime=docker image=" IMAGE " cmd='sleep 1000'\n") < 0) {
		fprintf(stderr, "bench_docker: cannot run the stats container\n");
		goto out;
	}
	if (bench_stats(env, &msn) < 0) {
		snprintf(path, sizeof(path), "%s/containers/st/ctl", mnt);
		write_file(path, "destroy\n");
		goto out;
	}
	snprintf(path, sizeof(path), "%s/containers/st/ctl", mnt);
	write_file(path, "destroy\n");
	printf("stats read (open, read to EOF, close): nodefs %.2f us, target < 20\n", msn);
	if (rounds > 0)
		printf("goal: run at most 1.1x the API sequence: %s\n", bench_met(mn / ma <= 1.1));
	printf("goal: stats read under 20 us: %s\n", bench_met(msn < 20));
	rc = 0;
out:
	if (c)
		curl_easy_cleanup(c);
	free(tn);
	free(ta);
	free(tc);
	stop_nodefs();
	stop_engine();
	return rc;
}
