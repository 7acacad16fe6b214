/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cluster-res: the decoders of what other nodes publish in their summary
 * (summary/NODE/info: version, boot id, times, the counts of volumes and
 * containers, and `resources` as that node's resources.json has it) and
 * the text of a node's resources as cluster/nodes/NODE/resources shows it
 * (the same lines as the top-level `resources` file). Pure functions over
 * bytes from etcd, fuzzed (tests/fuzz/fuzz_cluster_records.c). Knows
 * jansson; not the tree, not etcd, not FUSE.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "cluster-internal.h"
#include "sbuf.h"

void cluster_fmt_cpus(double v, char *buf, size_t len)
{
	size_t n;

	if (!isfinite(v) || v < 0)
		v = 0;
	if (v > 1e12)
		v = 1e12;
	snprintf(buf, len, "%.3f", v);
	n = strlen(buf);
	while (n && buf[n - 1] == '0')
		buf[--n] = '\0';
	if (n && buf[n - 1] == '.')
		buf[--n] = '\0';
}

static bool num(json_t *o, const char *k, double *ret)
{
	json_t *v = json_object_get(o, k);

	if (!json_is_number(v))
		return false;
	*ret = json_number_value(v);
	if (!isfinite(*ret) || *ret < 0)
		*ret = 0;
	return true;
}

static long long inum(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	if (json_is_integer(v) && json_integer_value(v) >= 0)
		return (long long)json_integer_value(v);
	return 0;
}

static bool good_name(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (!n || n > 64 || s[0] == '.')
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

static void res_of(json_t *r, struct cres *out)
{
	const char *k;
	json_t *v;

	num(r, "cpus_total", &out->cpus_total);
	num(r, "cpus_allocated", &out->cpus_allocated);
	num(r, "cpus_free", &out->cpus_free);
	out->memory_total = inum(r, "memory_total");
	out->memory_allocated = inum(r, "memory_allocated");
	out->memory_free = inum(r, "memory_free");
	out->containers_unlimited = inum(r, "containers_unlimited");
	out->volumes_bytes_provisioned = inum(r, "volumes_bytes_provisioned");
	json_object_foreach(json_object_get(r, "runtimes"), k, v) {
		if (out->nrt == CRES_MAX_RT || !good_name(k) || !json_is_object(v))
			continue;
		snprintf(out->rt[out->nrt].name, sizeof(out->rt[0].name), "%s", k);
		num(v, "cpus_allocated", &out->rt[out->nrt].cpus);
		out->rt[out->nrt].memory = inum(v, "memory_allocated");
		out->nrt++;
	}
	json_object_foreach(json_object_get(r, "profiles"), k, v) {
		if (out->nprof == CRES_MAX_PROF || !good_name(k) || !json_is_object(v))
			continue;
		snprintf(out->prof[out->nprof].name, sizeof(out->prof[0].name), "%s", k);
		out->prof[out->nprof].bytes = inum(v, "capacity_bytes");
		out->nprof++;
	}
}

int cluster_info_parse(const char *val, size_t len, struct cinfo *ret, char *why, size_t wlen)
{
	json_error_t je;
	json_t *j = json_loadb(val, len, 0, &je), *r;
	const char *s;

	memset(ret, 0, sizeof(*ret));
	if (!j) {
		snprintf(why, wlen, "not JSON: %s", je.text);
		return -EINVAL;
	}
	if (!json_is_object(j)) {
		snprintf(why, wlen, "expected an object");
		json_decref(j);
		return -EINVAL;
	}
	if ((s = json_string_value(json_object_get(j, "version"))))
		snprintf(ret->version, sizeof(ret->version), "%s", s);
	if ((s = json_string_value(json_object_get(j, "boot_id"))))
		snprintf(ret->boot_id, sizeof(ret->boot_id), "%s", s);
	/* printable only: it is shown in a status file */
	for (char *p = ret->version; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	for (char *p = ret->boot_id; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	ret->started = inum(j, "started");
	ret->updated = inum(j, "updated");
	ret->has_counts = json_is_integer(json_object_get(j, "volumes"));
	ret->volumes = inum(j, "volumes");
	ret->containers = inum(j, "containers");
	r = json_object_get(j, "resources");
	if (json_is_object(r)) {
		ret->has_res = true;
		res_of(r, &ret->res);
	}
	json_decref(j);
	return 0;
}

int cluster_res_text(const struct cres *r, struct sbuf *out)
{
	char t[32], a[32], f[32];
	int e;

	cluster_fmt_cpus(r->cpus_total, t, sizeof(t));
	cluster_fmt_cpus(r->cpus_allocated, a, sizeof(a));
	cluster_fmt_cpus(r->cpus_free, f, sizeof(f));
	e = sbuf_printf(out,
			"cpus_total %s\nmemory_total %lld\ncpus_allocated %s\nmemory_allocated %lld\n"
			"containers_unlimited %lld\ncpus_free %s\nmemory_free %lld\n",
			t, r->memory_total, a, r->memory_allocated, r->containers_unlimited, f,
			r->memory_free);
	for (size_t i = 0; e >= 0 && i < r->nrt; i++) {
		cluster_fmt_cpus(r->rt[i].cpus, a, sizeof(a));
		e = sbuf_printf(out, "runtime.%s.cpus_allocated %s\nruntime.%s.memory_allocated %lld\n",
				r->rt[i].name, a, r->rt[i].name, r->rt[i].memory);
	}
	for (size_t i = 0; e >= 0 && i < r->nprof; i++)
		e = sbuf_printf(out, "profile.%s.capacity_bytes %lld\n", r->prof[i].name,
				r->prof[i].bytes);
	if (e >= 0)
		e = sbuf_printf(out, "volumes_bytes_provisioned %lld\n", r->volumes_bytes_provisioned);
	return e < 0 ? e : 0;
}
