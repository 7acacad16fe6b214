/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * csi-storage: the backend's storage interface (backend/core/storage.h) over the
 * CSI v1 client (csi.h). Every protobuf-c message the daemon sends or reads
 * is built and parsed here: requests from struct storage_req, capabilities,
 * string maps from and to "k=v" strings, replies into the backend's types.
 * The CSI call-latency metrics are rendered here too (common/hist).
 *
 * Must not know: volumes, their states or checkpoints, files, the tree.
 * It includes storage.h and nothing else of backend/.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csi.h"
#include "hist.h"
#include "macro.h"
#include "nerr.h"
#include "sbuf.h"
#include "storage.h"

/* ---- string maps and capabilities ---- */

/* A protobuf map field (string to string) built from "k=v" strings. Every
 * string map entry of csi.proto has the same layout (key = 1, value = 2),
 * so one entry type serves them all. */
struct kv_array {
	Csi__V1__CreateVolumeRequest__ParametersEntry **v;
	size_t n;
};

static void kv_array_free(struct kv_array *a)
{
	for (size_t i = 0; i < a->n; i++) {
		free(a->v[i]->key);
		free(a->v[i]->value);
		free(a->v[i]);
	}
	free(a->v);
	a->v = NULL;
	a->n = 0;
}

static int kv_array_add(struct kv_array *a, const char *k, size_t klen, const char *val)
{
	Csi__V1__CreateVolumeRequest__ParametersEntry *e, **nv = realloc(a->v, (a->n + 1) * sizeof(*nv));

	if (!nv)
		return -ENOMEM;
	a->v = nv;
	e = malloc(sizeof(*e));
	if (!e)
		return -ENOMEM;
	*e = (Csi__V1__CreateVolumeRequest__ParametersEntry)CSI__V1__CREATE_VOLUME_REQUEST__PARAMETERS_ENTRY__INIT;
	e->key = strndup(k, klen);
	e->value = strdup(val);
	a->v[a->n++] = e;
	return e->key && e->value ? 0 : -ENOMEM;
}

/* "k=v" strings; one without '=' is skipped. */
static int kv_array_from_strv(struct kv_array *a, char *const *kv)
{
	for (size_t i = 0; kv && kv[i]; i++) {
		const char *eq = strchr(kv[i], '=');
		int r;

		if (!eq)
			continue;
		r = kv_array_add(a, kv[i], (size_t)(eq - kv[i]), eq + 1);
		if (r < 0) {
			kv_array_free(a);
			return r;
		}
	}
	return 0;
}

/* A map from a reply as "k=v" strings (never NULL on success). */
static int strv_from_map(size_t n, void *const *entries, char ***ret)
{
	char **v = calloc(n + 1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const Csi__V1__CreateVolumeRequest__ParametersEntry *e = entries[i];

		if (asprintf(&v[i], "%s=%s", e->key ? e->key : "", e->value ? e->value : "") < 0) {
			v[i] = NULL;
			storage_strv_free(v);
			return -ENOMEM;
		}
	}
	*ret = v;
	return 0;
}

/* The three structs of one VolumeCapability, the caller's. */
struct vcap {
	Csi__V1__VolumeCapability cap;
	Csi__V1__VolumeCapability__MountVolume mnt;
	Csi__V1__VolumeCapability__BlockVolume blk;
	Csi__V1__VolumeCapability__AccessMode am;
};

static Csi__V1__VolumeCapability *vcap_build(struct vcap *c, const struct storage_cap *sc)
{
	size_t n = 0;

	c->cap = (Csi__V1__VolumeCapability)CSI__V1__VOLUME_CAPABILITY__INIT;
	c->mnt = (Csi__V1__VolumeCapability__MountVolume)CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	c->blk = (Csi__V1__VolumeCapability__BlockVolume)CSI__V1__VOLUME_CAPABILITY__BLOCK_VOLUME__INIT;
	c->am = (Csi__V1__VolumeCapability__AccessMode)CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
	/* storage_mode follows the spec's numbering of AccessMode.Mode */
	c->am.mode = sc->mode > STORAGE_MODE_UNKNOWN && sc->mode <= STORAGE_MODE_SINGLE_NODE_MULTI_WRITER
		? (Csi__V1__VolumeCapability__AccessMode__Mode)sc->mode
		: CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	c->cap.access_mode = &c->am;
	if (sc->access == STORAGE_ACCESS_BLOCK) {
		c->cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
		c->cap.block = &c->blk;
		return &c->cap;
	}
	c->mnt.fs_type = (char *)(sc->fs_type ? sc->fs_type : "");
	while (sc->mount_flags && sc->mount_flags[n])
		n++;
	c->mnt.n_mount_flags = n;
	c->mnt.mount_flags = (char **)sc->mount_flags;
	c->cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	c->cap.mount = &c->mnt;
	return &c->cap;
}

/* ---- one call ---- */

static bool code_uncertain(int code)
{
	return code == GRPC_DEADLINE_EXCEEDED || code == GRPC_UNAVAILABLE || code == GRPC_ABORTED ||
	       code == GRPC_CANCELLED;
}

