/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of backend/config: defaults, every key, comments and quoting,
 * runtime sections, every error with its FILE:LINE, config_load on real
 * files, and failing-allocation runs proving -ENOMEM without leaks.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "failalloc.h"
#include "nerr.h"

#define FILE_NAME "/etc/nodefs/nodefs.conf"

static struct config *parse_ok(const char *text)
{
	struct config *c = NULL;
	struct nerr e = { 0 };

	cr_assert_eq(config_parse(text, strlen(text), FILE_NAME, &c, &e), 0, "%s", e.msg);
	cr_assert_not_null(c);
	return c;
}

static void parse_err(const char *text, const char *msg)
{
	struct config *c = (struct config *)1;
	struct nerr e = { 0 };
	int r = config_parse(text, strlen(text), FILE_NAME, &c, &e);

	cr_assert_eq(r, -EINVAL, "text '%s' gave %d (%s)", text, r, e.msg);
	cr_assert_eq(e.code, EINVAL);
	cr_assert_str_eq(e.msg, msg);
	cr_assert_eq(c, (struct config *)1, "*ret untouched on error");
}

static void check_defaults(const struct config *c)
{
	cr_assert_str_eq(c->state_dir, "/var/lib/nodefs");
	cr_assert_str_eq(c->allowed_targets[0], "/mnt");
	cr_assert_str_eq(c->allowed_targets[1], "/srv");
	cr_assert_null(c->allowed_targets[2]);
	cr_assert_eq(c->nallowed_targets, 2);
	cr_assert_null(c->ctl_group);
	cr_assert_not(c->has_ctl_gid);
	cr_assert_eq(c->csi_timeout_ms, 120000);
	cr_assert_eq(c->retry_backoff_ms, 1000);
	cr_assert_eq(c->retry_max_ms, 120000);
	cr_assert_eq(c->operations_keep, 1000);
	cr_assert_eq(c->events_keep, 4096);
	cr_assert_eq(c->reconcile_interval_ms, 60000);
	cr_assert_eq(c->nplugins, 0);
	cr_assert_eq(c->nprofiles, 0);
}

Test(config, defaults)
{
	struct config *c = NULL;

	cr_assert_eq(config_defaults(&c), 0);
	check_defaults(c);
	cr_assert_null(c->path);
	cr_assert_eq(c->nsections, 0);
	config_free(c);
	config_free(NULL);
}

Test(config, empty_and_comments_only)
{
	struct config *c = parse_ok("");

	check_defaults(c);
	cr_assert_str_eq(c->path, FILE_NAME);
	config_free(c);
	c = parse_ok("# comment\n; other\n   \n\t# indented\n");
	check_defaults(c);
	config_free(c);
}

static const char example[] =
	"[nodefs]\n"						/* 1 */
	"state_dir = /var/lib/nodefs2\n"
	"allowed_targets = /mnt /srv /data/x        # publish targets\n"
	"ctl_group = root                 ; a group\n"
	"csi_timeout = 90s\n"					/* 5 */
	"retry_backoff = 500ms\n"
	"retry_max = 2m\n"
	"operations_keep = 50\n"
	"reconcile_interval = 0\n"
	"\n"							/* 10 */
	"[plugin hostpath]\n"
	"endpoint = unix:///run/csi/hostpath.sock\n"
	"default = yes\n"
	"\n"
	"[plugin other]\n"					/* 15 */
	"endpoint = unix:///run/csi/other.sock\n"
	"\n"
	"[profile fast]\n"
	"plugin = hostpath\n"
	"access_mode = single-node-writer   # CSI\n"		/* 20 */
	"fs_type = ext4\n"
	"mount_flags = noatime nodiratime\n"
	"parameters = key1=value1 key2=value2 'k3=a b'\n"
	"size = 10G\n"
	"\n"							/* 25 */
	"[profile plain]\n"
	"\n"
	"[runtime docker]\n"
	"endpoint = unix:///var/run/docker.sock\n"
	"api_version = 1.41 ; kept as written\n"		/* 30 */
	"\n"
	"[runtime lxc]\n"
	"lxcpath = /var/lib/lxc\n";

