/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* fetch-spec: the syntax of a fetch= value and of archive paths; see
 * fetch.h. Pure functions: no I/O. */
#include "fetch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "nerr.h"
#include "valid.h"

void fetch_spec_free(struct fetch_spec *f)
{
	if (!f)
		return;
	free(f->uri);
	free(f->dest);
	memset(f, 0, sizeof(*f));
}

/* A relative path that stays inside: not empty, no leading '/', no '.'
 * or '..' element, no empty element, no control byte. */
static bool rel_ok(const char *p)
{
	const char *e;

	if (!p[0] || p[0] == '/' || strlen(p) > 1024)
		return false;
	for (const char *s = p; s; s = e ? e + 1 : NULL) {
		size_t n;

		e = strchr(s, '/');
		n = e ? (size_t)(e - s) : strlen(s);
		if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
			return false;
	}
	for (const char *s = p; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

static int check_uri(const char *u, struct nerr *err)
{
	const char *rest;

	if (strncmp(u, "http://", 7) == 0 || strncmp(u, "https://", 8) == 0) {
		rest = strstr(u, "://") + 3;
		if (!rest[0] || rest[0] == '/' || rest[0] == ':' || rest[0] == '?' || rest[0] == '#')
			return nerr_set(err, EINVAL, "fetch %.200s: no host", u);
	} else if (strncmp(u, "file://", 7) == 0) {
		rest = u + 7;
		if (strncmp(rest, "localhost/", 10) == 0)
			rest += 9;
		if (rest[0] != '/')
			return nerr_set(err, EINVAL, "fetch %.200s: a file:// URI names an absolute "
					"path (file:///PATH)", u);
	} else {
		return nerr_set(err, EINVAL, "fetch %.200s: the scheme is not http, https or file", u);
	}
	for (const char *p = u; *p; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f)
			return nerr_set(err, EINVAL, "fetch %.200s: a blank or control byte in the URI", u);
	if (strlen(u) > 2048)
		return nerr_set(err, EINVAL, "fetch %.100s...: the URI is longer than 2048 bytes", u);
	return 0;
}

/* The URI's last path element (query and fragment dropped) into buf;
 * false when there is none. */
static bool last_element(const char *u, char *buf, size_t size)
{
	const char *p = strstr(u, "://") + 3, *end, *slash;
	size_t n;

	end = p + strcspn(p, "?#");
	slash = NULL;
	for (const char *q = p; q < end; q++)
		if (*q == '/')
			slash = q;
	if (!slash || slash + 1 >= end)
		return false;
	n = (size_t)(end - slash - 1);
	if (n >= size)
		return false;
	memcpy(buf, slash + 1, n);
	buf[n] = '\0';
	return rel_ok(buf);
}

int fetch_spec_parse(const char *s, struct fetch_spec *ret, struct nerr *err)
{
	struct fetch_spec f = { 0 };
	char **w = NULL, name[256];
	int n, r;

	n = ctl_split_words(s, &w, err);
	if (n < 0)
		return n;
	if (n == 0) {
		r = nerr_set(err, EINVAL, "fetch: empty (want 'URI [sha256=HEX] [extract] "
			     "[executable] [dest=RELPATH]')");
		goto out;
	}
	r = check_uri(w[0], err);
	if (r < 0)
		goto out;
	for (int i = 1; i < n; i++) {
		const char *a = w[i];

		if (strncmp(a, "sha256=", 7) == 0) {
			const char *h = a + 7;

			if (strlen(h) != 64 || strspn(h, "0123456789abcdefABCDEF") != 64) {
				r = nerr_set(err, EINVAL, "fetch %.200s: sha256 '%.80s' is not 64 hex "
					     "digits", w[0], h);
				goto out;
			}
			for (int k = 0; k < 64; k++)
				f.sha256[k] = (char)(h[k] >= 'A' && h[k] <= 'F' ? h[k] - 'A' + 'a' : h[k]);
		} else if (strcmp(a, "extract") == 0) {
			f.extract = true;
		} else if (strcmp(a, "executable") == 0) {
			f.executable = true;
		} else if (strncmp(a, "dest=", 5) == 0) {
			if (!rel_ok(a + 5)) {
				r = nerr_set(err, EINVAL, "fetch %.200s: dest '%.100s' leaves the sandbox "
					     "(a relative path without '.' or '..' elements)", w[0], a + 5);
				goto out;
			}
			free(f.dest);
			if (!(f.dest = strdup(a + 5))) {
				r = nerr_set(err, ENOMEM, "out of memory");
				goto out;
			}
		} else {
			r = nerr_set(err, EINVAL, "fetch %.200s: unknown word '%.40s' (sha256=HEX, "
				     "extract, executable, dest=RELPATH)", w[0], a);
			goto out;
		}
	}
	if (!f.dest && !f.extract && !last_element(w[0], name, sizeof(name))) {
		r = nerr_set(err, EINVAL, "fetch %.200s: no file name in the URI: give dest=", w[0]);
		goto out;
	}
	if (!(f.uri = strdup(w[0]))) {
		r = nerr_set(err, ENOMEM, "out of memory");
		goto out;
	}
	*ret = f;
	memset(&f, 0, sizeof(f));
	r = 0;
out:
	fetch_spec_free(&f);
	ctl_strv_free(w);
	return r;
}

const char *fetch_spec_dest(const struct fetch_spec *f, char *buf, size_t size)
{
	if (f->dest)
		return f->dest;
	if (f->extract)
		return ".";
	if (!last_element(f->uri, buf, size))
		return ".";
	return buf;
}

bool fetch_path_inside(const char *entry, const char *link_target, bool symlink)
{
	char buf[4096];
	int depth = 0;
	const char *p = entry;

	/* the entry's own name: "./a/b" is fine, "/a" and "a/../.." are not */
	while (p[0] == '.' && p[1] == '/')
		p += 2;
	if (p[0] == '/')
		return false;
	if (!p[0])
		return !link_target;
	if (!rel_ok(p)) {
		/* "a/" (a directory) and "./" are fine; anything with '..' not */
		size_t n = strlen(p);

		if (n >= sizeof(buf))
			return false;
		memcpy(buf, p, n + 1);
		while (n && buf[n - 1] == '/')
			buf[--n] = '\0';
		if (n && !rel_ok(buf))
			return false;
	}
	if (!link_target)
		return true;
	if (link_target[0] == '/')
		return false;
	/* a hard link names a path from the root; a symlink, from its own
	 * directory: count the directories above the target */
	if (symlink)
		for (const char *q = p; (q = strchr(q, '/')); q++)
			depth++;
	for (const char *s = link_target, *e; s && *s; s = e ? e + 1 : NULL) {
		size_t n;

		e = strchr(s, '/');
		n = e ? (size_t)(e - s) : strlen(s);
		if (n == 2 && s[0] == '.' && s[1] == '.') {
			if (--depth < 0)
				return false;
		} else if (n && !(n == 1 && s[0] == '.')) {
			depth++;
		}
	}
	return true;
}
