/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* failalloc: see failalloc.h. The --wrap'd allocator of the unit tests. */
#include "failalloc.h"

#include <stddef.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t sz);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t sz);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);

static struct {
	bool counting, failing, fired;
	unsigned long left;
	long live;
} fa;

void failalloc_arm(unsigned long nth)
{
	fa.counting = true;
	fa.failing = nth > 0;
	fa.left = nth;
	fa.fired = false;
	fa.live = 0;
}

void failalloc_hold(void)
{
	fa.failing = false;
}

void failalloc_disarm(void)
{
	fa.counting = false;
	fa.failing = false;
}

bool failalloc_fired(void)
{
	return fa.fired;
}

long failalloc_live(void)
{
	return fa.live;
}

/* True when this allocation must fail. */
static bool should_fail(void)
{
	if (!fa.failing)
		return false;
	if (--fa.left == 0) {
		fa.failing = false;
		fa.fired = true;
		return true;
	}
	return false;
}

void *__wrap_malloc(size_t n)
{
	void *p;

	if (should_fail())
		return NULL;
	p = __real_malloc(n);
	if (p && fa.counting)
		fa.live++;
	return p;
}

void *__wrap_calloc(size_t n, size_t sz)
{
	void *p;

	if (should_fail())
		return NULL;
	p = __real_calloc(n, sz);
	if (p && fa.counting)
		fa.live++;
	return p;
}

void *__wrap_realloc(void *old, size_t n)
{
	void *p;

	if (should_fail())
		return NULL;
	p = __real_realloc(old, n);
	if (p && !old && fa.counting)
		fa.live++;
	return p;
}

void __wrap_free(void *p)
{
	if (p && fa.counting)
		fa.live--;
	__real_free(p);
}
