/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * csi: the CSI v1 client (see csi.h). It turns blocking calls from backend
 * worker threads into work for the loop thread, which owns each plugin's
 * h2_conn; it retries, probes, and keeps health and metrics. It knows
 * nothing of volumes, files or the FUSE tree.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "csi.h"
#include "h2conn.h"
#include "hist.h"
#include "loop.h"
#include "macro.h"

#define DEFAULT_TIMEOUT_MS 120000u
#define DEFAULT_PROBE_MS 10000u
#define PROBE_TIMEOUT_MAX_MS 10000u

struct rpc_desc {
	const char *name;
	const char *path;
	const ProtobufCMessageDescriptor *req, *resp;
	bool idempotent;
};

/* Every CSI v1 RPC here is idempotent by the spec's contract. */
#define RPC(e, svc, m, lower) [e] = { #m, "/csi.v1." #svc "/" #m, \
	&csi__v1__##lower##_request__descriptor, &csi__v1__##lower##_response__descriptor, true }
static const struct rpc_desc rpcs[_CSI_RPC_MAX] = {
	RPC(CSI_RPC_GET_PLUGIN_INFO, Identity, GetPluginInfo, get_plugin_info),
	RPC(CSI_RPC_GET_PLUGIN_CAPABILITIES, Identity, GetPluginCapabilities, get_plugin_capabilities),
	RPC(CSI_RPC_PROBE, Identity, Probe, probe),
	RPC(CSI_RPC_CREATE_VOLUME, Controller, CreateVolume, create_volume),
	RPC(CSI_RPC_DELETE_VOLUME, Controller, DeleteVolume, delete_volume),
	RPC(CSI_RPC_CONTROLLER_PUBLISH_VOLUME, Controller, ControllerPublishVolume, controller_publish_volume),
	RPC(CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME, Controller, ControllerUnpublishVolume, controller_unpublish_volume),
	RPC(CSI_RPC_VALIDATE_VOLUME_CAPABILITIES, Controller, ValidateVolumeCapabilities, validate_volume_capabilities),
	RPC(CSI_RPC_LIST_VOLUMES, Controller, ListVolumes, list_volumes),
	RPC(CSI_RPC_GET_CAPACITY, Controller, GetCapacity, get_capacity),
	RPC(CSI_RPC_CONTROLLER_GET_CAPABILITIES, Controller, ControllerGetCapabilities, controller_get_capabilities),
	RPC(CSI_RPC_CONTROLLER_EXPAND_VOLUME, Controller, ControllerExpandVolume, controller_expand_volume),
	RPC(CSI_RPC_NODE_STAGE_VOLUME, Node, NodeStageVolume, node_stage_volume),
	RPC(CSI_RPC_NODE_UNSTAGE_VOLUME, Node, NodeUnstageVolume, node_unstage_volume),
	RPC(CSI_RPC_NODE_PUBLISH_VOLUME, Node, NodePublishVolume, node_publish_volume),
	RPC(CSI_RPC_NODE_UNPUBLISH_VOLUME, Node, NodeUnpublishVolume, node_unpublish_volume),
	RPC(CSI_RPC_NODE_GET_VOLUME_STATS, Node, NodeGetVolumeStats, node_get_volume_stats),
	RPC(CSI_RPC_NODE_EXPAND_VOLUME, Node, NodeExpandVolume, node_expand_volume),
	RPC(CSI_RPC_NODE_GET_CAPABILITIES, Node, NodeGetCapabilities, node_get_capabilities),
	RPC(CSI_RPC_NODE_GET_INFO, Node, NodeGetInfo, node_get_info),
	RPC(CSI_RPC_CREATE_SNAPSHOT, Controller, CreateSnapshot, create_snapshot),
	RPC(CSI_RPC_DELETE_SNAPSHOT, Controller, DeleteSnapshot, delete_snapshot),
	RPC(CSI_RPC_LIST_SNAPSHOTS, Controller, ListSnapshots, list_snapshots),
	RPC(CSI_RPC_CONTROLLER_GET_VOLUME, Controller, ControllerGetVolume, controller_get_volume),
	RPC(CSI_RPC_CONTROLLER_MODIFY_VOLUME, Controller, ControllerModifyVolume, controller_modify_volume),
};
#undef RPC

const double csi_latency_buckets[CSI_LATENCY_BUCKETS] = {
	.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 120,
};

struct csi_plugin {
	struct loop *loop;
	char *name;
	char *sock;
	struct csi_retry retry;
	uint64_t timeout_ms;
	atomic_uint_fast64_t probe_ms;
	atomic_uint callers;		/* callers inside csi_call (lock-free copy of users) */

