/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * controller: the Controller service's volumes and capacity (its snapshots
 * are snapshot.c) and the field checks every service shares. Each handler checks every field
 * before it touches anything, marks the object busy under plugin.mu, does
 * the slow work (mkfs, copies) with the lock released, and records the
 * outcome. A record goes to disk once its object is whole, and is removed
 * before its data is: data without a record is what a crash in between
 * leaves, and the next start removes it. It knows records and backings,
 * not the wire.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#include "grpc.h"
#include "macro.h"
#include "nerr.h"
#include "plugin.h"
#include "valid.h"

#define DEFAULT_IMAGE_SIZE (1ll << 30)
#define ALIGN 4096

/* ---- shared checks ---- */

int check_name(const char *field, const char *v, struct rstat *st)
{
	size_t n = strlen(v);

	if (!n)
		return rfail(st, GRPC_INVALID_ARGUMENT, "%s is required", field);
	if (n > ID_MAX)
		return rfail(st, GRPC_INVALID_ARGUMENT, "%s is %zu bytes, at most %d", field, n, ID_MAX);
	if (!valid_utf8(v, n))
		return rfail(st, GRPC_INVALID_ARGUMENT, "%s is not UTF-8", field);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
			return rfail(st, GRPC_INVALID_ARGUMENT, "%s holds a control character", field);
	return GRPC_OK;
}

int check_id(const char *field, const char *v, struct rstat *st)
{
	size_t n = strlen(v);

	if (!n)
		return rfail(st, GRPC_INVALID_ARGUMENT, "%s is required", field);
	if (n > ID_MAX)
		return rfail(st, GRPC_INVALID_ARGUMENT, "%s is %zu bytes, at most %d", field, n, ID_MAX);
	if (v[0] == '.')
		return rfail(st, GRPC_INVALID_ARGUMENT, "%s must not start with '.'", field);
	for (size_t i = 0; i < n; i++) {
		char c = v[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		      || c == '.' || c == '_' || c == '-'))
			return rfail(st, GRPC_INVALID_ARGUMENT, "%s holds '%c' (allowed: [A-Za-z0-9._-])",
				     field, c >= 0x20 && c < 0x7f ? c : '?');
	}
	return GRPC_OK;
}

int check_path(const char *field, const char *v, struct rstat *st)
{
	struct nerr e = { 0 };

	if (!v[0])
		return rfail(st, GRPC_INVALID_ARGUMENT, "%s is required", field);
	if (valid_path(v, NULL, 0, &e) < 0 || strcmp(v, "/") == 0)
		return rfail(st, GRPC_INVALID_ARGUMENT, "%s: %s", field, e.msg[0] ? e.msg : "not a path we mount on");
	return GRPC_OK;
}

static bool fs_supported(const char *fs)
{
	return !strcmp(fs, "ext4") || !strcmp(fs, "ext3") || !strcmp(fs, "ext2") || !strcmp(fs, "xfs");
}

int check_capability(const char *field, const Csi__V1__VolumeCapability *cap, enum backing b,
		     const char *fs_type, struct rstat *st)
{
	if (!cap)
		return rfail(st, GRPC_INVALID_ARGUMENT, "%s is required", field);
	if (!cap->access_mode)
		return rfail(st, GRPC_INVALID_ARGUMENT, "%s.access_mode is required", field);
	if (cap->access_mode->mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__UNKNOWN
	    || cap->access_mode->mode > CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER)
		return rfail(st, GRPC_INVALID_ARGUMENT, "%s.access_mode.mode is not a known mode", field);
	switch (cap->access_type_case) {
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK:
		if (b == BACKING_DIR)
			return rfail(st, GRPC_INVALID_ARGUMENT, "%s: block access needs the image backing", field);
		return GRPC_OK;
	case CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT: {
		const char *fs = cap->mount->fs_type;

		if (b == BACKING_IMAGE && fs_type && !fs_type[0])
			return rfail(st, GRPC_INVALID_ARGUMENT, "%s: the volume was made for block access", field);
		if (b == BACKING_DIR || !fs[0])
			return GRPC_OK;	/* dir: fs_type does not apply */
		if (!fs_supported(fs))
			return rfail(st, GRPC_INVALID_ARGUMENT, "%s.mount.fs_type '%.32s' is not supported "
				     "(ext4, xfs, ext3, ext2)", field, fs);
		if (fs_type && fs_type[0] && strcmp(fs, fs_type) != 0)
			return rfail(st, GRPC_INVALID_ARGUMENT, "%s.mount.fs_type is %.32s but the volume holds %s",
				     field, fs, fs_type);
		if (fs_type && !fs_type[0])
			return rfail(st, GRPC_INVALID_ARGUMENT, "%s: the volume was made for block access", field);
		return GRPC_OK;
	}
	default:
		return rfail(st, GRPC_INVALID_ARGUMENT, "%s.access_type (block or mount) is required", field);
	}
}

