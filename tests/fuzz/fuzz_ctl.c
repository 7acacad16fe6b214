/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_ctl: the ctl line tokenizer and everything a ctl write feeds its
 * words to (command tables, word splitting, sizes, durations, names, paths).
 * Aborts when an invariant of ctl.h breaks; sanitizers catch the rest.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "nerr.h"
#include "sbuf.h"
#include "units.h"
#include "valid.h"

static const char *const create_opts[] = { "size", "plugin", "profile", "param.", "env.", NULL };
static const struct ctl_spec table[] = {
	{ "create", 1, 1, create_opts, "create NAME [size=SIZE] [param.K=V ...]" },
	{ "publish", 1, 2, NULL, "publish TARGET [ro]" },
	{ "exec", 1, -1, NULL, "exec 'ARGV ...'" },
	{ "stop", 0, 1, NULL, "stop [TIMEOUT_S]" },
	{ "unpublish", 0, 0, NULL, NULL },
};

static const char *const allowed[] = { "/mnt", "/srv" };

static void check_msg(const struct nerr *e, int r)
{
	/* every error carries its code and one line of text */
	if (e->code != -r || !e->msg[0] || strchr(e->msg, '\n'))
		abort();
}

static void words(const char *s)
{
	struct nerr e = { 0 };
	char **v = NULL;
	int n = ctl_split_words(s, &v, &e);

	if (n < 0) {
		check_msg(&e, n);
		return;
	}
	for (int i = 0; i < n; i++)
		if (!v[i] || !valid_utf8(v[i], strlen(v[i])))
			abort();
	if (v[n])
		abort();
	ctl_strv_free(v);
}

static void values(const char *s)
{
	struct nerr e = { 0 };
	uint64_t u, back;
	long long ll;
	double d;
	bool b;
	char buf[32];

	if (parse_size(s, &u, &e) == 0) {
		if (format_size(u, buf, sizeof(buf)) < 0 || parse_size(buf, &back, NULL) < 0 ||
		    back != u)
			abort();
	}
	parse_duration_ms(s, &u, &e);
	if (parse_cpus(s, &d, &e) == 0 && (d <= 0 || d > 1024))
		abort();
	if (parse_int(s, -1000, 1000, &ll, &e) == 0 && (ll < -1000 || ll > 1000))
		abort();
	parse_bool(s, &b, &e);
	valid_name(s, &e);
	valid_path(s, allowed, 2, &e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	struct ctl_cmd c = { 0 };
	const struct ctl_spec *sp = NULL;
	struct nerr e = { 0 };
	struct sbuf sb = SBUF_INIT(1024);
	size_t ll, used;
	int r;

	r = ctl_next_line(s, size, &ll, &used);
	if (r == 1 && (ll > CTL_LINE_MAX || used > size || ll >= used))
		abort();
	if (r == 0 && (ll != size || used != size))
		abort();

	r = ctl_parse(s, size, &c, &e);
	if (r < 0) {
		check_msg(&e, r);
		return 0;
	}
	if (c.argc < 1 || c.argv[c.argc] != NULL)
		abort();
	for (size_t i = 0; i < c.argc; i++) {
		if (!valid_utf8(c.argv[i], strlen(c.argv[i])))
			abort();
		values(c.argv[i]);
		words(c.argv[i]);
	}
	for (size_t i = 0; i < c.nopts; i++) {
		if (!c.opts[i].key[0] || ctl_opt_get(&c, c.opts[i].key) == NULL)
			abort();
		values(c.opts[i].val);
		words(c.opts[i].val);
	}
	r = ctl_match(table, sizeof(table) / sizeof(table[0]), &c, &sp, &e);
	if (r < 0)
		check_msg(&e, r);
	else if (!sp || strcmp(sp->name, c.argv[0]) != 0)
		abort();
	ctl_usage(table, sizeof(table) / sizeof(table[0]), &sb);
	sbuf_free(&sb);
	ctl_cmd_free(&c);
	return 0;
}
