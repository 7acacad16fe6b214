/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* fake-storage: a fake storage_ops for the volume unit tests; see fake-storage.h. */
#include "fake-storage.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nerr.h"
#include "sbuf.h"

struct fake fake = { .lock = PTHREAD_MUTEX_INITIALIZER };

void fake_reset(uint32_t ctl, uint32_t node)
{
	pthread_mutex_lock(&fake.lock);
	fake.caps = (struct storage_caps){
		.plugin = ctl ? 1u << STORAGE_PLUGIN_CONTROLLER_SERVICE : 0,
		.controller = ctl,
		.node = node,
	};
	fake.node_needed = true;
	fake.nvols = 0;
	fake.nsnaps = 0;
	fake.last_source[0] = '\0';
	fake.next_id = 0;
	fake.log[0] = '\0';
	fake.calls = 0;
	fake.nrules = 0;
	fake.hook_call = NULL;
	fake.hook = NULL;
	fake.hook_fired = false;
	pthread_mutex_unlock(&fake.lock);
}

void fake_fail(const char *call, bool after, int err, int code, const char *code_name,
	       bool uncertain, int times)
{
	pthread_mutex_lock(&fake.lock);
	fake.rules[fake.nrules++] = (struct fake_rule){
		.call = call, .after = after, .err = err, .code = code, .code_name = code_name,
		.uncertain = uncertain, .times = times,
	};
	pthread_mutex_unlock(&fake.lock);
}

void fake_seed(const char *id, int64_t capacity)
{
	pthread_mutex_lock(&fake.lock);
	struct fake_vol *v = &fake.vols[fake.nvols++];

	*v = (struct fake_vol){ .capacity = capacity };
	snprintf(v->id, sizeof(v->id), "%s", id);
	pthread_mutex_unlock(&fake.lock);
}

void fake_log_clear(void)
{
	pthread_mutex_lock(&fake.lock);
	fake.log[0] = '\0';
	pthread_mutex_unlock(&fake.lock);
}

void fake_log(char *buf, size_t len)
{
	pthread_mutex_lock(&fake.lock);
	snprintf(buf, len, "%s", fake.log);
	pthread_mutex_unlock(&fake.lock);
}

static struct fake_vol *find_locked(const char *id)
{
	for (size_t i = 0; id && i < fake.nvols; i++)
		if (strcmp(fake.vols[i].id, id) == 0)
			return &fake.vols[i];
	return NULL;
}

bool fake_vol_get(const char *id, struct fake_vol *ret)
{
	struct fake_vol *v;

	pthread_mutex_lock(&fake.lock);
	v = find_locked(id);
	if (v)
		*ret = *v;
	pthread_mutex_unlock(&fake.lock);
	return v != NULL;
}

size_t fake_nsnaps(void)
{
	size_t n;

	pthread_mutex_lock(&fake.lock);
	n = fake.nsnaps;
	pthread_mutex_unlock(&fake.lock);
	return n;
}

void fake_last_source(char *buf, size_t len)
{
	pthread_mutex_lock(&fake.lock);
	snprintf(buf, len, "%s", fake.last_source);
	pthread_mutex_unlock(&fake.lock);
}

size_t fake_nvols(void)
{
	size_t n;

	pthread_mutex_lock(&fake.lock);
	n = fake.nvols;
	pthread_mutex_unlock(&fake.lock);
	return n;
}

/* ---- one call: log, hook, rules ---- */

static void result_ok(struct storage_result *res, const char *call)
{
	if (res)
		*res = (struct storage_result){ .call = call, .code_name = "OK", .attempts = 1 };
}

/* The hook and the failure rules at one point of a call. Lock held; the
 * hook runs without it. */
static int at(const char *call, bool after, struct storage_result *res, struct nerr *err)
{
	if (fake.hook && !fake.hook_fired && fake.hook_after == after &&
	    strcmp(fake.hook_call, call) == 0) {
		fake.hook_fired = true;
		pthread_mutex_unlock(&fake.lock);
		fake.hook(fake.hook_ctx);
		pthread_mutex_lock(&fake.lock);
	}
	for (size_t i = 0; i < fake.nrules; i++) {
		struct fake_rule *r = &fake.rules[i];

		if (r->times <= 0 || r->after != after || strcmp(r->call, call) != 0)
			continue;
		r->times--;
		if (res) {
			res->code = r->code;
			res->code_name = r->code_name;
			res->uncertain = r->uncertain;
		}
		return nerr_set(err, r->err, "%s: %s: injected", call, r->code_name);
	}
	return 0;
}