	pthread_mutex_t lock;
	pthread_cond_t cond;		/* closing, users, loop jobs (CLOCK_MONOTONIC) */
	bool closing;
	unsigned users;			/* threads inside csi_call */
	struct csi_health_info health;
	csi_health_fn on_health;	/* told of every change of health.health */
	void *on_health_ud;
	struct csi_metrics m;		/* but for the latency: */
	struct hist latency[_CSI_RPC_MAX];	/* lock-free, common/hist */
	uint64_t rng;

	/* Loop thread only; conn is also read under lock by direct callers
	 * (set before any call, cleared under lock at teardown). */
	struct h2_conn *conn;
	struct loop_timer *probe_timer;
	bool probe_inflight;
	uint64_t probe_start_us;
	bool was_up;
};

const char *csi_rpc_to_string(enum csi_rpc rpc)
{
	return (unsigned)rpc < _CSI_RPC_MAX ? rpcs[rpc].name : NULL;
}

int csi_rpc_from_string(const char *s)
{
	for (int i = 0; i < _CSI_RPC_MAX; i++)
		if (strcmp(s, rpcs[i].name) == 0)
			return i;
	return -EINVAL;
}

const char *csi_rpc_path(enum csi_rpc rpc)
{
	return (unsigned)rpc < _CSI_RPC_MAX ? rpcs[rpc].path : NULL;
}

const ProtobufCMessageDescriptor *csi_rpc_request_descriptor(enum csi_rpc rpc)
{
	return (unsigned)rpc < _CSI_RPC_MAX ? rpcs[rpc].req : NULL;
}

const ProtobufCMessageDescriptor *csi_rpc_response_descriptor(enum csi_rpc rpc)
{
	return (unsigned)rpc < _CSI_RPC_MAX ? rpcs[rpc].resp : NULL;
}

bool csi_code_retryable(int code)
{
	switch (code) {
	case GRPC_UNAVAILABLE:
	case GRPC_DEADLINE_EXCEEDED:
	case GRPC_ABORTED:
	case GRPC_RESOURCE_EXHAUSTED:
		return true;
	default:
		return false;
	}
}

static uint64_t xorshift(uint64_t *rng)
{
	uint64_t x = *rng ? *rng : 0x2545f4914f6cdd1dull;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *rng = x;
}

uint64_t csi_retry_delay_ms(const struct csi_retry *retry, unsigned attempt, uint64_t *rng)
{
	uint64_t base = retry && retry->backoff_ms ? retry->backoff_ms : 1000;
	uint64_t max = retry && retry->max_ms ? retry->max_ms : 120000;
	uint64_t d = base;

	for (unsigned i = 1; i < attempt && d < max; i++)
		d = d > UINT64_MAX / 2 ? UINT64_MAX : d * 2;
	if (d > max)
		d = max;
	/* Jitter in [0.5, 1.0]: callers retrying together spread out. */
	double u = (double)(xorshift(rng) >> 11) / (double)(1ull << 53);
	return (uint64_t)((double)d * (0.5 + 0.5 * u));
}

const char *csi_health_to_string(enum csi_health h)
{
	switch (h) {
	case CSI_HEALTH_READY: return "READY";
	case CSI_HEALTH_NOT_READY: return "NOT_READY";
	default: return "DOWN";
	}
}

/* ---- health and metrics (under p->lock) ---- */

/* true when the health changed: the caller tells the owner (health_told)
 * once it has let go of p->lock. */
static bool health_set_locked(struct csi_plugin *p, enum csi_health h, const char *reason)
{
	bool changed = p->health.health != h;

	if (changed) {
		p->health.health = h;
		p->health.since = time(NULL);
	}
	snprintf(p->health.reason, sizeof(p->health.reason), "%s", reason ? reason : "");
	return changed;
}

static void health_told(struct csi_plugin *p)
{
	pthread_mutex_lock(&p->lock);
	csi_health_fn fn = p->on_health;
	void *ud = p->on_health_ud;
	pthread_mutex_unlock(&p->lock);
	if (fn)
		fn(ud);
}

static void health_set(struct csi_plugin *p, enum csi_health h, const char *reason)
{
	pthread_mutex_lock(&p->lock);
	bool changed = health_set_locked(p, h, reason);
	pthread_mutex_unlock(&p->lock);
	if (changed)
		health_told(p);
}

