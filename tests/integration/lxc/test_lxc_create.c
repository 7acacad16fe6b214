/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_lxc_create: what the LXC driver takes and refuses before and while it
 * makes a container: the driver's own config (open), a config item liblxc
 * rejects, every kind of bad create input (template, name, mounts, limits, a
 * download that fails, a template that fails half way, a name taken), and the
 * download template's options mapped to its flags or refused. A refused or
 * failed create leaves nothing in the lxcpath. It reaches the driver only
 * through rt_lxc_ops (and the pure helpers of lxc-internal.h) and the fixture
 * only through lxc_test.h.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <limits.h>
#include <sys/stat.h>

#include "lxc_test.h"

Test(lxc, health_and_version)
{
	struct sbuf v = SBUF_INIT(4096);
	struct nerr err = { 0 };

	cr_assert_eq(ops->health(H, &v, &err), 0, "health: %s", err.msg);
	cr_assert(strncmp(v.buf, "liblxc ", 7) == 0, "version '%s'", v.buf);
	sbuf_free(&v);
}

Test(lxc, bad_config_rejected)
{
	struct rt_kv kv[] = { { (char *)"no_such_key", (char *)"1" } };
	struct rt_kv kv2[] = { { (char *)"stop_timeout", (char *)"soon" } };
	struct rt_config cfg = { kv, 1 }, cfg2 = { kv2, 1 };
	struct nerr err = { 0 };
	void *h2 = NULL;

	cr_assert_eq(ops->open(&cfg, &h2, &err), -EINVAL);
	cr_assert(strstr(err.msg, "no_such_key"), "%s", err.msg);
	cr_assert_eq(ops->open(&cfg2, &h2, &err), -EINVAL);
}

/* A config item liblxc rejects goes through the one table: EINVAL, the
 * item named, and the half-made container removed. */
Test(lxc, config_item_rejected_through_the_table)
{
	struct rt_kv kv[] = { { (char *)"lxcpath", lxcpath },
			      { (char *)"network_type", (char *)"bogus" },
			      { (char *)"template_dir", templates() } };
	struct rt_config cfg = { kv, 3 };
	struct nerr err = { 0 };
	struct rt_spec s;
	char *id = NULL;
	void *h2 = NULL;

	cr_assert_eq(ops->open(&cfg, &h2, &err), 0, "%s", err.msg);
	spec_init(&s, "badnet");
	cr_assert_eq(ops->create(h2, &s, NULL, &id, &err), -EINVAL);
	cr_assert(strstr(err.msg, "lxc badnet: config item rejected: lxc.net.0.type = bogus"),
		  "%s", err.msg);
	cr_assert_null(id);
	ops->close(h2);
	cr_assert_eq(count_entries(lxcpath), 0, "a rejected config left files");
}

Test(lxc, bad_input_leaves_nothing)
{
	struct rt_spec s;
	struct nerr err = { 0 };
	char *id = NULL;
	char tmpl[700];
	FILE *f;
	struct rt_mount m = { .source = "/nonexistent/dir", .target = "/x" };
	struct rt_mount mbad = { .source = "/tmp", .target = "/x/../etc" };

	spec_init(&s, "bad");
	s.template_name = "no-such-template";
	cr_assert_eq(ops->create(H, &s, NULL, &id, &err), -ENOENT);
	cr_assert(strstr(err.msg, "unknown template"), "%s", err.msg);

	spec_init(&s, "bad");
	s.distro = "alpine";	/* only for download */
	cr_assert_eq(ops->create(H, &s, NULL, &id, &err), -EINVAL);

	spec_init(&s, "bad/name");
	cr_assert_eq(ops->create(H, &s, NULL, &id, &err), -EINVAL);
	spec_init(&s, ".hidden");
	cr_assert_eq(ops->create(H, &s, NULL, &id, &err), -EINVAL);

	spec_init(&s, "bad");
	s.mounts = &m;
	s.nmounts = 1;
	cr_assert_eq(ops->create(H, &s, NULL, &id, &err), -ENOENT);
	s.mounts = &mbad;
	cr_assert_eq(ops->create(H, &s, NULL, &id, &err), -EINVAL);

	spec_init(&s, "bad");
	s.memory = 1000;
	cr_assert_eq(ops->create(H, &s, NULL, &id, &err), -EINVAL);
	cr_assert_eq(count_entries(lxcpath), 0, "a rejected create left files");

	/* The download template, pointed at a local port where nothing
	 * listens (nothing leaves this machine): fails with its own words. */
	spec_init(&s, "dl");
	s.template_name = "download";
	s.distro = "alpine";
	s.release = "3.19";
	s.arch = "amd64";
	s.image_server = "127.0.0.1:1";
	cr_assert_eq(ops->create(H, &s, NULL, &id, &err), -EIO);
	cr_assert(strstr(err.msg, "Failed to download"), "%s", err.msg);
	cr_assert_eq(count_entries(lxcpath), 0, "a failed download left files");

	/* disable_gpg: Debian 12's download template checks no signature
	 * and has no --no-validate: refused before the template runs. */
	spec_init(&s, "gpg");
	s.template_name = "download";
	s.distro = "alpine";
	s.release = "3.19";
	s.arch = "amd64";
	s.image_server = "127.0.0.1:1";
	s.disable_gpg = true;
	if (access("/usr/share/lxc/templates/lxc-download", X_OK) == 0 &&
	    run_cmd("grep -q no-validate /usr/share/lxc/templates/lxc-download") != 0) {
		cr_assert_eq(ops->create(H, &s, NULL, &id, &err), -EINVAL);
		cr_assert(strstr(err.msg, "disable_gpg") && strstr(err.msg, "no --no-validate"),
			  "%s", err.msg);
		cr_assert_eq(count_entries(lxcpath), 0, "a refused disable_gpg left files");
	}

	/* A template that fails half way: nothing half-made stays. */
	snprintf(tmpl, sizeof(tmpl), "%s/../failing-template-%d", lxcpath, (int)getpid());
	f = fopen(tmpl, "w");
	cr_assert_not_null(f);
	fputs("#!/bin/sh\nfor a; do case $a in --rootfs=*) r=${a#--rootfs=};; esac; done\n"
	      "mkdir -p \"$r/etc\" && echo half > \"$r/etc/half\"\necho 'boom: disk on fire' >&2\nexit 1\n", f);
	fclose(f);
	chmod(tmpl, 0755);
	char real[PATH_MAX];

	cr_assert_not_null(realpath(tmpl, real));
	spec_init(&s, "half");
	s.template_name = real;
	cr_assert_eq(ops->create(H, &s, NULL, &id, &err), -EIO);
	unlink(real);
	cr_assert(strstr(err.msg, "template failed: boom: disk on fire"), "%s", err.msg);
	cr_assert_eq(count_entries(lxcpath), 0, "a failed template left files");

	/* Name taken. */
	spec_init(&s, "taken");
	make(&s);
	cr_assert_eq(ops->create(H, &s, NULL, &id, &err), -EEXIST);
	cr_assert_null(id);
}

