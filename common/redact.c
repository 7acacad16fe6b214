// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * redact: option values of a ctl line replaced by "<redacted>" (redact.h).
 * It follows ctl's word syntax (blanks, '...', "...", backslash) only far
 * enough to find where a value ends; a malformed line is redacted from the
 * named key to its end.
 */
#include "redact.h"

#include <stdlib.h>
#include <string.h>

bool redact_key(const char *key, size_t len, const char *const *names)
{
	for (; names && *names; names++) {
		size_t n = strlen(*names);

		if (n && (*names)[n - 1] == '.') {
			if (len > n && memcmp(key, *names, n) == 0)
				return true;
		} else if (n == len && memcmp(key, *names, n) == 0) {
			return true;
		}
	}
	return false;
}

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

/* The end of the word starting at s[i]. */
static size_t word_end(const char *s, size_t len, size_t i)
{
	while (i < len && !blank(s[i])) {
		char q = s[i];

		if (q == '\'' || q == '"') {
			for (i++; i < len && s[i] != q; i++)
				if (q == '"' && s[i] == '\\' && i + 1 < len)
					i++;
			if (i >= len)
				return len;
			i++;
		} else if (q == '\\') {
			i = i + 2 < len ? i + 2 : len;
		} else {
			i++;
		}
	}
	return i;
}

int redact_line(const char *s, size_t len, const char *const *names, struct sbuf *out)
{
	size_t i = 0;
	int r = 0;

	while (i < len && r >= 0) {
		size_t start = i, k, end;

		while (i < len && blank(s[i]))
			i++;
		if (i > start) {
			r = sbuf_add(out, s + start, i - start);
			continue;
		}
		end = word_end(s, len, i);
		for (k = i; k < end && s[k] != '=' && s[k] != '\'' && s[k] != '"' && s[k] != '\\'; k++)
			;
		if (k < end && s[k] == '=' && k > i && redact_key(s + i, k - i, names)) {
			r = sbuf_add(out, s + i, k + 1 - i);
			if (r >= 0)
				r = sbuf_adds(out, REDACTED);
		} else {
			r = sbuf_add(out, s + i, end - i);
		}
		i = end;
	}
	return r < 0 ? r : 0;
}

char **redact_names_dup(const char *const *names)
{
	size_t n = 0;
	char **v;

	if (!names)
		return NULL;
	while (names[n])
		n++;
	v = calloc(n + 1, sizeof(*v));
	for (size_t i = 0; v && i < n; i++) {
		v[i] = strdup(names[i]);
		if (!v[i]) {
			redact_names_free(v);
			return NULL;
		}
	}
	return v;
}

void redact_names_free(char **names)
{
	for (size_t i = 0; names && names[i]; i++)
		free(names[i]);
	free(names);
}