/* Judge a Probe outcome. body: the ProbeResponse bytes when code is OK. */
static void health_from_probe(struct csi_plugin *p, int code, const char *message,
			      const uint8_t *body, size_t len, bool *ret_ready)
{
	char why[NERR_MSG_MAX];

	if (code == GRPC_OK) {
		Csi__V1__ProbeResponse *r = csi__v1__probe_response__unpack(NULL, len, body);
		bool ready = r && (!r->ready || r->ready->value);

		if (!r)
			health_set(p, CSI_HEALTH_NOT_READY, "Probe: undecodable reply");
		else
			health_set(p, ready ? CSI_HEALTH_READY : CSI_HEALTH_NOT_READY,
				   ready ? "" : "plugin reports not ready");
		if (ret_ready)
			*ret_ready = ready;
		if (r)
			csi__v1__probe_response__free_unpacked(r, NULL);
		return;
	}
	snprintf(why, sizeof(why), "Probe: %s: %s", grpc_code_to_string(code), message);
	if (code == GRPC_CANCELLED)
		return;		/* shutting down: health no longer matters */
	health_set(p, code == GRPC_UNAVAILABLE ? CSI_HEALTH_DOWN : CSI_HEALTH_NOT_READY, why);
}

static void metrics_start(struct csi_plugin *p, enum csi_rpc rpc)
{
	pthread_mutex_lock(&p->lock);
	p->m.rpc[rpc].pending++;
	pthread_mutex_unlock(&p->lock);
}

static void metrics_unstart(struct csi_plugin *p, enum csi_rpc rpc)
{
	pthread_mutex_lock(&p->lock);
	p->m.rpc[rpc].pending--;
	pthread_mutex_unlock(&p->lock);
}

static void metrics_done(struct csi_plugin *p, enum csi_rpc rpc, int code, uint64_t us)
{
	struct csi_rpc_metrics *m = &p->m.rpc[rpc];

	pthread_mutex_lock(&p->lock);
	m->pending--;
	if (code == GRPC_OK)
		m->successes++;
	else if (code > 0 && code < _GRPC_CODE_MAX)
		m->errors[code]++;
	else
		m->errors[GRPC_UNKNOWN]++;
	if (code == GRPC_CANCELLED)
		m->cancelled++;
	m->count++;
	pthread_mutex_unlock(&p->lock);
	hist_observe(&p->latency[rpc], csi_latency_buckets, CSI_LATENCY_BUCKETS, us * 1000);
}

/* ---- running things on the loop thread ---- */

struct loop_job {
	struct csi_plugin *p;
	void (*fn)(struct csi_plugin *p, void *arg);
	void *arg;
	bool done;
};

static void job_run(struct loop *l, void *ud)
{
	struct loop_job *j = ud;

	j->fn(j->p, j->arg);
	pthread_mutex_lock(&j->p->lock);
	j->done = true;
	pthread_cond_broadcast(&j->p->cond);
	pthread_mutex_unlock(&j->p->lock);
}

