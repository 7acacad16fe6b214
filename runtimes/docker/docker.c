/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * docker: the Docker runtime driver, rt_docker_ops (runtime.h), speaking the
 * Engine API over its unix socket with libcurl.
 *
 * Calls are blocking curl easy transfers made on the caller's thread (the
 * backend's worker pool); kept-alive easy handles are shared through a small
 * pool, one handle per transfer at a time, so any number of threads may call
 * at once. The API version is negotiated once from GET /version and again
 * after the engine went away. Every JSON body and the HTTP status table live
 * in docker-json.c; this file is transport, cgroup reading for stats, and the
 * /events watcher thread (a curl multi handle so close() can wake it).
 * It knows nothing of the backend's objects, FUSE or checkpoints.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "docker-internal.h"
#include "macro.h"
#include "nerr.h"
#include "runtime.h"
#include "sbuf.h"

#define DK_DEFAULT_SOCK "/var/run/docker.sock"
#define DK_POOL_MAX 8
#define DK_CONNECT_TIMEOUT_MS 2000L
#define DK_CALL_TIMEOUT_MS 60000L
#define DK_CG_MAX 64
#define DK_CG_PATH 200
#define DK_CG_NFD 4
#define DK_OOM_MAX 32
#define DK_EXEC_CAP (1u << 20)

/* Where a container's cgroup files are. */
struct dk_cgpath {
	char id[72];
	bool v2;
	char cpu[DK_CG_PATH];	/* v1 cpuacct dir, v2 the unified dir */
	char mem[DK_CG_PATH];
	char pids[DK_CG_PATH];
};

/* A cached container's stats files, open: cpu, memory, limit, pids. */
struct dk_cg {
	char id[72];		/* "" when the slot is free */
	bool v2;
	int fd[DK_CG_NFD];
};

struct docker {
	char sock[108];
	char instance[RT_INSTANCE_MAX + 1];	/* "" when the backend gave none */
	int stop_timeout;
	bool cgroup_v2;		/* the host is unified-only */

	pthread_mutex_t lock;	/* api, negotiated, pool */
	char api[16];
	bool negotiated;
	CURL *idle[DK_POOL_MAX];
	size_t nidle;
	/* containers the engine reported an "oom" event for since their last
	 * start: its OOMKilled flag loses a race with the exit (20.10) */
	char oom[DK_OOM_MAX][72];
	size_t oom_next;
	pthread_rwlock_t cglock;	/* cg: preads share it, changes exclude */
	struct dk_cg cg[DK_CG_MAX];
	size_t cg_next;

	/* the /events watcher */
	pthread_mutex_t wlock;
	pthread_cond_t wcond;	/* CLOCK_MONOTONIC: backoff sleeps */
	bool stopping;
	bool watching;
	pthread_t watcher;
	CURLM *wmulti;
	rt_event_fn fn;
	void *fn_ctx;
};

static void cg_close(struct dk_cg *cg);
static void cg_forget(struct docker *d, const char *id);
static void cg_note_running(struct docker *d, const char *id, pid_t pid);
static int dk_inspect(void *h, const char *id, struct rt_status *ret, struct nerr *err);

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void curl_init_once(void)
{
	curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* --- transport ----------------------------------------------------------- */

struct dk_req {
	const char *method;
	const char *path;	/* after the /vX.Y prefix, starting with '/' */
	bool unversioned;
	const char *body;	/* JSON, or NULL */
	enum docker_call call;
	long timeout_ms;	/* 0: DK_CALL_TIMEOUT_MS; <0: none */
	/* streaming: when set, the body goes here instead of into resp */
	size_t (*write)(char *p, size_t sz, size_t nm, void *ctx);
	void *write_ctx;
	int (*xfer)(void *ctx, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un);
	void *xfer_ctx;
	size_t (*header)(char *p, size_t sz, size_t nm, void *ctx);
	void *header_ctx;
	int cb_err;		/* a callback's errno, preferred over curl's code */
	char cb_msg[NERR_MSG_MAX];
};

static CURL *pool_get(struct docker *d)
{
	CURL *c = NULL;

	pthread_mutex_lock(&d->lock);
	if (d->nidle)
		c = d->idle[--d->nidle];
	pthread_mutex_unlock(&d->lock);
	if (c)
		curl_easy_reset(c);	/* keeps its live connection */
	else
		c = curl_easy_init();
	return c;
}

static void pool_put(struct docker *d, CURL *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&d->lock);
	if (d->nidle < DK_POOL_MAX) {
		d->idle[d->nidle++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&d->lock);
	if (c)
		curl_easy_cleanup(c);
}

static size_t body_write(char *p, size_t sz, size_t nm, void *ctx)
{
	struct sbuf *sb = ctx;

	if (sbuf_add(sb, p, sz * nm) < 0)
		return 0;	/* cap hit: CURLE_WRITE_ERROR -> E2BIG */
	return sz * nm;
}

/* A transfer with a progress callback (a pull) runs on a private multi handle
 * polled every 50 ms, so the callback sees a cancel within that time rather
 * than at curl's idle pace of up to a second; its nonzero return ends the
 * transfer and closes the connection, which is what stops the engine's pull. */
static CURLcode perform(CURL *c, const struct dk_req *rq)
{
	CURLcode cc = CURLE_OK;
	int running = 1, q;
	CURLMsg *msg;
	CURLM *m;

	if (!rq->xfer)
		return curl_easy_perform(c);
	m = curl_multi_init();
	if (!m)
		return CURLE_OUT_OF_MEMORY;
	if (curl_multi_add_handle(m, c) != CURLM_OK) {
		curl_multi_cleanup(m);
		return CURLE_OUT_OF_MEMORY;
	}
	while (running) {
		if (curl_multi_perform(m, &running) != CURLM_OK) {
			cc = CURLE_RECV_ERROR;
			break;
		}
		if (running)
			curl_multi_poll(m, NULL, 0, 50, NULL);
	}
	while ((msg = curl_multi_info_read(m, &q)))
		if (msg->msg == CURLMSG_DONE)
			cc = msg->data.result;
	curl_multi_remove_handle(m, c);
	curl_multi_cleanup(m);
	return cc;
}

static void forget_version(struct docker *d)
{
	pthread_mutex_lock(&d->lock);
	d->negotiated = false;
	pthread_mutex_unlock(&d->lock);
}

static int ensure_version(struct docker *d, char *api, size_t n, struct nerr *err);

/* One HTTP exchange. *ret_status gets the HTTP status, body (if non-NULL,
 * cap DOCKER_BODY_CAP) the reply when not streamed. 0 when the exchange
 * happened and the status maps to success; else -errno with the engine's
 * message. */
static int dk_call(struct docker *d, struct dk_req *rq, struct sbuf *body, long *ret_status,
		   struct nerr *err)
{
	char api[16] = "", url[1024], ebuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdrs = NULL;
	struct sbuf tmp = SBUF_INIT(DOCKER_BODY_CAP);
	long status = 0, tmo, oserr = 0;
	CURLcode cc;
	CURL *c;
	int r;

	if (!body)
		body = &tmp;
	if (!rq->unversioned) {
		r = ensure_version(d, api, sizeof(api), err);
		if (r < 0)
			return r;
	}
	if ((size_t)snprintf(url, sizeof(url), "http://docker%s%s%s", rq->unversioned ? "" : "/v",
			     api, rq->path) >= sizeof(url))
		return nerr_set(err, EINVAL, "request path too long");
	c = pool_get(d);
	if (!c)
		return nerr_set(err, ENOMEM, "out of memory");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, d->sock);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ebuf);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, DK_CONNECT_TIMEOUT_MS);
	tmo = rq->timeout_ms == 0 ? DK_CALL_TIMEOUT_MS : rq->timeout_ms;
	if (tmo > 0)
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, tmo);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, rq->method);
	if (strcmp(rq->method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, rq->body ? rq->body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, rq->body ? (long)strlen(rq->body) : 0L);
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	} else if (strcmp(rq->method, "GET") == 0) {
		curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	}
	/* no "Expect: 100-continue" round trip */
	hdrs = curl_slist_append(hdrs, "Expect:");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	if (rq->write) {
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, rq->write);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, rq->write_ctx);
	} else {
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_write);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
	}
	if (rq->header) {
		curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, rq->header);
		curl_easy_setopt(c, CURLOPT_HEADERDATA, rq->header_ctx);
	}
	if (rq->xfer) {
		curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, rq->xfer);
		curl_easy_setopt(c, CURLOPT_XFERINFODATA, rq->xfer_ctx);
	}
	cc = perform(c, rq);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &oserr);
	/* the handle must not point at our stack once back in the pool */
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	pool_put(d, c);
	curl_slist_free_all(hdrs);

	if (rq->cb_err) {
		r = nerr_set(err, rq->cb_err, "%s", rq->cb_msg[0] ? rq->cb_msg : strerror(rq->cb_err));
		goto out;
	}
	if (cc != CURLE_OK) {
		int e = docker_curl_to_errno(cc);

		if (e == EHOSTDOWN)
			forget_version(d);
		if (e == E2BIG && !rq->write)
			r = nerr_set(err, E2BIG, "engine reply larger than %u bytes", DOCKER_BODY_CAP);
		else if (e == EHOSTDOWN && oserr)	/* "Connection refused" says more */
			r = nerr_set(err, e, "docker engine unreachable at %s: %s", d->sock,
				     strerror((int)oserr));
		else if (e == EHOSTDOWN)
			r = nerr_set(err, e, "docker engine unreachable at %s: %s", d->sock,
				     ebuf[0] ? ebuf : curl_easy_strerror(cc));
		else
			r = nerr_set(err, e, "docker %s %s: %s", rq->method, rq->path,
				     ebuf[0] ? ebuf : curl_easy_strerror(cc));
		goto out;
	}
	if (ret_status)
		*ret_status = status;
	r = docker_status_to_errno(status, rq->call);
	if (r) {
		char msg[NERR_MSG_MAX];

		docker_json_error_message(body->buf, body->len, msg, sizeof(msg));
		r = nerr_set(err, r, "%s", msg[0] ? msg : "docker engine error");
	}
