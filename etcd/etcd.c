/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * etcd: the v3 JSON gateway client (etcd.h). Requests are JSON bodies
 * POSTed to /v3/..., written with common/jw; answers are JSON with int64s
 * as strings, parsed with jansson. A plain http:// member is spoken to
 * with etcd-http.c's own HTTP/1.1; libcurl is loaded (lazycurl) only for
 * https://, for its TLS. Watches are etcd-watch.c's. Knows nothing of
 * nodefs' objects: keys and values are opaque bytes here.
 */
#include "etcd.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lazycurl.h"	/* libcurl, loaded on first need (https:// only) */
#include <jansson.h>

#include "etcd-http.h"
#include "etcd-internal.h"

#include "jw.h"
#include "nerr.h"
#include "sbuf.h"

/* ---- base64 ---- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_val(char c)
{
	const char *p = c ? strchr(b64, c) : NULL;
	return p ? (int)(p - b64) : -1;
}

int etcd_b64_decode(const char *in, size_t len, char **ret, size_t *ret_len)
{
	char *out;
	size_t o = 0;

	if (len % 4)
		return -EINVAL;
	out = malloc(len / 4 * 3 + 1);
	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < len; i += 4) {
		int a = b64_val(in[i]), b = b64_val(in[i + 1]);
		int c = in[i + 2] == '=' ? 0 : b64_val(in[i + 2]);
		int d = in[i + 3] == '=' ? 0 : b64_val(in[i + 3]);
		bool last = i + 4 == len;

		if (a < 0 || b < 0 || c < 0 || d < 0 || (!last && (in[i + 2] == '=' || in[i + 3] == '=')) ||
		    (in[i + 2] == '=' && in[i + 3] != '=')) {
			free(out);
			return -EINVAL;
		}
		uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
		out[o++] = (char)(v >> 16);
		if (in[i + 2] != '=')
			out[o++] = (char)(v >> 8 & 255);
		if (in[i + 3] != '=')
			out[o++] = (char)(v & 255);
	}
	out[o] = '\0';
	*ret = out;
	*ret_len = o;
	return (int)o;
}

/* ---- the client ---- */

void etcd_kvs_free(struct etcd_kv *v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++) {
		free(v[i].key);
		free(v[i].val);
	}
	free(v);
}

static char *dup_or_null(const char *s)
{
	return s && *s ? strdup(s) : NULL;
}

int etcd_new(const char *endpoints, const struct etcd_tls *tls, long timeout_ms,
	     struct etcd **ret, struct nerr *err)
{
	struct etcd *e;
	char *copy, *save = NULL;
	bool tls_urls = false;

	e = calloc(1, sizeof(*e));
	if (e)
		ehttp_conn_init(&e->hc);
	copy = strdup(endpoints ? endpoints : "");
	if (!e || !copy)
		goto oom;
	for (char *w = strtok_r(copy, " \t,", &save); w; w = strtok_r(NULL, " \t,", &save)) {
		char **nu;

		size_t l = strlen(w);
		while (l && w[l - 1] == '/')
			w[--l] = '\0';
		if ((strncmp(w, "http://", 7) != 0 || !ehttp_url_ok(w)) &&
		    strncmp(w, "https://", 8) != 0) {
			nerr_set(err, EINVAL, "etcd endpoint '%.64s' is not an http:// or https:// URL", w);
			free(copy);
			etcd_free(e);
			return -EINVAL;
		}
		nu = realloc(e->urls, (e->nurls + 1) * sizeof(*nu));
		if (!nu)
			goto oom;
		e->urls = nu;
		if (!(e->urls[e->nurls] = strdup(w)))
			goto oom;
		tls_urls |= strncmp(w, "https://", 8) == 0;
		e->nurls++;
	}
	free(copy);
	copy = NULL;
	if (!e->nurls) {
		etcd_free(e);
		return nerr_set(err, EINVAL, "no etcd endpoint given");
	}
	if (tls) {
		e->ca = dup_or_null(tls->ca);
		e->cert = dup_or_null(tls->cert);
		e->key = dup_or_null(tls->key);
	}
	e->timeout_ms = timeout_ms;
	if (tls_urls) {
		int r = lazycurl_load(err);
		if (r < 0) {
			etcd_free(e);
			return r;
		}
		e->h = curl_easy_init();
		if (!e->h)
			goto oom;
	}
	*ret = e;
	return 0;
oom:
	free(copy);
	etcd_free(e);
	return nerr_set(err, ENOMEM, "out of memory");
}

