/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * failalloc: allocation-failure injection for unit tests.
 *
 * Linked into a test executable built with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free, it makes the
 * n-th allocation after failalloc_arm(n) return NULL and counts what is still
 * allocated, so a test can prove that a parser returns -ENOMEM and frees
 * everything on every failure path. Test-only: never linked into nodefs.
 * Single-threaded (criterion runs each test in its own process).
 */
#ifndef NODEFS_FAILALLOC_H
#define NODEFS_FAILALLOC_H

#include <stdbool.h>

/* Start counting; fail the nth allocation from now (1-based), 0 = never. */
void failalloc_arm(unsigned long nth);
/* Keep counting but fail nothing more (to free a result and check). */
void failalloc_hold(void);
/* Stop counting. */
void failalloc_disarm(void);
/* Did the injected failure happen since failalloc_arm()? */
bool failalloc_fired(void);
/* Allocations minus frees since failalloc_arm(). */
long failalloc_live(void);

#endif
