/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ctl: tokenizing ctl lines and matching them against command tables; see
 * ctl.h. Pure functions over bytes: no I/O, no globals. Knows nothing of
 * the objects the commands act on.
 */
#include "ctl.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nerr.h"
#include "sbuf.h"
#include "valid.h"

/* What the tokenizer collects; arrays grow by doubling. */
struct tok {
	char **words;
	size_t nwords, awords;
	struct ctl_opt *opts;
	size_t nopts, aopts;
};

static void tok_free(struct tok *t)
{
	for (size_t i = 0; i < t->nwords; i++)
		free(t->words[i]);
	free(t->words);
	for (size_t i = 0; i < t->nopts; i++) {
		free(t->opts[i].key);
		free(t->opts[i].val);
	}
	free(t->opts);
	memset(t, 0, sizeof(*t));
}

static char *mem_dup(const char *s, size_t n)
{
	char *p = malloc(n + 1);

	if (!p)
		return NULL;
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

/* Room for one more word plus the NULL terminator. */
static int tok_add_word(struct tok *t, const char *w, size_t n)
{
	char *s;

	if (t->nwords + 2 > t->awords) {
		size_t na = t->awords ? t->awords * 2 : 8;
		char **nw = realloc(t->words, na * sizeof(*nw));

		if (!nw)
			return -ENOMEM;
		t->words = nw;
		t->awords = na;
	}
	s = mem_dup(w, n);
	if (!s)
		return -ENOMEM;
	t->words[t->nwords++] = s;
	t->words[t->nwords] = NULL;
	return 0;
}

static int tok_add_opt(struct tok *t, const char *k, size_t kn, const char *v, size_t vn)
{
	char *key, *val;

	if (t->nopts + 1 > t->aopts) {
		size_t na = t->aopts ? t->aopts * 2 : 4;
		struct ctl_opt *no = realloc(t->opts, na * sizeof(*no));

		if (!no)
			return -ENOMEM;
		t->opts = no;
		t->aopts = na;
	}
	key = mem_dup(k, kn);
	if (!key)
		return -ENOMEM;
	val = mem_dup(v, vn);
	if (!val) {
		free(key);
		return -ENOMEM;
	}
	t->opts[t->nopts++] = (struct ctl_opt){ .key = key, .val = val };
	return 0;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static bool key_first(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static bool key_char(char c)
{
	return key_first(c) || (c >= '0' && c <= '9') || c == '.' || c == '-';
}

/* Bytes allowed in a line: no NUL, no control character but tab, UTF-8. */
static int check_bytes(const char *s, size_t len, struct nerr *err)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0; i < len;) {
		if (p[i] == 0)
			return nerr_set(err, EINVAL, "NUL byte at column %zu", i + 1);
		if ((p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7f)
			return nerr_set(err, EINVAL, "control character 0x%02x at column %zu",
					p[i], i + 1);
		if (p[i] < 0x80) {
			i++;
			continue;
		}
		size_t n = valid_utf8_seq(p + i, len - i);
		if (n == 0)
			return nerr_set(err, EINVAL, "invalid UTF-8 at column %zu", i + 1);
		i += n;
	}
	return 0;
}

/* Unquote one word starting at s[*pos] into out (which has room for the
 * rest of the line); stops at an unquoted blank or the end. */
static int unquote(const char *s, size_t len, size_t *pos, char *out, size_t *ret_n,
		   struct nerr *err)
{
	size_t i = *pos, o = 0;

	while (i < len && !is_blank(s[i])) {
		char c = s[i];

		if (c == '\'') {
			size_t start = i++;

			while (i < len && s[i] != '\'')
				out[o++] = s[i++];
			if (i >= len)
				return nerr_set(err, EINVAL, "unterminated quote at column %zu",
						start + 1);
			i++;
		} else if (c == '"') {
			size_t start = i++;

			while (i < len && s[i] != '"') {
				if (s[i] == '\\' && i + 1 < len && (s[i + 1] == '\\' || s[i + 1] == '"'))
					i++;
				out[o++] = s[i++];
			}
			if (i >= len)
				return nerr_set(err, EINVAL, "unterminated quote at column %zu",
						start + 1);
			i++;
		} else if (c == '\\') {
			if (i + 1 >= len)
				return nerr_set(err, EINVAL, "backslash at end of line (column %zu)",
						i + 1);
			out[o++] = s[i + 1];
			i += 2;
		} else
			out[o++] = s[i++];
	}
	*pos = i;
	*ret_n = o;
	return 0;
}

/* Split s[0..len) (already checked) into words and, when options is set,
 * key=value options after the first word. */
static int tokenize(const char *s, size_t len, bool options, struct tok *t, struct nerr *err)
{
	char *buf;
	size_t i = 0;
	int r = 0;

	/* an unquoted word never grows: the line's length bounds every word */
	buf = malloc(len + 1);
	if (!buf)
		return nerr_set(err, ENOMEM, "out of memory");
	for (;;) {
		size_t start, k, n;

		while (i < len && is_blank(s[i]))
			i++;
		if (i >= len)
			break;
		start = i;
		k = i;
		if (options && t->nwords > 0) {
			if (s[i] == '=') {
				r = nerr_set(err, EINVAL, "empty option key at column %zu", i + 1);
				break;
			}
			if (key_first(s[i])) {
				k = i + 1;
				while (k < len && key_char(s[k]))
					k++;
				if (k >= len || s[k] != '=')
					k = start;
			}
		}
		if (k > start) {
			/* an option: key is s[start..k), the value follows '=' */
			i = k + 1;
			r = unquote(s, len, &i, buf, &n, err);
			if (r < 0)
				break;
			r = tok_add_opt(t, s + start, k - start, buf, n);
		} else {
			r = unquote(s, len, &i, buf, &n, err);
			if (r < 0)
				break;
			r = tok_add_word(t, buf, n);
		}
		if (r < 0) {
			r = nerr_set(err, ENOMEM, "out of memory");
			break;
		}
	}
	free(buf);
	return r;
}

int ctl_parse(const char *line, size_t len, struct ctl_cmd *ret, struct nerr *err)
{
	struct tok t = { 0 };
	int r;

	if (!line)
		len = 0;
	if (len > 0 && line[len - 1] == '\n') {
		len--;
		if (len > 0 && line[len - 1] == '\r')
			len--;
	}
	if (len > CTL_LINE_MAX)
		return nerr_set(err, EINVAL, "line too long (%zu bytes, at most %d)",
				len, CTL_LINE_MAX);
	r = check_bytes(line, len, err);
	if (r < 0)
		return r;
	r = tokenize(line, len, true, &t, err);
	if (r < 0) {
		tok_free(&t);
		return r;
	}
	if (t.nwords == 0) {
		tok_free(&t);
		return nerr_set(err, EINVAL, "empty line");
	}
	*ret = (struct ctl_cmd){
		.argv = t.words, .argc = t.nwords,
		.opts = t.opts, .nopts = t.nopts,
	};
	return 0;
}

void ctl_cmd_free(struct ctl_cmd *c)
{
	if (!c)
		return;
	if (c->argv)
		for (size_t i = 0; i < c->argc; i++)
			free(c->argv[i]);
	free(c->argv);
	for (size_t i = 0; i < c->nopts; i++) {
		free(c->opts[i].key);
		free(c->opts[i].val);
	}
	free(c->opts);
	memset(c, 0, sizeof(*c));
}

static bool opt_allowed(const char *const *opts, const char *key)
{
	if (!opts)
		return false;
	for (; *opts; opts++) {
		size_t n = strlen(*opts);

		if (n > 0 && (*opts)[n - 1] == '.') {
			if (strncmp(key, *opts, n) == 0 && key[n] != '\0')
				return true;
		} else if (strcmp(key, *opts) == 0)
			return true;
	}
	return false;
}

#define ESC(s, b) valid_escape((s), strlen(s), 48, (b), sizeof(b))

int ctl_match(const struct ctl_spec *table, size_t n, const struct ctl_cmd *cmd,
	      const struct ctl_spec **ret, struct nerr *err)
{
	const struct ctl_spec *sp = NULL;
	char esc[80], want[64];
	size_t nargs;

	if (!cmd || cmd->argc == 0 || !cmd->argv || !cmd->argv[0])
		return nerr_set(err, EINVAL, "empty command");
	for (size_t i = 0; i < n; i++)
		if (strcmp(table[i].name, cmd->argv[0]) == 0) {
			sp = &table[i];
			break;
		}
	if (!sp) {
		char list[160];
		size_t o = 0;

		list[0] = '\0';
		for (size_t i = 0; i < n && o < sizeof(list); i++) {
			int w = snprintf(list + o, sizeof(list) - o, "%s%s", i ? ", " : "",
					 table[i].name);
			if (w < 0)
				break;
			o += (size_t)w;
		}
		return nerr_set(err, EINVAL, "unknown command '%s'; expected one of: %s",
				ESC(cmd->argv[0], esc), list);
	}
	nargs = cmd->argc - 1;
	if ((sp->min_args >= 0 && nargs < (size_t)sp->min_args) ||
	    (sp->max_args >= 0 && nargs > (size_t)sp->max_args)) {
		if (sp->max_args == 0)
			snprintf(want, sizeof(want), "no arguments");
		else if (sp->max_args < 0)
			snprintf(want, sizeof(want), "at least %d argument%s", sp->min_args,
				 sp->min_args == 1 ? "" : "s");
		else if (sp->min_args == sp->max_args)
			snprintf(want, sizeof(want), "%d argument%s", sp->min_args,
				 sp->min_args == 1 ? "" : "s");
		else
			snprintf(want, sizeof(want), "%d to %d arguments", sp->min_args,
				 sp->max_args);
		return nerr_set(err, EINVAL, "%s: expects %s, got %zu (usage: %s)",
				sp->name, want, nargs, sp->usage ? sp->usage : sp->name);
	}
	for (size_t i = 0; i < cmd->nopts; i++)
		if (!opt_allowed(sp->opts, cmd->opts[i].key) &&
		    !(sp->opt_known && sp->opt_known(cmd->opts[i].key)))
			return nerr_set(err, EINVAL, "%s: unknown option '%s' (usage: %s)",
					sp->name, ESC(cmd->opts[i].key, esc),
					sp->usage ? sp->usage : sp->name);
	*ret = sp;
	return 0;
}

const char *ctl_opt_get(const struct ctl_cmd *c, const char *key)
{
	if (!c)
		return NULL;
	for (size_t i = c->nopts; i > 0; i--)
		if (strcmp(c->opts[i - 1].key, key) == 0)
			return c->opts[i - 1].val;
	return NULL;
}

int ctl_usage(const struct ctl_spec *table, size_t n, struct sbuf *out)
{
	for (size_t i = 0; i < n; i++) {
		int r = sbuf_printf(out, "%s\n", table[i].usage ? table[i].usage : table[i].name);

		if (r < 0)
			return r;
	}
	return 0;
}

int ctl_split_words(const char *s, char ***ret_argv, struct nerr *err)
{
	struct tok t = { 0 };
	size_t len = s ? strlen(s) : 0;
	int r;

	if (len > CTL_LINE_MAX)
		return nerr_set(err, EINVAL, "too long (%zu bytes, at most %d)", len, CTL_LINE_MAX);
	r = check_bytes(s, len, err);
	if (r < 0)
		return r;
	r = tokenize(s, len, false, &t, err);
	if (r < 0) {
		tok_free(&t);
		return r;
	}
	if (!t.words) {
		t.words = calloc(1, sizeof(char *));
		if (!t.words)
			return nerr_set(err, ENOMEM, "out of memory");
	}
	*ret_argv = t.words;
	return (int)t.nwords;
}

void ctl_strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

int ctl_next_line(const char *buf, size_t len, size_t *ret_line_len, size_t *ret_consumed)
{
	/* look no further than the longest line allowed, plus "\r\n" */
	size_t lim = len < CTL_LINE_MAX + 2 ? len : CTL_LINE_MAX + 2;
	const char *nl = memchr(buf, '\n', lim);
	size_t n;

	if (!nl) {
		if (len > CTL_LINE_MAX)
			return -E2BIG;
		*ret_line_len = len;
		*ret_consumed = len;
		return 0;
	}
	n = (size_t)(nl - buf);
	if (n > 0 && buf[n - 1] == '\r')
		n--;
	if (n > CTL_LINE_MAX)
		return -E2BIG;
	*ret_line_len = n;
	*ret_consumed = (size_t)(nl - buf) + 1;
	return 1;
}