static int check_caps(const char *field, size_t n, Csi__V1__VolumeCapability **caps, enum backing b,
		      const char *fs_type, struct rstat *st)
{
	char f[64];

	if (!n)
		return rfail(st, GRPC_INVALID_ARGUMENT, "%s is required", field);
	for (size_t i = 0; i < n; i++) {
		snprintf(f, sizeof(f), "%s[%zu]", field, i);
		int code = check_capability(f, caps[i], b, fs_type, st);
		if (code)
			return code;
	}
	return GRPC_OK;
}

int busy_on(struct rstat *st, const char *what, const char *id)
{
	return rfail(st, GRPC_ABORTED, "an operation is pending on %s %s", what, id);
}

/* Volume id, found and idle, with plugin.mu held; NULL with the lock
 * released and *code set otherwise. */
struct vol *idle_vol(struct plugin *p, const char *id, int *code, struct rstat *st)
{
	struct vol *v = store_vol(p, id);

	if (!v) {
		pthread_mutex_unlock(&p->mu);
		*code = rfail(st, GRPC_NOT_FOUND, "volume %s does not exist", id);
		return NULL;
	}
	if (v->busy) {
		pthread_mutex_unlock(&p->mu);
		*code = busy_on(st, "volume", v->id);
		return NULL;
	}
	return v;
}

/* ---- replies ---- */

static Csi__V1__Volume *volume_msg(struct arena *a, const struct vol *v)
{
	Csi__V1__Volume *m = arena_alloc(a, sizeof(*m));
	Csi__V1__Volume__VolumeContextEntry *e = arena_alloc(a, sizeof(*e));
	Csi__V1__Volume__VolumeContextEntry **ev = arena_alloc(a, sizeof(*ev));

	if (!m || !e || !ev)
		return NULL;
	csi__v1__volume__init(m);
	csi__v1__volume__volume_context_entry__init(e);
	m->volume_id = arena_strdup(a, v->id);
	m->capacity_bytes = v->size;
	e->key = "backing";
	e->value = (char *)backing_to_string(v->backing);
	ev[0] = e;
	m->n_volume_context = 1;
	m->volume_context = ev;
	if (v->backing == BACKING_DIR) {
		/* whether the size is a limit or a figure */
		Csi__V1__Volume__VolumeContextEntry *q = arena_alloc(a, sizeof(*q));
		Csi__V1__Volume__VolumeContextEntry **ev2 = arena_alloc(a, 2 * sizeof(*ev2));

		if (!q || !ev2)
			return NULL;
		csi__v1__volume__volume_context_entry__init(q);
		q->key = "quota";
		q->value = v->quota ? "project" : "none";
		ev2[0] = e;
		ev2[1] = q;
		m->volume_context = ev2;
		m->n_volume_context = 2;
	}
	if (v->src[0]) {
		Csi__V1__VolumeContentSource *cs = arena_alloc(a, sizeof(*cs));

		if (!cs)
			return NULL;
		csi__v1__volume_content_source__init(cs);
		if (strncmp(v->src, "snap-", 5) == 0) {
			Csi__V1__VolumeContentSource__SnapshotSource *s = arena_alloc(a, sizeof(*s));

			if (!s)
				return NULL;
			csi__v1__volume_content_source__snapshot_source__init(s);
			s->snapshot_id = arena_strdup(a, v->src);
			cs->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
			cs->snapshot = s;
		} else {
			Csi__V1__VolumeContentSource__VolumeSource *s = arena_alloc(a, sizeof(*s));

			if (!s)
				return NULL;
			csi__v1__volume_content_source__volume_source__init(s);
			s->volume_id = arena_strdup(a, v->src);
			cs->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME;
			cs->volume = s;
		}
		m->content_source = cs;
	}
	if (!m->volume_id)
		return NULL;
	return m;
}

/* ---- CreateVolume ---- */

static int64_t avail_bytes(struct plugin *p)
{
	struct statvfs sv;

	if (statvfs(p->data_dir, &sv) < 0)
		return -1;
	return (int64_t)sv.f_bavail * (int64_t)sv.f_frsize;
}

