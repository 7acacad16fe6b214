/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bctl: ctl files from command tables.
 *
 * A ctl file is a table of {ctl_spec, handler}. A write is parsed
 * (common/ctl.h), matched against the table with its arity and options
 * checked before anything happens (Plan 9's Cmdtab), then handed to the
 * handler. Reading the ctl file lists the usage lines.
 * Must not know: any kind of object (handlers are the kinds').
 */
#ifndef NODEFS_BCTL_H
#define NODEFS_BCTL_H

#include <stddef.h>

#include "ctl.h"
#include "tree.h"

typedef int (*bctl_fn)(struct bnode *n, const struct ctl_cmd *cmd, struct breq *rq);

struct bctl_table {
	const struct ctl_spec *specs;
	const bctl_fn *fns;	/* fns[i] handles specs[i] */
	size_t n;
};

/* Parse line, match it, call the handler. Handler contract as a store;
 * a handler given rq->dry_run checks its arguments' values only and returns
 * 0 (or -errno, err set) before it looks at, waits for or changes an
 * object (bctl_check).
 * A good line waits for recovery (backend_admit_ctl): -EINPROGRESS while
 * RECOVERING (-EAGAIN nonblock), -ESHUTDOWN while stopping. */
int bctl_dispatch(const struct bctl_table *t, struct bnode *n, const char *line,
		  size_t len, struct breq *rq);
int bctl_usage(const struct bctl_table *t, struct sbuf *out);
/* Check one line without acting: parse and match it, then call its handler
 * with rq->dry_run set, which checks every argument's value as it would
 * when it runs (the same parsers) and returns 0 before it looks at, waits
 * for or changes any object. -EINVAL (err set) for a bad line. */
int bctl_check(const struct bctl_table *t, struct bnode *n, const char *line, size_t len,
	       struct nerr *err);

/* The show/store/check functions of a ctl attribute bound to a table. */
#define BCTL_FUNCS(prefix, table)						\
	static int prefix##_show(struct bnode *n, struct sbuf *out)		\
	{ return bctl_usage(&(table), out); }					\
	static int prefix##_store(struct bnode *n, const char *l, size_t len,	\
				  struct breq *rq)				\
	{ return bctl_dispatch(&(table), n, l, len, rq); }			\
	static int prefix##_check(struct bnode *n, const char *l, size_t len,	\
				  struct nerr *err)				\
	{ return bctl_check(&(table), n, l, len, err); }

#define BCTL_ATTR(prefix) \
	{ .name = "ctl", .flags = BATTR_CTL, .show = prefix##_show, \
	  .store = prefix##_store, .check = prefix##_check }

#endif
