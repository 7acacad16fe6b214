/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * resources: what this node has and what its work already takes, as the
 * top-level files `resources` (one `key value` a line) and
 * `resources.json`, the nodefs_node_* gauges of metrics/nodefs.prom, and
 * the record cluster/ publishes with the node's status (nodefs(5)). A kind
 * with no directory and no state (kind.h): its table gives the gauges.
 *
 *   cpus_total, memory_total     the machine, bounded by nodefs' own cgroup
 *                                (v2 cpu.max/memory.max, v1 cfs quota and
 *                                memory.limit_in_bytes)
 *   cpus_allocated, memory_allocated, containers_unlimited
 *                                the running containers' limits, summed (and
 *                                by runtime: runtime.NAME.*)
 *   cpus_free, memory_free       total less allocated, never below 0
 *   profile.NAME.capacity_bytes  GetCapacity, as the plugins' last refresh had it
 *   volumes_bytes_provisioned    the volumes made, their capacity each
 *
 * Everything is computed on a read from what the other rooms keep (through
 * core/links.h: containers_limits, profiles_capacity,
 * volumes_bytes_provisioned) and a few small files of /proc and /sys: no
 * state of its own, no call to a plugin or an engine.
 * Must not know: containers, plugins, volumes (beyond links.h), cluster.
 */
#include "backend-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jw.h"
#include "kind.h"
#include "links.h"
#include "macro.h"
#include "resources.h"

#define MAX_RT 16
#define MAX_PROF 64

struct res {
	double cpus_total, cpus_alloc;
	uint64_t mem_total, mem_alloc;
	unsigned unlimited;
	struct {
		char name[65];
		double cpus;
		uint64_t mem;
	} rt[MAX_RT];
	size_t nrt;
	struct {
		char name[65];
		long long bytes;
	} prof[MAX_PROF];
	size_t nprof;
	uint64_t provisioned;
};

/* The first line of path, or "" (false) when it cannot be read. */
static bool read_line(const char *path, char *buf, size_t len)
{
	FILE *fp = fopen(path, "re");
	bool ok;

	buf[0] = '\0';
	if (!fp)
		return false;
	ok = fgets(buf, (int)len, fp) != NULL;
	fclose(fp);
	buf[strcspn(buf, "\n")] = '\0';
	return ok;
}

/* This process's cgroup path for controller ctl (v1: the line naming it;
 * v2: "0::"), into buf; false when none. */
static bool own_cgroup(const char *ctl, bool v2, char *buf, size_t len)
{
	FILE *fp = fopen("/proc/self/cgroup", "re");
	char line[1024];
	bool found = false;

	if (!fp)
		return false;
	while (!found && fgets(line, sizeof(line), fp)) {
		char *a = strchr(line, ':'), *b2 = a ? strchr(a + 1, ':') : NULL;
		if (!b2)
			continue;
		*b2 = '\0';
		line[strcspn(line, "\n")] = '\0';
		b2[1 + strcspn(b2 + 1, "\n")] = '\0';
		if (v2) {
			found = strcmp(line, "0") == 0 && a[1] == '\0';
		} else {
			/* "4:cpu,cpuacct:/x": ctl among the comma-separated names */
			for (char *t = a + 1, *s; !found && (s = strsep(&t, ","));)
				found = strcmp(s, ctl) == 0;
		}
		if (found)
			snprintf(buf, len, "%s", b2 + 1);
	}
	fclose(fp);
	return found;
}

/* A cgroup file of ours: v2 at /sys/fs/cgroup/PATH/file (a unified
 * hierarchy with controllers), v1 at /sys/fs/cgroup/CTL/PATH/file. */
static bool cg_read(const char *ctl, const char *v2file, const char *v1file, char *buf,
		    size_t len, bool *ret_v2)
{
	char cg[1024], path[1200];

	if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 &&
	    own_cgroup(NULL, true, cg, sizeof(cg))) {
		snprintf(path, sizeof(path), "/sys/fs/cgroup%s/%s", cg, v2file);
		*ret_v2 = true;
		return read_line(path, buf, len);
	}
	*ret_v2 = false;
	if (!own_cgroup(ctl, false, cg, sizeof(cg)))
		return false;
	snprintf(path, sizeof(path), "/sys/fs/cgroup/%s%s/%s", ctl, cg, v1file);
	if (read_line(path, buf, len))
		return true;
	/* the hierarchy seen from inside a cgroup namespace: its root */
	snprintf(path, sizeof(path), "/sys/fs/cgroup/%s/%s", ctl, v1file);
	return read_line(path, buf, len);
}

