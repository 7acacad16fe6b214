/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * node: the Node service's volume calls: stage (a bind mount of the
 * volume's directory, or its image attached to a loop device and mounted),
 * publish (a bind mount of the staging path, or of the loop device for
 * block access, readonly and mount flags applied), their undoing, stats
 * with the volume's condition, and growing a filesystem online. Checks
 * come first; the object is busy while its mounts change; the record
 * names every staged and published path so a restarted plugin knows them,
 * and a stage or publish the record says is done is checked against the
 * mount table first (a reboot leaves the records and takes the mounts).
 * It knows records and backings, not the wire.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "grpc.h"
#include "macro.h"
#include "plugin.h"

static int busy(struct rstat *st, const char *id)
{
	return rfail(st, GRPC_ABORTED, "an operation is pending on volume %s", id);
}

static bool is_block(const Csi__V1__VolumeCapability *c)
{
	return c->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
}

static int flags_of(const Csi__V1__VolumeCapability *c, unsigned long *f, char *data, size_t datasz,
		    struct rstat *st)
{
	char err[256];

	*f = 0;
	data[0] = '\0';
	if (is_block(c))
		return GRPC_OK;
	if (backing_mount_flags(c->mount->n_mount_flags, c->mount->mount_flags, f, data, datasz,
				err, sizeof(err)) < 0)
		return rfail(st, GRPC_INVALID_ARGUMENT, "volume_capability.mount.mount_flags: %s", err);
	return GRPC_OK;
}

/* Write v's record; on failure say so in err. */
static int save(struct plugin *p, struct vol *v, char *err, size_t errsz)
{
	int r = store_save_vol(p, v);

	if (r < 0)
		snprintf(err, errsz, "write the volume's record: %s", strerror(-r));
	return r;
}

/* The end of a handler: release mu and answer resp if all went well. */
static int finish(struct plugin *p, int code, ProtobufCMessage *resp, ProtobufCMessage **ret)
{
	pthread_mutex_unlock(&p->mu);
	if (code == GRPC_OK)
		*ret = resp;
	return code;
}

/* Take v for a change of its mounts: NOT_FOUND, ABORTED, or OK with
 * *ret_v busy. Called with mu held. */
static int take(struct plugin *p, const char *id, struct vol **ret_v, struct rstat *st)
{
	struct vol *v = store_vol(p, id);

	if (!v || v->state != OBJ_READY)
		return rfail(st, GRPC_NOT_FOUND, "volume %s does not exist", id);
	if (v->busy)
		return busy(st, id);
	*ret_v = v;
	return GRPC_OK;
}

/* ---- records against the mount table ---- */

/* The record names mounts that are not there (a reboot took them, or an
 * unmount behind the plugin's back): a stage or publish must not answer
 * "done" on the record's word. Targets that are not mounts of the
 * volume's data are dropped from the record; a stage of which nothing is
 * left (STAGE_GONE) too, so the call makes it anew. Saved when it
 * changed. Called with mu held, v taken. */
static void forget_what_is_gone(struct plugin *p, struct vol *v, int stage)
{
	bool changed = false;

	for (unsigned i = 0; i < v->ntargets;) {
		struct target *t = &v->targets[i];

		if (backing_target_present(p, v, t)) {
			i++;
			continue;
		}
		fprintf(stderr, "nodefs-csi-local: volume %s: recorded as published at %s, but "
			"that is not a mount of it (a reboot?): forgotten, published again on request\n",
			v->id, t->path);
		free(t->path);
		*t = v->targets[--v->ntargets];
		changed = true;
	}
	if (v->staged && stage == STAGE_GONE) {
		fprintf(stderr, "nodefs-csi-local: volume %s: recorded as staged at %s, but nothing of "
			"that stage is left (a reboot?): forgotten, staged again on request\n",
			v->id, v->staged);
		free(v->staged);
		v->staged = NULL;
		v->loopdev[0] = '\0';
		v->access_mode = 0;
		v->stage_block = false;
		changed = true;
	}
	if (changed && store_save_vol(p, v) < 0)
		fprintf(stderr, "nodefs-csi-local: volume %s: cannot write its record\n", v->id);
}

static void *empty(struct arena *a, size_t n, void (*init)(void *))
{
	void *m = arena_alloc(a, n);

	if (m)
		init(m);
	return m;
}
#define EMPTY(a, T, fn) ((T *)empty(a, sizeof(T), (void (*)(void *))fn))

