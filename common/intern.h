/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * intern: one shared, refcounted copy of each string many objects repeat
 * (an operation's type, a volume's plugin and profile names, its access
 * mode and fs type), so 10,000 volumes of one plugin hold one "local".
 *
 * A table belongs to its owner (the backend); its strings live as long as
 * someone holds them. Any thread.
 */
#ifndef NODEFS_INTERN_H
#define NODEFS_INTERN_H

#include <pthread.h>

#include "hmap.h"

struct intern {
	pthread_mutex_t lock;
	struct hmap map;
};

void intern_init(struct intern *t);
/* Free the table. Every string must have been put back (what is still
 * held is freed too, and its holders must not use it). */
void intern_fini(struct intern *t);
/* s's shared copy, with one more holder: NULL for NULL, and NULL on OOM
 * (then nothing is held). */
const char *intern_get(struct intern *t, const char *s);
/* The same string held once more (s from intern_get, or NULL). */
const char *intern_dup(struct intern *t, const char *s);
/* Drop one holder of s (from intern_get or intern_dup; NULL-safe); the
 * last frees it. */
void intern_put(struct intern *t, const char *s);

#endif