static double machine_cpus(void)
{
	cpu_set_t set;
	double n = 0;
	char buf[128];
	bool v2;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		n = CPU_COUNT(&set);
	if (n <= 0)
		n = (double)sysconf(_SC_NPROCESSORS_ONLN);
	if (cg_read("cpu", "cpu.max", "cpu.cfs_quota_us", buf, sizeof(buf), &v2)) {
		long long quota = 0, period = 0;
		if (v2) {
			if (sscanf(buf, "%lld %lld", &quota, &period) != 2)
				quota = 0;	/* "max 100000" */
		} else {
			char p[64];
			quota = strtoll(buf, NULL, 10);
			if (cg_read("cpu", "cpu.max", "cpu.cfs_period_us", p, sizeof(p), &v2))
				period = strtoll(p, NULL, 10);
		}
		if (quota > 0 && period > 0 && (double)quota / (double)period < n)
			n = (double)quota / (double)period;
	}
	return n;
}

static uint64_t machine_memory(void)
{
	uint64_t total = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
	char buf[128];
	bool v2;

	if (cg_read("memory", "memory.max", "memory.limit_in_bytes", buf, sizeof(buf), &v2) &&
	    buf[0] >= '0' && buf[0] <= '9') {
		uint64_t lim = strtoull(buf, NULL, 10);
		if (lim > 0 && lim < total)
			total = lim;	/* v1's "no limit" is a huge number */
	}
	return total;
}

static void on_container(void *ctx, const char *runtime, double cpus, uint64_t memory)
{
	struct res *r = ctx;
	size_t i;

	r->cpus_alloc += cpus;
	r->mem_alloc += memory;
	r->unlimited += cpus <= 0 && memory == 0;
	for (i = 0; i < r->nrt && strcmp(r->rt[i].name, runtime) != 0; i++)
		;
	if (i == r->nrt) {
		if (r->nrt == MAX_RT)
			return;
		snprintf(r->rt[r->nrt++].name, sizeof(r->rt[0].name), "%s", runtime);
	}
	r->rt[i].cpus += cpus;
	r->rt[i].mem += memory;
}

static void on_profile(void *ctx, const char *profile, long long bytes)
{
	struct res *r = ctx;

	for (size_t i = 0; i < r->nprof; i++)
		if (strcmp(r->prof[i].name, profile) == 0)
			return;
	if (r->nprof == MAX_PROF)
		return;
	snprintf(r->prof[r->nprof].name, sizeof(r->prof[0].name), "%s", profile);
	r->prof[r->nprof++].bytes = bytes;
}

static void collect(struct backend *b, struct res *r)
{
	const struct backend_links *l = b->links;

	memset(r, 0, sizeof(*r));
	r->cpus_total = machine_cpus();
	r->mem_total = machine_memory();
	if (l && l->containers_limits)
		l->containers_limits(b, on_container, r);
	if (l && l->profiles_capacity)
		l->profiles_capacity(b, on_profile, r);
	if (l && l->volumes_bytes_provisioned)
		r->provisioned = l->volumes_bytes_provisioned(b);
}

/* cpus as a decimal with at most 3 places, no trailing zeros: "2", "1.5" */
static void fmt_cpus(double v, char *buf, size_t len)
{
	size_t n;

	snprintf(buf, len, "%.3f", v < 0 ? 0 : v);
	n = strlen(buf);
	while (n && buf[n - 1] == '0')
		buf[--n] = '\0';
	if (n && buf[n - 1] == '.')
		buf[--n] = '\0';
}

static double cpus_free(const struct res *r)
{
	return r->cpus_total > r->cpus_alloc ? r->cpus_total - r->cpus_alloc : 0;
}

static uint64_t mem_free(const struct res *r)
{
	return r->mem_total > r->mem_alloc ? r->mem_total - r->mem_alloc : 0;
}

static int show_text(const struct res *r, struct sbuf *out)
{
	char t[32], a[32], f[32];
	int e;

	fmt_cpus(r->cpus_total, t, sizeof(t));
	fmt_cpus(r->cpus_alloc, a, sizeof(a));
	fmt_cpus(cpus_free(r), f, sizeof(f));
	e = sbuf_printf(out,
			"cpus_total %s\nmemory_total %" PRIu64 "\ncpus_allocated %s\n"
			"memory_allocated %" PRIu64 "\ncontainers_unlimited %u\ncpus_free %s\n"
			"memory_free %" PRIu64 "\n",
			t, r->mem_total, a, r->mem_alloc, r->unlimited, f, mem_free(r));
	for (size_t i = 0; e >= 0 && i < r->nrt; i++) {
		fmt_cpus(r->rt[i].cpus, a, sizeof(a));
		e = sbuf_printf(out, "runtime.%s.cpus_allocated %s\nruntime.%s.memory_allocated %"
				PRIu64 "\n", r->rt[i].name, a, r->rt[i].name, r->rt[i].mem);
	}
	for (size_t i = 0; e >= 0 && i < r->nprof; i++)
		e = sbuf_printf(out, "profile.%s.capacity_bytes %lld\n", r->prof[i].name,
				r->prof[i].bytes);
	if (e >= 0)
		e = sbuf_printf(out, "volumes_bytes_provisioned %" PRIu64 "\n", r->provisioned);
	return e < 0 ? e : 0;
}

