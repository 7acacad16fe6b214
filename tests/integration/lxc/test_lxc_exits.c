/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_lxc_exits: how a container's end reaches nodefs through the LXC
 * driver: the DIE event and the recorded exit code for a SIGKILL, the init
 * command's own code (also when it exits at once, and without a pidfd's exit
 * information as before Linux 6.15), an app container stopped with SIGTERM,
 * the OOM killer (with the flag), and lxc-stop -k from outside. It reaches
 * the driver only through rt_lxc_ops (and the pure helpers of lxc-internal.h)
 * and the fixture only through lxc_test.h.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lxc_test.h"

Test(lxc, kill_sigkill_gives_die_137)
{
	struct rt_spec s;
	struct nerr err = { 0 };
	struct rt_status st;
	double t0;
	int i;

	spec_init(&s, "killme");
	make_start(&s);
	cr_assert_eq(ops->kill(H, "killme", 0, &err), -EINVAL);
	t0 = now_s();
	cr_assert_eq(ops->kill(H, "killme", SIGKILL, &err), 0, "kill: %s", err.msg);
	i = wait_event(RT_EV_DIE, "killme", 2);
	cr_assert_geq(i, 0, "no DIE after SIGKILL");
	cr_assert_lt(now_s() - t0, SCALED(1.0));
	cr_assert_eq(evs.ev[i].exit_code, 137);
	st = status_of("killme");
	cr_assert_eq(st.state, RT_STATE_EXITED);
	cr_assert_eq(st.exit_code, 137);
	cr_assert_not(st.oom_killed);
	cr_assert_eq(ops->kill(H, "killme", SIGKILL, &err), -EBUSY);
}

Test(lxc, init_cmd_real_exit_code_and_logs)
{
	struct rt_spec s;
	struct sbuf logs = SBUF_INIT(1u << 20);
	struct nerr err = { 0 };
	char *argv[] = { "/bin/sh", "-c", "echo hello-from-init $GREETING; sleep 0.3; exit 7", NULL };
	struct rt_kv env[] = { { (char *)"GREETING", (char *)"salut" } };
	int i;

	spec_init(&s, "app");
	s.argv = argv;
	s.env = env;
	s.nenv = 1;
	make_start(&s);
	i = wait_event(RT_EV_DIE, "app", 5);
	cr_assert_geq(i, 0);
	cr_assert_eq(evs.ev[i].exit_code, 7, "exit code %d", evs.ev[i].exit_code);
	cr_assert_eq(status_of("app").exit_code, 7);
	cr_assert_eq(ops->logs(H, "app", 0, &logs, &err), 0, "logs: %s", err.msg);
	cr_assert(logs.buf && strstr(logs.buf, "hello-from-init salut"), "logs: '%s'",
		  logs.buf ? logs.buf : "");
	sbuf_reset(&logs);
	cr_assert_eq(ops->logs(H, "app", 8, &logs, &err), 0);
	cr_assert_leq(logs.len, 8);
	sbuf_free(&logs);
}

Test(lxc, command_exiting_at_once_keeps_its_code)
{
	struct rt_spec s;
	struct nerr err = { 0 };
	char *argv[] = { "/bin/false", NULL };

	/* The command waits at the gate until start() holds init's pidfd,
	 * so its status is never lost to a race with lxc's monitor. */
	spec_init(&s, "quick");
	s.argv = argv;
	make(&s);
	for (int round = 0; round < 10; round++) {
		int i;

		evs.n = 0;
		cr_assert_eq(ops->start(H, "quick", &err), 0, "start %d: %s", round, err.msg);
		i = wait_event(RT_EV_DIE, "quick", 5);
		cr_assert_geq(i, 0, "no DIE in round %d", round);
		cr_assert_eq(evs.ev[i].exit_code, 1, "round %d: exit %d", round, evs.ev[i].exit_code);
		cr_assert_eq(status_of("quick").exit_code, 1);
	}
}

/* Before Linux 6.15 a pidfd tells nothing once init is reaped: the exit
 * status is read from /proc/PID/stat while init is a zombie. The test hook
 * NODEFS_LXC_NO_PIDFD_EXIT takes that path on a newer kernel. */
