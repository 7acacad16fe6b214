/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * valid: names, paths and UTF-8; see valid.h.
 * Pure checks over bytes; no filesystem access, nothing above common/.
 */
#include "valid.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "nerr.h"

size_t valid_utf8_seq(const unsigned char *s, size_t len)
{
	unsigned char c;
	size_t n;
	unsigned lo = 0x80, hi = 0xbf;

	if (len == 0)
		return 0;
	c = s[0];
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0;	/* overlong */
		else if (c == 0xed)
			hi = 0x9f;	/* surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90;	/* overlong */
		else if (c == 0xf4)
			hi = 0x8f;	/* above U+10FFFF */
	} else
		return 0;
	if (len < n)
		return 0;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

int valid_utf8(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;

	while (i < len) {
		size_t n;

		if (p[i] < 0x80) {
			i++;
			continue;
		}
		n = valid_utf8_seq(p + i, len - i);
		if (n == 0)
			return 0;
		i += n;
	}
	return 1;
}

char *valid_escape(const char *s, size_t len, size_t max, char *buf, size_t size)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, o = 0;

	if (size == 0)
		return buf;
	while (i < len) {
		char tmp[8];
		size_t n, tn;

		if (i >= max) {
			if (o + 4 <= size - 1) {
				memcpy(buf + o, "...", 3);
				o += 3;
			}
			break;
		}
		n = p[i] < 0x80 ? 1 : valid_utf8_seq(p + i, len - i);
		if (n == 0 || p[i] < 0x20 || p[i] == 0x7f || p[i] == '\'') {
			snprintf(tmp, sizeof(tmp), "\\x%02x", p[i]);
			tn = 4;
			n = 1;
		} else {
			memcpy(tmp, p + i, n);
			tn = n;
		}
		if (o + tn > size - 1)
			break;
		memcpy(buf + o, tmp, tn);
		o += tn;
		i += n;
	}
	buf[o] = '\0';
	return buf;
}

static bool name_char_ok(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

int valid_name(const char *name, struct nerr *err)
{
	char esc[96], ch[8];
	size_t len;

	if (!name || !*name)
		return nerr_set(err, EINVAL, "name is empty");
	len = strlen(name);
	valid_escape(name, len, 64, esc, sizeof(esc));
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];

		if (name_char_ok(c))
			continue;
		if (c >= 0x20 && c < 0x7f && c != '\'')
			snprintf(ch, sizeof(ch), "%c", c);
		else
			snprintf(ch, sizeof(ch), "\\x%02x", c);
		return nerr_set(err, EINVAL,
				"name '%s' contains invalid character '%s' at position %zu "
				"(allowed: A-Z a-z 0-9 . _ -)", esc, ch, i + 1);
	}
	if (len > NAME_MAX_LEN)
		return nerr_set(err, EINVAL, "name '%s' is too long (%zu characters, at most %d)",
				esc, len, NAME_MAX_LEN);
	if (name[0] == '.')
		return nerr_set(err, EINVAL, "name '%s' must not start with '.'", esc);
	return 0;
}

/* Is path strictly under prefix at a component boundary? */
static bool path_under(const char *path, size_t plen, const char *prefix)
{
	size_t n = strlen(prefix);

	/* tolerate a configured prefix with trailing slashes ("/mnt/") */
	while (n > 1 && prefix[n - 1] == '/')
		n--;
	if (n == 1 && prefix[0] == '/')
		return plen > 1;
	if (plen <= n + 1 || memcmp(path, prefix, n) != 0)
		return false;
	return path[n] == '/';
}

int valid_path(const char *path, const char *const *allowed, size_t nallowed,
	       struct nerr *err)
{
	char esc[96];
	size_t len;

	if (!path || !*path)
		return nerr_set(err, EINVAL, "path is empty");
	len = strlen(path);
	valid_escape(path, len, 64, esc, sizeof(esc));
	if (len > VALID_PATH_MAX)
		return nerr_set(err, EINVAL, "path '%s' is too long (%zu bytes, at most %d)",
				esc, len, VALID_PATH_MAX);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)path[i];

		if (c < 0x20 || c == 0x7f)
			return nerr_set(err, EINVAL,
					"path '%s' contains control character 0x%02x at position %zu",
					esc, c, i + 1);
	}
	if (path[0] != '/')
		return nerr_set(err, EINVAL, "path '%s' is not absolute", esc);
	if (len > 1 && path[len - 1] == '/')
		return nerr_set(err, EINVAL, "path '%s' must not end with '/'", esc);
	for (const char *p = path + 1; *p;) {
		const char *e = strchrnul(p, '/');
		size_t n = (size_t)(e - p);

		if (n == 0)
			return nerr_set(err, EINVAL, "path '%s' contains '//'", esc);
		if (n == 1 && p[0] == '.')
			return nerr_set(err, EINVAL, "path '%s' contains a '.' component", esc);
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return nerr_set(err, EINVAL, "path '%s' contains a '..' component", esc);
		p = *e ? e + 1 : e;
	}
	if (nallowed == 0)
		return 0;
	for (size_t i = 0; i < nallowed; i++)
		if (allowed[i] && path_under(path, len, allowed[i]))
			return 0;
	{
		char list[160];
		size_t o = 0;

		list[0] = '\0';
		for (size_t i = 0; i < nallowed && o < sizeof(list); i++) {
			int w;

			if (!allowed[i])
				continue;
			w = snprintf(list + o, sizeof(list) - o, "%s%s", o ? ", " : "", allowed[i]);
			if (w < 0)
				break;
			o += (size_t)w;
		}
		return nerr_set(err, EPERM, "path '%s' is outside the allowed targets (%s)",
				esc, list);
	}
}
