/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_fetchspec: a fetch= value (backend/fetch/fetch-spec.c) and the
 * archive-path check. Aborts when a refusal has no one-line message, when
 * an accepted spec's dest could leave the sandbox, or when its sha256 is
 * not 64 lowercase hex digits.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "fetch.h"
#include "nerr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fetch_spec f = { 0 };
	struct nerr e = { 0 };
	char s[CTL_LINE_MAX + 1], buf[256];
	const char *nl;
	int r;

	if (size > CTL_LINE_MAX)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	r = fetch_spec_parse(s, &f, &e);
	if (r < 0) {
		if (e.code != -r || !e.msg[0] || strchr(e.msg, '\n') || f.uri)
			abort();
	} else {
		const char *d = fetch_spec_dest(&f, buf, sizeof(buf));

		if (!f.uri || d[0] == '/' || strstr(d, "..") == d || strstr(d, "/../") ||
		    (strlen(f.sha256) != 0 && strspn(f.sha256, "0123456789abcdef") != 64))
			abort();
		if (strcmp(d, ".") != 0 && !fetch_path_inside(d, NULL, false))
			abort();
		fetch_spec_free(&f);
	}
	/* the same bytes as an archive entry and a link target: the check
	 * never lets an absolute name through */
	nl = memchr(s, '\n', strlen(s));
	if (nl) {
		char name[CTL_LINE_MAX + 1];

		memcpy(name, s, (size_t)(nl - s));
		name[nl - s] = '\0';
		if (fetch_path_inside(name, nl + 1, true) && (name[0] == '/' || nl[1] == '/'))
			abort();
	} else if (fetch_path_inside(s, NULL, false) && s[0] == '/') {
		abort();
	}
	return 0;
}
