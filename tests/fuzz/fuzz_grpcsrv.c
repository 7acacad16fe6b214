/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_grpcsrv: the request path of the sans-IO gRPC server core and the
 * protobuf-c decoding of CSI requests, as nodefs-csi-local runs them. The
 * input's first byte picks a chunk size and whether requests are answered
 * at once or after the whole input (as a worker would, later); the rest is
 * what a client sends (preface, SETTINGS, HEADERS, DATA, RST_STREAM,
 * GOAWAY, PING...), fed in chunks to a server session, its output drained
 * between chunks. Each complete request's :path is looked up in the CSI
 * service descriptors and its message decoded with that method's input
 * type, then answered OK (the re-encoded message) or with an error.
 * Aborts when a request reaches the callback twice, breaks the message
 * cap, or is never answerable; sanitizers catch the rest. Seeds
 * (corpus/grpcsrv) are client byte streams for every Identity, Controller
 * and Node method, malformed ones included.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "csi.pb-c.h"
#include "grpc.h"
#include "grpcsrv.h"
#include "sbuf.h"

#define HELD_MAX 256

struct fz {
	struct grpc_srv *s;
	struct grpc_srv_call *held[HELD_MAX];
	unsigned nheld;
	bool later;
};

static const ProtobufCServiceDescriptor *const services[] = {
	&csi__v1__identity__descriptor,
	&csi__v1__controller__descriptor,
	&csi__v1__node__descriptor,
};

static const ProtobufCMessageDescriptor *input_of(const char *path)
{
	static const char pre[] = "/csi.v1.";

	if (strncmp(path, pre, sizeof(pre) - 1) != 0)
		return NULL;
	path += sizeof(pre) - 1;
	for (size_t i = 0; i < sizeof(services) / sizeof(services[0]); i++) {
		const ProtobufCServiceDescriptor *sd = services[i];
		size_t n = strlen(sd->short_name);

		if (strncmp(path, sd->short_name, n) != 0 || path[n] != '/')
			continue;
		for (unsigned m = 0; m < sd->n_methods; m++)
			if (strcmp(path + n + 1, sd->methods[m].name) == 0)
				return sd->methods[m].input;
	}
	return NULL;
}

static void answer(struct grpc_srv *s, struct grpc_srv_call *call, const char *path,
		   const uint8_t *msg, size_t len)
{
	const ProtobufCMessageDescriptor *d = input_of(path);

	if (!d) {
		grpc_srv_reply(s, call, GRPC_UNIMPLEMENTED, "unknown method", NULL, 0);
		return;
	}
	ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, msg);
	if (!m) {
		grpc_srv_reply(s, call, GRPC_INVALID_ARGUMENT, "request does not decode", NULL, 0);
		return;
	}
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = malloc(n ? n : 1);
	if (!buf)
		abort();
	if (protobuf_c_message_pack(m, buf) != n)
		abort();
	protobuf_c_message_free_unpacked(m, NULL);
	grpc_srv_reply(s, call, GRPC_OK, NULL, buf, n);
	free(buf);
}

static void on_request(void *ud, struct grpc_srv_call *call, const char *path,
		       const uint8_t *msg, size_t len, uint64_t timeout_ms)
{
	struct fz *f = ud;

	if (len > GRPC_MAX_MESSAGE || !path || path[0] != '/')
		abort();
	for (unsigned i = 0; i < f->nheld; i++)
		if (f->held[i] == call)
			abort();	/* handed over twice */
	if (!f->later || f->nheld == HELD_MAX) {
		answer(f->s, call, path, msg, len);
		return;
	}
	/* Answer after the rest of the input, as a worker would: the
	 * message is decoded now, while it is valid, and the answer waits. */
	const ProtobufCMessageDescriptor *d = input_of(path);
	ProtobufCMessage *m = d ? protobuf_c_message_unpack(d, NULL, len, msg) : NULL;
	protobuf_c_message_free_unpacked(m, NULL);
	f->held[f->nheld++] = call;
}

static void drain(struct grpc_srv *s)
{
	struct sbuf out = SBUF_INIT(64u << 20);

	grpc_srv_output(s, &out);
	sbuf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f = { 0 };

	if (size < 1 || grpc_srv_new(8, on_request, &f, &f.s) < 0)
		return 0;
	size_t chunk = (size_t)(data[0] & 0x7f) + 1;
	f.later = data[0] & 0x80;
	data++, size--;
	drain(f.s);
	while (size) {
		size_t n = size < chunk ? size : chunk;

		if (grpc_srv_recv(f.s, data, n) < 0)
			break;
		drain(f.s);
		data += n, size -= n;
	}
	for (unsigned i = 0; i < f.nheld; i++)
		grpc_srv_reply(f.s, f.held[i], i % 2 ? GRPC_OK : GRPC_NOT_FOUND, "later", "\x08\x01", i % 2 ? 2 : 0);
	if (grpc_srv_pending(f.s) != 0)
		abort();
	drain(f.s);
	grpc_srv_free(f.s);
	return 0;
}
