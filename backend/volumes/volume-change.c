/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * volume-change: the live changes to a volume that stays where it is.
 * expand is ControllerExpandVolume, then NodeExpandVolume where the volume
 * is staged or published and the controller says the node must follow (a
 * node expand owed after a failed one is finished by the same command);
 * modify is ControllerModifyVolume, whose keys are put over the mutable
 * parameters in force. Each checkpoints what the plugin took. They run on
 * the volume's action queue, as every step does (volume-steps.c).
 *
 * Owns: expand and modify. Must not know: CSI messages, ctl parsing, files.
 */
#include "volume-internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

int volume_expand(struct vctx *x, uint64_t size, struct nerr *err)
{
	struct volume *v = x->v;
	bool ctl = HAS_CTL(x, EXPAND_VOLUME), node = HAS_NODE(x, EXPAND_VOLUME);
	bool node_needed = node, finish_node, on_node;
	int64_t cap, owed;
	int r;

	pthread_mutex_lock(&v->lock);
	cap = v->capacity;
	owed = v->node_expand_to;
	on_node = v->staged || (v->target && v->state == V_PUBLISHED);
	pthread_mutex_unlock(&v->lock);
	finish_node = owed && owed == (int64_t)size;
	if (!finish_node && (int64_t)size <= cap)
		return nerr_set(err, EINVAL, "expand: %llu bytes is not more than the capacity %lld",
				(unsigned long long)size, (long long)cap);
	if (!ctl && !node)
		return nerr_set(err, ENOTSUP, "expand: plugin %s cannot expand volumes (no EXPAND_VOLUME)",
				v->plugin);
	if (ctl && !finish_node) {
		struct storage_req rq = volume_req_of(x);
		struct storage_result res = { 0 };
		int64_t newcap = 0;
		bool needed = false;

		rq.bytes = (int64_t)size;
		r = x->ops->controller_expand(x->h, &rq, &newcap, &needed, volume_retry_note, x, &res, err);
		volume_note_result(x, &res);
		if (r < 0)
			return r;
		node_needed = node && needed;
		pthread_mutex_lock(&v->lock);
		v->capacity = newcap ? newcap : (int64_t)size;
		v->node_expand_to = node_needed && on_node ? (int64_t)size : 0;
		pthread_mutex_unlock(&v->lock);
		bnode_changed(v->node);
		r = volume_checkpoint(v, STORE_DURABLE, err);	/* before the node call */
		if (r < 0)
			return r;
	}
	if (node_needed && on_node) {
		struct storage_req rq = volume_req_of(x);
		struct storage_result res = { 0 };
		int64_t newcap = 0;

		rq.bytes = (int64_t)size;
		rq.path = v->target && v->state == V_PUBLISHED ? v->target : VSTAGING(v);
		r = x->ops->node_expand(x->h, &rq, &newcap, volume_retry_note, x, &res, err);
		volume_note_result(x, &res);
		if (r < 0) {
			if (ctl)
				nerr_prefix(err, "the controller expanded it; `expand %llu` finishes on the node",
					    (unsigned long long)size);
			return r;
		}
		pthread_mutex_lock(&v->lock);
		if (newcap)
			v->capacity = newcap;
		else if (!ctl)
			v->capacity = (int64_t)size;
		v->node_expand_to = 0;
		pthread_mutex_unlock(&v->lock);
	} else if (finish_node) {
		pthread_mutex_lock(&v->lock);
		v->node_expand_to = 0;
		pthread_mutex_unlock(&v->lock);
	}
	bnode_changed(v->node);
	return volume_checkpoint(v, STORE_LAZY, err);
}

/* modify: ControllerModifyVolume with the keys given; what the plugin
 * took is put over the mutable parameters in force and checkpointed. */
int volume_modify(struct vctx *x, char **kv, struct nerr *err)
{
	struct volume *v = x->v;
	struct storage_req rq = volume_req_of(x);
	struct storage_result res = { 0 };
	int r;

	if (!HAS_CTL(x, MODIFY_VOLUME) || !x->ops->modify)
		return nerr_set(err, ENOTSUP, "modify: plugin %s cannot change volumes (no MODIFY_VOLUME)",
				v->plugin);
	rq.mparams = kv;
	r = x->ops->modify(x->h, &rq, volume_retry_note, x, &res, err);
	volume_note_result(x, &res);
	if (r < 0)
		return r;
	pthread_mutex_lock(&v->lock);
	for (size_t i = 0; kv && kv[i] && r >= 0; i++) {
		size_t k = strcspn(kv[i], "=");
		size_t j;

		for (j = 0; v->mparams && v->mparams[j]; j++)
			if (strncmp(v->mparams[j], kv[i], k + 1) == 0)
				break;
		if (v->mparams && v->mparams[j]) {
			char *d = strdup(kv[i]);

			if (!d)
				r = -ENOMEM;
			else {
				free(v->mparams[j]);
				v->mparams[j] = d;
			}
		} else
			r = volume_strv_push(&v->mparams, kv[i]);
	}
	pthread_mutex_unlock(&v->lock);
	bnode_changed(v->node);
	if (r < 0)
		return nerr_set(err, ENOMEM, "out of memory");
	return volume_checkpoint(v, STORE_DURABLE, err);
}
