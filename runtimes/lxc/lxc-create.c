/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lxc-create: the LXC driver's create (rt_lxc_create): the checks made
 * before anything is made, the template run and the container config.
 *
 * What a create writes into the container config: lxc.net.0.type from
 * network_type (default none), lxc.apparmor.profile (default unconfined),
 * lxc.console.logfile (the logs: at a start, a file past console_size, 1M by
 * default, moves to console.log.1; liblxc 5.0.2's own lxc.console.size
 * rotation duplicates and drops output, measured), lxc.log.file/level (the reason a start
 * failed), cgroup limits under the host's names (v1 lxc.cgroup.*, v2
 * lxc.cgroup2.*), lxc.mount.entry bind mounts (each source with its
 * symlinks resolved and listed in nodefs-binds, which every start checks
 * again: a link put on the way since is refused, not mounted; an rshared
 * one also in nodefs-shared, which start stacks again shared with the
 * host's, lxc-run.c), rt_spec.role in the owner mark (list leaves such a
 * container out), lxc.apparmor.profile unconfined for may_mount,
 * lxc.environment, and
 * lxc.init.cmd with lxc.signal.halt = SIGTERM when argv is given (an
 * application, not a system init). liblxc 5.0 splits lxc.init.cmd on white
 * space and ignores quotes, and a daemonized start gives init /dev/null for
 * stdio, so argv goes through a script: nodefs-cmd.sh beside the config,
 * bind-mounted read-only at /.nodefs-cmd.sh, run as "/bin/sh
 * /.nodefs-cmd.sh"; it waits at a FIFO (nodefs-gate, bind-mounted at
 * /.nodefs-gate) until start() holds init's pidfd, points stdio at
 * /dev/console (the console log) and execs the quoted argv, so init is the
 * command itself and its exit status is the command's, even when it exits
 * at once. The rootfs needs /bin/sh for a command. A busybox-template container without a network
 * gets an rcS without udhcpc, which otherwise never returns and makes a
 * clean halt wait out its whole timeout.
 *
 * A create is crash-safe: before liblxc makes anything, an in-progress mark
 * LXCPATH/.nodefs-creating-NAME is written (and synced); it goes only once
 * the owner mark is in place (the mark and the removal of what a create
 * cut short: lxc-halfmade.c).
 *
 * Must not know: the other calls of the driver (lxc-run.c, lxc.c), nor
 * anything of backend/ or fs/.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <lxc/attach_options.h>
#include <lxc/lxccontainer.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lxc-internal.h"
#include "macro.h"
#include "nerr.h"
#include "nodefs-config.h"
#include "sbuf.h"

#define DEFAULT_TEMPLATE "busybox"

static bool set_item(struct lxc_container *c, const char *key, const char *val)
{
	return c->set_config_item(c, key, val);
}

/* Escape a path for an fstab-format mount entry (space, tab, \n, \\). */
static int fstab_escape(const char *s, char *buf, size_t size)
{
	size_t o = 0;

	for (; *s; s++) {
		if (o + 5 >= size)
			return -ENAMETOOLONG;
		if (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\\') {
			o += (size_t)snprintf(buf + o, size - o, "\\%03o", (unsigned char)*s);
		} else {
			buf[o++] = *s;
		}
	}
	buf[o] = '\0';
	return 0;
}

/* lxc.init.cmd for argv into buf, by way of the script (see the top of
 * the file). Returns 1, or -errno. */
static int init_cmd(struct rt_lxc *h, const struct rt_spec *s, char *buf, size_t size,
		    struct nerr *err)
{
	struct sbuf sh = SBUF_INIT(64u << 10);
	char path[PATH_MAX];
	FILE *f;
	int r = 0;

	/* A daemonized liblxc 5.0 start gives init /dev/null for stdio;
	 * the console (and so the console log) is /dev/console, a tty: no
	 * \r before each \n in the logs, where stty exists. */
	r = sbuf_adds(&sh, "#!/bin/sh\n# written by nodefs: the container's command\n"
		     "if [ -p /.nodefs-gate ]; then read _ </.nodefs-gate; fi\n"
		     "if [ -w /dev/console ]; then\n"
		     "\tstty -onlcr </dev/console 2>/dev/null\n"
		     "\texec </dev/null >/dev/console 2>&1\n"
		     "fi\nexec");
	/* the entrypoint's words, then the command's (docker's order) */
	char *const *parts[2] = { s->entrypoint, s->argv };

