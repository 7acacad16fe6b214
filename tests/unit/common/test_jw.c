/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * jw against jansson: the same members give the same text, compact and
 * indented, for strings of every kind of byte and reals of every shape; what jansson would refuse
 * (bytes that are not UTF-8) still gives JSON that parses; the sbuf's
 * failures (cap, allocation) and the caller's own (jw_fail) stick and come
 * back from jw_end; bytes as base64 are what RFC 4648 gives.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "failalloc.h"
#include "jw.h"
#include "sbuf.h"

/* A random valid UTF-8 string: ASCII with every control and escape, and
 * 2-, 3- and 4-byte sequences. */
static void rand_utf8(unsigned *seed, char *s, size_t max)
{
	static const char *const pieces[] = {
		"a", "Z", "0", " ", "\"", "\\", "/", "\b", "\f", "\n", "\r", "\t", "\x01", "\x1f",
		"\x7f", "\xc3\xa9", "\xdf\xbf", "\xe2\x82\xac", "\xef\xbf\xbd", "\xed\x9f\xbf",
		"\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf", "key=value", "/run/nodefs/volumes/db",
	};
	size_t n = 0, want = (size_t)rand_r(seed) % 24;

	for (size_t i = 0; i < want; i++) {
		const char *p = pieces[(size_t)rand_r(seed) % (sizeof(pieces) / sizeof(pieces[0]))];
		size_t l = strlen(p);

		if (n + l + 1 > max)
			break;
		memcpy(s + n, p, l);
		n += l;
	}
	s[n] = '\0';
}

/* The same random object written by jw and by jansson. */
static void both(unsigned seed, int indent, struct sbuf *sb, char **ret_jansson)
{
	json_t *o = json_object();
	struct jw w;
	char k[64], s[256];
	int members = rand_r(&seed) % 12;

	jw_init(&w, sb, indent);
	jw_obj(&w);
	for (int i = 0; i < members; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		switch (rand_r(&seed) % 6) {
		case 0:
			rand_utf8(&seed, s, sizeof(s));
			jw_kstr(&w, k, s);
			json_object_set_new(o, k, json_string(s));
			break;
		case 1: {
			long long v = (long long)rand_r(&seed) * (rand_r(&seed) % 2 ? -1 : 1) *
				      (long long)rand_r(&seed);
			jw_kint(&w, k, v);
			json_object_set_new(o, k, json_integer(v));
			break;
		}
		case 2:
			jw_kbool(&w, k, seed & 1);
			json_object_set_new(o, k, json_boolean(seed & 1));
			break;
		case 3: {
			char a[4][256], *v[5] = { NULL };
			int n = rand_r(&seed) % 5;
			json_t *arr = json_array();

			for (int j = 0; j < n; j++) {
				rand_utf8(&seed, a[j], sizeof(a[j]));
				v[j] = a[j];
				json_array_append_new(arr, json_string(a[j]));
			}
			jw_kstrv(&w, k, v);
			json_object_set_new(o, k, arr);
			break;
		}
		case 4: {
			/* reals of every shape: integral, fractions, exponents */
			static const double scale[] = { 1, 0.5, 0.1, 1e-7, 1e21, 3.0e300, 1e-300 };
			double v = (double)(rand_r(&seed) % 2000 - 1000) *
				   scale[(size_t)rand_r(&seed) % (sizeof(scale) / sizeof(scale[0]))];

			jw_kreal(&w, k, v);
			json_object_set_new(o, k, json_real(v));
			break;
		}
		default:
			jw_kstr(&w, k, NULL);
			json_object_set_new(o, k, json_null());
		}
	}
	jw_obj_end(&w);
	cr_assert_eq(jw_end(&w), 0);
	*ret_jansson = json_dumps(o, indent ? JSON_INDENT(indent) | JSON_PRESERVE_ORDER : JSON_COMPACT);
	cr_assert_not_null(*ret_jansson);
	json_decref(o);
}

Test(jw, same_text_as_jansson)
{
	for (unsigned seed = 1; seed <= 3000; seed++) {
		for (int indent = 0; indent <= 2; indent += 2) {
			struct sbuf sb = SBUF_INIT(0);
			char *want;

			both(seed, indent, &sb, &want);
			cr_assert_str_eq(sb.buf, want, "seed %u indent %d", seed, indent);
			free(want);
			sbuf_free(&sb);
		}
	}
}

