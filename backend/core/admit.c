/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * admit: commands wait for recovery (backend-internal.h). While the daemon
 * is RECOVERING a command that acts is parked here, in the order it came,
 * and run again once READY, or answered ESHUTDOWN if the daemon stops
 * first. The gate is the backend's state; backend.c moves it.
 *
 * It must not know what a command does: a parked ctl line goes back to the
 * dispatcher that asked (its redo function), a mkdir or an rmdir to the
 * directory's type.
 */
#include "backend-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum park_kind { PARK_CTL, PARK_MKDIR, PARK_RMDIR };

/* A command that came while RECOVERING, run again once READY. */
struct parked {
	struct parked *next;
	enum park_kind kind;
	const struct bctl_table *t;	/* PARK_CTL: the table, and who runs it */
	backend_redo_fn redo;
	struct bnode *node;		/* the ctl's node, or the directory */
	struct bnode *child;		/* PARK_RMDIR */
	struct breq *rq;
	size_t len;
	char text[];			/* the line, or the name to make */
};

static int admit(struct bnode *n, enum park_kind kind, const struct bctl_table *t,
		 backend_redo_fn redo, struct bnode *child, const char *text, size_t len,
		 struct breq *rq)
{
	struct backend *b = node_backend(n);
	struct parked *p;
	int st;

	/* READY: the common case, without the lock */
	st = atomic_load(&b->state);
	if (st == BACKEND_READY)
		return 0;
	if (st == BACKEND_STOPPING)
		return nerr_set(&rq->err, ESHUTDOWN, "nodefs is stopping: the command was not run");
	if (rq->nonblock)
		return nerr_set(&rq->err, EAGAIN, "nodefs is recovering its checkpoints (status: "
				"RECOVERING): try again once it is READY");
	p = malloc(sizeof(*p) + len + 1);
	if (!p)
		return nerr_set(&rq->err, ENOMEM, "out of memory");
	*p = (struct parked){ .kind = kind, .t = t, .redo = redo, .node = bnode_ref(n), .child = bnode_ref(child),
			      .rq = rq, .len = len };
	memcpy(p->text, text, len);
	p->text[len] = '\0';
	pthread_mutex_lock(&b->dlock);
	st = atomic_load(&b->state);
	if (st == BACKEND_RECOVERING) {
		*b->parked_tail = p;
		b->parked_tail = &p->next;
	}
	pthread_mutex_unlock(&b->dlock);
	if (st == BACKEND_RECOVERING)
		return -EINPROGRESS;
	/* the state moved meanwhile: as if it had been seen first */
	bnode_unref(p->node);
	bnode_unref(p->child);
	free(p);
	return admit(n, kind, t, redo, child, text, len, rq);
}

int backend_admit_ctl(const struct bctl_table *t, struct bnode *n, const char *line, size_t len,
		      struct breq *rq, backend_redo_fn redo)
{
	return admit(n, PARK_CTL, t, redo, NULL, line, len, rq);
}

int backend_admit_mkdir(struct bnode *dir, const char *name, struct breq *rq)
{
	return admit(dir, PARK_MKDIR, NULL, NULL, NULL, name, strlen(name), rq);
}

int backend_admit_rmdir(struct bnode *dir, struct bnode *child, struct breq *rq)
{
	return admit(dir, PARK_RMDIR, NULL, NULL, child, "", 0, rq);
}

/* Take the parked commands; dlock held. */
struct parked *backend_parked_take_locked(struct backend *b)
{
	struct parked *p = b->parked;

	b->parked = NULL;
	b->parked_tail = &b->parked;
	return p;
}

/* Run the parked commands in the order they came (READY), or answer them
 * -ESHUTDOWN (stopping). */
void backend_parked_finish(struct parked *p, bool run)
{
	while (p) {
		struct parked *next = p->next;
		struct breq *rq = p->rq;
		int r;

		if (!run) {
			r = nerr_set(&rq->err, ESHUTDOWN, "nodefs stopped while it was recovering: "
				     "the command was not run");
		} else if (atomic_load(&p->node->dead) || (p->child && atomic_load(&p->child->dead))) {
			/* as fs answers a write to, or an rmdir of, a removed node */
			r = nerr_set(&rq->err, ENOENT, "%s was removed while nodefs recovered",
				     p->child ? p->child->name : p->node->name);
		} else if (p->kind == PARK_CTL) {
			r = p->redo(p->t, p->node, p->text, p->len, rq);
		} else if (p->kind == PARK_MKDIR) {
			r = p->node->type->mkdir(p->node, p->text, rq);
		} else {
			r = p->node->type->rmdir(p->node, p->child, rq);
		}
		bnode_unref(p->node);
		bnode_unref(p->child);
		free(p);
		if (r != -EINPROGRESS)
			breq_complete(rq, r);
		p = next;
	}
}