	for (int k = 0; k < 2; k++)
		for (char *const *a = parts[k]; a && *a && r >= 0; a++) {
			r = sbuf_adds(&sh, " '");
			for (const char *p = *a; *p && r >= 0; p++)
				r = *p == '\'' ? sbuf_adds(&sh, "'\\''") : sbuf_addc(&sh, *p);
			if (r >= 0)
				r = sbuf_addc(&sh, '\'');
		}
	if (r >= 0)
		r = sbuf_addc(&sh, '\n');
	if (r < 0) {
		sbuf_free(&sh);
		return nerr_set(err, -r, "lxc %s: command too long", s->name);
	}
	rt_lxc_dir(h, s->name, RT_LXC_CMD_FILE, path, sizeof(path));
	f = fopen(path, "we");
	if (f && fputs(sh.buf, f) < 0) {
		fclose(f);
		f = NULL;
	}
	if (!f || fclose(f) != 0) {
		r = errno ? -errno : -EIO;
		sbuf_free(&sh);
		return nerr_set(err, -r, "lxc %s: cannot write %s: %s", s->name, path, strerror(-r));
	}
	sbuf_free(&sh);
	chmod(path, 0644);
	snprintf(buf, size, "/bin/sh /.nodefs-cmd.sh");
	return 1;
}

/* ---- create ------------------------------------------------------------- */

static bool is_download(const char *tmpl)
{
	const char *b = strrchr(tmpl, '/');

	b = b ? b + 1 : tmpl;
	return strcmp(b, "download") == 0 || strcmp(b, "lxc-download") == 0;
}

static bool is_busybox(const char *tmpl)
{
	const char *b = strrchr(tmpl, '/');

	b = b ? b + 1 : tmpl;
	return strcmp(b, "busybox") == 0 || strcmp(b, "lxc-busybox") == 0;
}

/* Does the template's text name the long option opt (without its
 * dashes)? A download template declares the options it takes in its getopt
 * line, so an option it lacks is refused before it runs, rather than met
 * by its usage text. 1 yes, 0 no, -errno unreadable. */
static int template_takes(const char *tpath, const char *opt)
{
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	int fd, n;

	fd = open(tpath, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || st.st_size <= 0 || st.st_size > (4 << 20)) {
		close(fd);
		return -EIO;
	}
	close(fd);
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return -ENOMEM;
	n = rt_lxc_read_file(tpath, buf, (size_t)st.st_size + 1);
	if (n < 0)
		return n;
	return memmem(buf, (size_t)n, opt, strlen(opt)) != NULL;
}

/* The download template's options nodefs passes, by their nodefs names. */
static const struct {
	const char *key, *flag;
} download_opts[] = {
	{ "image_variant", "variant" },
	{ "image_server", "server" },
	{ "flush_cache", "flush-cache" },
	{ "force_cache", "force-cache" },
	{ "disable_gpg", "no-validate" },
};

/* Arguments for the template: Nomad's mapping for download, then extras.
 * An option the template does not take is refused here, before anything
 * is made: lxc 5's download template fetches over HTTPS and checks no GPG
 * signature, so it has no --no-validate for disable_gpg to map to. */
static int template_argv(const struct rt_spec *s, const char *tpath, bool download,
			 char ***ret, struct nerr *err)
{
	const bool set[] = { s->image_variant, s->image_server, s->flush_cache, s->force_cache,
			     s->disable_gpg };
	size_t n = 0, extra = 0;
	char **a;

	if (!download && (s->distro || s->release || s->arch || s->image_variant ||
			  s->image_server || s->flush_cache || s->force_cache || s->disable_gpg))
		return nerr_set(err, EINVAL,
				"lxc: distro/release/arch/image_variant/image_server/flush_cache/force_cache/disable_gpg need template=download");
	for (size_t i = 0; download && i < ARRAY_SIZE(download_opts); i++) {
		int r;

		if (!set[i])
			continue;
		r = template_takes(tpath, download_opts[i].flag);
		if (r < 0)
			return nerr_set(err, -r, "lxc: cannot read the template %.150s: %s", tpath,
					strerror(-r));
		if (r == 0 && i == ARRAY_SIZE(download_opts) - 1)
			return nerr_set(err, EINVAL,
					"lxc: disable_gpg: the download template %.120s checks no GPG "
					"signature (it has no --no-validate): nothing to disable; leave "
					"disable_gpg out", tpath);
		if (r == 0)
			return nerr_set(err, EINVAL, "lxc: %s: the download template %.120s takes no --%s",
					download_opts[i].key, tpath, download_opts[i].flag);
	}
	for (char **p = s->template_args; p && *p; p++)
		extra++;
	a = calloc(16 + extra, sizeof(char *));
	if (!a)
		return nerr_set(err, ENOMEM, "lxc: out of memory");
#define ARG2(flag, v) do { if (v) { a[n++] = (char *)(flag); a[n++] = (char *)(v); } } while (0)
	ARG2("-d", s->distro);
	ARG2("-r", s->release);
	ARG2("-a", s->arch);
	ARG2("--variant", s->image_variant);
	ARG2("--server", s->image_server);
#undef ARG2
	if (s->flush_cache)
		a[n++] = (char *)"--flush-cache";
	if (s->force_cache)
		a[n++] = (char *)"--force-cache";
	if (s->disable_gpg)
		a[n++] = (char *)"--no-validate";
	for (char **p = s->template_args; p && *p; p++) {
		if (strchr(*p, '\n')) {
			free(a);
			return nerr_set(err, EINVAL, "lxc: template argument holds a newline");
		}
		a[n++] = *p;
	}
	a[n] = NULL;
	*ret = a;
	return 0;
}