void etcd_free(struct etcd *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < e->nurls; i++)
		free(e->urls[i]);
	free(e->urls);
	free(e->ca);
	free(e->cert);
	free(e->key);
	if (e->h)
		curl_easy_cleanup(e->h);
	ehttp_conn_close(&e->hc);
	free(e);
}

const char *etcd_endpoint(const struct etcd *e)
{
	return e->urls[e->cur];
}

size_t etcd_current(const struct etcd *e)
{
	return e->cur;
}

void etcd_prefer(struct etcd *e, size_t i)
{
	if (i < e->nurls)
		e->cur = i;
}

void etcd_rotate(struct etcd *e)
{
	e->cur = (e->cur + 1) % e->nurls;
}

size_t etcd_nendpoints(const struct etcd *e)
{
	return e->nurls;
}

const char *etcd_endpoint_at(const struct etcd *e, size_t i)
{
	return i < e->nurls ? e->urls[i] : NULL;
}

static size_t on_data(char *p, size_t sz, size_t nm, void *ud)
{
	struct body *b = ud;
	size_t n = sz * nm;

	if (b->wp) {
		int r = etcd_wparse_feed(b->wp, p, n, b->cb, b->werr);
		if (r < 0 || b->cb->stop(b->cb->ctx)) {
			b->wresult = r;
			return 0;	/* ends the transfer */
		}
		return n;
	}
	if (b->len + n + 1 > ETCD_BODY_MAX) {
		b->over = true;
		return 0;
	}
	if (b->len + n + 1 > b->cap) {
		size_t nc = (b->len + n + 1) * 2;
		char *nb = realloc(b->buf, nc);
		if (!nb)
			return 0;
		b->buf = nb;
		b->cap = nc;
	}
	memcpy(b->buf + b->len, p, n);
	b->len += n;
	b->buf[b->len] = '\0';
	return n;
}

static int progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct body *b = ud;
	return b->cb && b->cb->stop(b->cb->ctx) ? 1 : 0;
}

static int curl_errno(CURLcode c)
{
	switch (c) {
	case CURLE_OPERATION_TIMEDOUT: return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST: return -EHOSTUNREACH;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CACERT_BADFILE: return -EACCES;
	case CURLE_GOT_NOTHING:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR: return -ECONNRESET;
	default: return -EIO;
	}
}

/* A non-200 answer's error: etcd's message when it gave one. */
static int http_status_err(struct etcd *e, size_t i, long code, struct body *b, struct nerr *err)
{
	json_t *j = b->buf ? json_loads(b->buf, 0, NULL) : NULL;
	const char *m = j ? json_string_value(json_object_get(j, "message")) : NULL;

	if (!m && j)
		m = json_string_value(json_object_get(j, "error"));
	nerr_set(err, EIO, "%s: HTTP %ld: %.160s", e->urls[i], code, m ? m : b->buf ? b->buf : "");
	json_decref(j);
	return code == 503 || code == 504 ? -ETIMEDOUT : -EIO;
}

/* A body's bytes (etcd-http.c's callback): the watch parser, or b. */
static int on_body(void *ud, const char *p, size_t n)
{
	struct body *b = ud;

	if (b->wp) {
		int r = etcd_wparse_feed(b->wp, p, n, b->cb, b->werr);
		if (r < 0) {
			b->wresult = r;
			return r;
		}
		return b->cb->stop(b->cb->ctx) ? 1 : 0;
	}
	return on_data((char *)p, 1, n, b) == n ? 0 : b->over ? -E2BIG : -ENOMEM;
}

