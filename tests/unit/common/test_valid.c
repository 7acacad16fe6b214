/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of common/valid: names, paths under allowed prefixes, UTF-8. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "nerr.h"
#include "valid.h"

static void name_err(const char *name, const char *msg)
{
	struct nerr e = { 0 };

	cr_assert_eq(valid_name(name, &e), -EINVAL, "name '%s'", name);
	cr_assert_str_eq(e.msg, msg);
}

Test(valid, names_ok)
{
	char n64[NAME_MAX_LEN + 1];

	memset(n64, 'a', NAME_MAX_LEN);
	n64[NAME_MAX_LEN] = '\0';
	cr_assert_eq(valid_name("db", NULL), 0);
	cr_assert_eq(valid_name("a", NULL), 0);
	cr_assert_eq(valid_name("My_vol-1.2", NULL), 0);
	cr_assert_eq(valid_name("-x", NULL), 0);
	cr_assert_eq(valid_name("x.", NULL), 0);
	cr_assert_eq(valid_name(n64, NULL), 0);
}

Test(valid, names_bad)
{
	char n65[NAME_MAX_LEN + 2];

	name_err("", "name is empty");
	cr_assert_eq(valid_name(NULL, NULL), -EINVAL);
	name_err(".hidden", "name '.hidden' must not start with '.'");
	name_err(".", "name '.' must not start with '.'");
	name_err("..", "name '..' must not start with '.'");
	name_err("a b", "name 'a b' contains invalid character ' ' at position 2 "
		 "(allowed: A-Z a-z 0-9 . _ -)");
	name_err("a/b", "name 'a/b' contains invalid character '/' at position 2 "
		 "(allowed: A-Z a-z 0-9 . _ -)");
	name_err("x\n", "name 'x\\x0a' contains invalid character '\\x0a' at position 2 "
		 "(allowed: A-Z a-z 0-9 . _ -)");
	name_err("it's", "name 'it\\x27s' contains invalid character '\\x27' at position 3 "
		 "(allowed: A-Z a-z 0-9 . _ -)");
	name_err("caf\xc3\xa9", "name 'caf\xc3\xa9' contains invalid character '\\xc3' at "
		 "position 4 (allowed: A-Z a-z 0-9 . _ -)");
	memset(n65, 'a', NAME_MAX_LEN + 1);
	n65[NAME_MAX_LEN + 1] = '\0';
	name_err(n65, "name 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...' "
		 "is too long (65 characters, at most 64)");
}

static const char *const allowed[] = { "/mnt", "/srv/", "/var/lib/x" };

static int vp(const char *p, struct nerr *e)
{
	return valid_path(p, allowed, 3, e);
}

Test(valid, paths_ok)
{
	cr_assert_eq(vp("/mnt/db", NULL), 0);
	cr_assert_eq(vp("/mnt/a/b/c", NULL), 0);
	cr_assert_eq(vp("/srv/x", NULL), 0);
	cr_assert_eq(vp("/var/lib/x/y", NULL), 0);
	cr_assert_eq(vp("/mnt/...", NULL), 0);
	cr_assert_eq(vp("/mnt/.x", NULL), 0);
	cr_assert_eq(vp("/mnt/a..b", NULL), 0);
	cr_assert_eq(valid_path("/", NULL, 0, NULL), 0);
	cr_assert_eq(valid_path("/anything/at/all", NULL, 0, NULL), 0);
	{
		const char *root[] = { "/" };

		cr_assert_eq(valid_path("/etc", root, 1, NULL), 0);
		cr_assert_eq(valid_path("/", root, 1, NULL), -EPERM);
	}
}

static void path_err(const char *p, int code, const char *msg)
{
	struct nerr e = { 0 };

	cr_assert_eq(vp(p, &e), -code, "path '%s'", p);
	cr_assert_eq(e.code, code);
	cr_assert_str_eq(e.msg, msg);
}

