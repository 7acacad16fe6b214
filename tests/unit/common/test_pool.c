/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of common/pool: blocks come zeroed and aligned, a chunk goes
 * back to the kernel with its last block (unmapped, as /proc/self/maps
 * shows), a long-lived block holds its chunk only, and blocks freed after
 * pool_close take the pool with the last one. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pool.h"

/* Whether addr is in a mapping of this process. */
static bool mapped(const void *addr)
{
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned long lo, hi, a = (unsigned long)(uintptr_t)addr;
	char line[512];
	bool in = false;

	cr_assert_not_null(f);
	while (!in && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && a >= lo && a < hi)
			in = true;
	fclose(f);
	return in;
}

Test(pool, blocks_zeroed_aligned_and_bounded)
{
	struct pool *p = pool_new();
	unsigned char *a, *b;

	cr_assert_not_null(p);
	a = pool_alloc(p, 100);
	cr_assert_not_null(a);
	memset(a, 0xff, 100);
	pool_free(a);
	b = pool_alloc(p, 100);	/* the emptied chunk is started again */
	cr_assert_not_null(b);
	for (size_t i = 0; i < 100; i++)
		cr_assert_eq(b[i], 0);
	cr_assert_eq((uintptr_t)b % _Alignof(max_align_t), 0);
	cr_assert_null(pool_alloc(p, POOL_BLOCK_MAX + 1));
	cr_assert_null(pool_alloc(p, 0));
	pool_free(b);
	pool_free(NULL);
	pool_close(p);
}

/* Under AddressSanitizer blocks are its own (pool.c), kept mapped in its
 * quarantine. */
#if defined(__SANITIZE_ADDRESS__)
#define CHUNKS false
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHUNKS false
#endif
#endif
#ifndef CHUNKS
#define CHUNKS true
#endif

Test(pool, a_chunk_goes_with_its_last_block)
{
	struct pool *p = pool_new();
	void *first, *keep, *v[400];

	cr_assert_not_null(p);
	first = pool_alloc(p, 1000);
	for (size_t i = 0; i < 400; i++)
		cr_assert_not_null(v[i] = pool_alloc(p, 1000));	/* several chunks */
	keep = v[399];
	/* the first chunk's blocks freed (64 of 1,008 bytes fill one): it is
	 * unmapped */
	pool_free(first);
	for (size_t i = 0; i < 100; i++)
		pool_free(v[i]);
	cr_assert(!CHUNKS || !mapped(first));
	for (size_t i = 100; i < 399; i++)
		pool_free(v[i]);
	cr_assert(mapped(keep));	/* the current chunk, held by keep */
	/* closed with a block out: the pool goes with it */
	pool_close(p);
	cr_assert(mapped(keep));
	pool_free(keep);
	cr_assert(!CHUNKS || !mapped(keep));
}

Test(pool, close_when_empty)
{
	struct pool *p = pool_new();

	cr_assert_not_null(p);
	pool_free(pool_alloc(p, 10));
	pool_close(p);
	pool_close(NULL);
}
