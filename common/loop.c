/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * loop: epoll + timers + before-sleep hook + eventfd work queue (Redis ae's
 * shape). It dispatches readiness and deadlines and knows nothing of
 * protocols; see loop.h for the threading contract.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "loop.h"

struct loop_fd {
	loop_fd_fn fn;
	void *userdata;
	unsigned events;	/* 0 = slot unused */
};

struct loop_timer {
	uint64_t when_ms;
	uint64_t seq;		/* arming order */
	loop_timer_fn fn;
	void *userdata;
	struct loop_timer *prev, *next;
};

struct loop_work {
	loop_work_fn fn;
	void *userdata;
	struct loop_work *next;
};

struct loop {
	int epfd;
	int evfd;
	struct loop_fd *fds;
	int nfds;		/* size of fds[] */
	struct loop_timer *timers;	/* sorted by when_ms, earliest first */
	struct loop_timer *timers_tail;
	uint64_t timer_seq;
	loop_work_fn before_sleep;
	void *before_sleep_ud;
	pthread_mutex_t lock;	/* guards work queue */
	struct loop_work *work_head, *work_tail;
	atomic_bool stop;
	atomic_bool running;
	pthread_t thread;
};

uint64_t loop_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

struct timespec ts_after_ms(clockid_t clk, uint64_t ms)
{
	struct timespec t;

	clock_gettime(clk, &t);
	t.tv_sec += (time_t)(ms / 1000);
	t.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

uint64_t loop_now_ms(void)
{
	return loop_now_us() / 1000u;
}

int loop_new(struct loop **ret_loop)
{
	struct loop *l = calloc(1, sizeof(*l));
	int r;

	if (!l)
		return -ENOMEM;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		r = -errno;
		goto fail_free;
	}
	l->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->evfd < 0) {
		r = -errno;
		goto fail_ep;
	}
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = l->evfd };
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->evfd, &ev) < 0) {
		r = -errno;
		goto fail_ev;
	}
	pthread_mutex_init(&l->lock, NULL);
	*ret_loop = l;
	return 0;

fail_ev:
	close(l->evfd);
fail_ep:
	close(l->epfd);
fail_free:
	free(l);
	return r;
}

static void loop_run_work(struct loop *l)
{
	struct loop_work *w;

	pthread_mutex_lock(&l->lock);
	w = l->work_head;
	l->work_head = l->work_tail = NULL;
	pthread_mutex_unlock(&l->lock);
	while (w) {
		struct loop_work *next = w->next;

		w->fn(l, w->userdata);
		free(w);
		w = next;
	}
}

void loop_free(struct loop *l)
{
	if (!l)
		return;
	/* Release anyone waiting on submitted work. */
	while (l->work_head)
		loop_run_work(l);
	while (l->timers) {
		struct loop_timer *t = l->timers;

		l->timers = t->next;
		free(t);
	}
	close(l->evfd);
	close(l->epfd);
	pthread_mutex_destroy(&l->lock);
	free(l->fds);
	free(l);
}

bool loop_in_thread(struct loop *l)
{
	return atomic_load(&l->running) && pthread_equal(l->thread, pthread_self());
}

static uint32_t to_epoll(unsigned events)
{
	return (events & LOOP_READ ? EPOLLIN : 0) | (events & LOOP_WRITE ? EPOLLOUT : 0);
}

int loop_add_fd(struct loop *l, int fd, unsigned events, loop_fd_fn fn, void *userdata)
{
	if (fd < 0 || !fn || !(events & (LOOP_READ | LOOP_WRITE)))
		return -EINVAL;
	if (fd >= l->nfds) {
		int n = l->nfds ? l->nfds : 64;

		while (n <= fd)
			n *= 2;
		struct loop_fd *p = realloc(l->fds, (size_t)n * sizeof(*p));
		if (!p)
			return -ENOMEM;
		memset(p + l->nfds, 0, (size_t)(n - l->nfds) * sizeof(*p));
		l->fds = p;
		l->nfds = n;
	}
	if (l->fds[fd].events)
		return -EEXIST;
	struct epoll_event ev = { .events = to_epoll(events), .data.fd = fd };
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	l->fds[fd] = (struct loop_fd){ .fn = fn, .userdata = userdata, .events = events };
	return 0;
}

int loop_mod_fd(struct loop *l, int fd, unsigned events)
{
	if (fd < 0 || fd >= l->nfds || !l->fds[fd].events)
		return -ENOENT;
	if (!(events & (LOOP_READ | LOOP_WRITE)))
		return -EINVAL;
	if (events == l->fds[fd].events)
		return 0;
	struct epoll_event ev = { .events = to_epoll(events), .data.fd = fd };
	if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
		return -errno;
	l->fds[fd].events = events;
	return 0;
}

