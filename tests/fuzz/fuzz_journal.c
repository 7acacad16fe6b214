/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_journal: the decoder of STATE_DIR/journal's entries
 * (backend/store/store-jentry.c), which a start runs over whatever a crash
 * left. Every entry it accepts must lie within the input, carry a known
 * operation, a kind and a name without NUL, and encode back to the same
 * bytes; the decoder must always move forward. Sanitizers catch the rest.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sbuf.h"
#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t pos = 0;
	struct store_jentry e;

	for (;;) {
		size_t at = pos;
		struct sbuf sb = SBUF_INIT((8u << 20));

		if (store_jentry_next(data, size, &pos, &e) != 1) {
			if (pos != at)
				abort();	/* a refusal moves nothing */
			break;
		}
		if (pos <= at || pos > size || (e.op != 'P' && e.op != 'D') || !e.kind[0] ||
		    !e.name[0])
			abort();
		if (e.op == 'P' && ((const uint8_t *)e.text < data + at ||
				    (const uint8_t *)e.text + e.len > data + pos))
			abort();
		if (store_jentry_encode(&sb, e.op, e.kind, e.name, e.text, e.len, e.seq) < 0 ||
		    sb.len != pos - at || memcmp(sb.buf, data + at, sb.len) != 0)
			abort();
		sbuf_free(&sb);
	}
	return 0;
}
