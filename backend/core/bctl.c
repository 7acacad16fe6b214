/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bctl: table-driven ctl files; see bctl.h. A good line waits for recovery
 * through the admission gate (admit.c), which runs it again here once the
 * daemon is READY. A write's lines are checked first by the same handlers
 * in their dry-run mode (struct breq's dry_run), so what is checked before
 * a write runs and what a line checks when it runs have one parser. It
 * must not know any object: tables come from them.
 */
#include "bctl.h"

#include <errno.h>
#include <string.h>

#include "backend-internal.h"

int bctl_dispatch(const struct bctl_table *t, struct bnode *n, const char *line,
		  size_t len, struct breq *rq)
{
	const struct ctl_spec *spec;
	struct ctl_cmd cmd = { 0 };
	int r;

	r = ctl_parse(line, len, &cmd, &rq->err);
	if (r < 0)
		return r;
	r = ctl_match(t->specs, t->n, &cmd, &spec, &rq->err);
	/* a bad line is told as such whatever the daemon's state; a good one
	 * acts once recovery is over, and not while the daemon stops */
	if (r >= 0)
		r = backend_admit_ctl(t, n, line, len, rq, bctl_dispatch);
	if (r == 0)
		r = t->fns[spec - t->specs](n, &cmd, rq);
	if (r == -ERANGE)
		r = -EINVAL;	/* an out-of-range argument is a bad argument */
	ctl_cmd_free(&cmd);
	return r;
}

int bctl_usage(const struct bctl_table *t, struct sbuf *out)
{
	return ctl_usage(t->specs, t->n, out);
}

int bctl_check(const struct bctl_table *t, struct bnode *n, const char *line, size_t len,
	       struct nerr *err)
{
	const struct ctl_spec *spec;
	struct ctl_cmd cmd = { 0 };
	/* the handler itself, in its checking mode: one parser for both */
	struct breq rq = { .dry_run = true };
	int r;

	r = ctl_parse(line, len, &cmd, err);
	if (r < 0)
		return r;
	r = ctl_match(t->specs, t->n, &cmd, &spec, err);
	if (r >= 0) {
		r = t->fns[spec - t->specs](n, &cmd, &rq);
		if (r == -ERANGE)
			r = -EINVAL;
		if (r < 0 && err) {
			*err = rq.err;
			if (!err->msg[0])
				nerr_set(err, -r, "%s", strerror(-r));
		}
		sbuf_free(&rq.reply);
	}
	ctl_cmd_free(&cmd);
	return r < 0 ? r : 0;
}
