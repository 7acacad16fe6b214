/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of the container option table (backend/containers/
 * container-options.c) and its passes (container-optparse.c): a line's
 * options into a spec, ENOTSUP for a runtime that does not take one, a
 * repeat of a once-only option, required ones, bad values, the record's
 * round trip, the usage lines; and nodefs(5)'s options table against the
 * table, both ways (NODEFS_SRC names the source tree).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "container-options.h"
#include "ctl.h"
#include "jw.h"
#include "nerr.h"
#include "sbuf.h"

static int parse_line(const char *line, unsigned rt, struct cspec *s, struct nerr *e)
{
	struct ctl_cmd cmd = { 0 };
	static const char *const allowed[] = { "/tmp", NULL };
	struct copt_ctx x = { .runtime = rt, .runtime_name = rt == COPT_DOCKER ? "docker" : "lxc",
			      .dry_run = true, .allowed_targets = allowed };
	int r = ctl_parse(line, strlen(line), &cmd, e);

	cr_assert_eq(r, 0, "%s: %s", line, e->msg);
	r = copts_parse(&cmd, &x, s, e);
	ctl_cmd_free(&cmd);
	return r;
}

static void expect(const char *line, unsigned rt, int code, const char *in_msg)
{
	struct cspec s = { 0 };
	struct nerr e = { 0 };
	int r = parse_line(line, rt, &s, &e);

	cr_assert_eq(r, -code, "%s: got %d (%s)", line, r, e.msg);
	cr_assert(strstr(e.msg, in_msg), "%s: '%s' lacks '%s'", line, e.msg, in_msg);
	cspec_free(&s);
}

Test(copts, a_line_fills_the_spec)
{
	struct cspec s = { 0 };
	struct nerr e = { 0 };

	cr_assert_eq(parse_line("run x runtime=docker image=busybox cmd='sh -c \"echo hi\"' "
				"env.A=1 env.B='x y' cpus=0.5 memory=64M pids=10 "
				"bind=/tmp/a:/a:ro bind=/tmp/b:/b", COPT_DOCKER, &s, &e), 0, "%s", e.msg);
	cr_assert_str_eq(s.image, "busybox");
	cr_assert_str_eq(s.argv[0], "sh");
	cr_assert_str_eq(s.argv[2], "echo hi");
	cr_assert_eq(s.env.n, 2);
	cr_assert_str_eq(s.env.v[1].val, "x y");
	cr_assert_eq(s.cpus, 0.5);
	cr_assert_eq(s.memory, 64u << 20);
	cr_assert_eq(s.pids, 10);
	cr_assert_eq(s.mounts.n, 2);
	cr_assert(s.mounts.v[0].ro);
	cr_assert_str_eq(s.mounts.v[1].target, "/b");
	cspec_free(&s);
	cr_assert_eq(parse_line("run x runtime=lxc template=download distro=debian release=12 "
				"flush_cache=yes template_args='--keyserver k'", COPT_LXC, &s, &e), 0,
		     "%s", e.msg);
	cr_assert_str_eq(s.template_name, "download");
	cr_assert(s.flush_cache);
	cr_assert_str_eq(s.template_args[1], "k");
	cspec_free(&s);
	cr_assert_eq(parse_line("run x runtime=docker image=i user=app:staff workdir=/srv/app "
				"entrypoint='/bin/sh -c' hostname=web-1.example label.tier=front "
				"label.team=a force_pull=yes", COPT_DOCKER, &s, &e), 0, "%s", e.msg);
	cr_assert_str_eq(s.user, "app:staff");
	cr_assert_str_eq(s.workdir, "/srv/app");
	cr_assert_str_eq(s.entrypoint[1], "-c");
	cr_assert_str_eq(s.hostname, "web-1.example");
	cr_assert_eq(s.labels.n, 2);
	cr_assert_str_eq(s.labels.v[0].key, "tier");
	cr_assert(s.force_pull);
	cspec_free(&s);
}

