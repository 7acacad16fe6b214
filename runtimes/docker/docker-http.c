/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * docker-http: the Docker driver's transport: one HTTP exchange with the
 * engine over its unix socket (dk_call), on blocking curl easy transfers
 * made on the caller's thread (the backend's worker pool); kept-alive easy
 * handles are shared through a small pool, one handle per transfer at a
 * time, so any number of threads may call at once. The API version is
 * negotiated once from GET /version and again after the engine went away.
 * Replies that are multiplexed streams (exec, logs) are fed to a sink
 * (dk_mux_call).
 *
 * Must not know: what any call means (docker.c), JSON beyond the error
 * message (docker-json.c), the backend, FUSE or checkpoints.
 */
#include <ctype.h>
#include "lazycurl.h"	/* libcurl, loaded on first need */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "docker-driver-internal.h"
#include "macro.h"
#include "nerr.h"
#include "runtime.h"
#include "sbuf.h"

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

void dk_forget_version(struct docker *d)
{
	pthread_mutex_lock(&d->lock);
	d->negotiated = false;
	pthread_mutex_unlock(&d->lock);
}

int dk_ensure_version(struct docker *d, char *api, size_t n, struct nerr *err);

int dk_curl_ready(struct docker *d, struct nerr *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, r;

	if (lazycurl_loaded())
		return 0;
	/* an engine that is not there is told without libcurl: a node that
	 * runs no Docker never maps it (common/lazycurl.h) */
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d->sock);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return nerr_set(err, errno, "socket: %s", strerror(errno));
	r = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
	close(fd);
	if (r < 0)
		return nerr_set(err, EHOSTDOWN, "docker engine unreachable at %s: %s", d->sock,
				strerror(-r));
	return lazycurl_load(err);
}

/* One HTTP exchange. *ret_status gets the HTTP status, body (if non-NULL,
 * cap DOCKER_BODY_CAP) the reply when not streamed. 0 when the exchange
 * happened and the status maps to success; else -errno with the engine's
 * message. */
int dk_call(struct docker *d, struct dk_req *rq, struct sbuf *body, long *ret_status,
	    struct nerr *err)
{
	char api[16] = "", url[1024], ebuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdrs = NULL;
	struct sbuf tmp = SBUF_INIT(DOCKER_BODY_CAP);
	long status = 0, tmo, oserr = 0;
	CURLcode cc;
	CURL *c;
	int r;

	r = dk_curl_ready(d, err);
	if (r < 0)
		return r;
	if (!body)
		body = &tmp;
	if (!rq->unversioned) {
		r = dk_ensure_version(d, api, sizeof(api), err);
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
			dk_forget_version(d);
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
	/* Podman's 500 where Docker has a status of its own */
	if (r == EIO) {
		int pr = docker_json_podman_cause(body->buf, body->len, rq->call);

		if (pr)
			r = pr;
	}
	if (r) {
		char msg[NERR_MSG_MAX];

		docker_json_error_message(body->buf, body->len, msg, sizeof(msg));
		r = nerr_set(err, r, "%s", msg[0] ? msg : "docker engine error");
	}
out:
	sbuf_free(&tmp);
	return r;
}

struct ping_ctx {
	char api[32];
	bool has_api;
	bool podman;
};

static size_t ping_header(char *p, size_t sz, size_t nm, void *ctx)
{
	struct ping_ctx *pc = ctx;
	size_t n = sz * nm;

	if (docker_ping_header(p, n, pc->api, sizeof(pc->api), &pc->podman) == 1)
		pc->has_api = true;
	return n;
}

/*
 * The engine's API version from GET /_ping's headers when it is Podman's:
 * its /version runs conmon and the OCI runtime to name their versions
 * (1 to 6 s on a loaded 2-core machine, past the 10 s of the negotiation
 * under 20 creates at once), and its Engine API has one minimum (1.24).
 * 1 and the version in ret_api when that is so; 0 for Docker, whose
 * /version also gives the minimum the negotiation needs.
 */
static int ping_version(struct docker *d, char *ret_api, size_t n, struct nerr *err)
{
	struct ping_ctx pc = { 0 };
	struct dk_req rq = { .method = "GET", .path = "/_ping", .unversioned = true,
			     .timeout_ms = 10000, .header = ping_header, .header_ctx = &pc };
	int r;

	r = dk_call(d, &rq, NULL, NULL, err);
	if (r < 0)
		return r;
	if (!pc.podman || !pc.has_api)
		return 0;
	snprintf(ret_api, n, "%s", pc.api);
	return 1;
}

int dk_ensure_version(struct docker *d, char *api, size_t n, struct nerr *err)
{
	struct dk_req rq = { .method = "GET", .path = "/version", .unversioned = true,
			     .timeout_ms = 10000 };
	struct sbuf body = SBUF_INIT(DOCKER_BODY_CAP);
	char sapi[32], smin[32], neg[16];
	bool podman;
	int r;

	pthread_mutex_lock(&d->lock);
	if (d->negotiated) {
		snprintf(api, n, "%s", d->api);
		pthread_mutex_unlock(&d->lock);
		return 0;
	}
	pthread_mutex_unlock(&d->lock);

	r = ping_version(d, sapi, sizeof(sapi), err);
	if (r < 0)
		goto out;
	podman = r == 1;
	smin[0] = '\0';
	if (!podman) {
		r = dk_call(d, &rq, &body, NULL, err);
		if (r < 0)
			goto out;
		r = docker_json_parse_version(body.buf, body.len, sapi, smin, sizeof(sapi), err);
		if (r < 0)
			goto out;
	}
	r = docker_version_negotiate(sapi, smin[0] ? smin : NULL, neg, sizeof(neg));
	if (r < 0) {
		r = nerr_set(err, r == -EPROTONOSUPPORT ? EPROTONOSUPPORT : EIO,
			     "docker engine API %s is older than %u.%u, the oldest supported",
			     sapi, DOCKER_API_OLDEST_MAJOR, DOCKER_API_OLDEST_MINOR);
		goto out;
	}
	pthread_mutex_lock(&d->lock);
	snprintf(d->api, sizeof(d->api), "%s", neg);
	d->podman = podman;
	d->negotiated = true;
	pthread_mutex_unlock(&d->lock);
	snprintf(api, n, "%s", neg);
out:
	sbuf_free(&body);
	return r;
}

int dk_is_podman(struct docker *d, struct nerr *err)
{
	char api[16];
	bool p;
	int r;

	r = dk_ensure_version(d, api, sizeof(api), err);
	if (r < 0)
		return r;
	pthread_mutex_lock(&d->lock);
	p = d->podman;
	pthread_mutex_unlock(&d->lock);
	return p;
}

/* Engine ids and names in a URL path: nothing to escape, so refuse the rest. */
int dk_check_id(const char *id, struct nerr *err)
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
int dk_simple_post(struct docker *d, const char *path, enum docker_call call, long timeout_ms,
		   struct nerr *err)
{
	struct dk_req rq = { .method = "POST", .path = path, .call = call, .timeout_ms = timeout_ms };

	return dk_call(d, &rq, NULL, NULL, err);
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
int dk_mux_call(struct docker *d, const char *method, const char *path, const char *body,
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
