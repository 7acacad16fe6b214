/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * etcd-internal: what etcd.c (the client, its transports, KV, leases,
 * status) shares with etcd-watch.c (watches): the client's struct, a
 * request's answer as it comes, and the helpers both call. Not for use
 * outside etcd/.
 */
#ifndef NODEFS_ETCD_INTERNAL_H
#define NODEFS_ETCD_INTERNAL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "etcd-http.h"
#include "etcd.h"
#include "lazycurl.h"

struct jw;
struct nerr;

#define ETCD_BODY_MAX (4u << 20)

struct etcd {
	char **urls;
	size_t nurls, cur;
	struct etcd_tls tls;
	char *ca, *cert, *key;
	long timeout_ms;
	CURL *h;		/* https:// members: NULL until the first */
	struct ehttp_conn hc;	/* http:// members */
};

/* A request's answer as it comes: its bytes, or a watch's parser. */
struct body {
	char *buf;
	size_t len, cap;
	bool over;
	struct etcd_wparse *wp;		/* a watch: feed the parser */
	const struct etcd_watch_cb *cb;
	int wresult;
	struct nerr *werr;
};

/* POST body to path on endpoint i, the answer in b (a watch: fed to
 * b->wp). 0, or a negative errno with err set. */
int etcd_post_one(struct etcd *e, size_t i, const char *path, const char *body, struct body *b,
		  long timeout_ms, struct nerr *err);
/* The "range_end" of every key under prefix, into w. */
void etcd_range_end(struct jw *w, const char *prefix);
/* An int64 of the gateway's JSON (a string, or a number): 0 when absent. */
int64_t etcd_jint(json_t *o, const char *k);
/* kv (a JSON object of the gateway) into out; -EPROTO when malformed. */
int etcd_kv_of(json_t *kv, struct etcd_kv *out);

#endif