Test(config, interface_example)
{
	struct config *c = parse_ok(example);
	const struct config_section *s;
	const struct config_profile *pr;

	cr_assert_str_eq(c->state_dir, "/var/lib/nodefs2");
	cr_assert_eq(c->nallowed_targets, 3);
	cr_assert_str_eq(c->allowed_targets[2], "/data/x");
	cr_assert_null(c->allowed_targets[3]);
	cr_assert_str_eq(c->ctl_group, "root");
	cr_assert(c->has_ctl_gid);
	cr_assert_eq(c->ctl_gid, 0);
	cr_assert_eq(c->csi_timeout_ms, 90000);
	cr_assert_eq(c->retry_backoff_ms, 500);
	cr_assert_eq(c->retry_max_ms, 120000);
	cr_assert_eq(c->operations_keep, 50);
	cr_assert_eq(c->reconcile_interval_ms, 0);

	cr_assert_eq(c->nplugins, 2);
	cr_assert_str_eq(c->plugins[0].name, "hostpath");
	cr_assert_str_eq(c->plugins[0].endpoint, "unix:///run/csi/hostpath.sock");
	cr_assert(c->plugins[0].is_default);
	cr_assert_not(c->plugins[1].is_default);
	cr_assert_eq(config_default_plugin(c), &c->plugins[0]);
	cr_assert_eq(config_plugin_find(c, "other"), &c->plugins[1]);
	cr_assert_null(config_plugin_find(c, "nope"));

	cr_assert_eq(c->nprofiles, 2);
	pr = config_profile_find(c, "fast");
	cr_assert_not_null(pr);
	cr_assert_str_eq(pr->plugin, "hostpath");
	cr_assert_str_eq(pr->access_mode, "single-node-writer");
	cr_assert_str_eq(pr->fs_type, "ext4");
	cr_assert_str_eq(pr->mount_flags[0], "noatime");
	cr_assert_str_eq(pr->mount_flags[1], "nodiratime");
	cr_assert_null(pr->mount_flags[2]);
	cr_assert_str_eq(pr->params[0], "key1=value1");
	cr_assert_str_eq(pr->params[1], "key2=value2");
	cr_assert_str_eq(pr->params[2], "k3=a b");
	cr_assert_null(pr->params[3]);
	cr_assert_eq(pr->size, 10ull << 30);
	pr = config_profile_find(c, "plain");
	cr_assert_null(pr->plugin);
	cr_assert_null(pr->access_mode);
	cr_assert_null(pr->fs_type);
	cr_assert_null(pr->mount_flags[0]);
	cr_assert_null(pr->params[0]);
	cr_assert_eq(pr->size, 0);

	cr_assert_eq(c->nsections, 7);
	cr_assert_str_eq(c->sections[0].type, "nodefs");
	cr_assert_null(c->sections[0].name);
	cr_assert_eq(c->sections[0].line, 1);
	cr_assert_eq(c->sections[0].nkv, 8);
	cr_assert_eq(c->sections[0].kv[2].line, 4);
	cr_assert_str_eq(c->sections[0].kv[2].val, "root");
	s = config_section_find(c, "runtime", "docker");
	cr_assert_not_null(s);
	cr_assert_eq(s->line, 28);
	cr_assert_str_eq(config_section_get(s, "endpoint"), "unix:///var/run/docker.sock");
	cr_assert_str_eq(config_section_get(s, "api_version"), "1.41");
	cr_assert_null(config_section_get(s, "nope"));
	cr_assert_null(config_section_get(NULL, "endpoint"));
	s = config_section_find(c, "runtime", "lxc");
	cr_assert_str_eq(config_section_get(s, "lxcpath"), "/var/lib/lxc");
	cr_assert_eq(config_section_find(c, "nodefs", NULL), &c->sections[0]);
	cr_assert_null(config_section_find(c, "runtime", NULL));
	cr_assert_null(config_section_find(c, "plugin", "nope"));
	config_free(c);
}

