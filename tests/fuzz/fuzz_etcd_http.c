/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_etcd_http: the HTTP/1.1 response parser nodefs speaks to a plain
 * http:// etcd member with (ehttp_feed in etcd/etcd-http.c). The first
 * byte gives the chunk size the response is fed in; the result, the status
 * and the body must not depend on how the bytes were cut.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "etcd-http.h"
#include "nerr.h"

struct seen {
	uint64_t sum;
	size_t n;
};

static int on_body(void *ctx, const char *p, size_t n)
{
	struct seen *s = ctx;

	for (size_t i = 0; i < n; i++)
		s->sum = s->sum * 31 + (unsigned char)p[i];
	s->n += n;
	return 0;
}

static int feed(const uint8_t *d, size_t len, size_t step, struct seen *s, int *ret_status)
{
	struct ehttp_resp r;
	struct nerr err = { 0 };
	int k = 0;

	ehttp_resp_init(&r);
	for (size_t o = 0; o < len && k == 0; o += step) {
		size_t used = 0, n = len - o < step ? len - o : step;
		k = ehttp_feed(&r, (const char *)d + o, n, &used, on_body, s, &err);
		if (k == 0 && used != n)
			abort();
	}
	if (k == 0)
		k = ehttp_eof(&r) == 1 ? 1 : 3;
	*ret_status = r.status;
	return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct seen a = { 0 }, b = { 0 };
	int sa, sb;

	if (size < 1)
		return 0;
	size_t step = data[0] % 64 + 1;
	int r1 = feed(data + 1, size - 1, size, &a, &sa);
	int r2 = feed(data + 1, size - 1, step, &b, &sb);
	if (r1 != r2 || sa != sb || a.n != b.n || a.sum != b.sum)
		abort();
	return 0;
}