static bool http_stop(void *ud)
{
	struct body *b = ud;

	return b->cb && b->cb->stop(b->cb->ctx);
}

/* POST body to a plain http:// endpoint i, with etcd-http.c. */
static int post_http(struct etcd *e, size_t i, const char *path, const char *body,
		     struct body *b, long timeout_ms, struct nerr *err)
{
	struct ehttp_call call = {
		.url = e->urls[i], .path = path, .body = body, .blen = strlen(body),
		.connect_ms = e->timeout_ms < 500 ? e->timeout_ms : 500, .timeout_ms = timeout_ms,
		.on_body = on_body, .ctx = b,
		/* a watch's stop is looked at after each read and this often
		 * while it is quiet (a node reading 100 others has 100) */
		.stop = b->cb ? http_stop : NULL, .poll_ms = 250,
	};
	int r = ehttp_post(&e->hc, &call, err);

	if (b->cb && b->wresult)
		return b->wresult;
	if (b->cb && r == 0)
		return 0;	/* stopped */
	if (r == -E2BIG && b->over)
		return nerr_set(err, E2BIG, "%s%s: answer over %u bytes", e->urls[i], path,
				ETCD_BODY_MAX);
	if (r < 0)
		return r;
	if (b->cb)
		return nerr_set(err, ECONNRESET, "%s: the watch stream ended", e->urls[i]);
	if (r != 200)
		return http_status_err(e, i, r, b, err);
	return 0;
}

/* POST body to url+path on an https:// endpoint i with libcurl; the
 * answer in b. */
static int post_curl(struct etcd *e, size_t i, const char *path, const char *body,
		     struct body *b, long timeout_ms, struct nerr *err)
{
	char url[1024], ebuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
	CURLcode c;
	long code = 0;
	CURL *h = e->h;

	snprintf(url, sizeof(url), "%s%s", e->urls[i], path);
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, e->timeout_ms < 500 ? e->timeout_ms : 500L);
	if (timeout_ms)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	if (b->cb) {
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, progress);
		curl_easy_setopt(h, CURLOPT_XFERINFODATA, b);
		/* a stream with nothing to say for a while is still alive;
		 * a dead peer is found by TCP keepalive */
		curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
		curl_easy_setopt(h, CURLOPT_TCP_KEEPIDLE, 2L);
		curl_easy_setopt(h, CURLOPT_TCP_KEEPINTVL, 1L);
	}
	if (e->ca)
		curl_easy_setopt(h, CURLOPT_CAINFO, e->ca);
	if (e->cert)
		curl_easy_setopt(h, CURLOPT_SSLCERT, e->cert);
	if (e->key)
		curl_easy_setopt(h, CURLOPT_SSLKEY, e->key);
	c = curl_easy_perform(h);
	curl_slist_free_all(hd);
	if (b->cb && b->wresult)
		return b->wresult;
	if (b->cb && (c == CURLE_WRITE_ERROR || c == CURLE_ABORTED_BY_CALLBACK))
		return 0;	/* stopped */
	if (c != CURLE_OK) {
		if (b->over)
			return nerr_set(err, E2BIG, "%s: answer over %u bytes", url, ETCD_BODY_MAX);
		/* a member requiring a client certificate just drops a client
		 * that has none: say what is missing rather than the socket's words */
		bool tls_hint = strncmp(e->urls[i], "https://", 8) == 0 && !e->cert &&
				c != CURLE_COULDNT_CONNECT && c != CURLE_OPERATION_TIMEDOUT;
		return nerr_set(err, tls_hint ? EACCES : -curl_errno(c), "%s: %s%s", e->urls[i],
				ebuf[0] ? ebuf : curl_easy_strerror(c),
				tls_hint ? " (TLS: no client certificate configured; the member "
					   "may require one: set cert and key)" : "");
	}
	if (b->cb)
		return -ECONNRESET;	/* the stream ended */
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	if (code != 200)
		return http_status_err(e, i, code, b, err);
	return 0;
}

