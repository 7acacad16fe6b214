/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lxc: the LXC runtime driver (struct runtime_ops rt_lxc_ops) over liblxc 5:
 * the ops table, the one liblxc error table and the helpers every piece of
 * the driver shares (names, the owner check, init's pidfd, the state),
 * open, close and health, inspect, stats and logs, destroy, list and watch.
 *
 * Every call makes a fresh lxc_container handle and puts it before
 * returning, so calls on different containers from different worker threads
 * share nothing but liblxc's own locks. stats and logs, read on FUSE
 * threads, make no liblxc call at all (see rt_lxc_stats). Only containers
 * carrying nodefs's mark (nodefs.json beside the config, see lxc-meta.c)
 * are listed or touched; others get ENOENT.
 *
 * Create, its config and its in-progress mark: lxc-create.c. Start, stop,
 * signals, freeze, limits and exec: lxc-run.c. Exit detection and the real
 * exit code: lxc-watch.c. Cgroup files: lxc-cgroup.c. Knows nothing of
 * backend/ or fs/.
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

/* ---- the one liblxc error table ---------------------------------------- */

/* liblxc answers most calls with a bool; the table says which errno each
 * failure becomes, and the message gets liblxc's own words when it has any
 * (c->error_string, or the last ERROR line of the container's lxc.log).
 * Every failure of a liblxc call, and of the template it runs, goes
 * through it (lxc_fail, lxc_failf); checks of nodefs's own (names, paths,
 * options) say EINVAL or ENOENT directly. */

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

/* The last line with an ERROR (else a WARN) in it of the container's lxc.log, or, for a
 * create, of the log liblxc kept beside the lxcpath while it made the
 * container (its directory does not exist before). */
static void last_log_error(struct rt_lxc *h, const char *name, enum rt_lxc_fail f,
			   char *buf, size_t size)
{
	char path[PATH_MAX], data[8192];
	int fd, n;
	off_t end;

	buf[0] = '\0';
	if (f == LF_CREATE)
		rt_lxc_create_log(h, name, path, sizeof(path));
	else if (rt_lxc_dir(h, name, RT_LXC_LXC_LOG, path, sizeof(path)) < 0)
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

	bool have_error = false;

	/* strtok_r: worker threads run this concurrently. The last ERROR
	 * line, else the last WARN line (a create that fails with no ERROR). */
	for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *e = strstr(line, " ERROR ");
		char *w = e ? NULL : strstr(line, " WARN ");

		if (e || (w && !have_error)) {
			/* "lxc NAME TIME ERROR file - func:line - message" */
			char *msg = strstr(e ? e : w, " - ");

			msg = msg ? strstr(msg + 3, " - ") : NULL;
			snprintf(buf, size, "%s", msg ? msg + 3 : e ? e + 7 : w + 6);
			have_error |= e != NULL;
		}
	}
}

/* "lxc NAME: WHAT[: WHY][: LIBLXC'S WORDS]" with the table's errno. why, our
 * own words on what failed (the item, the signal, the template's last
 * line), is a printf format; NULL for none. */
int rt_lxc_failf(struct rt_lxc *h, struct lxc_container *c, const char *name,
		 enum rt_lxc_fail f, struct nerr *err, const char *why, ...)
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
	else if (f == LF_START || f == LF_STOP || f == LF_ATTACH || f == LF_CGROUP ||
		 f == LF_CREATE)
		last_log_error(h, name, f, detail, sizeof(detail));
	return nerr_set(err, lxc_fail_table[f].err, "lxc %s: %s%s%s%s%s", name,
			lxc_fail_table[f].what, ours[0] ? ": " : "", ours,
			detail[0] ? ": " : "", detail);
}

int rt_lxc_fail(struct rt_lxc *h, struct lxc_container *c, const char *name,
		enum rt_lxc_fail f, struct nerr *err)
{
	return rt_lxc_failf(h, c, name, f, err, NULL);
}

/* ---- small helpers ------------------------------------------------------ */

bool rt_lxc_name_valid(const char *s)
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
int rt_lxc_check_ours(struct rt_lxc *h, const char *id, struct rt_lxc_meta *ret_meta,
		      struct nerr *err)
{
	int r;

	if (!rt_lxc_name_valid(id))
		return nerr_set(err, ENOENT, "lxc: no such container '%.64s'", id ? id : "");
	r = rt_lxc_meta_read(h, id, ret_meta);
	if (r == -ENOENT) {
		char dir[PATH_MAX];
		struct stat st;

		if (rt_lxc_dir(h, id, "config", dir, sizeof(dir)) == 0 && stat(dir, &st) == 0)
			return rt_lxc_fail(h, NULL, id, LF_NOT_OURS, err);
		return rt_lxc_fail(h, NULL, id, LF_NOT_DEFINED, err);
	}
	if (r < 0)
		return nerr_set(err, -r, "lxc %s: cannot read %s: %s", id, RT_LXC_META_FILE,
				strerror(-r));
	return 0;
}

/* Open a handle on one of our containers: ENOENT if missing or not ours. */
int rt_lxc_open_ours(struct rt_lxc *h, const char *id, struct lxc_container **ret,
		     struct rt_lxc_meta *ret_meta, struct nerr *err)
{
	struct lxc_container *c;
	int r;

