/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sha256: FIPS 180-4 SHA-256, streaming; see fetch.h. Pure. Blocks go
 * through the CPU's SHA extensions where it has them (x86 SHA-NI: about
 * ten times the portable code, which a download would otherwise wait on),
 * else through the portable rounds. */
#include "fetch.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_SHANI_CODE 1
#endif

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void block_portable(struct sha256 *s, const unsigned char *p)
{
	uint32_t w[64], a, b, c, d, e, f, g, h;

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);

		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	a = s->h[0]; b = s->h[1]; c = s->h[2]; d = s->h[3];
	e = s->h[4]; f = s->h[5]; g = s->h[6]; h = s->h[7];
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
		uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));

		h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
	}
	s->h[0] += a; s->h[1] += b; s->h[2] += c; s->h[3] += d;
	s->h[4] += e; s->h[5] += f; s->h[6] += g; s->h[7] += h;
}

#ifdef HAVE_SHANI_CODE
/* n blocks of 64 bytes with SHA-NI: four rounds a step, the message
 * schedule with sha256msg1/msg2 (W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15])
 * + W[t-16]), the state kept as ABEF and CDGH as the instructions want. */
__attribute__((target("sha,sse4.1,ssse3")))
static void blocks_shani(uint32_t h[8], const unsigned char *p, size_t n)
{
	const __m128i mask = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
	__m128i s0, s1, t, w[4];

	t = _mm_loadu_si128((const __m128i *)&h[0]);
	s1 = _mm_loadu_si128((const __m128i *)&h[4]);
	t = _mm_shuffle_epi32(t, 0xB1);
	s1 = _mm_shuffle_epi32(s1, 0x1B);
	s0 = _mm_alignr_epi8(t, s1, 8);
	s1 = _mm_blend_epi16(s1, t, 0xF0);
	for (; n; n--, p += 64) {
		__m128i abef = s0, cdgh = s1;

		/* Intel's order: W[j+1]'s msg2 between step j's two rnds2, and
		 * msg1 three steps ahead, so the schedule is off the rounds'
		 * critical path; unrolled, so w[] stays in registers (rolled,
		 * with the whole schedule before each step: 1,234 MB/s of CPU
		 * time against 1,367 now, OpenSSL 1,060 to 1,400 here) */
#pragma GCC unroll 16
		for (int i = 0; i < 16; i++) {
			__m128i m;

			if (i < 4)
				w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), mask);
			m = _mm_add_epi32(w[i & 3], _mm_loadu_si128((const __m128i *)&K[4 * i]));
			s1 = _mm_sha256rnds2_epu32(s1, s0, m);
			if (i >= 3 && i < 15) {
				/* W[i+1]: its slot holds msg1(W[i-3], W[i-2]) */
				__m128i t2 = _mm_alignr_epi8(w[i & 3], w[(i + 3) & 3], 4);

				w[(i + 1) & 3] = _mm_sha256msg2_epu32(_mm_add_epi32(w[(i + 1) & 3], t2),
								      w[i & 3]);
			}
			m = _mm_shuffle_epi32(m, 0x0E);
			s0 = _mm_sha256rnds2_epu32(s0, s1, m);
			if (i >= 1 && i <= 12)	/* msg1 for W[i+3], in W[i-1]'s slot */
				w[(i + 3) & 3] = _mm_sha256msg1_epu32(w[(i + 3) & 3], w[i & 3]);
		}
		s0 = _mm_add_epi32(s0, abef);
		s1 = _mm_add_epi32(s1, cdgh);
	}
	t = _mm_shuffle_epi32(s0, 0x1B);
	s1 = _mm_shuffle_epi32(s1, 0xB1);
	s0 = _mm_blend_epi16(t, s1, 0xF0);
	s1 = _mm_alignr_epi8(s1, t, 8);
	_mm_storeu_si128((__m128i *)&h[0], s0);
	_mm_storeu_si128((__m128i *)&h[4], s1);
}

static bool have_shani(void)
{
	unsigned a, b, c, d;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 19)) || !(c & (1u << 9)))
		return false;	/* SSE4.1, SSSE3 */
	return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));
}
#endif

/* n whole blocks. NODEFS_SHA256_PORTABLE set in the environment keeps to
 * the portable code (the unit test runs both). */
static void blocks(struct sha256 *s, const unsigned char *p, size_t n)
{
#ifdef HAVE_SHANI_CODE
	if (s->shani) {
		blocks_shani(s->h, p, n);
		return;
	}
#endif
	for (; n; n--, p += 64)
		block_portable(s, p);
}

void sha256_init(struct sha256 *s)
{
	static const uint32_t h0[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
					0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };

	memcpy(s->h, h0, sizeof(h0));
	s->len = 0;
	s->n = 0;
	s->shani = false;
#ifdef HAVE_SHANI_CODE
	s->shani = have_shani() && !getenv("NODEFS_SHA256_PORTABLE");
#endif
}

void sha256_update(struct sha256 *s, const void *data, size_t len)
{
	const unsigned char *p = data;

	s->len += len;
	if (s->n) {
		size_t k = 64 - s->n < len ? 64 - s->n : len;

		memcpy(s->buf + s->n, p, k);
		s->n += k;
		p += k;
		len -= k;
		if (s->n < 64)
			return;
		blocks(s, s->buf, 1);
		s->n = 0;
	}
	blocks(s, p, len / 64);
	p += len / 64 * 64;
	len %= 64;
	memcpy(s->buf, p, len);
	s->n = len;
}

void sha256_hex(struct sha256 *s, char out[65])
{
	static const char hex[] = "0123456789abcdef";
	uint64_t bits = s->len * 8;
	unsigned char pad[72] = { 0x80 };
	size_t padn = (s->n < 56 ? 56 : 120) - s->n;

	for (int i = 0; i < 8; i++)
		pad[padn + i] = (unsigned char)(bits >> (56 - 8 * i));
	sha256_update(s, pad, padn + 8);
	for (int i = 0; i < 8; i++)
		for (int k = 0; k < 4; k++) {
			unsigned char b = (unsigned char)(s->h[i] >> (24 - 8 * k));

			out[8 * i + 2 * k] = hex[b >> 4];
			out[8 * i + 2 * k + 1] = hex[b & 15];
		}
	out[64] = '\0';
}