/* POST body to url+path on endpoint i; the answer in b. */
int etcd_post_one(struct etcd *e, size_t i, const char *path, const char *body,
		    struct body *b, long timeout_ms, struct nerr *err)
{
	if (strncmp(e->urls[i], "http://", 7) == 0)
		return post_http(e, i, path, body, b, timeout_ms, err);
	return post_curl(e, i, path, body, b, timeout_ms, err);
}

/* A request body, written with common/jw into an sbuf capped at
 * ETCD_BODY_MAX: req_begin opens its object, post() closes it. */
struct req {
	struct sbuf sb;
	struct jw w;
};

static void req_begin(struct req *q)
{
	sbuf_init(&q->sb, ETCD_BODY_MAX);
	jw_init(&q->w, &q->sb, 0);
	jw_obj(&q->w);
}

/* Close q and POST it with failover; *ret the parsed answer. Frees q. */
static int post(struct etcd *e, const char *path, struct req *q, json_t **ret, struct nerr *err)
{
	int r;

	jw_obj_end(&q->w);
	r = jw_end(&q->w);
	if (r < 0) {
		sbuf_free(&q->sb);
		if (r == -E2BIG)
			return nerr_set(err, E2BIG, "%s: request over %u bytes", path, ETCD_BODY_MAX);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	r = -EHOSTUNREACH;
	for (size_t k = 0; k < e->nurls; k++) {
		size_t i = (e->cur + k) % e->nurls;
		struct body b = { 0 };

		nerr_clear(err);
		r = etcd_post_one(e, i, path, q->sb.buf, &b, e->timeout_ms, err);
		if (r == 0) {
			json_error_t je;
			json_t *j = json_loads(b.buf ? b.buf : "", 0, &je);
			free(b.buf);
			sbuf_free(&q->sb);
			e->cur = i;
			if (!j)
				return nerr_set(err, EPROTO, "%s%s: not JSON: %s", e->urls[i], path, je.text);
			*ret = j;
			return 0;
		}
		free(b.buf);
		/* another member may answer: transport failures and timeouts */
		if (r != -EHOSTUNREACH && r != -ECONNRESET && r != -ETIMEDOUT && r != -EACCES)
			break;
	}
	sbuf_free(&q->sb);
	return r;
}

int64_t etcd_jint(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	if (json_is_string(v))
		return strtoll(json_string_value(v), NULL, 10);
	if (json_is_integer(v))
		return json_integer_value(v);
	return 0;
}

/* "range_end": prefix's range end, the prefix with its last byte
 * incremented (its trailing 0xff bytes dropped first; "\0" when none is
 * left: every key from the prefix on). */
void etcd_range_end(struct jw *w, const char *prefix)
{
	size_t l = strlen(prefix);
	char *p = strdup(prefix);

	if (!p) {
		jw_fail(w, -ENOMEM);
		return;
	}
	while (l && (unsigned char)p[l - 1] == 0xff)
		l--;
	if (!l) {
		jw_kb64(w, "range_end", "\0", 1);
	} else {
		p[l - 1]++;
		jw_kb64(w, "range_end", p, l);
	}
	free(p);
}

/* A put's members: key, value and its lease (when not 0). */
static void put_req(struct jw *w, const char *key, const char *val, size_t vlen, int64_t lease)
{
	jw_kb64(w, "key", key, strlen(key));
	jw_kb64(w, "value", val, vlen);
	if (lease)
		jw_kint(w, "lease", lease);
}

/* {"requestPut":{put}} as an element of the current array. */
static void request_put(struct jw *w, const char *key, const char *val, size_t vlen,
			int64_t lease)
{
	jw_obj(w);
	jw_key(w, "requestPut");
	jw_obj(w);
	put_req(w, key, val, vlen, lease);
	jw_obj_end(w);
	jw_obj_end(w);
}

/* {"NAME":{"key":key}} as an element of the current array. */
static void request_key(struct jw *w, const char *name, const char *key)
{
	jw_obj(w);
	jw_key(w, name);
	jw_obj(w);
	jw_kb64(w, "key", key, strlen(key));
	jw_obj_end(w);
	jw_obj_end(w);
}

/* "compare":[{"key":key,"target":TARGET,"result":"EQUAL",FIELD:val}] */
static void compare(struct jw *w, const char *key, const char *target, const char *field,
		    int64_t val)
{
	jw_key(w, "compare");
	jw_arr(w);
	jw_obj(w);
	jw_kb64(w, "key", key, strlen(key));
	jw_kstr(w, "target", target);
	jw_kstr(w, "result", "EQUAL");
	jw_kint(w, field, val);
	jw_obj_end(w);
	jw_arr_end(w);
}

int etcd_put(struct etcd *e, const char *key, const char *val, size_t vlen, int64_t lease,
	     int64_t *ret_rev, struct nerr *err)
{
	json_t *ans = NULL;
	struct req q;
	int r;

	req_begin(&q);
	put_req(&q.w, key, val, vlen, lease);
	r = post(e, "/v3/kv/put", &q, &ans, err);
	if (r < 0)
		return r;
	if (ret_rev)
		*ret_rev = etcd_jint(json_object_get(ans, "header"), "revision");
	json_decref(ans);
	return 0;
}

/* Put key = val (with lease) if key's field (of target) equals cmp_val: 0,
 * 1 when the compare failed, or -errno. */
static int txn(struct etcd *e, const char *key, const char *target, const char *field,
	       int64_t cmp_val, const char *val, size_t vlen, int64_t lease, int64_t *ret_rev,
	       struct nerr *err)
{
	json_t *ans = NULL;
	struct req q;
	int r;

	req_begin(&q);
	compare(&q.w, key, target, field, cmp_val);
	jw_key(&q.w, "success");
	jw_arr(&q.w);
	request_put(&q.w, key, val, vlen, lease);
	jw_arr_end(&q.w);
	r = post(e, "/v3/kv/txn", &q, &ans, err);
	if (r < 0)
		return r;
	r = json_is_true(json_object_get(ans, "succeeded")) ? 0 : 1;
	if (r == 0 && ret_rev)
		*ret_rev = etcd_jint(json_object_get(ans, "header"), "revision");
	json_decref(ans);
	return r;
}

int etcd_create(struct etcd *e, const char *key, const char *val, size_t vlen, int64_t lease,
		struct nerr *err)
{
	int r = txn(e, key, "CREATE", "create_revision", 0, val, vlen, lease, NULL, err);

	return r == 1 ? nerr_set(err, EEXIST, "%s exists", key) : r;
}

int etcd_put_if(struct etcd *e, const char *key, const char *val, size_t vlen, int64_t rev,
		int64_t *ret_rev, struct nerr *err)
{
	int r = txn(e, key, "MOD", "mod_revision", rev, val, vlen, 0, ret_rev, err);

	return r == 1 ? nerr_set(err, ESTALE, "%s changed since revision %" PRId64, key, rev) : r;
}

int etcd_delete(struct etcd *e, const char *key, struct nerr *err)
{
	json_t *ans = NULL;
	struct req q;
	int r;

	req_begin(&q);
	jw_kb64(&q.w, "key", key, strlen(key));
	r = post(e, "/v3/kv/deleterange", &q, &ans, err);
	json_decref(ans);
	return r;
}

/* ops as the elements of a transaction branch's array. */
static void ops_json(struct jw *w, const struct etcd_op *ops, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (ops[i].del)
			request_key(w, "requestDeleteRange", ops[i].key);
		else
			request_put(w, ops[i].key, ops[i].val, ops[i].vlen, ops[i].lease);
	}
}