Test(valid, paths_bad)
{
	char longp[VALID_PATH_MAX + 2];

	path_err("", EINVAL, "path is empty");
	path_err("mnt/db", EINVAL, "path 'mnt/db' is not absolute");
	path_err("/mnt//db", EINVAL, "path '/mnt//db' contains '//'");
	path_err("//mnt", EINVAL, "path '//mnt' contains '//'");
	path_err("/mnt/db/", EINVAL, "path '/mnt/db/' must not end with '/'");
	path_err("/mnt/./db", EINVAL, "path '/mnt/./db' contains a '.' component");
	path_err("/mnt/.", EINVAL, "path '/mnt/.' contains a '.' component");
	path_err("/mnt/../etc", EINVAL, "path '/mnt/../etc' contains a '..' component");
	path_err("/mnt/..", EINVAL, "path '/mnt/..' contains a '..' component");
	path_err("/mnt/a\tb", EINVAL, "path '/mnt/a\\x09b' contains control character 0x09 "
		 "at position 7");
	path_err("/mnt/\x7f", EINVAL, "path '/mnt/\\x7f' contains control character 0x7f "
		 "at position 6");
	path_err("/mntx", EPERM, "path '/mntx' is outside the allowed targets "
		 "(/mnt, /srv/, /var/lib/x)");
	path_err("/mnt", EPERM, "path '/mnt' is outside the allowed targets "
		 "(/mnt, /srv/, /var/lib/x)");
	path_err("/srv", EPERM, "path '/srv' is outside the allowed targets "
		 "(/mnt, /srv/, /var/lib/x)");
	path_err("/etc/passwd", EPERM, "path '/etc/passwd' is outside the allowed targets "
		 "(/mnt, /srv/, /var/lib/x)");
	path_err("/var/lib", EPERM, "path '/var/lib' is outside the allowed targets "
		 "(/mnt, /srv/, /var/lib/x)");
	path_err("/", EPERM, "path '/' is outside the allowed targets (/mnt, /srv/, /var/lib/x)");
	memset(longp, 'a', sizeof(longp));
	longp[0] = '/';
	longp[VALID_PATH_MAX] = '\0';
	cr_assert_eq(valid_path(longp, NULL, 0, NULL), 0);
	longp[VALID_PATH_MAX] = 'a';
	longp[VALID_PATH_MAX + 1] = '\0';
	cr_assert_eq(valid_path(longp, NULL, 0, NULL), -EINVAL);
}

Test(valid, utf8)
{
	cr_assert_eq(valid_utf8("", 0), 1);
	cr_assert_eq(valid_utf8("plain", 5), 1);
	cr_assert_eq(valid_utf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9), 1);
	cr_assert_eq(valid_utf8("\xef\xbf\xbf", 3), 1);		/* U+FFFF */
	cr_assert_eq(valid_utf8("\xf4\x8f\xbf\xbf", 4), 1);	/* U+10FFFF */
	cr_assert_eq(valid_utf8("a\0b", 3), 1);
	cr_assert_eq(valid_utf8("\x80", 1), 0);			/* lone continuation */
	cr_assert_eq(valid_utf8("\xc3", 1), 0);			/* truncated */
	cr_assert_eq(valid_utf8("\xc1\xbf", 2), 0);		/* overlong */
	cr_assert_eq(valid_utf8("\xe0\x9f\xbf", 3), 0);		/* overlong */
	cr_assert_eq(valid_utf8("\xf0\x8f\xbf\xbf", 4), 0);	/* overlong */
	cr_assert_eq(valid_utf8("\xed\xa0\x80", 3), 0);		/* surrogate */
	cr_assert_eq(valid_utf8("\xf4\x90\x80\x80", 4), 0);	/* > U+10FFFF */
	cr_assert_eq(valid_utf8("\xf5\x80\x80\x80", 4), 0);
	cr_assert_eq(valid_utf8("\xff", 1), 0);
	cr_assert_eq(valid_utf8("\xe2\x28\xa1", 3), 0);
}

Test(valid, escape)
{
	char b[32];

	cr_assert_str_eq(valid_escape("abc", 3, 10, b, sizeof(b)), "abc");
	cr_assert_str_eq(valid_escape("a\nb'", 4, 10, b, sizeof(b)), "a\\x0ab\\x27");
	cr_assert_str_eq(valid_escape("abcdef", 6, 3, b, sizeof(b)), "abc...");
	cr_assert_str_eq(valid_escape("\xc3\xa9\xff", 3, 10, b, sizeof(b)), "\xc3\xa9\\xff");
	/* a small buffer cuts at a character boundary and stays terminated */
	cr_assert_str_eq(valid_escape("abcdefgh", 8, 100, b, 5), "abcd");
	cr_assert_str_eq(valid_escape("\n\n", 2, 100, b, 7), "\\x0a");
}
