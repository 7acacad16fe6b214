/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * sbuf: a growable byte buffer with a hard cap.
 *
 * Every growable buffer in nodefs has a cap; hitting it is an error
 * (-E2BIG or -ENOMEM), never silent truncation. The contents are always
 * NUL-terminated (the NUL is not counted in len).
 */
#ifndef NODEFS_SBUF_H
#define NODEFS_SBUF_H

#include <stdarg.h>
#include <stddef.h>

struct sbuf {
	char *buf;
	size_t len;
	size_t alloc;
	size_t cap;	/* maximum len; 0 means SBUF_DEFAULT_CAP */
};

#define SBUF_DEFAULT_CAP (8u << 20)
#define SBUF_INIT(c) { .buf = NULL, .len = 0, .alloc = 0, .cap = (c) }

void sbuf_init(struct sbuf *sb, size_t cap);
/* Release the memory; sb is empty and reusable afterwards. NULL-safe. */
void sbuf_free(struct sbuf *sb);
void sbuf_reset(struct sbuf *sb);
/* Append; -E2BIG past the cap, -ENOMEM on allocation failure. */
int sbuf_add(struct sbuf *sb, const void *p, size_t n);
int sbuf_adds(struct sbuf *sb, const char *s);
int sbuf_addc(struct sbuf *sb, char c);
int sbuf_printf(struct sbuf *sb, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int sbuf_vprintf(struct sbuf *sb, const char *fmt, va_list ap);
/* Make room for n more bytes; -E2BIG/-ENOMEM. */
int sbuf_reserve(struct sbuf *sb, size_t n);
/* Hand the buffer to the caller (never NULL unless OOM); sb becomes empty. */
char *sbuf_steal(struct sbuf *sb);

#endif
