/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * etcd-watch: watches through the v3 JSON gateway (etcd.h): the stream's
 * framing (sans I/O, fuzzed as fuzz_etcd_watch), a watch that blocks on a
 * thread of its own (either transport), and one its caller reads when
 * poll says so (http:// members), so that one thread can read many.
 */
#include "etcd.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "etcd-internal.h"
#include "jw.h"
#include "nerr.h"
#include "sbuf.h"

void etcd_wparse_free(struct etcd_wparse *p)
{
	free(p->buf);
	*p = (struct etcd_wparse){ 0 };
}

/* One JSON message of the stream. */
static int wparse_msg(struct etcd_wparse *p, const char *s, size_t len,
		      const struct etcd_watch_cb *cb, struct nerr *err)
{
	json_error_t je;
	json_t *j = json_loadb(s, len, 0, &je), *res, *evs;
	struct etcd_event *ev;
	size_t n = 0;
	int r = 0;

	if (!j)
		return nerr_set(err, EPROTO, "watch stream: not JSON: %s", je.text);
	res = json_object_get(j, "result");
	if (!res) {
		json_t *e = json_object_get(j, "error");
		const char *m = json_string_value(json_object_get(e, "message"));
		nerr_set(err, ECANCELED, "watch: %.160s", m ? m : "error");
		json_decref(j);
		return -ECANCELED;
	}
	if (etcd_jint(res, "compact_revision") > 0) {
		p->compact = etcd_jint(res, "compact_revision");
		json_decref(j);
		return nerr_set(err, ERANGE, "watch: revision compacted (at %" PRId64 ")", p->compact);
	}
	if (json_is_true(json_object_get(res, "canceled"))) {
		const char *m = json_string_value(json_object_get(res, "cancel_reason"));
		nerr_set(err, ECANCELED, "watch cancelled: %.160s", m ? m : "");
		json_decref(j);
		return -ECANCELED;
	}
	evs = json_object_get(res, "events");
	ev = calloc(json_array_size(evs) + 1, sizeof(*ev));
	if (!ev) {
		json_decref(j);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < json_array_size(evs); i++) {
		json_t *x = json_array_get(evs, i);
		const char *t = json_string_value(json_object_get(x, "type"));

		if (etcd_kv_of(json_object_get(x, "kv"), &ev[n].kv) < 0)
			continue;
		ev[n].type = t && strcmp(t, "DELETE") == 0 ? ETCD_EV_DELETE : ETCD_EV_PUT;
		n++;
	}
	/* the created response's header revision is the store's, and the
	 * events from the start revision up to it come after: not seen yet */
	cb->events(cb->ctx, ev, n, json_is_true(json_object_get(res, "created")) ? 0 :
		   etcd_jint(json_object_get(res, "header"), "revision"));
	for (size_t i = 0; i < n; i++) {
		free(ev[i].kv.key);
		free(ev[i].kv.val);
	}
	free(ev);
	json_decref(j);
	return r;
}

/* The gateway writes one JSON object per message, each followed by a
 * newline; objects never contain a raw newline (JSON escapes them). */
int etcd_wparse_feed(struct etcd_wparse *p, const char *data, size_t len,
		     const struct etcd_watch_cb *cb, struct nerr *err)
{
	size_t start = 0;

	if (p->len + len > ETCD_BODY_MAX)
		return nerr_set(err, E2BIG, "watch message over %u bytes", ETCD_BODY_MAX);
	if (p->len + len + 1 > p->cap) {
		size_t nc = (p->len + len + 1) * 2;
		char *nb = realloc(p->buf, nc);
		if (!nb)
			return nerr_set(err, ENOMEM, "out of memory");
		p->buf = nb;
		p->cap = nc;
	}
	memcpy(p->buf + p->len, data, len);
	p->len += len;
	for (size_t i = 0; i < p->len; i++) {
		if (p->buf[i] != '\n')
			continue;
		size_t l = i - start;
		bool blank = true;
		for (size_t k = start; k < i; k++)
			if (p->buf[k] != ' ' && p->buf[k] != '\r' && p->buf[k] != '\t')
				blank = false;
		if (!blank) {
			int r = wparse_msg(p, p->buf + start, l, cb, err);
			if (r < 0) {
				memmove(p->buf, p->buf + i + 1, p->len - i - 1);
				p->len -= i + 1;
				return r;
			}
		}
		start = i + 1;
	}
	memmove(p->buf, p->buf + start, p->len - start);
	p->len -= start;
	return 0;
}

/* A watch's create request, in body. */
static int watch_req(struct sbuf *body, const char *prefix, int64_t from_rev, struct nerr *err)
{
	struct jw w;
	int r;

	jw_init(&w, body, 0);
	jw_obj(&w);
	jw_key(&w, "create_request");
	jw_obj(&w);
	jw_kb64(&w, "key", prefix, strlen(prefix));
	etcd_range_end(&w, prefix);
	jw_kint(&w, "start_revision", from_rev);
	jw_kbool(&w, "progress_notify", true);
	jw_obj_end(&w);
	jw_obj_end(&w);
	r = jw_end(&w);
	if (r < 0)
		return r == -E2BIG ? nerr_set(err, E2BIG, "watch: request over %u bytes", ETCD_BODY_MAX)
				   : nerr_set(err, ENOMEM, "out of memory");
	return 0;
}

int etcd_watch(struct etcd *e, const char *prefix, int64_t from_rev,
	       const struct etcd_watch_cb *cb, int64_t *ret_compact, struct nerr *err)
{
	struct etcd_wparse wp = { 0 };
	struct sbuf body = SBUF_INIT(ETCD_BODY_MAX);
	int r = watch_req(&body, prefix, from_rev, err);

	if (r < 0) {
		sbuf_free(&body);
		return r;
	}
	r = -EHOSTUNREACH;
	for (size_t k = 0; k < e->nurls; k++) {
		size_t i = (e->cur + k) % e->nurls;
		struct body b = { .wp = &wp, .cb = cb, .werr = err };

		nerr_clear(err);
		e->cur = i;	/* etcd_current() while it runs */
		r = etcd_post_one(e, i, "/v3/watch", body.buf, &b, 0, err);
		if (r != -EHOSTUNREACH && r != -EACCES)
			break;
	}
	if (r == -ERANGE && ret_compact)
		*ret_compact = wp.compact;
	etcd_wparse_free(&wp);
	sbuf_free(&body);
	return r;
}

/* ---- a watch the caller reads (many on one thread) ---- */

struct etcd_wstream {
	struct etcd *e;
	struct etcd_wparse wp;
	struct ehttp_resp resp;
	struct ehttp_call call;
	struct body b;
	struct nerr *err;	/* the read's, while it runs */
	struct sbuf req;
};

bool etcd_streams_ok(const struct etcd *e)
{
	for (size_t i = 0; i < e->nurls; i++)
		if (strncmp(e->urls[i], "http://", 7) != 0)
			return false;
	return e->nurls > 0;
}

static int wstream_body(void *ud, const char *p, size_t n)
{
	struct etcd_wstream *s = ud;

	return etcd_wparse_feed(&s->wp, p, n, s->b.cb, s->err);
}

int etcd_wstream_open(struct etcd *e, const char *prefix, int64_t from_rev,
		      struct etcd_wstream **ret, struct nerr *err)
{
	struct etcd_wstream *s;
	int r;

	if (!etcd_streams_ok(e))
		return nerr_set(err, ENOTSUP, "a watch read by its caller needs http:// members");
	s = calloc(1, sizeof(*s));
	if (!s)
		return nerr_set(err, ENOMEM, "out of memory");
	sbuf_init(&s->req, ETCD_BODY_MAX);
	r = watch_req(&s->req, prefix, from_rev, err);
	for (size_t k = 0; r == 0 && k < e->nurls; k++) {
		size_t i = (e->cur + k) % e->nurls;

		nerr_clear(err);
		e->cur = i;	/* etcd_current() while it runs */
		s->call = (struct ehttp_call){
			.url = e->urls[i], .path = "/v3/watch", .body = s->req.buf,
			.blen = s->req.len, .connect_ms = e->timeout_ms < 500 ? e->timeout_ms : 500,
			.on_body = wstream_body, .ctx = s,
		};
		r = ehttp_start(&e->hc, &s->resp, &s->call, err);
		if ((r == -EHOSTUNREACH || r == -ETIMEDOUT) && k + 1 < e->nurls)
			r = 0;	/* the next member */
		else
			break;
	}
	if (r < 0) {
		etcd_wstream_close(s);
		return r;
	}
	s->e = e;
	*ret = s;
	return 0;
}

int etcd_wstream_fd(const struct etcd_wstream *s)
{
	return s->e->hc.fd;
}

int etcd_wstream_read(struct etcd_wstream *s, const struct etcd_watch_cb *cb, int64_t *ret_compact,
		      struct nerr *err)
{
	int r;

	s->b.cb = cb;
	s->err = err;
	r = ehttp_read(&s->e->hc, &s->resp, &s->call, err);
	s->err = NULL;
	if (r == -ERANGE && ret_compact)
		*ret_compact = s->wp.compact;
	if (r == 1) {
		ehttp_conn_close(&s->e->hc);
		if (s->resp.status != 200)
			return nerr_set(err, EIO, "%s: watch: HTTP %d", s->call.url, s->resp.status);
		return nerr_set(err, ECONNRESET, "%s: the watch stream ended", s->call.url);
	}
	return r == 2 ? 0 : r;
}

void etcd_wstream_close(struct etcd_wstream *s)
{
	if (!s)
		return;
	if (s->e)
		ehttp_conn_close(&s->e->hc);
	etcd_wparse_free(&s->wp);
	sbuf_free(&s->req);
	free(s);
}