Test(config, crlf_quotes_and_comment_rules)
{
	struct config *c = parse_ok(
		"[nodefs]\r\n"
		"state_dir = \"/var/lib/with space\" # quoted\r\n"
		"allowed_targets = '/mnt/a#b' /srv/c;d /x\\ y\r\n"
		"[plugin p]\n"
		"endpoint=unix:///run/p.sock#not-a-comment\n"
		"\t[runtime docker]   \n"
		"  host = tcp://x;y   ; comment\n");

	cr_assert_str_eq(c->state_dir, "/var/lib/with space");
	cr_assert_str_eq(c->allowed_targets[0], "/mnt/a#b");
	cr_assert_str_eq(c->allowed_targets[1], "/srv/c;d");
	cr_assert_str_eq(c->allowed_targets[2], "/x y");
	cr_assert_str_eq(c->plugins[0].endpoint, "unix:///run/p.sock#not-a-comment");
	cr_assert(c->plugins[0].is_default, "a single plugin is the default");
	cr_assert_str_eq(config_section_get(config_section_find(c, "runtime", "docker"), "host"),
			 "tcp://x;y");
	config_free(c);
}

Test(config, no_trailing_newline_and_nul_free_len)
{
	struct config *c = NULL;
	const char text[] = "[plugin a]\nendpoint = unix:///a.sock\ngarbage past len";

	cr_assert_eq(config_parse(text, strlen(text) - strlen("\ngarbage past len"), NULL, &c,
				  NULL), 0);
	cr_assert_null(c->path);
	cr_assert_str_eq(c->plugins[0].endpoint, "unix:///a.sock");
	config_free(c);
}

Test(config, defaults_of_plugins)
{
	struct config *c = parse_ok("[plugin a]\nendpoint = unix:///a.sock\n"
				    "[plugin b]\nendpoint = unix:///b.sock\n");

	cr_assert_not(c->plugins[0].is_default);
	cr_assert_not(c->plugins[1].is_default);
	cr_assert_null(config_default_plugin(c));
	config_free(c);
	c = parse_ok("[plugin a]\nendpoint = unix:///a.sock\ndefault = no\n");
	cr_assert(c->plugins[0].is_default, "the only plugin is the default");
	config_free(c);
	c = parse_ok("[plugin a]\nendpoint = unix:///a.sock\n"
		     "[plugin b]\nendpoint = unix:///b.sock\ndefault = on\n");
	cr_assert_eq(config_default_plugin(c), &c->plugins[1]);
	config_free(c);
}

Test(config, profile_plugin_defined_later)
{
	struct config *c = parse_ok("[profile x]\nplugin = late\n"
				    "[plugin late]\nendpoint = unix:///l.sock\n");

	cr_assert_str_eq(c->profiles[0].plugin, "late");
	config_free(c);
}

Test(config, all_access_modes)
{
	for (size_t i = 0; config_access_modes[i]; i++) {
		char buf[256];
		struct config *c;

		snprintf(buf, sizeof(buf), "[profile p]\naccess_mode = %s\n", config_access_modes[i]);
		c = parse_ok(buf);
		cr_assert_str_eq(c->profiles[0].access_mode, config_access_modes[i]);
		config_free(c);
	}
}

Test(config, errors_syntax)
{
	parse_err("state_dir = /x\n",
		  FILE_NAME ":1: key 'state_dir' outside a section (add [nodefs] above it)");
	parse_err("[nodefs]\n\nthis is junk\n",
		  FILE_NAME ":3: expected 'key = value', '[section]' or a comment");
	parse_err("[nodefs]\n = x\n", FILE_NAME ":2: missing key before '='");
	parse_err("[nodefs]\nst ate = x\n",
		  FILE_NAME ":2: invalid key 'st ate' (allowed: A-Z a-z 0-9 _ . -)");
	parse_err("[nodefs\n", FILE_NAME ":1: expected ']' at the end of the section header");
	parse_err("[ ]\n", FILE_NAME ":1: empty section header");
	parse_err("[plugin a b]\n",
		  FILE_NAME ":1: section header has too many words (expected [TYPE NAME])");
	parse_err("[volume x]\n", FILE_NAME ":1: unknown section type 'volume' "
		  "(expected nodefs, plugin, profile, runtime or cluster)");
	parse_err("[nodefs x]\n", FILE_NAME ":1: [nodefs] takes no name");
	parse_err("[plugin]\n", FILE_NAME ":1: [plugin] needs a name: [plugin NAME]");
	parse_err("[plugin .x]\n", FILE_NAME ":1: [plugin]: name '.x' must not start with '.'");
	parse_err("[profile a/b]\n", FILE_NAME ":1: [profile]: name 'a/b' contains invalid "
		  "character '/' at position 2 (allowed: A-Z a-z 0-9 . _ -)");
	parse_err("[runtime podman]\n",
		  FILE_NAME ":1: unknown runtime 'podman' (expected docker or lxc)");
	parse_err("[nodefs]\n[plugin a]\nendpoint = unix:///a\n[nodefs]\n",
		  FILE_NAME ":4: duplicate section [nodefs] (first at line 1)");
	parse_err("[plugin a]\nendpoint = unix:///a\n\n[plugin a]\n",
		  FILE_NAME ":4: duplicate section [plugin a] (first at line 1)");
	parse_err("[runtime lxc]\nlxcpath = /a\nlxcpath = /b\n",
		  FILE_NAME ":3: duplicate key 'lxcpath' (first at line 2)");
	parse_err("[nodefs]\nbad\x01 = x\n", FILE_NAME ":2: control character 0x01 at column 4");
	parse_err("[nodefs]\n# \xff\n", FILE_NAME ":2: invalid UTF-8 at column 3");
	parse_err("[nodefs]\nstate_dir = /a 'b\n",
		  FILE_NAME ":2: state_dir: unterminated quote at column 4");
}