static void result_fill(struct storage_result *res, enum csi_rpc rpc, const struct csi_result *cr)
{
	if (!res)
		return;
	res->call = csi_rpc_to_string(rpc);
	res->code = cr->code;
	res->code_name = grpc_code_to_string(cr->code);
	res->uncertain = code_uncertain(cr->code);
	res->attempts = cr->attempts;
}

struct retry_bridge {
	enum csi_rpc rpc;
	storage_retry_fn fn;
	void *ctx;
};

static void on_retry_bridge(void *ctx, const struct csi_result *cr)
{
	const struct retry_bridge *rb = ctx;
	struct storage_result so_far = { 0 };

	result_fill(&so_far, rb->rpc, cr);
	rb->fn(rb->ctx, &so_far);
}

/* One call; on_retry (may be NULL) is told of each retry. */
static int rpc(void *h, enum csi_rpc which, const ProtobufCMessage *req, uint64_t timeout_ms,
	       unsigned attempts, ProtobufCMessage **ret_resp, storage_retry_fn on_retry,
	       void *on_retry_ctx, struct storage_result *res, struct nerr *err)
{
	struct retry_bridge rb = { .rpc = which, .fn = on_retry, .ctx = on_retry_ctx };
	struct csi_result cr = { 0 };
	ProtobufCMessage *resp = NULL;
	int r = csi_call_watched(h, which, req, timeout_ms, attempts,
				 on_retry ? on_retry_bridge : NULL, &rb, &resp, &cr, err);

	result_fill(res, which, &cr);
	if (r < 0)
		return r;
	if (ret_resp)
		*ret_resp = resp;
	else
		protobuf_c_message_free_unpacked(resp, NULL);
	return 0;
}

static void unpacked_free(void *p)
{
	ProtobufCMessage *m = *(ProtobufCMessage **)p;

	if (m)
		protobuf_c_message_free_unpacked(m, NULL);
}
#define _cleanup_resp_ _cleanup_(unpacked_free)

static void kv_array_freep(struct kv_array *a)
{
	kv_array_free(a);
}
#define _cleanup_kv_ _cleanup_(kv_array_freep)

/* Secrets: their bytes are wiped before they are freed. */
static void kv_array_wipep(struct kv_array *a)
{
	for (size_t i = 0; i < a->n; i++)
		if (a->v[i]->value)
			explicit_bzero(a->v[i]->value, strlen(a->v[i]->value));
	kv_array_free(a);
}
#define _cleanup_secrets_ _cleanup_(kv_array_wipep)

/* req's secrets field from rq->secrets (every request type that has one). */
#define SET_SECRETS(req, sec, rq, T) \
	do { \
		if (kv_array_from_strv(&(sec), (rq)->secrets) < 0) \
			return NOMEM(err); \
		(req).n_secrets = (sec).n; \
		(req).secrets = (T **)(sec).v; \
	} while (0)

#define NOMEM(err) nerr_set(err, ENOMEM, "out of memory")

/* ---- the handle ---- */

static int s_open(struct loop *loop, const struct storage_config *cfg, void **ret_h,
		  struct nerr *err)
{
	struct csi_retry retry = { .backoff_ms = cfg->retry_backoff_ms, .max_ms = cfg->retry_max_ms };
	struct csi_plugin *p;
	int r = csi_plugin_new(loop, cfg->name, cfg->endpoint, &retry, cfg->timeout_ms, &p, err);

	if (r < 0)
		return r;
	*ret_h = p;
	return 0;
}

static void s_close(void *h)
{
	csi_plugin_free(h);
}

static void s_cancel(void *h)
{
	csi_plugin_cancel(h);
}

static void s_health(void *h, struct storage_health_info *ret)
{
	struct csi_health_info hi;

	csi_plugin_health(h, &hi);
	ret->health = hi.health == CSI_HEALTH_READY ? STORAGE_HEALTH_READY
		    : hi.health == CSI_HEALTH_NOT_READY ? STORAGE_HEALTH_NOT_READY : STORAGE_HEALTH_DOWN;
	ret->since = hi.since;
	snprintf(ret->reason, sizeof(ret->reason), "%s", hi.reason);
}

static void s_on_health(void *h, storage_health_fn fn, void *userdata)
{
	csi_plugin_on_health(h, fn, userdata);
}

/* ---- identity ---- */

static int s_probe(void *h, bool *ret_ready, struct nerr *err)
{
	return csi_probe(h, ret_ready, err);
}

static int s_plugin_info(void *h, char **ret_name, char **ret_vendor_version, struct nerr *err)
{
	return csi_get_plugin_info(h, ret_name, ret_vendor_version, err);
}

static int s_capabilities(void *h, struct storage_caps *ret, struct nerr *err)
{
	struct csi_caps c;
	int r = csi_get_caps(h, &c, err);

	if (r < 0)
		return r;
	/* the bit sets keep the spec's numbering (storage.h) */
	*ret = (struct storage_caps){ .plugin = c.plugin, .expansion = c.expansion,
				      .controller = c.controller, .node = c.node };
	return 0;
}

