/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The checkpoint store's group commit (backend/store/store-journal.c) under
 * concurrent writers, on a temporary state dir: a durable write that
 * returns is in its file (the next flush's append may overlap this one's
 * files, never its writer's answer), lazy writes are in their files once
 * store_sync returns, the journal is emptied many times over while writers
 * run, and a reopen (a replay) finds every record's last version. Also the
 * journal's length: written once, never changed by a flush.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "nerr.h"
#include "store.h"

#define WRITERS 8
#define ROUNDS 150
/* a record of about 2 KiB: the run passes the journal's 1 MiB several times */
#define PAD 2000

static char root[256], state[300];
static struct store *st;

static void setup(void)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct nerr err = { 0 };

	snprintf(root, sizeof(root), "%s/nodefs-store.XXXXXX", tmp);
	cr_assert_not_null(mkdtemp(root));
	snprintf(state, sizeof(state), "%s/state", root);
	cr_assert_eq(mkdir(state, 0700), 0);
	cr_assert_geq(store_open(state, &st, &err), 0, "%s", err.msg);
}

static void teardown(void)
{
	char cmd[400];

	store_close(st);
	st = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", root);
}

static json_t *record(int w, int round)
{
	static char pad[PAD + 1];

	if (!pad[0])
		memset(pad, 'x', PAD);
	return json_pack("{s:i, s:i, s:s}", "writer", w, "round", round, "pad", pad);
}

/* The round KIND/NAME.json holds, or -1. */
static int round_in_file(const char *kind, const char *name)
{
	char path[512];
	json_t *o;
	int r;

	snprintf(path, sizeof(path), "%s/%s/%s.json", state, kind, name);
	o = json_load_file(path, 0, NULL);
	r = o ? (int)json_integer_value(json_object_get(o, "round")) : -1;
	json_decref(o);
	return r;
}

struct writer {
	int w;
	int bad;	/* rounds whose file did not hold them when answered */
	int failed;
};

static void *writer_main(void *arg)
{
	struct writer *x = arg;
	char name[32], lazy[32];

	snprintf(name, sizeof(name), "w%d", x->w);
	snprintf(lazy, sizeof(lazy), "lazy%d", x->w);
	for (int i = 0; i < ROUNDS; i++) {
		struct nerr err = { 0 };
		json_t *o = record(x->w, i), *l = record(x->w, i);

		/* a lazy write, then a durable one that carries it */
		if (store_put(st, "volumes", lazy, l, STORE_LAZY, &err) < 0 ||
		    store_put(st, "operations", name, o, STORE_DURABLE, &err) < 0)
			x->failed++;
		else if (round_in_file("operations", name) != i || round_in_file("volumes", lazy) != i)
			x->bad++;
		json_decref(o);
		json_decref(l);
		if (i % 10 == 9) {
			/* a lazy write alone, then store_sync */
			l = record(x->w, i);
			if (store_put(st, "containers", lazy, l, STORE_LAZY, &err) < 0 ||
			    store_sync(st, &err) < 0)
				x->failed++;
			else if (round_in_file("containers", lazy) != i)
				x->bad++;
			json_decref(l);
		}
	}
	return NULL;
}

Test(store, durable_writes_are_in_their_files_when_answered, .init = setup, .fini = teardown)
{
	struct writer x[WRITERS];
	pthread_t t[WRITERS];
	struct store_io io;
	struct nerr err = { 0 };

	for (int w = 0; w < WRITERS; w++) {
		x[w] = (struct writer){ .w = w };
		cr_assert_eq(pthread_create(&t[w], NULL, writer_main, &x[w]), 0);
	}
	for (int w = 0; w < WRITERS; w++)
		pthread_join(t[w], NULL);
	for (int w = 0; w < WRITERS; w++) {
		cr_expect_eq(x[w].failed, 0, "writer %d: %d writes failed", w, x[w].failed);
		cr_expect_eq(x[w].bad, 0, "writer %d: %d answered before their file", w, x[w].bad);
	}
	store_io_stats(st, &io);
	cr_expect_lt(io.flushes, (unsigned long long)WRITERS * ROUNDS,
		     "concurrent writers share flushes (%llu flushes)", io.flushes);
	cr_expect_geq(io.syncfs, 2, "the journal was emptied while writers ran (%llu)", io.syncfs);

	/* a reopen replays what the journal holds: every last version */
	store_close(st);
	st = NULL;
	cr_assert_geq(store_open(state, &st, &err), 0, "%s", err.msg);
	for (int w = 0; w < WRITERS; w++) {
		char name[32], lazy[32];

		snprintf(name, sizeof(name), "w%d", w);
		snprintf(lazy, sizeof(lazy), "lazy%d", w);
		cr_expect_eq(round_in_file("operations", name), ROUNDS - 1);
		cr_expect_eq(round_in_file("volumes", lazy), ROUNDS - 1);
		cr_expect_eq(round_in_file("containers", lazy), ROUNDS - 1);
	}
}

Test(store, the_journal_keeps_its_length, .init = setup, .fini = teardown)
{
	char path[400];
	struct stat s0, s1;
	struct nerr err = { 0 };

	snprintf(path, sizeof(path), "%s/journal", state);
	cr_assert_eq(stat(path, &s0), 0);
	cr_assert_gt(s0.st_size, 1 << 20, "written once to its length (%lld)", (long long)s0.st_size);
	for (int i = 0; i < 20; i++) {
		json_t *o = record(0, i);

		cr_assert_geq(store_put(st, "operations", "one", o, STORE_DURABLE, &err), 0, "%s",
			      err.msg);
		json_decref(o);
	}
	cr_assert_eq(stat(path, &s1), 0);
	cr_expect_eq(s1.st_size, s0.st_size, "a flush changed the journal's size");
	cr_expect_eq(s1.st_blocks, s0.st_blocks, "a flush allocated blocks");
}
