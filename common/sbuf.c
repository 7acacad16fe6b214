/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* sbuf: capped growable buffers; see sbuf.h. */
#include "sbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sbuf_init(struct sbuf *sb, size_t cap)
{
	sb->buf = NULL;
	sb->len = 0;
	sb->alloc = 0;
	sb->cap = cap;
}

void sbuf_free(struct sbuf *sb)
{
	if (!sb)
		return;
	free(sb->buf);
	sb->buf = NULL;
	sb->len = 0;
	sb->alloc = 0;
}

void sbuf_reset(struct sbuf *sb)
{
	sb->len = 0;
	if (sb->buf)
		sb->buf[0] = '\0';
}

int sbuf_reserve(struct sbuf *sb, size_t n)
{
	size_t cap = sb->cap ? sb->cap : SBUF_DEFAULT_CAP;
	size_t want, na;
	char *nb;

	if (n > cap || sb->len > cap - n)
		return -E2BIG;
	want = sb->len + n + 1;
	if (want <= sb->alloc)
		return 0;
	na = sb->alloc ? sb->alloc : 64;
	while (na < want)
		na *= 2;
	nb = realloc(sb->buf, na);
	if (!nb)
		return -ENOMEM;
	sb->buf = nb;
	sb->alloc = na;
	return 0;
}

int sbuf_add(struct sbuf *sb, const void *p, size_t n)
{
	int r = sbuf_reserve(sb, n);

	if (r < 0)
		return r;
	if (n)
		memcpy(sb->buf + sb->len, p, n);
	sb->len += n;
	sb->buf[sb->len] = '\0';
	return 0;
}

int sbuf_adds(struct sbuf *sb, const char *s)
{
	return sbuf_add(sb, s, strlen(s));
}

int sbuf_addc(struct sbuf *sb, char c)
{
	return sbuf_add(sb, &c, 1);
}

int sbuf_vprintf(struct sbuf *sb, const char *fmt, va_list ap)
{
	size_t cap = sb->cap ? sb->cap : SBUF_DEFAULT_CAP;
	va_list aq;
	int n, r;

	/* format into the free space first: most lines fit, and formatting
	 * (floats above all) is the cost worth not paying twice */
	if (sb->buf && sb->alloc - sb->len > 1) {
		size_t room = sb->alloc - sb->len;

		va_copy(aq, ap);
		n = vsnprintf(sb->buf + sb->len, room, fmt, aq);
		va_end(aq);
		if (n < 0) {
			sb->buf[sb->len] = '\0';
			return -EINVAL;
		}
		if ((size_t)n < room) {
			if ((size_t)n > cap || sb->len > cap - (size_t)n) {
				sb->buf[sb->len] = '\0';
				return -E2BIG;
			}
			sb->len += (size_t)n;
			return 0;
		}
		sb->buf[sb->len] = '\0';
	}
	va_copy(aq, ap);
	n = vsnprintf(NULL, 0, fmt, aq);
	va_end(aq);
	if (n < 0)
		return -EINVAL;
	r = sbuf_reserve(sb, (size_t)n);
	if (r < 0)
		return r;
	vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
	sb->len += (size_t)n;
	return 0;
}

int sbuf_printf(struct sbuf *sb, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = sbuf_vprintf(sb, fmt, ap);
	va_end(ap);
	return r;
}

char *sbuf_steal(struct sbuf *sb)
{
	char *p;

	if (!sb->buf && sbuf_reserve(sb, 0) < 0)
		return NULL;
	p = sb->buf;
	sb->buf = NULL;
	sb->len = 0;
	sb->alloc = 0;
	return p;
}