static int s_node_info(void *h, char **ret_node_id, struct nerr *err)
{
	Csi__V1__NodeGetInfoRequest req = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
	_cleanup_resp_ Csi__V1__NodeGetInfoResponse *resp = NULL;
	char *id;
	int r = rpc(h, CSI_RPC_NODE_GET_INFO, &req.base, 0, 0, (ProtobufCMessage **)&resp, NULL, NULL,
		    NULL, err);

	if (r < 0)
		return r;
	id = strdup(resp->node_id ? resp->node_id : "");
	if (!id)
		return NOMEM(err);
	*ret_node_id = id;
	return 0;
}

/* ---- controller ---- */

static int s_create(void *h, const struct storage_req *rq, struct storage_volume *ret,
		    storage_retry_fn on_retry, void *on_retry_ctx, struct storage_result *res,
		    struct nerr *err)
{
	_cleanup_secrets_ struct kv_array sec = { 0 };
	Csi__V1__CreateVolumeRequest req = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__CapacityRange range = CSI__V1__CAPACITY_RANGE__INIT;
	_cleanup_resp_ Csi__V1__CreateVolumeResponse *resp = NULL;
	_cleanup_kv_ struct kv_array params = { 0 }, mparams = { 0 };
	struct storage_volume v = { 0 };
	Csi__V1__VolumeCapability *caps[1];
	struct vcap vc;
	int r;

	caps[0] = vcap_build(&vc, &rq->cap);
	req.name = (char *)rq->name;
	if (rq->bytes) {
		range.required_bytes = rq->bytes;
		req.capacity_range = &range;
	}
	req.n_volume_capabilities = 1;
	req.volume_capabilities = caps;
	if (kv_array_from_strv(&params, rq->params) < 0)
		return NOMEM(err);
	req.n_parameters = params.n;
	req.parameters = params.v;
	SET_SECRETS(req, sec, rq, Csi__V1__CreateVolumeRequest__SecretsEntry);
	if (kv_array_from_strv(&mparams, rq->mparams) < 0)
		return NOMEM(err);
	req.n_mutable_parameters = mparams.n;
	req.mutable_parameters = (Csi__V1__CreateVolumeRequest__MutableParametersEntry **)mparams.v;
	Csi__V1__VolumeContentSource cs = CSI__V1__VOLUME_CONTENT_SOURCE__INIT;
	Csi__V1__VolumeContentSource__SnapshotSource css = CSI__V1__VOLUME_CONTENT_SOURCE__SNAPSHOT_SOURCE__INIT;
	Csi__V1__VolumeContentSource__VolumeSource csv = CSI__V1__VOLUME_CONTENT_SOURCE__VOLUME_SOURCE__INIT;
	if (rq->from_snapshot) {
		css.snapshot_id = (char *)rq->from_snapshot;
		cs.type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
		cs.snapshot = &css;
		req.volume_content_source = &cs;
	} else if (rq->from_volume) {
		csv.volume_id = (char *)rq->from_volume;
		cs.type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME;
		cs.volume = &csv;
		req.volume_content_source = &cs;
	}
	r = rpc(h, CSI_RPC_CREATE_VOLUME, &req.base, 0, 0, (ProtobufCMessage **)&resp, on_retry,
		on_retry_ctx, res, err);
	if (r < 0)
		return r;
	if (!resp->volume || !resp->volume->volume_id || !resp->volume->volume_id[0])
		return nerr_set(err, EIO, "CreateVolume: the plugin returned no volume id");
	v.id = strdup(resp->volume->volume_id);
	v.capacity = resp->volume->capacity_bytes;
	if (!v.id || strv_from_map(resp->volume->n_volume_context,
				   (void *const *)resp->volume->volume_context, &v.vctx) < 0) {
		storage_volume_clear(&v);
		return NOMEM(err);
	}
	*ret = v;
	return 0;
}

static int s_delete(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
		    void *on_retry_ctx, struct storage_result *res, struct nerr *err)
{
	_cleanup_secrets_ struct kv_array sec = { 0 };
	Csi__V1__DeleteVolumeRequest req = CSI__V1__DELETE_VOLUME_REQUEST__INIT;

	req.volume_id = (char *)rq->id;
	SET_SECRETS(req, sec, rq, Csi__V1__DeleteVolumeRequest__SecretsEntry);
	return rpc(h, CSI_RPC_DELETE_VOLUME, &req.base, 0, 0, NULL, on_retry, on_retry_ctx, res,
		   err);
}

static int s_validate(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
		      void *on_retry_ctx, struct storage_result *res, struct nerr *err)
{
	_cleanup_secrets_ struct kv_array sec = { 0 };
	Csi__V1__ValidateVolumeCapabilitiesRequest req = CSI__V1__VALIDATE_VOLUME_CAPABILITIES_REQUEST__INIT;
	_cleanup_resp_ Csi__V1__ValidateVolumeCapabilitiesResponse *resp = NULL;
	_cleanup_kv_ struct kv_array params = { 0 };
	Csi__V1__VolumeCapability *caps[1];
	struct vcap vc;
	int r;

	caps[0] = vcap_build(&vc, &rq->cap);
	req.volume_id = (char *)rq->id;
	req.n_volume_capabilities = 1;
	req.volume_capabilities = caps;
	if (kv_array_from_strv(&params, rq->params) < 0)
		return NOMEM(err);
	req.n_parameters = params.n;
	req.parameters = (Csi__V1__ValidateVolumeCapabilitiesRequest__ParametersEntry **)params.v;
	SET_SECRETS(req, sec, rq, Csi__V1__ValidateVolumeCapabilitiesRequest__SecretsEntry);
	r = rpc(h, CSI_RPC_VALIDATE_VOLUME_CAPABILITIES, &req.base, 0, 0,
		(ProtobufCMessage **)&resp, on_retry, on_retry_ctx, res, err);
	if (r < 0)
		return r;
	if (!resp->confirmed)
		return nerr_set(err, EINVAL, "the plugin does not confirm volume %s for these capabilities%s%s",
				rq->id, resp->message && resp->message[0] ? ": " : "",
				resp->message ? resp->message : "");
	return 0;
}

