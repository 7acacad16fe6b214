/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lxc: the LXC runtime driver (struct runtime_ops rt_lxc_ops) over liblxc 5.
 *
 * Every call makes a fresh lxc_container handle and puts it before
 * returning, so calls on different containers from different worker threads
 * share nothing but liblxc's own locks. stats and logs, read on FUSE
 * threads, make no liblxc call at all (see rt_lxc_stats). Only containers
 * carrying nodefs's mark (nodefs.json beside the config, see lxc-meta.c)
 * are listed or touched; others get ENOENT.
 *
 * What a create writes into the container config: lxc.net.0.type from
 * network_type (default none), lxc.apparmor.profile (default unconfined),
 * lxc.console.logfile (the logs: at a start, a file past console_size, 1M by
 * default, moves to console.log.1; liblxc 5.0.2's own lxc.console.size
 * rotation duplicates and drops output, measured), lxc.log.file/level (the reason a start
 * failed), cgroup limits under the host's names (v1 lxc.cgroup.*, v2
 * lxc.cgroup2.*), lxc.mount.entry bind mounts (each source with its
 * symlinks resolved and listed in nodefs-binds, which every start checks
 * again: a link put on the way since is refused, not mounted),
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
 * the owner mark is in place. The template runs in its own session, whose
 * id is kept in .nodefs-create-NAME.pgid. A daemon killed mid-create thus
 * leaves a container list() reports as half_made, and destroy() removes it
 * whole: the template's process group is killed if it still runs, then
 * liblxc's destroy and whatever files are left.
 *
 * Exit detection and the real exit code: lxc-watch.c. Cgroup files:
 * lxc-cgroup.c. Knows nothing of backend/ or fs/.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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

#define DEFAULT_LXCPATH "/var/lib/lxc"
#define DEFAULT_TEMPLATE_DIR "/usr/share/lxc/templates"
#define DEFAULT_TEMPLATE "busybox"
#define RT_LXC_EXEC_ENV_MAX 256
#define ATTACH_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static inline void lxc_putp(struct lxc_container **c)
{
	if (*c)
		lxc_container_put(*c);
}
#define _cleanup_lxc_ _cleanup_(lxc_putp)

static inline void closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

/* ---- the one liblxc error table ---------------------------------------- */

/* liblxc answers most calls with a bool; the table says which errno each
 * failure becomes, and the message gets liblxc's own words when it has any
 * (c->error_string, or the last ERROR line of the container's lxc.log).
 * Every failure of a liblxc call, and of the template it runs, goes
 * through it (lxc_fail, lxc_failf); checks of nodefs's own (names, paths,
 * options) say EINVAL or ENOENT directly. */
enum lxc_fail {
	LF_NEW,			/* lxc_container_new returned NULL */
	LF_NOT_DEFINED,
	LF_NOT_OURS,
	LF_EXISTS,
	LF_TEMPLATE,		/* the template ran and failed */
	LF_CREATE,
	LF_CONFIG,		/* set_config_item / save_config */
	LF_START,
	LF_NOT_RUNNING,
	LF_RUNNING,
	LF_PAUSED,
	LF_FREEZE,
	LF_UNFREEZE,
	LF_STOP,
	LF_SIGNAL,
	LF_CGROUP,
	LF_ATTACH,
	LF_DESTROY,
};

static const struct {
	int err;
	const char *what;
} lxc_fail_table[] = {
	[LF_NEW] = { EIO, "liblxc could not load the container" },
	[LF_NOT_DEFINED] = { ENOENT, "no such container" },
	[LF_NOT_OURS] = { ENOENT, "container not managed by nodefs" },
	[LF_EXISTS] = { EEXIST, "container name taken" },
	[LF_TEMPLATE] = { EIO, "template failed" },
	[LF_CREATE] = { EIO, "create failed" },
	[LF_CONFIG] = { EINVAL, "config item rejected" },
	[LF_START] = { EIO, "start failed" },
	[LF_NOT_RUNNING] = { EBUSY, "container not running" },
	[LF_RUNNING] = { EBUSY, "container already running" },
	[LF_PAUSED] = { EBUSY, "container paused" },
	[LF_FREEZE] = { EIO, "freeze failed" },
	[LF_UNFREEZE] = { EIO, "unfreeze failed" },
	[LF_STOP] = { EIO, "stop failed" },
	[LF_SIGNAL] = { EIO, "signal failed" },
	[LF_CGROUP] = { EINVAL, "cgroup item rejected" },
	[LF_ATTACH] = { EIO, "attach failed" },
	[LF_DESTROY] = { EIO, "destroy failed" },
};

/* The last line of the container's lxc.log with an ERROR in it. */
static void last_log_error(struct rt_lxc *h, const char *name, char *buf, size_t size)
{
	char path[PATH_MAX], data[8192];
	int fd, n;
	off_t end;

	buf[0] = '\0';
	if (rt_lxc_dir(h, name, RT_LXC_LXC_LOG, path, sizeof(path)) < 0)
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	end = lseek(fd, 0, SEEK_END);
	if (end > (off_t)sizeof(data) - 1)
		lseek(fd, end - (off_t)sizeof(data) + 1, SEEK_SET);
	else
		lseek(fd, 0, SEEK_SET);
	n = (int)read(fd, data, sizeof(data) - 1);
	close(fd);
	if (n <= 0)
		return;
	data[n] = '\0';
	char *save = NULL;

	/* strtok_r: worker threads run this concurrently. */
	for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *e = strstr(line, " ERROR ");

		if (e) {
			/* "lxc NAME TIME ERROR file - func:line - message" */
			char *msg = strstr(e, " - ");

			msg = msg ? strstr(msg + 3, " - ") : NULL;
			snprintf(buf, size, "%s", msg ? msg + 3 : e + 7);
		}
	}
}

/* "lxc NAME: WHAT[: WHY][: LIBLXC'S WORDS]" with the table's errno. why, our
 * own words on what failed (the item, the signal, the template's last
 * line), is a printf format; NULL for none. */
static int lxc_failf(struct rt_lxc *h, struct lxc_container *c, const char *name,
		     enum lxc_fail f, struct nerr *err, const char *why, ...)
	__attribute__((format(printf, 6, 7)));

static int lxc_failf(struct rt_lxc *h, struct lxc_container *c, const char *name,
		     enum lxc_fail f, struct nerr *err, const char *why, ...)
{
	char ours[200] = "", detail[200] = "";

	if (why) {
		va_list ap;

		va_start(ap, why);
		vsnprintf(ours, sizeof(ours), why, ap);
		va_end(ap);
	}
	if (c && c->error_string && c->error_string[0])
		snprintf(detail, sizeof(detail), "%s", c->error_string);
	else if (f == LF_START || f == LF_STOP || f == LF_ATTACH || f == LF_CGROUP)
		last_log_error(h, name, detail, sizeof(detail));
	return nerr_set(err, lxc_fail_table[f].err, "lxc %s: %s%s%s%s%s", name,
			lxc_fail_table[f].what, ours[0] ? ": " : "", ours,
			detail[0] ? ": " : "", detail);
}

static int lxc_fail(struct rt_lxc *h, struct lxc_container *c, const char *name,
		    enum lxc_fail f, struct nerr *err)
{
	return lxc_failf(h, c, name, f, err, NULL);
}

/* ---- small helpers ------------------------------------------------------ */