/* Pick a size in [required, limit] (0 = unset) for backing b. */
static int pick_size(struct plugin *p, const Csi__V1__CapacityRange *cr, enum backing b,
		     const char *fs_type, int64_t floor, int64_t *ret, struct rstat *st)
{
	int64_t req = cr ? cr->required_bytes : 0, lim = cr ? cr->limit_bytes : 0, min, size;

	if (req < 0 || lim < 0)
		return rfail(st, GRPC_INVALID_ARGUMENT, "capacity_range: bytes must not be negative");
	if (lim && req > lim)
		return rfail(st, GRPC_OUT_OF_RANGE, "capacity_range: required_bytes %" PRId64
			     " exceeds limit_bytes %" PRId64, req, lim);
	backing_min_size(b, fs_type, &min);
	if (floor > min)
		min = floor;
	if (b == BACKING_DIR)
		size = req > min ? req : min;
	else {
		size = req ? req : DEFAULT_IMAGE_SIZE;
		if (lim && size > lim)
			size = lim;
		if (size < min)
			size = min;
		size = (size + ALIGN - 1) / ALIGN * ALIGN;
		if (lim && size > lim)
			size = lim / ALIGN * ALIGN;
	}
	if (lim && size > lim)
		return rfail(st, GRPC_OUT_OF_RANGE, "capacity_range: the volume needs at least %" PRId64
			     " bytes, above limit_bytes %" PRId64, size, lim);
	if (size < req || (b == BACKING_IMAGE && size < min))
		return rfail(st, GRPC_OUT_OF_RANGE, "capacity_range: no size of %s in range "
			     "(at least %" PRId64 " bytes)", fs_type[0] ? fs_type : "this backing", min);
	int64_t avail = avail_bytes(p);
	if (avail >= 0 && size > avail)
		return rfail(st, GRPC_OUT_OF_RANGE, "capacity_range: %" PRId64 " bytes requested, %"
			     PRId64 " available under %s", size, avail, p->base);
	*ret = size;
	return GRPC_OK;
}

