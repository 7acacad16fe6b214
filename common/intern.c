/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * intern: shared refcounted strings; see intern.h. An entry is its count,
 * its hash and its bytes in one allocation, so a holder's pointer leads
 * back to the entry without a lookup.
 * Must not know: what the strings name.
 */
#include "intern.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct ientry {
	size_t ref;	/* under the table's lock */
	uint64_t hash;
	char s[];
};

static struct ientry *entry_of(const char *s)
{
	return (struct ientry *)(void *)(s - offsetof(struct ientry, s));
}

static bool ent_eq(const void *val, const void *key)
{
	return strcmp(((const struct ientry *)val)->s, key) == 0;
}

void intern_init(struct intern *t)
{
	pthread_mutex_init(&t->lock, NULL);
	hmap_init(&t->map);
}

void intern_fini(struct intern *t)
{
	size_t pos = 0;

	for (struct ientry *e; (e = hmap_next(&t->map, &pos));)
		free(e);
	hmap_free(&t->map);
	pthread_mutex_destroy(&t->lock);
}

const char *intern_get(struct intern *t, const char *s)
{
	uint64_t h;
	struct ientry *e;
	size_t n;

	if (!s)
		return NULL;
	h = hmap_hash_str(s);
	pthread_mutex_lock(&t->lock);
	e = hmap_get(&t->map, h, s, ent_eq);
	if (e) {
		e->ref++;
		pthread_mutex_unlock(&t->lock);
		return e->s;
	}
	n = strlen(s);
	e = malloc(sizeof(*e) + n + 1);
	if (!e || hmap_put(&t->map, h, e) < 0) {
		pthread_mutex_unlock(&t->lock);
		free(e);
		return NULL;
	}
	e->ref = 1;
	e->hash = h;
	memcpy(e->s, s, n + 1);
	pthread_mutex_unlock(&t->lock);
	return e->s;
}

const char *intern_dup(struct intern *t, const char *s)
{
	if (!s)
		return NULL;
	pthread_mutex_lock(&t->lock);
	entry_of(s)->ref++;
	pthread_mutex_unlock(&t->lock);
	return s;
}

void intern_put(struct intern *t, const char *s)
{
	struct ientry *e;

	if (!s)
		return;
	e = entry_of(s);
	pthread_mutex_lock(&t->lock);
	if (--e->ref == 0) {
		hmap_del(&t->map, e->hash, e->s, ent_eq);
		pthread_mutex_unlock(&t->lock);
		free(e);
		return;
	}
	pthread_mutex_unlock(&t->lock);
}
