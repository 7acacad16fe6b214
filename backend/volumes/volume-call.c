/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * volume-call: what every storage call of a volume's action shares: the
 * request naming the volume, and the notes of its attempts and result in
 * the running operation (as they happen, so a retried call shows while it
 * retries). The steps (volume-steps.c) and the changes in place
 * (volume-change.c) make their calls with these.
 *
 * Must not know: the states, the walks, CSI messages, files.
 */
#include "volume-internal.h"

#include "operation.h"

/* What a call ended with, for the step and the operation. */
void volume_note_result(struct vctx *x, const struct storage_result *res)
{
	if (!res->call)
		return;		/* nothing was sent */
	x->v->last_uncertain = res->uncertain;
	/* the operation shows the most attempts one call of it needed: a
	 * retried step stays visible after the steps that followed it */
	if (res->attempts > x->attempts)
		x->attempts = res->attempts;
	op_note_call(x->op, x->attempts, res->code, res->code_name);
}

/* A call being retried: its attempts so far and its last status are in the
 * operation as they happen, not only once the call has ended. */
void volume_retry_note(void *ctx, const struct storage_result *so_far)
{
	struct vctx *x = ctx;

	op_note_call(x->op, so_far->attempts > x->attempts ? so_far->attempts : x->attempts,
		     so_far->code, so_far->code_name);
}

/* The request naming v: id, capability, parameters and contexts. The
 * strings are v's; the volume's lock is not needed, as only the action
 * running on the volume's queue changes them. */
struct storage_req volume_req_of(struct vctx *x)
{
	struct volume *v = x->v;

	return (struct storage_req){
		.secrets = x->secrets,
		.name = v->csi_name,
		.id = v->id,
		.cap = storage_cap_of(v->access_mode, v->fs_type, v->mount_flags),
		.params = v->params,
		.vctx = v->vctx,
		.pctx = v->pctx,
		.staging = v->staged ? VSTAGING(v) : "",
		.target = v->target,
		.readonly = v->ro,
	};
}