int rpc_create_volume(struct plugin *p, const ProtobufCMessage *m, struct arena *a,
		      ProtobufCMessage **ret, struct rstat *st)
{
	const Csi__V1__CreateVolumeRequest *req = (const void *)m;
	char fs_type[16] = "", src_id[24] = "", err[512], src_path[PATH_CAP + 1];
	bool block = false;
	int code;

	if ((code = check_name("name", req->name, st)))
		return code;
	if ((code = check_caps("volume_capabilities", req->n_volume_capabilities,
			       req->volume_capabilities, p->backing, NULL, st)))
		return code;
	for (size_t i = 0; i < req->n_volume_capabilities; i++) {
		const Csi__V1__VolumeCapability *c = req->volume_capabilities[i];

		if (c->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK)
			block = true;
		else if (p->backing == BACKING_IMAGE && c->mount->fs_type[0]) {
			if (fs_type[0] && strcmp(fs_type, c->mount->fs_type) != 0)
				return rfail(st, GRPC_INVALID_ARGUMENT, "volume_capabilities ask for two "
					     "filesystems (%s, %.32s)", fs_type, c->mount->fs_type);
			snprintf(fs_type, sizeof(fs_type), "%s", c->mount->fs_type);
		}
	}
	bool mount = false;
	for (size_t i = 0; i < req->n_volume_capabilities; i++)
		mount |= req->volume_capabilities[i]->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	if (p->backing == BACKING_IMAGE && mount && !fs_type[0])
		snprintf(fs_type, sizeof(fs_type), "ext4");
	if (block && mount && p->backing == BACKING_IMAGE)
		return rfail(st, GRPC_INVALID_ARGUMENT, "volume_capabilities mix block and mount access");
	const Csi__V1__VolumeContentSource *cs = req->volume_content_source;
	if (cs) {
		if (cs->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT) {
			if ((code = check_id("volume_content_source.snapshot.snapshot_id", cs->snapshot->snapshot_id, st)))
				return code;
			snprintf(src_id, sizeof(src_id), "%.23s", cs->snapshot->snapshot_id);
			if (strlen(cs->snapshot->snapshot_id) > 23 || strncmp(src_id, "snap-", 5) != 0)
				return rfail(st, GRPC_NOT_FOUND, "snapshot %.128s does not exist", cs->snapshot->snapshot_id);
		} else if (cs->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME) {
			if ((code = check_id("volume_content_source.volume.volume_id", cs->volume->volume_id, st)))
				return code;
			snprintf(src_id, sizeof(src_id), "%.23s", cs->volume->volume_id);
			if (strlen(cs->volume->volume_id) > 23 || strncmp(src_id, "vol-", 4) != 0)
				return rfail(st, GRPC_NOT_FOUND, "volume %.128s does not exist", cs->volume->volume_id);
		} else
			return rfail(st, GRPC_INVALID_ARGUMENT, "volume_content_source: snapshot or volume is required");
	}
	_cleanup_free_ char *params = store_params(req->n_parameters, req->parameters);
	if (!params)
		return OOM(st);

	pthread_mutex_lock(&p->mu);
	struct vol *v = store_vol_by_name(p, req->name);
	if (v) {
		/* Idempotent by name: the same request answers the same volume. */
		const Csi__V1__CapacityRange *cr = req->capacity_range;
		int64_t rq = cr ? cr->required_bytes : 0, lim = cr ? cr->limit_bytes : 0;

		if (v->busy || v->state != OBJ_READY)
			code = busy_on(st, "volume", v->id);
		else if ((rq && v->size < rq) || (lim && v->size > lim))
			code = rfail(st, GRPC_ALREADY_EXISTS, "volume %s exists with %" PRId64 " bytes, "
				     "outside the capacity_range asked", req->name, v->size);
		else if (strcmp(v->params, params) != 0)
			code = rfail(st, GRPC_ALREADY_EXISTS, "volume %s exists with other parameters", req->name);
		else if (strcmp(v->src, src_id) != 0)
			code = rfail(st, GRPC_ALREADY_EXISTS, "volume %s exists with another content source", req->name);
		else if (p->backing == BACKING_IMAGE && (block ? v->fs_type[0] != 0 : (fs_type[0] && strcmp(v->fs_type, fs_type) != 0)))
			code = rfail(st, GRPC_ALREADY_EXISTS, "volume %s exists for another access type or filesystem", req->name);
		else {
			Csi__V1__CreateVolumeResponse *r = arena_alloc(a, sizeof(*r));

			if (r)
				csi__v1__create_volume_response__init(r);
			if (!r || !(r->volume = volume_msg(a, v)))
				code = OOM(st);
			else
				*ret = &r->base;
		}
		pthread_mutex_unlock(&p->mu);
		return code;
	}
	if (p->nvols >= p->max_volumes) {
		pthread_mutex_unlock(&p->mu);
		return rfail(st, GRPC_RESOURCE_EXHAUSTED, "this plugin holds %zu volumes, its maximum", p->nvols);
	}
	/* The source, busy while copied. */
	int64_t floor = 0;
	struct vol *sv = NULL;
	struct snap *ss = NULL;
	enum backing src_backing = p->backing;
	if (src_id[0] == 's') {
		ss = store_snap(p, src_id);
		if (!ss) {
			pthread_mutex_unlock(&p->mu);
			return rfail(st, GRPC_NOT_FOUND, "snapshot %s does not exist", src_id);
		}
		if (ss->busy) {
			pthread_mutex_unlock(&p->mu);
			return busy_on(st, "snapshot", src_id);
		}
		floor = ss->size;
		src_backing = ss->backing;
		if (p->backing == BACKING_IMAGE)
			snprintf(fs_type, sizeof(fs_type), "%s", block ? "" : ss->fs_type);
	} else if (src_id[0] == 'v') {
		if (!(sv = idle_vol(p, src_id, &code, st)))
			return code;
		floor = sv->size;
		src_backing = sv->backing;
		if (p->backing == BACKING_IMAGE)
			snprintf(fs_type, sizeof(fs_type), "%s", block ? "" : sv->fs_type);
	}
	if (src_id[0] && src_backing != p->backing) {
		pthread_mutex_unlock(&p->mu);
		return rfail(st, GRPC_INVALID_ARGUMENT, "volume_content_source %s is a %s, this plugin makes %s volumes",
			     src_id, backing_to_string(src_backing), backing_to_string(p->backing));
	}
	if (src_id[0] && p->backing == BACKING_IMAGE) {
		/* the copy keeps its filesystem: the capability must match */
		for (size_t i = 0; i < req->n_volume_capabilities; i++)
			if ((code = check_capability("volume_capabilities", req->volume_capabilities[i],
						     p->backing, fs_type, st))) {
				pthread_mutex_unlock(&p->mu);
				return code;
			}
	}
	int64_t size = 0;
	if ((code = pick_size(p, req->capacity_range, p->backing, fs_type, floor, &size, st))) {
		pthread_mutex_unlock(&p->mu);
		return code;
	}
	v = calloc(1, sizeof(*v));
	if (!v || !(v->name = strdup(req->name)) || !(v->params = TAKE_PTR(params))
	    || (req->n_mutable_parameters
		&& !(v->mparams = store_params_merge(NULL, req->n_mutable_parameters,
						     (void *)req->mutable_parameters)))) {
		vol_free(v);
		pthread_mutex_unlock(&p->mu);
		return OOM(st);
	}
	do
		store_new_id("vol-", v->id);
	while (store_vol(p, v->id));
	v->size = size;
	v->fs_size = floor && floor < size ? floor : size;
	v->backing = p->backing;
	snprintf(v->fs_type, sizeof(v->fs_type), "%s", fs_type);
	memcpy(v->src, src_id, sizeof(v->src));
	v->state = OBJ_CREATING;
	v->busy = true;
	if (store_add_vol(p, v) < 0) {
		vol_free(v);
		pthread_mutex_unlock(&p->mu);
		return OOM(st);
	}
	/* No record yet: data a crash leaves without one is removed at the
	 * next start, so one record write, once the volume is whole, will do. */
	int r;
	if (sv)
		sv->busy = true;
	if (ss)
		ss->busy = true;
	if (src_id[0])
		backing_path(p, src_id, src_backing, src_path, sizeof(src_path));
	_cleanup_free_ char *src_staged = sv && sv->staged && !sv->stage_block && sv->backing == BACKING_IMAGE
		? strdup(sv->staged) : NULL;
	pthread_mutex_unlock(&p->mu);

	int frozen = src_staged ? backing_freeze(src_staged) : -1;
	r = backing_create(p, v, src_id[0] ? src_path : NULL, src_backing, err, sizeof(err));
	backing_thaw(frozen);
	if (r == 0 && v->backing == BACKING_DIR) {
		char dpath[PATH_CAP + 1];

		backing_path(p, v->id, v->backing, dpath, sizeof(dpath));
		r = quota_set(dpath, v->id, v->size, err, sizeof(err));
		v->quota = r > 0;
		if (r > 0)
			r = 0;
	}

	pthread_mutex_lock(&p->mu);
	if (sv)
		sv->busy = false;
	if (ss)
		ss->busy = false;
	if (r == 0) {
		v->state = OBJ_READY;
		r = store_save_vol(p, v);
		if (r < 0)
			snprintf(err, sizeof(err), "write the volume's record: %s", strerror(-r));
	}
	if (r < 0) {
		backing_remove(p, v->id, v->backing);
		store_drop_vol(p, v);
		pthread_mutex_unlock(&p->mu);
		return rfail(st, r == -ENOSPC ? GRPC_RESOURCE_EXHAUSTED : GRPC_INTERNAL, "%s", err);
	}
	v->busy = false;
	Csi__V1__CreateVolumeResponse *resp = arena_alloc(a, sizeof(*resp));
	if (resp) {
		csi__v1__create_volume_response__init(resp);
		resp->volume = volume_msg(a, v);
	}
	pthread_mutex_unlock(&p->mu);
	if (!resp || !resp->volume)
		return OOM(st);
	*ret = &resp->base;
	return GRPC_OK;
}