static int s_controller_publish(void *h, const struct storage_req *rq, char ***ret_pctx,
				storage_retry_fn on_retry, void *on_retry_ctx,
				struct storage_result *res, struct nerr *err)
{
	_cleanup_secrets_ struct kv_array sec = { 0 };
	Csi__V1__ControllerPublishVolumeRequest req = CSI__V1__CONTROLLER_PUBLISH_VOLUME_REQUEST__INIT;
	_cleanup_resp_ Csi__V1__ControllerPublishVolumeResponse *resp = NULL;
	_cleanup_kv_ struct kv_array vctx = { 0 };
	struct vcap vc;
	int r;

	req.volume_id = (char *)rq->id;
	req.node_id = (char *)(rq->node_id ? rq->node_id : "");
	req.volume_capability = vcap_build(&vc, &rq->cap);
	req.readonly = rq->readonly;
	if (kv_array_from_strv(&vctx, rq->vctx) < 0)
		return NOMEM(err);
	req.n_volume_context = vctx.n;
	req.volume_context = (Csi__V1__ControllerPublishVolumeRequest__VolumeContextEntry **)vctx.v;
	SET_SECRETS(req, sec, rq, Csi__V1__ControllerPublishVolumeRequest__SecretsEntry);
	r = rpc(h, CSI_RPC_CONTROLLER_PUBLISH_VOLUME, &req.base, 0, 0, (ProtobufCMessage **)&resp,
		on_retry, on_retry_ctx, res, err);
	if (r < 0)
		return r;
	if (strv_from_map(resp->n_publish_context, (void *const *)resp->publish_context, ret_pctx) < 0)
		return NOMEM(err);
	return 0;
}

static int s_controller_unpublish(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
				  void *on_retry_ctx, struct storage_result *res, struct nerr *err)
{
	_cleanup_secrets_ struct kv_array sec = { 0 };
	Csi__V1__ControllerUnpublishVolumeRequest req = CSI__V1__CONTROLLER_UNPUBLISH_VOLUME_REQUEST__INIT;

	req.volume_id = (char *)rq->id;
	req.node_id = (char *)(rq->node_id ? rq->node_id : "");
	SET_SECRETS(req, sec, rq, Csi__V1__ControllerUnpublishVolumeRequest__SecretsEntry);
	return rpc(h, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME, &req.base, 0, 0, NULL, on_retry,
		   on_retry_ctx, res, err);
}

static int s_list(void *h, const char *token, struct storage_page *ret, storage_retry_fn on_retry,
		  void *on_retry_ctx, struct storage_result *res, struct nerr *err)
{
	Csi__V1__ListVolumesRequest req = CSI__V1__LIST_VOLUMES_REQUEST__INIT;
	_cleanup_resp_ Csi__V1__ListVolumesResponse *resp = NULL;
	struct storage_page pg = { 0 };
	int r;

	req.starting_token = (char *)(token ? token : "");
	r = rpc(h, CSI_RPC_LIST_VOLUMES, &req.base, 0, 0, (ProtobufCMessage **)&resp, on_retry,
		on_retry_ctx, res, err);
	if (r < 0)
		return r;
	pg.v = calloc(resp->n_entries ? resp->n_entries : 1, sizeof(*pg.v));
	if (!pg.v)
		return NOMEM(err);
	for (size_t i = 0; i < resp->n_entries; i++) {
		const Csi__V1__Volume *lv = resp->entries[i] ? resp->entries[i]->volume : NULL;
		struct storage_volume *v = &pg.v[pg.n];

		if (!lv || !lv->volume_id)
			continue;
		pg.n++;
		v->capacity = lv->capacity_bytes;
		if (!(v->id = strdup(lv->volume_id)) ||
		    strv_from_map(lv->n_volume_context, (void *const *)lv->volume_context, &v->vctx) < 0) {
			storage_page_clear(&pg);
			return NOMEM(err);
		}
	}
	if (resp->next_token && resp->next_token[0] && !(pg.next_token = strdup(resp->next_token))) {
		storage_page_clear(&pg);
		return NOMEM(err);
	}
	*ret = pg;
	return 0;
}