/* An absolute path inside the container with no "." or ".." component. */
static bool target_ok(const char *t)
{
	if (t[0] != '/' || !t[1] || strpbrk(t, "\n\r"))
		return false;
	for (const char *p = t; p; p = strchr(p + 1, '/')) {
		const char *q = p + 1;
		size_t l = strcspn(q, "/");

		if ((l == 1 && q[0] == '.') || (l == 2 && q[0] == '.' && q[1] == '.'))
			return false;
	}
	return true;
}

/* Everything checked before anything is made: a rejected create changes
 * nothing. Fills the template path. */
static int create_validate(struct rt_lxc *h, const struct rt_spec *s, char *tpath, size_t tsize,
			   struct nerr *err)
{
	const char *t = s->template_name && s->template_name[0] ? s->template_name : DEFAULT_TEMPLATE;
	struct stat st;

	if (s->nports)
		return nerr_set(err, ENOTSUP, "lxc: a container publishes no ports (port=)");
	if (s->network && strcmp(s->network, "none") != 0 && strcmp(s->network, "host") != 0 &&
	    strncmp(s->network, "veth:", 5) != 0)
		return nerr_set(err, EINVAL, "lxc: network '%.40s' is not none, host or veth:BRIDGE",
				s->network);
	if (!rt_lxc_name_valid(s->name))
		return nerr_set(err, EINVAL, "lxc: bad engine name '%.128s': 1 to %d of "
				"[A-Za-z0-9._-], no leading dot", s->name ? s->name : "", RT_LXC_NAME_MAX);
	if (t[0] == '/') {
		if (!rt_lxc_path_ok(t))
			return nerr_set(err, EINVAL, "lxc: bad template path '%.100s'", t);
		snprintf(tpath, tsize, "%s", t);
	} else {
		for (const char *p = t; *p; p++)
			if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
				return nerr_set(err, EINVAL, "lxc: bad template name '%.64s'", t);
		if ((size_t)snprintf(tpath, tsize, "%s/lxc-%.64s", h->template_dir, t) >= tsize)
			return nerr_set(err, ENAMETOOLONG, "lxc: template path too long");
	}
	if (stat(tpath, &st) < 0 || !S_ISREG(st.st_mode) || access(tpath, X_OK) < 0)
		return nerr_set(err, ENOENT, "lxc: unknown template '%.64s' (no executable %.150s)", t, tpath);
	for (size_t i = 0; i < s->nmounts; i++) {
		const struct rt_mount *m = &s->mounts[i];

		if (!m->source || m->source[0] != '/' || !m->target || m->target[0] != '/')
			return nerr_set(err, EINVAL, "lxc: mount paths must be absolute");
		if (!target_ok(m->target) || strchr(m->source, '\n'))
			return nerr_set(err, EINVAL, "lxc: bad mount target '%.100s'", m->target);
		if (stat(m->source, &st) < 0)
			return nerr_set(err, ENOENT, "lxc: bind source %.100s: %s", m->source, strerror(errno));
	}
	for (size_t i = 0; i < s->nenv; i++) {
		const char *k = s->env[i].key, *v = s->env[i].val ? s->env[i].val : "";

		if (!k || !k[0] || strchr(k, '=') || strpbrk(k, " \t\n") || strchr(v, '\n'))
			return nerr_set(err, EINVAL, "lxc: bad environment variable '%.40s'", k ? k : "");
	}
	if (s->argv && !s->argv[0] && !(s->entrypoint && s->entrypoint[0]))
		return nerr_set(err, EINVAL, "lxc: empty command");
	if (s->user && rt_user_valid(s->user, err) < 0)
		return -EINVAL;
	if (s->workdir && (!rt_lxc_path_ok(s->workdir) || s->workdir[0] != '/'))
		return nerr_set(err, EINVAL, "lxc: bad workdir '%.100s'", s->workdir);
	if (s->hostname && (!s->hostname[0] || strlen(s->hostname) > 63 ||
			    strspn(s->hostname, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				   "0123456789-.") != strlen(s->hostname)))
		return nerr_set(err, EINVAL, "lxc: bad hostname '%.64s'", s->hostname);
	if (s->force_pull)
		return nerr_set(err, ENOTSUP, "lxc: force_pull is docker's (flush_cache=yes "
				"fetches a download template's image again)");
	if (s->privileged)
		return nerr_set(err, ENOTSUP, "lxc: privileged (every device) is docker's only");
	return 0;
}

