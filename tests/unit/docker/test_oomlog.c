/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * unit-oomlog: the kernel's oom-kill records as runtimes/rt-oomlog.c reads
 * them: the record's header and fields, and which cgroup paths name which
 * engine id. Records are the kernel's own text (Linux 6.1 and 6.18, cgroup
 * v1 and v2, Docker and Podman). The reading of the real /dev/kmsg is
 * tests/integration/docker (oomlog-kernel).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "rt-oomlog.h"

#define ID "71c825cf07da2e62e39782789568d2b2bf04c1e7fd1661bb5a19422e32231c92"
#define PID "5f1e2d3c4b5a69788796a5b4c3d2e1f05f1e2d3c4b5a69788796a5b4c3d2e1f0"

static int parse(const char *rec, struct rt_oomkill *o)
{
	return rt_oomlog_parse(rec, strlen(rec), o);
}

static bool names(const struct rt_oomkill *o, const char *id)
{
	return rt_oomlog_names(o->task_memcg, o->task_len, id) ||
	       rt_oomlog_names(o->oom_memcg, o->oom_len, id);
}

Test(oomlog, docker_cgroupfs_v1)
{
	struct rt_oomkill o;

	cr_assert_eq(parse("6,25176,32118644405,-;oom-kill:constraint=CONSTRAINT_MEMCG,"
			   "nodemask=(null),cpuset=" ID ",mems_allowed=0,oom_memcg=/docker/" ID
			   ",task_memcg=/docker/" ID ",task=dd,pid=18161,uid=0\n", &o), 1);
	cr_assert_eq(o.usec, 32118644405ull);
	cr_assert_eq(o.oom_len, strlen("/docker/" ID));
	cr_assert(strncmp(o.task_memcg, "/docker/" ID, o.task_len) == 0);
	cr_assert(names(&o, ID));
	cr_assert(names(&o, "71c825cf07da"), "a 12-digit prefix names it");
	cr_assert_not(names(&o, "71c825cf07d"), "11 digits are too few");
	cr_assert_not(names(&o, "1c825cf07da2e62e"), "not at the start of the id");
	cr_assert_not(names(&o, PID));
}

Test(oomlog, podman_systemd_v2)
{
	struct rt_oomkill o;

	cr_assert_eq(parse("6,912,88123456,-,caller=T12;oom-kill:constraint=CONSTRAINT_MEMCG,"
			   "nodemask=(null),cpuset=/,mems_allowed=0,"
			   "oom_memcg=/machine.slice/libpod-" PID ".scope/container,"
			   "task_memcg=/machine.slice/libpod-" PID ".scope/container,"
			   "task=sh,pid=4711,uid=0\n SUBSYSTEM=memory\n", &o), 1);
	cr_assert_eq(o.usec, 88123456ull);
	cr_assert(names(&o, PID));
	cr_assert_not(names(&o, ID));
	/* a full id must end where the path's does: a longer hex run is another */
	cr_assert_not(rt_oomlog_names("/x/" PID "0", strlen("/x/" PID "0"), PID));
	cr_assert(rt_oomlog_names("docker-" PID ".scope", strlen("docker-" PID ".scope"), PID));
}

Test(oomlog, global_oom_names_the_task_cgroup)
{
	struct rt_oomkill o;

	cr_assert_eq(parse("6,1,2,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,"
			   "mems_allowed=0,global_oom,task_memcg=/system.slice/docker-" ID
			   ".scope,task=x,pid=1,uid=0", &o), 1);
	cr_assert_null(o.oom_memcg);
	cr_assert(names(&o, ID));
}

Test(oomlog, other_records)
{
	struct rt_oomkill o;

	cr_assert_eq(parse("4,25178,32157269485,-;head invoked oom-killer: gfp_mask=0x500cc2, "
			   "order=0, oom_score_adj=0\n", &o), 0);
	cr_assert_eq(parse("6,3,4,-;oom-kill:constraint=CONSTRAINT_NONE,task=x,pid=1\n", &o), 0,
		     "no cgroup path: nothing to match");
	/* the summary's text starts the message; quoted elsewhere it is not one */
	cr_assert_eq(parse("6,3,4,-;x oom-kill:oom_memcg=/docker/" ID "\n", &o), 0);
	/* the message ends at the first newline: a dictionary line is not it */
	cr_assert_eq(parse("6,3,4,-;hello\n oom-kill:oom_memcg=/docker/" ID "\n", &o), 0);
}

Test(oomlog, bad_headers)
{
	struct rt_oomkill o;
	static const char *bad[] = {
		"", ";oom-kill:oom_memcg=/a", "6,1;oom-kill:oom_memcg=/a", "6,1,x,-;oom-kill:oom_memcg=/a",
		"6,99999999999999999999999,1,-;oom-kill:oom_memcg=/a", "6,1,2,-", "oom-kill:oom_memcg=/a",
		"6,,2,-;oom-kill:oom_memcg=/a",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(parse(bad[i], &o), -EBADMSG, "%s", bad[i]);
	cr_assert_eq(parse("6,1,2;oom-kill:oom_memcg=/a", &o), 1, "flags may be absent");
}

Test(oomlog, ids_that_are_not_ids)
{
	cr_assert_not(rt_oomlog_names("/docker/web", 11, "web"));
	cr_assert_not(rt_oomlog_names("/docker/" ID, strlen("/docker/" ID), "71C825CF07DA"));
	cr_assert_not(rt_oomlog_names(NULL, 0, ID));
	cr_assert_eq(rt_oomlog_find("web", 0), 0, "a name is never looked up");
}

Test(oomlog, lxc_cgroup_under_a_directory)
{
	struct rt_oomkill o;
	const char *v1 = "/sys/fs/cgroup/memory/lxc.payload.oom";
	const char *v2 = "/sys/fs/cgroup/lxc.payload.oom";

	cr_assert_eq(parse("6,25275,32157269860,-;oom-kill:constraint=CONSTRAINT_MEMCG,"
			   "nodemask=(null),cpuset=lxc.payload.oom,mems_allowed=0,"
			   "oom_memcg=/lxc.payload.oom,task_memcg=/lxc.payload.oom/init.scope,"
			   "task=sh,pid=24405,uid=0\n", &o), 1);
	cr_assert(rt_oomlog_under(o.oom_memcg, o.oom_len, v1));
	cr_assert(rt_oomlog_under(o.oom_memcg, o.oom_len, v2));
	cr_assert(rt_oomlog_under(o.task_memcg, o.task_len, v2), "a cgroup below it");
	cr_assert_not(rt_oomlog_under(o.oom_memcg, o.oom_len, "/sys/fs/cgroup/lxc.payload.oom2"));
	cr_assert_not(rt_oomlog_under(o.oom_memcg, o.oom_len, "/sys/fs/cgroup/lxc.payload"));
	cr_assert_not(rt_oomlog_under(o.oom_memcg, o.oom_len, "/sys/fs/cgroup/x-lxc.payload.oom"));
	cr_assert_not(rt_oomlog_under("/", 1, v2), "the root is nobody's");
	cr_assert_not(rt_oomlog_under("lxc.payload.oom", 15, v2), "a record's path is absolute");
	cr_assert_eq(rt_oomlog_find_cgroup("relative", 0), 0);
}