static int s_capacity(void *h, const struct storage_req *rq, int64_t *ret_bytes,
		      storage_retry_fn on_retry, void *on_retry_ctx, struct storage_result *res,
		      struct nerr *err)
{
	Csi__V1__GetCapacityRequest req = CSI__V1__GET_CAPACITY_REQUEST__INIT;
	_cleanup_resp_ Csi__V1__GetCapacityResponse *resp = NULL;
	_cleanup_kv_ struct kv_array params = { 0 };
	Csi__V1__VolumeCapability *caps[1];
	struct vcap vc;
	int r;

	caps[0] = vcap_build(&vc, &rq->cap);
	req.n_volume_capabilities = 1;
	req.volume_capabilities = caps;
	if (kv_array_from_strv(&params, rq->params) < 0)
		return NOMEM(err);
	req.n_parameters = params.n;
	req.parameters = (Csi__V1__GetCapacityRequest__ParametersEntry **)params.v;
	r = rpc(h, CSI_RPC_GET_CAPACITY, &req.base, 0, 0, (ProtobufCMessage **)&resp, on_retry,
		on_retry_ctx, res, err);
	if (r < 0)
		return r;
	*ret_bytes = resp->available_capacity;
	return 0;
}

static int s_controller_expand(void *h, const struct storage_req *rq, int64_t *ret_capacity,
			       bool *ret_node_needed, storage_retry_fn on_retry, void *on_retry_ctx,
			       struct storage_result *res, struct nerr *err)
{
	_cleanup_secrets_ struct kv_array sec = { 0 };
	Csi__V1__ControllerExpandVolumeRequest req = CSI__V1__CONTROLLER_EXPAND_VOLUME_REQUEST__INIT;
	Csi__V1__CapacityRange range = CSI__V1__CAPACITY_RANGE__INIT;
	_cleanup_resp_ Csi__V1__ControllerExpandVolumeResponse *resp = NULL;
	struct vcap vc;
	int r;

	range.required_bytes = rq->bytes;
	req.volume_id = (char *)rq->id;
	req.capacity_range = &range;
	req.volume_capability = vcap_build(&vc, &rq->cap);
	SET_SECRETS(req, sec, rq, Csi__V1__ControllerExpandVolumeRequest__SecretsEntry);
	r = rpc(h, CSI_RPC_CONTROLLER_EXPAND_VOLUME, &req.base, 0, 0, (ProtobufCMessage **)&resp,
		on_retry, on_retry_ctx, res, err);
	if (r < 0)
		return r;
	*ret_capacity = resp->capacity_bytes;
	*ret_node_needed = resp->node_expansion_required;
	return 0;
}

/* ---- node ---- */

static int s_stage(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
		   void *on_retry_ctx, struct storage_result *res, struct nerr *err)
{
	_cleanup_secrets_ struct kv_array sec = { 0 };
	Csi__V1__NodeStageVolumeRequest req = CSI__V1__NODE_STAGE_VOLUME_REQUEST__INIT;
	_cleanup_kv_ struct kv_array pctx = { 0 }, vctx = { 0 };
	struct vcap vc;

	req.volume_id = (char *)rq->id;
	req.staging_target_path = (char *)(rq->staging ? rq->staging : "");
	req.volume_capability = vcap_build(&vc, &rq->cap);
	if (kv_array_from_strv(&pctx, rq->pctx) < 0 || kv_array_from_strv(&vctx, rq->vctx) < 0)
		return NOMEM(err);
	req.n_publish_context = pctx.n;
	req.publish_context = (Csi__V1__NodeStageVolumeRequest__PublishContextEntry **)pctx.v;
	req.n_volume_context = vctx.n;
	req.volume_context = (Csi__V1__NodeStageVolumeRequest__VolumeContextEntry **)vctx.v;
	SET_SECRETS(req, sec, rq, Csi__V1__NodeStageVolumeRequest__SecretsEntry);
	return rpc(h, CSI_RPC_NODE_STAGE_VOLUME, &req.base, 0, 0, NULL, on_retry, on_retry_ctx, res,
		   err);
}

static int s_unstage(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
		     void *on_retry_ctx, struct storage_result *res, struct nerr *err)
{
	Csi__V1__NodeUnstageVolumeRequest req = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;

	req.volume_id = (char *)rq->id;
	req.staging_target_path = (char *)(rq->staging ? rq->staging : "");
	return rpc(h, CSI_RPC_NODE_UNSTAGE_VOLUME, &req.base, 0, 0, NULL, on_retry, on_retry_ctx,
		   res, err);
}

static int s_publish(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
		     void *on_retry_ctx, struct storage_result *res, struct nerr *err)
{
	_cleanup_secrets_ struct kv_array sec = { 0 };
	Csi__V1__NodePublishVolumeRequest req = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	_cleanup_kv_ struct kv_array pctx = { 0 }, vctx = { 0 };
	struct vcap vc;

	req.volume_id = (char *)rq->id;
	req.staging_target_path = (char *)(rq->staging ? rq->staging : "");
	req.target_path = (char *)(rq->target ? rq->target : "");
	req.volume_capability = vcap_build(&vc, &rq->cap);
	req.readonly = rq->readonly;
	if (kv_array_from_strv(&pctx, rq->pctx) < 0 || kv_array_from_strv(&vctx, rq->vctx) < 0)
		return NOMEM(err);
	req.n_publish_context = pctx.n;
	req.publish_context = (Csi__V1__NodePublishVolumeRequest__PublishContextEntry **)pctx.v;
	req.n_volume_context = vctx.n;
	req.volume_context = (Csi__V1__NodePublishVolumeRequest__VolumeContextEntry **)vctx.v;
	SET_SECRETS(req, sec, rq, Csi__V1__NodePublishVolumeRequest__SecretsEntry);
	return rpc(h, CSI_RPC_NODE_PUBLISH_VOLUME, &req.base, 0, 0, NULL, on_retry, on_retry_ctx,
		   res, err);
}