/* Run fn on the loop thread and wait for it (inline on the loop thread). */
static int run_on_loop(struct csi_plugin *p, void (*fn)(struct csi_plugin *, void *), void *arg)
{
	struct loop_job j = { .p = p, .fn = fn, .arg = arg };

	if (loop_in_thread(p->loop)) {
		fn(p, arg);
		return 0;
	}
	int r = loop_submit(p->loop, job_run, &j);
	if (r < 0)
		return r;
	pthread_mutex_lock(&p->lock);
	while (!j.done)
		pthread_cond_wait(&p->cond, &p->lock);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

/* ---- periodic Probe (loop thread) ---- */

static void probe_schedule(struct csi_plugin *p, uint64_t ms);

static void on_probe_done(void *ud, const struct grpc_reply *r)
{
	struct csi_plugin *p = ud;

	metrics_done(p, CSI_RPC_PROBE, r->code, loop_now_us() - p->probe_start_us);
	p->probe_inflight = false;
	health_from_probe(p, r->code, r->message, r->body, r->body_len, NULL);
	if (r->code != GRPC_CANCELLED)
		probe_schedule(p, atomic_load(&p->probe_ms));
}

static void probe_fire(struct loop *l, struct loop_timer *t, void *ud)
{
	struct csi_plugin *p = ud;
	uint64_t tmo = p->timeout_ms < PROBE_TIMEOUT_MAX_MS ? p->timeout_ms : PROBE_TIMEOUT_MAX_MS;

	p->probe_timer = NULL;
	if (p->probe_inflight || !p->conn)
		return;
	p->probe_start_us = loop_now_us();
	metrics_start(p, CSI_RPC_PROBE);
	if (h2_conn_submit(p->conn, rpcs[CSI_RPC_PROBE].path, NULL, 0, tmo, on_probe_done, p, NULL) < 0) {
		metrics_done(p, CSI_RPC_PROBE, GRPC_RESOURCE_EXHAUSTED, 0);
		probe_schedule(p, atomic_load(&p->probe_ms));
		return;
	}
	p->probe_inflight = true;
}

static void probe_schedule(struct csi_plugin *p, uint64_t ms)
{
	if (!ms || p->probe_timer || p->probe_inflight || !p->conn)
		return;
	p->probe_timer = loop_add_timer(p->loop, ms, probe_fire, p);
}

static void on_conn_state(void *ud, enum h2_state st, const char *reason)
{
	struct csi_plugin *p = ud;

	bool changed = false;

	pthread_mutex_lock(&p->lock);
	if (st == H2_UP) {
		p->m.connects++;
		p->was_up = true;
	} else {
		if (p->was_up)
			p->m.disconnects++;
		p->was_up = false;
		changed = health_set_locked(p, CSI_HEALTH_DOWN, reason);
	}
	pthread_mutex_unlock(&p->lock);
	if (changed)
		health_told(p);
	if (st == H2_UP && atomic_load(&p->probe_ms)) {
		/* Judge a fresh connection at once. */
		if (p->probe_timer) {
			loop_del_timer(p->loop, p->probe_timer);
			p->probe_timer = NULL;
		}
		probe_schedule(p, 1);
	}
}

static void plugin_setup(struct csi_plugin *p, void *arg)
{
	int *ret = arg;
	struct h2_conn_opts o = {
		.backoff_ms = p->retry.backoff_ms,
		.backoff_max_ms = p->retry.max_ms,
		.on_state = on_conn_state,
		.userdata = p,
	};

	*ret = h2_conn_new(p->loop, p->sock, &o, &p->conn);
	if (*ret < 0)
		return;
	h2_conn_connect(p->conn);
	probe_schedule(p, 1);
}

static void plugin_teardown(struct csi_plugin *p, void *arg)
{
	loop_del_timer(p->loop, p->probe_timer);
	p->probe_timer = NULL;
	pthread_mutex_lock(&p->lock);
	struct h2_conn *c = TAKE_PTR(p->conn);
	pthread_mutex_unlock(&p->lock);
	h2_conn_free(c);	/* waits for direct callers to let go */
}

static void plugin_probe_restart(struct csi_plugin *p, void *arg)
{
	probe_schedule(p, 1);
}

int csi_plugin_new(struct loop *loop, const char *name, const char *endpoint,
		   const struct csi_retry *retry, uint64_t timeout_ms,
		   struct csi_plugin **ret_plugin, struct nerr *err)
{
	const char *path;
	int r;

	if (!name || !*name || strlen(name) > 64)
		return nerr_set(err, EINVAL, "plugin name must be 1 to 64 characters");
	if (!endpoint)
		return nerr_set(err, EINVAL, "plugin %s: no endpoint", name);
	if (strncmp(endpoint, "unix://", 7) == 0)
		path = endpoint + 7;
	else if (strncmp(endpoint, "unix:", 5) == 0)
		path = endpoint + 5;
	else
		return nerr_set(err, EINVAL, "plugin %s: endpoint %s is not unix:///path", name, endpoint);
	if (path[0] != '/' || strlen(path) >= 108)
		return nerr_set(err, EINVAL, "plugin %s: endpoint %s: need an absolute socket path under 108 bytes",
				name, endpoint);

	struct csi_plugin *p = calloc(1, sizeof(*p));
	if (!p)
		return nerr_set(err, ENOMEM, "out of memory");
	p->loop = loop;
	p->name = strdup(name);
	p->sock = strdup(path);
	if (!p->name || !p->sock) {
		free(p->name);
		free(p->sock);
		free(p);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	if (retry)
		p->retry = *retry;
	if (!p->retry.backoff_ms)
		p->retry.backoff_ms = 1000;
	if (!p->retry.max_ms)
		p->retry.max_ms = 120000;
	if (!p->retry.max_attempts)
		p->retry.max_attempts = 5;
	p->timeout_ms = timeout_ms ? timeout_ms : DEFAULT_TIMEOUT_MS;
	atomic_store(&p->probe_ms, DEFAULT_PROBE_MS);
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	p->health.health = CSI_HEALTH_DOWN;
	p->health.since = time(NULL);
	snprintf(p->health.reason, sizeof(p->health.reason), "not probed yet");
	p->rng = (uint64_t)(uintptr_t)p ^ loop_now_us() ^ 0x9e3779b97f4a7c15ull;

	int setup = 0;
	r = run_on_loop(p, plugin_setup, &setup);
	if (r < 0 || setup < 0) {
		pthread_cond_destroy(&p->cond);
		pthread_mutex_destroy(&p->lock);
		free(p->name);
		free(p->sock);
		free(p);
		r = r < 0 ? r : setup;
		return nerr_set(err, -r, "plugin %s: %s", name, strerror(-r));
	}
	*ret_plugin = p;
	return 0;
}

void csi_plugin_cancel(struct csi_plugin *p)
{
	bool was;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	was = p->closing;
	p->closing = true;
	p->on_health = NULL;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	/* Completes every call on the wire (RST_STREAM) or queued with
	 * CANCELLED, and closes the connection. */
	if (!was)
		run_on_loop(p, plugin_teardown, NULL);
}

void csi_plugin_free(struct csi_plugin *p)
{
	if (!p)
		return;
	csi_plugin_cancel(p);
	pthread_mutex_lock(&p->lock);
	while (p->users)
		pthread_cond_wait(&p->cond, &p->lock);
	pthread_mutex_unlock(&p->lock);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p->name);
	free(p->sock);
	free(p);
}

const char *csi_plugin_name(const struct csi_plugin *p)
{
	return p->name;
}

const char *csi_plugin_socket(const struct csi_plugin *p)
{
	return p->sock;
}

void csi_plugin_set_probe_interval(struct csi_plugin *p, uint64_t ms)
{
	uint64_t old = atomic_exchange(&p->probe_ms, ms);

	if (!old && ms)
		run_on_loop(p, plugin_probe_restart, NULL);
}

void csi_plugin_on_health(struct csi_plugin *p, csi_health_fn fn, void *userdata)
{
	pthread_mutex_lock(&p->lock);
	p->on_health = fn;
	p->on_health_ud = userdata;
	pthread_mutex_unlock(&p->lock);
}

void csi_plugin_health(struct csi_plugin *p, struct csi_health_info *ret)
{
	pthread_mutex_lock(&p->lock);
	*ret = p->health;
	pthread_mutex_unlock(&p->lock);
}

void csi_plugin_metrics(struct csi_plugin *p, struct csi_metrics *ret)
{
	pthread_mutex_lock(&p->lock);
	*ret = p->m;
	pthread_mutex_unlock(&p->lock);
	/* the latency from its histogram, read while others add to it */
	for (int rpc = 0; rpc < _CSI_RPC_MAX; rpc++) {
		const struct hist *h = &p->latency[rpc];
		struct csi_rpc_metrics *m = &ret->rpc[rpc];
		uint64_t in = 0, count = atomic_load(&h->count);

		for (int k = 0; k < CSI_LATENCY_BUCKETS; k++)
			in += m->hist[k] = atomic_load(&h->bucket[k]);
		m->hist[CSI_LATENCY_BUCKETS] = count > in ? count - in : 0;
		m->latency_sum = (double)atomic_load(&h->sum_ns) / 1e9;
	}
}

const struct hist *csi_plugin_latency(struct csi_plugin *p, enum csi_rpc rpc)
{
	return &p->latency[(unsigned)rpc < _CSI_RPC_MAX ? rpc : 0];
}

/* ---- one blocking attempt ---- */

struct attempt {
	struct csi_plugin *p;
	struct h2_conn *conn;
	enum csi_rpc rpc;
	const uint8_t *req;
	size_t req_len;
	uint64_t timeout_ms;
	uint64_t start_us;
	pthread_cond_t cond;
	atomic_bool done;
	int code;
	char message[NERR_MSG_MAX];
	uint8_t *body;
	size_t body_len;
};

static void attempt_finish(struct attempt *a, int code, const char *message,
			   const uint8_t *body, size_t len)
{
	uint8_t *copy = NULL;

	/* The reply bytes are borrowed from the session: copy them now. */
	if (code == GRPC_OK) {
		copy = malloc(len ? len : 1);
		if (!copy) {
			code = GRPC_RESOURCE_EXHAUSTED;
			message = "out of memory copying the reply";
		} else if (len)
			memcpy(copy, body, len);
	}
	pthread_mutex_lock(&a->p->lock);
	a->code = code;
	snprintf(a->message, sizeof(a->message), "%s", message ? message : "");
	a->body = copy;
	a->body_len = len;
	atomic_store_explicit(&a->done, true, memory_order_release);
	pthread_cond_signal(&a->cond);
	pthread_mutex_unlock(&a->p->lock);
}

static void on_attempt_done(void *ud, const struct grpc_reply *r)
{
	struct attempt *a = ud;

	metrics_done(a->p, a->rpc, r->code, loop_now_us() - a->start_us);
	if (a->rpc == CSI_RPC_PROBE)
		health_from_probe(a->p, r->code, r->message, r->body, r->body_len, NULL);
	else if (r->code == GRPC_UNAVAILABLE && a->conn && h2_conn_state(a->conn) == H2_DOWN)
		health_set(a->p, CSI_HEALTH_DOWN, r->message);
	attempt_finish(a, r->code, r->message, r->body, r->body_len);
}

static void attempt_start(struct loop *l, void *ud)
{
	struct attempt *a = ud;
	struct csi_plugin *p = a->p;

	/* closing is set before teardown is queued, so a start that runs after
	 * teardown always sees it (p->conn is NULL by then). */
	pthread_mutex_lock(&p->lock);
	bool closing = p->closing;
	pthread_mutex_unlock(&p->lock);
	if (closing || !p->conn) {
		attempt_finish(a, GRPC_CANCELLED, "plugin shut down", NULL, 0);
		return;
	}
	a->conn = p->conn;
	a->start_us = loop_now_us();
	metrics_start(p, a->rpc);
	int r = h2_conn_submit(p->conn, rpcs[a->rpc].path, a->req, a->req_len, a->timeout_ms,
			       on_attempt_done, a, NULL);
	if (r < 0) {
		metrics_done(p, a->rpc, GRPC_RESOURCE_EXHAUSTED, 0);
		attempt_finish(a, GRPC_RESOURCE_EXHAUSTED, strerror(-r), NULL, 0);
	}
}

/* The fast path: run the attempt on this thread if the connection is up
 * and idle (h2_conn_call). 0 when it ran (a is complete), -EAGAIN when the
 * loop must carry it. */
static int attempt_direct(struct attempt *a)
{
	struct csi_plugin *p = a->p;
	struct h2_conn *c = NULL;

	pthread_mutex_lock(&p->lock);
	if (!p->closing && p->conn) {
		c = p->conn;
		h2_conn_ref(c);
	}
	pthread_mutex_unlock(&p->lock);
	if (!c)
		return -EAGAIN;
	a->conn = c;
	a->start_us = loop_now_us();
	metrics_start(p, a->rpc);
	int r = h2_conn_call(c, rpcs[a->rpc].path, a->req, a->req_len, a->timeout_ms,
			     on_attempt_done, a);
	if (r < 0)
		metrics_unstart(p, a->rpc);
	return r;
}

int csi_call_watched(struct csi_plugin *p, enum csi_rpc rpc, const ProtobufCMessage *req,
		     uint64_t timeout_ms, unsigned max_attempts, csi_retry_fn on_retry,
		     void *on_retry_ctx, ProtobufCMessage **ret_resp, struct csi_result *res,
		     struct nerr *err)
{
	struct csi_result local;
	_cleanup_free_ uint8_t *buf = NULL;
	ProtobufCMessage *resp = NULL;
	size_t len;
	int r;

	if (!res)
		res = &local;
	*res = (struct csi_result){ .code = GRPC_UNKNOWN };
	if ((unsigned)rpc >= _CSI_RPC_MAX)
		return nerr_set(err, EINVAL, "unknown CSI RPC %d", (int)rpc);
	const struct rpc_desc *d = &rpcs[rpc];
	if (!req || req->descriptor != d->req)
		return nerr_set(err, EINVAL, "%s: request is not a %s", d->name, d->req->name);
	if (loop_in_thread(p->loop))
		return nerr_set(err, EDEADLK, "%s: blocking call on the loop thread", d->name);
	len = protobuf_c_message_get_packed_size(req);
	if (len > GRPC_MAX_MESSAGE)
		return nerr_set(err, E2BIG, "%s: request of %zu bytes exceeds 4 MiB", d->name, len);
	buf = malloc(len ? len : 1);
	if (!buf)
		return nerr_set(err, ENOMEM, "out of memory");
	protobuf_c_message_pack(req, buf);
	if (!timeout_ms)
		timeout_ms = p->timeout_ms;
	if (!max_attempts)
		max_attempts = p->retry.max_attempts;
	if (!d->idempotent)
		max_attempts = 1;

	pthread_mutex_lock(&p->lock);
	if (p->closing) {
		pthread_mutex_unlock(&p->lock);
		res->code = GRPC_CANCELLED;
		snprintf(res->message, sizeof(res->message), "plugin shut down");
		return nerr_set(err, ECANCELED, "%s: CANCELLED: plugin shut down", d->name);
	}
	p->users++;
	pthread_mutex_unlock(&p->lock);
	atomic_fetch_add(&p->callers, 1);

	uint64_t t0 = loop_now_us();
	for (unsigned attempt = 1;; attempt++) {
		struct attempt a = {
			.p = p, .rpc = rpc, .req = buf, .req_len = len, .timeout_ms = timeout_ms,
		};

		pthread_cond_init(&a.cond, NULL);
		/* A lone caller drives its call itself; with company, the loop
		 * multiplexes (a direct call would hold the others back). */
		if (atomic_load(&p->callers) == 1 && attempt_direct(&a) == 0)
			goto wait;	/* done, or handed to the loop */
		r = loop_submit(p->loop, attempt_start, &a);
		if (r < 0) {
			pthread_cond_destroy(&a.cond);
			res->code = GRPC_RESOURCE_EXHAUSTED;
			snprintf(res->message, sizeof(res->message), "out of memory");
			break;
		}
wait:
		pthread_mutex_lock(&p->lock);
		while (!atomic_load(&a.done))
			pthread_cond_wait(&a.cond, &p->lock);
		pthread_mutex_unlock(&p->lock);
		pthread_cond_destroy(&a.cond);

		res->attempts = attempt;
		res->code = a.code;
		snprintf(res->message, sizeof(res->message), "%s", a.message);
		if (a.code == GRPC_OK) {
			resp = protobuf_c_message_unpack(d->resp, NULL, a.body_len, a.body);
			free(a.body);
			if (!resp) {
				res->code = GRPC_INTERNAL;
				snprintf(res->message, sizeof(res->message), "cannot decode the %s reply",
					 d->resp->name);
			}
			break;
		}
		if (!csi_code_retryable(a.code) || attempt >= max_attempts)
			break;
		if (on_retry)
			on_retry(on_retry_ctx, res);	/* live in the operation */

		/* Wait out the backoff, unless the plugin is shut down meanwhile. */
		pthread_mutex_lock(&p->lock);	/* p->rng is shared by callers */
		uint64_t delay = csi_retry_delay_ms(&p->retry, attempt, &p->rng);
		pthread_mutex_unlock(&p->lock);
		struct timespec ts;
		ts = ts_after_ms(CLOCK_MONOTONIC, delay);
		pthread_mutex_lock(&p->lock);
		while (!p->closing && pthread_cond_timedwait(&p->cond, &p->lock, &ts) != ETIMEDOUT)
			;
		bool closing = p->closing;
		pthread_mutex_unlock(&p->lock);
		if (closing) {
			res->code = GRPC_CANCELLED;
			snprintf(res->message, sizeof(res->message), "plugin shut down during retry backoff");
			break;
		}
	}
	res->elapsed_us = loop_now_us() - t0;
	atomic_fetch_sub(&p->callers, 1);
	explicit_bzero(buf, len);	/* it may carry the request's secrets */

	pthread_mutex_lock(&p->lock);
	if (--p->users == 0 && p->closing)
		pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);

	if (res->code != GRPC_OK) {
		int e = grpc_code_to_errno(res->code);

		return nerr_set(err, e, "%s: %s: %s", d->name, grpc_code_to_string(res->code),
				res->message[0] ? res->message : "(no message)");
	}
	if (ret_resp)
		*ret_resp = resp;
	else
		protobuf_c_message_free_unpacked(resp, NULL);
	return 0;
}