/* The container's root file system directory into buf (the template's
 * lxc.rootfs.path, "dir:" dropped). 0, or -ENOENT for another kind. */
static int rootfs_dir(struct lxc_container *c, char *buf, size_t size)
{
	char root[PATH_MAX];
	const char *r = root;

	if (c->get_config_item(c, "lxc.rootfs.path", root, sizeof(root)) <= 0)
		return -ENOENT;
	if (strncmp(root, "dir:", 4) == 0)
		r = root + 4;
	if (r[0] != '/')
		return -ENOENT;
	snprintf(buf, size, "%s", r);
	return 0;
}

/* rel (etc/passwd) under root, its symlinks resolved inside root
 * (openat2 RESOLVE_IN_ROOT, as a chroot would), up to cap bytes, into
 * *ret (malloc'd). 0 or -errno. */
static int read_in_root(const char *root, const char *rel, size_t cap, char **ret, size_t *ret_len)
{
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT };
	_cleanup_close_ int dfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;

	if (dfd < 0)
		return -errno;
	fd = (int)syscall(SYS_openat2, dfd, rel, &how, sizeof(how));
	if (fd < 0)
		return -errno;
	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(fd, buf + len, cap - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		len += (size_t)n;
		if (len == cap)
			return -EFBIG;
	}
	*ret = TAKE_PTR(buf);
	*ret_len = len;
	return 0;
}

/* user= to lxc.init.uid and lxc.init.gid: names from the container's own
 * /etc/passwd and /etc/group (read from its rootfs, never through a
 * symlink that could lead out of it). */
static int resolve_user(struct lxc_container *c, const struct rt_spec *s, long *ret_uid,
			long *ret_gid, struct nerr *err)
{
	char root[PATH_MAX];
	_cleanup_free_ char *pw = NULL, *gr = NULL;
	size_t pwl = 0, grl = 0;

	if (rootfs_dir(c, root, sizeof(root)) == 0) {
		static const size_t cap = 4u << 20;

		(void)read_in_root(root, "etc/passwd", cap, &pw, &pwl);
		(void)read_in_root(root, "etc/group", cap, &gr, &grl);
	}
	return rt_user_resolve(s->user, pw, pwl, gr, grl, ret_uid, ret_gid, err);
}

/* Drop udhcpc from the busybox template's rcS: with no network it never
 * returns, and busybox init then waits it out on every halt. */
static void busybox_no_dhcp(struct lxc_container *c)
{
	char root[PATH_MAX], path[PATH_MAX + 32], buf[4096], out[4096];
	const char *r = root;
	size_t o = 0;
	int n;

	if (c->get_config_item(c, "lxc.rootfs.path", root, sizeof(root)) <= 0)
		return;
	if (strncmp(root, "dir:", 4) == 0)
		r = root + 4;
	if (r[0] != '/')
		return;
	snprintf(path, sizeof(path), "%s/etc/init.d/rcS", r);
	n = rt_lxc_read_file(path, buf, sizeof(buf));
	if (n <= 0 || (size_t)n >= sizeof(buf) - 1)
		return;
	for (char *line = buf, *nl; line && *line; line = nl) {
		nl = strchr(line, '\n');
		if (nl)
			*nl++ = '\0';
		if (strstr(line, "udhcpc"))
			continue;
		o += (size_t)snprintf(out + o, sizeof(out) - o, "%s\n", line);
	}
	FILE *f = fopen(path, "we");

	if (f) {
		fputs(out, f);
		fclose(f);
	}
}

