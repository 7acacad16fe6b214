/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_oomlog: one /dev/kmsg record through the oom-kill parser
 * (rt_oomlog_parse in runtimes/rt-oomlog.c), then its cgroup paths through
 * the id and directory matchers. The paths must lie inside the record, and a record cut
 * anywhere must parse without reading past its end.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt-oomlog.h"

static void check(const char *rec, size_t n)
{
	struct rt_oomkill o;
	int r = rt_oomlog_parse(rec, n, &o);

	if (r != 1)
		return;
	if ((o.oom_memcg && (o.oom_memcg < rec || o.oom_memcg + o.oom_len > rec + n)) ||
	    (o.task_memcg && (o.task_memcg < rec || o.task_memcg + o.task_len > rec + n)))
		abort();
	rt_oomlog_names(o.oom_memcg, o.oom_len, "0123456789abcdef");
	rt_oomlog_names(o.task_memcg, o.task_len,
			"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
	rt_oomlog_under(o.task_memcg, o.task_len, "/sys/fs/cgroup/lxc.payload.oom");
	rt_oomlog_under(o.oom_memcg, o.oom_len, "/sys/fs/cgroup/memory/docker");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* a copy of exactly size bytes, so ASan sees any read past the end */
	char *rec = malloc(size ? size : 1);

	if (!rec)
		return 0;
	memcpy(rec, data, size);
	check(rec, size);
	if (size > 1)
		check(rec, size / 2);
	free(rec);
	return 0;
}
