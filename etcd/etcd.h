/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * etcd: a small client of etcd's v3 API through its JSON gateway (HTTP/1.1
 * over libcurl; keys and values base64 in JSON), as docs/design.md argues.
 * It speaks of keys, values, revisions, leases and watches; it knows
 * nothing of nodefs' objects, its tree or its config file.
 *
 * A struct etcd is one client: a list of endpoints (http:// or https://),
 * the TLS files and one curl handle with its kept-alive connection. It is
 * used by one thread at a time (each thread that talks to etcd makes its
 * own). Every call is blocking and bounded by the client's timeout; on a
 * transport failure the next endpoint is tried once each, and the one that
 * answered is kept for the next call.
 *
 * Errors: -ETIMEDOUT (no answer in time), -EHOSTUNREACH (no endpoint
 * reachable), -EPROTO (an answer that is not the gateway's JSON), -EIO (an
 * error the server returned; its message in err), -ENOMEM.
 */
#ifndef NODEFS_ETCD_H
#define NODEFS_ETCD_H

#define NERR_MSG_MAX_ETCD 256

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nerr;
struct etcd;

struct etcd_tls {
	const char *ca, *cert, *key;	/* file paths, each NULL when unset */
};

/* One key/value as read; key and val are NUL-terminated copies. */
struct etcd_kv {
	char *key;
	char *val;
	size_t vlen;
	int64_t create_rev, mod_rev, lease;
};
void etcd_kvs_free(struct etcd_kv *v, size_t n);

/* endpoints: space-separated URLs. timeout_ms bounds each call. */
int etcd_new(const char *endpoints, const struct etcd_tls *tls, long timeout_ms,
	     struct etcd **ret, struct nerr *err);
void etcd_free(struct etcd *e);
/* The endpoint the last call used (borrowed). */
const char *etcd_endpoint(const struct etcd *e);
size_t etcd_nendpoints(const struct etcd *e);
/* The index of the endpoint in use (a watch's, while it runs), and a move
 * to the next one (a member that stopped answering without closing its
 * connections). The client's own thread only. */
size_t etcd_current(const struct etcd *e);
void etcd_rotate(struct etcd *e);
/* Use endpoint i from the next call on (i out of range: no change). */
void etcd_prefer(struct etcd *e, size_t i);
const char *etcd_endpoint_at(const struct etcd *e, size_t i);

/* Put key=val (lease 0: none). ret_rev (may be NULL): the revision. */
int etcd_put(struct etcd *e, const char *key, const char *val, size_t vlen, int64_t lease,
	     int64_t *ret_rev, struct nerr *err);
/* Put only when key does not exist: -EEXIST when it does. */
int etcd_create(struct etcd *e, const char *key, const char *val, size_t vlen, int64_t lease,
		struct nerr *err);
/* Put only when key's mod revision is still rev: -ESTALE otherwise.
 * ret_rev (may be NULL): the revision of the put. */
int etcd_put_if(struct etcd *e, const char *key, const char *val, size_t vlen, int64_t rev,
		int64_t *ret_rev, struct nerr *err);
int etcd_delete(struct etcd *e, const char *key, struct nerr *err);
/* ops[0..n) (puts and deletes, n at most ETCD_TXN_MAX) in one transaction,
 * only while key's mod revision is still rev: -ESTALE otherwise. */
struct etcd_op;
int etcd_txn_if(struct etcd *e, const char *key, int64_t rev, const struct etcd_op *ops,
		size_t n, struct nerr *err);
/* Several puts and deletes in one transaction (one raft commit): all or
 * none. n at most ETCD_TXN_MAX (etcd's --max-txn-ops default); ret_rev
 * (may be NULL): the revision. */
#define ETCD_TXN_MAX 128
struct etcd_op {
	bool del;
	const char *key;
	const char *val;	/* puts */
	size_t vlen;
	int64_t lease;
};
int etcd_txn(struct etcd *e, const struct etcd_op *ops, size_t n, int64_t *ret_rev,
	     struct nerr *err);
/* Create key=val (no lease) when it does not exist, and in the same
 * transaction apply also[0..nalso) (puts and deletes of other keys)
 * whether it existed or not. -EEXIST when it existed with another value
 * (the same value: a create whose answer was lost and that was retried on
 * another member; 0). nalso below ETCD_TXN_MAX. */
int etcd_create_and(struct etcd *e, const char *key, const char *val, size_t vlen,
		    const struct etcd_op *also, size_t nalso, struct nerr *err);
/* Every key under prefix, with the store's revision. */
int etcd_list(struct etcd *e, const char *prefix, struct etcd_kv **ret, size_t *ret_n,
	      int64_t *ret_rev, struct nerr *err);

int etcd_lease_grant(struct etcd *e, long ttl_s, int64_t *ret_id, struct nerr *err);
/* One keep-alive: *ret_ttl the TTL left; -ENOENT when the lease is gone. */
int etcd_lease_keepalive(struct etcd *e, int64_t id, long *ret_ttl, struct nerr *err);

/* Endpoint i's status: the leader's member id, its own id, revision. */
struct etcd_member_status {
	bool ok;
	uint64_t member, leader;
	int64_t revision;
	char error[NERR_MSG_MAX_ETCD];
};
int etcd_status(struct etcd *e, size_t i, struct etcd_member_status *ret);

/* A watch's events, as the stream delivers them. */
enum etcd_ev_type { ETCD_EV_PUT, ETCD_EV_DELETE };
struct etcd_event {
	enum etcd_ev_type type;
	struct etcd_kv kv;	/* borrowed for the callback */
};
struct etcd_watch_cb {
	/* one response's events (n may be 0: the watch was created or a
	 * progress note); rev: the response header's revision, every event
	 * through which has been delivered (0 for the created response, which
	 * the events since the start revision follow) */
	void (*events)(void *ctx, const struct etcd_event *ev, size_t n, int64_t rev);
	bool (*stop)(void *ctx);	/* polled: true ends the watch */
	void *ctx;
};
/* Watch prefix from revision from_rev until stop says so (0), the stream
 * ends (-ECONNRESET), or the revision was compacted (-ERANGE, *ret_compact
 * set to the compact revision). Blocks; use a client of its own. */
int etcd_watch(struct etcd *e, const char *prefix, int64_t from_rev,
	       const struct etcd_watch_cb *cb, int64_t *ret_compact, struct nerr *err);

/*
 * A watch read by its caller, for one thread that reads many (a node's
 * watches of other nodes' objects): etcd_wstream_open sends the request
 * on e's connection (anew; the members in turn from the current when one
 * cannot be reached), then each time etcd_wstream_fd is readable
 * etcd_wstream_read reads what came and calls cb->events (cb->stop is the
 * caller's to look at). It returns 0 while the stream goes on, else as
 * etcd_watch: -ECONNRESET (ended), -ERANGE (compacted, *ret_compact),
 * -ECANCELED, -EPROTO. http:// members only (etcd_streams_ok: -ENOTSUP
 * otherwise). e is the stream's until etcd_wstream_close.
 */
struct etcd_wstream;
bool etcd_streams_ok(const struct etcd *e);
int etcd_wstream_open(struct etcd *e, const char *prefix, int64_t from_rev,
		      struct etcd_wstream **ret, struct nerr *err);
int etcd_wstream_fd(const struct etcd_wstream *s);
int etcd_wstream_read(struct etcd_wstream *s, const struct etcd_watch_cb *cb, int64_t *ret_compact,
		      struct nerr *err);
void etcd_wstream_close(struct etcd_wstream *s);

/*
 * The gateway's framing of a watch stream, sans I/O (fuzzed): bytes in,
 * one callback per complete JSON object. Returns 0, or -ERANGE on a
 * compaction (*compact set), -ECANCELED when the server cancelled, -EPROTO
 * on bytes that are no JSON, -E2BIG when one message exceeds 4 MiB.
 */
struct etcd_wparse {
	char *buf;
	size_t len, cap;
	int64_t compact;
};
int etcd_wparse_feed(struct etcd_wparse *p, const char *data, size_t len,
		     const struct etcd_watch_cb *cb, struct nerr *err);
void etcd_wparse_free(struct etcd_wparse *p);

/* base64 (standard alphabet, padded). Return the length written (out
 * NUL-terminated), or -EINVAL for bad input / -ENOMEM. */
int etcd_b64_decode(const char *in, size_t len, char **ret, size_t *ret_len);

#endif
