/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_cluster_res: the decoder of another node's summary record and the
 * text of its resources (backend/cluster/cluster-res.c): what a node
 * publishes comes back as the same lines its own `resources` file shows;
 * records that are not nodefs' are refused with a reason, and hostile
 * values (negative, huge, not numbers, bad names) never reach the text.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "cluster-internal.h"
#include "sbuf.h"

static const char info[] =
	"{\"version\":\"0.1.0\",\"boot_id\":\"b1\",\"started\":1796631262,\"updated\":1796631300,"
	"\"volumes\":3,\"containers\":2,\"resources\":{\"cpus_total\":2,\"memory_total\":1000,"
	"\"cpus_allocated\":0.5,\"memory_allocated\":64,\"containers_unlimited\":1,"
	"\"cpus_free\":1.5,\"memory_free\":936,\"runtimes\":{\"docker\":{\"cpus_allocated\":0.5,"
	"\"memory_allocated\":64}},\"profiles\":{\"fast\":{\"capacity_bytes\":79505809408}},"
	"\"volumes_bytes_provisioned\":1048576}}";

Test(cluster_res, round_trip)
{
	struct cinfo ci;
	char why[200] = "";
	struct sbuf out;

	cr_assert_eq(cluster_info_parse(info, strlen(info), &ci, why, sizeof(why)), 0, "%s", why);
	cr_assert_str_eq(ci.version, "0.1.0");
	cr_assert(ci.has_counts && ci.has_res);
	cr_assert_eq(ci.volumes, 3);
	cr_assert_eq(ci.containers, 2);
	cr_assert_eq(ci.updated, 1796631300);
	sbuf_init(&out, 1 << 16);
	cr_assert_eq(cluster_res_text(&ci.res, &out), 0);
	cr_assert_str_eq(out.buf,
			 "cpus_total 2\nmemory_total 1000\ncpus_allocated 0.5\nmemory_allocated 64\n"
			 "containers_unlimited 1\ncpus_free 1.5\nmemory_free 936\n"
			 "runtime.docker.cpus_allocated 0.5\nruntime.docker.memory_allocated 64\n"
			 "profile.fast.capacity_bytes 79505809408\nvolumes_bytes_provisioned 1048576\n");
	sbuf_free(&out);
}

Test(cluster_res, refused)
{
	struct cinfo ci;
	char why[200];

	cr_assert_eq(cluster_info_parse("[1]", 3, &ci, why, sizeof(why)), -EINVAL);
	cr_assert_str_eq(why, "expected an object");
	cr_assert_eq(cluster_info_parse("{\"trunc", 7, &ci, why, sizeof(why)), -EINVAL);
	cr_assert(strncmp(why, "not JSON", 8) == 0, "%s", why);
}

Test(cluster_res, hostile)
{
	static const char h[] =
		"{\"version\":\"a\\nb\",\"resources\":{\"cpus_total\":-3,\"memory_total\":\"x\","
		"\"cpus_free\":1e300,\"runtimes\":{\"bad name\":{},\"..\":{},\"ok\":{\"cpus_allocated\":1}},"
		"\"profiles\":{\".hidden\":{\"capacity_bytes\":1},\"p\":3}}}";
	struct cinfo ci;
	char why[200];
	struct sbuf out;

	cr_assert_eq(cluster_info_parse(h, strlen(h), &ci, why, sizeof(why)), 0);
	cr_assert_str_eq(ci.version, "a?b");
	cr_assert(!ci.has_counts);
	cr_assert_eq(ci.res.nrt, 1);
	cr_assert_str_eq(ci.res.rt[0].name, "ok");
	cr_assert_eq(ci.res.nprof, 0);
	sbuf_init(&out, 1 << 16);
	cr_assert_eq(cluster_res_text(&ci.res, &out), 0);
	cr_assert(strstr(out.buf, "cpus_total 0\n"), "%s", out.buf);
	cr_assert(strstr(out.buf, "memory_total 0\n"), "%s", out.buf);
	cr_assert(strstr(out.buf, "cpus_free 1000000000000\n"), "%s", out.buf);
	sbuf_free(&out);
}