Test(jw, extremes)
{
	struct sbuf sb = SBUF_INIT(0);
	struct jw w;

	jw_init(&w, &sb, 0);
	jw_arr(&w);
	jw_int(&w, 0);
	jw_int(&w, -1);
	jw_int(&w, 9223372036854775807LL);
	jw_int(&w, -9223372036854775807LL - 1);
	jw_str(&w, "");
	jw_arr_end(&w);
	cr_assert_eq(jw_end(&w), 0);
	cr_assert_str_eq(sb.buf, "[0,-1,9223372036854775807,-9223372036854775808,\"\"]");
	sbuf_free(&sb);
}

Test(jw, reals_as_jansson)
{
	static const double v[] = { 0, 1, -1, 0.5, 2.5, 0.1, 1e20, 1e21, 1e-5, -3.25e-10, 1.5e300 };

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct sbuf sb = SBUF_INIT(0);
		struct jw w;
		json_t *j = json_real(v[i]);
		char *ref = json_dumps(j, JSON_ENCODE_ANY);

		jw_init(&w, &sb, 0);
		jw_real(&w, v[i]);
		cr_assert_eq(jw_end(&w), 0);
		cr_assert_str_eq(sb.buf, ref, "%g", v[i]);
		free(ref);
		json_decref(j);
		sbuf_free(&sb);
	}
}

/* Not UTF-8 (a lone continuation byte, a truncated sequence, an overlong
 * form, a surrogate, past U+10FFFF): U+FFFD per bad byte, and the text
 * parses. */
Test(jw, invalid_utf8_becomes_replacement)
{
	static const char *const bad[] = {
		"\x80", "a\xc3", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff", "x\xe2\x82",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sbuf sb = SBUF_INIT(0);
		struct jw w;
		json_error_t e;
		json_t *j;

		jw_init(&w, &sb, 0);
		jw_obj(&w);
		jw_kstr(&w, "s", bad[i]);
		jw_obj_end(&w);
		cr_assert_eq(jw_end(&w), 0);
		j = json_loads(sb.buf, 0, &e);
		cr_assert_not_null(j, "%zu: %s: %s", i, sb.buf, e.text);
		cr_assert_not_null(strstr(json_string_value(json_object_get(j, "s")), "\xef\xbf\xbd"));
		json_decref(j);
		sbuf_free(&sb);
	}
}

Test(jw, unbalanced_is_an_error)
{
	struct sbuf sb = SBUF_INIT(0);
	struct jw w;

	jw_init(&w, &sb, 0);
	jw_obj(&w);
	cr_assert_eq(jw_end(&w), -EINVAL);
	jw_init(&w, &sb, 0);
	jw_obj_end(&w);
	cr_assert_eq(jw_end(&w), -EINVAL);
	jw_init(&w, &sb, 0);
	for (int i = 0; i < JW_DEPTH + 1; i++)
		jw_arr(&w);
	cr_assert_eq(jw_end(&w), -E2BIG);
	sbuf_free(&sb);
}

/* The cap and the allocator: the first failure sticks. */
Test(jw, buffer_failures_stick)
{
	struct sbuf sb = SBUF_INIT(16);
	struct jw w;

	jw_init(&w, &sb, 0);
	jw_obj(&w);
	jw_kstr(&w, "name", "a string longer than the cap");
	jw_kint(&w, "n", 1);
	jw_obj_end(&w);
	cr_assert_eq(jw_end(&w), -E2BIG);
	sbuf_free(&sb);

	for (unsigned long nth = 1;; nth++) {
		struct sbuf s2 = SBUF_INIT(0);
		bool fired;
		int r;

		failalloc_arm(nth);
		jw_init(&w, &s2, 2);
		jw_obj(&w);
		for (int i = 0; i < 64; i++)
			jw_kstr(&w, "key", "a value of some length, to make the buffer grow");
		jw_obj_end(&w);
		r = jw_end(&w);
		fired = failalloc_fired();
		failalloc_hold();
		sbuf_free(&s2);
		cr_assert_eq(failalloc_live(), 0);
		failalloc_disarm();
		if (!fired) {
			cr_assert_eq(r, 0);
			break;
		}
		cr_assert_eq(r, -ENOMEM, "nth %lu: %d", nth, r);
	}
}

