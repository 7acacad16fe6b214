/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_lxc_mounts: bind mounts through the LXC driver: read-write and read-
 * only binds seen from inside the container, and a bind source given through
 * a symlink kept resolved in the config, with a start refusing a source a
 * link was put on since (or one that is gone). It reaches the driver only
 * through rt_lxc_ops (and the pure helpers of lxc-internal.h) and the fixture
 * only through lxc_test.h.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "lxc_test.h"

Test(lxc, bind_mounts_rw_and_ro)
{
	struct rt_spec s;
	struct sbuf out = SBUF_INIT(4096);
	char rw[600], ro[600], path[700];
	struct rt_mount m[2];
	char *cat[] = { "cat", "/data/ro/hello", NULL };
	char *touch_ro[] = { "touch", "/data/ro/new", NULL };
	char *touch_rw[] = { "sh", "-c", "echo written > /mnt/rw/new", NULL };
	FILE *f;

	snprintf(rw, sizeof(rw), "%s/host-rw", lxcpath);
	snprintf(ro, sizeof(ro), "%s/host-ro", lxcpath);
	cr_assert_eq(mkdir(rw, 0755), 0);
	cr_assert_eq(mkdir(ro, 0755), 0);
	snprintf(path, sizeof(path), "%s/hello", ro);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs("from-host\n", f);
	fclose(f);
	m[0] = (struct rt_mount){ .source = rw, .target = "/mnt/rw", .ro = false };
	m[1] = (struct rt_mount){ .source = ro, .target = "/data/ro", .ro = true };
	spec_init(&s, "mnt");
	s.mounts = m;
	s.nmounts = 2;
	make_start(&s);
	cr_assert_eq(exec_in("mnt", cat, &out), 0);
	cr_assert_str_eq(out.buf, "from-host\n");
	cr_assert_neq(exec_in("mnt", touch_ro, &out), 0, "ro mount was writable");
	cr_assert_eq(exec_in("mnt", touch_rw, &out), 0, "%s", out.buf);
	snprintf(path, sizeof(path), "%s/new", rw);
	cr_assert_eq(access(path, F_OK), 0, "write through rw bind not on the host");
	snprintf(path, sizeof(path), "%s/new", ro);
	cr_assert_neq(access(path, F_OK), 0);
	sbuf_free(&out);
	/* The container goes before the host dirs (teardown removes them). */
	struct nerr err = { 0 };

	cr_assert_eq(ops->destroy(H, "mnt", &err), 0, "%s", err.msg);
	cr_assert_eq(count_entries(lxcpath), 2, "only the two host dirs remain");
}

/* mount(2) follows symlinks: the config keeps a bind source with its links
 * resolved, and a start refuses a source a link was put on since. */
Test(lxc, bind_source_symlink_resolved_and_swap_refused)
{
	struct rt_spec s;
	struct nerr err = { 0 };
	char data[600], link[600], secret[600], cfg[700], conf[16384];
	struct rt_mount m;

	snprintf(data, sizeof(data), "%s/host-data", lxcpath);
	snprintf(link, sizeof(link), "%s/host-link", lxcpath);
	snprintf(secret, sizeof(secret), "%s/secret", lxcpath);
	cr_assert_eq(mkdir(data, 0755), 0);
	cr_assert_eq(mkdir(secret, 0700), 0);
	cr_assert_eq(symlink(data, link), 0);
	m = (struct rt_mount){ .source = link, .target = "/data" };
	spec_init(&s, "swap");
	s.mounts = &m;
	s.nmounts = 1;
	make_start(&s);
	snprintf(cfg, sizeof(cfg), "%s/swap/config", lxcpath);
	cr_assert_gt(rt_lxc_read_file(cfg, conf, sizeof(conf)), 0);
	cr_assert(strstr(conf, data), "config:\n%s", conf);
	cr_assert_null(strstr(conf, "host-link"), "the link, not its target, in the config");
	cr_assert_eq(ops->stop(H, "swap", 0, &err), 0, "%s", err.msg);

	/* the source directory becomes a link to somewhere else */
	cr_assert_eq(rmdir(data), 0);
	cr_assert_eq(symlink(secret, data), 0);
	cr_assert_eq(ops->start(H, "swap", &err), -EPERM);
	cr_assert(strstr(err.msg, "symlink") && strstr(err.msg, "secret"), "%s", err.msg);
	cr_assert_eq(status_of("swap").state, RT_STATE_EXITED, "started anyway");
	/* gone: ENOENT, with the reason */
	cr_assert_eq(unlink(data), 0);
	cr_assert_eq(ops->start(H, "swap", &err), -ENOENT);
	cr_assert(strstr(err.msg, "bind source"), "%s", err.msg);
	cr_assert_eq(ops->destroy(H, "swap", &err), 0, "%s", err.msg);
}
