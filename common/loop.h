/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * loop: a small event loop in the shape of Redis's ae.
 *
 * epoll for fd readiness, a deadline-ordered list of one-shot timers, a
 * before-sleep hook run once per iteration before waiting, and an eventfd
 * through which other threads hand work to the loop thread. Everything
 * registered on a loop (fds, timers, hooks) belongs to the loop thread: only
 * loop_submit(), loop_stop() and loop_in_thread() may be called from other
 * threads. Callbacks must never block: the loop thread is shared by every
 * connection. It knows nothing of what the fds carry.
 */
#ifndef NODEFS_LOOP_H
#define NODEFS_LOOP_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct loop;
struct loop_timer;

#define LOOP_READ  0x1u
#define LOOP_WRITE 0x2u
#define LOOP_ERROR 0x4u		/* reported only: EPOLLERR or EPOLLHUP */

typedef void (*loop_fd_fn)(struct loop *l, int fd, unsigned events, void *userdata);
typedef void (*loop_timer_fn)(struct loop *l, struct loop_timer *t, void *userdata);
typedef void (*loop_work_fn)(struct loop *l, void *userdata);

/* Create a loop. Returns 0, or -errno (-ENOMEM, -EMFILE from epoll/eventfd). */
int loop_new(struct loop **ret_loop);

/* Free the loop: runs any work still queued (so submitters waiting on it are
 * released), then releases epoll, eventfd, timers. The loop must not be
 * running. NULL-safe. Registered fds are not closed: they belong to callers. */
void loop_free(struct loop *l);

/* Run until loop_stop(). Returns 0, or -errno if epoll_wait fails for good.
 * The calling thread becomes the loop thread. */
int loop_run(struct loop *l);

/* Ask loop_run() to return after the current iteration. Any thread. */
void loop_stop(struct loop *l);

/* True when called on the thread currently inside loop_run(). */
bool loop_in_thread(struct loop *l);

/* Watch fd for LOOP_READ and/or LOOP_WRITE (level triggered). Loop thread
 * (or before loop_run). -EEXIST if fd is already watched, -EINVAL, -ENOMEM. */
int loop_add_fd(struct loop *l, int fd, unsigned events, loop_fd_fn fn, void *userdata);
/* Change the events watched on fd; -ENOENT if not watched. */
int loop_mod_fd(struct loop *l, int fd, unsigned events);
/* Set fd's interest in the kernel to events (0: none; errors and hang-ups
 * are always reported) from any thread. It bypasses loop_mod_fd's record,
 * so an fd armed this way must never go through loop_mod_fd: its owner
 * keeps its own record (h2conn parks its socket while a caller thread
 * reads it). 0 or -errno. */
int loop_arm_fd(struct loop *l, int fd, unsigned events);
/* Stop watching fd (safe from inside that fd's callback). */
void loop_del_fd(struct loop *l, int fd);

/* Arm a one-shot timer after ms milliseconds. Returns the handle, NULL on
 * OOM. The handle is valid until the callback has run or loop_del_timer(). */
struct loop_timer *loop_add_timer(struct loop *l, uint64_t ms, loop_timer_fn fn, void *userdata);
/* Disarm and free a pending timer. NULL-safe; never call it on a timer
 * whose callback has already started. */
void loop_del_timer(struct loop *l, struct loop_timer *t);

/* Set the hook run before every wait (deferred frees, batched flushes). */
void loop_set_before_sleep(struct loop *l, loop_work_fn fn, void *userdata);

/* Queue fn(userdata) to run on the loop thread, in submission order, and wake
 * the loop. Any thread. 0, or -ENOMEM. */
int loop_submit(struct loop *l, loop_work_fn fn, void *userdata);

/* Monotonic milliseconds (CLOCK_MONOTONIC). */
uint64_t loop_now_ms(void);
/* Monotonic microseconds. */
uint64_t loop_now_us(void);
/* The time ms milliseconds from now on clock clk, as the absolute deadline
 * pthread_cond_timedwait wants (CLOCK_REALTIME unless the condvar was made
 * with another clock). */
struct timespec ts_after_ms(clockid_t clk, uint64_t ms);

#endif