/* Run the template through a wrapper that keeps its output, so a failure
 * carries the template's own words (lxc sends it to /dev/null or to our
 * stderr, which a daemon must not lend out). */
static int run_create(struct rt_lxc *h, struct lxc_container *c, const char *name,
		      const char *tpath, char **targv, struct nerr *err)
{
	char wrap[PATH_MAX], out[PATH_MAX], pgid[PATH_MAX], logp[PATH_MAX], buf[8192],
		crash_line[64];
	FILE *f;
	bool ok, loaded = true;
	int r = 0;

	if (rt_lxc_create_file(h, name, "sh", wrap, sizeof(wrap)) < 0 ||
	    rt_lxc_create_file(h, name, "out", out, sizeof(out)) < 0 ||
	    rt_lxc_create_file(h, name, "pgid", pgid, sizeof(pgid)) < 0)
		return nerr_set(err, ENAMETOOLONG, "lxc: path too long");
	if (mkdir(h->lxcpath, 0755) < 0 && errno != EEXIST)
		return nerr_set(err, errno, "lxc: cannot make lxcpath %s: %s", h->lxcpath, strerror(errno));
	crash_line[0] = '\0';
#if NODEFS_TEST_HOOKS
	/* Crash tests: NODEFS_CRASH_AT=lxc:template kills the daemon once the
	 * template's session is up, before the template itself starts, which
	 * then goes on as after a real crash. No timer: a SIGKILL sent is a
	 * daemon that runs no more of its code, however fast the template. */
	{
		const char *spec = getenv("NODEFS_CRASH_AT");

		if (spec && strcmp(spec, "lxc:template") == 0)
			snprintf(crash_line, sizeof(crash_line), "kill -KILL %d; ",
				 (int)getpid());
	}
#endif
	f = fopen(wrap, "we");
	if (!f)
		return nerr_set(err, errno, "lxc: cannot write %s: %s", wrap, strerror(errno));
	/* The template in a session of its own (setsid -w waits, should it
	 * have to fork), its id recorded first: a recovery after a crash
	 * mid-create kills the whole group before removing what it made. */
	fprintf(f, "#!/bin/sh\n"
		"exec setsid -w /bin/sh -c 'echo $$ >\"$0\"; %sexec \"$@\"' "
		"'%s' '%s' \"$@\" "
		">'%s' 2>&1 </dev/null\n", crash_line, pgid, tpath, out);
	if (fclose(f) != 0 || chmod(wrap, 0700) < 0) {
		r = nerr_set(err, errno, "lxc: cannot write %s: %s", wrap, strerror(errno));
		unlink(wrap);
		return r;
	}
	/* liblxc's own reasons for a failed create go to a log beside the
	 * lxcpath (the container's directory is made by create itself); the
	 * config saved afterwards names the container's lxc.log instead. */
	rt_lxc_create_log(h, name, logp, sizeof(logp));
	if (runtime_helper()) {
		/* liblxc forks and prepares the template's run before its
		 * exec: from a process of one thread (lxc-helper.c); the
		 * config it saved is loaded here after */
		r = rt_lxc_create_in_helper(h, name, logp[0] ? logp : NULL, wrap, targv);
		if (r < 0) {
			nerr_set(err, -r, "lxc %s: cannot run %s: %s", name, runtime_helper(),
				 strerror(-r));
			unlink(wrap);
			return r;
		}
		ok = r == 1 && c->load_config(c, NULL);
		loaded = r != 1 || ok;
	} else {
		if (!logp[0] || !set_item(c, "lxc.log.file", logp) ||
		    !set_item(c, "lxc.log.level", "INFO"))
			logp[0] = '\0';
		ok = c->create(c, wrap, NULL, NULL, LXC_CREATE_QUIET, targv);
	}
	if (ok && logp[0]) {
		/* Out of the config create saved, or every later load of it
		 * would make the file again. */
		c->clear_config_item(c, "lxc.log.file");
		c->clear_config_item(c, "lxc.log.level");
	}
	if (!ok) {
		char last[240] = "";
		int n = rt_lxc_read_file(out, buf, sizeof(buf));

		/* The last non-empty line is what the template said last. */
		char *save = NULL;

		for (char *line = n > 0 ? strtok_r(buf, "\n", &save) : NULL; line;
		     line = strtok_r(NULL, "\n", &save)) {
			while (*line == ' ' || *line == '\t')
				line++;
			if (*line)
				snprintf(last, sizeof(last), "%s", line);
		}
		if (!loaded)	/* made, but not loadable here: not the template */
			r = rt_lxc_failf(h, c, name, LF_CREATE, err,
					 "the helper made it, but its config cannot be loaded");
		else if (last[0])
			r = rt_lxc_failf(h, c, name, LF_TEMPLATE, err, "%s", last);
		else
			r = rt_lxc_fail(h, c, name, LF_CREATE, err);
	}
	unlink(wrap);
	unlink(out);
	if (logp[0])
		unlink(logp);
	return r;
}