Test(copts, user_names_resolve_in_the_image_files)
{
	static const char pw[] = "root:x:0:0:root:/root:/bin/sh\n# c\napp:x:1234:1235::/:/bin/sh\n"
				 "short:x\n";
	static const char gr[] = "root:x:0:\nstaff:x:50:\n";
	struct nerr e = { 0 };
	long u, g;

	cr_assert_eq(rt_user_resolve("app", pw, strlen(pw), gr, strlen(gr), &u, &g, &e), 0, "%s", e.msg);
	cr_assert_eq(u, 1234);
	cr_assert_eq(g, 1235);
	cr_assert_eq(rt_user_resolve("app:staff", pw, strlen(pw), gr, strlen(gr), &u, &g, &e), 0);
	cr_assert_eq(g, 50);
	cr_assert_eq(rt_user_resolve("4000:7", pw, strlen(pw), gr, strlen(gr), &u, &g, &e), 0);
	cr_assert_eq(u, 4000);
	cr_assert_eq(g, 7);
	cr_assert_eq(rt_user_resolve("1234", pw, strlen(pw), NULL, 0, &u, &g, &e), 0);
	cr_assert_eq(g, 1235);
	cr_assert_eq(rt_user_resolve("4000", NULL, 0, NULL, 0, &u, &g, &e), 0);
	cr_assert_eq(g, 0);
	cr_assert_eq(rt_user_resolve("nosuch", pw, strlen(pw), gr, strlen(gr), &u, &g, &e), -EINVAL);
	cr_assert(strstr(e.msg, "no user 'nosuch'"), "%s", e.msg);
	cr_assert_eq(rt_user_resolve("app:nogrp", pw, strlen(pw), gr, strlen(gr), &u, &g, &e), -EINVAL);
	cr_assert(strstr(e.msg, "no group 'nogrp'"), "%s", e.msg);
	cr_assert_eq(rt_user_resolve("short", pw, strlen(pw), gr, strlen(gr), &u, &g, &e), -EINVAL);
	cr_assert_eq(rt_user_resolve("ap", pw, strlen(pw), gr, strlen(gr), &u, &g, &e), -EINVAL);
}

Test(copts, refusals_name_the_option)
{
	expect("run x runtime=docker image=i template=busybox", COPT_DOCKER, ENOTSUP,
	       "template=: not supported by runtime docker");
	expect("run x runtime=lxc image=i", COPT_LXC, ENOTSUP, "image=: not supported by runtime lxc");
	expect("run x runtime=docker", COPT_DOCKER, EINVAL, "image=IMG is required");
	expect("run x runtime=docker image=a image=b", COPT_DOCKER, EINVAL, "image=: given twice");
	expect("run x runtime=docker image=i memory=1K", COPT_DOCKER, EINVAL, "memory=1K: at least 4M");
	expect("run x runtime=docker image=i memory=lots", COPT_DOCKER, EINVAL, "memory");
	expect("run x runtime=docker image=i pids=0", COPT_DOCKER, EINVAL, "pids");
	expect("run x runtime=docker image=i cpus=lots", COPT_DOCKER, EINVAL, "cpus");
	expect("run x runtime=docker image=i cmd='sh -c \"x'", COPT_DOCKER, EINVAL, "cmd");
	expect("run x runtime=docker image=i env.=1", COPT_DOCKER, EINVAL, "env.");
	expect("run x runtime=docker image=i bind=/etc:/x", COPT_DOCKER, EPERM, "bind");
	expect("run x runtime=docker image=i bind=/tmp/a", COPT_DOCKER, EINVAL, "bind");
	expect("run x runtime=docker image=i volume=v:rel", COPT_DOCKER, EINVAL, "volume");
	expect("run x runtime=lxc flush_cache=maybe", COPT_LXC, EINVAL, "flush_cache");
	expect("run x runtime=lxc bogus=1", COPT_LXC, EINVAL, "unknown option 'bogus'");
	expect("run x runtime=lxc force_pull=yes", COPT_LXC, ENOTSUP, "force_pull=: not supported by runtime lxc");
	expect("run x runtime=lxc user=a:b:c", COPT_LXC, EINVAL, "user=");
	expect("run x runtime=lxc user='a b'", COPT_LXC, EINVAL, "user=");
	expect("run x runtime=lxc user=99999999999", COPT_LXC, EINVAL, "out of range");
	expect("run x runtime=lxc workdir=rel", COPT_LXC, EINVAL, "workdir");
	expect("run x runtime=lxc workdir=/a/../b", COPT_LXC, EINVAL, "workdir");
	expect("run x runtime=lxc hostname=-x", COPT_LXC, EINVAL, "hostname=-x: not a host name");
	expect("run x runtime=lxc hostname=a..b", COPT_LXC, EINVAL, "hostname");
	expect("run x runtime=lxc hostname=a_b", COPT_LXC, EINVAL, "hostname");
	expect("run x runtime=lxc entrypoint=''", COPT_LXC, EINVAL, "entrypoint: at least 1 word");
	expect("run x runtime=lxc label.io.nodefs.name=x", COPT_LXC, EINVAL,
	       "label.io.nodefs.name: keys under io.nodefs. are reserved");
	expect("run x runtime=lxc label.a=1 label.a b=2", COPT_LXC, EINVAL, "unknown option");
}