/* A stand-in download template that records its arguments in the
 * container directory; it declares the long options in takes. */
static void fake_download(char *path, size_t size, const char *dir, const char *takes)
{
	FILE *f;

	snprintf(path, size, "%s/lxc-download", dir);
	mkdir(dir, 0755);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fprintf(f, "#!/bin/sh\n# getopt -l dist:,release:,arch:,%s,name:,path:,rootfs:\n"
		"for a; do case $a in --rootfs=*) r=${a#--rootfs=};; esac; done\n"
		"mkdir -p \"$r\" && printf '%%s\\n' \"$@\" > \"$r/../template-args\"\n", takes);
	fclose(f);
	chmod(path, 0755);
}

/* The download options reach the template as its flags, and one the
 * template does not take is refused with nothing made. */
Test(lxc, download_options_mapped_or_refused)
{
	struct rt_spec s;
	struct nerr err = { 0 };
	char dir[700], tmpl[800], args[800], buf[4096];
	char *targs[] = { "--keyserver", "hkp://example.invalid", NULL };
	char *id = NULL;

	snprintf(dir, sizeof(dir), "%s/tmpl-new", lxcpath);
	fake_download(tmpl, sizeof(tmpl), dir,
		      "variant:,server:,flush-cache,force-cache,no-validate");
	spec_init(&s, "dlopts");
	s.template_name = tmpl;
	s.distro = "debian";
	s.release = "bookworm";
	s.arch = "amd64";
	s.image_variant = "cloud";
	s.image_server = "images.example.invalid";
	s.flush_cache = s.force_cache = s.disable_gpg = true;
	s.template_args = targs;
	make(&s);
	snprintf(args, sizeof(args), "%s/dlopts/template-args", lxcpath);
	cr_assert_gt(rt_lxc_read_file(args, buf, sizeof(buf)), 0, "the template did not run");
	cr_assert(strstr(buf, "-d\ndebian\n-r\nbookworm\n-a\namd64\n--variant\ncloud\n"
			  "--server\nimages.example.invalid\n--flush-cache\n--force-cache\n"
			  "--no-validate\n--keyserver\nhkp://example.invalid\n"), "args:\n%s", buf);
	cr_assert_eq(ops->destroy(H, "dlopts", &err), 0, "%s", err.msg);

	/* A template without --no-validate (lxc 5's): disable_gpg is refused,
	 * the rest still goes through. */
	snprintf(dir, sizeof(dir), "%s/tmpl-lxc5", lxcpath);
	fake_download(tmpl, sizeof(tmpl), dir, "variant:,server:,flush-cache,force-cache");
	s.template_name = tmpl;
	cr_assert_eq(ops->create(H, &s, NULL, &id, &err), -EINVAL);
	cr_assert(strstr(err.msg, "disable_gpg"), "%s", err.msg);
	cr_assert_null(id);
	cr_assert_eq(count_entries(lxcpath), 2, "a refused create left files");
	s.disable_gpg = false;
	make(&s);
	cr_assert_gt(rt_lxc_read_file(args, buf, sizeof(buf)), 0);
	cr_assert_null(strstr(buf, "--no-validate"), "args:\n%s", buf);
	cr_assert_eq(ops->destroy(H, "dlopts", &err), 0, "%s", err.msg);
}
