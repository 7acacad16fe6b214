/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * nodefs: the daemon's main. Reads the options and the config, builds the
 * backend, mounts the filesystem, daemonizes once the mount is up, and
 * serves until SIGTERM, SIGINT or an unmount. Kept thin, as lxcfs keeps
 * lxcfs.c: everything it wires lives in fs/ and backend/.
 */
#define FUSE_USE_VERSION 312

#include <errno.h>
#include <fuse_lowlevel.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <stdatomic.h>

#include "backend.h"
#include "config.h"
#include "fs.h"
#include "fusectl.h"
#include "mntprobe.h"
#include "log.h"
#include "nerr.h"
#include "nodefs-config.h"
#include "notify.h"
#include "runtime.h"

#define DEFAULT_CONFIG "/etc/nodefs/nodefs.conf"

/*
 * glibc gives threads up to 8 malloc arenas per core; with the worker pool,
 * FUSE's threads and the runtimes' threads that is a dozen arenas each
 * keeping its own freed pages, and the daemon's RSS wanders by tens of MiB
 * after a burst of work. The daemon waits on sockets, not on malloc: one
 * arena keeps it flat (with two, 10,000 volumes cost 5.7 KB each, half of
 * it in the second arena's pages). MALLOC_ARENA_MAX in the environment still wins.
 */
#define ARENA_MAX 1

/*
 * glibc also keeps a cache per thread (tcache: up to 7 freed blocks of
 * each size up to 1 KiB, for each of the daemon's dozen threads), which
 * no trim reaches: after destroying 10,000 volumes, 957 such blocks held
 * 1.1 MB of heap pages that held nothing else (bench/store memory; the
 * daemon's RSS stayed 1.7 to 2.9 MB above idle, 0.7 MB without them).
 * Reads and commands cost the same without them (one arena, and FUSE
 * serves a request at a time per thread), so they are turned off. That
 * is a tunable, read by the dynamic loader at exec only: main sets it and
 * execs itself once, then removes it, so the plugins nodefs starts do not
 * inherit it. A GLIBC_TUNABLES in the environment wins.
 */
#define TUNABLES "glibc.malloc.tcache_count=0"
#define TUNED_MARK "NODEFS_MALLOC_TUNED"

/*
 * A stop does not wait for the queues: actions not started yet stay
 * PENDING for the next start. Running ones get this long to finish and
 * answer their writers; then the mount goes, their writers get ESHUTDOWN,
 * their CSI calls in flight are cancelled (backend_free), and the daemon
 * exits once they have returned.
 */
#define STOP_GRACE_MS 10000

static unsigned stop_grace_ms(void)
{
#if NODEFS_TEST_HOOKS
	/* test builds: NODEFS_TEST_STOP_GRACE_MS shortens the grace */
	const char *s = getenv("NODEFS_TEST_STOP_GRACE_MS");

	if (s && *s)
		return (unsigned)atoi(s);
#endif
	return STOP_GRACE_MS;
}

/* Called first in main, with main's argv (before getopt permutes it):
 * returns only when the tunables are set, or cannot be. */