/* base64 as RFC 4648 gives it (its test vectors), and a long run of every
 * byte value read back whole: the writer flushes in chunks. */
static int b64_val(char c)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *p = c ? strchr(a, c) : NULL;

	return p ? (int)(p - a) : -1;
}

Test(jw, b64_as_rfc4648)
{
	static const char *const in[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
	static const char *const out[] = { "\"\"", "\"Zg==\"", "\"Zm8=\"", "\"Zm9v\"",
					   "\"Zm9vYg==\"", "\"Zm9vYmE=\"", "\"Zm9vYmFy\"" };
	unsigned char bytes[1000];
	struct sbuf sb = SBUF_INIT(0);
	struct jw w;

	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		sbuf_reset(&sb);
		jw_init(&w, &sb, 0);
		jw_b64(&w, in[i], strlen(in[i]));
		cr_assert_eq(jw_end(&w), 0);
		cr_assert_str_eq(sb.buf, out[i]);
	}
	for (size_t n = 997; n <= 1000; n++) {
		for (size_t i = 0; i < n; i++)
			bytes[i] = (unsigned char)(i * 7 + n);
		sbuf_reset(&sb);
		jw_init(&w, &sb, 0);
		jw_obj(&w);
		jw_kb64(&w, "v", bytes, n);
		jw_kint(&w, "n", (long long)n);
		jw_obj_end(&w);
		cr_assert_eq(jw_end(&w), 0);
		cr_assert_eq(strncmp(sb.buf, "{\"v\":\"", 6), 0);
		const char *s = sb.buf + 6, *end = strchr(s, '"');
		size_t len = (size_t)(end - s), k = 0;

		cr_assert_eq(len, (n + 2) / 3 * 4, "%zu bytes: %zu characters", n, len);
		for (size_t i = 0; i < len; i += 4) {
			int v[4];

			for (int j = 0; j < 4; j++)
				v[j] = s[i + j] == '=' ? 0 : b64_val(s[i + j]);
			cr_assert(v[0] >= 0 && v[1] >= 0 && v[2] >= 0 && v[3] >= 0);
			unsigned x = (unsigned)v[0] << 18 | (unsigned)v[1] << 12 | (unsigned)v[2] << 6 |
				     (unsigned)v[3];
			unsigned char d[3] = { (unsigned char)(x >> 16), (unsigned char)(x >> 8),
					       (unsigned char)x };

			for (int j = 0; j < 3 && k < n; j++, k++)
				cr_assert_eq(d[j], bytes[k], "%zu bytes: byte %zu", n, k);
		}
		cr_assert_eq(k, n);
		cr_assert_str_eq(end, n == 997 ? "\",\"n\":997}" : n == 998 ? "\",\"n\":998}" :
				 n == 999 ? "\",\"n\":999}" : "\",\"n\":1000}");
	}
	sbuf_free(&sb);
}

/* A caller's own failure sticks as the writer's do: nothing more is
 * written, the first error is the one jw_end gives. */
Test(jw, caller_failure_sticks)
{
	struct sbuf sb = SBUF_INIT(0);
	struct jw w;

	jw_init(&w, &sb, 0);
	jw_obj(&w);
	jw_kstr(&w, "a", "b");
	jw_fail(&w, -ENOMEM);
	jw_kstr(&w, "c", "d");
	jw_fail(&w, -EINVAL);
	jw_obj_end(&w);
	cr_assert_eq(jw_end(&w), -ENOMEM);
	cr_assert_str_eq(sb.buf, "{\"a\":\"b\"");
	sbuf_free(&sb);

	sb = (struct sbuf)SBUF_INIT(4);
	jw_init(&w, &sb, 0);
	jw_b64(&w, "foobar", 6);
	jw_fail(&w, -ENOMEM);
	cr_assert_eq(jw_end(&w), -E2BIG, "the cap came first");
	sbuf_free(&sb);
}