/* ---- stage ---- */

int rpc_node_stage_volume(struct plugin *p, const ProtobufCMessage *m, struct arena *a,
			  ProtobufCMessage **ret, struct rstat *st)
{
	const Csi__V1__NodeStageVolumeRequest *req = (const void *)m;
	const Csi__V1__VolumeCapability *cap = req->volume_capability;
	char data[512], err[512], loop[24];
	unsigned long f;
	struct vol *v;
	int code;

	if ((code = check_id("volume_id", req->volume_id, st))
	    || (code = check_path("staging_target_path", req->staging_target_path, st))
	    || (code = check_capability("volume_capability", cap, p->backing, NULL, st))
	    || (code = flags_of(cap, &f, data, sizeof(data), st)))
		return code;
	Csi__V1__NodeStageVolumeResponse *resp = EMPTY(a, Csi__V1__NodeStageVolumeResponse,
						       csi__v1__node_stage_volume_response__init);
	if (!resp)
		return OOM(st);
	pthread_mutex_lock(&p->mu);
	if ((code = take(p, req->volume_id, &v, st)))
		goto out;
	if (v->backing == BACKING_IMAGE
	    && (code = check_capability("volume_capability", cap, v->backing, is_block(cap) ? NULL : v->fs_type, st)))
		goto out;
	int present = backing_stage_check(p, v);

	forget_what_is_gone(p, v, present);
	if (v->staged) {
		if (strcmp(v->staged, req->staging_target_path) != 0)
			code = rfail(st, GRPC_ALREADY_EXISTS, "volume %s is staged at %s", v->id, v->staged);
		else if (v->stage_block != is_block(cap) || v->access_mode != (int)cap->access_mode->mode)
			code = rfail(st, GRPC_ALREADY_EXISTS, "volume %s is staged there with another capability", v->id);
		else if (present == STAGE_MOUNT_GONE) {
			/* what it mounted is still there: the same mount again
			 * (an image through its loop device still attached) */
			fprintf(stderr, "nodefs-csi-local: volume %s: recorded as staged at %s, but not "
				"mounted there: mounted again\n", v->id, v->staged);
			v->busy = true;
			pthread_mutex_unlock(&p->mu);
			int r = backing_stage_remount(p, v, f, data, err, sizeof(err));
			pthread_mutex_lock(&p->mu);
			v->busy = false;
			if (r < 0)
				code = rfail(st, GRPC_INTERNAL, "stage %s again: %s", v->id, err);
		}
		goto out;	/* else: staged already, the idempotent OK */
	}
	v->busy = true;
	pthread_mutex_unlock(&p->mu);

	bool grown;
	int r = backing_stage(p, v, req->staging_target_path, is_block(cap), f, data, loop, &grown,
			      err, sizeof(err));

	pthread_mutex_lock(&p->mu);
	if (r == 0 && grown)
		v->fs_size = v->size;
	bool grow = r == 0 && v->backing == BACKING_IMAGE && v->fs_size < v->size;
	if (r == 0) {
		v->staged = strdup(req->staging_target_path);
		memcpy(v->loopdev, loop, sizeof(v->loopdev));
		v->stage_block = is_block(cap);
		v->access_mode = (int)cap->access_mode->mode;
		if (!v->staged)
			r = -ENOMEM;
		else
			r = save(p, v, err, sizeof(err));
		if (r < 0) {
			backing_unstage(v, err + strlen(err), 0);
			free(v->staged);
			v->staged = NULL;
			v->loopdev[0] = '\0';
			v->access_mode = 0;
		}
	}
	if (r == 0 && grow && !v->stage_block) {
		/* A clone bigger than its source, or an expand made while
		 * not staged: the filesystem catches up now. */
		pthread_mutex_unlock(&p->mu);
		int g = backing_fs_grow(v, req->staging_target_path, err, sizeof(err));
		pthread_mutex_lock(&p->mu);
		if (g == 0) {
			v->fs_size = v->size;
			store_save_vol(p, v);
		} else
			fprintf(stderr, "nodefs-csi-local: grow %s at stage: %s\n", v->id, err);
	}
	v->busy = false;
	if (r < 0)
		code = rfail(st, r == -ENOENT || r == -ENOTDIR ? GRPC_FAILED_PRECONDITION : GRPC_INTERNAL,
			     "stage %s: %s", v->id, err);
out:
	return finish(p, code, &resp->base, ret);
}