int etcd_txn(struct etcd *e, const struct etcd_op *ops, size_t n, int64_t *ret_rev,
	     struct nerr *err)
{
	json_t *ans = NULL;
	struct req q;
	int r;

	if (n > ETCD_TXN_MAX)
		return nerr_set(err, E2BIG, "%zu operations in one transaction (at most %d)", n,
				ETCD_TXN_MAX);
	req_begin(&q);
	jw_key(&q.w, "success");
	jw_arr(&q.w);
	ops_json(&q.w, ops, n);
	jw_arr_end(&q.w);
	r = post(e, "/v3/kv/txn", &q, &ans, err);
	if (r < 0)
		return r;
	if (ret_rev)
		*ret_rev = etcd_jint(json_object_get(ans, "header"), "revision");
	json_decref(ans);
	return 0;
}

int etcd_txn_if(struct etcd *e, const char *key, int64_t rev, const struct etcd_op *ops,
		size_t n, struct nerr *err)
{
	json_t *ans = NULL;
	struct req q;
	int r;

	if (n > ETCD_TXN_MAX)
		return nerr_set(err, E2BIG, "%zu operations in one transaction (at most %d)", n,
				ETCD_TXN_MAX);
	req_begin(&q);
	compare(&q.w, key, "MOD", "mod_revision", rev);
	jw_key(&q.w, "success");
	jw_arr(&q.w);
	ops_json(&q.w, ops, n);
	jw_arr_end(&q.w);
	r = post(e, "/v3/kv/txn", &q, &ans, err);
	if (r < 0)
		return r;
	if (!json_is_true(json_object_get(ans, "succeeded")))
		r = nerr_set(err, ESTALE, "%s changed since revision %" PRId64, key, rev);
	json_decref(ans);
	return r;
}

