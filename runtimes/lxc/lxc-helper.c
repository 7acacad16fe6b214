/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lxc-helper: liblxc's start and create in a process of their own. A
 * daemonized start forks lxc's monitor from the calling process and runs
 * library code in it with no exec; a create forks and prepares the
 * template's run (storage, arguments) before its exec. Forked from the many-threaded daemon, that child holds
 * a copy of every lock another thread held at the fork: under ASan the
 * allocator's, which its first malloc then waits on forever, and the
 * start with it (seen: ten LXC runs at once in the sanitizer build). It
 * also inherits what the daemon has open until liblxc closes it, the
 * FUSE connection among them. So the driver execs a helper (nodefs
 * itself, by its argv[0]: runtime_helper_main) with the lxcpath, the name
 * and what else the call needs, and the helper, one thread, makes it.
 *
 * Must not know: backend/, fs/, the config.
 */
#include <errno.h>
#include <fcntl.h>
#include <lxc/lxccontainer.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "lxc-internal.h"
#include "runtime.h"

extern char **environ;

static int start_helper_main(int argc, char **argv)
{
	struct lxc_container *c;
	bool ok;

	if (argc != 3) {
		fprintf(stderr, "%s: usage: %s LXCPATH NAME\n", RT_LXC_START_HELPER,
			RT_LXC_START_HELPER);
		return 2;
	}
	c = lxc_container_new(argv[2], argv[1]);
	if (!c) {
		fprintf(stderr, "%s: %s: cannot open the container\n", RT_LXC_START_HELPER, argv[2]);
		_exit(1);
	}
	c->want_daemonize(c, true);
	c->want_close_all_fds(c, true);
	/* Returns once the container is RUNNING (or failed). */
	ok = c->start(c, 0, NULL);
	if (!ok && c->error_string && c->error_string[0])
		fprintf(stderr, "%s: %s: %s\n", RT_LXC_START_HELPER, argv[2], c->error_string);
	/* _exit: what liblxc keeps is the process's, and a leak check of it
	 * at exit (the sanitizer build) would turn a start into a failure */
	_exit(ok ? 0 : 1);
}

/* nodefs-lxc-create LXCPATH NAME LOGFILE TEMPLATE [ARG...]: LOGFILE ("":
 * none) gets liblxc's own reasons at INFO while the create runs; the config
 * the create saves names it, and the driver takes it out again. */
static int create_helper_main(int argc, char **argv)
{
	struct lxc_container *c;
	bool ok;

	if (argc < 5) {
		fprintf(stderr, "%s: usage: %s LXCPATH NAME LOGFILE TEMPLATE [ARG...]\n",
			RT_LXC_CREATE_HELPER, RT_LXC_CREATE_HELPER);
		return 2;
	}
	c = lxc_container_new(argv[2], argv[1]);
	if (!c) {
		fprintf(stderr, "%s: %s: cannot open the container\n", RT_LXC_CREATE_HELPER, argv[2]);
		_exit(1);
	}
	if (argv[3][0] && (!c->set_config_item(c, "lxc.log.file", argv[3]) ||
			   !c->set_config_item(c, "lxc.log.level", "INFO")))
		fprintf(stderr, "%s: %s: cannot set the log\n", RT_LXC_CREATE_HELPER, argv[2]);
	ok = c->create(c, argv[4], NULL, NULL, LXC_CREATE_QUIET, argv + 5);
	if (!ok && c->error_string && c->error_string[0])
		fprintf(stderr, "%s: %s: %s\n", RT_LXC_CREATE_HELPER, argv[2], c->error_string);
	_exit(ok ? 0 : 1);	/* as the start's: no leak check of liblxc's */
}

int rt_lxc_helper_main(const char *argv0, int argc, char **argv)
{
	if (strcmp(argv0, RT_LXC_START_HELPER) == 0)
		return start_helper_main(argc, argv);
	if (strcmp(argv0, RT_LXC_CREATE_HELPER) == 0)
		return create_helper_main(argc, argv);
	return -1;
}

/* Run argv in the helper (runtime_helper()); 1 it succeeded, 0 it failed,
 * -errno when it could not run. */
static int run_helper(char *const argv[])
{
	const char *path = runtime_helper();
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none;
	pid_t pid;
	int r, status = 0;

	sigemptyset(&none);
	posix_spawnattr_init(&at);
	posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	r = posix_spawn(&pid, path, &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (r != 0)
		return -r;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	/* a helper that ended otherwise than by its own answer (0 or 1) is
	 * named in the log: the caller's error can only say "failed" */
	if (WIFSIGNALED(status))
		log_msg(LOG_LVL_WARN, "lxc: %s %s: killed by signal %d (%s)", argv[0],
			argv[2] ? argv[2] : "", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else if (WIFEXITED(status) && WEXITSTATUS(status) > 1)
		log_msg(LOG_LVL_WARN, "lxc: %s %s: exited with status %d", argv[0],
			argv[2] ? argv[2] : "", WEXITSTATUS(status));
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int rt_lxc_start_in_helper(const struct rt_lxc *h, const char *id)
{
	char *argv[] = { (char *)RT_LXC_START_HELPER, (char *)h->lxcpath, (char *)id, NULL };

	return run_helper(argv);
}

int rt_lxc_create_in_helper(const struct rt_lxc *h, const char *id, const char *logfile,
			    const char *tpath, char *const targv[])
{
	size_t n = 0;

	while (targv && targv[n])
		n++;

	char *argv[n + 6];

	argv[0] = (char *)RT_LXC_CREATE_HELPER;
	argv[1] = (char *)h->lxcpath;
	argv[2] = (char *)id;
	argv[3] = (char *)(logfile ? logfile : "");
	argv[4] = (char *)tpath;
	for (size_t i = 0; i < n; i++)
		argv[5 + i] = targv[i];
	argv[5 + n] = NULL;
	return run_helper(argv);
}
