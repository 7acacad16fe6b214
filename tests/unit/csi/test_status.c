/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The one gRPC status table: codes to errno, names, the HTTP fallback, which
 * codes are retried; plus grpc-message percent-decoding, grpc-timeout
 * formatting, the RPC table and both backoff functions.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "csi.h"
#include "grpc.h"
#include "h2conn.h"

Test(status, errno_table)
{
	static const struct { int code, err; } table[] = {
		{ GRPC_OK, 0 },
		{ GRPC_CANCELLED, ECANCELED },
		{ GRPC_UNKNOWN, EIO },
		{ GRPC_INVALID_ARGUMENT, EINVAL },
		{ GRPC_DEADLINE_EXCEEDED, ETIMEDOUT },
		{ GRPC_NOT_FOUND, ENOENT },
		{ GRPC_ALREADY_EXISTS, EEXIST },
		{ GRPC_PERMISSION_DENIED, EACCES },
		{ GRPC_RESOURCE_EXHAUSTED, ENOSPC },
		{ GRPC_FAILED_PRECONDITION, EBUSY },
		{ GRPC_ABORTED, EBUSY },
		{ GRPC_OUT_OF_RANGE, EIO },
		{ GRPC_UNIMPLEMENTED, EOPNOTSUPP },
		{ GRPC_INTERNAL, EIO },
		{ GRPC_UNAVAILABLE, EAGAIN },
		{ GRPC_DATA_LOSS, EIO },
		{ GRPC_UNAUTHENTICATED, EACCES },
		{ 17, EIO },
		{ -1, EIO },
		{ 999, EIO },
	};
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		cr_expect_eq(grpc_code_to_errno(table[i].code), table[i].err, "code %d", table[i].code);
}

Test(status, names_round_trip)
{
	for (int c = 0; c < _GRPC_CODE_MAX; c++)
		cr_expect_eq(grpc_code_from_string(grpc_code_to_string(c)), c);
	cr_expect_str_eq(grpc_code_to_string(GRPC_FAILED_PRECONDITION), "FAILED_PRECONDITION");
	cr_expect_str_eq(grpc_code_to_string(42), "UNKNOWN");
	cr_expect_eq(grpc_code_from_string("NOPE"), -EINVAL);
}

Test(status, http_fallback)
{
	cr_expect_eq(grpc_code_from_http(400), GRPC_INTERNAL);
	cr_expect_eq(grpc_code_from_http(401), GRPC_UNAUTHENTICATED);
	cr_expect_eq(grpc_code_from_http(403), GRPC_PERMISSION_DENIED);
	cr_expect_eq(grpc_code_from_http(404), GRPC_UNIMPLEMENTED);
	cr_expect_eq(grpc_code_from_http(429), GRPC_UNAVAILABLE);
	cr_expect_eq(grpc_code_from_http(502), GRPC_UNAVAILABLE);
	cr_expect_eq(grpc_code_from_http(503), GRPC_UNAVAILABLE);
	cr_expect_eq(grpc_code_from_http(504), GRPC_UNAVAILABLE);
	cr_expect_eq(grpc_code_from_http(500), GRPC_UNKNOWN);
	cr_expect_eq(grpc_code_from_http(200), GRPC_UNKNOWN);
}

Test(status, retryable_codes)
{
	for (int c = 0; c < _GRPC_CODE_MAX; c++) {
		bool want = c == GRPC_UNAVAILABLE || c == GRPC_DEADLINE_EXCEEDED
			|| c == GRPC_ABORTED || c == GRPC_RESOURCE_EXHAUSTED;
		cr_expect_eq(csi_code_retryable(c), want, "%s", grpc_code_to_string(c));
	}
}

Test(status, percent_decoding)
{
	char out[32];

	cr_expect_eq(grpc_percent_decode("a%20b", 5, out, sizeof(out)), 3);
	cr_expect_str_eq(out, "a b");
	grpc_percent_decode("%C3%BC%25", 9, out, sizeof(out));
	cr_expect_str_eq(out, "\xc3\xbc%");
	grpc_percent_decode("100%", 4, out, sizeof(out));
	cr_expect_str_eq(out, "100%");
	grpc_percent_decode("%4", 2, out, sizeof(out));
	cr_expect_str_eq(out, "%4");
	grpc_percent_decode("%g1x", 4, out, sizeof(out));
	cr_expect_str_eq(out, "%g1x");
	/* Truncation keeps the NUL inside the buffer. */
	cr_expect_eq(grpc_percent_decode("abcdef", 6, out, 4), 3);
	cr_expect_str_eq(out, "abc");
	cr_expect_eq(grpc_percent_decode("abc", 3, out, 0), 0);
}