out:
	sbuf_free(&tmp);
	return r;
}

static int ensure_version(struct docker *d, char *api, size_t n, struct nerr *err)
{
	struct dk_req rq = { .method = "GET", .path = "/version", .unversioned = true,
			     .timeout_ms = 10000 };
	struct sbuf body = SBUF_INIT(DOCKER_BODY_CAP);
	char sapi[32], smin[32], neg[16];
	int r;

	pthread_mutex_lock(&d->lock);
	if (d->negotiated) {
		snprintf(api, n, "%s", d->api);
		pthread_mutex_unlock(&d->lock);
		return 0;
	}
	pthread_mutex_unlock(&d->lock);

	r = dk_call(d, &rq, &body, NULL, err);
	if (r < 0)
		goto out;
	r = docker_json_parse_version(body.buf, body.len, sapi, smin, sizeof(sapi), err);
	if (r < 0)
		goto out;
	r = docker_version_negotiate(sapi, smin, neg, sizeof(neg));
	if (r < 0) {
		r = nerr_set(err, r == -EPROTONOSUPPORT ? EPROTONOSUPPORT : EIO,
			     "docker engine API %s is older than %u.%u, the oldest supported",
			     sapi, DOCKER_API_OLDEST_MAJOR, DOCKER_API_OLDEST_MINOR);
		goto out;
	}
	pthread_mutex_lock(&d->lock);
	snprintf(d->api, sizeof(d->api), "%s", neg);
	d->negotiated = true;
	pthread_mutex_unlock(&d->lock);
	snprintf(api, n, "%s", neg);
out:
	sbuf_free(&body);
	return r;
}

/* Engine ids and names in a URL path: nothing to escape, so refuse the rest. */
static int check_id(const char *id, struct nerr *err)
{
	size_t n = id ? strlen(id) : 0;

	if (n == 0 || n > 128)
		return nerr_set(err, EINVAL, "bad container id");
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)id[i]) && !strchr("_.-", id[i]))
			return nerr_set(err, EINVAL, "bad container id '%s'", id);
	return 0;
}

/* A POST with no body whose reply body we only need for errors. */
static int simple_post(struct docker *d, const char *path, enum docker_call call, long timeout_ms,
		       struct nerr *err)
{
	struct dk_req rq = { .method = "POST", .path = path, .call = call, .timeout_ms = timeout_ms };

	return dk_call(d, &rq, NULL, NULL, err);
}

/* --- open / close / health ----------------------------------------------- */

static int parse_seconds(const char *s, int *ret)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || v < 0)
		return -EINVAL;
	if (*end == 'm' && end[1] == '\0')
		v *= 60;
	else if (!(*end == '\0' || (*end == 's' && end[1] == '\0')))
		return -EINVAL;
	if (v > 86400)
		return -EINVAL;
	*ret = (int)v;
	return 0;
}

