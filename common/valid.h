/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * valid: checks for what users hand us as names and paths.
 *
 * Object names, publish targets and bind sources are checked here, before
 * anything is mutated. Pure functions over bytes: they know nothing of the
 * filesystem (symlinks are the caller's business: open with O_NOFOLLOW or
 * resolve first), of objects or of the layers above common/.
 */
#ifndef NODEFS_VALID_H
#define NODEFS_VALID_H

#include <stddef.h>

struct nerr;

#define NAME_MAX_LEN 64
#define VALID_PATH_MAX 4095

/* A name of 1..NAME_MAX_LEN characters of [A-Za-z0-9._-], not starting
 * with '.'. Returns 0, or -EINVAL with a reason naming the bad character
 * (err may be NULL). Any thread. */
int valid_name(const char *name, struct nerr *err);

/* An absolute, normalized path: starts with '/', no empty ('//'), '.' or
 * '..' components, no trailing '/' except "/" itself, no control characters
 * (bytes < 0x20 and 0x7f), at most VALID_PATH_MAX bytes.
 * When nallowed > 0 it must also lie strictly under one of the allowed
 * prefixes at a component boundary: "/mnt" allows "/mnt/db", not "/mntx"
 * nor "/mnt" itself; the prefix "/" allows every path but "/".
 * Returns 0, -EINVAL for a malformed path, -EPERM for one outside the
 * allowed prefixes (the message lists them). Any thread. */
int valid_path(const char *path, const char *const *allowed, size_t nallowed,
	       struct nerr *err);

/* 1 when s[0..len) is well-formed UTF-8 (no overlong forms, no surrogates,
 * nothing above U+10FFFF), 0 otherwise. NUL bytes count as valid here. */
int valid_utf8(const char *s, size_t len);

/* Length of the well-formed UTF-8 sequence starting at s[0..len), or 0 when
 * it is not well-formed. */
size_t valid_utf8_seq(const unsigned char *s, size_t len);

/* Write a printable rendering of s[0..len) into buf (always NUL-terminated
 * when size > 0) for use inside error messages: bytes < 0x20, 0x7f, '\'' and
 * bytes of malformed UTF-8 become \xNN; the result is cut at a character
 * boundary after about max bytes of input with "..." appended.
 * Returns buf. */
char *valid_escape(const char *s, size_t len, size_t max, char *buf, size_t size);

#endif