static bool name_valid(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > RT_LXC_NAME_MAX || s[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
			return false;
	return true;
}

/* Is id one of our containers? From the owner mark alone, no liblxc:
 * ENOENT if missing or not ours. */
static int check_ours(struct rt_lxc *h, const char *id, struct rt_lxc_meta *ret_meta,
		      struct nerr *err)
{
	int r;

	if (!name_valid(id))
		return nerr_set(err, ENOENT, "lxc: no such container '%.64s'", id ? id : "");
	r = rt_lxc_meta_read(h, id, ret_meta);
	if (r == -ENOENT) {
		char dir[PATH_MAX];
		struct stat st;

		if (rt_lxc_dir(h, id, "config", dir, sizeof(dir)) == 0 && stat(dir, &st) == 0)
			return lxc_fail(h, NULL, id, LF_NOT_OURS, err);
		return lxc_fail(h, NULL, id, LF_NOT_DEFINED, err);
	}
	if (r < 0)
		return nerr_set(err, -r, "lxc %s: cannot read %s: %s", id, RT_LXC_META_FILE,
				strerror(-r));
	return 0;
}

/* Open a handle on one of our containers: ENOENT if missing or not ours. */
static int open_ours(struct rt_lxc *h, const char *id, struct lxc_container **ret,
		     struct rt_lxc_meta *ret_meta, struct nerr *err)
{
	struct lxc_container *c;
	int r;

	r = check_ours(h, id, ret_meta, err);
	if (r < 0)
		return r;
	c = lxc_container_new(id, h->lxcpath);
	if (!c) {
		char cfg[PATH_MAX];
		struct stat st;

		/*
		 * Not an allocation failure, in practice: liblxc gives up when
		 * the config it saw a moment ago cannot be read, which is what a
		 * destroy on another thread leaves. A container whose mark or
		 * config went meanwhile is gone; anything else is tried once more.
		 */
		if (rt_lxc_meta_read(h, id, NULL) == -ENOENT ||
		    rt_lxc_dir(h, id, "config", cfg, sizeof(cfg)) < 0 || stat(cfg, &st) < 0)
			return lxc_fail(h, NULL, id, LF_NOT_DEFINED, err);
		c = lxc_container_new(id, h->lxcpath);
		if (!c)
			return lxc_fail(h, NULL, id, LF_NEW, err);
	}
	if (!c->is_defined(c)) {
		lxc_container_put(c);
		return lxc_fail(h, NULL, id, LF_NOT_DEFINED, err);
	}
	*ret = c;
	return 0;
}

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int pidfd_send_signal_(int pidfd, int sig)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* A pidfd for the container's init: liblxc's own (4.0+), else pidfd_open. */
static int init_pidfd(struct lxc_container *c, pid_t *ret_pid)
{
	pid_t pid = c->init_pid(c);
	int fd;

	if (pid <= 0)
		return -ESRCH;
	fd = c->init_pidfd ? c->init_pidfd(c) : -1;
	if (fd < 0)
		fd = pidfd_open_(pid);
	if (fd < 0)
		return -errno;
	/* The fd crossed a unix socket from lxc's monitor: no CLOEXEC yet. */
	(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
	if (ret_pid)
		*ret_pid = pid;
	return fd;
}

static enum rt_state state_of(struct lxc_container *c, const struct rt_lxc_meta *m)
{
	const char *s = c->state(c);

	if (!s)
		return RT_STATE_UNKNOWN;
	if (strcmp(s, "STOPPED") == 0)
		return m && m->started_at ? RT_STATE_EXITED : RT_STATE_CREATED;
	if (strcmp(s, "FROZEN") == 0 || strcmp(s, "FREEZING") == 0)
		return RT_STATE_PAUSED;
	return RT_STATE_RUNNING;
}

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
	for (char *const *a = s->argv; *a && r >= 0; a++) {
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

/* ---- open / close / health --------------------------------------------- */

static int parse_duration_s(const char *v, int *ret)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || end == v || n < 0)
		return -EINVAL;
	if (*end == '\0' || strcmp(end, "s") == 0)
		;
	else if (strcmp(end, "m") == 0)
		n *= 60;
	else if (strcmp(end, "h") == 0)
		n *= 3600;
	else
		return -EINVAL;
	if (n > 86400)
		return -EINVAL;
	*ret = (int)n;
	return 0;
}

/* 4 KiB to 1 GiB, bytes or with K, M, G. */
static int parse_size(const char *v, uint64_t *ret)
{
	char *end;
	unsigned long long n;

	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || end == v)
		return -EINVAL;
	if (strcasecmp(end, "k") == 0)
		n <<= 10;
	else if (strcasecmp(end, "m") == 0)
		n <<= 20;
	else if (strcasecmp(end, "g") == 0)
		n <<= 30;
	else if (*end)
		return -EINVAL;
	if (n < 4096 || n > (1ull << 30))
		return -EINVAL;
	*ret = n;
	return 0;
}

static bool path_ok(const char *p)
{
	return p[0] == '/' && !strpbrk(p, "'\"\n\\") && strlen(p) < PATH_MAX - 128;
}

static const char *const log_levels[] = {
	"TRACE", "DEBUG", "INFO", "NOTICE", "WARN", "ERROR", "CRIT", "ALERT", "FATAL",
};

static void rt_lxc_close(void *hv)
{
	struct rt_lxc *h = hv;

	if (!h)
		return;
	rt_lxc_watch_free(h->watch);
	pthread_mutex_destroy(&h->meta_lock);
	free(h);
}

static int rt_lxc_open(const struct rt_config *cfg, void **ret_h, struct nerr *err)
{
	_cleanup_free_ struct rt_lxc *h = calloc(1, sizeof(*h));
	int r;

	if (!h)
		return nerr_set(err, ENOMEM, "lxc: out of memory");
	snprintf(h->lxcpath, sizeof(h->lxcpath), "%s", DEFAULT_LXCPATH);
	snprintf(h->instance, sizeof(h->instance), "%s", cfg && cfg->instance ? cfg->instance : "");
	snprintf(h->template_dir, sizeof(h->template_dir), "%s", DEFAULT_TEMPLATE_DIR);
	snprintf(h->network_type, sizeof(h->network_type), "none");
	snprintf(h->apparmor_profile, sizeof(h->apparmor_profile), "unconfined");
	snprintf(h->log_level, sizeof(h->log_level), "ERROR");
	h->stop_timeout = 10;
	h->console_size = 1u << 20;

	for (size_t i = 0; cfg && i < cfg->nkv; i++) {
		const char *k = cfg->kv[i].key, *v = cfg->kv[i].val ? cfg->kv[i].val : "";

		if (strcmp(k, "lxcpath") == 0 || strcmp(k, "template_dir") == 0) {
			char *dst = k[0] == 'l' ? h->lxcpath : h->template_dir;

			if (!path_ok(v))
				return nerr_set(err, EINVAL, "lxc: %s must be an absolute path without quotes: '%.100s'", k, v);
			snprintf(dst, PATH_MAX, "%s", v);
			/* no trailing slash: names are joined with one */
			for (size_t n = strlen(dst); n > 1 && dst[n - 1] == '/'; n--)
				dst[n - 1] = '\0';
		} else if (strcmp(k, "network_type") == 0) {
			if (!*v || strlen(v) >= sizeof(h->network_type) || strpbrk(v, " \t\n"))
				return nerr_set(err, EINVAL, "lxc: bad network_type '%.40s'", v);
			snprintf(h->network_type, sizeof(h->network_type), "%s", v);
		} else if (strcmp(k, "apparmor_profile") == 0) {
			if (!*v || strlen(v) >= sizeof(h->apparmor_profile) || strchr(v, '\n'))
				return nerr_set(err, EINVAL, "lxc: bad apparmor_profile '%.40s'", v);
			snprintf(h->apparmor_profile, sizeof(h->apparmor_profile), "%s", v);
		} else if (strcmp(k, "stop_timeout") == 0) {
			if (parse_duration_s(v, &h->stop_timeout) < 0)
				return nerr_set(err, EINVAL, "lxc: bad stop_timeout '%.40s' (seconds, or Ns/Nm/Nh)", v);
		} else if (strcmp(k, "console_size") == 0) {
			if (parse_size(v, &h->console_size) < 0)
				return nerr_set(err, EINVAL,
						"lxc: bad console_size '%.40s' (4K to 1G, K/M/G)", v);
		} else if (strcmp(k, "log_level") == 0) {
			bool ok = false;

			for (size_t j = 0; j < ARRAY_SIZE(log_levels); j++) {
				if (strcasecmp(v, log_levels[j]) == 0) {
					snprintf(h->log_level, sizeof(h->log_level), "%s", log_levels[j]);
					ok = true;
				}
			}
			if (!ok)
				return nerr_set(err, EINVAL, "lxc: bad log_level '%.40s' (TRACE..FATAL)", v);
		} else {
			return nerr_set(err, EINVAL, "lxc: unknown config key '%.60s'", k);
		}
	}
	/* A probe failure leaves the driver unhealthy, not absent. */
	(void)rt_lxc_cg_probe(&h->cg, NULL);
	(void)rt_lxc_cg_home(&h->home);
	pthread_mutex_init(&h->meta_lock, NULL);
	r = rt_lxc_watch_new(h, &h->watch);
	if (r < 0) {
		pthread_mutex_destroy(&h->meta_lock);
		return nerr_set(err, -r, "lxc: cannot start the watcher: %s", strerror(-r));
	}
	*ret_h = TAKE_PTR(h);
	return 0;
}