static int s_unpublish(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
		       void *on_retry_ctx, struct storage_result *res, struct nerr *err)
{
	Csi__V1__NodeUnpublishVolumeRequest req = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;

	req.volume_id = (char *)rq->id;
	req.target_path = (char *)(rq->target ? rq->target : "");
	return rpc(h, CSI_RPC_NODE_UNPUBLISH_VOLUME, &req.base, 0, 0, NULL, on_retry, on_retry_ctx,
		   res, err);
}

static int s_node_expand(void *h, const struct storage_req *rq, int64_t *ret_capacity,
			 storage_retry_fn on_retry, void *on_retry_ctx, struct storage_result *res,
			 struct nerr *err)
{
	_cleanup_secrets_ struct kv_array sec = { 0 };
	Csi__V1__NodeExpandVolumeRequest req = CSI__V1__NODE_EXPAND_VOLUME_REQUEST__INIT;
	Csi__V1__CapacityRange range = CSI__V1__CAPACITY_RANGE__INIT;
	_cleanup_resp_ Csi__V1__NodeExpandVolumeResponse *resp = NULL;
	struct vcap vc;
	int r;

	range.required_bytes = rq->bytes;
	req.volume_id = (char *)rq->id;
	req.volume_path = (char *)(rq->path ? rq->path : "");
	req.staging_target_path = (char *)(rq->staging ? rq->staging : "");
	req.capacity_range = &range;
	req.volume_capability = vcap_build(&vc, &rq->cap);
	SET_SECRETS(req, sec, rq, Csi__V1__NodeExpandVolumeRequest__SecretsEntry);
	r = rpc(h, CSI_RPC_NODE_EXPAND_VOLUME, &req.base, 0, 0, (ProtobufCMessage **)&resp,
		on_retry, on_retry_ctx, res, err);
	if (r < 0)
		return r;
	*ret_capacity = resp->capacity_bytes;
	return 0;
}

static int s_stats(void *h, const struct storage_req *rq, uint64_t timeout_ms,
		   struct storage_stats *ret, storage_retry_fn on_retry, void *on_retry_ctx,
		   struct storage_result *res, struct nerr *err)
{
	Csi__V1__NodeGetVolumeStatsRequest req = CSI__V1__NODE_GET_VOLUME_STATS_REQUEST__INIT;
	_cleanup_resp_ Csi__V1__NodeGetVolumeStatsResponse *resp = NULL;
	struct storage_stats st = { 0 };
	int r;

	req.volume_id = (char *)rq->id;
	req.volume_path = (char *)(rq->path ? rq->path : "");
	req.staging_target_path = (char *)(rq->staging ? rq->staging : "");
	r = rpc(h, CSI_RPC_NODE_GET_VOLUME_STATS, &req.base, timeout_ms, 1,
		(ProtobufCMessage **)&resp, on_retry, on_retry_ctx, res, err);
	if (r < 0)
		return r;
	for (int k = 0; k < 3; k++)
		st.bytes[k] = st.inodes[k] = -1;
	for (size_t i = 0; i < resp->n_usage; i++) {
		const Csi__V1__VolumeUsage *u = resp->usage[i];
		long long *d = u->unit == CSI__V1__VOLUME_USAGE__UNIT__INODES ? st.inodes : st.bytes;

		d[0] = u->used;
		d[1] = u->available;
		d[2] = u->total;
	}
	st.has_condition = resp->volume_condition != NULL;
	st.abnormal = st.has_condition && resp->volume_condition->abnormal;
	snprintf(st.condition, sizeof(st.condition), "%s",
		 st.has_condition && resp->volume_condition->message ? resp->volume_condition->message : "");
	*ret = st;
	return 0;
}

/* ---- snapshots, modify, get ---- */

static int snapshot_from(const Csi__V1__Snapshot *m, struct storage_snapshot *ret)
{
	struct storage_snapshot s = {
		.size = m->size_bytes,
		.created_s = m->creation_time ? m->creation_time->seconds : 0,
		.created_ns = m->creation_time ? m->creation_time->nanos : 0,
		.ready = m->ready_to_use,
	};

	s.id = strdup(m->snapshot_id);
	s.source_id = strdup(m->source_volume_id ? m->source_volume_id : "");
	if (!s.id || !s.source_id) {
		storage_snapshot_clear(&s);
		return -ENOMEM;
	}
	*ret = s;
	return 0;
}

