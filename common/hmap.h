/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * hmap: an open-addressing hash table of pointers keyed by a caller-given
 * 64-bit hash and an equality callback. It stores values only; the key lives
 * inside the value. Not thread-safe: callers lock.
 */
#ifndef NODEFS_HMAP_H
#define NODEFS_HMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hmap_slot {
	uint64_t hash;
	void *val;	/* NULL: empty; HMAP_TOMB: deleted */
};

struct hmap {
	struct hmap_slot *tab;
	size_t cap;	/* power of two or 0 */
	size_t len;
	size_t used;	/* len + tombstones */
};

typedef bool (*hmap_eq_fn)(const void *val, const void *key);

void hmap_init(struct hmap *m);
void hmap_free(struct hmap *m);
void *hmap_get(const struct hmap *m, uint64_t hash, const void *key, hmap_eq_fn eq);
/* Insert val (its key must not be present already). -ENOMEM. */
int hmap_put(struct hmap *m, uint64_t hash, void *val);
/* Remove and return the value matching key, or NULL. A table emptied to
 * an eighth shrinks: an iteration restarts after a removal. */
void *hmap_del(struct hmap *m, uint64_t hash, const void *key, hmap_eq_fn eq);

/* Iterate: start with *pos = 0; NULL at the end. No changes meanwhile. */
void *hmap_next(const struct hmap *m, size_t *pos);

uint64_t hmap_hash_str(const char *s);
uint64_t hmap_hash_u64(uint64_t x);

#endif