Test(config, error_nul_byte)
{
	static const char text[] = "[nodefs]\nstate_dir = /a\0b\n";
	struct config *c = NULL;
	struct nerr e = { 0 };

	cr_assert_eq(config_parse(text, sizeof(text) - 1, "f", &c, &e), -EINVAL);
	cr_assert_str_eq(e.msg, "f:2: NUL byte at column 15");
	cr_assert_eq(config_parse(text, sizeof(text) - 1, NULL, &c, &e), -EINVAL);
	cr_assert_str_eq(e.msg, "config:2: NUL byte at column 15");
}

Test(config, error_long_line)
{
	size_t n = CONFIG_LINE_MAX + 100;
	char *text = malloc(n + 1);
	struct config *c = NULL;
	struct nerr e = { 0 };
	int pre = snprintf(text, n, "[nodefs]\n# ");

	memset(text + pre, 'x', n - (size_t)pre);
	text[n] = '\0';
	/* exactly CONFIG_LINE_MAX bytes on line 2 is fine, one more is not */
	cr_assert_eq(config_parse(text, 9 + CONFIG_LINE_MAX, "f", &c, &e), 0, "%s", e.msg);
	config_free(c);
	cr_assert_eq(config_parse(text, 9 + CONFIG_LINE_MAX + 1, "f", &c, &e), -EINVAL);
	cr_assert_str_eq(e.msg, "f:2: line too long (4097 bytes, at most 4096)");
	free(text);
}

Test(config, errors_nodefs_values)
{
	parse_err("[nodefs]\nretry_maxx = 1s\n", FILE_NAME ":2: unknown key 'retry_maxx' in [nodefs]");
	parse_err("[nodefs]\ncsi_timeout = soon\n", FILE_NAME ":2: csi_timeout: invalid duration "
		  "'soon' (expected a whole number with ms, s, m, h or d; a bare number is seconds)");
	parse_err("[nodefs]\ncsi_timeout = 0\n", FILE_NAME ":2: csi_timeout: must be more than 0");
	parse_err("[nodefs]\nretry_backoff = 0s\n",
		  FILE_NAME ":2: retry_backoff: must be more than 0");
	parse_err("[nodefs]\nretry_max = 1 2\n", FILE_NAME ":2: retry_max: expects one value, got 2");
	parse_err("[nodefs]\nretry_max =\n", FILE_NAME ":2: retry_max: expects one value, got 0");
	parse_err("[nodefs]\nreconcile_interval = -1\n", FILE_NAME ":2: reconcile_interval: "
		  "invalid duration '-1' (expected a whole number with ms, s, m, h or d; a bare "
		  "number is seconds)");
	parse_err("[nodefs]\nretry_max = 1s\nretry_backoff = 2s\n",
		  FILE_NAME ":3: retry_backoff (2000 ms) is longer than retry_max (1000 ms)");
	parse_err("[nodefs]\noperations_keep = many\n", FILE_NAME ":2: operations_keep: invalid "
		  "number 'many' (expected a decimal integer)");
	parse_err("[nodefs]\noperations_keep = 10000001\n", FILE_NAME ":2: operations_keep: number "
		  "'10000001' out of range (0 to 10000000)");
	parse_err("[nodefs]\nevents_keep = 8\n", FILE_NAME ":2: events_keep: number "
		  "'8' out of range (16 to 65536)");
	parse_err("[nodefs]\nstate_dir = var/lib\n",
		  FILE_NAME ":2: state_dir: path 'var/lib' is not absolute");
	parse_err("[nodefs]\nstate_dir = /var/../lib\n",
		  FILE_NAME ":2: state_dir: path '/var/../lib' contains a '..' component");
	parse_err("[nodefs]\nallowed_targets =\n",
		  FILE_NAME ":2: allowed_targets: expects at least one value, got 0");
	parse_err("[nodefs]\nallowed_targets = /mnt /srv/\n",
		  FILE_NAME ":2: allowed_targets: path '/srv/' must not end with '/'");
	parse_err("[nodefs]\nctl_group = no-such-group-nodefs\n",
		  FILE_NAME ":2: ctl_group: no such group 'no-such-group-nodefs'");
}

