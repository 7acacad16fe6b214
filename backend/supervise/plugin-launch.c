/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plugin-launch: the process plumbing of a plugin nodefs starts: its log
 * FIFO (STATE_DIR/plugins/NAME.log, read-write on both ends so a plugin's
 * writes never meet EPIPE while nodefs is away) drained into the ring that
 * plugins/NAME/log shows, the spawn in its own process group with
 * CSI_ENDPOINT and NODEFS_PLUGIN set, the pidfd its exit comes through,
 * the socket's directory, and whether someone nodefs did not start serves
 * the socket already. Runs on the supervisor thread (pproc_show_log on any
 * thread, under pp->lock). Must not know: the state machine that decides
 * when to start and kill (plugin-proc.c), CSI, the tree.
 */
#include "plugin-proc-internal.h"
#include "plugin-proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend-internal.h"
#include "loop.h"
#include "macro.h"
#include "sbuf.h"

extern char **environ;

/* The log FIFO: made once, opened read-write (never EOF, never a hang-up
 * while no plugin runs) and drained into the ring. */
static void on_log(struct loop *l, int fd, unsigned events, void *ud)
{
	struct pproc *pp = ud;
	char buf[16384];
	ssize_t k;

	for (int i = 0; i < 64; i++) {
		k = read(fd, buf, sizeof(buf));
		if (k <= 0)
			break;
		pthread_mutex_lock(&pp->lock);
		for (ssize_t off = 0; off < k;) {
			size_t n = LOG_RING - pp->ring_head;

			if (n > (size_t)(k - off))
				n = (size_t)(k - off);
			memcpy(pp->ring + pp->ring_head, buf + off, n);
			pp->ring_head += n;
			off += (ssize_t)n;
			if (pp->ring_head == LOG_RING) {
				pp->ring_head = 0;
				pp->ring_full = true;
			}
		}
		pthread_mutex_unlock(&pp->lock);
	}
}

int pp_open_fifo(struct pproc *pp, struct nerr *err)
{
	struct stat st;
	int fd;

	if (pp->logfd >= 0)
		return 0;
	if (lstat(pp->fifo, &st) == 0 && !S_ISFIFO(st.st_mode))
		unlink(pp->fifo);
	if (mkfifo(pp->fifo, 0600) < 0 && errno != EEXIST)
		return nerr_set(err, errno, "cannot make %s: %s", pp->fifo, strerror(errno));
	fd = open(pp->fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return nerr_set(err, errno, "cannot open %s: %s", pp->fifo, strerror(errno));
	(void)fcntl(fd, F_SETPIPE_SZ, FIFO_SIZE);	/* best effort */
	if (loop_add_fd(pp->sup->loop, fd, LOOP_READ, on_log, pp) < 0) {
		close(fd);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	pp->logfd = fd;
	return 0;
}

void pp_close_fifo(struct pproc *pp)
{
	if (pp->logfd < 0)
		return;
	on_log(pp->sup->loop, pp->logfd, LOOP_READ, pp);
	loop_del_fd(pp->sup->loop, pp->logfd);
	close(pp->logfd);
	pp->logfd = -1;
}


int pp_watch_pid(struct pproc *pp, pid_t pid, struct nerr *err)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (fd < 0)
		return nerr_set(err, errno, "pidfd_open %d: %s", (int)pid, strerror(errno));
	if (loop_add_fd(pp->sup->loop, fd, LOOP_READ, pp_on_exit_fd, pp) < 0) {
		close(fd);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	pp->pidfd = fd;
	return 0;
}

/* The environment of the plugin: ours, with CSI_ENDPOINT set. */
static char **plugin_env(struct pproc *pp)
{
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 3, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "CSI_ENDPOINT=", 13) != 0 &&
		    strncmp(environ[i], "NODEFS_PLUGIN=", 14) != 0)
			env[k++] = environ[i];
	if (asprintf(&env[k], "CSI_ENDPOINT=%s", pp->endpoint) < 0) {
		free(env);
		return NULL;
	}
	if (asprintf(&env[k + 1], "NODEFS_PLUGIN=%s", pp->name) < 0) {
		free(env[k]);
		free(env);
		return NULL;
	}
	return env;
}

