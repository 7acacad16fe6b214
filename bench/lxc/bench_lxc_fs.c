/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_lxc_fs: "run" + "stop 0" of a busybox container written to a mounted
 * nodefs (containers/ctl, containers/NAME/ctl) beside the same liblxc calls
 * made directly (create with the busybox template, the same config items,
 * start, stop, wait for STOPPED), interleaved in one run, order alternating.
 * Destroys are outside the timings. Prints the medians, their ratio and the
 * goal (at most 1.1x); exits 0 whatever the figures, 1 when a round failed,
 * 77 without root, the busybox template or NODEFS_BIN.
 * Removes its mount, containers and directories.
 *
 * Usage: NODEFS_BIN=path/to/nodefs bench_lxc_fs [ROUNDS]   (default 10)
 */
#include <errno.h>
#include <fcntl.h>
#include <lxc/lxccontainer.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* One whole-line write to a ctl file, as echo does. */
static int ctl(const char *path, const char *line)
{
	int fd = open(path, O_WRONLY | O_TRUNC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, line, strlen(line));
	close(fd);
	return n == (ssize_t)strlen(line) ? 0 : -errno;
}

static bool direct_round(const char *lxcpath, const char *name)
{
	struct lxc_container *c = lxc_container_new(name, lxcpath);
	char path[600];
	bool ok;

	if (!c)
		return false;
	ok = c->create(c, "busybox", NULL, NULL, LXC_CREATE_QUIET, NULL);
	if (ok) {
		c->clear_config_item(c, "lxc.net");
		snprintf(path, sizeof(path), "%s/%s/console.log", lxcpath, name);
		ok = c->set_config_item(c, "lxc.net.0.type", "none") &&
		     c->set_config_item(c, "lxc.apparmor.profile", "unconfined") &&
		     c->set_config_item(c, "lxc.console.logfile", path) &&
		     c->set_config_item(c, "lxc.cgroup.memory.limit_in_bytes", "67108864") &&
		     c->save_config(c, NULL);
	}
	c->want_daemonize(c, true);
	c->want_close_all_fds(c, true);
	ok = ok && c->start(c, 0, NULL) && c->stop(c) && c->wait(c, "STOPPED", 5);
	lxc_container_put(c);
	return ok;
}

static void direct_destroy(const char *lxcpath, const char *name)
{
	struct lxc_container *c = lxc_container_new(name, lxcpath);

	if (!c)
		return;
	if (c->is_running(c))
		c->stop(c);
	if (c->is_defined(c))
		c->destroy(c);
	lxc_container_put(c);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 10;
	const char *bin = getenv("NODEFS_BIN");
	char root[] = "/tmp/nodefs-lxc-benchfs.XXXXXX";
	char mnt[128], lxcd[128], lxcf[128], st[128], conf[128], cmd[512], path[300], line[200];
	double *tfs, *tdir, mf, md;
	pid_t daemon = -1;
	FILE *f;
	int rc = 1;

	if (geteuid() != 0 || !bin || access(bin, X_OK) != 0 ||
	    access("/usr/share/lxc/templates/lxc-busybox", X_OK) != 0)
		return 77;
	if (rounds < 3)
		rounds = 3;
	if (!mkdtemp(root))
		return 1;
	snprintf(mnt, sizeof(mnt), "%s/mnt", root);
	snprintf(lxcd, sizeof(lxcd), "%s/lxc-nodefs", root);
	snprintf(lxcf, sizeof(lxcf), "%s/lxc-direct", root);
	snprintf(st, sizeof(st), "%s/state", root);
	snprintf(conf, sizeof(conf), "%s/nodefs.conf", root);
	mkdir(mnt, 0755);
	mkdir(lxcd, 0755);
	mkdir(lxcf, 0755);
	mkdir(st, 0755);
	tfs = calloc((size_t)rounds, sizeof(double));
	tdir = calloc((size_t)rounds, sizeof(double));
	f = fopen(conf, "w");
	if (!f || !tfs || !tdir)
		goto out;
	fprintf(f, "[nodefs]\nallowed_targets = /tmp\n[runtime lxc]\nlxcpath = %s\n", lxcd);
	fclose(f);
	daemon = fork();
	if (daemon == 0) {
		execl(bin, bin, "-f", "--config", conf, "--state-dir", st, mnt, (char *)NULL);
		_exit(127);
	}
	snprintf(path, sizeof(path), "%s/runtimes/lxc/status", mnt);
	for (int i = 0; i < 100 && access(path, F_OK) != 0; i++)
		usleep(50000);
	if (access(path, F_OK) != 0) {
		fprintf(stderr, "bench_lxc_fs: nodefs did not mount\n");
		goto out;
	}
	for (int i = -1; i < rounds; i++) {	/* one warm-up round */
		char name[32];
		double td = 0, tf = 0;

		snprintf(name, sizeof(name), "b%d", i + 1);
		for (int k = 0; k < 2; k++) {
			double t0 = bench_now_ms();

			if ((k == 0) == (i % 2 == 0)) {
				snprintf(path, sizeof(path), "%s/containers/ctl", mnt);
				snprintf(line, sizeof(line), "run %s runtime=lxc template=busybox memory=64M\n", name);
				if (ctl(path, line) < 0)
					goto fail;
				snprintf(path, sizeof(path), "%s/containers/%s/ctl", mnt, name);
				if (ctl(path, "stop 0\n") < 0)
					goto fail;
				tf = bench_now_ms() - t0;
				if (ctl(path, "destroy\n") < 0)
					goto fail;
			} else {
				if (!direct_round(lxcf, name))
					goto fail;
				td = bench_now_ms() - t0;
				direct_destroy(lxcf, name);
			}
		}
		if (i >= 0) {
			tfs[i] = tf;
			tdir[i] = td;
		}
	}
	mf = bench_median(tfs, rounds);
	md = bench_median(tdir, rounds);
	printf("lxc run+stop, %d rounds, medians: through nodefs %.1f ms, direct liblxc %.1f ms, ratio %.3f\n",
	       rounds, mf, md, mf / md);
	printf("goal: through nodefs at most 1.1x direct liblxc: %s\n", bench_met(mf / md <= 1.1));
	rc = 0;
	goto out;
fail:
	fprintf(stderr, "bench_lxc_fs: a round failed: %s\n", strerror(errno));
out:
	if (daemon > 0) {
		kill(daemon, SIGTERM);
		waitpid(daemon, NULL, 0);
	}
	/* Whatever a failed round left, in both lxcpaths. */
	for (int k = 0; k < 2; k++) {
		const char *p = k ? lxcf : lxcd;
		char **names = NULL;
		struct lxc_container **cs = NULL;
		int n = list_all_containers(p, &names, &cs);

		for (int i = 0; i < n; i++) {
			if (cs[i]->is_running(cs[i]))
				cs[i]->stop(cs[i]);
			cs[i]->destroy(cs[i]);
			lxc_container_put(cs[i]);
			free(names[i]);
		}
		free(names);
		free(cs);
	}
	snprintf(cmd, sizeof(cmd), "umount -l '%s' 2>/dev/null; rm -rf --one-file-system '%s'", mnt, root);
	if (system(cmd) != 0)
		fprintf(stderr, "bench_lxc_fs: could not remove %s\n", root);
	free(tfs);
	free(tdir);
	return rc;
}