/* ---- DeleteVolume ---- */

int rpc_delete_volume(struct plugin *p, const ProtobufCMessage *m, struct arena *a,
		      ProtobufCMessage **ret, struct rstat *st)
{
	const Csi__V1__DeleteVolumeRequest *req = (const void *)m;
	Csi__V1__DeleteVolumeResponse *resp = arena_alloc(a, sizeof(*resp));
	int code;

	if ((code = check_id("volume_id", req->volume_id, st)))
		return code;
	if (!resp)
		return OOM(st);
	csi__v1__delete_volume_response__init(resp);
	pthread_mutex_lock(&p->mu);
	struct vol *v = store_vol(p, req->volume_id);
	if (!v) {
		pthread_mutex_unlock(&p->mu);
		*ret = &resp->base;
		return GRPC_OK;	/* already gone: the spec's idempotent OK */
	}
	if (v->busy) {
		pthread_mutex_unlock(&p->mu);
		return busy_on(st, "volume", v->id);
	}
	if (v->staged || v->ntargets) {
		code = rfail(st, GRPC_FAILED_PRECONDITION, "volume %s is still %s at %s", v->id,
			     v->ntargets ? "published" : "staged", v->ntargets ? v->targets[0].path : v->staged);
		pthread_mutex_unlock(&p->mu);
		return code;
	}
	/* The record goes first: data a crash leaves without one is removed
	 * at the next start. */
	v->state = OBJ_DELETING;
	v->busy = true;
	store_unlink(p, v->id);
	pthread_mutex_unlock(&p->mu);
	int r = backing_remove(p, v->id, v->backing);
	pthread_mutex_lock(&p->mu);
	if (r < 0) {
		v->state = OBJ_READY;
		v->busy = false;
		store_save_vol(p, v);
		pthread_mutex_unlock(&p->mu);
		return rfail(st, GRPC_INTERNAL, "delete volume %s: %s", req->volume_id, strerror(-r));
	}
	store_drop_vol(p, v);
	pthread_mutex_unlock(&p->mu);
	*ret = &resp->base;
	return GRPC_OK;
}

/* ---- ValidateVolumeCapabilities ---- */

int rpc_validate_volume_capabilities(struct plugin *p, const ProtobufCMessage *m, struct arena *a,
				     ProtobufCMessage **ret, struct rstat *st)
{
	const Csi__V1__ValidateVolumeCapabilitiesRequest *req = (const void *)m;
	struct rstat why = { 0 };
	char fs_type[16];
	int code;

	if ((code = check_id("volume_id", req->volume_id, st)))
		return code;
	if (!req->n_volume_capabilities)
		return rfail(st, GRPC_INVALID_ARGUMENT, "volume_capabilities is required");
	for (size_t i = 0; i < req->n_volume_capabilities; i++) {
		const Csi__V1__VolumeCapability *c = req->volume_capabilities[i];

		if (!c || !c->access_mode || c->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE__NOT_SET)
			return rfail(st, GRPC_INVALID_ARGUMENT, "volume_capabilities[%zu] needs access_type and access_mode", i);
	}
	pthread_mutex_lock(&p->mu);
	struct vol *v = store_vol(p, req->volume_id);
	if (!v) {
		pthread_mutex_unlock(&p->mu);
		return rfail(st, GRPC_NOT_FOUND, "volume %s does not exist", req->volume_id);
	}
	snprintf(fs_type, sizeof(fs_type), "%s", v->fs_type);
	enum backing b = v->backing;
	pthread_mutex_unlock(&p->mu);

	Csi__V1__ValidateVolumeCapabilitiesResponse *resp = arena_alloc(a, sizeof(*resp));
	if (!resp)
		return OOM(st);
	csi__v1__validate_volume_capabilities_response__init(resp);
	if (check_caps("volume_capabilities", req->n_volume_capabilities, req->volume_capabilities,
		       b, b == BACKING_IMAGE ? fs_type : NULL, &why) != GRPC_OK) {
		resp->message = arena_strdup(a, why.msg);
		if (!resp->message)
			return OOM(st);
	} else {
		Csi__V1__ValidateVolumeCapabilitiesResponse__Confirmed *c = arena_alloc(a, sizeof(*c));

		if (!c)
			return OOM(st);
		csi__v1__validate_volume_capabilities_response__confirmed__init(c);
		/* Borrowed from the request, which outlives the packing. */
		c->n_volume_capabilities = req->n_volume_capabilities;
		c->volume_capabilities = req->volume_capabilities;
		resp->confirmed = c;
	}
	*ret = &resp->base;
	return GRPC_OK;
}