bool pp_systemd_booted(void)
{
	const char *dir = "/run/systemd/system";
	struct stat st;

	return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

/*
 * A plugin with keep_running = yes must outlive the daemon's stop and its
 * crash. Under systemd every process the daemon starts is in the unit's
 * control group, which systemd kills when the unit stops (the unit's
 * KillMode=mixed: SIGTERM to the daemon, then SIGKILL to what is left of
 * the group; a crash or a watchdog kill likewise). A kept plugin is
 * therefore started in a transient scope unit of its own,
 * nodefs-plugin-NAME.scope, by systemd-run --scope, which asks systemd
 * (StartTransientUnit) to move it there and then execs the command in
 * place: the pid is the plugin's, nodefs's child, in the process group the
 * spawn made, as without systemd. --collect: the scope goes away with the
 * plugin's last process, so the next start may use the name again.
 */
int pp_scope_argv(const char *name, char *const *argv, bool keep, bool systemd,
		  char ***ret)
{
	static const char *const pre[] = { "systemd-run", "--scope", NULL /* --unit= */,
					   "--collect", "--quiet", "--" };
	bool scope = keep && systemd;
	size_t n = 0, npre = scope ? ARRAY_SIZE(pre) : 0, unit_len;
	char **v, *unit;

	while (argv[n])
		n++;
	unit_len = strlen("--unit=nodefs-plugin-.scope") + strlen(name) + 1;
	v = malloc((npre + n + 1) * sizeof(*v) + (scope ? unit_len : 0));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < npre; i++)
		v[i] = (char *)pre[i];
	if (scope) {
		unit = (char *)(v + npre + n + 1);
		snprintf(unit, unit_len, "--unit=nodefs-plugin-%s.scope", name);
		v[2] = unit;
	}
	for (size_t i = 0; i <= n; i++)
		v[npre + i] = argv[i];
	*ret = v;
	return 0;
}

int pp_spawn(struct pproc *pp, pid_t *ret_pid, struct nerr *err)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, def;
	char **env, **argv;
	pid_t pid;
	int r;

	if (pp_scope_argv(pp->name, pp->argv, pp->keep_running, pp_systemd_booted(), &argv) < 0)
		return nerr_set(err, ENOMEM, "out of memory");
	env = plugin_env(pp);
	if (!env) {
		free(argv);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	sigemptyset(&none);
	sigfillset(&def);
	sigdelset(&def, SIGKILL);
	sigdelset(&def, SIGSTOP);
	posix_spawnattr_init(&at);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
				 POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setpgroup(&at, 0);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &def);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	/* read-write: the plugin is a reader of its own FIFO, so its writes
	 * never meet EPIPE while nodefs is away (they wait in the pipe) */
	posix_spawn_file_actions_addopen(&fa, 1, pp->fifo, O_RDWR, 0);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	r = posix_spawnp(&pid, argv[0], &fa, &at, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	for (size_t i = 0; env[i]; i++)
		if (strncmp(env[i], "CSI_ENDPOINT=", 13) == 0 || strncmp(env[i], "NODEFS_PLUGIN=", 14) == 0)
			free(env[i]);
	free(env);
	if (r != 0) {
		nerr_set(err, r, "cannot execute '%s': %s", argv[0], strerror(r));
		free(argv);
		return -r;
	}
	free(argv);
	*ret_pid = pid;
	return 0;
}

/* The socket's directory: made (0755, parents too) when missing, so a
 * plugin can bind its socket there. */
int pp_make_sock_dir(struct pproc *pp, struct nerr *err)
{
	char dir[4096];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", pp->sock);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	for (char *p = dir + 1;; p++) {
		if (*p && *p != '/')
			continue;
		char c = *p;

		*p = '\0';
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			return nerr_set(err, errno, "cannot make %s for the socket: %s", dir,
					strerror(errno));
		*p = c;
		if (!c)
			break;
	}
	return 0;
}

/* Is someone serving the socket already? 0: no (a stale socket is
 * removed, so the new process binds anew and its socket appearing is the
 * sign it listens); -EADDRINUSE with the server's pid in *ret_pid (0 when
 * unknown): never start a second copy. */
int pp_sock_free(struct pproc *pp, pid_t *ret_pid)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ucred cred = { 0 };
	socklen_t len = sizeof(cred);
	struct stat st;
	int fd, r;

	*ret_pid = 0;
	if (lstat(pp->sock, &st) < 0 || !S_ISSOCK(st.st_mode))
		return 0;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", pp->sock);
	r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (r == 0 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
		*ret_pid = cred.pid;
	close(fd);
	if (r == 0)
		return -EADDRINUSE;
	unlink(pp->sock);
	return 0;
}

void pp_describe_exit(const siginfo_t *si, char *buf, size_t len)
{
	if (si->si_code == CLD_EXITED)
		snprintf(buf, len, "exit status %d", si->si_status);
	else if (si->si_code == CLD_KILLED || si->si_code == CLD_DUMPED)
		snprintf(buf, len, "killed by signal %d (SIG%s)%s", si->si_status,
			 sigabbrev_np(si->si_status) ?: "?", si->si_code == CLD_DUMPED ? ", core dumped" : "");
	else
		snprintf(buf, len, "ended (code %d)", si->si_code);
}

int pproc_show_log(struct pproc *pp, struct sbuf *out)
{
	int r = 0;

	if (pp->runtime)
		return pc_show_log(pp, out);
	pthread_mutex_lock(&pp->lock);
	if (pp->ring_full)
		r = sbuf_add(out, pp->ring + pp->ring_head, LOG_RING - pp->ring_head);
	if (r >= 0)
		r = sbuf_add(out, pp->ring, pp->ring_head);
	pthread_mutex_unlock(&pp->lock);
	return r;
}
