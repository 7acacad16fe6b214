/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of backend/fetch's pure parts: SHA-256 against FIPS 180-4's
 * vectors (and split updates), fetch= specs (every refusal of the issue
 * names its option), and the archive paths that must stay inside.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fetch.h"
#include "nerr.h"

static void digest(const char *s, size_t len, size_t step, char out[65])
{
	struct sha256 h;

	sha256_init(&h);
	for (size_t i = 0; i < len; i += step)
		sha256_update(&h, s + i, len - i < step ? len - i : step);
	sha256_hex(&h, out);
}

static void fips_vectors(void);

Test(sha256, fips_vectors_any_split)
{
	fips_vectors();
}

/* the portable rounds too, where the CPU has SHA extensions */
Test(sha256, fips_vectors_portable)
{
	setenv("NODEFS_SHA256_PORTABLE", "1", 1);
	fips_vectors();
	unsetenv("NODEFS_SHA256_PORTABLE");
}

static void fips_vectors(void)
{
	static const char abc[] = "abc";
	static const char two[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	char out[65], big[1000];

	digest("", 0, 1, out);
	cr_assert_str_eq(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	digest(abc, 3, 1, out);
	cr_assert_str_eq(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	for (size_t step = 1; step < 70; step += 7) {
		digest(two, strlen(two), step, out);
		cr_assert_str_eq(out, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	}
	memset(big, 'a', sizeof(big));
	struct sha256 h;

	sha256_init(&h);
	for (int i = 0; i < 1000; i++)
		sha256_update(&h, big, sizeof(big));
	sha256_hex(&h, out);
	cr_assert_str_eq(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void refused(const char *s, int code, const char *says)
{
	struct fetch_spec f = { 0 };
	struct nerr e = { 0 };
	int r = fetch_spec_parse(s, &f, &e);

	cr_assert_eq(r, -code, "%s: %d (%s)", s, r, e.msg);
	cr_assert(strstr(e.msg, says), "%s: '%s' lacks '%s'", s, e.msg, says);
	cr_assert_null(f.uri);
}

Test(fetch_spec, parses_and_refuses)
{
	struct fetch_spec f = { 0 };
	struct nerr e = { 0 };
	char buf[256];

	cr_assert_eq(fetch_spec_parse("http://h:8/a/b/tool.tgz?x=1#y sha256=" "ABCDEF0123456789abcdef0123456789"
				      "abcdef0123456789abcdef0123456789 extract executable dest=opt/t",
				      &f, &e), 0, "%s", e.msg);
	cr_assert_str_eq(f.uri, "http://h:8/a/b/tool.tgz?x=1#y");
	cr_assert_str_eq(f.sha256, "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789");
	cr_assert(f.extract && f.executable);
	cr_assert_str_eq(fetch_spec_dest(&f, buf, sizeof(buf)), "opt/t");
	fetch_spec_free(&f);
	cr_assert_eq(fetch_spec_parse("https://h/a/b/tool.tgz?x=1", &f, &e), 0);
	cr_assert_str_eq(fetch_spec_dest(&f, buf, sizeof(buf)), "tool.tgz");
	fetch_spec_free(&f);
	cr_assert_eq(fetch_spec_parse("file:///srv/x", &f, &e), 0);
	fetch_spec_free(&f);
	cr_assert_eq(fetch_spec_parse("file://localhost/srv/x", &f, &e), 0);
	fetch_spec_free(&f);
	cr_assert_eq(fetch_spec_parse("http://h/ extract", &f, &e), 0);
	cr_assert_str_eq(fetch_spec_dest(&f, buf, sizeof(buf)), ".");
	fetch_spec_free(&f);
	refused("ftp://h/x", EINVAL, "the scheme is not http, https or file");
	refused("HTTP//h/x", EINVAL, "scheme");
	refused("http:///x", EINVAL, "no host");
	refused("https://:80/x", EINVAL, "no host");
	refused("file://host/x", EINVAL, "absolute path");
	refused("http://h/x dest=../y", EINVAL, "leaves the sandbox");
	refused("http://h/x dest=a/../../y", EINVAL, "leaves the sandbox");
	refused("http://h/x dest=/etc", EINVAL, "leaves the sandbox");
	refused("http://h/x dest=./a", EINVAL, "leaves the sandbox");
	refused("http://h/x dest=", EINVAL, "leaves the sandbox");
	refused("http://h/x sha256=abc", EINVAL, "not 64 hex digits");
	refused("http://h/x sha256=" "g000000000000000000000000000000000000000000000000000000000000000",
		EINVAL, "not 64 hex digits");
	refused("http://h/", EINVAL, "give dest=");
	refused("http://h/x/..", EINVAL, "give dest=");
	refused("http://h/x bogus", EINVAL, "unknown word 'bogus'");
	refused("", EINVAL, "empty");
	refused("'http://h/x", EINVAL, "");
}

Test(fetch_spec, archive_paths_stay_inside)
{
	cr_assert(fetch_path_inside("a/b.txt", NULL, false));
	cr_assert(fetch_path_inside("./a/b.txt", NULL, false));
	cr_assert(fetch_path_inside("dir/", NULL, false));
	cr_assert(fetch_path_inside("./", NULL, false));
	cr_assert(!fetch_path_inside("../x", NULL, false));
	cr_assert(!fetch_path_inside("a/../../x", NULL, false));
	cr_assert(!fetch_path_inside("/etc/passwd", NULL, false));
	cr_assert(fetch_path_inside("a/ln", "../b", true));
	cr_assert(fetch_path_inside("a/ln", "c/d", true));
	cr_assert(!fetch_path_inside("a/ln", "../../b", true));
	cr_assert(!fetch_path_inside("ln", "/etc", true));
	cr_assert(!fetch_path_inside("ln", "..", true));
	cr_assert(fetch_path_inside("h", "a/b", false));
	cr_assert(!fetch_path_inside("a/h", "../etc/passwd", false));
	cr_assert(!fetch_path_inside("h", "/etc/passwd", false));
}