int etcd_create_and(struct etcd *e, const char *key, const char *val, size_t vlen,
		    const struct etcd_op *also, size_t nalso, struct nerr *err)
{
	json_t *ans = NULL;
	struct req q;
	int r;

	if (nalso + 1 > ETCD_TXN_MAX)
		return nerr_set(err, E2BIG, "%zu operations in one transaction (at most %d)",
				nalso + 1, ETCD_TXN_MAX);
	req_begin(&q);
	compare(&q.w, key, "CREATE", "create_revision", 0);
	jw_key(&q.w, "success");
	jw_arr(&q.w);
	ops_json(&q.w, also, nalso);
	request_put(&q.w, key, val, vlen, 0);
	jw_arr_end(&q.w);
	/* the failure branch reads the key back: a create retried on
	 * another member after a lost answer finds its own record there */
	jw_key(&q.w, "failure");
	jw_arr(&q.w);
	ops_json(&q.w, also, nalso);
	request_key(&q.w, "requestRange", key);
	jw_arr_end(&q.w);
	r = post(e, "/v3/kv/txn", &q, &ans, err);
	if (r < 0)
		return r;
	if (!json_is_true(json_object_get(ans, "succeeded"))) {
		/* responses[nalso].response_range.kvs[0].value */
		json_t *rr = json_object_get(json_array_get(json_object_get(ans, "responses"), nalso),
					     "response_range");
		const char *v64 = json_string_value(
			json_object_get(json_array_get(json_object_get(rr, "kvs"), 0), "value"));
		char *have = NULL;
		size_t hlen = 0;
		bool ours = v64 && etcd_b64_decode(v64, strlen(v64), &have, &hlen) >= 0 &&
			    hlen == vlen && memcmp(have, val, vlen) == 0;
		free(have);
		r = ours ? 0 : nerr_set(err, EEXIST, "%s exists", key);
	}
	json_decref(ans);
	return r;
}

