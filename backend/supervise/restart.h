/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * restart: what plugins and containers share when something nodefs keeps
 * up ends: the restart policy (restart=no|on-failure[:MAX]|always|
 * unless-stopped), the randomized exponential backoff between starts and
 * its bounds (retry_backoff .. retry_max), and the state machine that turns
 * an exit into "start again after D ms", "not now" or "final".
 *
 * Pure: no threads, no clock but the one handed in, no I/O. The plugin
 * supervisor (plugin-proc.c) runs every plugin as `always`; containers/
 * takes a user's policy. Must not know plugins, containers or engines.
 */
#ifndef NODEFS_RESTART_H
#define NODEFS_RESTART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nerr;

enum restart_mode { RESTART_NO, RESTART_ON_FAILURE, RESTART_ALWAYS, RESTART_UNLESS_STOPPED };

struct restart_policy {
	enum restart_mode mode;
	unsigned max;		/* on-failure:MAX; 0: no bound */
};

#define RESTART_MAX_MAX 1000000u

/* "no", "on-failure", "on-failure:MAX" (1..RESTART_MAX_MAX), "always",
 * "unless-stopped" into *ret. -EINVAL with err (a MAX that is not a
 * number, an unknown word). */
int restart_policy_parse(const char *s, struct restart_policy *ret, struct nerr *err);
/* The policy as restart_policy_parse reads it back ("on-failure:3"). */
void restart_policy_format(const struct restart_policy *p, char *buf, size_t len);
const char *restart_mode_to_string(enum restart_mode m);

/* The wait before the next start: base doubling each attempt up to max,
 * scaled by a uniform jitter in [0.5, 1.0] (the CSI retries' rule). */
struct backoff {
	uint64_t base_ms, max_ms;
	unsigned attempt;	/* starts since the last reset */
	uint64_t rng;		/* xorshift state, never 0 */
};

/* base 0: 1 s; max 0: 120 s; seed: any (0 is replaced). */
void backoff_init(struct backoff *bo, uint64_t base_ms, uint64_t max_ms, uint64_t seed);
/* The next delay (attempt counted). */
uint64_t backoff_next(struct backoff *bo);
/* It ran for ran_ms: longer than the longest wait starts the doubling
 * over (true when it did). */
bool backoff_ran(struct backoff *bo, uint64_t ran_ms);

/* How something ended. */
struct restart_exit {
	int code;		/* exit code; < 0 unknown */
	int signal;		/* 0: none */
	bool oom;
	bool unhealthy;		/* health_restart=yes and its check failed */
};

/* A failure for on-failure: a non-zero code, a signal, the OOM killer,
 * an unhealthy check, or an end whose code is unknown. */
bool restart_exit_failed(const struct restart_exit *ex);

/* Where a policy stands between starts (checkpointed by its owner). */
struct restart_state {
	unsigned count;		/* restarts since the last user's start (MAX bounds it) */
	unsigned long long total;	/* every restart made or due, never reset */
	bool held;		/* a user's stop or kill: no restart until a start */
	bool final;		/* the policy is done: this exit is the last */
	uint64_t due_ms;	/* wall-clock ms of the next start; 0: none */
};

enum restart_verdict {
	RESTART_AGAIN,		/* start again after *ret_delay_ms */
	RESTART_FINAL,		/* not restarted: this is the final exit */
};

/* Decide what follows exit ex under p: counts the restart, sets due_ms
 * (now_ms + delay) or final. A held policy (the user's stop or kill) and
 * `no` are final; on-failure after a success is final, and after MAX
 * restarts too. */
enum restart_verdict restart_decide(const struct restart_policy *p, struct restart_state *st,
				    struct backoff *bo, const struct restart_exit *ex,
				    uint64_t now_ms, uint64_t *ret_delay_ms);

/* A user's start: the policy starts over (count 0, held and final
 * cleared, nothing due; total kept). A user's stop or kill: held. */
void restart_on_user_start(struct restart_state *st);
void restart_on_user_stop(struct restart_state *st);

#endif