static int rt_lxc_health(void *hv, struct sbuf *version, struct nerr *err)
{
	struct rt_lxc *h = hv;
	struct rt_lxc_cgroup cg;
	struct stat st;
	struct lxc_container *c;
	const char *v = lxc_get_version();

	if (version)
		(void)sbuf_printf(version, "liblxc %s", v ? v : "unknown");
	if (geteuid() != 0)
		return nerr_set(err, EACCES, "lxc: nodefs must run as root to manage containers");
	if (stat(h->template_dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return nerr_set(err, ENOENT, "lxc: no template directory %s", h->template_dir);
	if (stat(h->lxcpath, &st) == 0 && !S_ISDIR(st.st_mode))
		return nerr_set(err, ENOTDIR, "lxc: lxcpath %s is not a directory", h->lxcpath);
	if (rt_lxc_cg_probe(&cg, err) < 0)
		return -err->code;
	c = lxc_container_new("nodefs-health-probe", h->lxcpath);
	if (!c)
		return nerr_set(err, EIO, "lxc: liblxc cannot open containers under %s", h->lxcpath);
	lxc_container_put(c);
	return 0;
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

	if (!name_valid(s->name))
		return nerr_set(err, EINVAL, "lxc: bad name '%.64s': 1 to 64 of [A-Za-z0-9._-], no leading dot",
				s->name ? s->name : "");
	if (t[0] == '/') {
		if (!path_ok(t))
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
	if (s->argv && !s->argv[0])
		return nerr_set(err, EINVAL, "lxc: empty command");
	return 0;
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
	char wrap[PATH_MAX + 128], out[PATH_MAX + 128], buf[8192], crash_line[64];
	FILE *f;
	bool ok;
	int r = 0;

	snprintf(wrap, sizeof(wrap), "%s/.nodefs-create-%s.sh", h->lxcpath, name);
	snprintf(out, sizeof(out), "%s/.nodefs-create-%s.out", h->lxcpath, name);
	if (mkdir(h->lxcpath, 0755) < 0 && errno != EEXIST)
		return nerr_set(err, errno, "lxc: cannot make lxcpath %s: %s", h->lxcpath, strerror(errno));
	crash_line[0] = '\0';
#if NODEFS_TEST_HOOKS
	/* Crash tests: NODEFS_CRASH_AT=lxc:template kills the daemon while the
	 * template runs; the template goes on, as after a real crash. */
	{
		const char *spec = getenv("NODEFS_CRASH_AT");

		if (spec && strcmp(spec, "lxc:template") == 0)
			snprintf(crash_line, sizeof(crash_line), "(sleep 0.2; kill -KILL %d) &\n",
				 (int)getpid());
	}
#endif
	f = fopen(wrap, "we");
	if (!f)
		return nerr_set(err, errno, "lxc: cannot write %s: %s", wrap, strerror(errno));
	/* The template in a session of its own (setsid -w waits, should it
	 * have to fork), its id recorded first: a recovery after a crash
	 * mid-create kills the whole group before removing what it made. */
	fprintf(f, "#!/bin/sh\n%s"
		"exec setsid -w /bin/sh -c 'echo $$ >\"$0\"; exec \"$@\"' "
		"'%s/.nodefs-create-%s.pgid' '%s' \"$@\" "
		">'%s' 2>&1 </dev/null\n", crash_line, h->lxcpath, name, tpath, out);
	if (fclose(f) != 0 || chmod(wrap, 0700) < 0) {
		r = nerr_set(err, errno, "lxc: cannot write %s: %s", wrap, strerror(errno));
		unlink(wrap);
		return r;
	}
	ok = c->create(c, wrap, NULL, NULL, LXC_CREATE_QUIET, targv);
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
		if (last[0])
			r = lxc_failf(h, c, name, LF_TEMPLATE, err, "%s", last);
		else
			r = lxc_fail(h, c, name, LF_CREATE, err);
	}
	unlink(wrap);
	unlink(out);
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
	int n, r;

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
			return lxc_failf(h, c, s->name, LF_CONFIG, err, "%s = %.80s", (k), (v)); \
		} \
	} while (0)
	c->clear_config_item(c, "lxc.net");
	SET("lxc.net.0.type", h->network_type);
	SET("lxc.apparmor.profile", h->apparmor_profile);
	rt_lxc_dir(h, s->name, RT_LXC_CONSOLE_LOG, path, sizeof(path));
	SET("lxc.console.logfile", path);
	rt_lxc_dir(h, s->name, RT_LXC_LXC_LOG, path, sizeof(path));
	SET("lxc.log.file", path);
	SET("lxc.log.level", h->log_level);
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
		if (sbuf_printf(&binds, "%s\n", real) < 0)
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
	for (size_t i = 0; i < s->nenv; i++) {
		snprintf(entry, sizeof(entry), "%s=%s", s->env[i].key, s->env[i].val ? s->env[i].val : "");
		SET("lxc.environment", entry);
	}
	if (s->argv) {
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
		return lxc_failf(h, c, s->name, LF_CONFIG, err, "cannot save the config");
	if (is_busybox(tpath) && strcmp(h->network_type, "none") == 0)
		busybox_no_dhcp(c);
	return 0;
}

/* Remove a half-made container: liblxc's destroy, then whatever is left. */
static void create_undo(struct rt_lxc *h, struct lxc_container *c, const char *name)
{
	char dir[PATH_MAX];

	if (c && c->is_defined(c))
		c->destroy(c);
	if (rt_lxc_dir(h, name, NULL, dir, sizeof(dir)) == 0 && access(dir, F_OK) == 0) {
		/* liblxc left files behind (a config it never saved whole):
		 * the directory is ours, we made it in this call. */
		pid_t pid = fork();

		if (pid == 0) {
			execl("/bin/rm", "rm", "-rf", "--one-file-system", "--", dir, (char *)NULL);
			_exit(127);
		}
		if (pid > 0)
			waitpid(pid, NULL, 0);
	}
}

/* ---- the in-progress mark of a create ----------------------------------- */

/* LXCPATH/.nodefs-create-NAME.EXT (ext NULL: the mark .nodefs-creating-NAME). */
static int create_file(const struct rt_lxc *h, const char *name, const char *ext, char *buf,
		       size_t size)
{
	int n = ext ? snprintf(buf, size, "%s/.nodefs-create-%s.%s", h->lxcpath, name, ext)
		    : snprintf(buf, size, "%s/" RT_LXC_CREATING_PREFIX "%s", h->lxcpath, name);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static void fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

/* Write the in-progress mark, synced with its directory, so a crash at any
 * later point leaves something recovery recognises. */
static int creating_mark(struct rt_lxc *h, const char *name, struct nerr *err)
{
	char path[PATH_MAX], rec[256];
	int fd, n, r = 0;

	if (mkdir(h->lxcpath, 0755) < 0 && errno != EEXIST)
		return nerr_set(err, errno, "lxc: cannot make lxcpath %s: %s", h->lxcpath, strerror(errno));
	if (create_file(h, name, NULL, path, sizeof(path)) < 0)
		return nerr_set(err, ENAMETOOLONG, "lxc: path too long");
	n = snprintf(rec, sizeof(rec), "{\"%s\": \"true\", \"%s\": \"%s\", \"%s\": \"%s\", "
		     "\"started_at\": %lld, \"pid\": %d}\n",
		     RT_OWNER_LABEL, RT_NAME_LABEL, name, RT_INSTANCE_LABEL, h->instance,
		     (long long)time(NULL), (int)getpid());
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return nerr_set(err, errno, "lxc %s: cannot write %s: %s", name, path, strerror(errno));
	if (write(fd, rec, (size_t)n) != n || fsync(fd) < 0)
		r = errno ? -errno : -EIO;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r < 0) {
		unlink(path);
		return nerr_set(err, -r, "lxc %s: cannot write %s: %s", name, path, strerror(-r));
	}
	fsync_dir(h->lxcpath);
	return 0;
}

static bool creating_marked(const struct rt_lxc *h, const char *name)
{
	char path[PATH_MAX];

	return create_file(h, name, NULL, path, sizeof(path)) == 0 && access(path, F_OK) == 0;
}

/* Is the in-progress mark of name this instance's? (Any, when the driver
 * was given no instance.) */
static bool creating_ours(const struct rt_lxc *h, const char *name)
{
	char path[PATH_MAX], rec[512], want[128];
	int n, w;

	if (!h->instance[0])
		return true;
	if (create_file(h, name, NULL, path, sizeof(path)) < 0)
		return false;
	n = rt_lxc_read_file(path, rec, sizeof(rec));
	w = snprintf(want, sizeof(want), "\"%s\": \"%s\"", RT_INSTANCE_LABEL, h->instance);
	return n > 0 && w > 0 && memmem(rec, (size_t)n, want, (size_t)w) != NULL;
}

/* The create is over (made whole, or undone): its files go, the mark last. */
static void creating_clear(struct rt_lxc *h, const char *name)
{
	static const char *const exts[] = { "sh", "out", "pgid" };
	char path[PATH_MAX];

	for (size_t i = 0; i < ARRAY_SIZE(exts); i++)
		if (create_file(h, name, exts[i], path, sizeof(path)) == 0)
			unlink(path);
	if (create_file(h, name, NULL, path, sizeof(path)) == 0)
		unlink(path);
	fsync_dir(h->lxcpath);
}

/* A template a crashed create left running: kill its session (the whole
 * process group, recorded by the wrapper) and wait, up to 5 s, until it is
 * gone, so nothing writes into what is about to be removed. The group is
 * checked to be that template's (a session leader whose argv names the
 * container's path) before it is killed: the id may have been reused. */
static void creating_kill_template(struct rt_lxc *h, const char *name)
{
	char path[PATH_MAX], want[PATH_MAX + 2], buf[32], cmd[8192];
	long pg;
	int n, wlen;

	if (create_file(h, name, "pgid", path, sizeof(path)) < 0 ||
	    rt_lxc_read_file(path, buf, sizeof(buf)) <= 0)
		return;
	pg = strtol(buf, NULL, 10);
	if (pg <= 1 || pg == getpid() || getsid((pid_t)pg) != (pid_t)pg)
		return;
	snprintf(path, sizeof(path), "/proc/%ld/cmdline", pg);
	n = rt_lxc_read_file(path, cmd, sizeof(cmd));
	wlen = snprintf(want, sizeof(want), "%s/%s", h->lxcpath, name);
	if (n <= 0 || wlen <= 0 || !memmem(cmd, (size_t)n, want, (size_t)wlen + 1))
		return;
	kill(-(pid_t)pg, SIGKILL);
	for (int i = 0; i < 500 && kill(-(pid_t)pg, 0) == 0; i++)
		usleep(10000);
}

/* Remove what a create cut short made: the template if it still runs, the
 * container (liblxc's destroy, then whatever files are left), the create's
 * files, the mark last. */
static int remove_half_made(struct rt_lxc *h, const char *name, struct nerr *err)
{
	_cleanup_lxc_ struct lxc_container *c = NULL;
	char dir[PATH_MAX];

	creating_kill_template(h, name);
	c = lxc_container_new(name, h->lxcpath);
	if (c && c->is_defined(c) && c->is_running(c))
		(void)c->stop(c);
	create_undo(h, c, name);
	if (rt_lxc_dir(h, name, NULL, dir, sizeof(dir)) == 0 && access(dir, F_OK) == 0)
		return nerr_set(err, EIO, "lxc %s: cannot remove the half-made container's directory %s",
				name, dir);
	creating_clear(h, name);
	return 0;
}

static int rt_lxc_create(void *hv, const struct rt_spec *s, struct rt_progress *prog,
			 char **ret_id, struct nerr *err)
{
	struct rt_lxc *h = hv;
	_cleanup_lxc_ struct lxc_container *c = NULL;
	_cleanup_free_ char **targv = NULL;
	char tpath[PATH_MAX], dir[PATH_MAX];
	struct rt_lxc_meta m = { .exit_code = -1 };
	char *id = NULL;
	int r;

	r = create_validate(h, s, tpath, sizeof(tpath), err);
	if (r < 0)
		return r;
	r = template_argv(s, tpath, is_download(tpath), &targv, err);
	if (r < 0)
		return r;
	if (rt_lxc_dir(h, s->name, NULL, dir, sizeof(dir)) < 0)
		return nerr_set(err, ENAMETOOLONG, "lxc: path too long");
	if (access(dir, F_OK) == 0)
		return lxc_fail(h, NULL, s->name, LF_EXISTS, err);
	c = lxc_container_new(s->name, h->lxcpath);
	if (!c)
		return lxc_fail(h, NULL, s->name, LF_NEW, err);
	if (c->is_defined(c))
		return lxc_fail(h, c, s->name, LF_EXISTS, err);
	if (prog && prog->cancel)
		return nerr_set(err, ECANCELED, "lxc %s: create cancelled", s->name);
	if (prog && prog->update)
		prog->update(prog->ctx, "running template");

	r = creating_mark(h, s->name, err);
	if (r < 0)
		return r;
	r = run_create(h, c, s->name, tpath, targv, err);
	if (r < 0) {
		create_undo(h, c, s->name);
		creating_clear(h, s->name);
		return r;
	}
	r = create_configure(h, c, s, tpath, err);
	if (r == 0 && prog && prog->cancel)
		r = nerr_set(err, ECANCELED, "lxc %s: create cancelled", s->name);
	if (r == 0) {
		snprintf(m.name, sizeof(m.name), "%s", s->name);
		snprintf(m.instance, sizeof(m.instance), "%s", h->instance);
		m.created_at = time(NULL);
		r = rt_lxc_meta_write(h, s->name, &m);
		if (r < 0)
			nerr_set(err, -r, "lxc %s: cannot write %s: %s", s->name, RT_LXC_META_FILE,
				 strerror(-r));
	}
	if (r == 0 && !(id = strdup(s->name)))
		r = nerr_set(err, ENOMEM, "lxc: out of memory");
	if (r < 0) {
		create_undo(h, c, s->name);
		creating_clear(h, s->name);
		return r;
	}
	creating_clear(h, s->name);	/* whole now: the owner mark is in place */
	if (prog && prog->update)
		prog->update(prog->ctx, "created");
	*ret_id = id;
	return 0;
}

/* ---- lifecycle ---------------------------------------------------------- */

/* Keep the console log bounded across runs: past console_size, the last
 * runs' output becomes console.log.1 (replacing the one before). */
static void rotate_console_log(struct rt_lxc *h, const char *id)
{
	char path[PATH_MAX], old[PATH_MAX + 8];
	struct stat st;

	if (rt_lxc_dir(h, id, RT_LXC_CONSOLE_LOG, path, sizeof(path)) < 0 ||
	    stat(path, &st) < 0 || (uint64_t)st.st_size <= h->console_size)
		return;
	snprintf(old, sizeof(old), "%s.1", path);
	(void)rename(path, old);
}

/* Open the gate a command container's script waits on before it execs
 * the command, and put a line in it: the script goes on only once we hold
 * init's pidfd, so even a command that exits at once leaves its status to
 * us. The fd stays open (in the watch) until init dies, so the line is not
 * lost if the script reaches the gate after we return. -1 if no gate. */
static int open_gate(struct rt_lxc *h, const char *id)
{
	char path[PATH_MAX];
	int fd;

	if (rt_lxc_dir(h, id, RT_LXC_GATE_FILE, path, sizeof(path)) < 0)
		return -1;
	/* O_RDWR: never blocks and never waits for a reader. */
	fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (write(fd, "\n", 1) != 1) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * mount(2) follows symlinks, and a bind source is mounted anew at every
 * start from the config, where create wrote it with its links resolved and
 * listed it in nodefs-binds (the template's own entries, busybox's /lib,
 * are not ours to judge). A source that no longer resolves to itself has
 * had a link put on its way since (a directory swapped for a link to
 * /etc): refuse to start rather than mount what it now leads to.
 */
static int binds_unchanged(struct rt_lxc *h, const char *id, struct nerr *err)
{
	_cleanup_free_ char *buf = NULL;
	char path[PATH_MAX], real[PATH_MAX];
	char *save = NULL;
	int n;

	if (rt_lxc_dir(h, id, RT_LXC_BINDS_FILE, path, sizeof(path)) < 0)
		return nerr_set(err, ENAMETOOLONG, "lxc %s: path too long", id);
	buf = malloc(RT_LXC_BINDS_CAP);
	if (!buf)
		return nerr_set(err, ENOMEM, "lxc: out of memory");
	n = rt_lxc_read_file(path, buf, RT_LXC_BINDS_CAP);
	if (n == -ENOENT)
		return 0;	/* no binds */
	if (n < 0)
		return nerr_set(err, -n, "lxc %s: %s: %s", id, path, strerror(-n));
	for (char *src = strtok_r(buf, "\n", &save); src; src = strtok_r(NULL, "\n", &save)) {
		if (!realpath(src, real))
			return nerr_set(err, errno == ENOENT ? ENOENT : EIO,
					"lxc %s: bind source %.200s: %s; not started", id, src,
					strerror(errno));
		if (strcmp(real, src) != 0)
			return nerr_set(err, EPERM,
					"lxc %s: bind source %.100s now leads to %.100s through a "
					"symlink; not started", id, src, real);
	}
	return 0;
}

static int rt_lxc_start(void *hv, const char *id, struct nerr *err)
{
	struct rt_lxc *h = hv;
	_cleanup_lxc_ struct lxc_container *c = NULL;
	pid_t pid = 0;
	int r, fd, gate;

	r = open_ours(h, id, &c, NULL, err);
	if (r < 0)
		return r;
	if (c->is_running(c))
		return lxc_fail(h, c, id, LF_RUNNING, err);
	r = binds_unchanged(h, id, err);
	if (r < 0)
		return r;
	rotate_console_log(h, id);
	/* the last run's monitor cgroup, so liblxc does not make NAME-1 */
	(void)rt_lxc_cg_remove_leftovers(&h->home, id);
	/* A stale watch from the last run must not see this one. */
	rt_lxc_watch_del(h->watch, id);
	c->want_daemonize(c, true);
	c->want_close_all_fds(c, true);
	/* Returns once the container is RUNNING (or failed). */
	bool started = c->start(c, 0, NULL);

	/* liblxc entered the daemon into the monitor's cgroup: back home, so
	 * the monitor's own teardown can remove that cgroup */
	(void)rt_lxc_cg_go_home(&h->home);
	if (!started)
		return lxc_fail(h, c, id, LF_START, err);
	/* The pidfd first, then the gate that lets a command run. */
	fd = init_pidfd(c, &pid);
	gate = open_gate(h, id);
	(void)rt_lxc_meta_started(h, id, time(NULL));
	if (fd < 0) {
		if (gate >= 0)
			close(gate);
		/* A system init gone already (there is no gate for it):
		 * its status went to lxc's monitor alone. Started, then
		 * exited, code unknown. */
		(void)rt_lxc_meta_finished(h, id, time(NULL), -1, false);
		rt_lxc_watch_post(h->watch, RT_EV_START, id, 0);
		rt_lxc_watch_post(h->watch, RT_EV_DIE, id, -1);
		return 0;
	}
	r = rt_lxc_watch_add(h->watch, id, fd, pid, gate);
	if (r < 0)
		return nerr_set(err, -r, "lxc %s: cannot watch init: %s", id, strerror(-r));
	rt_lxc_watch_post(h->watch, RT_EV_START, id, 0);
	return 0;
}

/*
 * On cgroup v1, liblxc's freeze writes FROZEN to freezer.state once and
 * then polls, a second apart and with no time limit, until it reads
 * FROZEN; a task caught mid-fork can keep the cgroup at FREEZING for good
 * (the kernel retries only on the next write) and the worker would hang
 * there. So on v1 the driver freezes (or thaws) first itself, writing
 * again on every look and giving up after timeout_ms; liblxc's call then
 * finds the state reached, returns at once and tells lxc's monitor, whose
 * state c->state() reports. 0 (reached, or not v1: liblxc alone then),
 * -ESRCH (init or its cgroup gone), -ETIMEDOUT (a freeze is undone).
 */
static int v1_freezer(struct rt_lxc *h, struct lxc_container *c, bool freeze, int timeout_ms)
{
	struct rt_lxc_cgpaths p;
	pid_t pid;
	int r;

	if (h->cg.mode != RT_LXC_CG_V1 || !h->cg.freezer[0])
		return 0;
	pid = c->init_pid(c);
	if (pid <= 0)
		return -ESRCH;
	r = rt_lxc_cg_paths(&h->cg, pid, &p);
	if (r < 0 || !p.freezer[0])
		return r == -ENOENT || r == -ESRCH ? -ESRCH : 0;
	r = rt_lxc_cg_freeze(&p, freeze, timeout_ms);
	return r == -ENOTSUP ? 0 : r;
}

/* Wait for the container to be down and its exit recorded. */
static void wait_down(struct rt_lxc *h, struct lxc_container *c, const char *id, int pidfd,
		      int timeout_ms)
{
	if (pidfd >= 0) {
		struct pollfd p = { .fd = pidfd, .events = POLLIN };

		(void)poll(&p, 1, timeout_ms);
	}
	/* The watcher writes the record right after the reap. */
	(void)rt_lxc_watch_wait(h->watch, id, timeout_ms);
}

static int rt_lxc_stop(void *hv, const char *id, int timeout_s, struct nerr *err)
{
	struct rt_lxc *h = hv;
	_cleanup_lxc_ struct lxc_container *c = NULL;
	_cleanup_close_ int pidfd = -1;
	int r;

	r = open_ours(h, id, &c, NULL, err);
	if (r < 0)
		return r;
	if (!c->is_running(c))
		return 0;
	if (timeout_s < 0)
		timeout_s = h->stop_timeout;
	pidfd = init_pidfd(c, NULL);
	if (state_of(c, NULL) == RT_STATE_PAUSED)
		(void)v1_freezer(h, c, false, 5000);
	if (state_of(c, NULL) == RT_STATE_PAUSED && !c->unfreeze(c)) {
		/*
		 * Killed while frozen, it dies as it thaws and its monitor
		 * removes the cgroup liblxc watches for THAWED: the unfreeze
		 * "fails" on a container that is going down, which is what a
		 * stop asks. Only one still running after that is an error.
		 */
		wait_down(h, c, id, pidfd, 2000);
		if (c->is_running(c))
			return lxc_fail(h, c, id, LF_UNFREEZE, err);
		return 0;
	}
	/* shutdown() sends lxc.signal.halt and waits on init's pidfd. */
	rt_lxc_watch_halting(h->watch, id, timeout_s > 0);
	if (timeout_s == 0 || !c->shutdown(c, timeout_s)) {
		rt_lxc_watch_halting(h->watch, id, false);
		if (c->is_running(c) && !c->stop(c) && c->is_running(c))
			return lxc_fail(h, c, id, LF_STOP, err);
	}
	wait_down(h, c, id, pidfd, 5000);
	return 0;
}

static int rt_lxc_kill(void *hv, const char *id, int sig, struct nerr *err)
{
	struct rt_lxc *h = hv;
	_cleanup_lxc_ struct lxc_container *c = NULL;
	_cleanup_close_ int pidfd = -1;
	int r;

	if (sig <= 0 || sig > SIGRTMAX)
		return nerr_set(err, EINVAL, "lxc: bad signal %d", sig);
	r = open_ours(h, id, &c, NULL, err);
	if (r < 0)
		return r;
	if (!c->is_running(c))
		return lxc_fail(h, c, id, LF_NOT_RUNNING, err);
	/* Through a pidfd: a pid can be reused, a pidfd cannot. */
	pidfd = init_pidfd(c, NULL);
	if (pidfd < 0)
		return lxc_fail(h, c, id, LF_NOT_RUNNING, err);
	rt_lxc_watch_halting(h->watch, id, false);
	if (pidfd_send_signal_(pidfd, sig) < 0) {
		int e = errno;

		/* ESRCH: init died since is_running said otherwise */
		if (e == ESRCH)
			return lxc_fail(h, NULL, id, LF_NOT_RUNNING, err);
		return lxc_failf(h, NULL, id, LF_SIGNAL, err, "signal %d: %s", sig, strerror(e));
	}
	return 0;
}

static int rt_lxc_pause(void *hv, const char *id, struct nerr *err)
{
	struct rt_lxc *h = hv;
	_cleanup_lxc_ struct lxc_container *c = NULL;
	int r = open_ours(h, id, &c, NULL, err);

	if (r < 0)
		return r;
	if (!c->is_running(c))
		return lxc_fail(h, c, id, LF_NOT_RUNNING, err);
	if (state_of(c, NULL) == RT_STATE_PAUSED)
		return 0;
	r = v1_freezer(h, c, true, 10000);
	if (r == -ETIMEDOUT)
		return nerr_set(err, EBUSY, "lxc %s: not frozen after 10 s (a task would not "
			       "stop); left running", id);
	if (r < 0 || !c->freeze(c))
		return lxc_fail(h, c, id, c->is_running(c) ? LF_FREEZE : LF_NOT_RUNNING, err);
	rt_lxc_watch_post(h->watch, RT_EV_PAUSE, id, 0);
	return 0;
}

static int rt_lxc_resume(void *hv, const char *id, struct nerr *err)
{
	struct rt_lxc *h = hv;
	_cleanup_lxc_ struct lxc_container *c = NULL;
	int r = open_ours(h, id, &c, NULL, err);

	if (r < 0)
		return r;
	if (!c->is_running(c))
		return lxc_fail(h, c, id, LF_NOT_RUNNING, err);
	if (state_of(c, NULL) != RT_STATE_PAUSED)
		return 0;
	/*
	 * A container killed while frozen dies as soon as it thaws, and its
	 * monitor removes the cgroup liblxc is still watching for THAWED: the
	 * unfreeze "fails" on a container that is no longer running. That is
	 * the EBUSY of a resume of a stopped container, not an I/O error.
	 */
	(void)v1_freezer(h, c, false, 10000);
	if (!c->unfreeze(c))
		return lxc_fail(h, c, id, c->is_running(c) ? LF_UNFREEZE : LF_NOT_RUNNING, err);
	rt_lxc_watch_post(h->watch, RT_EV_UNPAUSE, id, 0);
	return 0;
}

static int rt_lxc_update(void *hv, const char *id, const struct rt_limits *lim, struct nerr *err)
{
	struct rt_lxc *h = hv;
	_cleanup_lxc_ struct lxc_container *c = NULL;
	struct rt_lxc_item items[RT_LXC_LIMIT_ITEMS_MAX], cfg[RT_LXC_LIMIT_ITEMS_MAX];
	bool done[RT_LXC_LIMIT_ITEMS_MAX] = { false };
	int n, r;

	n = rt_lxc_cg_items(&h->cg, lim, false, items, ARRAY_SIZE(items), err);
	if (n < 0)
		return n;
	(void)rt_lxc_cg_items(&h->cg, lim, true, cfg, ARRAY_SIZE(cfg), NULL);
	r = open_ours(h, id, &c, NULL, err);
	if (r < 0)
		return r;
	if (c->is_running(c)) {
		/* v1 wants memory.limit <= memsw.limit at every step, so
		 * the order depends on the direction: retry what failed
		 * once the rest went in. */
		for (int pass = 0; pass < 2; pass++)
			for (int i = 0; i < n; i++)
				if (!done[i])
					done[i] = c->set_cgroup_item(c, items[i].key, items[i].val);
		for (int i = 0; i < n; i++)
			if (!done[i])
				return lxc_failf(h, c, id, LF_CGROUP, err, "%s = %s", items[i].key,
						 items[i].val);
	}
	/* Keep the limits for the next start too. */
	for (int i = 0; i < n; i++) {
		c->clear_config_item(c, cfg[i].key);
		if (!c->set_config_item(c, cfg[i].key, cfg[i].val))
			return lxc_failf(h, c, id, LF_CONFIG, err, "%s = %s", cfg[i].key, cfg[i].val);
	}
	if (!c->save_config(c, NULL))
		return lxc_failf(h, c, id, LF_CONFIG, err, "cannot save the config");
	return 0;
}

/* ---- exec --------------------------------------------------------------- */

static int rt_lxc_exec(void *hv, const char *id, char *const argv[], struct sbuf *out,
		       int *ret_exit_code, struct nerr *err)
{
	struct rt_lxc *h = hv;
	_cleanup_lxc_ struct lxc_container *c = NULL;
	_cleanup_close_ int rd = -1, wr = -1, null = -1;
	int fds[2], status, r;
	pid_t pid = -1;
	size_t base, total = 0;
	bool over = false;
	char *env[RT_LXC_EXEC_ENV_MAX + 3];
	char envbuf[16384];
	size_t nenv = 0;
	lxc_attach_options_t opts = LXC_ATTACH_OPTIONS_DEFAULT;
	lxc_attach_command_t cmd;

	if (!argv || !argv[0] || !argv[0][0])
		return nerr_set(err, EINVAL, "lxc: exec needs a command");
	r = open_ours(h, id, &c, NULL, err);
	if (r < 0)
		return r;
	if (!c->is_running(c))
		return lxc_fail(h, c, id, LF_NOT_RUNNING, err);
	if (state_of(c, NULL) == RT_STATE_PAUSED)
		return lxc_fail(h, c, id, LF_PAUSED, err);
	/* CLOEXEC: attach dup2()s them onto 0-2 in its child, and no other
	 * thread's fork may keep the write end open. */
	if (pipe2(fds, O_CLOEXEC) < 0)
		return nerr_set(err, errno, "lxc: pipe: %s", strerror(errno));
	rd = fds[0];
	wr = fds[1];
	null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null < 0)
		return nerr_set(err, errno, "lxc: /dev/null: %s", strerror(errno));
	/* A clean environment: PATH, TERM and the container's own
	 * (lxc.environment, as its init got), never the daemon's. */
	env[nenv++] = (char *)ATTACH_PATH;
	env[nenv++] = (char *)"TERM=dumb";
	if (c->get_config_item(c, "lxc.environment", envbuf, sizeof(envbuf)) > 0) {
		char *save = NULL;

		for (char *p = strtok_r(envbuf, "\n", &save); p && nenv < RT_LXC_EXEC_ENV_MAX + 2;
		     p = strtok_r(NULL, "\n", &save))
			if (strchr(p, '='))
				env[nenv++] = p;
	}
	env[nenv] = NULL;
	opts.env_policy = LXC_ATTACH_CLEAR_ENV;
	opts.extra_env_vars = env;
	opts.stdin_fd = null;
	opts.stdout_fd = wr;
	opts.stderr_fd = wr;
	cmd.program = argv[0];
	cmd.argv = (char **)argv;
	/* attach() rather than attach_run_wait(): the output must be drained
	 * while the command runs, or it blocks on a full pipe. */
	if (c->attach(c, lxc_attach_run_command, &cmd, &opts, &pid) < 0 || pid <= 0)
		return lxc_fail(h, c, id, LF_ATTACH, err);
	close(wr);
	wr = -1;
	base = out->len;
	for (;;) {
		char buf[16384];
		ssize_t n = read(rd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		total += (size_t)n;
		if (over || total > RT_LXC_EXEC_CAP || sbuf_add(out, buf, (size_t)n) < 0)
			over = true;	/* keep draining so the command can finish */
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return nerr_set(err, errno, "lxc %s: waitpid: %s", id, strerror(errno));
	}
	if (over) {
		out->len = base;
		if (out->buf)
			out->buf[base] = '\0';
		return nerr_set(err, E2BIG, "lxc %s: exec output exceeds %u bytes", id, RT_LXC_EXEC_CAP);
	}
	*ret_exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	return 0;
}

/* ---- inspect / stats / logs -------------------------------------------- */

static int inspect_c(struct rt_lxc *h, struct lxc_container *c, const char *id,
		     struct rt_lxc_meta *m, struct rt_status *ret)
{
	struct rt_status s = { 0 };

	s.state = state_of(c, m);
	if (s.state == RT_STATE_RUNNING || s.state == RT_STATE_PAUSED) {
		s.pid = c->init_pid(c);
		/* Really running: liblxc's state comes from the monitor;
		 * trust it only with a live init behind it. */
		if (s.pid <= 0 || kill(s.pid, 0) < 0)
			s.state = RT_STATE_EXITED, s.pid = 0;
	}
	if (s.state == RT_STATE_EXITED && rt_lxc_watch_has(h->watch, id)) {
		/* Died a moment ago: let the watcher write the record. */
		if (rt_lxc_watch_wait(h->watch, id, 2000) == 0)
			(void)rt_lxc_meta_read(h, id, m);
	}
	s.started_at = m->started_at;
	if (s.state == RT_STATE_EXITED) {
		s.exit_code = m->exit_code;
		s.oom_killed = m->oom_killed;
		s.finished_at = m->finished_at;
	}
	*ret = s;
	return 0;
}

static int rt_lxc_inspect(void *hv, const char *id, struct rt_status *ret, struct nerr *err)
{
	struct rt_lxc *h = hv;
	_cleanup_lxc_ struct lxc_container *c = NULL;
	struct rt_lxc_meta m;
	int r = open_ours(h, id, &c, &m, err);

	if (r < 0)
		return r;
	r = inspect_c(h, c, id, &m, ret);
	if (r == 0 && (ret->state == RT_STATE_RUNNING || ret->state == RT_STATE_PAUSED) &&
	    !rt_lxc_watch_has(h->watch, id)) {
		/* started outside nodefs (lxc-start): watch it from now on,
		 * as recovery does, so its exit is not missed too, and record
		 * the run (when seen: lxc keeps no start time) so that it
		 * ends EXITED, not CREATED */
		pid_t pid = 0;
		int fd = init_pidfd(c, &pid);

		if (fd >= 0) {
			if (!m.started_at || m.finished_at) {
				(void)rt_lxc_meta_started(h, id, time(NULL));
				ret->started_at = time(NULL);
			}
			(void)rt_lxc_watch_add(h->watch, id, fd, pid, open_gate(h, id));
		}
	}
	return r;
}

/*
 * stats and logs are read on FUSE threads (backend/container.c serves the
 * files from the reading thread), so neither makes a liblxc call:
 * lxc_container_new takes the container's disk lock (F_OFD_SETLKW) to load
 * its config, and is_running/init_pid ask lxc's monitor over its socket,
 * either of which waits out a destroy or a save_config on a worker. stats
 * reads the cgroup directories the exit watcher found when it began to
 * watch the running container; logs reads the console log, whose path
 * create put in the config, after the owner mark's check.
 */
static int rt_lxc_stats(void *hv, const char *id, struct rt_stats *ret, struct nerr *err)
{
	struct rt_lxc *h = hv;
	int r;

	if (!name_valid(id))
		return nerr_set(err, ENOENT, "lxc: no such container '%.64s'", id ? id : "");
	r = rt_lxc_watch_stats(h->watch, id, ret);
	if (r == -ENOENT) {
		/* Not running (only a running container is watched): zeros,
		 * for one of ours. */
		r = check_ours(h, id, NULL, err);
		if (r < 0)
			return r;
		*ret = (struct rt_stats){ 0 };
		return 0;
	}
	if (r == -ESRCH) {
		/* Went down while we read: its cgroup is gone. */
		*ret = (struct rt_stats){ 0 };
		return 0;
	}
	if (r < 0)
		return nerr_set(err, -r, "lxc %s: reading cgroup files: %s", id, strerror(-r));
	return 0;
}

/* Append file[from..] to out. */
static int append_file(int fd, off_t from, struct sbuf *out)
{
	if (lseek(fd, from, SEEK_SET) < 0)
		return -errno;
	for (;;) {
		char buf[16384];
		ssize_t n = read(fd, buf, sizeof(buf));
		int r;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		r = sbuf_add(out, buf, (size_t)n);
		if (r < 0)
			return r;
	}
}

static int rt_lxc_logs(void *hv, const char *id, size_t max, struct sbuf *out, struct nerr *err)
{
	struct rt_lxc *h = hv;
	char path[PATH_MAX], old[PATH_MAX + 8];
	_cleanup_close_ int fd = -1, ofd = -1;
	struct stat st = { 0 }, ost = { 0 };
	size_t want;
	int r = check_ours(h, id, NULL, err);

	if (r < 0)
		return r;
	if (rt_lxc_dir(h, id, RT_LXC_CONSOLE_LOG, path, sizeof(path)) < 0)
		return nerr_set(err, ENAMETOOLONG, "lxc %s: path too long", id);
	snprintf(old, sizeof(old), "%s.1", path);
	/* The rotated part first (older), then the live file. */
	ofd = open(old, O_RDONLY | O_CLOEXEC);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT)
		return nerr_set(err, errno, "lxc %s: %s: %s", id, path, strerror(errno));
	if ((ofd >= 0 && fstat(ofd, &ost) < 0) || (fd >= 0 && fstat(fd, &st) < 0))
		return nerr_set(err, errno, "lxc %s: console log: %s", id, strerror(errno));
	want = max ? max : (size_t)ost.st_size + (size_t)st.st_size;
	r = 0;
	if (ofd >= 0 && want > (size_t)st.st_size) {
		size_t from_old = want - (size_t)st.st_size;

		r = append_file(ofd, from_old < (size_t)ost.st_size ? ost.st_size - (off_t)from_old : 0, out);
	}
	if (r == 0 && fd >= 0)
		r = append_file(fd, want < (size_t)st.st_size ? st.st_size - (off_t)want : 0, out);
	if (r == -E2BIG || r == -ENOMEM)
		return nerr_set(err, -r, "lxc %s: logs exceed the buffer", id);
	if (r < 0)
		return nerr_set(err, -r, "lxc %s: console log: %s", id, strerror(-r));
	return 0;
}

/* ---- destroy / list / watch -------------------------------------------- */

static int rt_lxc_destroy(void *hv, const char *id, struct nerr *err)
{
	struct rt_lxc *h = hv;
	_cleanup_lxc_ struct lxc_container *c = NULL;
	struct nerr e2 = { 0 };
	int r;

	/* a create cut short: whatever it made goes, mark or no mark */
	if (name_valid(id) && creating_marked(h, id))
		return remove_half_made(h, id, err);
	r = open_ours(h, id, &c, NULL, &e2);
	if (r == -ENOENT && e2.msg[0] && strstr(e2.msg, lxc_fail_table[LF_NOT_OURS].what))
		return nerr_set(err, ENOENT, "%s", e2.msg);
	if (r == -ENOENT)
		return 0;	/* already gone */
	if (r < 0)
		return nerr_set(err, -r, "%s", e2.msg);
	if (c->is_running(c)) {
		_cleanup_close_ int pidfd = init_pidfd(c, NULL);

		if (state_of(c, NULL) == RT_STATE_PAUSED)
			(void)c->unfreeze(c);
		if (!c->stop(c) && c->is_running(c))
			return lxc_fail(h, c, id, LF_STOP, err);
		wait_down(h, c, id, pidfd, 5000);
	}
	rt_lxc_watch_del(h->watch, id);
	if (!c->destroy(c))
		return lxc_fail(h, c, id, LF_DESTROY, err);
	/* best effort: a cgroup a stray process still holds stays */
	(void)rt_lxc_cg_remove_leftovers(&h->home, id);
	rt_lxc_watch_post(h->watch, RT_EV_DESTROY, id, 0);
	return 0;
}

static int rt_lxc_list(void *hv, struct rt_listing **ret, size_t *ret_n, struct nerr *err)
{
	struct rt_lxc *h = hv;
	struct rt_listing *l = NULL;
	size_t n = 0, cap = 0;
	DIR *d = opendir(h->lxcpath);
	struct dirent *de;

	if (!d) {
		if (errno == ENOENT) {
			*ret = NULL;
			*ret_n = 0;
			return 0;
		}
		return nerr_set(err, errno, "lxc: %s: %s", h->lxcpath, strerror(errno));
	}
	while ((de = readdir(d))) {
		const char *pfx = RT_LXC_CREATING_PREFIX;
		struct rt_lxc_meta m;
		struct lxc_container *c;
		struct rt_status st = { 0 };
		const char *nm = de->d_name;
		bool half = false;

		if (strncmp(nm, pfx, strlen(pfx)) == 0 && name_valid(nm + strlen(pfx))) {
			/* a create under way, or cut short: listed whatever
			 * liblxc has made of it so far (this instance's only) */
			nm += strlen(pfx);
			if (!creating_ours(h, nm))
				continue;
			half = true;
			snprintf(m.name, sizeof(m.name), "%s", nm);
		} else {
			if (!name_valid(nm) || creating_marked(h, nm) || rt_lxc_meta_read(h, nm, &m) < 0)
				continue;
			/* another instance's, or an older nodefs's: not listed */
			if (h->instance[0] && strcmp(m.instance, h->instance) != 0)
				continue;
			c = lxc_container_new(nm, h->lxcpath);
			if (!c)
				continue;
			if (!c->is_defined(c)) {
				lxc_container_put(c);
				continue;
			}
			inspect_c(h, c, nm, &m, &st);
			lxc_container_put(c);
		}
		if (n == cap) {
			struct rt_listing *nl = realloc(l, (cap ? cap * 2 : 8) * sizeof(*l));

			if (!nl)
				goto oom;
			l = nl;
			cap = cap ? cap * 2 : 8;
		}
		l[n].id = strdup(nm);
		l[n].name = strdup(m.name);
		l[n].status = st;
		l[n].half_made = half;
		n++;
		if (!l[n - 1].id || !l[n - 1].name)
			goto oom;
	}
	closedir(d);
	*ret = l;
	*ret_n = n;
	return 0;
oom:
	closedir(d);
	rt_listing_free(l, n);
	return nerr_set(err, ENOMEM, "lxc: out of memory");
}

static int rt_lxc_watch(void *hv, rt_event_fn fn, void *ctx, struct nerr *err)
{
	struct rt_lxc *h = hv;
	DIR *d;
	struct dirent *de;

	rt_lxc_watch_set_fn(h->watch, fn, ctx);
	/* Recovery: watch our containers that run already. */
	d = opendir(h->lxcpath);
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		struct lxc_container *c;
		pid_t pid = 0;
		int fd;

		if (!name_valid(de->d_name) || creating_marked(h, de->d_name) ||
		    rt_lxc_meta_read(h, de->d_name, NULL) < 0 ||
		    rt_lxc_watch_has(h->watch, de->d_name))
			continue;
		c = lxc_container_new(de->d_name, h->lxcpath);
		if (!c)
			continue;
		if (c->is_defined(c) && c->is_running(c)) {
			fd = init_pidfd(c, &pid);
			/* A start we crashed in left its command at the
			 * gate: let it go now that the pidfd is held. */
			if (fd >= 0)
				(void)rt_lxc_watch_add(h->watch, de->d_name, fd, pid,
						       open_gate(h, de->d_name));
		}
		lxc_container_put(c);
	}
	closedir(d);
	return 0;
}

const struct runtime_ops rt_lxc_ops = {
	.name = "lxc",
	.open = rt_lxc_open,
	.close = rt_lxc_close,
	.health = rt_lxc_health,
	.create = rt_lxc_create,
	.start = rt_lxc_start,
	.stop = rt_lxc_stop,
	.kill = rt_lxc_kill,
	.pause = rt_lxc_pause,
	.resume = rt_lxc_resume,
	.update = rt_lxc_update,
	.exec = rt_lxc_exec,
	.inspect = rt_lxc_inspect,
	.stats = rt_lxc_stats,
	.logs = rt_lxc_logs,
	.destroy = rt_lxc_destroy,
	.list = rt_lxc_list,
	.watch = rt_lxc_watch,
};
