/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * restart: the restart policy, the backoff and the decision after an exit
 * that supervised plugins and containers share; see restart.h. Pure
 * functions of their arguments, unit-tested (unit-backend-restart) and
 * fuzzed (fuzz-replay-service) on their own.
 */
#include "restart.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nerr.h"
#include "units.h"

static const char *const mode_names[] = { "no", "on-failure", "always", "unless-stopped" };

const char *restart_mode_to_string(enum restart_mode m)
{
	return (unsigned)m < 4 ? mode_names[m] : "no";
}

int restart_policy_parse(const char *s, struct restart_policy *ret, struct nerr *err)
{
	struct restart_policy p = { 0 };
	long long v;

	if (!s)
		return nerr_set(err, EINVAL, "restart: empty");
	if (strcmp(s, "no") == 0) {
		p.mode = RESTART_NO;
	} else if (strcmp(s, "always") == 0) {
		p.mode = RESTART_ALWAYS;
	} else if (strcmp(s, "unless-stopped") == 0) {
		p.mode = RESTART_UNLESS_STOPPED;
	} else if (strncmp(s, "on-failure", 10) == 0 && (s[10] == '\0' || s[10] == ':')) {
		p.mode = RESTART_ON_FAILURE;
		if (s[10] == ':') {
			if (parse_int(s + 11, 1, RESTART_MAX_MAX, &v, NULL) < 0 || s[11] == '+' ||
			    s[11] == '-')
				return nerr_set(err, EINVAL, "restart=%.64s: MAX is not a number from 1 to %u",
						s, RESTART_MAX_MAX);
			p.max = (unsigned)v;
		}
	} else {
		return nerr_set(err, EINVAL, "restart=%.64s: expected no, on-failure[:MAX], always or "
				"unless-stopped", s);
	}
	*ret = p;
	return 0;
}

void restart_policy_format(const struct restart_policy *p, char *buf, size_t len)
{
	if (p->mode == RESTART_ON_FAILURE && p->max)
		snprintf(buf, len, "on-failure:%u", p->max);
	else
		snprintf(buf, len, "%s", restart_mode_to_string(p->mode));
}

void backoff_init(struct backoff *bo, uint64_t base_ms, uint64_t max_ms, uint64_t seed)
{
	bo->base_ms = base_ms ? base_ms : 1000;
	bo->max_ms = max_ms ? max_ms : 120000;
	if (bo->max_ms < bo->base_ms)
		bo->max_ms = bo->base_ms;
	bo->attempt = 0;
	bo->rng = seed ? seed : 0x9e3779b97f4a7c15ull;
}

uint64_t backoff_next(struct backoff *bo)
{
	uint64_t ms = bo->base_ms;

	bo->attempt++;
	for (unsigned i = 1; i < bo->attempt && ms < bo->max_ms; i++)
		ms *= 2;
	if (ms > bo->max_ms)
		ms = bo->max_ms;
	bo->rng ^= bo->rng << 13;
	bo->rng ^= bo->rng >> 7;
	bo->rng ^= bo->rng << 17;
	return ms / 2 + (bo->rng % (ms / 2 + 1));
}

bool backoff_ran(struct backoff *bo, uint64_t ran_ms)
{
	if (ran_ms < bo->max_ms)
		return false;
	bo->attempt = 0;
	return true;
}

bool restart_exit_failed(const struct restart_exit *ex)
{
	return ex->code != 0 || ex->signal || ex->oom || ex->unhealthy;
}

enum restart_verdict restart_decide(const struct restart_policy *p, struct restart_state *st,
				    struct backoff *bo, const struct restart_exit *ex,
				    uint64_t now_ms, uint64_t *ret_delay_ms)
{
	uint64_t d;

	st->due_ms = 0;
	if (st->held || p->mode == RESTART_NO ||
	    (p->mode == RESTART_ON_FAILURE &&
	     (!restart_exit_failed(ex) || (p->max && st->count >= p->max)))) {
		st->final = true;
		return RESTART_FINAL;
	}
	d = backoff_next(bo);
	st->count++;
	st->total++;
	st->final = false;
	st->due_ms = now_ms + d;
	*ret_delay_ms = d;
	return RESTART_AGAIN;
}

void restart_on_user_start(struct restart_state *st)
{
	st->count = 0;
	st->held = false;
	st->final = false;
	st->due_ms = 0;
}

void restart_on_user_stop(struct restart_state *st)
{
	st->held = true;
	st->due_ms = 0;
}
