/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * csi: a CSI v1 client for the backend.
 *
 * One struct csi_plugin per configured plugin: a gRPC connection to its unix
 * socket (owned by the event loop thread), a periodic Probe that drives the
 * plugin's health, per-RPC metrics, and a BLOCKING call API for the backend's
 * worker threads with retries (randomized exponential backoff) for transient
 * codes on idempotent RPCs. gRPC status codes map to errno through one table
 * (grpc_code_to_errno in grpc.h); the remote message and raw code are kept in
 * struct csi_result for the operation and the error file.
 *
 * Requests and responses are the protobuf-c types generated from csi.proto
 * (csi.pb-c.h: Csi__V1__CreateVolumeRequest, CSI__V1__CREATE_VOLUME_REQUEST__INIT,
 * ...). This layer knows nothing of volumes, files or the tree. The backend
 * never includes this header: it calls plugins through struct storage_ops
 * (backend/core/storage.h), which csi-storage.c implements on top of it.
 *
 * Threads: csi_call() and the typed wrappers block and must run on a thread
 * other than the loop thread (-EDEADLK otherwise); the loop must be running
 * (loop_run on its own thread) for calls to make progress and for
 * csi_plugin_free() to return. Getters may be called from any thread.
 *
 * Example (a backend worker):
 *	Csi__V1__DeleteVolumeRequest req = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
 *	ProtobufCMessage *resp;
 *	struct csi_result res;
 *	req.volume_id = id;
 *	r = csi_call(p, CSI_RPC_DELETE_VOLUME, &req.base, &resp, &res, err);
 *	if (r >= 0) protobuf_c_message_free_unpacked(resp, NULL);
 *	// else: -r is the errno, err->msg the line for the error file,
 *	//       res.code the raw gRPC code, res.attempts for the operation.
 */
#ifndef NODEFS_CSI_H
#define NODEFS_CSI_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <protobuf-c/protobuf-c.h>

#include "csi.pb-c.h"
#include "grpc.h"
#include "nerr.h"

struct loop;
struct csi_plugin;

/* Every RPC nodefs makes. The strings are the CSI method names. */
enum csi_rpc {
	CSI_RPC_GET_PLUGIN_INFO,
	CSI_RPC_GET_PLUGIN_CAPABILITIES,
	CSI_RPC_PROBE,
	CSI_RPC_CREATE_VOLUME,
	CSI_RPC_DELETE_VOLUME,
	CSI_RPC_CONTROLLER_PUBLISH_VOLUME,
	CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME,
	CSI_RPC_VALIDATE_VOLUME_CAPABILITIES,
	CSI_RPC_LIST_VOLUMES,
	CSI_RPC_GET_CAPACITY,
	CSI_RPC_CONTROLLER_GET_CAPABILITIES,
	CSI_RPC_CONTROLLER_EXPAND_VOLUME,
	CSI_RPC_NODE_STAGE_VOLUME,
	CSI_RPC_NODE_UNSTAGE_VOLUME,
	CSI_RPC_NODE_PUBLISH_VOLUME,
	CSI_RPC_NODE_UNPUBLISH_VOLUME,
	CSI_RPC_NODE_GET_VOLUME_STATS,
	CSI_RPC_NODE_EXPAND_VOLUME,
	CSI_RPC_NODE_GET_CAPABILITIES,
	CSI_RPC_NODE_GET_INFO,
	CSI_RPC_CREATE_SNAPSHOT,
	CSI_RPC_DELETE_SNAPSHOT,
	CSI_RPC_LIST_SNAPSHOTS,
	CSI_RPC_CONTROLLER_GET_VOLUME,
	CSI_RPC_CONTROLLER_MODIFY_VOLUME,
	_CSI_RPC_MAX,
};

/* "GetPluginInfo", ..., NULL if out of range. */
const char *csi_rpc_to_string(enum csi_rpc rpc);
/* Inverse of the above; -EINVAL if unknown. */
int csi_rpc_from_string(const char *s);
/* The HTTP/2 :path, e.g. "/csi.v1.Identity/Probe"; NULL if out of range. */
const char *csi_rpc_path(enum csi_rpc rpc);
/* Request and response descriptors of an RPC; NULL if out of range. */
const ProtobufCMessageDescriptor *csi_rpc_request_descriptor(enum csi_rpc rpc);
const ProtobufCMessageDescriptor *csi_rpc_response_descriptor(enum csi_rpc rpc);

/* Retry policy: from the config's retry_backoff and retry_max. Attempt n
 * (n >= 1) that fails with a retryable code waits
 * min(max_ms, backoff_ms * 2^(n-1)) scaled by a uniform jitter in [0.5, 1.0]
 * before attempt n + 1, up to max_attempts attempts in all. */