/* Before acting: the lock is taken and held until done(). */
static int begin(const char *call, struct storage_result *res, struct nerr *err)
{
	size_t n;
	int r;

	pthread_mutex_lock(&fake.lock);
	result_ok(res, call);
	n = strlen(fake.log);
	snprintf(fake.log + n, sizeof(fake.log) - n, "%s%s", n ? " " : "", call);
	fake.calls++;
	r = at(call, false, res, err);
	if (r < 0)
		pthread_mutex_unlock(&fake.lock);
	return r;
}

/* After acting; drops the lock. */
static int done(const char *call, struct storage_result *res, struct nerr *err)
{
	int r = at(call, true, res, err);

	pthread_mutex_unlock(&fake.lock);
	return r;
}

static int missing(const char *call, const char *id, struct storage_result *res, struct nerr *err)
{
	if (res) {
		res->code = 5;
		res->code_name = "NOT_FOUND";
	}
	pthread_mutex_unlock(&fake.lock);
	return nerr_set(err, ENOENT, "%s: NOT_FOUND: no volume %s", call, id ? id : "(null)");
}

static char **strv1(const char *s)
{
	char **v = calloc(2, sizeof(*v));

	if (v && s && !(v[0] = strdup(s))) {
		free(v);
		return NULL;
	}
	return v;
}