/* ---- paging ---- */

/* A token is the id to start from: ours are "vol-"/"snap-" + 16 hex. */
static int parse_token(const char *tok, const char *prefix, struct rstat *st)
{
	size_t pl = strlen(prefix);

	if (!tok[0])
		return GRPC_OK;
	if (strlen(tok) != pl + 16 || strncmp(tok, prefix, pl) != 0
	    || strspn(tok + pl, "0123456789abcdef") != 16)
		return rfail(st, GRPC_ABORTED, "starting_token '%.64s' is not a token of this plugin", tok);
	return GRPC_OK;
}

/* The paging fields of a List request, checked. */
int check_page(int32_t max_entries, const char *tok, const char *prefix, struct rstat *st)
{
	if (max_entries < 0)
		return rfail(st, GRPC_INVALID_ARGUMENT, "max_entries must not be negative");
	return parse_token(tok, prefix, st);
}

/* Room for the entries of a page from index i of total objects: at most
 * max_entries (0 = all) pointers, their number in *ret_cap. */
void *page_entries(struct arena *a, size_t i, size_t total, int32_t max_entries, size_t *ret_cap)
{
	size_t cap = total - i;

	if (max_entries && (size_t)max_entries < cap)
		cap = (size_t)max_entries;
	*ret_cap = cap;
	return arena_alloc(a, (cap ? cap : 1) * sizeof(void *));
}

int rpc_list_volumes(struct plugin *p, const ProtobufCMessage *m, struct arena *a,
		     ProtobufCMessage **ret, struct rstat *st)
{
	const Csi__V1__ListVolumesRequest *req = (const void *)m;
	int code;

	if ((code = check_page(req->max_entries, req->starting_token, "vol-", st)))
		return code;
	Csi__V1__ListVolumesResponse *resp = arena_alloc(a, sizeof(*resp));
	if (!resp)
		return OOM(st);
	csi__v1__list_volumes_response__init(resp);
	pthread_mutex_lock(&p->mu);
	size_t i = req->starting_token[0] ? store_vol_index(p, req->starting_token) : 0;
	size_t n = 0, cap;
	resp->entries = page_entries(a, i, p->nvols, req->max_entries, &cap);
	if (!resp->entries)
		goto oom;
	for (; i < p->nvols && n < cap; i++) {
		struct vol *v = p->vols[i];

		if (v->state != OBJ_READY)
			continue;
		Csi__V1__ListVolumesResponse__Entry *e = arena_alloc(a, sizeof(*e));
		if (!e)
			goto oom;
		csi__v1__list_volumes_response__entry__init(e);
		if (!(e->volume = volume_msg(a, v)))
			goto oom;
		resp->entries[n++] = e;
	}
	resp->n_entries = n;
	if (i < p->nvols && !(resp->next_token = arena_strdup(a, p->vols[i]->id)))
		goto oom;
	pthread_mutex_unlock(&p->mu);
	*ret = &resp->base;
	return GRPC_OK;
oom:
	pthread_mutex_unlock(&p->mu);
	return OOM(st);
}

/* ---- GetCapacity ---- */

int rpc_get_capacity(struct plugin *p, const ProtobufCMessage *m, struct arena *a,
		     ProtobufCMessage **ret, struct rstat *st)
{
	const Csi__V1__GetCapacityRequest *req = (const void *)m;
	struct rstat why = { 0 };
	Csi__V1__GetCapacityResponse *resp = arena_alloc(a, sizeof(*resp));
	Csi__V1__Int64Value *max = arena_alloc(a, sizeof(*max)), *min = arena_alloc(a, sizeof(*min));

	if (!resp || !max || !min)
		return OOM(st);
	csi__v1__get_capacity_response__init(resp);
	csi__v1__int64_value__init(max);
	csi__v1__int64_value__init(min);
	int64_t avail = avail_bytes(p);
	if (avail < 0)
		return rfail(st, GRPC_INTERNAL, "statvfs %s: %s", p->data_dir, strerror(errno));
	/* Capabilities we cannot serve leave no capacity for them. */
	if (req->n_volume_capabilities
	    && check_caps("volume_capabilities", req->n_volume_capabilities, req->volume_capabilities,
			  p->backing, NULL, &why) != GRPC_OK)
		avail = 0;
	resp->available_capacity = avail;
	max->value = avail;
	resp->maximum_volume_size = max;
	if (p->backing == BACKING_IMAGE) {
		const char *fs = "ext4";

		for (size_t i = 0; i < req->n_volume_capabilities; i++) {
			const Csi__V1__VolumeCapability *c = req->volume_capabilities[i];

			if (c && c->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT && c->mount->fs_type[0])
				fs = c->mount->fs_type;
		}
		backing_min_size(p->backing, fs, &min->value);
		resp->minimum_volume_size = min;
	}
	*ret = &resp->base;
	return GRPC_OK;
}

