/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * store-jentry: the bytes of STATE_DIR/journal's entries, encoded and
 * decoded. Pure functions (no I/O), so the decoder is fuzzed
 * (tests/fuzz/fuzz_journal.c).
 *
 * An entry is a 24-byte header and a payload:
 *   0  "NFJ1"
 *   4  payload length, u32 little-endian (at most STORE_JENTRY_MAX)
 *   8  sequence number, u64 little-endian (one more than the entry before)
 *   16 CRC-32C of the payload
 *   20 CRC-32C of bytes 0 to 19
 * payload: 'P' or 'D', the kind's length (a byte) and bytes, the name's
 * length (a byte) and bytes, then for 'P' the record's text.
 * A torn or stale tail fails a check (a CRC, the length, the order of
 * sequence numbers is the reader's) and ends the journal there.
 *
 * Must not know: files, records' contents, objects.
 */
#include "store-internal.h"

#include <errno.h>
#include <string.h>

#include "sbuf.h"

static uint32_t crc_table[256];

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		crc_table[i] = c;
	}
}

uint32_t store_crc32c(const void *p, size_t n)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	const unsigned char *b = p;
	uint32_t c = 0xFFFFFFFFu;

	pthread_once(&once, crc_init);
	while (n--)
		c = crc_table[(c ^ *b++) & 0xFF] ^ (c >> 8);
	return c ^ 0xFFFFFFFFu;
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const unsigned char *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

void store_jentry_seal(unsigned char *hdr, unsigned long long seq)
{
	put32(hdr + 8, (uint32_t)seq);
	put32(hdr + 12, (uint32_t)(seq >> 32));
	put32(hdr + 20, store_crc32c(hdr, 20));
}

int store_jentry_encode(struct sbuf *out, char op, const char *kind, const char *name,
			const char *text, size_t len, unsigned long long seq)
{
	size_t kl = strlen(kind), nl = strlen(name), start = out->len, plen;
	unsigned char hdr[STORE_JHDR] = { 'N', 'F', 'J', '1' };
	unsigned char *p;
	int r;

	if ((op != 'P' && op != 'D') || kl == 0 || kl >= sizeof(((struct store_jentry *)0)->kind) ||
	    nl == 0 || nl > 255)
		return -EINVAL;
	if (op == 'D')
		len = 0;
	plen = 3 + kl + nl + len;
	if (plen > STORE_JENTRY_MAX)
		return -EINVAL;
	if ((r = sbuf_reserve(out, STORE_JHDR + plen)) < 0 || (r = sbuf_add(out, hdr, sizeof(hdr))) < 0 ||
	    (r = sbuf_addc(out, op)) < 0 || (r = sbuf_addc(out, (char)kl)) < 0 ||
	    (r = sbuf_add(out, kind, kl)) < 0 || (r = sbuf_addc(out, (char)nl)) < 0 ||
	    (r = sbuf_add(out, name, nl)) < 0 || (len && (r = sbuf_add(out, text, len)) < 0)) {
		out->len = start;
		return r;
	}
	p = (unsigned char *)out->buf + start;
	put32(p + 4, (uint32_t)plen);
	put32(p + 16, store_crc32c(p + STORE_JHDR, plen));
	store_jentry_seal(p, seq);
	return 0;
}

int store_jentry_next(const unsigned char *buf, size_t len, size_t *pos, struct store_jentry *ret)
{
	const unsigned char *h, *p;
	size_t at = *pos, plen, kl, nl;

	if (at > len || len - at < STORE_JHDR)
		return 0;
	h = buf + at;
	if (memcmp(h, "NFJ1", 4) != 0 || get32(h + 20) != store_crc32c(h, 20))
		return 0;
	plen = get32(h + 4);
	if (plen < 5 || plen > STORE_JENTRY_MAX || len - at - STORE_JHDR < plen)
		return 0;
	p = h + STORE_JHDR;
	if (get32(h + 16) != store_crc32c(p, plen))
		return 0;
	if (p[0] != 'P' && p[0] != 'D')
		return 0;
	kl = p[1];
	if (kl == 0 || kl >= sizeof(ret->kind) || 2 + kl + 1 > plen)
		return 0;
	nl = p[2 + kl];
	if (nl == 0 || 3 + kl + nl > plen)
		return 0;
	if (p[0] == 'D' && 3 + kl + nl != plen)
		return 0;
	memset(ret, 0, sizeof(*ret));
	ret->op = (char)p[0];
	memcpy(ret->kind, p + 2, kl);
	memcpy(ret->name, p + 3 + kl, nl);
	if (memchr(ret->kind, '\0', kl) || memchr(ret->name, '\0', nl))
		return 0;
	ret->text = (const char *)p + 3 + kl + nl;
	ret->len = plen - 3 - kl - nl;
	ret->seq = get64(h + 8);
	*pos = at + STORE_JHDR + plen;
	return 1;
}