int loop_arm_fd(struct loop *l, int fd, unsigned events)
{
	struct epoll_event ev = { .events = to_epoll(events), .data.fd = fd };

	return epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev) < 0 ? -errno : 0;
}

void loop_del_fd(struct loop *l, int fd)
{
	if (fd < 0 || fd >= l->nfds || !l->fds[fd].events)
		return;
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
	l->fds[fd] = (struct loop_fd){ 0 };
}

struct loop_timer *loop_add_timer(struct loop *l, uint64_t ms, loop_timer_fn fn, void *userdata)
{
	struct loop_timer *t = calloc(1, sizeof(*t)), *p;

	if (!t)
		return NULL;
	t->when_ms = loop_now_ms() + ms;
	t->seq = l->timer_seq++;
	t->fn = fn;
	t->userdata = userdata;
	/* Deadlines mostly arrive in order: search from the tail. */
	for (p = l->timers_tail; p && p->when_ms > t->when_ms; p = p->prev)
		;
	t->prev = p;
	t->next = p ? p->next : l->timers;
	if (t->next)
		t->next->prev = t;
	else
		l->timers_tail = t;
	if (p)
		p->next = t;
	else
		l->timers = t;
	return t;
}

static void timer_unlink(struct loop *l, struct loop_timer *t)
{
	if (t->prev)
		t->prev->next = t->next;
	else
		l->timers = t->next;
	if (t->next)
		t->next->prev = t->prev;
	else
		l->timers_tail = t->prev;
}

void loop_del_timer(struct loop *l, struct loop_timer *t)
{
	if (!t)
		return;
	timer_unlink(l, t);
	free(t);
}

void loop_set_before_sleep(struct loop *l, loop_work_fn fn, void *userdata)
{
	l->before_sleep = fn;
	l->before_sleep_ud = userdata;
}

static void loop_wake(struct loop *l)
{
	uint64_t one = 1;
	ssize_t n;

	/* EAGAIN means the counter is already non-zero: the loop will wake. */
	do
		n = write(l->evfd, &one, sizeof(one));
	while (n < 0 && errno == EINTR);
}

int loop_submit(struct loop *l, loop_work_fn fn, void *userdata)
{
	struct loop_work *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	w->fn = fn;
	w->userdata = userdata;
	pthread_mutex_lock(&l->lock);
	if (l->work_tail)
		l->work_tail->next = w;
	else
		l->work_head = w;
	l->work_tail = w;
	pthread_mutex_unlock(&l->lock);
	loop_wake(l);
	return 0;
}

void loop_stop(struct loop *l)
{
	atomic_store(&l->stop, true);
	loop_wake(l);
}

static void loop_run_timers(struct loop *l)
{
	uint64_t now = loop_now_ms();
	uint64_t horizon = l->timer_seq;

	/* Timers armed by these callbacks (seq >= horizon) wait for the next
	 * iteration, so a callback re-arming itself at 0 ms cannot spin here. */
	for (;;) {
		struct loop_timer *t;

		for (t = l->timers; t && t->when_ms <= now && t->seq >= horizon; t = t->next)
			;
		if (!t || t->when_ms > now)
			break;
		timer_unlink(l, t);
		t->fn(l, t, t->userdata);
		free(t);
	}
}

int loop_run(struct loop *l)
{
	struct epoll_event evs[64];

	l->thread = pthread_self();
	atomic_store(&l->running, true);
	while (!atomic_load(&l->stop)) {
		int timeout = -1;

		if (l->before_sleep)
			l->before_sleep(l, l->before_sleep_ud);
		if (l->work_head)
			timeout = 0;
		else if (l->timers) {
			uint64_t now = loop_now_ms();

			timeout = l->timers->when_ms <= now ? 0
				: (int)(l->timers->when_ms - now > 60000 ? 60000 : l->timers->when_ms - now);
		}
		int n = epoll_wait(l->epfd, evs, (int)(sizeof(evs) / sizeof(evs[0])), timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			atomic_store(&l->running, false);
			return -errno;
		}
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;

			if (fd == l->evfd) {
				uint64_t v;

				(void)!read(l->evfd, &v, sizeof(v));
				continue;
			}
			/* An earlier callback in this batch may have removed fd. */
			if (fd >= l->nfds || !l->fds[fd].events)
				continue;
			unsigned ev = 0;
			if (evs[i].events & EPOLLIN)
				ev |= LOOP_READ;
			if (evs[i].events & EPOLLOUT)
				ev |= LOOP_WRITE;
			if (evs[i].events & (EPOLLERR | EPOLLHUP))
				ev |= LOOP_ERROR | LOOP_READ;
			l->fds[fd].fn(l, fd, ev, l->fds[fd].userdata);
		}
		loop_run_work(l);
		loop_run_timers(l);
	}
	atomic_store(&l->stop, false);
	atomic_store(&l->running, false);
	return 0;
}