int rpc_node_unstage_volume(struct plugin *p, const ProtobufCMessage *m, struct arena *a,
			    ProtobufCMessage **ret, struct rstat *st)
{
	const Csi__V1__NodeUnstageVolumeRequest *req = (const void *)m;
	char err[512] = "";
	struct vol *v;
	int code;

	if ((code = check_id("volume_id", req->volume_id, st))
	    || (code = check_path("staging_target_path", req->staging_target_path, st)))
		return code;
	Csi__V1__NodeUnstageVolumeResponse *resp = EMPTY(a, Csi__V1__NodeUnstageVolumeResponse,
							 csi__v1__node_unstage_volume_response__init);
	if (!resp)
		return OOM(st);
	pthread_mutex_lock(&p->mu);
	if ((code = take(p, req->volume_id, &v, st)))
		goto out;
	if (!v->staged || strcmp(v->staged, req->staging_target_path) != 0)
		goto out;	/* not staged there: the idempotent OK */
	if (backing_stage_check(p, v) == STAGE_GONE)
		v->loopdev[0] = '\0';	/* after a reboot the number may be another's */
	if (v->ntargets) {
		code = rfail(st, GRPC_FAILED_PRECONDITION, "volume %s is still published at %s",
			     v->id, v->targets[0].path);
		goto out;
	}
	v->busy = true;
	pthread_mutex_unlock(&p->mu);
	int r = backing_unstage(v, err, sizeof(err));
	pthread_mutex_lock(&p->mu);
	if (r == 0) {
		_cleanup_free_ char *old = v->staged;

		v->staged = NULL;
		v->loopdev[0] = '\0';
		v->access_mode = 0;
		v->stage_block = false;
		r = save(p, v, err, sizeof(err));
	}
	v->busy = false;
	if (r < 0)
		code = rfail(st, GRPC_INTERNAL, "unstage %s: %s", v->id, err);
out:
	return finish(p, code, &resp->base, ret);
}

/* ---- publish ---- */

static struct target *find_target(struct vol *v, const char *path)
{
	for (unsigned i = 0; i < v->ntargets; i++)
		if (strcmp(v->targets[i].path, path) == 0)
			return &v->targets[i];
	return NULL;
}

