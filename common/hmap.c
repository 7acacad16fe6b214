/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* hmap: linear-probing pointer table; see hmap.h. */
#include "hmap.h"

#include <errno.h>
#include <stdlib.h>

static char tomb_;
#define HMAP_TOMB ((void *)&tomb_)

void hmap_init(struct hmap *m)
{
	m->tab = NULL;
	m->cap = m->len = m->used = 0;
}

void hmap_free(struct hmap *m)
{
	free(m->tab);
	hmap_init(m);
}

uint64_t hmap_hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ull;	/* FNV-1a */

	while (*s) {
		h ^= (unsigned char)*s++;
		h *= 1099511628211ull;
	}
	return h;
}

uint64_t hmap_hash_u64(uint64_t x)
{
	x ^= x >> 33;	/* murmur3 finalizer */
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

void *hmap_get(const struct hmap *m, uint64_t hash, const void *key, hmap_eq_fn eq)
{
	if (!m->cap)
		return NULL;
	for (size_t i = hash & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct hmap_slot *s = &m->tab[i];

		if (!s->val)
			return NULL;
		if (s->val != HMAP_TOMB && s->hash == hash && eq(s->val, key))
			return s->val;
	}
}

/* Rehash into the smallest power of two from 16 that keeps the table at
 * most half full with one more entry. */
static int hmap_resize(struct hmap *m)
{
	size_t ncap = 16;
	struct hmap_slot *nt, *old = m->tab;
	size_t ocap = m->cap;

	while ((m->len + 1) * 2 > ncap)
		ncap *= 2;
	nt = calloc(ncap, sizeof(*nt));
	if (!nt)
		return -ENOMEM;
	m->tab = nt;
	m->cap = ncap;
	m->used = m->len;
	for (size_t i = 0; i < ocap; i++) {
		if (!old[i].val || old[i].val == HMAP_TOMB)
			continue;
		size_t j = old[i].hash & (ncap - 1);
		while (nt[j].val)
			j = (j + 1) & (ncap - 1);
		nt[j] = old[i];
	}
	free(old);
	return 0;
}

int hmap_put(struct hmap *m, uint64_t hash, void *val)
{
	size_t i;

	if ((m->used + 1) * 4 > m->cap * 3) {
		int r = hmap_resize(m);
		if (r < 0)
			return r;
	}
	for (i = hash & (m->cap - 1); m->tab[i].val && m->tab[i].val != HMAP_TOMB;
	     i = (i + 1) & (m->cap - 1))
		;
	if (!m->tab[i].val)
		m->used++;
	m->tab[i].hash = hash;
	m->tab[i].val = val;
	m->len++;
	return 0;
}

void *hmap_del(struct hmap *m, uint64_t hash, const void *key, hmap_eq_fn eq)
{
	if (!m->cap)
		return NULL;
	for (size_t i = hash & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct hmap_slot *s = &m->tab[i];
		void *v = s->val;

		if (!v)
			return NULL;
		if (v != HMAP_TOMB && s->hash == hash && eq(v, key)) {
			s->val = HMAP_TOMB;
			m->len--;
			/* a table emptied by mass removals gives its memory back
			 * (on failure it stays as it is, still correct) */
			if (m->cap > 64 && m->len * 8 < m->cap)
				hmap_resize(m);
			return v;
		}
	}
}

void *hmap_next(const struct hmap *m, size_t *pos)
{
	while (*pos < m->cap) {
		void *v = m->tab[(*pos)++].val;
		if (v && v != HMAP_TOMB)
			return v;
	}
	return NULL;
}