int csi_call_ex(struct csi_plugin *p, enum csi_rpc rpc, const ProtobufCMessage *req,
		uint64_t timeout_ms, unsigned max_attempts,
		ProtobufCMessage **ret_resp, struct csi_result *res, struct nerr *err)
{
	return csi_call_watched(p, rpc, req, timeout_ms, max_attempts, NULL, NULL, ret_resp, res,
				err);
}

int csi_call(struct csi_plugin *p, enum csi_rpc rpc, const ProtobufCMessage *req,
	     ProtobufCMessage **ret_resp, struct csi_result *res, struct nerr *err)
{
	return csi_call_ex(p, rpc, req, 0, 0, ret_resp, res, err);
}

/* ---- typed conveniences ---- */

int csi_probe(struct csi_plugin *p, bool *ret_ready, struct nerr *err)
{
	Csi__V1__ProbeRequest req = CSI__V1__PROBE_REQUEST__INIT;
	ProtobufCMessage *resp;
	int r;

	/* on_attempt_done already folds the outcome into the health. */
	r = csi_call_ex(p, CSI_RPC_PROBE, &req.base, 0, 1, &resp, NULL, err);
	if (r < 0)
		return r;
	Csi__V1__ProbeResponse *pr = (Csi__V1__ProbeResponse *)resp;
	if (ret_ready)
		*ret_ready = !pr->ready || pr->ready->value;
	protobuf_c_message_free_unpacked(resp, NULL);
	return 0;
}