/* ---- ControllerExpandVolume ---- */

int rpc_controller_expand_volume(struct plugin *p, const ProtobufCMessage *m, struct arena *a,
				 ProtobufCMessage **ret, struct rstat *st)
{
	const Csi__V1__ControllerExpandVolumeRequest *req = (const void *)m;
	const Csi__V1__CapacityRange *cr = req->capacity_range;
	char err[512];
	int code;

	if ((code = check_id("volume_id", req->volume_id, st)))
		return code;
	if (!cr)
		return rfail(st, GRPC_INVALID_ARGUMENT, "capacity_range is required");
	if (cr->required_bytes < 0 || cr->limit_bytes < 0)
		return rfail(st, GRPC_INVALID_ARGUMENT, "capacity_range: bytes must not be negative");
	if (cr->limit_bytes && cr->required_bytes > cr->limit_bytes)
		return rfail(st, GRPC_OUT_OF_RANGE, "capacity_range is not a range");
	if (req->volume_capability && (code = check_capability("volume_capability", req->volume_capability,
								p->backing, NULL, st)))
		return code;
	Csi__V1__ControllerExpandVolumeResponse *resp = arena_alloc(a, sizeof(*resp));
	if (!resp)
		return OOM(st);
	csi__v1__controller_expand_volume_response__init(resp);
	pthread_mutex_lock(&p->mu);
	struct vol *v = idle_vol(p, req->volume_id, &code, st);
	if (!v)
		return code;
	int64_t want = cr->required_bytes ? cr->required_bytes : cr->limit_bytes;
	if (v->backing == BACKING_IMAGE)
		want = (want + ALIGN - 1) / ALIGN * ALIGN;
	if (cr->limit_bytes && want > cr->limit_bytes)
		want = cr->limit_bytes;
	if (want <= v->size) {
		/* Nothing to grow (a repeated call, or a smaller size: we
		 * never shrink). */
		if (cr->limit_bytes && v->size > cr->limit_bytes) {
			code = rfail(st, GRPC_OUT_OF_RANGE, "volume %s is %" PRId64 " bytes, above limit_bytes; "
				     "volumes do not shrink", v->id, v->size);
			pthread_mutex_unlock(&p->mu);
			return code;
		}
		resp->capacity_bytes = v->size;
		resp->node_expansion_required = v->backing == BACKING_IMAGE && v->fs_size < v->size;
		pthread_mutex_unlock(&p->mu);
		*ret = &resp->base;
		return GRPC_OK;
	}
	int64_t avail = avail_bytes(p);
	if (avail >= 0 && want - v->size > avail) {
		code = rfail(st, GRPC_OUT_OF_RANGE, "%" PRId64 " more bytes asked, %" PRId64 " available",
			     want - v->size, avail);
		pthread_mutex_unlock(&p->mu);
		return code;
	}
	v->busy = true;
	pthread_mutex_unlock(&p->mu);
	int r = backing_grow(p, v, want, err, sizeof(err));
	if (r == 0 && v->backing == BACKING_DIR && v->quota) {
		char dpath[PATH_CAP + 1];

		backing_path(p, v->id, v->backing, dpath, sizeof(dpath));
		r = quota_set(dpath, v->id, want, err, sizeof(err));
		if (r > 0)
			r = 0;
	}
	pthread_mutex_lock(&p->mu);
	if (r == 0) {
		int64_t old = v->size;

		v->size = want;
		if (v->backing == BACKING_DIR)
			v->fs_size = want;
		r = store_save_vol(p, v);
		if (r < 0) {
			v->size = old;
			snprintf(err, sizeof(err), "write the volume's record: %s", strerror(-r));
		}
	}
	v->busy = false;
	resp->capacity_bytes = v->size;
	resp->node_expansion_required = v->backing == BACKING_IMAGE;
	pthread_mutex_unlock(&p->mu);
	if (r < 0)
		return rfail(st, GRPC_INTERNAL, "%s", err);
	*ret = &resp->base;
	return GRPC_OK;
}

/* ---- ControllerGetVolume, ControllerModifyVolume ---- */

/* The condition of v's data: there and whole. why[0] is 0 when normal.
 * Called with mu held (reads the record) and stats the data. */
