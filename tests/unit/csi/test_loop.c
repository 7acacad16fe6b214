/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * common/loop: timers fire in deadline order and can be cancelled, fd
 * callbacks see readiness (and may remove themselves), work submitted from
 * other threads runs on the loop thread in order, the before-sleep hook runs,
 * loop_stop from another thread ends loop_run, and loop_free releases work
 * still queued.
 */
#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "loop.h"

static struct loop *l;

static void setup(void)
{
	cr_assert(loop_new(&l) == 0);
}

static void teardown(void)
{
	loop_free(l);
}

TestSuite(loop, .init = setup, .fini = teardown, .timeout = 20);

static int order[8], norder;

static void on_timer(struct loop *lp, struct loop_timer *t, void *ud)
{
	order[norder++] = (int)(intptr_t)ud;
	if (norder == 3)
		loop_stop(lp);
}

Test(loop, timers_in_deadline_order_and_cancel)
{
	uint64_t t0 = loop_now_ms();

	loop_add_timer(l, 60, on_timer, (void *)3);
	loop_add_timer(l, 20, on_timer, (void *)1);
	struct loop_timer *gone = loop_add_timer(l, 30, on_timer, (void *)99);
	loop_add_timer(l, 40, on_timer, (void *)2);
	loop_del_timer(l, gone);
	cr_assert(loop_run(l) == 0);
	cr_assert_eq(norder, 3);
	cr_assert_eq(order[0], 1);
	cr_assert_eq(order[1], 2);
	cr_assert_eq(order[2], 3);
	cr_assert_geq(loop_now_ms() - t0, 60);
}

static int pipefd[2];
static char got[16];

static void on_read(struct loop *lp, int fd, unsigned ev, void *ud)
{
	cr_assert(ev & LOOP_READ);
	ssize_t n = read(fd, got, sizeof(got) - 1);
	cr_assert_gt(n, 0);
	loop_del_fd(lp, fd);
	loop_stop(lp);
}

static void *writer(void *arg)
{
	usleep(20000);
	cr_assert_eq(write(pipefd[1], "ping", 4), 4);
	return NULL;
}

Test(loop, fd_readiness)
{
	pthread_t t;

	cr_assert(pipe(pipefd) == 0);
	cr_assert(loop_add_fd(l, pipefd[0], LOOP_READ, on_read, NULL) == 0);
	cr_assert_eq(loop_add_fd(l, pipefd[0], LOOP_READ, on_read, NULL), -EEXIST);
	cr_assert_eq(loop_mod_fd(l, pipefd[1], LOOP_READ), -ENOENT);
	pthread_create(&t, NULL, writer, NULL);
	cr_assert(loop_run(l) == 0);
	pthread_join(t, NULL);
	cr_assert_str_eq(got, "ping");
	close(pipefd[0]);
	close(pipefd[1]);
}

static pthread_t loop_tid;
static int work_seen[100], nwork;
static bool wrong_thread;
static int sleeps;

static void on_work(struct loop *lp, void *ud)
{
	if (!pthread_equal(pthread_self(), loop_tid) || !loop_in_thread(lp))
		wrong_thread = true;
	work_seen[nwork++] = (int)(intptr_t)ud;
}

static void before_sleep(struct loop *lp, void *ud)
{
	sleeps++;
}

static void *loop_main(void *arg)
{
	loop_run(arg);
	return NULL;
}

Test(loop, submit_from_other_threads_and_stop)
{
	loop_set_before_sleep(l, before_sleep, NULL);
	cr_assert(pthread_create(&loop_tid, NULL, loop_main, l) == 0);
	for (int i = 0; i < 100; i++) {
		cr_assert(loop_submit(l, on_work, (void *)(intptr_t)i) == 0);
		if (i % 10 == 0)
			usleep(1000);
	}
	for (int i = 0; i < 200 && nwork < 100; i++)
		usleep(5000);
	cr_assert(!loop_in_thread(l));
	loop_stop(l);
	pthread_join(loop_tid, NULL);
	cr_assert_eq(nwork, 100);
	cr_assert(!wrong_thread);
	for (int i = 0; i < 100; i++)
		cr_assert_eq(work_seen[i], i);
	cr_assert_gt(sleeps, 0);
}

static int freed_work;

static void count_work(struct loop *lp, void *ud)
{
	freed_work++;
}

Test(loop, free_runs_queued_work)
{
	cr_assert(loop_submit(l, count_work, NULL) == 0);
	cr_assert(loop_submit(l, count_work, NULL) == 0);
	loop_free(l);
	l = NULL;
	cr_assert_eq(freed_work, 2);
}

static int rearms, sleeps_seen[5];

static void rearm(struct loop *lp, struct loop_timer *t, void *ud)
{
	sleeps_seen[rearms] = sleeps;
	if (++rearms == 5)
		loop_stop(lp);
	else
		loop_add_timer(lp, 0, rearm, NULL);
}

Test(loop, zero_ms_timer_rearmed_runs_next_iteration)
{
	sleeps = 0;
	loop_set_before_sleep(l, before_sleep, NULL);
	loop_add_timer(l, 0, rearm, NULL);
	cr_assert(loop_run(l) == 0);
	cr_assert_eq(rearms, 5);
	/* One run per iteration: the before-sleep hook ran between them. */
	for (int i = 1; i < 5; i++)
		cr_assert_gt(sleeps_seen[i], sleeps_seen[i - 1]);
}