Test(status, timeout_format)
{
	char t[16];

	grpc_timeout_format(250, t);
	cr_expect_str_eq(t, "250m");
	grpc_timeout_format(99999999, t);
	cr_expect_str_eq(t, "99999999m");
	grpc_timeout_format(100000000, t);
	cr_expect_str_eq(t, "100000S");
	grpc_timeout_format(UINT64_MAX, t);
	cr_expect_eq(strlen(t), 9);
}

Test(status, rpc_table)
{
	cr_expect_str_eq(csi_rpc_to_string(CSI_RPC_PROBE), "Probe");
	cr_expect_str_eq(csi_rpc_path(CSI_RPC_PROBE), "/csi.v1.Identity/Probe");
	cr_expect_str_eq(csi_rpc_path(CSI_RPC_CREATE_VOLUME), "/csi.v1.Controller/CreateVolume");
	cr_expect_str_eq(csi_rpc_path(CSI_RPC_NODE_GET_INFO), "/csi.v1.Node/NodeGetInfo");
	for (int i = 0; i < _CSI_RPC_MAX; i++) {
		cr_expect_eq(csi_rpc_from_string(csi_rpc_to_string(i)), i);
		/* Request and response types match the method name. */
		char want[96];
		snprintf(want, sizeof(want), "%sRequest", csi_rpc_to_string(i));
		cr_expect_str_eq(csi_rpc_request_descriptor(i)->short_name, want);
		snprintf(want, sizeof(want), "%sResponse", csi_rpc_to_string(i));
		cr_expect_str_eq(csi_rpc_response_descriptor(i)->short_name, want);
	}
	cr_expect_null(csi_rpc_to_string(_CSI_RPC_MAX));
	cr_expect_eq(csi_rpc_from_string("CreateSnapshot"), CSI_RPC_CREATE_SNAPSHOT);
	cr_expect_str_eq(csi_rpc_path(CSI_RPC_CONTROLLER_MODIFY_VOLUME), "/csi.v1.Controller/ControllerModifyVolume");
	cr_expect_eq(csi_rpc_from_string("GetSnapshot"), -EINVAL);
	cr_expect_str_eq(csi_health_to_string(CSI_HEALTH_NOT_READY), "NOT_READY");
}

Test(backoff, retry_delay_doubles_with_jitter_and_cap)
{
	struct csi_retry r = { .backoff_ms = 100, .max_ms = 1000, .max_attempts = 10 };
	uint64_t rng = 42;

	for (int rep = 0; rep < 200; rep++) {
		uint64_t want = 100;

		for (unsigned a = 1; a <= 8; a++) {
			uint64_t d = csi_retry_delay_ms(&r, a, &rng);

			cr_assert_geq(d, want / 2, "attempt %u: %llu < %llu", a, (unsigned long long)d,
				      (unsigned long long)want / 2);
			cr_assert_leq(d, want, "attempt %u: %llu > %llu", a, (unsigned long long)d,
				      (unsigned long long)want);
			want = want * 2 > 1000 ? 1000 : want * 2;
		}
	}
	/* Randomized: the same attempt does not always wait the same. */
	uint64_t first = csi_retry_delay_ms(&r, 3, &rng);
	bool differs = false;
	for (int i = 0; i < 50 && !differs; i++)
		differs = csi_retry_delay_ms(&r, 3, &rng) != first;
	cr_assert(differs);
	/* Defaults apply for zeros; huge attempts do not overflow. */
	struct csi_retry z = { 0 };
	uint64_t d = csi_retry_delay_ms(&z, 1, &rng);
	cr_assert(d >= 500 && d <= 1000);
	d = csi_retry_delay_ms(&z, 1000, &rng);
	cr_assert(d >= 60000 && d <= 120000);
}

Test(backoff, reconnect_backoff_bounds)
{
	uint64_t rng = 7;

	for (unsigned a = 0; a < 30; a++) {
		double want = 1000;

		for (unsigned i = 0; i < a; i++)
			want = want * 1.6 > 120000 ? 120000 : want * 1.6;
		for (int rep = 0; rep < 50; rep++) {
			uint64_t d = h2_backoff_ms(1000, 120000, 1.6, 0.2, a, &rng);

			cr_assert_geq((double)d, want * 0.8 - 1, "attempt %u", a);
			cr_assert_leq(d, 120000);
			cr_assert_leq((double)d, want * 1.2 + 1);
		}
	}
}
