/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * hist: a latency histogram any thread adds to without a lock, rendered as
 * one Prometheus histogram series (cumulative _bucket lines, +Inf, _sum,
 * _count). The bucket bounds are the caller's (seconds, ascending, at most
 * HIST_MAX); they are passed to both calls. Knows nothing of what is timed.
 */
#ifndef NODEFS_HIST_H
#define NODEFS_HIST_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct sbuf;

#define HIST_MAX 16

struct hist {
	atomic_ullong count;
	atomic_ullong sum_ns;
	atomic_ullong bucket[HIST_MAX];	/* one per observation, not cumulative */
};

void hist_observe(struct hist *h, const double *le, size_t n, uint64_t ns);
/* NAME_bucket{LABELS,le="..."} ... NAME_count{LABELS}; labels are written
 * as given (label="value" pairs, escaped by the caller). -E2BIG/-ENOMEM. */
int hist_render(struct sbuf *out, const char *name, const char *labels, const double *le,
		size_t n, const struct hist *h);

#endif
