/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_grpc: the response path of the sans-IO gRPC core. The input's first
 * byte picks a chunk size; the rest is what a server sends (its SETTINGS,
 * HEADERS, DATA, trailers, RST_STREAM, GOAWAY, PING...), fed in chunks to a
 * client session with three calls open (streams 1, 3, 5), our own output
 * drained between chunks. Aborts when a call completes other than exactly
 * once or an OK reply breaks the message cap; sanitizers catch the rest.
 * Seeds (corpus/grpc) are real nghttp2 server byte streams.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grpc.h"
#include "sbuf.h"

struct seen {
	int calls;
};

static void on_done(void *ud, const struct grpc_reply *r)
{
	struct seen *s = ud;

	s->calls++;
	if (!r->message)
		abort();
	if (r->code < 0 || r->code >= _GRPC_CODE_MAX)
		abort();
	if (r->code == GRPC_OK && r->body_len > GRPC_MAX_MESSAGE)
		abort();
	if (r->code != GRPC_OK && (r->body || r->body_len))
		abort();
	/* Touch every byte so ASan checks the borrowed buffer. */
	volatile uint8_t x = 0;
	for (size_t i = 0; i < r->body_len; i++)
		x ^= r->body[i];
	(void)x;
}

static void drain(struct grpc_session *s)
{
	struct sbuf out = SBUF_INIT(1u << 20);

	grpc_session_output(s, &out);
	sbuf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct grpc_session *s;
	struct grpc_call *calls[3];
	struct seen seen[3] = { 0 };
	static const uint8_t msg[] = { 0x0a, 0x01, 'x' };

	if (size < 1 || grpc_session_new(NULL, &s) < 0)
		return 0;
	size_t chunk = (size_t)data[0] + 1;
	data++, size--;
	for (int i = 0; i < 3; i++)
		if (grpc_session_submit(s, "/csi.v1.Identity/Probe", msg, i ? sizeof(msg) : 0,
					i * 1000, on_done, &seen[i], &calls[i]) < 0)
			abort();
	drain(s);
	for (size_t off = 0; off < size;) {
		size_t k = chunk < size - off ? chunk : size - off;

		if (grpc_session_recv(s, data + off, k) < 0)
			break;
		off += k;
		drain(s);
		/* A deadline in the middle of the reply, now and then. */
		if (off > size / 2 && chunk % 3 == 0 && seen[2].calls == 0)
			grpc_session_cancel(s, calls[2], GRPC_DEADLINE_EXCEEDED, "deadline");
	}
	grpc_session_fail_all(s, GRPC_UNAVAILABLE, "connection closed");
	grpc_session_free(s);
	for (int i = 0; i < 3; i++)
		if (seen[i].calls != 1)
			abort();
	return 0;
}