int rpc_node_publish_volume(struct plugin *p, const ProtobufCMessage *m, struct arena *a,
			    ProtobufCMessage **ret, struct rstat *st)
{
	const Csi__V1__NodePublishVolumeRequest *req = (const void *)m;
	const Csi__V1__VolumeCapability *cap = req->volume_capability;
	char data[512], err[512], from[PATH_CAP + 1];
	unsigned long f;
	struct vol *v;
	int code;

	if ((code = check_id("volume_id", req->volume_id, st))
	    || (code = check_path("target_path", req->target_path, st))
	    || (code = check_path("staging_target_path", req->staging_target_path, st))
	    || (code = check_capability("volume_capability", cap, p->backing, NULL, st))
	    || (code = flags_of(cap, &f, data, sizeof(data), st)))
		return code;
	if (strcmp(req->target_path, req->staging_target_path) == 0)
		return rfail(st, GRPC_INVALID_ARGUMENT, "target_path is the staging_target_path");
	if (data[0])
		return rfail(st, GRPC_INVALID_ARGUMENT, "volume_capability.mount.mount_flags: '%s' cannot "
			     "apply to a bind mount", data);
	int mode = (int)cap->access_mode->mode;
	bool ro = req->readonly
		|| mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY
		|| mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY;
	Csi__V1__NodePublishVolumeResponse *resp = EMPTY(a, Csi__V1__NodePublishVolumeResponse,
							 csi__v1__node_publish_volume_response__init);
	if (!resp)
		return OOM(st);
	pthread_mutex_lock(&p->mu);
	if ((code = take(p, req->volume_id, &v, st)))
		goto out;
	int present = backing_stage_check(p, v);
	bool recorded = v->staged && strcmp(v->staged, req->staging_target_path) == 0;

	forget_what_is_gone(p, v, present);
	if (recorded && present != STAGE_PRESENT) {
		code = rfail(st, GRPC_FAILED_PRECONDITION, "volume %s is recorded as staged at %s, but "
			     "that is not mounted (a reboot, or an unmount behind the plugin's back): "
			     "stage it again", v->id, req->staging_target_path);
		goto out;
	}
	if (!v->staged || strcmp(v->staged, req->staging_target_path) != 0) {
		code = rfail(st, GRPC_FAILED_PRECONDITION, "volume %s is not staged at %s", v->id,
			     req->staging_target_path);
		goto out;
	}
	if (v->stage_block != is_block(cap)) {
		code = rfail(st, GRPC_INVALID_ARGUMENT, "volume %s is staged for %s access", v->id,
			     v->stage_block ? "block" : "mount");
		goto out;
	}
	struct target *t = find_target(v, req->target_path);
	if (t) {
		if (t->readonly != ro)
			code = rfail(st, GRPC_ALREADY_EXISTS, "volume %s is published at %s %s", v->id,
				     t->path, t->readonly ? "read-only" : "read-write");
		goto out;	/* else: the idempotent OK */
	}
	if (v->ntargets && mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER) {
		code = rfail(st, GRPC_FAILED_PRECONDITION, "volume %s (single writer) is published at %s",
			     v->id, v->targets[0].path);
		goto out;
	}
	struct target *nt = realloc(v->targets, (v->ntargets + 1) * sizeof(*nt));
	if (!nt) {
		code = OOM(st);
		goto out;
	}
	v->targets = nt;
	snprintf(from, sizeof(from), "%s", v->stage_block ? v->loopdev : v->staged);
	v->busy = true;
	pthread_mutex_unlock(&p->mu);
	int r = backing_bind(from, req->target_path, is_block(cap), ro, f, err, sizeof(err));
	pthread_mutex_lock(&p->mu);
	if (r == 0) {
		struct target *n = &v->targets[v->ntargets];

		n->path = strdup(req->target_path);
		n->readonly = ro;
		n->block = is_block(cap);
		if (!n->path)
			r = -ENOMEM;
		else {
			v->ntargets++;
			if ((r = save(p, v, err, sizeof(err))) < 0) {
				v->ntargets--;
				free(n->path);
			}
		}
		if (r < 0)
			backing_unmount(req->target_path, true, err + strlen(err), 0);
	}
	v->busy = false;
	if (r < 0)
		code = rfail(st, r == -ENOTDIR ? GRPC_FAILED_PRECONDITION : GRPC_INTERNAL,
			     "publish %s: %s", v->id, err);
out:
	return finish(p, code, &resp->base, ret);
}

int rpc_node_unpublish_volume(struct plugin *p, const ProtobufCMessage *m, struct arena *a,
			      ProtobufCMessage **ret, struct rstat *st)
{
	const Csi__V1__NodeUnpublishVolumeRequest *req = (const void *)m;
	char err[512] = "";
	struct vol *v;
	int code;

	if ((code = check_id("volume_id", req->volume_id, st))
	    || (code = check_path("target_path", req->target_path, st)))
		return code;
	Csi__V1__NodeUnpublishVolumeResponse *resp = EMPTY(a, Csi__V1__NodeUnpublishVolumeResponse,
							   csi__v1__node_unpublish_volume_response__init);
	if (!resp)
		return OOM(st);
	pthread_mutex_lock(&p->mu);
	if ((code = take(p, req->volume_id, &v, st)))
		goto out;
	if (!find_target(v, req->target_path))
		goto out;	/* not published there: the idempotent OK */
	v->busy = true;
	pthread_mutex_unlock(&p->mu);
	int r = backing_unmount(req->target_path, true, err, sizeof(err));
	pthread_mutex_lock(&p->mu);
	if (r == 0) {
		struct target *t = find_target(v, req->target_path);
		struct target keep = *t;

		*t = v->targets[--v->ntargets];
		if ((r = save(p, v, err, sizeof(err))) < 0) {
			v->targets[v->ntargets++] = keep;
		} else
			free(keep.path);
	}
	v->busy = false;
	if (r < 0)
		code = rfail(st, GRPC_INTERNAL, "unpublish %s: %s", v->id, err);
out:
	return finish(p, code, &resp->base, ret);
}

/* ---- stats, expand ---- */

/* Is path where v is staged or published? */
static bool serves(const struct vol *v, const char *path)
{
	if (v->staged && strcmp(v->staged, path) == 0)
		return true;
	for (unsigned i = 0; i < v->ntargets; i++)
		if (strcmp(v->targets[i].path, path) == 0)
			return true;
	return false;
}