int csi_get_plugin_info(struct csi_plugin *p, char **ret_name, char **ret_vendor_version,
			struct nerr *err)
{
	Csi__V1__GetPluginInfoRequest req = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	ProtobufCMessage *resp;
	int r;

	r = csi_call(p, CSI_RPC_GET_PLUGIN_INFO, &req.base, &resp, NULL, err);
	if (r < 0)
		return r;
	Csi__V1__GetPluginInfoResponse *ir = (Csi__V1__GetPluginInfoResponse *)resp;
	_cleanup_free_ char *n = strdup(ir->name ? ir->name : "");
	_cleanup_free_ char *v = strdup(ir->vendor_version ? ir->vendor_version : "");
	protobuf_c_message_free_unpacked(resp, NULL);
	if (!n || !v)
		return nerr_set(err, ENOMEM, "out of memory");
	if (ret_name)
		*ret_name = TAKE_PTR(n);
	if (ret_vendor_version)
		*ret_vendor_version = TAKE_PTR(v);
	return 0;
}

static uint32_t bit(int v)
{
	return v >= 0 && v < 32 ? 1u << v : 0;
}

int csi_get_caps(struct csi_plugin *p, struct csi_caps *ret_caps, struct nerr *err)
{
	struct csi_caps caps = { 0 };
	ProtobufCMessage *resp;
	int r;

	Csi__V1__GetPluginCapabilitiesRequest preq = CSI__V1__GET_PLUGIN_CAPABILITIES_REQUEST__INIT;
	r = csi_call(p, CSI_RPC_GET_PLUGIN_CAPABILITIES, &preq.base, &resp, NULL, err);
	if (r < 0)
		return r;
	Csi__V1__GetPluginCapabilitiesResponse *pr = (void *)resp;
	for (size_t i = 0; i < pr->n_capabilities; i++) {
		Csi__V1__PluginCapability *c = pr->capabilities[i];

		if (c->type_case == CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE && c->service)
			caps.plugin |= bit(c->service->type);
		else if (c->type_case == CSI__V1__PLUGIN_CAPABILITY__TYPE_VOLUME_EXPANSION && c->volume_expansion)
			caps.expansion |= bit(c->volume_expansion->type);
	}
	protobuf_c_message_free_unpacked(resp, NULL);

	if (CSI_CAP(caps.plugin, CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE)) {
		Csi__V1__ControllerGetCapabilitiesRequest creq = CSI__V1__CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
		r = csi_call(p, CSI_RPC_CONTROLLER_GET_CAPABILITIES, &creq.base, &resp, NULL, err);
		if (r < 0)
			return r;
		Csi__V1__ControllerGetCapabilitiesResponse *cr = (void *)resp;
		for (size_t i = 0; i < cr->n_capabilities; i++) {
			Csi__V1__ControllerServiceCapability *c = cr->capabilities[i];

			if (c->type_case == CSI__V1__CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC && c->rpc)
				caps.controller |= bit(c->rpc->type);
		}
		protobuf_c_message_free_unpacked(resp, NULL);
	}

	Csi__V1__NodeGetCapabilitiesRequest nreq = CSI__V1__NODE_GET_CAPABILITIES_REQUEST__INIT;
	r = csi_call(p, CSI_RPC_NODE_GET_CAPABILITIES, &nreq.base, &resp, NULL, err);
	if (r < 0)
		return r;
	Csi__V1__NodeGetCapabilitiesResponse *nr = (void *)resp;
	for (size_t i = 0; i < nr->n_capabilities; i++) {
		Csi__V1__NodeServiceCapability *c = nr->capabilities[i];

		if (c->type_case == CSI__V1__NODE_SERVICE_CAPABILITY__TYPE_RPC && c->rpc)
			caps.node |= bit(c->rpc->type);
	}
	protobuf_c_message_free_unpacked(resp, NULL);
	*ret_caps = caps;
	return 0;
}
