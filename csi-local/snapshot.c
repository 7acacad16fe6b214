/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * snapshot: the Controller service's snapshots: CreateSnapshot (idempotent
 * by name; the source volume frozen while its backing is copied),
 * DeleteSnapshot and ListSnapshots. The same discipline as controller.c:
 * every field checked before anything is touched, the object marked busy
 * under plugin.mu, the copy done with the lock released, the record
 * written once the snapshot is whole and removed before its data.
 * Must not know: the wire (grpc server), volumes' own RPCs.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grpc.h"
#include "macro.h"
#include "nerr.h"
#include "plugin.h"
#include "valid.h"

static Csi__V1__Snapshot *snapshot_msg(struct arena *a, const struct snap *s)
{
	Csi__V1__Snapshot *m = arena_alloc(a, sizeof(*m));
	Csi__V1__Timestamp *t = arena_alloc(a, sizeof(*t));

	if (!m || !t)
		return NULL;
	csi__v1__snapshot__init(m);
	csi__v1__timestamp__init(t);
	m->snapshot_id = arena_strdup(a, s->id);
	m->source_volume_id = arena_strdup(a, s->src);
	m->size_bytes = s->size;
	m->ready_to_use = true;
	t->seconds = s->ctime_s;
	t->nanos = s->ctime_ns;
	m->creation_time = t;
	return m->snapshot_id && m->source_volume_id ? m : NULL;
}

/* ---- snapshots ---- */

int rpc_create_snapshot(struct plugin *p, const ProtobufCMessage *m, struct arena *a,
			ProtobufCMessage **ret, struct rstat *st)
{
	const Csi__V1__CreateSnapshotRequest *req = (const void *)m;
	char from[PATH_CAP + 1], to[PATH_CAP + 1], err[512];
	int code;

	if ((code = check_id("source_volume_id", req->source_volume_id, st)))
		return code;
	if ((code = check_name("name", req->name, st)))
		return code;
	Csi__V1__CreateSnapshotResponse *resp = arena_alloc(a, sizeof(*resp));
	if (!resp)
		return OOM(st);
	csi__v1__create_snapshot_response__init(resp);
	pthread_mutex_lock(&p->mu);
	struct snap *s = store_snap_by_name(p, req->name);
	if (s) {
		if (strcmp(s->src, req->source_volume_id) != 0)
			code = rfail(st, GRPC_ALREADY_EXISTS, "snapshot %s exists, of another volume (%s)",
				     req->name, s->src);
		else if (s->busy || s->state != OBJ_READY)
			code = busy_on(st, "snapshot", s->id);
		else if (!(resp->snapshot = snapshot_msg(a, s)))
			code = OOM(st);
		pthread_mutex_unlock(&p->mu);
		if (code == GRPC_OK)
			*ret = &resp->base;
		return code;
	}
	struct vol *v = idle_vol(p, req->source_volume_id, &code, st);
	if (!v)
		return code;
	s = calloc(1, sizeof(*s));
	if (!s || !(s->name = strdup(req->name))) {
		snap_free(s);
		pthread_mutex_unlock(&p->mu);
		return OOM(st);
	}
	do
		store_new_id("snap-", s->id);
	while (store_snap(p, s->id));
	memcpy(s->src, v->id, sizeof(s->src));
	s->size = v->size;
	s->backing = v->backing;
	memcpy(s->fs_type, v->fs_type, sizeof(s->fs_type));
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	s->ctime_s = now.tv_sec;
	s->ctime_ns = (int32_t)now.tv_nsec;
	s->state = OBJ_CREATING;
	s->busy = true;
	if (store_add_snap(p, s) < 0) {
		snap_free(s);
		pthread_mutex_unlock(&p->mu);
		return OOM(st);
	}
	int r;	/* the record is written once the copy is whole (see CreateVolume) */
	v->busy = true;
	backing_path(p, v->id, v->backing, from, sizeof(from));
	backing_path(p, s->id, s->backing, to, sizeof(to));
	_cleanup_free_ char *staged = v->staged && !v->stage_block ? strdup(v->staged) : NULL;
	pthread_mutex_unlock(&p->mu);

	/* A staged image is frozen while copied, so the copy is whole. */
	int frozen = staged && s->backing == BACKING_IMAGE ? backing_freeze(staged) : -1;
	r = backing_copy(from, to, s->backing, err, sizeof(err));
	backing_thaw(frozen);

	pthread_mutex_lock(&p->mu);
	v->busy = false;
	if (r == 0) {
		s->state = OBJ_READY;
		r = store_save_snap(p, s);
		if (r < 0)
			snprintf(err, sizeof(err), "write the snapshot's record: %s", strerror(-r));
	}
	if (r < 0) {
		backing_remove(p, s->id, s->backing);
		store_drop_snap(p, s);
		pthread_mutex_unlock(&p->mu);
		return rfail(st, r == -ENOSPC ? GRPC_RESOURCE_EXHAUSTED : GRPC_INTERNAL, "%s", err);
	}
	s->busy = false;
	resp->snapshot = snapshot_msg(a, s);
	pthread_mutex_unlock(&p->mu);
	if (!resp->snapshot)
		return OOM(st);
	*ret = &resp->base;
	return GRPC_OK;
}