static Csi__V1__VolumeUsage *usage(struct arena *a, int unit, int64_t total, int64_t avail, int64_t used)
{
	Csi__V1__VolumeUsage *u = arena_alloc(a, sizeof(*u));

	if (u) {
		csi__v1__volume_usage__init(u);
		u->unit = unit;
		u->total = total;
		u->available = avail;
		u->used = used;
	}
	return u;
}

int rpc_node_get_volume_stats(struct plugin *p, const ProtobufCMessage *m, struct arena *a,
			      ProtobufCMessage **ret, struct rstat *st)
{
	const Csi__V1__NodeGetVolumeStatsRequest *req = (const void *)m;
	char data[PATH_CAP + 1], why[600] = "";
	int code;

	if ((code = check_id("volume_id", req->volume_id, st))
	    || (code = check_path("volume_path", req->volume_path, st)))
		return code;
	if (req->staging_target_path[0] && (code = check_path("staging_target_path", req->staging_target_path, st)))
		return code;
	pthread_mutex_lock(&p->mu);
	struct vol *v = store_vol(p, req->volume_id);
	if (!v || v->state != OBJ_READY) {
		pthread_mutex_unlock(&p->mu);
		return rfail(st, GRPC_NOT_FOUND, "volume %s does not exist", req->volume_id);
	}
	if (!serves(v, req->volume_path)) {
		code = rfail(st, GRPC_NOT_FOUND, "volume %s is neither staged nor published at %s",
			     v->id, req->volume_path);
		pthread_mutex_unlock(&p->mu);
		return code;
	}
	enum backing b = v->backing;
	int64_t size = v->size;
	bool block = v->stage_block;
	backing_path(p, v->id, b, data, sizeof(data));
	pthread_mutex_unlock(&p->mu);

	struct stat sb;
	if (lstat(req->volume_path, &sb) < 0)
		return rfail(st, GRPC_NOT_FOUND, "volume_path %s: %s", req->volume_path, strerror(errno));
	/* The condition: the backing is there and whole, and still mounted. */
	struct stat ds;
	if (lstat(data, &ds) < 0)
		snprintf(why, sizeof(why), "the backing %.400s is missing: %s", data, strerror(errno));
	else if (b == BACKING_DIR && !S_ISDIR(ds.st_mode))
		snprintf(why, sizeof(why), "the backing %.400s is not a directory", data);
	else if (b == BACKING_IMAGE && (!S_ISREG(ds.st_mode) || ds.st_size < size))
		snprintf(why, sizeof(why), "the backing image %.400s is damaged (%lld bytes, %" PRId64 " expected)",
			 data, (long long)ds.st_size, size);
	else if (backing_is_mount(req->volume_path) != 1 && !(block && S_ISBLK(sb.st_mode)))
		snprintf(why, sizeof(why), "%.400s is no longer mounted", req->volume_path);

	Csi__V1__NodeGetVolumeStatsResponse *resp = arena_alloc(a, sizeof(*resp));
	Csi__V1__VolumeCondition *cond = arena_alloc(a, sizeof(*cond));
	Csi__V1__VolumeUsage **uv = arena_alloc(a, 2 * sizeof(*uv));
	if (!resp || !cond || !uv)
		return OOM(st);
	csi__v1__node_get_volume_stats_response__init(resp);
	csi__v1__volume_condition__init(cond);
	cond->abnormal = why[0] != 0;
	cond->message = arena_strdup(a, why[0] ? why : "healthy");
	resp->volume_condition = cond;
	resp->usage = uv;
	if (block) {
		if (!(uv[0] = usage(a, CSI__V1__VOLUME_USAGE__UNIT__BYTES, size, 0, 0)))
			return OOM(st);
		resp->n_usage = 1;
	} else {
		struct statvfs sv;

		if (statvfs(req->volume_path, &sv) < 0)
			return rfail(st, GRPC_INTERNAL, "statvfs %s: %s", req->volume_path, strerror(errno));
		int64_t fr = (int64_t)sv.f_frsize;
		if (b == BACKING_DIR && size > 0) {
			/* A directory of a shared filesystem: its own size, and
			 * what its tree uses (the quota's count where one is
			 * kept is the same sum). */
			int64_t used = 0, inodes = 0;

			/* the backing gone (the condition says so): count
			 * what the mount still shows */
			if (quota_usage(data, &used, &inodes) < 0)
				quota_usage(req->volume_path, &used, &inodes);
			int64_t avail = size - used;
			if (avail < 0)
				avail = 0;
			if (avail > (int64_t)sv.f_bavail * fr)
				avail = (int64_t)sv.f_bavail * fr;
			uv[0] = usage(a, CSI__V1__VOLUME_USAGE__UNIT__BYTES, size, avail, used);
			uv[1] = usage(a, CSI__V1__VOLUME_USAGE__UNIT__INODES, inodes + (int64_t)sv.f_favail,
				      (int64_t)sv.f_favail, inodes);
		} else {
			uv[0] = usage(a, CSI__V1__VOLUME_USAGE__UNIT__BYTES, (int64_t)sv.f_blocks * fr,
				      (int64_t)sv.f_bavail * fr, (int64_t)(sv.f_blocks - sv.f_bfree) * fr);
			uv[1] = usage(a, CSI__V1__VOLUME_USAGE__UNIT__INODES, (int64_t)sv.f_files,
				      (int64_t)sv.f_favail, (int64_t)(sv.f_files - sv.f_ffree));
		}
		if (!uv[0] || !uv[1])
			return OOM(st);
		resp->n_usage = 2;
	}
	if (!cond->message)
		return OOM(st);
	*ret = &resp->base;
	return GRPC_OK;
}