/* kv (a JSON object of the gateway) into out; -EPROTO when malformed. */
int etcd_kv_of(json_t *kv, struct etcd_kv *out)
{
	const char *k = json_string_value(json_object_get(kv, "key"));
	const char *v = json_string_value(json_object_get(kv, "value"));
	size_t kl;

	*out = (struct etcd_kv){ 0 };
	if (!k || etcd_b64_decode(k, strlen(k), &out->key, &kl) < 0)
		return -EPROTO;
	if (etcd_b64_decode(v ? v : "", v ? strlen(v) : 0, &out->val, &out->vlen) < 0) {
		free(out->key);
		out->key = NULL;
		return -EPROTO;
	}
	out->create_rev = etcd_jint(kv, "create_revision");
	out->mod_rev = etcd_jint(kv, "mod_revision");
	out->lease = etcd_jint(kv, "lease");
	return 0;
}

int etcd_list(struct etcd *e, const char *prefix, struct etcd_kv **ret, size_t *ret_n,
	      int64_t *ret_rev, struct nerr *err)
{
	json_t *ans = NULL, *kvs;
	struct etcd_kv *v;
	struct req q;
	size_t n = 0;
	int r;

	req_begin(&q);
	jw_kb64(&q.w, "key", prefix, strlen(prefix));
	etcd_range_end(&q.w, prefix);
	r = post(e, "/v3/kv/range", &q, &ans, err);
	if (r < 0)
		return r;
	kvs = json_object_get(ans, "kvs");
	v = calloc(json_array_size(kvs) + 1, sizeof(*v));
	if (!v) {
		json_decref(ans);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < json_array_size(kvs); i++)
		if (etcd_kv_of(json_array_get(kvs, i), &v[n]) == 0)
			n++;
	*ret_rev = etcd_jint(json_object_get(ans, "header"), "revision");
	json_decref(ans);
	*ret = v;
	*ret_n = n;
	return 0;
}

int etcd_lease_grant(struct etcd *e, long ttl_s, int64_t *ret_id, struct nerr *err)
{
	json_t *ans = NULL;
	struct req q;
	int r;

	req_begin(&q);
	jw_kint(&q.w, "TTL", ttl_s);
	r = post(e, "/v3/lease/grant", &q, &ans, err);
	if (r < 0)
		return r;
	*ret_id = etcd_jint(ans, "ID");
	json_decref(ans);
	return *ret_id ? 0 : nerr_set(err, EPROTO, "lease grant gave no ID");
}

int etcd_lease_keepalive(struct etcd *e, int64_t id, long *ret_ttl, struct nerr *err)
{
	json_t *ans = NULL;
	struct req q;
	long ttl;
	int r;

	req_begin(&q);
	jw_kint(&q.w, "ID", id);
	r = post(e, "/v3/lease/keepalive", &q, &ans, err);
	if (r < 0)
		return r;
	ttl = (long)etcd_jint(json_object_get(ans, "result"), "TTL");
	json_decref(ans);
	if (ttl <= 0)
		return nerr_set(err, ENOENT, "lease %" PRIx64 " expired", (uint64_t)id);
	*ret_ttl = ttl;
	return 0;
}

int etcd_status(struct etcd *e, size_t i, struct etcd_member_status *ret)
{
	struct body b = { 0 };
	struct nerr err = { 0 };
	int r;

	*ret = (struct etcd_member_status){ 0 };
	r = etcd_post_one(e, i, "/v3/maintenance/status", "{}", &b, e->timeout_ms, &err);
	if (r == 0) {
		json_t *j = json_loads(b.buf ? b.buf : "", 0, NULL);
		if (j) {
			json_t *h = json_object_get(j, "header");
			ret->ok = true;
			ret->member = (uint64_t)strtoull(json_string_value(json_object_get(h, "member_id")) ?: "0", NULL, 10);
			ret->leader = (uint64_t)strtoull(json_string_value(json_object_get(j, "leader")) ?: "0", NULL, 10);
			ret->revision = etcd_jint(h, "revision");
			json_decref(j);
		} else
			r = -EPROTO;
	}
	if (r < 0)
		snprintf(ret->error, sizeof(ret->error), "%s", err.msg[0] ? err.msg : strerror(-r));
	free(b.buf);
	return r;
}