static bool strv_has(char *const *v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

/* ---- the ops ---- */

static int f_open(struct loop *loop, const struct storage_config *cfg, void **ret_h,
		  struct nerr *err)
{
	*ret_h = &fake;
	return 0;
}

static void f_close(void *h)
{
}

static void f_health(void *h, struct storage_health_info *ret)
{
	*ret = (struct storage_health_info){ .health = STORAGE_HEALTH_READY };
}

static void f_on_health(void *h, storage_health_fn fn, void *userdata)
{
}

static int f_probe(void *h, bool *ret_ready, struct nerr *err)
{
	*ret_ready = true;
	return 0;
}

static int f_plugin_info(void *h, char **ret_name, char **ret_vendor_version, struct nerr *err)
{
	*ret_name = strdup("fake.nodefs.invalid");
	*ret_vendor_version = strdup("1");
	return *ret_name && *ret_vendor_version ? 0 : -ENOMEM;
}

static int f_capabilities(void *h, struct storage_caps *ret, struct nerr *err)
{
	pthread_mutex_lock(&fake.lock);
	*ret = fake.caps;
	pthread_mutex_unlock(&fake.lock);
	return 0;
}

static int f_node_info(void *h, char **ret_node_id, struct nerr *err)
{
	*ret_node_id = strdup("node-1");
	return *ret_node_id ? 0 : -ENOMEM;
}

static int f_create(void *h, const struct storage_req *rq, struct storage_volume *ret,
		    storage_retry_fn on_retry, void *on_retry_ctx, struct storage_result *res,
		    struct nerr *err)
{
	struct fake_vol *v = NULL;
	int r = begin("CreateVolume", res, err);

	if (r < 0)
		return r;
	for (size_t i = 0; i < fake.nvols && !v; i++)
		if (strcmp(fake.vols[i].name, rq->name) == 0)
			v = &fake.vols[i];	/* the same name: the same volume */
	snprintf(fake.last_source, sizeof(fake.last_source), "%s",
		 rq->from_snapshot ? rq->from_snapshot : rq->from_volume ? rq->from_volume : "");
	if (!v && fake.nvols < FAKE_VOLS) {
		v = &fake.vols[fake.nvols++];
		*v = (struct fake_vol){ .capacity = rq->bytes ? rq->bytes : 1 << 20 };
		snprintf(v->id, sizeof(v->id), "vol-%u", ++fake.next_id);
		snprintf(v->name, sizeof(v->name), "%s", rq->name);
	}
	*ret = (struct storage_volume){ .id = strdup(v->id), .capacity = v->capacity,
					.vctx = strv1("zone=a") };
	r = done("CreateVolume", res, err);
	if (r < 0)
		storage_volume_clear(ret);
	return r;
}

static int f_delete(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
		    void *on_retry_ctx, struct storage_result *res, struct nerr *err)
{
	struct fake_vol *v;
	int r = begin("DeleteVolume", res, err);

	if (r < 0)
		return r;
	v = find_locked(rq->id);
	if (v)
		*v = fake.vols[--fake.nvols];	/* a missing one is deleted already */
	return done("DeleteVolume", res, err);
}

static int f_validate(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
		      void *on_retry_ctx, struct storage_result *res, struct nerr *err)
{
	int r = begin("ValidateVolumeCapabilities", res, err);

	if (r < 0)
		return r;
	if (!find_locked(rq->id))
		return missing("ValidateVolumeCapabilities", rq->id, res, err);
	return done("ValidateVolumeCapabilities", res, err);
}

static int f_controller_publish(void *h, const struct storage_req *rq, char ***ret_pctx,
				storage_retry_fn on_retry, void *on_retry_ctx,
				struct storage_result *res, struct nerr *err)
{
	struct fake_vol *v;
	int r = begin("ControllerPublishVolume", res, err);

	if (r < 0)
		return r;
	v = find_locked(rq->id);
	if (!v)
		return missing("ControllerPublishVolume", rq->id, res, err);
	v->ctl_published = true;
	*ret_pctx = strv1("device=/dev/fake0");
	r = done("ControllerPublishVolume", res, err);
	if (r < 0)
		storage_strv_free(*ret_pctx);
	return r;
}

static int f_controller_unpublish(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
				  void *on_retry_ctx, struct storage_result *res, struct nerr *err)
{
	struct fake_vol *v;
	int r = begin("ControllerUnpublishVolume", res, err);

	if (r < 0)
		return r;
	v = find_locked(rq->id);
	if (v)
		v->ctl_published = false;
	return done("ControllerUnpublishVolume", res, err);
}

static int f_list(void *h, const char *token, struct storage_page *ret, storage_retry_fn on_retry,
		  void *on_retry_ctx, struct storage_result *res, struct nerr *err)
{
	struct storage_page pg = { 0 };

	/* two pages when there are two volumes or more: the token is used */
	pthread_mutex_lock(&fake.lock);
	size_t from = token ? (size_t)atoi(token) : 0, to = from + 1;

	if (to > fake.nvols)
		to = fake.nvols;
	pg.v = calloc(to > from ? to - from : 1, sizeof(*pg.v));
	for (size_t i = from; pg.v && i < to; i++, pg.n++) {
		pg.v[pg.n].id = strdup(fake.vols[i].id);
		pg.v[pg.n].capacity = fake.vols[i].capacity;
		pg.v[pg.n].vctx = strv1("listed=yes");
	}
	if (to < fake.nvols && asprintf(&pg.next_token, "%zu", to) < 0)
		pg.next_token = NULL;
	pthread_mutex_unlock(&fake.lock);
	result_ok(res, "ListVolumes");
	*ret = pg;
	return 0;
}

static int f_capacity(void *h, const struct storage_req *rq, int64_t *ret_bytes,
		      storage_retry_fn on_retry, void *on_retry_ctx, struct storage_result *res,
		      struct nerr *err)
{
	result_ok(res, "GetCapacity");
	*ret_bytes = 1ll << 30;
	return 0;
}

static int f_controller_expand(void *h, const struct storage_req *rq, int64_t *ret_capacity,
			       bool *ret_node_needed, storage_retry_fn on_retry, void *on_retry_ctx,
			       struct storage_result *res, struct nerr *err)
{
	struct fake_vol *v;
	int r = begin("ControllerExpandVolume", res, err);

	if (r < 0)
		return r;
	v = find_locked(rq->id);
	if (!v)
		return missing("ControllerExpandVolume", rq->id, res, err);
	v->capacity = rq->bytes;
	*ret_capacity = rq->bytes;
	*ret_node_needed = fake.node_needed;
	return done("ControllerExpandVolume", res, err);
}

static int f_stage(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
		   void *on_retry_ctx, struct storage_result *res, struct nerr *err)
{
	struct fake_vol *v;
	int r = begin("NodeStageVolume", res, err);

	if (r < 0)
		return r;
	v = find_locked(rq->id);
	if (!v)
		return missing("NodeStageVolume", rq->id, res, err);
	v->staged = true;
	snprintf(v->staging, sizeof(v->staging), "%s", rq->staging ? rq->staging : "");
	v->got_pctx = strv_has(rq->pctx, "device=/dev/fake0");
	return done("NodeStageVolume", res, err);
}

static int f_unstage(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
		     void *on_retry_ctx, struct storage_result *res, struct nerr *err)
{
	struct fake_vol *v;
	int r = begin("NodeUnstageVolume", res, err);

	if (r < 0)
		return r;
	v = find_locked(rq->id);
	if (v)
		v->staged = false;
	return done("NodeUnstageVolume", res, err);
}

static int f_publish(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
		     void *on_retry_ctx, struct storage_result *res, struct nerr *err)
{
	struct fake_vol *v;
	int r = begin("NodePublishVolume", res, err);

	if (r < 0)
		return r;
	v = find_locked(rq->id);
	if (!v)
		return missing("NodePublishVolume", rq->id, res, err);
	if (STORAGE_CAP(fake.caps.node, STORAGE_NODE_STAGE_UNSTAGE_VOLUME) &&
	    (!v->staged || !rq->staging || strcmp(rq->staging, v->staging) != 0)) {
		if (res) {
			res->code = 9;
			res->code_name = "FAILED_PRECONDITION";
		}
		pthread_mutex_unlock(&fake.lock);
		return nerr_set(err, EBUSY, "NodePublishVolume: FAILED_PRECONDITION: not staged");
	}
	v->published = true;
	snprintf(v->target, sizeof(v->target), "%s", rq->target ? rq->target : "");
	v->got_pctx = v->got_pctx || strv_has(rq->pctx, "device=/dev/fake0");
	return done("NodePublishVolume", res, err);
}

static int f_unpublish(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
		       void *on_retry_ctx, struct storage_result *res, struct nerr *err)
{
	struct fake_vol *v;
	int r = begin("NodeUnpublishVolume", res, err);

	if (r < 0)
		return r;
	v = find_locked(rq->id);
	if (v) {
		v->published = false;
		v->target[0] = '\0';
	}
	return done("NodeUnpublishVolume", res, err);
}

static int f_node_expand(void *h, const struct storage_req *rq, int64_t *ret_capacity,
			 storage_retry_fn on_retry, void *on_retry_ctx, struct storage_result *res,
			 struct nerr *err)
{
	struct fake_vol *v;
	int r = begin("NodeExpandVolume", res, err);

	if (r < 0)
		return r;
	v = find_locked(rq->id);
	if (!v)
		return missing("NodeExpandVolume", rq->id, res, err);
	if (!STORAGE_CAP(fake.caps.controller, STORAGE_CTL_EXPAND_VOLUME))
		v->capacity = rq->bytes;
	*ret_capacity = 0;	/* not reported */
	return done("NodeExpandVolume", res, err);
}

static int f_stats(void *h, const struct storage_req *rq, uint64_t timeout_ms,
		   struct storage_stats *ret, storage_retry_fn on_retry, void *on_retry_ctx,
		   struct storage_result *res, struct nerr *err)
{
	result_ok(res, "NodeGetVolumeStats");
	*ret = (struct storage_stats){ .bytes = { 1, 2, 3 }, .inodes = { -1, -1, -1 } };
	return 0;
}

/* ---- snapshots ---- */

static int f_snapshot_create(void *h, const struct storage_req *rq, struct storage_snapshot *ret,
			     storage_retry_fn on_retry, void *on_retry_ctx, struct storage_result *res,
			     struct nerr *err)
{
	struct fake_snap *s = NULL;
	int r = begin("CreateSnapshot", res, err);

	if (r < 0)
		return r;
	if (!find_locked(rq->id))
		return missing("CreateSnapshot", rq->id, res, err);
	for (size_t i = 0; i < fake.nsnaps && !s; i++)
		if (strcmp(fake.snaps[i].name, rq->name) == 0)
			s = &fake.snaps[i];
	if (!s && fake.nsnaps < FAKE_VOLS) {
		s = &fake.snaps[fake.nsnaps++];
		snprintf(s->id, sizeof(s->id), "snap-%u", ++fake.next_id);
		snprintf(s->name, sizeof(s->name), "%s", rq->name);
		snprintf(s->source, sizeof(s->source), "%s", rq->id);
	}
	*ret = (struct storage_snapshot){ .id = strdup(s->id), .source_id = strdup(s->source),
					  .size = 1 << 20, .created_s = 1700000000, .ready = true };
	r = done("CreateSnapshot", res, err);
	if (r < 0)
		storage_snapshot_clear(ret);
	return r;
}

static int f_snapshot_delete(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
			     void *on_retry_ctx, struct storage_result *res, struct nerr *err)
{
	int r = begin("DeleteSnapshot", res, err);

	if (r < 0)
		return r;
	for (size_t i = 0; i < fake.nsnaps; i++)
		if (strcmp(fake.snaps[i].id, rq->id) == 0) {
			fake.snaps[i] = fake.snaps[--fake.nsnaps];
			break;
		}
	return done("DeleteSnapshot", res, err);
}

const struct storage_ops fake_storage_ops = {
	.name = "fake",
	.open = f_open,
	.close = f_close,
	.health = f_health,
	.on_health = f_on_health,
	.probe = f_probe,
	.plugin_info = f_plugin_info,
	.capabilities = f_capabilities,
	.node_info = f_node_info,
	.create = f_create,
	.delete = f_delete,
	.validate = f_validate,
	.controller_publish = f_controller_publish,
	.controller_unpublish = f_controller_unpublish,
	.list = f_list,
	.capacity = f_capacity,
	.controller_expand = f_controller_expand,
	.stage = f_stage,
	.unstage = f_unstage,
	.publish = f_publish,
	.unpublish = f_unpublish,
	.node_expand = f_node_expand,
	.stats = f_stats,
	.snapshot_create = f_snapshot_create,
	.snapshot_delete = f_snapshot_delete,
};