struct csi_retry {
	uint64_t backoff_ms;	/* 0: 1000 */
	uint64_t max_ms;	/* 0: 120000 */
	unsigned max_attempts;	/* 0: 5; 1 disables retries */
};

/* Codes retried on idempotent calls: UNAVAILABLE, DEADLINE_EXCEEDED,
 * ABORTED, RESOURCE_EXHAUSTED. Never: INVALID_ARGUMENT, NOT_FOUND,
 * ALREADY_EXISTS, FAILED_PRECONDITION, UNIMPLEMENTED, or anything else. */
bool csi_code_retryable(int grpc_code);

/* The wait before attempt (attempt + 1), attempt >= 1 (see struct csi_retry).
 * *rng: caller-owned xorshift state. Pure: unit-tested. */
uint64_t csi_retry_delay_ms(const struct csi_retry *retry, unsigned attempt, uint64_t *rng);

/* What a call ended with, filled by csi_call on success and on failure. */
struct csi_result {
	int code;			/* enum grpc_code of the last attempt */
	char message[NERR_MSG_MAX];	/* the plugin's grpc-message, or ours */
	unsigned attempts;		/* attempts made (>= 1 once on the wire) */
	uint64_t elapsed_us;		/* whole call, retries included */
};

/* Create a client for one plugin. endpoint is "unix:///abs/path.sock" (or
 * "unix:/abs/path"); retry NULL means defaults; timeout_ms is the per-attempt
 * deadline (csi_timeout; 0: 120 s). Connecting starts at once, on the loop;
 * a missing socket is not an error (the plugin reads DOWN and reconnects
 * with backoff). Returns 0, -EINVAL (bad endpoint, name), -ENOMEM.
 * Any thread; from a thread other than the loop's, the loop must be running
 * (the connection is set up on it and this waits for that). */
int csi_plugin_new(struct loop *loop, const char *name, const char *endpoint,
		   const struct csi_retry *retry, uint64_t timeout_ms,
		   struct csi_plugin **ret_plugin, struct nerr *err);

/* Shut down: blocked csi_call()s return -ECANCELED (code CANCELLED), the
 * connection closes, then everything is freed. Waits for callers to leave.
 * NULL-safe. Never from the loop thread. */
void csi_plugin_free(struct csi_plugin *p);

/* The first half of csi_plugin_free: calls in flight end now with
 * CANCELLED (RST_STREAM on the wire), later ones fail at once, the
 * connection closes; p stays valid until csi_plugin_free. For a stop
 * whose grace ran out. NULL-safe; any thread but the loop's. */
void csi_plugin_cancel(struct csi_plugin *p);

const char *csi_plugin_name(const struct csi_plugin *p);
/* The socket path (without "unix://"). */
const char *csi_plugin_socket(const struct csi_plugin *p);

/* Probe every ms milliseconds while connected (default 10000; 0 stops). */
void csi_plugin_set_probe_interval(struct csi_plugin *p, uint64_t ms);

/* Make one unary call, retrying per the plugin's policy (each attempt gets
 * the per-attempt deadline; the whole call can take up to
 * max_attempts * timeout plus the backoff waits). req must be the
 * RPC's request type. On success returns 0 and *ret_resp is the unpacked
 * response (free with protobuf_c_message_free_unpacked(resp, NULL)).
 * On failure returns -errno from grpc_code_to_errno (ENOENT, EEXIST, EINVAL,
 * EBUSY, ETIMEDOUT, EAGAIN, ENOSPC, EACCES, EOPNOTSUPP, ECANCELED, EIO),
 * or -EINVAL (wrong request type), -E2BIG (request over 4 MiB), -ENOMEM,
 * -EDEADLK (called on the loop thread); err gets "RpcName: CODE: message".
 * res (may be NULL) is filled in both cases. Any thread but the loop's. */
int csi_call(struct csi_plugin *p, enum csi_rpc rpc, const ProtobufCMessage *req,
	     ProtobufCMessage **ret_resp, struct csi_result *res, struct nerr *err);

/* Same with an explicit per-attempt timeout and attempt limit
 * (0 = the plugin's). */
int csi_call_ex(struct csi_plugin *p, enum csi_rpc rpc, const ProtobufCMessage *req,
		uint64_t timeout_ms, unsigned max_attempts,
		ProtobufCMessage **ret_resp, struct csi_result *res, struct nerr *err);

/* Called after each failed attempt that is to be retried, before its
 * backoff, on the caller's thread, with attempts, code and message so far. */
typedef void (*csi_retry_fn)(void *ctx, const struct csi_result *so_far);

