/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unit tests of common/redact: option values hidden in ctl lines. */
#include <criterion/criterion.h>
#include <string.h>

#include "redact.h"
#include "sbuf.h"

static const char *const names[] = { "env.", "param.password", NULL };

static void check(const char *in, const char *want)
{
	struct sbuf out = SBUF_INIT(0);

	cr_assert_eq(redact_line(in, strlen(in), names, &out), 0);
	cr_assert_eq(sbuf_addc(&out, '\0'), 0);
	cr_assert_str_eq(out.buf, want, "'%s'", in);
	sbuf_free(&out);
}

Test(redact, lines)
{
	check("", "");
	check("run web image=x env.A=1", "run web image=x env.A=<redacted>");
	check("run web env.A='a b c' cmd='sleep 1'", "run web env.A=<redacted> cmd='sleep 1'");
	check("run web env.A=\"x \\\" y\"  image=z", "run web env.A=<redacted>  image=z");
	check("create v param.password=s param.passwords=t param.color=b",
	      "create v param.password=<redacted> param.passwords=t param.color=b");
	check("run w env.=x env", "run w env.=x env");	/* a prefix alone names nothing */
	check("run w cmd='env.A=1'", "run w cmd='env.A=1'");
	check("run w env.A='unterminated", "run w env.A=<redacted>");
	check("run w env.A=a\\ b c", "run w env.A=<redacted> c");
}

Test(redact, keys)
{
	cr_assert(redact_key("env.X", 5, names));
	cr_assert_not(redact_key("env.", 4, names));
	cr_assert(redact_key("param.password", 14, names));
	cr_assert_not(redact_key("param.pass", 10, names));
	cr_assert_not(redact_key("x", 1, NULL));
}

Test(redact, dup)
{
	char **v = redact_names_dup(names);

	cr_assert_not_null(v);
	cr_assert_str_eq(v[1], "param.password");
	cr_assert_null(v[2]);
	redact_names_free(v);
	cr_assert_null(redact_names_dup(NULL));
}