static int s_snapshot_create(void *h, const struct storage_req *rq, struct storage_snapshot *ret,
			     storage_retry_fn on_retry, void *on_retry_ctx, struct storage_result *res,
			     struct nerr *err)
{
	_cleanup_secrets_ struct kv_array sec = { 0 };
	_cleanup_kv_ struct kv_array params = { 0 };
	Csi__V1__CreateSnapshotRequest req = CSI__V1__CREATE_SNAPSHOT_REQUEST__INIT;
	_cleanup_resp_ Csi__V1__CreateSnapshotResponse *resp = NULL;
	int r;

	req.name = (char *)rq->name;
	req.source_volume_id = (char *)rq->id;
	if (kv_array_from_strv(&params, rq->params) < 0)
		return NOMEM(err);
	req.n_parameters = params.n;
	req.parameters = (Csi__V1__CreateSnapshotRequest__ParametersEntry **)params.v;
	SET_SECRETS(req, sec, rq, Csi__V1__CreateSnapshotRequest__SecretsEntry);
	r = rpc(h, CSI_RPC_CREATE_SNAPSHOT, &req.base, 0, 0, (ProtobufCMessage **)&resp, on_retry,
		on_retry_ctx, res, err);
	if (r < 0)
		return r;
	if (!resp->snapshot || !resp->snapshot->snapshot_id || !resp->snapshot->snapshot_id[0])
		return nerr_set(err, EIO, "CreateSnapshot: the plugin returned no snapshot id");
	if (snapshot_from(resp->snapshot, ret) < 0)
		return NOMEM(err);
	return 0;
}

static int s_snapshot_delete(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
			     void *on_retry_ctx, struct storage_result *res, struct nerr *err)
{
	_cleanup_secrets_ struct kv_array sec = { 0 };
	Csi__V1__DeleteSnapshotRequest req = CSI__V1__DELETE_SNAPSHOT_REQUEST__INIT;

	req.snapshot_id = (char *)rq->id;
	SET_SECRETS(req, sec, rq, Csi__V1__DeleteSnapshotRequest__SecretsEntry);
	return rpc(h, CSI_RPC_DELETE_SNAPSHOT, &req.base, 0, 0, NULL, on_retry, on_retry_ctx, res, err);
}

static int s_snapshot_list(void *h, const struct storage_req *rq, const char *token,
			   struct storage_snap_page *ret, storage_retry_fn on_retry, void *on_retry_ctx,
			   struct storage_result *res, struct nerr *err)
{
	_cleanup_secrets_ struct kv_array sec = { 0 };
	Csi__V1__ListSnapshotsRequest req = CSI__V1__LIST_SNAPSHOTS_REQUEST__INIT;
	_cleanup_resp_ Csi__V1__ListSnapshotsResponse *resp = NULL;
	struct storage_snap_page pg = { 0 };
	int r;

	req.starting_token = (char *)(token ? token : "");
	req.source_volume_id = (char *)(rq && rq->id ? rq->id : "");
	if (rq)
		SET_SECRETS(req, sec, rq, Csi__V1__ListSnapshotsRequest__SecretsEntry);
	r = rpc(h, CSI_RPC_LIST_SNAPSHOTS, &req.base, rq ? rq->timeout_ms : 0, rq && rq->timeout_ms ? 1 : 0,
		(ProtobufCMessage **)&resp, on_retry, on_retry_ctx, res, err);
	if (r < 0)
		return r;
	pg.s = calloc(resp->n_entries ? resp->n_entries : 1, sizeof(*pg.s));
	if (!pg.s)
		return NOMEM(err);
	for (size_t i = 0; i < resp->n_entries; i++) {
		const Csi__V1__Snapshot *m = resp->entries[i] ? resp->entries[i]->snapshot : NULL;

		if (!m || !m->snapshot_id || !m->snapshot_id[0])
			continue;
		if (snapshot_from(m, &pg.s[pg.n]) < 0) {
			storage_snap_page_clear(&pg);
			return NOMEM(err);
		}
		pg.n++;
	}
	if (resp->next_token && resp->next_token[0] && !(pg.next_token = strdup(resp->next_token))) {
		storage_snap_page_clear(&pg);
		return NOMEM(err);
	}
	*ret = pg;
	return 0;
}

static int s_modify(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
		    void *on_retry_ctx, struct storage_result *res, struct nerr *err)
{
	_cleanup_secrets_ struct kv_array sec = { 0 };
	_cleanup_kv_ struct kv_array mp = { 0 };
	Csi__V1__ControllerModifyVolumeRequest req = CSI__V1__CONTROLLER_MODIFY_VOLUME_REQUEST__INIT;

	req.volume_id = (char *)rq->id;
	if (kv_array_from_strv(&mp, rq->mparams) < 0)
		return NOMEM(err);
	req.n_mutable_parameters = mp.n;
	req.mutable_parameters = (Csi__V1__ControllerModifyVolumeRequest__MutableParametersEntry **)mp.v;
	SET_SECRETS(req, sec, rq, Csi__V1__ControllerModifyVolumeRequest__SecretsEntry);
	return rpc(h, CSI_RPC_CONTROLLER_MODIFY_VOLUME, &req.base, 0, 0, NULL, on_retry, on_retry_ctx,
		   res, err);
}