static int dk_open(const struct rt_config *cfg, void **ret_h, struct nerr *err)
{
	const char *sock = DK_DEFAULT_SOCK;
	pthread_condattr_t ca;
	struct docker *d;
	int stop_timeout = 10;

	pthread_once(&curl_once, curl_init_once);
	if (curl_init_result != CURLE_OK)
		return nerr_set(err, EIO, "curl_global_init failed");
	for (size_t i = 0; cfg && i < cfg->nkv; i++) {
		const char *k = cfg->kv[i].key, *v = cfg->kv[i].val;

		if (strcmp(k, "endpoint") == 0) {
			if (strncmp(v, "unix://", 7) == 0)
				sock = v + 7;
			else if (v[0] != '/')
				return nerr_set(err, EINVAL,
						"docker endpoint '%s': only unix:///path is supported", v);
			else
				sock = v;
			if (sock[0] != '/' || strlen(sock) >= sizeof(d->sock))
				return nerr_set(err, EINVAL, "docker endpoint '%s': bad socket path", v);
		} else if (strcmp(k, "stop_timeout") == 0) {
			if (parse_seconds(v, &stop_timeout) < 0)
				return nerr_set(err, EINVAL, "docker stop_timeout '%s': want seconds (10s)", v);
		} else {
			return nerr_set(err, EINVAL, "[runtime docker]: unknown key '%s'", k);
		}
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return nerr_set(err, ENOMEM, "out of memory");
	snprintf(d->sock, sizeof(d->sock), "%s", sock);
	snprintf(d->instance, sizeof(d->instance), "%s", cfg && cfg->instance ? cfg->instance : "");
	d->stop_timeout = stop_timeout;
	d->cgroup_v2 = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0;
	pthread_mutex_init(&d->lock, NULL);
	pthread_mutex_init(&d->wlock, NULL);
	pthread_rwlock_init(&d->cglock, NULL);
	for (size_t i = 0; i < DK_CG_MAX; i++)
		for (int k = 0; k < DK_CG_NFD; k++)
			d->cg[i].fd[k] = -1;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->wcond, &ca);
	pthread_condattr_destroy(&ca);
	*ret_h = d;
	return 0;
}

static void dk_close(void *h)
{
	struct docker *d = h;

	if (!d)
		return;
	pthread_mutex_lock(&d->wlock);
	d->stopping = true;
	if (d->wmulti)
		curl_multi_wakeup(d->wmulti);
	pthread_cond_broadcast(&d->wcond);
	pthread_mutex_unlock(&d->wlock);
	if (d->watching)
		pthread_join(d->watcher, NULL);
	if (d->wmulti)
		curl_multi_cleanup(d->wmulti);
	for (size_t i = 0; i < d->nidle; i++)
		curl_easy_cleanup(d->idle[i]);
	for (size_t i = 0; i < DK_CG_MAX; i++)
		cg_close(&d->cg[i]);
	pthread_rwlock_destroy(&d->cglock);
	pthread_cond_destroy(&d->wcond);
	pthread_mutex_destroy(&d->wlock);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

static int dk_health(void *h, struct sbuf *version, struct nerr *err)
{
	struct docker *d = h;
	struct dk_req rq = { .method = "GET", .path = "/_ping", .unversioned = true,
			     .timeout_ms = 3000 };
	char api[16];
	int r;

	r = dk_call(d, &rq, NULL, NULL, err);
	if (r < 0)
		return r;
	r = ensure_version(d, api, sizeof(api), err);
	if (r < 0)
		return r;
	if (version)
		return sbuf_adds(version, api);
	return 0;
}

/* --- create (with pull) --------------------------------------------------- */

struct pull_ctx {
	struct rt_progress *prog;
	struct dk_req *rq;
	char line[DOCKER_LINE_CAP];
	size_t len;
	char error[512];
};

static void pull_line(struct pull_ctx *pc)
{
	char msg[512];
	int r;

	if (pc->len == 0)
		return;
	r = docker_json_parse_pull_line(pc->line, pc->len, msg, sizeof(msg));
	if (r == -ENOENT && !pc->error[0])
		snprintf(pc->error, sizeof(pc->error), "%s", msg);
	else if (r == 0 && pc->prog && pc->prog->update && msg[0])
		pc->prog->update(pc->prog->ctx, msg);
	pc->len = 0;
}

static size_t pull_write(char *p, size_t sz, size_t nm, void *ctx)
{
	struct pull_ctx *pc = ctx;
	size_t n = sz * nm;

	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\n') {
			pull_line(pc);
			continue;
		}
		if (pc->len + 1 >= sizeof(pc->line)) {
			pc->rq->cb_err = E2BIG;
			snprintf(pc->rq->cb_msg, sizeof(pc->rq->cb_msg), "pull progress line too long");
			return 0;
		}
		pc->line[pc->len++] = p[i];
	}
	return n;
}

static int pull_xfer(void *ctx, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct pull_ctx *pc = ctx;

	if (pc->prog && pc->prog->cancel) {
		pc->rq->cb_err = ECANCELED;
		snprintf(pc->rq->cb_msg, sizeof(pc->rq->cb_msg), "pull cancelled");
		return 1;	/* closes the transfer: the engine stops pulling */
	}
	return 0;
}

static int pull_image(struct docker *d, const char *image, struct rt_progress *prog,
		      struct nerr *err)
{
	char repo[512], tag[256], path[1200];
	struct dk_req rq = { .method = "POST", .timeout_ms = -1, .write = pull_write,
			     .xfer = pull_xfer };
	_cleanup_free_ struct pull_ctx *pc = calloc(1, sizeof(*pc));
	struct nerr e = { 0 };
	char *er = NULL, *et = NULL;
	CURL *c;
	int r, n;

	if (!pc)
		return nerr_set(err, ENOMEM, "out of memory");
	if (docker_image_split(image, repo, sizeof(repo), tag, sizeof(tag)) < 0)
		return nerr_set(err, EINVAL, "bad image reference '%s'", image);
	c = curl_easy_init();
	if (!c)
		return nerr_set(err, ENOMEM, "out of memory");
	er = curl_easy_escape(c, repo, 0);
	et = curl_easy_escape(c, tag, 0);
	n = er && et ? snprintf(path, sizeof(path), "/images/create?fromImage=%s%s%s", er,
				tag[0] ? "&tag=" : "", et) : -1;
	curl_free(er);
	curl_free(et);
	curl_easy_cleanup(c);
	if (n < 0 || (size_t)n >= sizeof(path))
		return nerr_set(err, EINVAL, "bad image reference '%s'", image);
	pc->prog = prog;
	pc->rq = &rq;
	rq.path = path;
	rq.write_ctx = pc;
	rq.xfer_ctx = pc;
	if (prog && prog->update)
		prog->update(prog->ctx, "pulling");
	r = dk_call(d, &rq, NULL, NULL, &e);
	pull_line(pc);	/* a last line without newline: often an error reply */
	if (r == -ECANCELED || r == -EHOSTDOWN)
		return nerr_set(err, -r, "%s", e.msg);
	if (r == 0 && !pc->error[0])
		return 0;
	/* the engine's reason: from the stream, else from the reply */
	return nerr_set(err, ENOENT, "image %s not found locally and cannot be pulled: %s", image,
			pc->error[0] ? pc->error : e.msg);
}

