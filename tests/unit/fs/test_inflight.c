/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of fs/inflight.c, the requests read and not answered that
 * hold a kernel lock: which opcodes are kept (a lookup's directory, a
 * write's file: i_rwsem; a READ: page locks; a getattr or a forget:
 * nothing), a wait on a held node that ends with the answer, a wait that
 * times out, and a wait that ends when the session closes.
 */
#include <criterion/criterion.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "inflight.h"

static void recv_req(struct inflight *t, uint32_t opcode, uint64_t unique, uint64_t nodeid)
{
	struct fuse_in_header in;

	memset(&in, 0, sizeof(in));
	in.len = sizeof(in);
	in.opcode = opcode;
	in.unique = unique;
	in.nodeid = nodeid;
	inflight_received(t, &in, sizeof(in));
}

Test(inflight, keeps_only_requests_that_hold_a_lock)
{
	struct inflight *t = inflight_new();
	uint64_t dir = 5, file = 9;

	cr_assert_not_null(t);
	recv_req(t, FUSE_GETATTR, 1, file);
	recv_req(t, FUSE_FORGET, 2, file);
	recv_req(t, FUSE_OPEN, 3, file);
	cr_assert_eq(inflight_count(t), 0);
	cr_assert(inflight_wait_clear(t, &file, 1, INFL_RWSEM | INFL_PAGES, 0));

	recv_req(t, FUSE_LOOKUP, 4, dir);
	recv_req(t, FUSE_WRITE, 5, file);
	recv_req(t, FUSE_READ, 6, 11);
	cr_assert_eq(inflight_count(t), 3);
	cr_assert_not(inflight_wait_clear(t, &dir, 1, INFL_RWSEM, 0));
	cr_assert_not(inflight_wait_clear(t, &file, 1, INFL_RWSEM, 0));
	/* a READ holds pages, not the i_rwsem */
	uint64_t r = 11;
	cr_assert(inflight_wait_clear(t, &r, 1, INFL_RWSEM, 0));
	cr_assert_not(inflight_wait_clear(t, &r, 1, INFL_PAGES, 0));

	inflight_answered(t, 5);
	inflight_answered(t, 5);	/* twice: nothing */
	inflight_answered(t, 77);	/* never kept: nothing */
	cr_assert(inflight_wait_clear(t, &file, 1, INFL_RWSEM, 0));
	cr_assert_eq(inflight_count(t), 2);
	/* zeros are ignored, any listed node counts */
	uint64_t two[3] = { 0, file, dir };
	cr_assert_not(inflight_wait_clear(t, two, 3, INFL_RWSEM, 0));
	inflight_answered(t, 4);
	inflight_answered(t, 6);
	cr_assert(inflight_wait_clear(t, two, 3, INFL_RWSEM | INFL_PAGES, 0));
	cr_assert_eq(inflight_count(t), 0);
	inflight_free(t);
}

struct answer_later {
	struct inflight *t;
	uint64_t unique;
};

static void *answer_main(void *arg)
{
	struct answer_later *a = arg;

	usleep(50 * 1000);
	inflight_answered(a->t, a->unique);
	return NULL;
}

static void *close_main(void *arg)
{
	usleep(50 * 1000);
	inflight_close(arg);
	return NULL;
}

Test(inflight, a_wait_ends_with_the_answer)
{
	struct inflight *t = inflight_new();
	struct answer_later a = { t, 42 };
	uint64_t file = 9;
	pthread_t th;

	recv_req(t, FUSE_SETATTR, 42, file);
	pthread_create(&th, NULL, answer_main, &a);
	cr_assert(inflight_wait_clear(t, &file, 1, INFL_RWSEM, -1));
	pthread_join(th, NULL);
	inflight_free(t);
}

Test(inflight, a_wait_times_out_or_ends_at_close)
{
	struct inflight *t = inflight_new();
	uint64_t dir = 5;
	pthread_t th;

	recv_req(t, FUSE_READDIR, 8, dir);
	cr_assert_not(inflight_wait_clear(t, &dir, 1, INFL_RWSEM, 30));
	pthread_create(&th, NULL, close_main, t);
	cr_assert_not(inflight_wait_clear(t, &dir, 1, INFL_RWSEM, -1));
	pthread_join(th, NULL);
	inflight_free(t);
}

Test(inflight, many_in_flight_share_buckets)
{
	struct inflight *t = inflight_new();
	uint64_t node = 3;

	for (uint64_t u = 1; u <= 2000; u++)
		recv_req(t, FUSE_LOOKUP, u * 2, u % 7 == 0 ? node : 100 + u);
	cr_assert_eq(inflight_count(t), 2000);
	for (uint64_t u = 1; u <= 2000; u++)
		if (u % 7 == 0)
			inflight_answered(t, u * 2);
	cr_assert(inflight_wait_clear(t, &node, 1, INFL_RWSEM, 0));
	cr_assert_eq(inflight_count(t), 2000 - 2000 / 7);
	inflight_free(t);	/* frees what is still kept */
}