/* csi_call_ex that also tells on_retry (may be NULL) of each retry. */
int csi_call_watched(struct csi_plugin *p, enum csi_rpc rpc, const ProtobufCMessage *req,
		     uint64_t timeout_ms, unsigned max_attempts, csi_retry_fn on_retry,
		     void *on_retry_ctx, ProtobufCMessage **ret_resp, struct csi_result *res,
		     struct nerr *err);

/* ---- typed conveniences ---- */

/* Probe once (no retries) and update the health with its answer.
 * *ret_ready: the plugin's readiness (absent counts as ready). */
int csi_probe(struct csi_plugin *p, bool *ret_ready, struct nerr *err);

/* GetPluginInfo: *ret_name and *ret_vendor_version are malloc'd. */
int csi_get_plugin_info(struct csi_plugin *p, char **ret_name, char **ret_vendor_version,
			struct nerr *err);

/* Capabilities as bit sets: bit N set when the enum value N is reported.
 * plugin: PluginCapability.Service.Type; expansion: VolumeExpansion.Type;
 * controller: ControllerServiceCapability.RPC.Type (0 when the plugin has
 * no CONTROLLER_SERVICE); node: NodeServiceCapability.RPC.Type. */
struct csi_caps {
	uint32_t plugin;
	uint32_t expansion;
	uint32_t controller;
	uint32_t node;
};
#define CSI_CAP(set, value) (((set) >> (value)) & 1u)

/* GetPluginCapabilities, then ControllerGetCapabilities (if the plugin has
 * a controller service) and NodeGetCapabilities. */
int csi_get_caps(struct csi_plugin *p, struct csi_caps *ret_caps, struct nerr *err);

/* ---- health ---- */

/* DOWN: no connection (or Probe failed with UNAVAILABLE); NOT_READY: Probe
 * answered ready=false or failed otherwise; READY: Probe answered ready. */
enum csi_health { CSI_HEALTH_DOWN, CSI_HEALTH_NOT_READY, CSI_HEALTH_READY };
/* "DOWN", "NOT_READY", "READY". */
const char *csi_health_to_string(enum csi_health h);

struct csi_health_info {
	enum csi_health health;
	time_t since;			/* wall clock of the last change */
	char reason[NERR_MSG_MAX];	/* why, "" when READY */
};

/* Copy the current health. Any thread. */
void csi_plugin_health(struct csi_plugin *p, struct csi_health_info *ret);

/* Be told whenever the health (READY, NOT_READY, DOWN) changes. fn runs on
 * whichever thread saw the change (the loop, or a caller's), with no lock of
 * the plugin held but possibly the connection's: it must only take note
 * (set a flag, wake a thread) and never call back into this plugin. NULL
 * stops it; csi_plugin_free() also does. */
typedef void (*csi_health_fn)(void *userdata);
void csi_plugin_on_health(struct csi_plugin *p, csi_health_fn fn, void *userdata);

/* ---- metrics ---- */

/* Upper bounds (seconds) of the latency histogram buckets, Prometheus
 * style; an implicit +Inf bucket follows. */
#define CSI_LATENCY_BUCKETS 12
extern const double csi_latency_buckets[CSI_LATENCY_BUCKETS];

/* Per RPC, counted per attempt on the wire (a retried call counts each
 * attempt). hist[k] counts attempts with latency in (bucket[k-1], bucket[k]]
 * (NOT cumulative: sum them for Prometheus's le= buckets);
 * hist[CSI_LATENCY_BUCKETS] counts those above the last bucket, so the hist[]
 * entries add up to count. errors[] holds every non-OK code, CANCELLED
 * included; cancelled repeats errors[GRPC_CANCELLED] for convenience. */
struct csi_rpc_metrics {
	uint64_t pending;
	uint64_t successes;
	uint64_t errors[_GRPC_CODE_MAX];
	uint64_t cancelled;
	uint64_t count;
	double latency_sum;		/* seconds */
	uint64_t hist[CSI_LATENCY_BUCKETS + 1];
};

struct csi_metrics {
	struct csi_rpc_metrics rpc[_CSI_RPC_MAX];
	uint64_t connects;		/* successful connects */
	uint64_t disconnects;		/* connection losses */
};

/* Copy a snapshot of the plugin's metrics (the counts consistent; the
 * latency histogram read while others may add to it). Any thread. */
void csi_plugin_metrics(struct csi_plugin *p, struct csi_metrics *ret);

/* The latency histogram of one RPC (common/hist, the buckets above), for
 * hist_render. Lives as long as the plugin. Any thread. */
struct hist;
const struct hist *csi_plugin_latency(struct csi_plugin *p, enum csi_rpc rpc);

#endif
