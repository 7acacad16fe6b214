/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of common/ctl: tokenizing, quoting, options, errors with their
 * columns, command tables and usage, word splitting, line splitting, and
 * failing-allocation runs proving -ENOMEM without leaks.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "ctl.h"
#include "failalloc.h"
#include "nerr.h"
#include "sbuf.h"

static int parse(const char *s, struct ctl_cmd *c, struct nerr *e)
{
	return ctl_parse(s, strlen(s), c, e);
}

static void expect_err(const char *line, const char *msg)
{
	struct ctl_cmd c = { .argc = 12345 };
	struct nerr e = { 0 };
	int r = parse(line, &c, &e);

	cr_assert_eq(r, -EINVAL, "line '%s' gave %d", line, r);
	cr_assert_eq(e.code, EINVAL);
	cr_assert_str_eq(e.msg, msg, "line '%s'", line);
	cr_assert_eq(c.argc, 12345, "*ret must be untouched on error");
	cr_assert_null(c.argv);
}

Test(ctl, words_and_blanks)
{
	struct ctl_cmd c = { 0 };
	struct nerr e = { 0 };

	cr_assert_eq(parse("  publish \t /mnt/db   ro  ", &c, &e), 0, "%s", e.msg);
	cr_assert_eq(c.argc, 3);
	cr_assert_str_eq(c.argv[0], "publish");
	cr_assert_str_eq(c.argv[1], "/mnt/db");
	cr_assert_str_eq(c.argv[2], "ro");
	cr_assert_null(c.argv[3]);
	cr_assert_eq(c.nopts, 0);
	ctl_cmd_free(&c);
	cr_assert_null(c.argv);
	cr_assert_eq(c.argc, 0);
}

Test(ctl, trailing_newline_tolerated)
{
	struct ctl_cmd c = { 0 };

	cr_assert_eq(ctl_parse("start\n", 6, &c, NULL), 0);
	cr_assert_eq(c.argc, 1);
	cr_assert_str_eq(c.argv[0], "start");
	ctl_cmd_free(&c);
	cr_assert_eq(ctl_parse("stop 10\r\n", 9, &c, NULL), 0);
	cr_assert_eq(c.argc, 2);
	cr_assert_str_eq(c.argv[1], "10");
	ctl_cmd_free(&c);
	/* only one newline is a terminator: a second is an empty... control char */
	expect_err("stop\n\n", "control character 0x0a at column 5");
	/* a lone \r is not a terminator */
	expect_err("stop\r", "control character 0x0d at column 5");
}

Test(ctl, len_not_strlen)
{
	struct ctl_cmd c = { 0 };

	cr_assert_eq(ctl_parse("destroy now", 7, &c, NULL), 0);
	cr_assert_eq(c.argc, 1);
	cr_assert_str_eq(c.argv[0], "destroy");
	ctl_cmd_free(&c);
}