static void malloc_setup(char **argv)
{
	const char *mark = getenv(TUNED_MARK);
	char comm[16] = "", exe[PATH_MAX];
	ssize_t n;

	if (mark) {
		/* the second exec: the loader has read them. The mark carries
		 * the first exec's name (comm), which an exec through
		 * /proc/self/exe would have turned into "exe". */
		if (*mark && strcmp(mark, "1") != 0)
			(void)prctl(PR_SET_NAME, mark, 0, 0, 0);
		unsetenv(TUNED_MARK);
		unsetenv("GLIBC_TUNABLES");
	} else if (!getenv("GLIBC_TUNABLES") && setenv("GLIBC_TUNABLES", TUNABLES, 1) == 0 &&
		   prctl(PR_GET_NAME, comm, 0, 0, 0) == 0 &&
		   setenv(TUNED_MARK, comm[0] ? comm : "1", 1) == 0) {
		/* the resolved path keeps the name in ps, pgrep and systemd's
		 * status; /proc/self/exe (the binary was replaced) as the
		 * fallback, the mark then restores the name */
		n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n > 0) {
			exe[n] = '\0';
			execv(exe, argv);
		}
		execv("/proc/self/exe", argv);
		/* no /proc: go on with the caches */
		unsetenv(TUNED_MARK);
		unsetenv("GLIBC_TUNABLES");
	}
	if (!getenv("MALLOC_ARENA_MAX"))
		mallopt(M_ARENA_MAX, ARENA_MAX);
}

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: nodefs [OPTIONS] MOUNTPOINT\n"
		"Present a node's CSI volumes, volume operations and containers as files.\n"
		"\n"
		"  -f                 stay in the foreground (log to stderr)\n"
		"  -d                 debug: foreground, verbose logs and FUSE tracing\n"
		"  -o OPTS            extra FUSE mount options (comma separated)\n"
		"  --config FILE      config file (default " DEFAULT_CONFIG "; a missing\n"
		"                     default file means built-in defaults)\n"
		"  --state-dir DIR    where checkpoints live (default /var/lib/nodefs)\n"
		"  --abort-stale DIR  abort the FUSE connection a killed nodefs of state dir\n"
		"                     DIR left stuck, and exit (nodefs(8) CRASHES)\n"
		"  -h, --help         show this help\n"
		"  -V, --version      show the version\n"
		"\n"
		"Files:\n"
		"  " DEFAULT_CONFIG "   the config (nodefs(5) CONFIGURATION)\n"
		"  /var/lib/nodefs           the state dir: checkpoints, STATE_DIR/lock\n"
		"  /run/nodefs               the usual mountpoint (nodefs(5) THE TREE)\n"
		"\n"
		"Config keys (nodefs(5)):\n"
		"  [nodefs]          state_dir allowed_targets ctl_group read_group redact csi_timeout\n"
		"                    retry_backoff retry_max operations_keep reconcile_interval\n"
		"                    name_prefix uncertain_timeout log_level reader_memory\n"
		"                    events_keep cache_max_age sandbox_dir keep_sandboxes\n"
		"                    fetch_cache fetch_cache_size\n"
		"  [plugin NAME]     endpoint default command keep_running runtime image mounts\n"
		"                    node privileged secrets\n"
		"  [profile NAME]    plugin access_mode fs_type mount_flags parameters mutable_parameters size secrets\n"
		"  [runtime docker]  endpoint stop_timeout network\n"
		"  [runtime lxc]     lxcpath template_dir network_type apparmor_profile\n"
		"                    stop_timeout console_size log_level\n"
		"  [cluster]         etcd node prefix lease_ttl detail_idle accept_remote ca cert key\n"
		"\n"
		"Typical mountpoint: /run/nodefs. SIGTERM or SIGINT unmounts cleanly;\n"
		"SIGHUP re-reads the config. Under systemd (Type=notify) it reports\n"
		"readiness, status and a watchdog. See nodefs(8) and nodefs(5).\n");
}

struct options {
	bool foreground;
	bool debug;
	const char *config;
	const char *state_dir;
	const char *mountpoint;
	const char *abort_stale;	/* --abort-stale: a state dir */
	char fuse_opts[4096];
};