	r = rt_lxc_check_ours(h, id, ret_meta, err);
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
			return rt_lxc_fail(h, NULL, id, LF_NOT_DEFINED, err);
		c = lxc_container_new(id, h->lxcpath);
		if (!c)
			return rt_lxc_fail(h, NULL, id, LF_NEW, err);
	}
	if (!c->is_defined(c)) {
		lxc_container_put(c);
		return rt_lxc_fail(h, NULL, id, LF_NOT_DEFINED, err);
	}
	*ret = c;
	return 0;
}

static int pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* A pidfd for the container's init: liblxc's own (4.0+), else pidfd_open. */
int rt_lxc_init_pidfd(struct lxc_container *c, pid_t *ret_pid)
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

enum rt_state rt_lxc_state_of(struct lxc_container *c, const struct rt_lxc_meta *m)
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

bool rt_lxc_path_ok(const char *p)
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

			if (!rt_lxc_path_ok(v))
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

/* ---- inspect / stats / logs -------------------------------------------- */

static int inspect_c(struct rt_lxc *h, struct lxc_container *c, const char *id,
		     struct rt_lxc_meta *m, struct rt_status *ret)
{
	struct rt_status s = { 0 };

	s.state = rt_lxc_state_of(c, m);
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
	int r = rt_lxc_open_ours(h, id, &c, &m, err);

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
		int fd = rt_lxc_init_pidfd(c, &pid);

		if (fd >= 0) {
			if (!m.started_at || m.finished_at) {
				(void)rt_lxc_meta_started(h, id, time(NULL));
				ret->started_at = time(NULL);
			}
			(void)rt_lxc_watch_add(h->watch, id, fd, pid, rt_lxc_open_gate(h, id));
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

	if (!rt_lxc_name_valid(id))
		return nerr_set(err, ENOENT, "lxc: no such container '%.64s'", id ? id : "");
	r = rt_lxc_watch_stats(h->watch, id, ret);
	if (r == -ENOENT) {
		/* Not running (only a running container is watched): zeros,
		 * for one of ours. */
		r = rt_lxc_check_ours(h, id, NULL, err);
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
	int r = rt_lxc_check_ours(h, id, NULL, err);

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
	if (rt_lxc_name_valid(id) && rt_lxc_creating_marked(h, id))
		return rt_lxc_remove_half_made(h, id, err);
	r = rt_lxc_open_ours(h, id, &c, NULL, &e2);
	if (r == -ENOENT && e2.msg[0] && strstr(e2.msg, lxc_fail_table[LF_NOT_OURS].what))
		return nerr_set(err, ENOENT, "%s", e2.msg);
	if (r == -ENOENT)
		return 0;	/* already gone */
	if (r < 0)
		return nerr_set(err, -r, "%s", e2.msg);
	if (c->is_running(c)) {
		_cleanup_close_ int pidfd = rt_lxc_init_pidfd(c, NULL);

		if (rt_lxc_state_of(c, NULL) == RT_STATE_PAUSED)
			(void)c->unfreeze(c);
		if (!c->stop(c) && c->is_running(c))
			return rt_lxc_fail(h, c, id, LF_STOP, err);
		rt_lxc_wait_down(h, c, id, pidfd, 5000);
	}
	rt_lxc_watch_del(h->watch, id);
	if (!c->destroy(c))
		return rt_lxc_fail(h, c, id, LF_DESTROY, err);
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

		if (strncmp(nm, pfx, strlen(pfx)) == 0 && rt_lxc_name_valid(nm + strlen(pfx))) {
			/* a create under way, or cut short: listed whatever
			 * liblxc has made of it so far (this instance's only) */
			nm += strlen(pfx);
			if (!rt_lxc_creating_ours(h, nm, m.name, sizeof(m.name)))
				continue;
			half = true;
		} else {
			if (!rt_lxc_name_valid(nm) || rt_lxc_creating_marked(h, nm) || rt_lxc_meta_read(h, nm, &m) < 0)
				continue;
			/* another instance's, or an older nodefs's: not listed */
			if (h->instance[0] && strcmp(m.instance, h->instance) != 0)
				continue;
			/* nodefs's own (a plugin container): not a user's */
			if (m.role[0])
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

		if (!rt_lxc_name_valid(de->d_name) || rt_lxc_creating_marked(h, de->d_name) ||
		    rt_lxc_meta_read(h, de->d_name, NULL) < 0 ||
		    rt_lxc_watch_has(h->watch, de->d_name))
			continue;
		c = lxc_container_new(de->d_name, h->lxcpath);
		if (!c)
			continue;
		if (c->is_defined(c) && c->is_running(c)) {
			fd = rt_lxc_init_pidfd(c, &pid);
			/* A start we crashed in left its command at the
			 * gate: let it go now that the pidfd is held. */
			if (fd >= 0)
				(void)rt_lxc_watch_add(h->watch, de->d_name, fd, pid,
						       rt_lxc_open_gate(h, de->d_name));
		}
		lxc_container_put(c);
	}
	closedir(d);
	return 0;
}

static const char *const home_keys[] = { "lxcpath", NULL };

const struct runtime_ops rt_lxc_ops = {
	.home_keys = home_keys,
	.name = "lxc",
	.engine_names = true,
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
