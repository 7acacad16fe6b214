/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_copts: a create line's options through the container option table
 * (backend/containers/container-optparse.c) in its dry-run mode, for
 * Docker (first byte even) or LXC. Aborts when a refusal has no code or no
 * one-line message, or when an accepted spec does not survive its record's
 * round trip (write, read back, write again: the same bytes).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "container-options.h"
#include "ctl.h"
#include "jw.h"
#include "nerr.h"
#include "sbuf.h"

static void record(const struct cspec *s, struct sbuf *out)
{
	struct jw w;

	jw_init(&w, out, 0);
	jw_obj(&w);
	copts_write(s, &w, false);
	jw_obj_end(&w);
	if (jw_end(&w) < 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const allowed[] = { "/tmp", "/srv", NULL };
	struct ctl_cmd cmd = { 0 };
	struct cspec s = { 0 }, back = { 0 };
	struct nerr e = { 0 };
	char line[CTL_LINE_MAX + 16];
	unsigned rt;
	int r;

	if (size < 1 || size > CTL_LINE_MAX)
		return 0;
	rt = data[0] & 1 ? COPT_LXC : COPT_DOCKER;
	memcpy(line, "run x ", 6);
	memcpy(line + 6, data + 1, size - 1);
	if (ctl_parse(line, size + 5, &cmd, NULL) < 0)
		return 0;
	struct copt_ctx x = { .runtime = rt, .runtime_name = rt == COPT_LXC ? "lxc" : "docker",
			      .dry_run = true, .allowed_targets = allowed };
	r = copts_parse(&cmd, &x, &s, &e);
	if (r < 0) {
		if (e.code != -r || !e.msg[0] || strchr(e.msg, '\n'))
			abort();
	} else {
		struct sbuf a = SBUF_INIT(0), b = SBUF_INIT(0);
		json_t *j;

		record(&s, &a);
		j = json_loadb(a.buf, a.len, 0, NULL);
		if (!j)
			abort();
		copts_read(j, &back);
		json_decref(j);
		record(&back, &b);
		/* a value the record cannot keep apart from unset ("" is
		 * refused, so none) would differ here */
		if (a.len != b.len || memcmp(a.buf, b.buf, a.len) != 0)
			abort();
		sbuf_free(&a);
		sbuf_free(&b);
	}
	cspec_free(&s);
	cspec_free(&back);
	ctl_cmd_free(&cmd);
	return 0;
}