/* cpus as JSON: an integer when whole, else a real of at most 3 places */
static void jw_cpus(struct jw *w, const char *k, double v)
{
	char buf[32];

	fmt_cpus(v, buf, sizeof(buf));
	jw_key(w, k);
	if (strchr(buf, '.'))
		jw_real(w, strtod(buf, NULL));
	else
		jw_int(w, strtoll(buf, NULL, 10));
}

static int show_json(const struct res *r, struct sbuf *out, int indent)
{
	struct jw w;

	jw_init(&w, out, indent);
	jw_obj(&w);
	jw_cpus(&w, "cpus_total", r->cpus_total);
	jw_kint(&w, "memory_total", (long long)r->mem_total);
	jw_cpus(&w, "cpus_allocated", r->cpus_alloc);
	jw_kint(&w, "memory_allocated", (long long)r->mem_alloc);
	jw_kint(&w, "containers_unlimited", r->unlimited);
	jw_cpus(&w, "cpus_free", cpus_free(r));
	jw_kint(&w, "memory_free", (long long)mem_free(r));
	jw_key(&w, "runtimes");
	jw_obj(&w);
	for (size_t i = 0; i < r->nrt; i++) {
		jw_key(&w, r->rt[i].name);
		jw_obj(&w);
		jw_cpus(&w, "cpus_allocated", r->rt[i].cpus);
		jw_kint(&w, "memory_allocated", (long long)r->rt[i].mem);
		jw_obj_end(&w);
	}
	jw_obj_end(&w);
	jw_key(&w, "profiles");
	jw_obj(&w);
	for (size_t i = 0; i < r->nprof; i++) {
		jw_key(&w, r->prof[i].name);
		jw_obj(&w);
		jw_kint(&w, "capacity_bytes", r->prof[i].bytes);
		jw_obj_end(&w);
	}
	jw_obj_end(&w);
	jw_kint(&w, "volumes_bytes_provisioned", (long long)r->provisioned);
	jw_obj_end(&w);
	return jw_end(&w);
}

int resources_show(struct backend *b, struct sbuf *out, int how)
{
	struct res r;
	int e;

	collect(b, &r);
	if (how == RESOURCES_TEXT)
		return show_text(&r, out);
	e = show_json(&r, out, how == RESOURCES_JSON ? 2 : 0);
	if (e >= 0 && how == RESOURCES_JSON)
		e = sbuf_adds(out, "\n");
	return e < 0 ? e : 0;
}

int resources_render_metrics(struct backend *b, struct sbuf *out)
{
	struct res r;
	int e;

	collect(b, &r);
	e = sbuf_printf(out,
			"# HELP nodefs_node_cpus CPUs of this node: total (the machine within "
			"nodefs' cgroup), allocated (running containers' limits), free.\n"
			"# TYPE nodefs_node_cpus gauge\n"
			"nodefs_node_cpus{kind=\"total\"} %.3f\n"
			"nodefs_node_cpus{kind=\"allocated\"} %.3f\n"
			"nodefs_node_cpus{kind=\"free\"} %.3f\n"
			"# HELP nodefs_node_memory_bytes Memory of this node: total, allocated, free.\n"
			"# TYPE nodefs_node_memory_bytes gauge\n"
			"nodefs_node_memory_bytes{kind=\"total\"} %" PRIu64 "\n"
			"nodefs_node_memory_bytes{kind=\"allocated\"} %" PRIu64 "\n"
			"nodefs_node_memory_bytes{kind=\"free\"} %" PRIu64 "\n"
			"# HELP nodefs_node_containers_unlimited Running containers with no limit.\n"
			"# TYPE nodefs_node_containers_unlimited gauge\n"
			"nodefs_node_containers_unlimited %u\n"
			"# HELP nodefs_node_volumes_provisioned_bytes Bytes of the volumes made.\n"
			"# TYPE nodefs_node_volumes_provisioned_bytes gauge\n"
			"nodefs_node_volumes_provisioned_bytes %" PRIu64 "\n",
			r.cpus_total, r.cpus_alloc, cpus_free(&r), r.mem_total, r.mem_alloc,
			mem_free(&r), r.unlimited, r.provisioned);
	if (e >= 0 && r.nprof)
		e = sbuf_adds(out, "# HELP nodefs_node_profile_capacity_bytes GetCapacity of each "
			      "profile, as last refreshed.\n"
			      "# TYPE nodefs_node_profile_capacity_bytes gauge\n");
	for (size_t i = 0; e >= 0 && i < r.nprof; i++)
		e = sbuf_printf(out, "nodefs_node_profile_capacity_bytes{profile=\"%s\"} %lld\n",
				r.prof[i].name, r.prof[i].bytes);
	return e < 0 ? e : 0;
}

const struct kind_ops resources_kind = {
	.name = "resources",
	.type = NULL,	/* no directory: files at the top (core's root, links.h) */
	.render_metrics = resources_render_metrics,
};