Test(ctl, quotes)
{
	struct ctl_cmd c = { 0 };
	struct nerr e = { 0 };

	cr_assert_eq(parse("exec 'sh -c \"echo hi\"' \"a \\\"b\\\" \\\\ \\n\" x\\ y '' \"\" a'b'\"c\"d",
			   &c, &e), 0, "%s", e.msg);
	cr_assert_eq(c.argc, 7);
	cr_assert_str_eq(c.argv[1], "sh -c \"echo hi\"");
	/* in double quotes only \\ and \" are escapes */
	cr_assert_str_eq(c.argv[2], "a \"b\" \\ \\n");
	cr_assert_str_eq(c.argv[3], "x y");
	cr_assert_str_eq(c.argv[4], "");
	cr_assert_str_eq(c.argv[5], "");
	cr_assert_str_eq(c.argv[6], "abcd");
	ctl_cmd_free(&c);

	/* single quotes are literal, backslashes included */
	cr_assert_eq(parse("x 'a\\b' \\'q\\' \\=v", &c, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.argv[1], "a\\b");
	cr_assert_str_eq(c.argv[2], "'q'");
	cr_assert_str_eq(c.argv[3], "=v");
	cr_assert_eq(c.nopts, 0);
	ctl_cmd_free(&c);
}

Test(ctl, options)
{
	struct ctl_cmd c = { 0 };
	struct nerr e = { 0 };

	cr_assert_eq(parse("create db size=1G plugin=hp param.k=v extra "
			   "cmd='sleep 1000' env.K=\"a b\" volume=a:/x volume=b:/y:ro empty= "
			   "_u-1.x=z", &c, &e), 0, "%s", e.msg);
	cr_assert_eq(c.argc, 3);
	cr_assert_str_eq(c.argv[0], "create");
	cr_assert_str_eq(c.argv[1], "db");
	cr_assert_str_eq(c.argv[2], "extra");
	cr_assert_eq(c.nopts, 9);
	cr_assert_str_eq(c.opts[0].key, "size");
	cr_assert_str_eq(c.opts[0].val, "1G");
	cr_assert_str_eq(c.opts[2].key, "param.k");
	cr_assert_str_eq(c.opts[3].key, "cmd");
	cr_assert_str_eq(c.opts[3].val, "sleep 1000");
	cr_assert_str_eq(c.opts[4].key, "env.K");
	cr_assert_str_eq(c.opts[4].val, "a b");
	cr_assert_str_eq(c.opts[5].val, "a:/x");
	cr_assert_str_eq(c.opts[6].key, "volume");
	cr_assert_str_eq(c.opts[6].val, "b:/y:ro");
	cr_assert_str_eq(c.opts[7].key, "empty");
	cr_assert_str_eq(c.opts[7].val, "");
	cr_assert_str_eq(c.opts[8].key, "_u-1.x");
	cr_assert_str_eq(ctl_opt_get(&c, "volume"), "b:/y:ro");
	cr_assert_str_eq(ctl_opt_get(&c, "size"), "1G");
	cr_assert_null(ctl_opt_get(&c, "nope"));
	cr_assert_null(ctl_opt_get(NULL, "size"));
	ctl_cmd_free(&c);
}

Test(ctl, not_options)
{
	struct ctl_cmd c = { 0 };
	struct nerr e = { 0 };

	/* a quoted or escaped key, a key starting with a digit or a bad
	 * character, and the command word itself are arguments */
	cr_assert_eq(parse("a=b 'k=v' \"k\"=v k\\=v 1k=v a/b=c /mnt/x=y k:=v", &c, &e), 0,
		     "%s", e.msg);
	cr_assert_eq(c.nopts, 0);
	cr_assert_eq(c.argc, 8);
	cr_assert_str_eq(c.argv[0], "a=b");
	cr_assert_str_eq(c.argv[1], "k=v");
	cr_assert_str_eq(c.argv[2], "k=v");
	cr_assert_str_eq(c.argv[3], "k=v");
	cr_assert_str_eq(c.argv[4], "1k=v");
	ctl_cmd_free(&c);
}

Test(ctl, option_value_may_hold_equals_and_quotes)
{
	struct ctl_cmd c = { 0 };

	cr_assert_eq(parse("x a=b=c e='x=y'z", &c, NULL), 0);
	cr_assert_str_eq(c.opts[0].val, "b=c");
	cr_assert_str_eq(c.opts[1].val, "x=yz");
	ctl_cmd_free(&c);
}

Test(ctl, errors)
{
	expect_err("", "empty line");
	expect_err(" \t ", "empty line");
	expect_err("\n", "empty line");
	expect_err("exec 'abc", "unterminated quote at column 6");
	expect_err("create x cmd=\"sleep 1", "unterminated quote at column 14");
	expect_err("exec \"a\\\"", "unterminated quote at column 6");
	expect_err("stop \\", "backslash at end of line (column 6)");
	expect_err("create x =v", "empty option key at column 10");
	expect_err("create x =", "empty option key at column 10");
	expect_err("bell\a", "control character 0x07 at column 5");
	expect_err("del\x7f", "control character 0x7f at column 4");
	expect_err("a\xff", "invalid UTF-8 at column 2");
	expect_err("a \xc3\x28", "invalid UTF-8 at column 3");
	expect_err("a \xc0\xaf", "invalid UTF-8 at column 3");		/* overlong '/' */
	expect_err("a \xed\xa0\x80", "invalid UTF-8 at column 3");	/* surrogate */
	expect_err("a \xf4\x90\x80\x80", "invalid UTF-8 at column 3");	/* > U+10FFFF */
	expect_err("a \xe2\x82", "invalid UTF-8 at column 3");		/* truncated */
}

Test(ctl, utf8_ok)
{
	struct ctl_cmd c = { 0 };

	cr_assert_eq(parse("echo h\xc3\xa9llo '\xe2\x82\xac' \xf0\x9f\x98\x80 k=\xc3\xa9", &c, NULL), 0);
	cr_assert_str_eq(c.argv[1], "h\xc3\xa9llo");
	cr_assert_str_eq(c.argv[2], "\xe2\x82\xac");
	cr_assert_str_eq(c.opts[0].val, "\xc3\xa9");
	ctl_cmd_free(&c);
}

Test(ctl, nul_byte)
{
	struct ctl_cmd c = { 0 };
	struct nerr e = { 0 };

	cr_assert_eq(ctl_parse("ab\0cd", 5, &c, &e), -EINVAL);
	cr_assert_str_eq(e.msg, "NUL byte at column 3");
}

Test(ctl, line_max)
{
	char buf[CTL_LINE_MAX + 3];
	struct ctl_cmd c = { 0 };
	struct nerr e = { 0 };

	memset(buf, 'a', sizeof(buf));
	cr_assert_eq(ctl_parse(buf, CTL_LINE_MAX, &c, &e), 0, "%s", e.msg);
	cr_assert_eq(strlen(c.argv[0]), CTL_LINE_MAX);
	ctl_cmd_free(&c);
	buf[CTL_LINE_MAX] = '\r';
	buf[CTL_LINE_MAX + 1] = '\n';
	cr_assert_eq(ctl_parse(buf, CTL_LINE_MAX + 2, &c, &e), 0, "%s", e.msg);
	ctl_cmd_free(&c);
	memset(buf, 'a', sizeof(buf));
	cr_assert_eq(ctl_parse(buf, CTL_LINE_MAX + 1, &c, &e), -EINVAL);
	cr_assert_str_eq(e.msg, "line too long (4097 bytes, at most 4096)");
}

Test(ctl, many_words)
{
	char buf[CTL_LINE_MAX];
	struct ctl_cmd c = { 0 };
	size_t n = 0;

	for (n = 0; n + 2 <= sizeof(buf); n += 2) {
		buf[n] = 'w';
		buf[n + 1] = ' ';
	}
	cr_assert_eq(ctl_parse(buf, sizeof(buf), &c, NULL), 0);
	cr_assert_eq(c.argc, CTL_LINE_MAX / 2);
	cr_assert_null(c.argv[c.argc]);
	ctl_cmd_free(&c);
}

Test(ctl, free_null_and_zeroed)
{
	struct ctl_cmd c = { 0 };

	ctl_cmd_free(NULL);
	ctl_cmd_free(&c);
	ctl_cmd_free(&c);
}

static const char *const create_opts[] = { "size", "plugin", "param.", NULL };
static const struct ctl_spec table[] = {
	{ .name = "create", .min_args = 1, .max_args = 1, .opts = create_opts,
	  .usage = "create NAME [size=SIZE] [plugin=P] [param.K=V ...]" },
	{ .name = "import", .min_args = 2, .max_args = 2,
	  .usage = "import NAME ID" },
	{ .name = "publish", .min_args = 1, .max_args = 2, .usage = "publish TARGET [ro]" },
	{ .name = "unpublish", .min_args = 0, .max_args = 0, .usage = "unpublish" },
	{ .name = "exec", .min_args = 1, .max_args = -1, .usage = "exec 'ARGV ...'" },
	{ .name = "kill", .min_args = 0, .max_args = 1 },
};

static int match(const char *line, const struct ctl_spec **sp, struct nerr *e)
{
	struct ctl_cmd c = { 0 };
	int r = parse(line, &c, e);

	cr_assert_eq(r, 0, "%s", e->msg);
	r = ctl_match(table, sizeof(table) / sizeof(table[0]), &c, sp, e);
	ctl_cmd_free(&c);
	return r;
}

static void expect_match_err(const char *line, const char *msg)
{
	const struct ctl_spec *sp = (const void *)1;
	struct nerr e = { 0 };

	cr_assert_eq(match(line, &sp, &e), -EINVAL, "line '%s'", line);
	cr_assert_str_eq(e.msg, msg);
	cr_assert_eq(sp, (const void *)1, "*ret untouched on error");
}

Test(ctl, match_ok)
{
	const struct ctl_spec *sp = NULL;
	struct nerr e = { 0 };

	cr_assert_eq(match("create db size=1G param.x=1 param.y=2", &sp, &e), 0, "%s", e.msg);
	cr_assert_eq(sp, &table[0]);
	cr_assert_eq(match("publish /mnt/x ro", &sp, &e), 0);
	cr_assert_eq(sp, &table[2]);
	cr_assert_eq(match("publish /mnt/x", &sp, &e), 0);
	cr_assert_eq(match("exec a b c d e", &sp, &e), 0);
	cr_assert_eq(sp, &table[4]);
	cr_assert_eq(match("unpublish", &sp, &e), 0);
}

Test(ctl, match_errors)
{
	expect_match_err("bogus", "unknown command 'bogus'; expected one of: create, import, "
			 "publish, unpublish, exec, kill");
	expect_match_err("publish", "publish: expects 1 to 2 arguments, got 0 "
			 "(usage: publish TARGET [ro])");
	expect_match_err("publish a b c", "publish: expects 1 to 2 arguments, got 3 "
			 "(usage: publish TARGET [ro])");
	expect_match_err("create", "create: expects 1 argument, got 0 "
			 "(usage: create NAME [size=SIZE] [plugin=P] [param.K=V ...])");
	expect_match_err("import a", "import: expects 2 arguments, got 1 (usage: import NAME ID)");
	expect_match_err("unpublish now", "unpublish: expects no arguments, got 1 (usage: unpublish)");
	expect_match_err("exec", "exec: expects at least 1 argument, got 0 (usage: exec 'ARGV ...')");
	expect_match_err("kill 9 9", "kill: expects 0 to 1 arguments, got 2 (usage: kill)");
	expect_match_err("create db sise=1G", "create: unknown option 'sise' "
			 "(usage: create NAME [size=SIZE] [plugin=P] [param.K=V ...])");
	/* a prefix entry needs something after the prefix */
	expect_match_err("create db param.=1", "create: unknown option 'param.' "
			 "(usage: create NAME [size=SIZE] [plugin=P] [param.K=V ...])");
	expect_match_err("create db paramx=1", "create: unknown option 'paramx' "
			 "(usage: create NAME [size=SIZE] [plugin=P] [param.K=V ...])");
	/* no options allowed at all */
	expect_match_err("publish /mnt/x mode=ro", "publish: unknown option 'mode' "
			 "(usage: publish TARGET [ro])");
	/* what is echoed back is escaped and cut */
	expect_match_err("'bo'\\''gus'", "unknown command 'bo\\x27gus'; expected one of: create, "
			 "import, publish, unpublish, exec, kill");
}

Test(ctl, usage)
{
	struct sbuf sb = SBUF_INIT(0);

	cr_assert_eq(ctl_usage(table, 3, &sb), 0);
	cr_assert_str_eq(sb.buf, "create NAME [size=SIZE] [plugin=P] [param.K=V ...]\n"
			 "import NAME ID\npublish TARGET [ro]\n");
	sbuf_reset(&sb);
	cr_assert_eq(ctl_usage(table + 5, 1, &sb), 0);
	cr_assert_str_eq(sb.buf, "kill\n");
	sbuf_free(&sb);

	/* the cap of the buffer is respected */
	sbuf_init(&sb, 10);
	cr_assert_eq(ctl_usage(table, 1, &sb), -E2BIG);
	sbuf_free(&sb);
}

Test(sbuf, printf_fits_grows_and_keeps_the_cap)
{
	struct sbuf sb = SBUF_INIT(0);

	/* formatted in place when it fits, measured and grown when not */
	cr_assert_eq(sbuf_printf(&sb, "%s=%d\n", "a", 1), 0);
	cr_assert_eq(sbuf_printf(&sb, "%.3f %0200d\n", 1.5, 7), 0);
	cr_assert_eq(sb.len, 4 + 207);
	cr_assert_eq(strncmp(sb.buf, "a=1\n1.500 000", 13), 0);
	cr_assert_eq(sb.buf[sb.len], '\0');
	sbuf_free(&sb);

	/* over the cap: -E2BIG and nothing appended, whether or not the text
	 * would have fit the allocation */
	sbuf_init(&sb, 8);
	cr_assert_eq(sbuf_printf(&sb, "%s", "abcd"), 0);
	cr_assert_eq(sbuf_printf(&sb, "%s", "efghij"), -E2BIG);
	cr_assert_eq(sb.len, 4);
	cr_assert_str_eq(sb.buf, "abcd");
	cr_assert_eq(sbuf_printf(&sb, "%s", "efgh"), 0);
	cr_assert_str_eq(sb.buf, "abcdefgh");
	cr_assert_eq(sbuf_printf(&sb, "x"), -E2BIG);
	cr_assert_str_eq(sb.buf, "abcdefgh");
	sbuf_free(&sb);
}

Test(ctl, split_words)
{
	char **v = NULL;
	struct nerr e = { 0 };

	cr_assert_eq(ctl_split_words("sh -c \"echo hi\" 'a b' k=v", &v, &e), 5, "%s", e.msg);
	cr_assert_str_eq(v[0], "sh");
	cr_assert_str_eq(v[1], "-c");
	cr_assert_str_eq(v[2], "echo hi");
	cr_assert_str_eq(v[3], "a b");
	cr_assert_str_eq(v[4], "k=v");	/* no options here */
	cr_assert_null(v[5]);
	ctl_strv_free(v);

	cr_assert_eq(ctl_split_words("  ", &v, &e), 0);
	cr_assert_not_null(v);
	cr_assert_null(v[0]);
	ctl_strv_free(v);
	ctl_strv_free(NULL);

	v = (char **)1;
	cr_assert_eq(ctl_split_words("echo 'oops", &v, &e), -EINVAL);
	cr_assert_str_eq(e.msg, "unterminated quote at column 6");
	cr_assert_eq(ctl_split_words("a\tb\x01", &v, &e), -EINVAL);
	cr_assert_str_eq(e.msg, "control character 0x01 at column 4");
	cr_assert_eq(v, (char **)1);
}

Test(ctl, split_words_too_long)
{
	char buf[CTL_LINE_MAX + 2];
	char **v = NULL;
	struct nerr e = { 0 };

	memset(buf, 'x', sizeof(buf));
	buf[CTL_LINE_MAX] = '\0';
	cr_assert_eq(ctl_split_words(buf, &v, &e), 1);
	ctl_strv_free(v);
	buf[CTL_LINE_MAX] = 'x';
	buf[CTL_LINE_MAX + 1] = '\0';
	cr_assert_eq(ctl_split_words(buf, &v, &e), -EINVAL);
	cr_assert_str_eq(e.msg, "too long (4097 bytes, at most 4096)");
}

Test(ctl, next_line)
{
	const char *b = "start\r\nstop 5\n\nlast";
	size_t len = strlen(b), ll = 99, used = 99, pos = 0;

	cr_assert_eq(ctl_next_line(b, len, &ll, &used), 1);
	cr_assert_eq(ll, 5);
	cr_assert_eq(used, 7);
	pos += used;
	cr_assert_eq(ctl_next_line(b + pos, len - pos, &ll, &used), 1);
	cr_assert_eq(ll, 6);
	cr_assert_eq(used, 7);
	pos += used;
	cr_assert_eq(ctl_next_line(b + pos, len - pos, &ll, &used), 1);
	cr_assert_eq(ll, 0);
	cr_assert_eq(used, 1);
	pos += used;
	cr_assert_eq(ctl_next_line(b + pos, len - pos, &ll, &used), 0);
	cr_assert_eq(ll, 4);
	cr_assert_eq(used, 4);
	cr_assert_eq(ctl_next_line("", 0, &ll, &used), 0);
	cr_assert_eq(ll, 0);
	cr_assert_eq(used, 0);
}

Test(ctl, next_line_limits)
{
	static char buf[3 * CTL_LINE_MAX];
	size_t ll = 99, used = 99;

	memset(buf, 'a', sizeof(buf));
	/* exactly CTL_LINE_MAX, with \n and with \r\n */
	buf[CTL_LINE_MAX] = '\n';
	cr_assert_eq(ctl_next_line(buf, sizeof(buf), &ll, &used), 1);
	cr_assert_eq(ll, CTL_LINE_MAX);
	cr_assert_eq(used, CTL_LINE_MAX + 1);
	buf[CTL_LINE_MAX] = '\r';
	buf[CTL_LINE_MAX + 1] = '\n';
	cr_assert_eq(ctl_next_line(buf, sizeof(buf), &ll, &used), 1);
	cr_assert_eq(ll, CTL_LINE_MAX);
	cr_assert_eq(used, CTL_LINE_MAX + 2);
	/* one more byte: too long, out-parameters untouched */
	memset(buf, 'a', sizeof(buf));
	buf[CTL_LINE_MAX + 1] = '\n';
	ll = used = 99;
	cr_assert_eq(ctl_next_line(buf, sizeof(buf), &ll, &used), -E2BIG);
	cr_assert_eq(ll, 99);
	/* no newline anywhere: too long as soon as the rest is */
	memset(buf, 'a', sizeof(buf));
	cr_assert_eq(ctl_next_line(buf, CTL_LINE_MAX, &ll, &used), 0);
	cr_assert_eq(ctl_next_line(buf, CTL_LINE_MAX + 1, &ll, &used), -E2BIG);
	cr_assert_eq(ctl_next_line(buf, sizeof(buf), &ll, &used), -E2BIG);
}

/* Fail each allocation of ctl_parse in turn: -ENOMEM every time, with a
 * message, and nothing left allocated; then the run with no failure. */
static void failalloc_run(const char *line)
{
	unsigned long n;

	for (n = 1; n < 10000; n++) {
		struct ctl_cmd c = { 0 };
		struct nerr e = { 0 };
		bool fired;
		long live;
		int r;

		failalloc_arm(n);
		r = ctl_parse(line, strlen(line), &c, &e);
		fired = failalloc_fired();
		failalloc_hold();
		if (r == 0)
			ctl_cmd_free(&c);
		live = failalloc_live();
		failalloc_disarm();
		if (!fired) {
			cr_assert_eq(r, 0, "%s", e.msg);
			cr_assert_eq(live, 0, "leak after success: %ld", live);
			break;
		}
		cr_assert_eq(r, -ENOMEM, "allocation %lu failed but got %d (%s)", n, r, e.msg);
		cr_assert_eq(e.code, ENOMEM);
		cr_assert_str_eq(e.msg, "out of memory");
		cr_assert_null(c.argv, "*ret touched on failure");
		cr_assert_eq(live, 0, "allocation %lu failed: %ld blocks leaked", n, live);
	}
	cr_assert_gt(n, 3, "the line should need several allocations");
}

Test(ctl_failalloc, parse)
{
	failalloc_run("create db size=1G plugin=hp param.a=1 param.b=2 x y z w v u t s r q p o");
	failalloc_run("run c runtime=docker cmd='sh -c \"sleep 1\"' env.A=1 volume=v:/x");
}

Test(ctl_failalloc, split_words)
{
	unsigned long n;

	for (n = 1; n < 1000; n++) {
		char **v = NULL;
		struct nerr e = { 0 };
		bool fired;
		long live;
		int r;

		failalloc_arm(n);
		r = ctl_split_words("a b c d e f g h i j k", &v, &e);
		fired = failalloc_fired();
		failalloc_hold();
		if (r >= 0)
			ctl_strv_free(v);
		live = failalloc_live();
		failalloc_disarm();
		cr_assert_eq(live, 0);
		if (!fired) {
			cr_assert_eq(r, 11);
			break;
		}
		cr_assert_eq(r, -ENOMEM);
	}
	cr_assert_gt(n, 3);
}
