/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * ctl: the tokenizer and command table of ctl files (Plan 9 Cmdtab style).
 *
 * A ctl line is words separated by blanks (space, tab). 'single quotes' are
 * literal; "double quotes" take \\ and \" escapes (any other backslash stays
 * as is); outside quotes a backslash escapes the next byte. After the command
 * word, a word that, unquoted, starts with a key matching
 * [A-Za-z_][A-Za-z0-9_.-]* followed by '=' is an option; its value follows
 * the same quoting rules (cmd='sleep 1000', env.K="a b"). Everything else is
 * an argument. Options may appear anywhere after the command word and repeated
 * keys are kept in order.
 *
 * Pure functions: no I/O, no globals, callable from any thread. They know
 * nothing of objects, fs or backend; the tables live with the objects.
 */
#ifndef NODEFS_CTL_H
#define NODEFS_CTL_H

#include <stdbool.h>
#include <stddef.h>

struct nerr;
struct sbuf;

#define CTL_LINE_MAX 4096

struct ctl_opt {
	char *key;
	char *val;
};

struct ctl_cmd {
	char **argv;		/* argv[0] = command word; NULL-terminated */
	size_t argc;		/* >= 1 after a successful ctl_parse() */
	struct ctl_opt *opts;	/* in the order written; NULL when nopts == 0 */
	size_t nopts;
};

/* Tokenize one line of len bytes (a trailing "\n" or "\r\n" is tolerated).
 * On success fills *ret (which the caller frees with ctl_cmd_free()) and
 * returns 0. On error *ret is untouched and err says why, with a 1-based
 * byte column where one applies:
 *   -EINVAL  empty line (nothing but blanks), line over CTL_LINE_MAX bytes,
 *            NUL byte, control character other than tab, invalid UTF-8,
 *            unterminated quote, trailing backslash, empty option key ("=x");
 *   -ENOMEM  allocation failure (nothing leaks). */
int ctl_parse(const char *line, size_t len, struct ctl_cmd *ret, struct nerr *err);

/* Free the contents of c and zero it. NULL-safe, fine on a zeroed struct. */
void ctl_cmd_free(struct ctl_cmd *c);

struct ctl_spec {
	const char *name;
	int min_args;			/* arguments are argv[1..] */
	int max_args;			/* -1 = unbounded */
	const char *const *opts;	/* NULL-terminated allowed keys; an entry ending
					 * in '.' ("env.") allows any longer key with
					 * that prefix; NULL = no options */
	const char *usage;		/* "publish TARGET [ro]" */
	/* when set, also allows each key it answers true for (an option
	 * table kept elsewhere: containers' create) */
	bool (*opt_known)(const char *key);
};

/* Find the entry of table[0..n) named cmd->argv[0] and check the argument
 * count and option keys against it. Returns 0 and sets *ret, or -EINVAL with
 * messages such as
 *   unknown command 'bogus'; expected one of: create, import
 *   publish: expects 1 to 2 arguments, got 0 (usage: publish TARGET [ro])
 *   create: unknown option 'sise' (usage: create NAME [size=SIZE])
 * Values are not checked here: that is the command's own job. */
int ctl_match(const struct ctl_spec *table, size_t n, const struct ctl_cmd *cmd,
	      const struct ctl_spec **ret, struct nerr *err);

/* The last value given for key, or NULL. Borrowed from c. */
const char *ctl_opt_get(const struct ctl_cmd *c, const char *key);

/* Append one usage line per command ("usage\n"; the name when usage is NULL)
 * to out: what reading a ctl file shows. Returns 0, -E2BIG or -ENOMEM. */
int ctl_usage(const struct ctl_spec *table, size_t n, struct sbuf *out);

/* Split s into words with the same quoting rules and no options (for
 * cmd='sh -c "echo hi"' and exec 'ARGV ...'). *ret_argv is a malloc'd
 * NULL-terminated vector (possibly empty) freed with ctl_strv_free().
 * Returns the number of words, -EINVAL (same rules as ctl_parse(), s longer
 * than CTL_LINE_MAX) or -ENOMEM. */
int ctl_split_words(const char *s, char ***ret_argv, struct nerr *err);

/* Free a NULL-terminated vector of strings. NULL-safe. */
void ctl_strv_free(char **v);

/* Find the first line in buf[0..len) (for a write holding several lines).
 * Returns 1 when a newline was found: *ret_line_len is the line's length
 * without "\n" or "\r\n", *ret_consumed includes the newline. Returns 0 when
 * the rest has no newline: *ret_line_len = *ret_consumed = len (a final line
 * written without newline, or nothing when len == 0). Returns -E2BIG when the
 * line is longer than CTL_LINE_MAX; the out-parameters are then untouched.
 * Empty lines come back as lines of length 0: skipping them is the
 * caller's choice. */
int ctl_next_line(const char *buf, size_t len, size_t *ret_line_len, size_t *ret_consumed);

#endif
