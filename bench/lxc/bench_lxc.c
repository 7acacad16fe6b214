/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench_lxc: start+stop of one busybox container through rt_lxc_ops beside
 * the same liblxc calls made directly, interleaved in one run so the noise
 * of a shared machine falls on both. The driver's round is start() (which
 * also takes init's pidfd, writes the run record and arms the watcher) and
 * stop(timeout 0) (kill, then wait until the watcher recorded the exit);
 * the direct round is c->start() and c->stop() then c->wait("STOPPED").
 * Rounds alternate which side goes first. Prints the medians, their ratio and
 * the goal (at most 1.1x); exits 0 whatever the figures, 1 when a round
 * failed, 77 without root or the busybox template. Cleans up its lxcpath.
 *
 * Usage: bench_lxc [ROUNDS]   (default 30)
 */
#include <lxc/lxccontainer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "nerr.h"
#include "runtime.h"


int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 30;
	char root[] = "/tmp/nodefs-lxc-bench.XXXXXX", cmd[512];
	struct rt_kv kv[1];
	struct rt_config cfg = { kv, 1 };
	struct rt_spec spec = { .name = "viadrv", .template_name = "busybox" };
	struct rt_spec spec2 = { .name = "direct", .template_name = "busybox" };
	struct nerr err = { 0 };
	void *h = NULL;
	char *id = NULL;
	struct lxc_container *c = NULL;
	double *tdrv, *tdir, md, mr;
	int rc = 1;

	if (geteuid() != 0 || access("/usr/share/lxc/templates/lxc-busybox", X_OK) != 0)
		return 77;
	if (rounds < 3)
		rounds = 3;
	if (!mkdtemp(root))
		return 1;
	kv[0] = (struct rt_kv){ (char *)"lxcpath", root };
	tdrv = calloc((size_t)rounds, sizeof(double));
	tdir = calloc((size_t)rounds, sizeof(double));
	if (!tdrv || !tdir || rt_lxc_ops.open(&cfg, &h, &err) < 0)
		goto out;
	/* Both containers made by the driver, so their configs are the same. */
	if (rt_lxc_ops.create(h, &spec, NULL, &id, &err) < 0)
		goto out;
	free(id);
	if (rt_lxc_ops.create(h, &spec2, NULL, &id, &err) < 0)
		goto out;
	free(id);
	c = lxc_container_new("direct", root);
	if (!c)
		goto out;
	c->want_daemonize(c, true);
	c->want_close_all_fds(c, true);
	for (int i = -2; i < rounds; i++) {	/* two warm-up rounds */
		double td = 0, tr = 0;

		/* Alternate which goes first, so neither always runs on
		 * the heels of the other's teardown. */
		for (int k = 0; k < 2; k++) {
			double t0 = bench_now_ms();

			if ((k == 0) == (i % 2 == 0)) {
				if (rt_lxc_ops.start(h, "viadrv", &err) < 0 ||
				    rt_lxc_ops.stop(h, "viadrv", 0, &err) < 0)
					goto out;
				td = bench_now_ms() - t0;
			} else {
				if (!c->start(c, 0, NULL) || !c->stop(c) ||
				    !c->wait(c, "STOPPED", 5)) {
					snprintf(err.msg, sizeof(err.msg), "direct liblxc round failed");
					goto out;
				}
				tr = bench_now_ms() - t0;
			}
		}
		if (i >= 0) {
			tdrv[i] = td;
			tdir[i] = tr;
		}
	}
	md = bench_median(tdrv, rounds);
	mr = bench_median(tdir, rounds);
	printf("lxc start+stop, %d rounds, medians: driver %.2f ms, direct liblxc %.2f ms, ratio %.3f\n",
	       rounds, md, mr, md / mr);
	printf("goal: driver at most 1.1x direct liblxc: %s\n", bench_met(md / mr <= 1.1));
	rc = 0;
out:
	if (rc && err.msg[0])
		fprintf(stderr, "bench_lxc: %s\n", err.msg);
	if (c)
		lxc_container_put(c);
	if (h) {
		(void)rt_lxc_ops.destroy(h, "viadrv", &err);
		(void)rt_lxc_ops.destroy(h, "direct", &err);
		rt_lxc_ops.close(h);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf --one-file-system '%s'", root);
	if (system(cmd) != 0)
		fprintf(stderr, "bench_lxc: could not remove %s\n", root);
	free(tdrv);
	free(tdir);
	return rc;
}