Test(lxc, exit_code_without_pidfd_exit_info)
{
	struct rt_kv kv[] = { { (char *)"lxcpath", lxcpath },
			      { (char *)"template_dir", templates() } };
	struct rt_config cfg = { kv, 2 };
	struct rt_spec s;
	struct nerr err = { 0 };
	char *argv[] = { "/bin/sh", "-c", "sleep 0.1; exit 7", NULL };
	char *sleeper[] = { "/bin/sleep", "1000", NULL };
	int i;

	ops->close(H);
	H = NULL;
	setenv("NODEFS_LXC_NO_PIDFD_EXIT", "1", 1);
	cr_assert_eq(ops->open(&cfg, &H, &err), 0, "%s", err.msg);
	unsetenv("NODEFS_LXC_NO_PIDFD_EXIT");
	cr_assert_eq(ops->watch(H, on_event, NULL, &err), 0);

	spec_init(&s, "oldk");
	s.argv = argv;
	make(&s);
	for (int round = 0; round < 5; round++) {
		evs.n = 0;
		cr_assert_eq(ops->start(H, "oldk", &err), 0, "start %d: %s", round, err.msg);
		i = wait_event(RT_EV_DIE, "oldk", 5);
		cr_assert_geq(i, 0, "no DIE in round %d", round);
		cr_assert_eq(evs.ev[i].exit_code, 7, "round %d: exit %d", round, evs.ev[i].exit_code);
		cr_assert_eq(status_of("oldk").exit_code, 7);
	}
	spec_init(&s, "oldk9");
	s.argv = sleeper;
	make_start(&s);
	cr_assert_eq(ops->kill(H, "oldk9", SIGKILL, &err), 0, "%s", err.msg);
	i = wait_event(RT_EV_DIE, "oldk9", 5);
	cr_assert_geq(i, 0);
	cr_assert_eq(evs.ev[i].exit_code, 137, "exit %d", evs.ev[i].exit_code);
}

Test(lxc, app_stop_uses_sigterm)
{
	struct rt_spec s;
	struct nerr err = { 0 };
	char *argv[] = { "/bin/sh", "-c", "trap 'exit 143' TERM; echo trap-set; while :; do sleep 0.1; done", NULL };
	struct sbuf logs = SBUF_INIT(1u << 20);
	double t0;
	int i;

	spec_init(&s, "apps");
	s.argv = argv;
	make_start(&s);
	/* A pid-namespace init ignores SIGTERM until it has a handler:
	 * stop only once the trap is in place. */
	t0 = now_s();
	do {
		usleep(20000);
		sbuf_reset(&logs);
		cr_assert_eq(ops->logs(H, "apps", 0, &logs, &err), 0);
	} while (!(logs.buf && strstr(logs.buf, "trap-set")) && now_s() - t0 < SCALED(10));
	cr_assert(logs.buf && strstr(logs.buf, "trap-set"), "the command never ran");
	sbuf_free(&logs);
	t0 = now_s();
	cr_assert_eq(ops->stop(H, "apps", 10, &err), 0, "stop: %s", err.msg);
	cr_assert_lt(now_s() - t0, SCALED(3.0));
	i = wait_event(RT_EV_DIE, "apps", 2);
	cr_assert_geq(i, 0);
	cr_assert_eq(evs.ev[i].exit_code, 143);
}

Test(lxc, oom_kill_gives_die_with_flag)
{
	struct rt_spec s;
	struct rt_status st;
	/* init itself grows past 16M: the OOM killer picks it. */
	char *argv[] = { "/bin/sh", "-c", "x=$(head -c 67108864 /dev/zero | tr '\\0' x); echo survived", NULL };
	int i;

	spec_init(&s, "oom");
	s.memory = 16u << 20;
	s.argv = argv;
	make_start(&s);
	i = wait_event(RT_EV_DIE, "oom", 20);
	cr_assert_geq(i, 0, "no DIE");
	cr_assert_geq(wait_event(RT_EV_OOM, "oom", 1), 0, "no OOM event");
	st = status_of("oom");
	cr_assert(st.oom_killed, "oom flag not set");
	cr_assert_eq(st.exit_code, 137, "exit %d", st.exit_code);
}

Test(lxc, lxc_stop_k_from_outside_gives_die_within_a_second)
{
	struct rt_spec s;
	double t0;
	int i;

	spec_init(&s, "outside");
	make_start(&s);
	t0 = now_s();
	cr_assert_eq(run_cmd("lxc-stop -k -P '%s' -n outside", lxcpath), 0);
	i = wait_event(RT_EV_DIE, "outside", 1.0);
	cr_assert_geq(i, 0, "no DIE within a second");
	cr_assert_lt(now_s() - t0, SCALED(1.5));
	cr_assert_eq(evs.ev[i].exit_code, 137);
	cr_assert_eq(status_of("outside").state, RT_STATE_EXITED);
}