static int parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "state-dir", required_argument, NULL, 's' },
		{ "abort-stale", required_argument, NULL, 'A' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	int c;

	while ((c = getopt_long(argc, argv, "fdo:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			o->foreground = true;
			break;
		case 'd':
			o->debug = true;
			o->foreground = true;
			break;
		case 'o': {
			size_t l = strlen(o->fuse_opts);
			if (snprintf(o->fuse_opts + l, sizeof(o->fuse_opts) - l, "%s%s",
				     l ? "," : "", optarg) >= (int)(sizeof(o->fuse_opts) - l)) {
				fprintf(stderr, "nodefs: -o options too long\n");
				return 2;
			}
			break;
		}
		case 'c':
			o->config = optarg;
			break;
		case 's':
			o->state_dir = optarg;
			break;
		case 'A':
			o->abort_stale = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("nodefs %s\n", NODEFS_VERSION);
			if (NODEFS_TEST_HOOKS)
				printf("build: test hooks (crash points; never for production)\n");
			exit(0);
		default:
			usage(stderr);
			return 2;
		}
	}
	if (o->abort_stale && optind == argc)
		return 0;	/* no mountpoint: it only cleans up */
	if (optind != argc - 1) {
		fprintf(stderr, "nodefs: %s\n", optind >= argc ? "missing MOUNTPOINT" : "too many arguments");
		usage(stderr);
		return 2;
	}
	o->mountpoint = argv[optind];
	return 0;
}

/* Recovery could not read the checkpoints: nothing may act on a tree that
 * is not whole, so stop as SIGTERM would, and exit 1. */
static void recovery_failed(void *ctx)
{
	(void)ctx;
	log_err("stopping: recovery failed");
	kill(getpid(), SIGTERM);
}

/* ---- systemd: readiness, status, watchdog, reload (common/notify) ---- */

#define FUSE_SUPER_MAGIC 0x65735546

struct daemon {
	struct backend *b;
	const char *mountpoint;
	const struct options *o;
	enum log_level base_level;	/* without log_level in the config */
	struct mntprobe probe;		/* daemon_alive's, on the notify thread */
};

static enum notify_phase daemon_phase(void *ctx, char *status, size_t len, uint64_t *ret_progress)
{
	struct daemon *d = ctx;
	struct backend_progress p;

	backend_progress(d->b, &p);
	*ret_progress = p.records_read;
	if (p.stopping) {
		snprintf(status, len, "stopping");
		return NOTIFY_STOPPING;
	}
	if (p.recovering) {
		snprintf(status, len, "recovering %llu of %llu records", p.records_read, p.records);
		return NOTIFY_STARTING;
	}
	snprintf(status, len, "ready with %zu volumes and %zu containers",
		 backend_count(d->b, "volumes"), backend_count(d->b, "containers"));
	return NOTIFY_READY;
}

/* The FUSE loop answers (a statfs through the kernel: never cached, and
 * answered by the loop's leader in place; a wedged loop leaves it
 * unanswered, and then no WATCHDOG=1 goes out) and the worker pool takes
 * its work. No thread of nodefs may make a request on its own mount: one
 * killed with the request read and not answered would wait for the answer
 * uninterruptibly, keep /dev/fuse open, and nodefs would never die. The
 * statfs is a child process's (common/mntprobe.h), which holds nothing of
 * nodefs's, waited for up to PROBE_MS; one still waiting is left for the
 * next probe, which answers no meanwhile. */
#define PROBE_MS 5000
static bool daemon_alive(void *ctx)
{
	struct daemon *d = ctx;

	if (!mntprobe_statfs(&d->probe, d->mountpoint, FUSE_SUPER_MAGIC, PROBE_MS))
		return false;
	return backend_moving(d->b);
}

/* The config's log level, unless -d asked for debug. */
static enum log_level level_of(const struct config *c, enum log_level base)
{
	return base == LOG_LVL_DEBUG || c->log_level < 0 ? base : (enum log_level)c->log_level;
}

/* SIGHUP, on the notify thread: read the config again; main applies the
 * log level, the backend the profiles and tells what needs a restart. */
static void daemon_reload(void *ctx)
{
	struct daemon *d = ctx;
	struct config *nc = NULL;
	struct nerr err = { 0 };
	enum log_level lvl;

	log_info("reload: reading %s", d->o->config ? d->o->config : DEFAULT_CONFIG);
	if (config_load(d->o->config ? d->o->config : DEFAULT_CONFIG, d->o->config == NULL, &nc,
			&err) < 0) {
		log_err("reload: %s: nothing changed", err.msg);
		return;
	}
	if (d->o->state_dir) {
		/* --state-dir wins over the file, as at start */
		char *sd = strdup(d->o->state_dir);

		if (!sd) {
			config_free(nc);
			log_err("reload: out of memory: nothing changed");
			return;
		}
		free(nc->state_dir);
		nc->state_dir = sd;
	}
	lvl = level_of(nc, d->base_level);
	if (lvl != log_get_level()) {
		log_info("reload: log_level %s -> %s", log_level_to_string(log_get_level()),
			 log_level_to_string(lvl));
		log_set_level(lvl);
	}
	if (backend_reload(d->b, nc, &err) < 0)
		log_err("reload: %s", err.msg);
}

/* SIGHUP reloads: the handler only wakes the notify thread. */
static _Atomic(struct notify *) reload_target;

static void on_sighup(int sig)
{
	(void)sig;
	notify_reload(atomic_load(&reload_target));
}

/* Is mnt the mountpoint of a nodefs FUSE mount (per /proc/self/mounts)? */
static bool nodefs_mounted_at(const char *mnt)
{
	char real[4096], line[8192];
	bool found = false;
	FILE *fp;

	if (!realpath(mnt, real))
		snprintf(real, sizeof(real), "%s", mnt);
	fp = fopen("/proc/self/mounts", "re");
	if (!fp)
		return false;
	while (fgets(line, sizeof(line), fp)) {
		char dev[256], dir[4096], type[64];

		if (sscanf(line, "%255s %4095s %63s", dev, dir, type) == 3 &&
		    strcmp(dir, real) == 0 && strcmp(type, "fuse.nodefs") == 0)
			found = true;
	}
	fclose(fp);
	return found;
}

/* A mount left by a crashed daemon answers ENOTCONN: detach it so the new
 * daemon can mount in its place. (stat of the mountpoint may be served from
 * the kernel's cache for a moment after the crash; statfs always asks the
 * daemon.) A live nodefs on mnt is left alone. Make a missing mountpoint. */
static int prepare_mountpoint(const char *mnt, struct nerr *err)
{
	struct statfs sfs;
	struct stat st;
	bool stale;

	if (stat(mnt, &st) == 0) {
		if (!S_ISDIR(st.st_mode))
			return nerr_set(err, ENOTDIR, "%s is not a directory", mnt);
		if (!nodefs_mounted_at(mnt))
			return 0;
		stale = statfs(mnt, &sfs) < 0 && errno == ENOTCONN;
		if (!stale)
			return nerr_set(err, EBUSY, "%s: a nodefs is already serving it", mnt);
	} else if (errno == ENOTCONN) {
		stale = true;
	} else if (errno == ENOENT && mkdir(mnt, 0755) == 0) {
		return 0;
	} else {
		return nerr_set(err, errno, "mountpoint %s: %s", mnt, strerror(errno));
	}
	log_warn("%s: stale mount (Transport endpoint is not connected): detaching it", mnt);
	if (umount2(mnt, MNT_DETACH) < 0)
		return nerr_set(err, errno, "cannot detach the stale mount on %s: %s",
				mnt, strerror(errno));
	return 0;
}

int main(int argc, char **argv)
{
	struct options o = { 0 };
	struct nerr err = { 0 };
	struct config *cfg = NULL;
	struct backend *b = NULL;
	struct fs *f = NULL;
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fs_opts fo = { .entry_timeout = 60.0, .attr_timeout = 60.0 };	/* every change is invalidated (fs/cache.h) */
	struct daemon d = { .probe = MNTPROBE_INIT };
	struct notify_hooks nh = { .phase = daemon_phase, .alive = daemon_alive,
				   .reload = daemon_reload, .ctx = &d };
	struct notify *sd = NULL;
	struct sigaction hup = { .sa_handler = on_sighup };
	char mopts[4200], state_dir[4096];
	sigset_t block, oldmask;
	int r, status = 1;

	/* nodefs execs itself for engine calls that must not fork from a
	 * process of many threads (runtime.h) */
	r = runtime_helper_main(argc, argv);
	if (r >= 0)
		return r;
	runtime_set_helper("/proc/self/exe");
	malloc_setup(argv);
	r = parse_args(argc, argv, &o);
	if (r)
		return r;
	log_setup(o.debug ? LOG_LVL_DEBUG : LOG_LVL_INFO, false);
	if (o.abort_stale) {	/* ExecStopPost: finding nothing is a success */
		r = fusectl_abort_stale(o.abort_stale, 5000, &err);
		if (r < 0)
			fprintf(stderr, "nodefs: %s\n", err.msg);
		return r < 0 ? 1 : 0;
	}

	r = config_load(o.config ? o.config : DEFAULT_CONFIG, o.config == NULL, &cfg, &err);
	if (r < 0) {
		fprintf(stderr, "nodefs: %s\n", err.msg);
		return 1;
	}
	if (o.state_dir) {
		char *sd = strdup(o.state_dir);
		if (!sd) {
			config_free(cfg);
			return 1;
		}
		free(cfg->state_dir);
		cfg->state_dir = sd;
	}
	d.base_level = o.debug ? LOG_LVL_DEBUG : LOG_LVL_INFO;
	d.o = &o;
	log_set_level(level_of(cfg, d.base_level));
	fo.has_ctl_gid = cfg->has_ctl_gid;
	fo.ctl_gid = cfg->ctl_gid;
	fo.has_read_gid = cfg->has_read_gid;
	fo.read_gid = cfg->read_gid;
	fo.reader_memory = cfg->reader_memory;
	fo.cache_max_age_ms = cfg->cache_max_age_ms;
	fo.redact = (const char *const *)cfg->redact_keys;

	/* a killed nodefs stuck in the kernel holds the lock: end it first */
	snprintf(state_dir, sizeof(state_dir), "%s", cfg->state_dir);
	if (fusectl_abort_stale(state_dir, 5000, &err) < 0)
		log_warn("%s", err.msg);
	r = backend_new(cfg, &b, &err);	/* takes cfg */
	if (r < 0) {
		fprintf(stderr, "nodefs: %s\n", err.msg);
		return 1;
	}
	r = prepare_mountpoint(o.mountpoint, &err);
	if (r < 0) {
		fprintf(stderr, "nodefs: %s\n", err.msg);
		goto out;
	}

	/* allow_other lets every user in; fs enforces the modes itself (ctl
	 * files root's or ctl_group's, sensitive files root's or read_group's:
	 * fs/access.c), so it sees and counts what it refuses */
	snprintf(mopts, sizeof(mopts), "%sfsname=nodefs,subtype=nodefs%s%s",
		 geteuid() == 0 ? "allow_other," : "", o.fuse_opts[0] ? "," : "", o.fuse_opts);
	if (fuse_opt_add_arg(&args, argv[0]) != 0 ||
	    fuse_opt_add_arg(&args, "-o") != 0 || fuse_opt_add_arg(&args, mopts) != 0 ||
	    (o.debug && fuse_opt_add_arg(&args, "-d") != 0)) {
		fprintf(stderr, "nodefs: out of memory\n");
		goto out;
	}
	r = fs_new(backend_root(b), &fo, &args, &f, &err);
	if (r < 0) {
		fprintf(stderr, "nodefs: %s\n", err.msg);
		goto out;
	}
	backend_set_metrics_hook(b, fs_render_metrics, f);
	/* before the mount: libfuse then leaves SIGHUP to us (it takes only
	 * signals still at their default) */
	sigemptyset(&hup.sa_mask);
	hup.sa_flags = SA_RESTART;
	sigaction(SIGHUP, &hup, NULL);
	r = fs_mount(f, o.mountpoint, &err);
	if (r < 0) {
		fprintf(stderr, "nodefs: %s\n", err.msg);
		goto out;
	}
	if (!o.foreground) {
		/* the parent returns once the mount is up; threads start after */
		if (fuse_daemonize(0) != 0)
			goto out;
		log_setup(log_get_level(), true);
	}
	if (fusectl_record(state_dir, o.mountpoint, &err) < 0)
		log_warn("%s (a start after a crash cannot end a stuck connection)", err.msg);
	d.b = b;
	d.mountpoint = o.mountpoint;
	r = notify_new(&nh, &sd, &err);
	if (r < 0) {
		log_err("%s", err.msg);
		goto out;
	}
	/* Recovery runs while the mount serves. The backend's threads (and
	 * the ones they start) block the stop signals, so those come to this
	 * thread, which waits in fs_loop. */
	backend_set_failed_hook(b, recovery_failed, NULL);
	sigemptyset(&block);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGQUIT);
	sigaddset(&block, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &block, &oldmask);
	r = backend_start(b, &err);
	if (r >= 0)
		r = notify_start(sd, &err);
	pthread_sigmask(SIG_SETMASK, &oldmask, NULL);
	if (r < 0) {
		log_err("%s", err.msg);
		goto out;
	}
	atomic_store(&reload_target, sd);
	log_info("mounted on %s%s", o.mountpoint,
		 notify_watchdog_usec(sd) ? " (systemd watchdog armed)" : "");
	r = fs_loop(f);
	status = r < 0 || backend_failed(b) ? 1 : 0;
out:
	atomic_store(&reload_target, NULL);
	notify_stopping(sd, b && backend_failed(b) ? "stopping: recovery failed" : "stopping");
	/*
	 * The backend stops first: its workers complete requests into fs
	 * until then. What it still holds after the grace fs answers and
	 * detaches before the session goes (fs_free); backend_free then
	 * cancels and joins what is left.
	 */
	if (b) {
		size_t busy = backend_stop(b, stop_grace_ms());

		if (busy)
			log_warn("%zu workers still busy after %u ms: unmounting; writers still "
				 "waiting get ESHUTDOWN, CSI calls in flight are cancelled, and "
				 "the daemon exits once the workers have returned", busy,
				 stop_grace_ms());
	}
	if (f)
		log_info("unmounting %s", o.mountpoint);
	fs_free(f);
	/* the mount is gone: a watchdog probe of it no longer blocks, and a
	 * repeated SIGTERM must not cut short what is
	 * left (cancelled calls returning, threads joined) */
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	notify_free(sd);
	mntprobe_end(&d.probe);
	backend_free(b);
	fuse_opt_free_args(&args);
	return status;
}