static int dk_create(void *h, const struct rt_spec *spec, struct rt_progress *prog, char **ret_id,
		     struct nerr *err)
{
	struct docker *d = h;
	struct sbuf body = SBUF_INIT(DOCKER_BODY_CAP);
	_cleanup_free_ char *json = NULL;
	char path[200];
	char *id = NULL;
	int r;

	r = docker_json_create_body(spec, &json, err);
	if (r < 0)
		return r == -ENOMEM ? nerr_set(err, ENOMEM, "out of memory") : r;
	if (check_id(spec->name, err) < 0 || strlen(spec->name) > 64)
		return nerr_set(err, EINVAL, "bad container name '%s'", spec->name);
	if (spec->engine_name && (check_id(spec->engine_name, err) < 0 ||
				  strlen(spec->engine_name) > 128))
		return nerr_set(err, EINVAL, "bad engine name '%s'", spec->engine_name);
	if (spec->engine_name)
		snprintf(path, sizeof(path), "/containers/create?name=%s", spec->engine_name);
	else
		snprintf(path, sizeof(path), "/containers/create?name=nodefs-%s", spec->name);

	for (int attempt = 0;; attempt++) {
		struct dk_req rq = { .method = "POST", .path = path, .body = json,
				     .call = DOCKER_CALL_CREATE };

		if (prog && prog->cancel)
			return nerr_set(err, ECANCELED, "create cancelled");
		sbuf_reset(&body);
		r = dk_call(d, &rq, &body, NULL, err);
		/* 404 on create means the image: no container exists yet */
		if (r == -ENOENT && attempt == 0) {
			if (prog && prog->pulling)
				prog->pulling(prog->ctx, true);
			r = pull_image(d, spec->image, prog, err);
			if (r < 0)
				goto out;
			if (prog && prog->pulling)
				prog->pulling(prog->ctx, false);
			continue;
		}
		break;
	}
	if (r == -EEXIST)
		nerr_prefix(err, "name taken");
	if (r < 0)
		goto out;
	r = docker_json_parse_id(body.buf, body.len, &id, err);
	if (r < 0)
		goto out;
	*ret_id = id;
out:
	sbuf_free(&body);
	return r;
}

/* --- lifecycle ------------------------------------------------------------ */

/*
 * The bind sources were checked at create (under allowed_targets, no
 * symlink on the way), but the engine resolves them again at every start:
 * a source replaced since by a symlink would bind wherever that leads. So,
 * as LXC's driver does, each source must still be itself (realpath) and
 * exist, or the container is not started.
 */
static int binds_unchanged(void *h, const char *id, struct nerr *err)
{
	struct sbuf body = SBUF_INIT(DOCKER_BODY_CAP);
	char path[200], real[PATH_MAX];
	char **src = NULL;
	int r;

	snprintf(path, sizeof(path), "/containers/%s/json", id);
	struct dk_req rq = { .method = "GET", .path = path };
	r = dk_call(h, &rq, &body, NULL, err);
	if (r == 0)
		r = docker_json_parse_bind_sources(body.buf, body.len, &src, err);
	sbuf_free(&body);
	for (size_t i = 0; r == 0 && src && src[i]; i++) {
		if (!realpath(src[i], real))
			r = nerr_set(err, errno == ENOENT ? ENOENT : EIO,
				     "bind source %.200s: %s; not started", src[i], strerror(errno));
		else if (strcmp(real, src[i]) != 0)
			r = nerr_set(err, EPERM, "bind source %.100s now leads to %.100s through a "
				     "symlink; not started", src[i], real);
	}
	for (size_t i = 0; src && src[i]; i++)
		free(src[i]);
	free(src);
	return r;
}

static int dk_start(void *h, const char *id, struct nerr *err)
{
	char path[200];
	int r;

	if (check_id(id, err) < 0)
		return -EINVAL;
	r = binds_unchanged(h, id, err);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "/containers/%s/start", id);
	r = simple_post(h, path, DOCKER_CALL_STARTSTOP, 0, err);
	if (r == 0) {
		struct nerr e2 = { 0 };
		struct rt_status st;

		/* stats() learns nothing by itself: its cgroups now, here */
		(void)dk_inspect(h, id, &st, &e2);
	}
	return r;
}

static int dk_stop(void *h, const char *id, int timeout_s, struct nerr *err)
{
	struct docker *d = h;
	char path[200];

	if (check_id(id, err) < 0)
		return -EINVAL;
	if (timeout_s < 0)
		timeout_s = d->stop_timeout;
	snprintf(path, sizeof(path), "/containers/%s/stop?t=%d", id, timeout_s);
	/* the engine waits timeout_s, then kills and waits for the exit */
	return simple_post(h, path, DOCKER_CALL_STARTSTOP, (timeout_s + 30) * 1000L, err);
}

static int dk_kill(void *h, const char *id, int sig, struct nerr *err)
{
	char path[200];

	if (check_id(id, err) < 0)
		return -EINVAL;
	if (sig <= 0 || sig > 64)
		return nerr_set(err, EINVAL, "bad signal %d", sig);
	snprintf(path, sizeof(path), "/containers/%s/kill?signal=%d", id, sig);
	return simple_post(h, path, DOCKER_CALL_OTHER, 0, err);
}

/*
 * A command on a container in the wrong state is EBUSY, as the engine's 409
 * makes it when it knows; but Docker 20.10 answers some with a bare 500,
 * which reads as EIO: an unpause of a container that is not paused, and a
 * pause, update or exec start on one that has just stopped (nodefs has not
 * seen its die event yet): "Container ... is not paused", "cannot pause a
 * stopped container", "cannot update a stopped container", "Container ...
 * is not running". So a 500 is checked against what the container is now:
 * not running is EBUSY, and so is running when want_paused (an unpause).
 */
static int wrong_state(void *h, const char *id, int r, bool want_paused, struct nerr *err)
{
	struct nerr e2 = { 0 };
	struct rt_status st;

	if (r != -EIO || dk_inspect(h, id, &st, &e2) < 0)
		return r;
	if (st.state != RT_STATE_RUNNING && st.state != RT_STATE_PAUSED)
		return nerr_set(err, EBUSY, "container not running");
	if (want_paused && st.state == RT_STATE_RUNNING)
		return nerr_set(err, EBUSY, "container not paused");
	return r;
}

