/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hist: lock-free latency histograms; see hist.h. */
#include "hist.h"

#include "sbuf.h"

void hist_observe(struct hist *h, const double *le, size_t n, uint64_t ns)
{
	double s = (double)ns / 1e9;

	for (size_t k = 0; k < n && k < HIST_MAX; k++)
		if (s <= le[k]) {
			atomic_fetch_add_explicit(&h->bucket[k], 1, memory_order_relaxed);
			break;
		}
	atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}

int hist_render(struct sbuf *out, const char *name, const char *labels, const double *le,
		size_t n, const struct hist *h)
{
	unsigned long long cum = 0, count = atomic_load(&h->count);
	const char *sep = labels[0] ? "," : "";
	int r = 0;

	for (size_t k = 0; r >= 0 && k < n && k < HIST_MAX; k++) {
		cum += atomic_load(&h->bucket[k]);
		r = sbuf_printf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, le[k], cum);
	}
	/* read while others add: the count may lag the buckets */
	if (cum > count)
		count = cum;
	if (r >= 0)
		r = sbuf_printf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n%s_sum{%s} %.9f\n"
				"%s_count{%s} %llu\n", name, labels, sep, count, name, labels,
				(double)atomic_load(&h->sum_ns) / 1e9, name, labels, count);
	return r;
}