int rpc_node_expand_volume(struct plugin *p, const ProtobufCMessage *m, struct arena *a,
			   ProtobufCMessage **ret, struct rstat *st)
{
	const Csi__V1__NodeExpandVolumeRequest *req = (const void *)m;
	_cleanup_free_ char *mnt = NULL;
	char err[512] = "";
	struct vol *v;
	int code;

	if ((code = check_id("volume_id", req->volume_id, st))
	    || (code = check_path("volume_path", req->volume_path, st)))
		return code;
	if (req->staging_target_path[0] && (code = check_path("staging_target_path", req->staging_target_path, st)))
		return code;
	if (req->volume_capability && (code = check_capability("volume_capability", req->volume_capability,
								p->backing, NULL, st)))
		return code;
	const Csi__V1__CapacityRange *cr = req->capacity_range;
	if (cr && (cr->required_bytes < 0 || cr->limit_bytes < 0
		   || (cr->limit_bytes && cr->required_bytes > cr->limit_bytes)))
		return rfail(st, GRPC_OUT_OF_RANGE, "capacity_range is not a range");
	Csi__V1__NodeExpandVolumeResponse *resp = EMPTY(a, Csi__V1__NodeExpandVolumeResponse,
							csi__v1__node_expand_volume_response__init);
	if (!resp)
		return OOM(st);
	pthread_mutex_lock(&p->mu);
	if ((code = take(p, req->volume_id, &v, st)))
		goto out;
	if (!serves(v, req->volume_path)) {
		code = rfail(st, GRPC_NOT_FOUND, "volume %s is neither staged nor published at %s",
			     v->id, req->volume_path);
		goto out;
	}
	if (cr && cr->required_bytes > v->size) {
		code = rfail(st, GRPC_OUT_OF_RANGE, "volume %s is %" PRId64 " bytes: expand it on the "
			     "controller first", v->id, v->size);
		goto out;
	}
	if (cr && cr->limit_bytes && v->size > cr->limit_bytes) {
		code = rfail(st, GRPC_OUT_OF_RANGE, "volume %s is %" PRId64 " bytes, above limit_bytes",
			     v->id, v->size);
		goto out;
	}
	resp->capacity_bytes = v->size;
	if (v->backing != BACKING_IMAGE || !v->staged || v->fs_size >= v->size)
		goto out;	/* nothing to grow: the idempotent OK */
	v->busy = true;
	mnt = strdup(v->staged);
	pthread_mutex_unlock(&p->mu);
	int r = mnt ? backing_fs_grow(v, mnt, err, sizeof(err)) : -ENOMEM;
	pthread_mutex_lock(&p->mu);
	if (r == 0) {
		v->fs_size = v->size;
		r = save(p, v, err, sizeof(err));
	}
	v->busy = false;
	if (r < 0)
		code = rfail(st, GRPC_INTERNAL, "expand %s: %s", v->id, err);
out:
	return finish(p, code, &resp->base, ret);
}