static int dk_pause(void *h, const char *id, struct nerr *err)
{
	char path[200];

	if (check_id(id, err) < 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/containers/%s/pause", id);
	return wrong_state(h, id, simple_post(h, path, DOCKER_CALL_OTHER, 0, err), false, err);
}

static int dk_resume(void *h, const char *id, struct nerr *err)
{
	char path[200];

	if (check_id(id, err) < 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/containers/%s/unpause", id);
	return wrong_state(h, id, simple_post(h, path, DOCKER_CALL_OTHER, 0, err), true, err);
}

static int dk_update(void *h, const char *id, const struct rt_limits *lim, struct nerr *err)
{
	_cleanup_free_ char *json = NULL;
	char path[200];
	int r;

	if (check_id(id, err) < 0)
		return -EINVAL;
	r = docker_json_update_body(lim, &json, err);
	if (r < 0)
		return r == -ENOMEM ? nerr_set(err, ENOMEM, "out of memory") : r;
	snprintf(path, sizeof(path), "/containers/%s/update", id);
	struct dk_req rq = { .method = "POST", .path = path, .body = json };
	return wrong_state(h, id, dk_call(h, &rq, NULL, NULL, err), false, err);
}

static int dk_destroy(void *h, const char *id, struct nerr *err)
{
	struct docker *d = h;
	char path[200];
	int r;

	if (check_id(id, err) < 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", id);
	struct dk_req rq = { .method = "DELETE", .path = path };
	r = dk_call(d, &rq, NULL, NULL, err);
	if (r == -ENOENT) {
		nerr_clear(err);
		r = 0;
	}
	if (r == 0)
		cg_forget(d, id);
	return r;
}

/* --- inspect / list ------------------------------------------------------- */

/* id may be a prefix of the full id the events carry */
static bool oom_seen(struct docker *d, const char *id)
{
	size_t n = strlen(id);
	bool seen = false;

	pthread_mutex_lock(&d->lock);
	for (size_t i = 0; i < DK_OOM_MAX && !seen; i++)
		seen = d->oom[i][0] && strncmp(d->oom[i], id, n) == 0;
	pthread_mutex_unlock(&d->lock);
	return seen;
}

static void oom_note(struct docker *d, const struct rt_event *ev)
{
	pthread_mutex_lock(&d->lock);
	for (size_t i = 0; i < DK_OOM_MAX; i++)
		if (strcmp(d->oom[i], ev->id) == 0)
			d->oom[i][0] = '\0';
	if (ev->kind == RT_EV_OOM) {
		snprintf(d->oom[d->oom_next], sizeof(d->oom[0]), "%s", ev->id);
		d->oom_next = (d->oom_next + 1) % DK_OOM_MAX;
	}
	pthread_mutex_unlock(&d->lock);
}

static int dk_inspect(void *h, const char *id, struct rt_status *ret, struct nerr *err)
{
	struct sbuf body = SBUF_INIT(DOCKER_BODY_CAP);
	char path[200];
	int r;

	if (check_id(id, err) < 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/containers/%s/json", id);
	struct dk_req rq = { .method = "GET", .path = path };
	r = dk_call(h, &rq, &body, NULL, err);
	if (r == 0)
		r = docker_json_parse_inspect(body.buf, body.len, ret, err);
	if (r == 0 && ret->state == RT_STATE_EXITED && !ret->oom_killed)
		ret->oom_killed = oom_seen(h, id);
	if (r == 0 && ret->pid > 0)
		cg_note_running(h, id, ret->pid);
	sbuf_free(&body);
	return r;
}

static int dk_list(void *h, struct rt_listing **ret, size_t *ret_n, struct nerr *err)
{
	struct docker *d = h;
	struct sbuf body = SBUF_INIT(DOCKER_BODY_CAP);
	char path[256];
	int r;

	/* filters={"label":["io.nodefs.managed=1","io.nodefs.instance=ID"]},
	 * escaped (the id is hex); both labels must match */
	if (d->instance[0])
		snprintf(path, sizeof(path), "/containers/json?all=1&filters="
			 "%%7B%%22label%%22%%3A%%5B%%22" RT_OWNER_LABEL "%%3D1%%22%%2C%%22"
			 RT_INSTANCE_LABEL "%%3D%s%%22%%5D%%7D", d->instance);
	else
		snprintf(path, sizeof(path), "/containers/json?all=1&filters="
			 "%%7B%%22label%%22%%3A%%5B%%22" RT_OWNER_LABEL "%%3D1%%22%%5D%%7D");
	struct dk_req rq = { .method = "GET", .path = path };

	r = dk_call(h, &rq, &body, NULL, err);
	if (r == 0) {
		r = docker_json_parse_list_of(body.buf, body.len, d->instance[0] ? d->instance : NULL,
					      ret, ret_n, err);
		if (r == -ENOMEM)
			nerr_set(err, ENOMEM, "out of memory");
	}
	sbuf_free(&body);
	return r;
}

/* --- multiplexed streams: exec and logs ---------------------------------- */

struct mux_ctx {
	struct docker_mux mux;
	docker_mux_sink sink;
	void *sink_ctx;
	struct dk_req *rq;
	long status;		/* from the status line */
	struct sbuf errbody;	/* a non-2xx reply is JSON, not a stream */
};

static int sbuf_sink(void *ctx, int stream, const char *p, size_t n)
{
	return sbuf_add(ctx, p, n) < 0 ? -E2BIG : 0;
}

static size_t mux_write(char *p, size_t sz, size_t nm, void *ctx)
{
	struct mux_ctx *mc = ctx;
	size_t n = sz * nm;
	int r;

	if (mc->errbody.cap)	/* error reply: keep it for the message */
		return sbuf_add(&mc->errbody, p, n) < 0 ? 0 : n;
	r = docker_mux_feed(&mc->mux, p, n, mc->sink, mc->sink_ctx);
	if (r) {
		mc->rq->cb_err = r < 0 ? -r : EIO;
		snprintf(mc->rq->cb_msg, sizeof(mc->rq->cb_msg), "%s",
			 r == -E2BIG ? "output larger than its cap" : "malformed multiplexed stream");
		return 0;
	}
	return n;
}

/* Headers tell us whether the body is a stream or an error document. */
static size_t mux_header(char *p, size_t sz, size_t nm, void *ctx)
{
	struct mux_ctx *mc = ctx;
	size_t n = sz * nm;

	if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		const char *sp = memchr(p, ' ', n);
		long st = sp ? strtol(sp + 1, NULL, 10) : 0;

		mc->status = st;
		sbuf_free(&mc->errbody);
		if (st < 200 || st >= 300)
			sbuf_init(&mc->errbody, 64u << 10);
	}
	return n;
}

/* GET or POST path whose 2xx reply is a multiplexed stream fed to sink. */
static int mux_call(struct docker *d, const char *method, const char *path, const char *body,
		    long timeout_ms, docker_mux_sink sink, void *sink_ctx, struct nerr *err)
{
	struct dk_req rq = { .method = method, .path = path, .body = body,
			     .timeout_ms = timeout_ms, .write = mux_write };
	struct mux_ctx mc = { .sink = sink, .sink_ctx = sink_ctx, .rq = &rq };
	long status = 0;
	int r;

	docker_mux_init(&mc.mux);
	rq.write_ctx = &mc;
	rq.header = mux_header;
	rq.header_ctx = &mc;
	r = dk_call(d, &rq, NULL, &status, err);
	if (r == 0 && docker_mux_finish(&mc.mux) < 0)
		r = nerr_set(err, EBADMSG, "multiplexed stream ended inside a frame");
	if (r < 0 && mc.errbody.len && err && !rq.cb_err) {
		char msg[NERR_MSG_MAX];

		docker_json_error_message(mc.errbody.buf, mc.errbody.len, msg, sizeof(msg));
		nerr_set(err, -r, "%s", msg);
	}
	sbuf_free(&mc.errbody);
	return r;
}

static int dk_exec(void *h, const char *id, char *const argv[], struct sbuf *out,
		   int *ret_exit_code, struct nerr *err)
{
	struct docker *d = h;
	static const char start_body[] = "{\"Detach\":false,\"Tty\":false}";
	struct sbuf body = SBUF_INIT(DOCKER_BODY_CAP), buf = SBUF_INIT(DK_EXEC_CAP);
	_cleanup_free_ char *json = NULL, *eid = NULL;
	char path[300];
	bool running = true;
	int r, code = -1;

	if (check_id(id, err) < 0)
		return -EINVAL;
	r = docker_json_exec_body(argv, &json, err);
	if (r < 0)
		return r == -ENOMEM ? nerr_set(err, ENOMEM, "out of memory") : r;
	snprintf(path, sizeof(path), "/containers/%s/exec", id);
	struct dk_req rq = { .method = "POST", .path = path, .body = json };
	r = dk_call(d, &rq, &body, NULL, err);
	if (r == 0)
		r = docker_json_parse_id(body.buf, body.len, &eid, err);
	if (r < 0)
		goto out;
	if (check_id(eid, err) < 0) {
		r = -EINVAL;
		goto out;
	}
	snprintf(path, sizeof(path), "/exec/%s/start", eid);
	r = mux_call(d, "POST", path, start_body, -1, sbuf_sink, &buf, err);
	if (r == -E2BIG)
		nerr_set(err, E2BIG, "exec output larger than %u bytes", DK_EXEC_CAP);
	if (r < 0)
		goto out;
	/* the stream ends when the process has exited; its code follows at once */
	snprintf(path, sizeof(path), "/exec/%s/json", eid);
	for (int i = 0; running && i < 200; i++) {
		struct dk_req iq = { .method = "GET", .path = path };

		if (i)
			usleep(5000);
		sbuf_reset(&body);
		r = dk_call(d, &iq, &body, NULL, err);
		if (r == 0)
			r = docker_json_parse_exec_inspect(body.buf, body.len, &code, &running, err);
		if (r < 0)
			goto out;
	}
	if (running) {
		r = nerr_set(err, ETIMEDOUT, "exec output ended but the process still runs");
		goto out;
	}
	r = sbuf_add(out, buf.buf ? buf.buf : "", buf.len);
	if (r < 0) {
		nerr_set(err, -r, "exec output does not fit its buffer");
		goto out;
	}
	*ret_exit_code = code;
out:
	sbuf_free(&body);
	sbuf_free(&buf);
	return wrong_state(h, id, r, false, err);
}

static int dk_logs(void *h, const char *id, size_t max, struct sbuf *out, struct nerr *err)
{
	struct docker_tail tail;
	const char *data;
	char path[200];
	size_t len;
	int r;

	if (check_id(id, err) < 0)
		return -EINVAL;
	if (max == 0)
		max = DK_EXEC_CAP;
	r = docker_tail_init(&tail, max);
	if (r < 0)
		return nerr_set(err, -r, "logs: cannot keep %zu bytes", max);
	/* a line has at least one byte, so the last max lines hold the last
	 * max bytes: the engine need not send the whole log */
	snprintf(path, sizeof(path), "/containers/%s/logs?stdout=1&stderr=1&follow=0&tail=%zu", id,
		 max);
	r = mux_call(h, "GET", path, NULL, 0, docker_tail_sink, &tail, err);
	if (r == 0) {
		data = docker_tail_data(&tail, &len);
		r = sbuf_add(out, data, len);
		if (r < 0)
			nerr_set(err, -r, "logs do not fit their buffer");
	}
	docker_tail_free(&tail);
	return r;
}

/* --- stats from cgroup files ---------------------------------------------- */

static int read_small(const char *dir, const char *file, char *buf, size_t n)
{
	char path[DK_CG_PATH + 64];
	ssize_t k;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	k = read(fd, buf, n - 1);
	if (k < 0)
		k = -errno;
	close(fd);
	if (k < 0)
		return (int)k;
	buf[k] = '\0';
	return 0;
}

static bool is_dir(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Where the engine put the container's cgroups, from what it usually does
 * (cgroupfs driver: <ctrl>/docker/<id>; systemd driver: system.slice/
 * docker-<id>.scope), else from /proc/<pid>/cgroup of its init (pid 0:
 * unknown, -EBUSY). No Engine API call: stats() runs on FUSE threads. */
static int cg_resolve(struct docker *d, const char *id, pid_t pid, struct dk_cgpath *cg,
		      struct nerr *err)
{
	static const char *const v2_fmt[] = { "/sys/fs/cgroup/system.slice/docker-%s.scope",
					      "/sys/fs/cgroup/docker/%s" };
	static const char *const v1_fmt[] = { "/sys/fs/cgroup/%s/docker/%s",
					      "/sys/fs/cgroup/%s/system.slice/docker-%s.scope" };
	char path[DK_CG_PATH], buf[4096];
	int r;

	memset(cg, 0, sizeof(*cg));
	snprintf(cg->id, sizeof(cg->id), "%s", id);
	cg->v2 = d->cgroup_v2;
	if (strlen(id) == 64) {
		for (size_t i = 0; cg->v2 && i < ARRAY_SIZE(v2_fmt); i++) {
			snprintf(path, sizeof(path), v2_fmt[i], id);
			if (is_dir(path)) {
				strcpy(cg->cpu, path);
				strcpy(cg->mem, path);
				strcpy(cg->pids, path);
				return 0;
			}
		}
		for (size_t i = 0; !cg->v2 && i < ARRAY_SIZE(v1_fmt); i++) {
			snprintf(cg->mem, sizeof(cg->mem), v1_fmt[i], "memory", id);
			snprintf(cg->cpu, sizeof(cg->cpu), v1_fmt[i], "cpuacct", id);
			snprintf(cg->pids, sizeof(cg->pids), v1_fmt[i], "pids", id);
			if (is_dir(cg->mem) && is_dir(cg->cpu) && is_dir(cg->pids))
				return 0;
		}
	}
	if (pid <= 0)
		return nerr_set(err, EBUSY, "container is not running, or its cgroups are not "
				"known yet: no stats");
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	r = read_small(path, "cgroup", buf, sizeof(buf));
	if (r < 0)
		return nerr_set(err, EBUSY, "container init %d gone: no stats", (int)pid);
	if (docker_cg_dirs_from_proc(buf, cg->v2, "/sys/fs/cgroup", cg->cpu, cg->mem, cg->pids,
				     sizeof(cg->cpu)) < 0)
		return nerr_set(err, ENOENT, "cannot find the cgroups of container %s", id);
	return 0;
}

static int pread_text(int fd, char *buf, size_t n)
{
	ssize_t k = pread(fd, buf, n - 1, 0);

	if (k < 0)
		return -errno;
	buf[k] = '\0';
	return 0;
}

static int pread_u64(int fd, uint64_t *ret)
{
	char buf[64];
	int r = pread_text(fd, buf, sizeof(buf));

	if (r < 0)
		return r;
	return docker_cg_parse_u64(buf, ret);
}

/* Open the four files stats reads; kept open, since an open of a cgroup
 * file costs ~9 us here and a pread ~1 us. */
static int cg_open(const struct dk_cgpath *p, struct dk_cg *cg)
{
	static const char *const v1[DK_CG_NFD] = { "cpuacct.stat", "memory.usage_in_bytes",
						   "memory.limit_in_bytes", "pids.current" };
	static const char *const v2[DK_CG_NFD] = { "cpu.stat", "memory.current", "memory.max",
						   "pids.current" };
	const char *const dirs[DK_CG_NFD] = { p->cpu, p->mem, p->mem, p->pids };
	char path[DK_CG_PATH + 64];

	snprintf(cg->id, sizeof(cg->id), "%s", p->id);
	cg->v2 = p->v2;
	for (int i = 0; i < DK_CG_NFD; i++)
		cg->fd[i] = -1;
	for (int i = 0; i < DK_CG_NFD; i++) {
		snprintf(path, sizeof(path), "%s/%s", dirs[i], (p->v2 ? v2 : v1)[i]);
		cg->fd[i] = open(path, O_RDONLY | O_CLOEXEC);
		if (cg->fd[i] < 0) {
			int r = -errno;

			cg_close(cg);
			return r;
		}
	}
	return 0;
}

static void cg_close(struct dk_cg *cg)
{
	for (int i = 0; i < DK_CG_NFD; i++)
		if (cg->fd[i] >= 0)
			close(cg->fd[i]);
	for (int i = 0; i < DK_CG_NFD; i++)
		cg->fd[i] = -1;
	cg->id[0] = '\0';
}

static int cg_read(const struct dk_cg *cg, struct rt_stats *s)
{
	long hz = sysconf(_SC_CLK_TCK);
	char buf[1024];
	int r;

	memset(s, 0, sizeof(*s));
	r = pread_text(cg->fd[0], buf, sizeof(buf));
	if (r < 0)
		return r;
	docker_cg_parse_cpu(buf, cg->v2, hz, &s->cpu_user_seconds, &s->cpu_system_seconds);
	r = pread_u64(cg->fd[1], &s->memory_bytes);
	if (r == 0)
		r = pread_u64(cg->fd[2], &s->memory_limit_bytes);
	/* v1 says "unlimited" with a huge page-rounded number */
	if (s->memory_limit_bytes >= (UINT64_C(1) << 62))
		s->memory_limit_bytes = 0;
	if (r == 0)
		r = pread_u64(cg->fd[3], &s->pids);
	return r;
}

static struct dk_cg *cg_find(struct docker *d, const char *id)
{
	for (size_t i = 0; i < DK_CG_MAX; i++)
		if (d->cg[i].id[0] && strcmp(d->cg[i].id, id) == 0)
			return &d->cg[i];
	return NULL;
}

static void cg_forget(struct docker *d, const char *id)
{
	struct dk_cg *cg;

	pthread_rwlock_wrlock(&d->cglock);
	cg = cg_find(d, id);
	if (cg)
		cg_close(cg);
	pthread_rwlock_unlock(&d->cglock);
}

/* Resolve and open id's cgroups and keep them for stats(); 0 or -errno. */
static int cg_learn(struct docker *d, const char *id, pid_t pid, struct nerr *err)
{
	struct dk_cgpath p;
	struct dk_cg cg, *e;
	int r;

	r = cg_resolve(d, id, pid, &p, err);
	if (r < 0)
		return r;
	r = cg_open(&p, &cg);
	if (r < 0)
		return nerr_set(err, EBUSY, "container is not running: no stats");
	pthread_rwlock_wrlock(&d->cglock);
	if (cg_find(d, id)) {
		cg_close(&cg);	/* another thread was first */
	} else {
		e = NULL;
		for (size_t i = 0; i < DK_CG_MAX && !e; i++)
			if (!d->cg[i].id[0])
				e = &d->cg[i];
		if (!e) {	/* full: evict round robin */
			e = &d->cg[d->cg_next];
			d->cg_next = (d->cg_next + 1) % DK_CG_MAX;
			cg_close(e);
		}
		*e = cg;
	}
	pthread_rwlock_unlock(&d->cglock);
	return 0;
}

/* A worker saw id running with init pid: learn its cgroups if stats() does
 * not know them, so that stats() never needs to ask the engine. */
static void cg_note_running(struct docker *d, const char *id, pid_t pid)
{
	struct nerr e2 = { 0 };
	bool known;

	pthread_rwlock_rdlock(&d->cglock);
	known = cg_find(d, id) != NULL;
	pthread_rwlock_unlock(&d->cglock);
	if (!known)
		(void)cg_learn(d, id, pid, &e2);
}

/*
 * On a FUSE thread: cgroup files only, never the Engine API (a slow or hung
 * engine must not hold a read). Cgroups in a layout the paths do not
 * guess are learnt by the workers: at start, and at each inspect
 * (recovery, reconciliation) of a running container.
 */
static int dk_stats(void *h, const char *id, struct rt_stats *ret, struct nerr *err)
{
	struct docker *d = h;
	struct dk_cg *e;
	int r;

	if (check_id(id, err) < 0)
		return -EINVAL;
	for (int attempt = 0; attempt < 2; attempt++) {
		/* the hot path: four preads under a read lock */
		pthread_rwlock_rdlock(&d->cglock);
		e = cg_find(d, id);
		r = e ? cg_read(e, ret) : -ENOENT;
		pthread_rwlock_unlock(&d->cglock);
		if (e && r == 0)
			return 0;
		if (e && r != -ENODEV && r != -ENOENT)
			return nerr_set(err, -r, "reading cgroup files of %s: %s", id, strerror(-r));
		/* ENODEV: the cgroup went away (stopped, maybe restarted) */
		if (e)
			cg_forget(d, id);
		r = cg_learn(d, id, 0, err);
		if (r < 0)
			return r;
	}
	return nerr_set(err, EBUSY, "container is not running: no stats");
}

/* --- the /events watcher -------------------------------------------------- */

struct watch_ctx {
	struct docker *d;
	int *up;		/* -1 unknown, 0 down, 1 up */
	bool connected;
	char line[DOCKER_LINE_CAP];
	size_t len;
};

static void emit(struct docker *d, enum rt_event_kind kind)
{
	struct rt_event ev = { .kind = kind, .time = time(NULL) };

	d->fn(d->fn_ctx, &ev);
}

static size_t watch_header(char *p, size_t sz, size_t nm, void *ctx)
{
	struct watch_ctx *wc = ctx;
	size_t n = sz * nm;

	if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		const char *sp = memchr(p, ' ', n);

		wc->connected = sp && strtol(sp + 1, NULL, 10) == 200;
	} else if ((n == 2 && p[0] == '\r') || (n == 1 && p[0] == '\n')) {
		/* end of headers of a 200: the engine is subscribed and up */
		if (wc->connected && *wc->up != 1) {
			*wc->up = 1;
			emit(wc->d, RT_EV_ENGINE_UP);
		}
	}
	return n;
}

/* Events arrive one JSON object per line. A line past its cap or one that
 * does not parse means an event may be lost: the transfer is ended, so the
 * watcher reconnects and reports ENGINE_DOWN then ENGINE_UP, and the backend
 * resynchronises; nothing is silently dropped. */
static size_t watch_write(char *p, size_t sz, size_t nm, void *ctx)
{
	struct watch_ctx *wc = ctx;
	size_t n = sz * nm;

	if (!wc->connected)
		return n;
	for (size_t i = 0; i < n; i++) {
		struct rt_event ev;
		char id[128];
		int r;

		if (p[i] != '\n') {
			if (wc->len + 1 >= sizeof(wc->line))
				return 0;
			wc->line[wc->len++] = p[i];
			continue;
		}
		r = wc->len ? docker_json_parse_event(wc->line, wc->len, &ev, id, sizeof(id)) : 0;
		wc->len = 0;
		if (r < 0)
			return 0;
		if (r == 1) {
			if (ev.kind == RT_EV_OOM || ev.kind == RT_EV_START || ev.kind == RT_EV_DESTROY)
				oom_note(wc->d, &ev);
			wc->d->fn(wc->d->fn_ctx, &ev);
		}
	}
	return n;
}

static bool stopping(struct docker *d)
{
	bool s;

	pthread_mutex_lock(&d->wlock);
	s = d->stopping;
	pthread_mutex_unlock(&d->wlock);
	return s;
}

/* One subscription: returns when the stream ends, fails, or close() asks. */
static void watch_once(struct docker *d, int *up)
{
	/* filters={"label":["io.nodefs.managed=1"],"type":["container"]} */
	static const char url[] = "http://docker/events?filters="
		"%7B%22label%22%3A%5B%22" RT_OWNER_LABEL "%3D1%22%5D%2C"
		"%22type%22%3A%5B%22container%22%5D%7D";
	struct watch_ctx *wc = calloc(1, sizeof(*wc));
	CURL *c = curl_easy_init();
	int running = 1;

	if (!wc || !c)
		goto out;
	wc->d = d;
	wc->up = up;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, d->sock);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, DK_CONNECT_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, watch_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, wc);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, watch_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, wc);
	if (curl_multi_add_handle(d->wmulti, c) != CURLM_OK)
		goto out;
	while (running && !stopping(d)) {
		if (curl_multi_perform(d->wmulti, &running) != CURLM_OK)
			break;
		if (running)
			curl_multi_poll(d->wmulti, NULL, 0, 1000, NULL);
	}
	curl_multi_remove_handle(d->wmulti, c);
out:
	curl_easy_cleanup(c);
	free(wc);
}