/* Write a small file whole (create or replace). */
static int write_file(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int r = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, data, len) != (ssize_t)len)
		r = errno ? -errno : -EIO;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	return r;
}

/* Write everything nodefs sets into the config and save it. */
static int create_configure(struct rt_lxc *h, struct lxc_container *c, const struct rt_spec *s,
			    const char *tpath, struct nerr *err)
{
	struct rt_lxc_item items[RT_LXC_LIMIT_ITEMS_MAX];
	struct rt_limits lim = { .cpus = s->cpus, .memory = s->memory, .pids = s->pids };
	char path[PATH_MAX], src[PATH_MAX * 2], dst[PATH_MAX * 2], entry[PATH_MAX * 4 + 64];
	_cleanup_(sbuf_free) struct sbuf binds = SBUF_INIT(RT_LXC_BINDS_CAP - 1);
	_cleanup_(sbuf_free) struct sbuf shared = SBUF_INIT(RT_LXC_BINDS_CAP - 1);
	/* network=: host shares the host's namespace (lxc's "none"), none
	 * is one of its own with only loopback (lxc's "empty"); unset: the
	 * runtime's network_type */
	const char *ntype = h->network_type, *link = NULL;
	long uid = -1, gid = -1;
	int n, r;

	if (s->network && strcmp(s->network, "host") == 0)
		ntype = "none";
	else if (s->network && strcmp(s->network, "none") == 0)
		ntype = "empty";
	else if (s->network && strncmp(s->network, "veth:", 5) == 0)
		ntype = "veth", link = s->network + 5;
	if (s->cpus > 0)
		lim.set |= RT_LIMIT_CPUS;
	if (s->memory)
		lim.set |= RT_LIMIT_MEMORY;
	if (s->pids)
		lim.set |= RT_LIMIT_PIDS;
	n = rt_lxc_cg_items(&h->cg, &lim, true, items, ARRAY_SIZE(items), err);
	if (n < 0)
		return n;

#define SET(k, v) do { \
		if (!set_item(c, (k), (v))) { \
			return rt_lxc_failf(h, c, s->name, LF_CONFIG, err, "%s = %.80s", (k), (v)); \
		} \
	} while (0)
	c->clear_config_item(c, "lxc.net");
	SET("lxc.net.0.type", ntype);
	if (strcmp(ntype, "empty") == 0)
		SET("lxc.net.0.flags", "up");	/* liblxc brings its loopback up */
	if (link) {
		/* network=veth:BRIDGE: one veth on the host's bridge, with the
		 * address and gateway given (ip=, gateway=) */
		bool v6 = s->ip && strchr(s->ip, ':');

		SET("lxc.net.0.link", link);
		SET("lxc.net.0.flags", "up");
		if (s->ip)
			SET(v6 ? "lxc.net.0.ipv6.address" : "lxc.net.0.ipv4.address", s->ip);
		if (s->gateway)
			SET(strchr(s->gateway, ':') ? "lxc.net.0.ipv6.gateway" : "lxc.net.0.ipv4.gateway",
			    s->gateway);
	}
	/* may_mount: the template keeps CAP_SYS_ADMIN and sets no seccomp
	 * profile; no AppArmor confinement either */
	SET("lxc.apparmor.profile", s->may_mount ? "unconfined" : h->apparmor_profile);
	rt_lxc_dir(h, s->name, RT_LXC_CONSOLE_LOG, path, sizeof(path));
	SET("lxc.console.logfile", path);
	rt_lxc_dir(h, s->name, RT_LXC_LXC_LOG, path, sizeof(path));
	SET("lxc.log.file", path);
	SET("lxc.log.level", h->log_level);
	if (s->hostname)
		SET("lxc.uts.name", s->hostname);
	if (s->workdir)
		SET("lxc.init.cwd", s->workdir);
	if (s->user) {
		char num[24];

		r = resolve_user(c, s, &uid, &gid, err);
		if (r < 0)
			return r;
		snprintf(num, sizeof(num), "%ld", uid);
		SET("lxc.init.uid", num);
		snprintf(num, sizeof(num), "%ld", gid);
		SET("lxc.init.gid", num);
		if (s->ret_uid)
			*s->ret_uid = uid;
		if (s->ret_gid)
			*s->ret_gid = gid;
	}
	for (int i = 0; i < n; i++)
		SET(items[i].key, items[i].val);
	for (size_t i = 0; i < s->nmounts; i++) {
		const struct rt_mount *m = &s->mounts[i];
		char real[PATH_MAX];
		struct stat st;

		/* The config keeps the source with its links resolved, and
		 * nodefs-binds lists it: start() then refuses it if a link
		 * has appeared on the way since (see binds_unchanged). */
		if (!realpath(m->source, real) || stat(real, &st) < 0 ||
		    fstab_escape(real, src, sizeof(src)) < 0 ||
		    fstab_escape(m->target + 1, dst, sizeof(dst)) < 0) {
			return nerr_set(err, EINVAL, "lxc %s: bad mount %.100s", s->name, m->source);
		}
		if (sbuf_printf(&binds, "%s\n", real) < 0 ||
		    (m->rshared && sbuf_printf(&shared, "%s\n%s\n", real, m->target) < 0))
			return nerr_set(err, E2BIG, "lxc %s: too many bind mounts", s->name);
		snprintf(entry, sizeof(entry), "%s %s none bind,create=%s%s 0 0", src, dst,
			 S_ISDIR(st.st_mode) ? "dir" : "file", m->ro ? ",ro" : "");
		SET("lxc.mount.entry", entry);
	}
	if (binds.len) {
		rt_lxc_dir(h, s->name, RT_LXC_BINDS_FILE, path, sizeof(path));
		r = write_file(path, binds.buf, binds.len);
		if (r < 0)
			return nerr_set(err, -r, "lxc %s: cannot write %s: %s", s->name, path,
					strerror(-r));
	}
	if (shared.len) {
		rt_lxc_dir(h, s->name, RT_LXC_SHARED_FILE, path, sizeof(path));
		r = write_file(path, shared.buf, shared.len);
		if (r < 0)
			return nerr_set(err, -r, "lxc %s: cannot write %s: %s", s->name, path,
					strerror(-r));
	}
	for (size_t i = 0; i < s->nenv; i++) {
		snprintf(entry, sizeof(entry), "%s=%s", s->env[i].key, s->env[i].val ? s->env[i].val : "");
		SET("lxc.environment", entry);
	}
	if (s->argv || (s->entrypoint && s->entrypoint[0])) {
		r = init_cmd(h, s, entry, sizeof(entry), err);
		if (r < 0)
			return r;
		{
			rt_lxc_dir(h, s->name, RT_LXC_CMD_FILE, path, sizeof(path));
			if (fstab_escape(path, src, sizeof(src)) < 0)
				return nerr_set(err, ENAMETOOLONG, "lxc %s: path too long", s->name);
			char mnt[sizeof(src) + 64];

			snprintf(mnt, sizeof(mnt), "%s .nodefs-cmd.sh none bind,ro,create=file 0 0", src);
			SET("lxc.mount.entry", mnt);
			rt_lxc_dir(h, s->name, RT_LXC_GATE_FILE, path, sizeof(path));
			if (mkfifo(path, 0600) < 0 && errno != EEXIST)
				return nerr_set(err, errno, "lxc %s: mkfifo %s: %s", s->name, path,
						strerror(errno));
			/* the command waits on it as the container's user */
			if (s->user && chown(path, (uid_t)uid, (gid_t)gid) < 0)
				return nerr_set(err, errno, "lxc %s: chown %s: %s", s->name, path,
						strerror(errno));
			if (fstab_escape(path, src, sizeof(src)) < 0)
				return nerr_set(err, ENAMETOOLONG, "lxc %s: path too long", s->name);
			snprintf(mnt, sizeof(mnt), "%s .nodefs-gate none bind,ro,create=file 0 0", src);
			SET("lxc.mount.entry", mnt);
		}
		SET("lxc.init.cmd", entry);
		/* An application, not a system init: stop it the way
		 * docker does, with SIGTERM. */
		SET("lxc.signal.halt", "SIGTERM");
	}
