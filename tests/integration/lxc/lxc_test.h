/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lxc_test: the fixture and helpers the LXC driver's tests share (defined in
 * lxc_test.c, which also holds the criterion suite `lxc` and main). Every
 * test of suite lxc runs with its own lxcpath, an open driver handle H
 * watched by on_event, and an empty event record evs; the fixture removes
 * whatever the test made. Knows no test.
 */
#ifndef NODEFS_LXC_TEST_H
#define NODEFS_LXC_TEST_H

#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "../test_time.h"
#include "lxc-internal.h"
#include "nerr.h"
#include "runtime.h"
#include "sbuf.h"

/* The test's lxcpath (made by the fixture, removed after the test), its
 * driver handle (open and watched; a test may close and reopen it) and the
 * driver. */
extern char lxcpath[512];
extern void *H;
extern const struct runtime_ops *const ops;

/* The driver's events since the test began (a test may reset n). */
#define EV_MAX 256
struct lxc_test_events {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct rt_event ev[EV_MAX];
	char id[EV_MAX][72];
	struct timespec at[EV_MAX];
	int n;
};
extern struct lxc_test_events evs;

/* The watch callback that records into evs (for a reopened handle). */
void on_event(void *ctx, const struct rt_event *ev);
/* CLOCK_MONOTONIC in seconds. */
double now_s(void);
/* Wait for an event of kind for id (timeout scaled by NODEFS_TIME_SCALE);
 * returns its index in evs or -1. */
int wait_event(enum rt_event_kind kind, const char *id, double timeout_s);
/* system() of the formatted command; its exit status, -1 if it did not exit. */
int run_cmd(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The run's template dir (tests/fixtures/lxc-templates.sh), else the
 * installed one. */
char *templates(void);

/* A busybox-template spec named name. */
void spec_init(struct rt_spec *s, const char *name);
/* Create (and start) s through H; a failure fails the test. */
void make(const struct rt_spec *s);
void make_start(const struct rt_spec *s);
/* inspect through H; a failure fails the test. */
struct rt_status status_of(const char *id);
/* exec argv in id, its output in out; the command's exit code. */
int exec_in(const char *id, char *const argv[], struct sbuf *out);
/* Entries of a directory other than . and ..; -1 if it cannot be opened. */
int count_entries(const char *path);

#endif