static void *watch_main(void *arg)
{
	struct docker *d = arg;
	long backoff_ms = 100;
	int up = -1;

	while (!stopping(d)) {
		int was = up;
		struct timespec ts;

		watch_once(d, &up);
		if (stopping(d))
			break;
		/* the stream ended: events may have been missed, so the engine
		 * counts as down until a new subscription says it is up */
		if (up != 0) {
			up = 0;
			forget_version(d);
			emit(d, RT_EV_ENGINE_DOWN);
		}
		backoff_ms = was == 1 ? 100 : (backoff_ms * 2 > 2000 ? 2000 : backoff_ms * 2);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += (backoff_ms % 1000) * 1000000L;
		ts.tv_sec += backoff_ms / 1000 + ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_mutex_lock(&d->wlock);
		while (!d->stopping &&
		       pthread_cond_timedwait(&d->wcond, &d->wlock, &ts) != ETIMEDOUT)
			;
		pthread_mutex_unlock(&d->wlock);
	}
	return NULL;
}

static int dk_watch(void *h, rt_event_fn fn, void *ctx, struct nerr *err)
{
	struct docker *d = h;
	int r;

	if (!fn)
		return nerr_set(err, EINVAL, "watch: no callback");
	pthread_mutex_lock(&d->wlock);
	if (d->watching) {
		pthread_mutex_unlock(&d->wlock);
		return nerr_set(err, EBUSY, "docker events are already watched");
	}
	d->wmulti = curl_multi_init();
	if (!d->wmulti) {
		pthread_mutex_unlock(&d->wlock);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	d->fn = fn;
	d->fn_ctx = ctx;
	r = pthread_create(&d->watcher, NULL, watch_main, d);
	if (r) {
		curl_multi_cleanup(d->wmulti);
		d->wmulti = NULL;
		pthread_mutex_unlock(&d->wlock);
		return nerr_set(err, r, "cannot start the docker events thread");
	}
	d->watching = true;
	pthread_mutex_unlock(&d->wlock);
	return 0;
}

const struct runtime_ops rt_docker_ops = {
	.name = "docker",
	.engine_names = true,
	.open = dk_open,
	.close = dk_close,
	.health = dk_health,
	.create = dk_create,
	.start = dk_start,
	.stop = dk_stop,
	.kill = dk_kill,
	.pause = dk_pause,
	.resume = dk_resume,
	.update = dk_update,
	.exec = dk_exec,
	.inspect = dk_inspect,
	.stats = dk_stats,
	.logs = dk_logs,
	.destroy = dk_destroy,
	.list = dk_list,
	.watch = dk_watch,
};