static void vol_condition(struct plugin *p, const struct vol *v, char *why, size_t whysz)
{
	char data[PATH_CAP + 1];
	struct stat ds;

	why[0] = '\0';
	backing_path(p, v->id, v->backing, data, sizeof(data));
	if (lstat(data, &ds) < 0)
		snprintf(why, whysz, "the backing %.400s is missing: %s", data, strerror(errno));
	else if (v->backing == BACKING_DIR && !S_ISDIR(ds.st_mode))
		snprintf(why, whysz, "the backing %.400s is not a directory", data);
	else if (v->backing == BACKING_IMAGE && (!S_ISREG(ds.st_mode) || ds.st_size < v->size))
		snprintf(why, whysz, "the backing image %.400s is damaged (%lld bytes, %" PRId64 " expected)",
			 data, (long long)ds.st_size, v->size);
}

int rpc_controller_get_volume(struct plugin *p, const ProtobufCMessage *m, struct arena *a,
			      ProtobufCMessage **ret, struct rstat *st)
{
	const Csi__V1__ControllerGetVolumeRequest *req = (const void *)m;
	Csi__V1__ControllerGetVolumeResponse *resp = arena_alloc(a, sizeof(*resp));
	Csi__V1__ControllerGetVolumeResponse__VolumeStatus *vs = arena_alloc(a, sizeof(*vs));
	Csi__V1__VolumeCondition *cond = arena_alloc(a, sizeof(*cond));
	char why[600];
	int code;

	if ((code = check_id("volume_id", req->volume_id, st)))
		return code;
	if (!resp || !vs || !cond)
		return OOM(st);
	csi__v1__controller_get_volume_response__init(resp);
	csi__v1__controller_get_volume_response__volume_status__init(vs);
	csi__v1__volume_condition__init(cond);
	pthread_mutex_lock(&p->mu);
	struct vol *v = store_vol(p, req->volume_id);
	if (!v || v->state != OBJ_READY) {
		pthread_mutex_unlock(&p->mu);
		return rfail(st, GRPC_NOT_FOUND, "volume %s does not exist", req->volume_id);
	}
	vol_condition(p, v, why, sizeof(why));
	resp->volume = volume_msg(a, v);
	if (v->staged || v->ntargets) {
		char **ids = arena_alloc(a, sizeof(*ids));

		if (ids && (ids[0] = arena_strdup(a, p->node_id))) {
			vs->published_node_ids = ids;
			vs->n_published_node_ids = 1;
		} else
			resp->volume = NULL;
	}
	pthread_mutex_unlock(&p->mu);
	cond->abnormal = why[0] != 0;
	cond->message = arena_strdup(a, why[0] ? why : "healthy");
	vs->volume_condition = cond;
	resp->status = vs;
	if (!resp->volume || !cond->message)
		return OOM(st);
	*ret = &resp->base;
	return GRPC_OK;
}

int rpc_controller_modify_volume(struct plugin *p, const ProtobufCMessage *m, struct arena *a,
				 ProtobufCMessage **ret, struct rstat *st)
{
	const Csi__V1__ControllerModifyVolumeRequest *req = (const void *)m;
	Csi__V1__ControllerModifyVolumeResponse *resp = arena_alloc(a, sizeof(*resp));
	int code;

	if ((code = check_id("volume_id", req->volume_id, st)))
		return code;
	if (!req->n_mutable_parameters)
		return rfail(st, GRPC_INVALID_ARGUMENT, "mutable_parameters is required");
	for (size_t i = 0; i < req->n_mutable_parameters; i++) {
		char f[64];

		snprintf(f, sizeof(f), "mutable_parameters[%zu].key", i);
		if ((code = check_name(f, req->mutable_parameters[i]->key, st)))
			return code;
		if (strlen(req->mutable_parameters[i]->value) > ID_MAX)
			return rfail(st, GRPC_INVALID_ARGUMENT, "mutable_parameters[%s] is over %d bytes",
				     req->mutable_parameters[i]->key, ID_MAX);
	}
	if (!resp)
		return OOM(st);
	csi__v1__controller_modify_volume_response__init(resp);
	pthread_mutex_lock(&p->mu);
	struct vol *v = idle_vol(p, req->volume_id, &code, st);
	if (!v)
		return code;
	char *merged = store_params_merge(v->mparams, req->n_mutable_parameters, (void *)req->mutable_parameters);
	if (!merged) {
		pthread_mutex_unlock(&p->mu);
		return OOM(st);
	}
	char *old = v->mparams;
	v->mparams = merged;
	int r = store_save_vol(p, v);
	if (r < 0) {
		v->mparams = old;
		free(merged);
		pthread_mutex_unlock(&p->mu);
		return rfail(st, GRPC_INTERNAL, "write the volume's record: %s", strerror(-r));
	}
	free(old);
	pthread_mutex_unlock(&p->mu);
	*ret = &resp->base;
	return GRPC_OK;
}