#undef SET
	if (!c->save_config(c, NULL))
		return rt_lxc_failf(h, c, s->name, LF_CONFIG, err, "cannot save the config");
	/* no DHCP to be had: the template's udhcpc would never return */
	if (is_busybox(tpath) && (strcmp(ntype, "veth") != 0 || s->ip))
		busybox_no_dhcp(c);
	return 0;
}

int rt_lxc_create(void *hv, const struct rt_spec *s, struct rt_progress *prog,
		  char **ret_id, struct nerr *err)
{
	struct rt_lxc *h = hv;
	_cleanup_lxc_ struct lxc_container *c = NULL;
	_cleanup_free_ char **targv = NULL;
	char tpath[PATH_MAX], dir[PATH_MAX];
	struct rt_lxc_meta m = { .exit_code = -1 };
	/* the container is named on liblxc's side as the backend says (its
	 * name_prefix + name), so two instances sharing an lxcpath do not
	 * collide; the mark keeps the nodefs name */
	struct rt_spec named = *s;
	char *id = NULL;
	int r;

	if (!rt_lxc_name_valid(s->name) || strlen(s->name) > RT_LXC_NODEFS_NAME_MAX)
		return nerr_set(err, EINVAL, "lxc: bad name '%.64s': 1 to %d of [A-Za-z0-9._-], no "
				"leading dot", s->name ? s->name : "", RT_LXC_NODEFS_NAME_MAX);
	snprintf(m.name, sizeof(m.name), "%s", s->name);
	if (s->engine_name && s->engine_name[0])
		named.name = s->engine_name;
	s = &named;
	r = create_validate(h, s, tpath, sizeof(tpath), err);
	if (r < 0)
		return r;
	r = template_argv(s, tpath, is_download(tpath), &targv, err);
	if (r < 0)
		return r;
	if (rt_lxc_dir(h, s->name, NULL, dir, sizeof(dir)) < 0)
		return nerr_set(err, ENAMETOOLONG, "lxc: path too long");
	if (access(dir, F_OK) == 0)
		return rt_lxc_fail(h, NULL, s->name, LF_EXISTS, err);
	c = lxc_container_new(s->name, h->lxcpath);
	if (!c)
		return rt_lxc_fail(h, NULL, s->name, LF_NEW, err);
	if (c->is_defined(c))
		return rt_lxc_fail(h, c, s->name, LF_EXISTS, err);
	if (prog && prog->cancel)
		return nerr_set(err, ECANCELED, "lxc %s: create cancelled", s->name);
	if (prog && prog->update)
		prog->update(prog->ctx, "running template");

	if (s->role && strlen(s->role) >= sizeof(m.role))
		return nerr_set(err, EINVAL, "lxc: bad role '%.20s'", s->role);
	snprintf(m.role, sizeof(m.role), "%s", s->role ? s->role : "");
	r = rt_lxc_creating_mark(h, s->name, m.name, s->role, err);
	if (r < 0)
		return r;
	r = run_create(h, c, s->name, tpath, targv, err);
	if (r < 0) {
		rt_lxc_create_undo(h, c, s->name);
		rt_lxc_creating_clear(h, s->name);
		return r;
	}
	r = create_configure(h, c, s, tpath, err);
	if (r == 0 && prog && prog->cancel)
		r = nerr_set(err, ECANCELED, "lxc %s: create cancelled", s->name);
	if (r == 0) {
		snprintf(m.instance, sizeof(m.instance), "%s", h->instance);
		m.labels = s->labels;
		m.nlabels = s->nlabels;
		m.created_at = time(NULL);
		r = rt_lxc_meta_write(h, s->name, &m);
		if (r < 0)
			nerr_set(err, -r, "lxc %s: cannot write %s: %s", s->name, RT_LXC_META_FILE,
				 strerror(-r));
	}
	if (r == 0 && !(id = strdup(s->name)))
		r = nerr_set(err, ENOMEM, "lxc: out of memory");
	if (r < 0) {
		rt_lxc_create_undo(h, c, s->name);
		rt_lxc_creating_clear(h, s->name);
		return r;
	}
	rt_lxc_creating_clear(h, s->name);	/* whole now: the owner mark is in place */
	if (prog && prog->update)
		prog->update(prog->ctx, "created");
	*ret_id = id;
	return 0;
}