int rpc_delete_snapshot(struct plugin *p, const ProtobufCMessage *m, struct arena *a,
			ProtobufCMessage **ret, struct rstat *st)
{
	const Csi__V1__DeleteSnapshotRequest *req = (const void *)m;
	Csi__V1__DeleteSnapshotResponse *resp = arena_alloc(a, sizeof(*resp));
	int code;

	if ((code = check_id("snapshot_id", req->snapshot_id, st)))
		return code;
	if (!resp)
		return OOM(st);
	csi__v1__delete_snapshot_response__init(resp);
	pthread_mutex_lock(&p->mu);
	struct snap *s = store_snap(p, req->snapshot_id);
	if (!s) {
		pthread_mutex_unlock(&p->mu);
		*ret = &resp->base;
		return GRPC_OK;
	}
	if (s->busy) {
		pthread_mutex_unlock(&p->mu);
		return busy_on(st, "snapshot", s->id);
	}
	s->state = OBJ_DELETING;
	s->busy = true;
	store_unlink(p, s->id);
	pthread_mutex_unlock(&p->mu);
	int r = backing_remove(p, s->id, s->backing);
	pthread_mutex_lock(&p->mu);
	if (r < 0) {
		s->state = OBJ_READY;
		s->busy = false;
		store_save_snap(p, s);
		pthread_mutex_unlock(&p->mu);
		return rfail(st, GRPC_INTERNAL, "delete snapshot %s: %s", req->snapshot_id, strerror(-r));
	}
	store_drop_snap(p, s);
	pthread_mutex_unlock(&p->mu);
	*ret = &resp->base;
	return GRPC_OK;
}

int rpc_list_snapshots(struct plugin *p, const ProtobufCMessage *m, struct arena *a,
		       ProtobufCMessage **ret, struct rstat *st)
{
	const Csi__V1__ListSnapshotsRequest *req = (const void *)m;
	int code;

	if ((code = check_page(req->max_entries, req->starting_token, "snap-", st)))
		return code;
	Csi__V1__ListSnapshotsResponse *resp = arena_alloc(a, sizeof(*resp));
	if (!resp)
		return OOM(st);
	csi__v1__list_snapshots_response__init(resp);
	pthread_mutex_lock(&p->mu);
	size_t i = req->starting_token[0] ? store_snap_index(p, req->starting_token) : 0;
	size_t n = 0, cap;
	resp->entries = page_entries(a, i, p->nsnaps, req->max_entries, &cap);
	if (!resp->entries)
		goto oom;
	for (; i < p->nsnaps && n < cap; i++) {
		struct snap *s = p->snaps[i];

		if (s->state != OBJ_READY)
			continue;
		if (req->snapshot_id[0] && strcmp(s->id, req->snapshot_id) != 0)
			continue;
		if (req->source_volume_id[0] && strcmp(s->src, req->source_volume_id) != 0)
			continue;
		Csi__V1__ListSnapshotsResponse__Entry *e = arena_alloc(a, sizeof(*e));
		if (!e)
			goto oom;
		csi__v1__list_snapshots_response__entry__init(e);
		if (!(e->snapshot = snapshot_msg(a, s)))
			goto oom;
		resp->entries[n++] = e;
	}
	resp->n_entries = n;
	/* More left that could match: hand out where to go on. */
	if (i < p->nsnaps && !req->snapshot_id[0] && !(resp->next_token = arena_strdup(a, p->snaps[i]->id)))
		goto oom;
	pthread_mutex_unlock(&p->mu);
	*ret = &resp->base;
	return GRPC_OK;
oom:
	pthread_mutex_unlock(&p->mu);
	return OOM(st);
}
