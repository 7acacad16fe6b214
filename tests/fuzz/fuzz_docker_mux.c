/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_docker_mux: the decoder of Docker's multiplexed log/exec streams
 * (8-byte frame headers) and the tail sink that keeps the last bytes of logs,
 * from runtimes/docker/docker-json.c. The first byte gives the chunk size the
 * stream is fed in and the tail window; the result must not depend on how the
 * stream was cut, and the tail must equal the end of the full output.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "docker-internal.h"

struct out {
	char *buf;
	size_t len, cap;
};

static int out_sink(void *ctx, int stream, const char *p, size_t n)
{
	struct out *o = ctx;

	if (stream < 0 || stream > 2)
		abort();
	if (o->len + n > o->cap)
		return -7;	/* more payload than input: impossible */
	memcpy(o->buf + o->len, p, n);
	o->len += n;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct out whole = { 0 }, cut = { 0 };
	struct docker_mux m1, m2;
	struct docker_tail tail;
	size_t step, window;
	int r1, r2 = 0;

	if (size < 1)
		return 0;
	step = (size_t)(data[0] & 0x0f) + 1;
	window = (size_t)(data[0] >> 4) + 1;
	data++;
	size--;
	whole.cap = cut.cap = size;
	whole.buf = malloc(size + 1);
	cut.buf = malloc(size + 1);
	if (!whole.buf || !cut.buf)
		goto out;

	docker_mux_init(&m1);
	r1 = docker_mux_feed(&m1, (const char *)data, size, out_sink, &whole);
	if (r1 == -7)
		abort();
	docker_mux_init(&m2);
	for (size_t off = 0; off < size && r2 == 0; off += step) {
		size_t k = size - off < step ? size - off : step;

		r2 = docker_mux_feed(&m2, (const char *)data + off, k, out_sink, &cut);
	}
	/* same verdict and same bytes up to the first bad header */
	if (r1 != r2 || whole.len != cut.len || memcmp(whole.buf, cut.buf, whole.len) != 0)
		abort();
	if (r1 == 0 && docker_mux_finish(&m1) != docker_mux_finish(&m2))
		abort();

	if (docker_tail_init(&tail, window) == 0) {
		const char *p;
		size_t len, want;

		for (size_t off = 0; off < whole.len; off += step) {
			size_t k = whole.len - off < step ? whole.len - off : step;

			docker_tail_sink(&tail, 1, whole.buf + off, k);
		}
		p = docker_tail_data(&tail, &len);
		want = whole.len < window ? whole.len : window;
		if (len != want || memcmp(p, whole.buf + whole.len - want, want) != 0)
			abort();
		docker_tail_free(&tail);
	}
out:
	free(whole.buf);
	free(cut.buf);
	return 0;
}