Test(config, errors_plugins)
{
	parse_err("[plugin a]\ndefault = yes\n", FILE_NAME ":1: [plugin a] has no endpoint");
	parse_err("[plugin a]\nendpoint = /run/a.sock\n", FILE_NAME ":2: endpoint '/run/a.sock' "
		  "must be unix:///absolute/path");
	parse_err("[plugin a]\nendpoint = tcp://1.2.3.4:5\n", FILE_NAME ":2: endpoint "
		  "'tcp://1.2.3.4:5' must be unix:///absolute/path");
	parse_err("[plugin a]\nendpoint = unix://run/a.sock\n", FILE_NAME ":2: endpoint "
		  "'unix://run/a.sock' must be unix:///absolute/path: path 'run/a.sock' is not "
		  "absolute");
	parse_err("[plugin a]\nendpoint = unix:///run//a.sock\n", FILE_NAME ":2: endpoint "
		  "'unix:///run//a.sock' must be unix:///absolute/path: path '/run//a.sock' "
		  "contains '//'");
	parse_err("[plugin a]\nendpoint = unix:///a\ndefault = maybe\n", FILE_NAME ":3: default: "
		  "invalid boolean 'maybe' (expected yes/no, true/false, on/off or 1/0)");
	parse_err("[plugin a]\nendpoint = unix:///a\ntimeout = 1s\n",
		  FILE_NAME ":3: unknown key 'timeout' in [plugin a]");
	parse_err("[plugin a]\nendpoint = unix:///a\ndefault = yes\n"
		  "[plugin b]\nendpoint = unix:///b\ndefault = yes\n",
		  FILE_NAME ":6: more than one default plugin ('a' at line 3, and 'b')");
}

Test(config, errors_profiles)
{
	parse_err("[profile p]\nplugin = ghost\n",
		  FILE_NAME ":2: profile 'p' names undefined plugin 'ghost'");
	parse_err("[plugin a]\nendpoint = unix:///a\n[profile p]\n\nplugin = ghost\n",
		  FILE_NAME ":5: profile 'p' names undefined plugin 'ghost'");
	parse_err("[profile p]\nplugin = a/b\n", FILE_NAME ":2: plugin: name 'a/b' contains "
		  "invalid character '/' at position 2 (allowed: A-Z a-z 0-9 . _ -)");
	parse_err("[profile p]\naccess_mode = rw\n", FILE_NAME ":2: access_mode: unknown mode "
		  "'rw'; one of: single-node-writer, single-node-reader-only, multi-node-"
		  "reader-only, multi-node-single-writer, multi-node-multi-writer, single-node-"
		  "single-writer, single-node-multi-writer");
	parse_err("[profile p]\naccess_mode = SINGLE_NODE_WRITER\n",
		  FILE_NAME ":2: access_mode: unknown mode 'SINGLE_NODE_WRITER'; one of: "
		  "single-node-writer, single-node-reader-only, multi-node-reader-only, multi-node-"
		  "single-writer, multi-node-multi-writer, single-node-single-writer, single-node-"
		  "multi-writer");
	parse_err("[profile p]\nfs_type = ext 4\n", FILE_NAME ":2: fs_type: expects one value, got 2");
	parse_err("[profile p]\nparameters = a=1 b\n",
		  FILE_NAME ":2: parameters: 'b' is not KEY=VALUE");
	parse_err("[profile p]\nparameters = =1\n", FILE_NAME ":2: parameters: '=1' is not KEY=VALUE");
	parse_err("[profile p]\nmount_flags = noatime ''\n", FILE_NAME ":2: mount_flags: empty flag");
	parse_err("[profile p]\nsize = big\n", FILE_NAME ":2: size: invalid size 'big' (expected "
		  "bytes, or a whole number with K, M, G or T)");
	parse_err("[profile p]\nsize = 99999999999999999999\n",
		  FILE_NAME ":2: size: size '99999999999999999999' is too large");
	parse_err("[profile p]\nsizes = 1G\n", FILE_NAME ":2: unknown key 'sizes' in [profile p]");
}