Test(copts, record_round_trip_and_redaction)
{
	struct cspec s = { 0 }, back = { 0 };
	struct nerr e = { 0 };
	struct sbuf a = SBUF_INIT(0), b = SBUF_INIT(0), red = SBUF_INIT(0);
	struct jw w;
	json_error_t je;
	json_t *j;

	cr_assert_eq(parse_line("run x runtime=docker image=busybox cmd='sleep 1' env.S=secret "
				"memory=8M bind=/tmp/a:/a", COPT_DOCKER, &s, &e), 0, "%s", e.msg);
	jw_init(&w, &a, 0);
	jw_obj(&w);
	copts_write(&s, &w, false);
	jw_obj_end(&w);
	cr_assert_eq(jw_end(&w), 0);
	j = json_loadb(a.buf, a.len, 0, &je);
	cr_assert(j, "%s: %.*s", je.text, (int)a.len, a.buf);
	copts_read(j, &back);
	json_decref(j);
	jw_init(&w, &b, 0);
	jw_obj(&w);
	copts_write(&back, &w, false);
	jw_obj_end(&w);
	cr_assert_eq(jw_end(&w), 0);
	cr_assert_eq(a.len, b.len);
	cr_assert(memcmp(a.buf, b.buf, a.len) == 0, "%.*s\n%.*s", (int)a.len, a.buf, (int)b.len, b.buf);
	jw_init(&w, &red, 0);
	jw_obj(&w);
	copts_write(&s, &w, true);
	jw_obj_end(&w);
	cr_assert_eq(jw_end(&w), 0);
	cr_assert(!memmem(red.buf, red.len, "secret", 6));
	cr_assert(memmem(red.buf, red.len, "\"env\":{\"S\":\"<redacted>\"}", 24), "%.*s",
		  (int)red.len, red.buf);
	cr_assert(memmem(red.buf, red.len, "<redacted>", 10));
	cspec_free(&s);
	cspec_free(&back);
	sbuf_free(&a);
	sbuf_free(&b);
	sbuf_free(&red);
}

Test(copts, usage_lists_every_option)
{
	struct sbuf u = SBUF_INIT(0);

	cr_assert_geq(copts_usage(&u), 0);
	for (size_t i = 0; i < container_noptions; i++) {
		char want[80];
		const char *n = container_options[i].name;

		snprintf(want, sizeof(want), "  %s%s%s", n, n[strlen(n) - 1] == '.' ? "" : "=",
			 container_options[i].syntax);
		cr_assert(memmem(u.buf, u.len, want, strlen(want)), "usage lacks %s", want);
	}
	sbuf_free(&u);
}

Test(copts, table_rows_are_well_formed)
{
	for (size_t i = 0; i < container_noptions; i++) {
		const struct copt *o = &container_options[i];

		cr_assert(o->name && o->syntax && o->kind && o->help, "row %zu", i);
		cr_assert(o->runtimes & COPT_ALL, "%s: no runtime", o->name);
		cr_assert_eq(o->required & ~o->runtimes, 0, "%s: required where not taken", o->name);
		char key[80];

		snprintf(key, sizeof(key), "%s%s", o->name, o->name[strlen(o->name) - 1] == '.' ? "X" : "");
		cr_assert_eq(copt_find(key), o, "%s", key);
		for (size_t k = 0; k < i; k++)
			cr_assert_str_neq(o->name, container_options[k].name, "%s twice", o->name);
	}
}

/* The options nodefs(5) documents: in the region between the
 * options-table markers, every word of a .BR line of [a-z_] ending in '='
 * (an option) or '.' (a prefix). */
static size_t doc_options(char names[][64], size_t max)
{
	const char *src = getenv("NODEFS_SRC");
	char path[4096], line[1024];
	bool in = false;
	size_t n = 0;
	FILE *f;

	cr_assert(src, "NODEFS_SRC unset");
	snprintf(path, sizeof(path), "%s/docs/nodefs.5", src);
	f = fopen(path, "r");
	cr_assert(f, "%s", path);
	while (fgets(line, sizeof(line), f)) {
		if (strstr(line, "options-table-begin"))
			in = true;
		else if (strstr(line, "options-table-end"))
			break;
		else if (in && strncmp(line, ".BR ", 4) == 0)
			for (char *t = strtok(line + 4, " \t\n"); t; t = strtok(NULL, " \t\n")) {
				size_t l = strlen(t);

				if (l < 2 || (t[l - 1] != '=' && t[l - 1] != '.') ||
				    strspn(t, "abcdefghijklmnopqrstuvwxyz_") != l - 1)
					continue;
				cr_assert_lt(n, max);
				snprintf(names[n], 64, "%.*s", (int)(t[l - 1] == '=' ? l - 1 : l), t);
				n++;
			}
	}
	fclose(f);
	cr_assert(in, "no options-table-begin in %s", path);
	return n;
}

Test(copts, nodefs5_documents_exactly_the_table)
{
	static char doc[256][64];
	size_t n = doc_options(doc, 256);

	for (size_t i = 0; i < container_noptions; i++) {
		bool found = false;

		for (size_t k = 0; k < n && !found; k++)
			found = strcmp(doc[k], container_options[i].name) == 0;
		cr_assert(found, "nodefs(5)'s options table lacks %s", container_options[i].name);
	}
	for (size_t k = 0; k < n; k++) {
		bool found = false;

		for (size_t i = 0; i < container_noptions && !found; i++)
			found = strcmp(doc[k], container_options[i].name) == 0;
		cr_assert(found, "nodefs(5) documents %s, which the table lacks", doc[k]);
	}
}