static int s_get_volume(void *h, const struct storage_req *rq, struct storage_volume_status *ret,
			storage_retry_fn on_retry, void *on_retry_ctx, struct storage_result *res,
			struct nerr *err)
{
	Csi__V1__ControllerGetVolumeRequest req = CSI__V1__CONTROLLER_GET_VOLUME_REQUEST__INIT;
	_cleanup_resp_ Csi__V1__ControllerGetVolumeResponse *resp = NULL;
	struct storage_volume_status st = { 0 };
	int r;

	req.volume_id = (char *)rq->id;
	/* read by a FUSE thread (a volume's condition): one attempt, 5 s
	 * deadline, as NodeGetVolumeStats (a read must not hang on a plugin) */
	r = rpc(h, CSI_RPC_CONTROLLER_GET_VOLUME, &req.base, 5000, 1, (ProtobufCMessage **)&resp, on_retry,
		on_retry_ctx, res, err);
	if (r < 0)
		return r;
	if (!resp->volume || !resp->volume->volume_id)
		return nerr_set(err, EIO, "ControllerGetVolume: the plugin returned no volume");
	st.v.capacity = resp->volume->capacity_bytes;
	if (!(st.v.id = strdup(resp->volume->volume_id))
	    || strv_from_map(resp->volume->n_volume_context, (void *const *)resp->volume->volume_context,
			     &st.v.vctx) < 0) {
		storage_volume_clear(&st.v);
		return NOMEM(err);
	}
	const Csi__V1__VolumeCondition *c = resp->status ? resp->status->volume_condition : NULL;
	st.has_condition = c != NULL;
	st.abnormal = c && c->abnormal;
	snprintf(st.condition, sizeof(st.condition), "%s", c && c->message ? c->message : "");
	*ret = st;
	return 0;
}

/* ---- metrics ---- */

static int s_render_metrics(void *const *h, const char *const *names, size_t n, struct sbuf *out)
{
	static const struct { const char *name, *type, *help; } fam[] = {
		{ "nodefs_csi_rpcs_pending", "gauge", "CSI calls in flight." },
		{ "nodefs_csi_rpcs_total", "counter", "CSI calls completed, by gRPC status code." },
		{ "nodefs_csi_rpc_duration_seconds", "histogram", "CSI call latency, retries included." },
	};
	int r = 0;

	for (size_t f = 0; r >= 0 && f < ARRAY_SIZE(fam); f++) {
		r = sbuf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", fam[f].name, fam[f].help,
				fam[f].name, fam[f].type);
		for (size_t i = 0; r >= 0 && i < n; i++) {
			struct csi_metrics m;

			if (!h[i])
				continue;
			csi_plugin_metrics(h[i], &m);
			for (int c = 0; r >= 0 && c < _CSI_RPC_MAX; c++) {
				const struct csi_rpc_metrics *x = &m.rpc[c];
				const char *rn = csi_rpc_to_string(c);
				char labels[256];

				if (f == 0) {
					r = sbuf_printf(out, "%s{plugin=\"%s\",rpc=\"%s\"} %llu\n", fam[f].name,
							names[i], rn, (unsigned long long)x->pending);
					continue;
				}
				if (f == 1) {
					if (x->successes)
						r = sbuf_printf(out, "%s{plugin=\"%s\",rpc=\"%s\",code=\"OK\"} %llu\n",
								fam[f].name, names[i], rn,
								(unsigned long long)x->successes);
					for (int k = 1; r >= 0 && k < _GRPC_CODE_MAX; k++)
						if (x->errors[k])
							r = sbuf_printf(out, "%s{plugin=\"%s\",rpc=\"%s\",code=\"%s\"} %llu\n",
									fam[f].name, names[i], rn,
									grpc_code_to_string(k),
									(unsigned long long)x->errors[k]);
					continue;
				}
				if (!x->count)
					continue;
				snprintf(labels, sizeof(labels), "plugin=\"%s\",rpc=\"%s\"", names[i], rn);
				r = hist_render(out, fam[f].name, labels, csi_latency_buckets,
						CSI_LATENCY_BUCKETS, csi_plugin_latency(h[i], c));
			}
		}
	}
	return r;
}

const struct storage_ops csi_storage_ops = {
	.name = "csi",
	.open = s_open,
	.close = s_close,
	.cancel = s_cancel,
	.health = s_health,
	.on_health = s_on_health,
	.probe = s_probe,
	.plugin_info = s_plugin_info,
	.capabilities = s_capabilities,
	.node_info = s_node_info,
	.create = s_create,
	.delete = s_delete,
	.validate = s_validate,
	.controller_publish = s_controller_publish,
	.controller_unpublish = s_controller_unpublish,
	.list = s_list,
	.capacity = s_capacity,
	.controller_expand = s_controller_expand,
	.stage = s_stage,
	.unstage = s_unstage,
	.publish = s_publish,
	.unpublish = s_unpublish,
	.node_expand = s_node_expand,
	.stats = s_stats,
	.snapshot_create = s_snapshot_create,
	.snapshot_delete = s_snapshot_delete,
	.snapshot_list = s_snapshot_list,
	.modify = s_modify,
	.get_volume = s_get_volume,
	.render_metrics = s_render_metrics,
};