/* A temporary directory removed by the test even when an assertion fails
 * (criterion runs fini after a failed test in the same process). */
static char tmpdir[64];

static void mk_tmp(void)
{
	strcpy(tmpdir, "/tmp/nodefs-test-config.XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void rm_tmp(void)
{
	char p[128];

	if (!tmpdir[0])
		return;
	snprintf(p, sizeof(p), "%s/nodefs.conf", tmpdir);
	unlink(p);
	rmdir(tmpdir);
	tmpdir[0] = '\0';
}

static void write_file(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f);
	cr_assert_eq(fwrite(text, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
}

Test(config_load, files, .init = mk_tmp, .fini = rm_tmp)
{
	char path[128], msg[256];
	struct config *c = NULL;
	struct nerr e = { 0 };

	snprintf(path, sizeof(path), "%s/nodefs.conf", tmpdir);
	/* missing */
	cr_assert_eq(config_load(path, true, &c, &e), 0);
	check_defaults(c);
	cr_assert_null(c->path);
	config_free(c);
	c = NULL;
	cr_assert_eq(config_load(path, false, &c, &e), -ENOENT);
	snprintf(msg, sizeof(msg), "%s: cannot open: No such file or directory", path);
	cr_assert_str_eq(e.msg, msg);
	cr_assert_null(c);
	/* present */
	write_file(path, example, strlen(example));
	cr_assert_eq(config_load(path, false, &c, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c->path, path);
	cr_assert_eq(c->nplugins, 2);
	config_free(c);
	/* an error names the file */
	write_file(path, "[nodefs]\n\nretry_maxx = 1s\n", 26);
	cr_assert_eq(config_load(path, true, &c, &e), -EINVAL);
	snprintf(msg, sizeof(msg), "%s:3: unknown key 'retry_maxx' in [nodefs]", path);
	cr_assert_str_eq(e.msg, msg);
	/* a directory */
	cr_assert_eq(config_load(tmpdir, false, &c, &e), -EINVAL);
	/* too large */
	{
		size_t n = CONFIG_FILE_MAX + 1;
		char *big = malloc(n);

		memset(big, '\n', n);
		write_file(path, big, n);
		free(big);
		cr_assert_eq(config_load(path, false, &c, &e), -EFBIG);
		snprintf(msg, sizeof(msg), "%s: too large (more than 1048576 bytes)", path);
		cr_assert_str_eq(e.msg, msg);
	}
}

/* Fail each allocation of config_parse in turn. */
static void failalloc_run(const char *text)
{
	unsigned long n;

	for (n = 1; n < 100000; n++) {
		struct config *c = NULL;
		struct nerr e = { 0 };
		bool fired;
		long live;
		int r;

		failalloc_arm(n);
		r = config_parse(text, strlen(text), FILE_NAME, &c, &e);
		fired = failalloc_fired();
		failalloc_hold();
		if (r == 0)
			config_free(c);
		live = failalloc_live();
		failalloc_disarm();
		if (!fired) {
			cr_assert_eq(r, 0, "%s", e.msg);
			cr_assert_eq(live, 0, "leak after success: %ld", live);
			break;
		}
		cr_assert_eq(r, -ENOMEM, "allocation %lu failed but got %d (%s)", n, r, e.msg);
		cr_assert_eq(e.code, ENOMEM);
		cr_assert_str_eq(e.msg, FILE_NAME ": out of memory");
		cr_assert_null(c);
		cr_assert_eq(live, 0, "allocation %lu failed: %ld blocks leaked", n, live);
	}
	cr_assert_gt(n, 50, "the example should need many allocations");
}

Test(config_failalloc, parse)
{
	failalloc_run(example);
}

Test(config_failalloc, defaults)
{
	unsigned long n;

	for (n = 1; n < 100; n++) {
		struct config *c = NULL;
		bool fired;
		long live;
		int r;

		failalloc_arm(n);
		r = config_defaults(&c);
		fired = failalloc_fired();
		failalloc_hold();
		if (r == 0)
			config_free(c);
		live = failalloc_live();
		failalloc_disarm();
		cr_assert_eq(live, 0);
		if (!fired)
			break;
		cr_assert_eq(r, -ENOMEM);
	}
	cr_assert_gt(n, 3);
}

Test(config, plugin_command_and_keep_running)
{
	struct config *c = parse_ok("[plugin a]\nendpoint = unix:///a.sock\n"
				    "command = /usr/bin/prog --base '/var/lib/a b' x\\ y\n"
				    "keep_running = yes\n"
				    "[plugin b]\nendpoint = unix:///b.sock\n");

	cr_assert_str_eq(c->plugins[0].command[0], "/usr/bin/prog");
	cr_assert_str_eq(c->plugins[0].command[1], "--base");
	cr_assert_str_eq(c->plugins[0].command[2], "/var/lib/a b");
	cr_assert_str_eq(c->plugins[0].command[3], "x y");
	cr_assert_null(c->plugins[0].command[4]);
	cr_assert(c->plugins[0].keep_running);
	cr_assert_null(c->plugins[1].command, "no command: an external plugin");
	cr_assert_not(c->plugins[1].keep_running);
	config_free(c);
}

Test(config, plugin_command_errors)
{
	parse_err("[plugin a]\nendpoint = unix:///a.sock\ncommand =\n",
		  FILE_NAME ":3: command: expects at least one value, got 0");
	parse_err("[plugin a]\nendpoint = unix:///a.sock\ncommand = 'open\n",
		  FILE_NAME ":3: command: unterminated quote at column 1");
	parse_err("[plugin a]\nendpoint = unix:///a.sock\nkeep_running = maybe\n",
		  FILE_NAME ":3: keep_running: invalid boolean 'maybe' "
		  "(expected yes/no, true/false, on/off or 1/0)");
	parse_err("[plugin a]\nendpoint = unix:///a.sock\nkeep_running = yes\n",
		  FILE_NAME ":1: [plugin a] has keep_running but no command");
}

Test(config, plugin_container)
{
	struct config *c = parse_ok("[plugin a]\nendpoint = unix:///run/csi/a.sock\n"
				    "runtime = docker\nimage = nodefs/csi-local:1\n"
				    "command = /nodefs-csi-local --base-dir /var/lib/a\n"
				    "mounts = /var/lib/a /dev\nkeep_running = yes\n"
				    "[plugin b]\nendpoint = unix:///b.sock\nruntime = docker\nimage = i\n"
				    "node = no\nprivileged = yes\n"
				    "[plugin c]\nendpoint = unix:///c.sock\n");

	cr_assert_str_eq(c->plugins[0].runtime, "docker");
	cr_assert_str_eq(c->plugins[0].image, "nodefs/csi-local:1");
	cr_assert_str_eq(c->plugins[0].mounts[1], "/dev");
	cr_assert_null(c->plugins[0].mounts[2]);
	cr_assert(c->plugins[0].node, "a node plugin by default");
	cr_assert_not(c->plugins[0].privileged);
	cr_assert(c->plugins[0].keep_running);
	cr_assert_null(c->plugins[1].command, "the image's own command");
	cr_assert_not(c->plugins[1].node);
	cr_assert(c->plugins[1].privileged);
	cr_assert_null(c->plugins[2].runtime);
	cr_assert_null(c->plugins[2].mounts[0]);
	config_free(c);
	parse_err("[plugin a]\nendpoint = unix:///a.sock\nruntime = podman\nimage = i\n",
		  FILE_NAME ":3: runtime '?': plugins run as containers of docker or lxc");
	parse_err("[plugin a]\nendpoint = unix:///a.sock\nruntime = docker\n",
		  FILE_NAME ":1: [plugin a]: runtime needs image");
	parse_err("[plugin a]\nendpoint = unix:///a.sock\nimage = i\n",
		  FILE_NAME ":1: [plugin a]: image needs runtime");
	parse_err("[plugin a]\nendpoint = unix:///a.sock\nmounts = /x\n",
		  FILE_NAME ":1: [plugin a]: mounts and privileged need runtime");
	parse_err("[plugin a]\nendpoint = unix:///a.sock\nruntime = docker\nimage = i\nmounts = x\n",
		  FILE_NAME ":5: mounts: path 'x' is not absolute");
}

Test(config, name_prefix_and_uncertain_timeout)
{
	struct config *c = parse_ok("[nodefs]\nname_prefix = box-1.\nuncertain_timeout = 30s\n");

	cr_assert_str_eq(c->name_prefix, "box-1.");
	cr_assert_eq(c->uncertain_timeout_ms, 30000);
	config_free(c);
	c = parse_ok("[nodefs]\n");
	cr_assert_null(c->name_prefix);
	cr_assert_eq(c->uncertain_timeout_ms, 300000);
	config_free(c);
	parse_err("[nodefs]\nname_prefix = -x\n", FILE_NAME ":2: name_prefix: want 1 to 32 of "
		  "[A-Za-z0-9._-], starting with a letter or digit");
	parse_err("[nodefs]\nname_prefix = a/b\n", FILE_NAME ":2: name_prefix: want 1 to 32 of "
		  "[A-Za-z0-9._-], starting with a letter or digit");
	parse_err("[nodefs]\nname_prefix = 012345678901234567890123456789012\n",
		  FILE_NAME ":2: name_prefix: want 1 to 32 of [A-Za-z0-9._-], starting with a "
		  "letter or digit");
	parse_err("[nodefs]\nuncertain_timeout = 0\n",
		  FILE_NAME ":2: uncertain_timeout: must be more than 0");
}

Test(config, reader_memory)
{
	const char *bad = "[nodefs]\nreader_memory = lots\n";
	struct config *c = parse_ok("[nodefs]\nreader_memory = 512K\n");
	struct nerr e = { 0 };

	cr_assert_eq(c->reader_memory, 512u << 10);
	config_free(c);
	c = parse_ok("[nodefs]\nreader_memory = 0\n");
	cr_assert_eq(c->reader_memory, 0);
	config_free(c);
	c = parse_ok("[nodefs]\n");
	cr_assert_eq(c->reader_memory, 4u << 20);
	config_free(c);
	c = NULL;
	cr_assert_eq(config_parse(bad, strlen(bad), FILE_NAME, &c, &e), -EINVAL);
	cr_assert_null(c);
	cr_assert(strstr(e.msg, FILE_NAME ":2: reader_memory: "), "%s", e.msg);
}

/* secrets = FILE: checked at parse (root's, no one else's), kept as a path. */
Test(config_load, secrets, .init = mk_tmp, .fini = rm_tmp)
{
	char sec[128], text[512], msg[400];
	struct config *c = NULL;
	struct nerr e = { 0 };

	snprintf(sec, sizeof(sec), "%s/s", tmpdir);
	write_file(sec, "# x\nuser=a\npassword=p=q\n", 24);
	chmod(sec, 0600);
	snprintf(text, sizeof(text), "[plugin p]\nendpoint = unix:///p.sock\nsecrets = %s\n"
		 "[profile x]\nplugin = p\nsecrets = %s\n", sec, sec);
	if (geteuid() == 0) {
		c = parse_ok(text);
		cr_assert_str_eq(c->plugins[0].secrets, sec);
		cr_assert_str_eq(c->profiles[0].secrets, sec);
		config_free(c);
		c = NULL;
	}
	chmod(sec, 0644);
	cr_assert_eq(config_parse(text, strlen(text), FILE_NAME, &c, &e), -EINVAL);
	snprintf(msg, sizeof(msg), "%s:3: secrets file %s must be owned by root and neither "
		 "readable nor writable by others (it is uid %u, mode 0644)", FILE_NAME, sec,
		 (unsigned)geteuid());
	cr_assert_str_eq(e.msg, msg);
	cr_assert_null(strstr(e.msg, "password"));
	unlink(sec);
	cr_assert_eq(config_parse(text, strlen(text), FILE_NAME, &c, &e), -EINVAL);
	cr_assert_not_null(strstr(e.msg, "No such file"), "%s", e.msg);
	parse_err("[profile x]\nsecrets = rel/path\n",
		  FILE_NAME ":2: secrets file 'rel/path' must be an absolute path");
}
