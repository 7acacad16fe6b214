/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* jw: JSON written straight into an sbuf; see jw.h. */
#include "jw.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sbuf.h"
#include "valid.h"

static void put(struct jw *w, const char *s, size_t n)
{
	int r;

	if (w->err)
		return;
	r = sbuf_add(w->out, s, n);
	if (r < 0)
		w->err = r;
}

static void newline(struct jw *w)
{
	static const char spaces[] = "                                ";

	put(w, "\n", 1);
	for (int n = w->indent * w->depth; n > 0; n -= (int)sizeof(spaces) - 1)
		put(w, spaces, n < (int)sizeof(spaces) - 1 ? (size_t)n : sizeof(spaces) - 1);
}

/* Before a member (key or array element): its separator and indentation. */
static void member(struct jw *w)
{
	if (w->depth == 0)
		return;
	if (!w->first[w->depth - 1])
		put(w, ",", 1);
	else
		w->first[w->depth - 1] = false;
	if (w->indent)
		newline(w);
}

static void value(struct jw *w)
{
	if (w->after_key)
		w->after_key = false;
	else
		member(w);
}

void jw_init(struct jw *w, struct sbuf *out, int indent)
{
	memset(w, 0, sizeof(*w));
	w->out = out;
	w->indent = indent;
}

static void open_(struct jw *w, char c)
{
	value(w);
	if (w->depth == JW_DEPTH) {
		w->err = w->err ? w->err : -E2BIG;
		return;
	}
	put(w, &c, 1);
	w->first[w->depth++] = true;
}

static void close_(struct jw *w, char c)
{
	if (w->depth == 0) {
		w->err = w->err ? w->err : -EINVAL;
		return;
	}
	w->depth--;
	if (w->indent && !w->first[w->depth])
		newline(w);
	put(w, &c, 1);
}

void jw_obj(struct jw *w)
{
	open_(w, '{');
}

void jw_obj_end(struct jw *w)
{
	close_(w, '}');
}

void jw_arr(struct jw *w)
{
	open_(w, '[');
}

void jw_arr_end(struct jw *w)
{
	close_(w, ']');
}

static void string(struct jw *w, const char *str)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *s = (const unsigned char *)str;
	size_t n = strlen(str), run = 0;

	put(w, "\"", 1);
	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		const char *esc = NULL;
		char u[6];
		size_t l;

		if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
			run++;
			i++;
			continue;
		}
		if (c >= 0x80 && (l = valid_utf8_seq(s + i, n - i)) > 0) {
			run += l;
			i += l;
			continue;
		}
		put(w, (const char *)s + i - run, run);
		run = 0;
		switch (c) {
		case '"': esc = "\\\""; break;
		case '\\': esc = "\\\\"; break;
		case '\b': esc = "\\b"; break;
		case '\f': esc = "\\f"; break;
		case '\n': esc = "\\n"; break;
		case '\r': esc = "\\r"; break;
		case '\t': esc = "\\t"; break;
		default:
			if (c < 0x20) {
				memcpy(u, "\\u00", 4);
				u[4] = hex[c >> 4];
				u[5] = hex[c & 15];
				put(w, u, 6);
			} else {
				put(w, "\xEF\xBF\xBD", 3);	/* not UTF-8 */
			}
		}
		if (esc)
			put(w, esc, strlen(esc));
		i++;
	}
	put(w, (const char *)s + n - run, run);
	put(w, "\"", 1);
}

void jw_key(struct jw *w, const char *key)
{
	member(w);
	string(w, key);
	put(w, w->indent ? ": " : ":", w->indent ? 2 : 1);
	w->after_key = true;
}

void jw_str(struct jw *w, const char *s)
{
	value(w);
	if (s)
		string(w, s);
	else
		put(w, "null", 4);
}

void jw_raw(struct jw *w, const char *json, size_t len)
{
	value(w);
	put(w, json, len);
}

void jw_int(struct jw *w, long long v)
{
	char b[24];
	char *p = b + sizeof(b);
	unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;

	value(w);
	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		*--p = '-';
	put(w, p, (size_t)(b + sizeof(b) - p));
}

/* As jansson's jsonp_dtostr at its default precision: %.17g, ".0" when
 * that reads as an integer, no '+' or leading zeros in the exponent. */
void jw_real(struct jw *w, double v)
{
	char b[40], *e;
	int n;

	if (!isfinite(v)) {
		w->err = w->err ?: -EINVAL;	/* jansson has no such real either */
		return;
	}
	n = snprintf(b, sizeof(b) - 2, "%.17g", v);
	if (n < 0 || (size_t)n >= sizeof(b) - 2) {
		w->err = w->err ?: -EINVAL;
		return;
	}
	if (!strchr(b, '.') && !strchr(b, 'e')) {
		b[n++] = '.';
		b[n++] = '0';
		b[n] = '\0';
	}
	e = strchr(b, 'e');
	if (e) {
		char *start = e + 1, *end = start + 1;

		if (*start == '-')
			start++;
		while (*end == '0')
			end++;
		if (end != start) {
			memmove(start, end, strlen(end) + 1);
			n = (int)strlen(b);
		}
	}
	value(w);
	put(w, b, (size_t)n);
}

void jw_bool(struct jw *w, bool v)
{
	value(w);
	put(w, v ? "true" : "false", v ? 4 : 5);
}

void jw_strv(struct jw *w, char *const *v)
{
	jw_arr(w);
	for (size_t i = 0; v && v[i]; i++)
		jw_str(w, v[i]);
	jw_arr_end(w);
}

void jw_b64(struct jw *w, const void *data, size_t len)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *s = data;
	char out[256];
	size_t o = 0;

	value(w);
	put(w, "\"", 1);
	for (size_t i = 0; i < len; i += 3) {
		unsigned v = (unsigned)s[i] << 16;

		if (i + 1 < len)
			v |= (unsigned)s[i + 1] << 8;
		if (i + 2 < len)
			v |= s[i + 2];
		out[o++] = b64[v >> 18 & 63];
		out[o++] = b64[v >> 12 & 63];
		out[o++] = i + 1 < len ? b64[v >> 6 & 63] : '=';
		out[o++] = i + 2 < len ? b64[v & 63] : '=';
		if (o == sizeof(out)) {
			put(w, out, o);
			o = 0;
		}
	}
	put(w, out, o);
	put(w, "\"", 1);
}

void jw_fail(struct jw *w, int err)
{
	if (!w->err)
		w->err = err;
}

int jw_end(struct jw *w)
{
	if (!w->err && w->depth != 0)
		w->err = -EINVAL;
	return w->err;
}
