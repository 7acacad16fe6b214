/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * pool: a region of its own for small blocks that outlive the objects
 * made around them (the operations a backend keeps), so they do not pin
 * the pages of malloc's heap that those objects leave free. Blocks are
 * handed out from 64 KiB chunks in order, and a chunk goes back to the
 * kernel when its last block is freed: blocks that die roughly in the
 * order they were made (kept operations, oldest trimmed first) cost their
 * size, and one long-lived block holds at most its chunk.
 *
 * A pool belongs to its owner (the backend); its blocks may be freed by
 * any thread, and after pool_close. Knows nothing of what it holds.
 * Under AddressSanitizer the blocks are malloc's, so its checks still
 * see them.
 */
#ifndef NODEFS_POOL_H
#define NODEFS_POOL_H

#include <stddef.h>

struct pool;

/* The largest block pool_alloc hands out. */
#define POOL_BLOCK_MAX 4096

/* A new pool, or NULL on OOM. */
struct pool *pool_new(void);
/* size bytes (at most POOL_BLOCK_MAX), zeroed and aligned as malloc
 * aligns, from p; NULL on OOM or when size is too large. Any thread. */
void *pool_alloc(struct pool *p, size_t size);
/* Give back a block pool_alloc made (NULL-safe). Any thread, before or
 * after its pool's pool_close. */
void pool_free(void *block);
/* The owner is done with p: it goes when its last block is freed. */
void pool_close(struct pool *p);

#endif
