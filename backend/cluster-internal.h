/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cluster-internal: what the cluster modules share (cluster.c: the config,
 * the lease, publishing and taking remote commands; cluster-view.c: the
 * cache of the prefix from one Watch and the cluster/ tree served from it).
 * fs/ never sees this: cluster/ is tree files like every other object.
 */
#ifndef NODEFS_CLUSTER_INTERNAL_H
#define NODEFS_CLUSTER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "etcd.h"
#include "hmap.h"
#include "tree.h"

struct backend;

#define CLUSTER_MAX_ENDPOINTS 16

/* A remote command this node wrote, waiting for its answer. */
struct cluster_rcmd {
	struct cluster_rcmd *next;
	char id[48];
	char key[512];
	char *record;		/* what to create (owned) */
	struct breq *rq;
	struct timespec deadline;	/* CLOCK_MONOTONIC */
	bool sent;
};

/* A remote command for this node, seen in the inbox. */
struct cluster_job {
	struct cluster_job *next;
	char key[512];
	char *val;
	int64_t mod_rev;
	/* after the run: */
	int result;
	char msg[NERR_MSG_MAX];
	struct sbuf reply;
	struct breq rq;
	struct cluster *c;
};

struct cluster {
	struct backend *b;
	char *endpoints, *node, *prefix, *ca, *cert, *key;
	long ttl_s;
	bool accept_remote;
	char boot_id[64];
	time_t started;
	struct bnode *dir, *nodes;

	pthread_mutex_t lock;	/* guards everything below */
	pthread_cond_t cond;	/* the publisher's wake-up (CLOCK_MONOTONIC) */
	bool stopping;
	bool connected;
	time_t since;			/* of the current connected/unavailable state */
	char reason[NERR_MSG_MAX];
	int64_t lease;
	long lease_ttl;			/* as last kept alive */
	struct timespec lease_at;	/* when */
	int64_t rev_seen, rev_store;	/* the watch's, the store's last known */
	bool watching;
	struct etcd_member_status ms[CLUSTER_MAX_ENDPOINTS];
	size_t nms;
	struct hmap cache;		/* key (below the prefix) -> struct centry */
	struct cluster_rcmd *rcmds;	/* waiting for answers */
	struct cluster_job *jobs, **jobs_tail;	/* inbox records to take */
	struct cluster_job *done, **done_tail;	/* run, answers to write */
	char **deletes;			/* answered commands' keys to delete */
	size_t ndeletes;
	uint64_t seq;			/* command ids */
	/* metrics */
	uint64_t publishes, publish_us, remote_ok, remote_err, remote_refused, remote_run;
	pthread_t pub_thread, watch_thread;
	bool threads;
	struct hmap pubs;		/* "volumes/NAME" -> struct pubrec (publisher only) */
};

struct centry {
	char *key;	/* below the prefix: "nodes/a/volumes/db" */
	char *val;
	size_t vlen;
	int64_t mod_rev;
};

/* cluster-view.c */
int cluster_view_init(struct cluster *c);
/* Apply a key's new value (val NULL: deleted) to the cache and the tree;
 * c->lock held. */
void cluster_view_set_locked(struct cluster *c, const char *key, const char *val, size_t vlen,
			     int64_t mod_rev);
void cluster_view_clear_locked(struct cluster *c);
void *cluster_watch_main(void *arg);
/* cluster.c: a PUT of a key under inbox/ (c->lock held). */
void cluster_inbox_seen_locked(struct cluster *c, const char *key, const char *val, size_t vlen,
			       int64_t mod_rev);
/* A remote write from a ctl under cluster/ (cluster.c). */
int cluster_remote_write(struct cluster *c, const char *node, const char *path, const char *line,
			 size_t len, struct breq *rq);
void cluster_wake_locked(struct cluster *c);
void cluster_fmt_time(time_t t, char *buf, size_t len);

#endif
