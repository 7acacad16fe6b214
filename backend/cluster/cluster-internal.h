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

#include "cluster.h"
#include "etcd.h"
#include "kind.h"
#include "hmap.h"
#include "tree.h"

struct operation;

struct backend;

#define CLUSTER_MAX_ENDPOINTS 16

/* A remote command this node wrote, waiting for its answer. */
struct cluster_rcmd {
	struct cluster_rcmd *next;
	char id[128];
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
	char id[128];		/* the record's id: its key's last part */
	char *val;
	int64_t mod_rev;	/* as seen: the answer is conditional on it */
	bool orphan;		/* an earlier run of this node may have seen it */
	bool nonblock;		/* the writer opened its ctl O_NONBLOCK */
	struct operation *op;	/* adopted: the earlier run's operation, ending */
	/* after the run: */
	int result;
	char msg[NERR_MSG_MAX];
	struct breq rq;
	struct cluster *c;
};

/* A thread's wake-up: a leaf lock (the tree's watcher takes the
 * publisher's under the tree's change lock), never held while calling out. */
struct cwake {
	pthread_mutex_t lock;
	pthread_cond_t cond;	/* CLOCK_MONOTONIC */
	bool set;
};

struct backend;
struct cluster;
/* b's cluster (NULL: no [cluster]): kept in the kind's slot (kind_state). */
struct cluster **cluster_slot(struct backend *b);
static inline struct cluster *cluster_of(struct backend *b)
{
	return *cluster_slot(b);
}

struct cluster {
	struct backend *b;
	char *endpoints, *node, *prefix, *ca, *cert, *key;
	long ttl_s;
	bool accept_remote;
	char boot_id[64];
	char token[17];		/* this run's: in command ids */
	time_t started;
	struct bnode *dir, *nodes;

	struct cwake pub_wake, remote_wake;	/* the publisher's, the inbox thread's */

	pthread_mutex_t lock;	/* guards everything below */
	pthread_cond_t cond;	/* the watch and status threads' sleeps (CLOCK_MONOTONIC) */
	bool stopping;
	bool connected;
	time_t since;			/* of the current connected/unavailable state */
	char reason[NERR_MSG_MAX];
	int64_t lease;
	long lease_ttl;			/* as last kept alive */
	struct timespec lease_at;	/* when */
	int64_t rev_seen, rev_store;	/* the watch's, the store's last known */
	int64_t boot_rev;		/* the revision of this run's first list */
	bool watching;
	struct etcd_member_status ms[CLUSTER_MAX_ENDPOINTS];
	unsigned ms_bad[CLUSTER_MAX_ENDPOINTS];	/* failed looks in a row */
	size_t leader_ep;		/* 1 + the leader's endpoint index; 0: unknown */
	size_t nms;
	struct hmap cache;		/* key (below the prefix) -> struct centry */
	struct cluster_rcmd *rcmds;	/* waiting for answers */
	struct cluster_job *jobs, **jobs_tail;	/* inbox records to take */
	struct cluster_job *done, **done_tail;	/* run, answers to write */
	struct cluster_job *adopted;	/* earlier runs' operations still PENDING */
	unsigned jobs_running;		/* taken, not answered yet */
	bool jobs_kick;			/* jobs queued: wake the inbox thread once
					 * c->lock is dropped (cluster_unlock_kick) */
	char **deletes;			/* answered commands' keys to delete */
	size_t ndeletes;
	struct timespec deletes_since;	/* the oldest of them (CLOCK_MONOTONIC) */
	uint64_t seq;			/* command ids */
	/* metrics */
	uint64_t publishes, publish_us, publish_writes;
	uint64_t remote_ok, remote_err, remote_refused, remote_run, remote_adopted;
	pthread_t pub_thread, watch_thread, status_thread, remote_thread;
	bool threads;
	struct hmap pubs;		/* "volumes/NAME" -> struct pubrec (publisher only) */
};

struct centry {
	char *key;	/* below the prefix: "nodes/a/volumes/db" */
	char *val;
	size_t vlen;
	int64_t mod_rev;
	int64_t queued_rev;	/* this node's inbox: the revision queued to run */
};

/* cluster-view.c */
int cluster_view_init(struct cluster *c);
/* Apply a key's new value (val NULL: deleted) to the cache and the tree;
 * c->lock held. */
void cluster_view_set_locked(struct cluster *c, const char *key, const char *val, size_t vlen,
			     int64_t mod_rev);
void cluster_view_clear_locked(struct cluster *c);
/* Whether node (len bytes) holds its lease, as last seen; c->lock held. */
bool cluster_node_up_locked(struct cluster *c, const char *node, size_t len);
void *cluster_watch_main(void *arg);

/* cluster-remote.c: remote commands, both sides. */
/* A PUT of a key under inbox/, as now cached in ce (c->lock held). A
 * record to run is queued with c->jobs_kick set: the caller wakes the
 * inbox thread with cluster_unlock_kick. */
void cluster_inbox_seen_locked(struct cluster *c, struct centry *ce);
/* Drop c->lock, then wake the inbox thread if records were queued under
 * it: woken while the lock is still held, it would only block on it. */
void cluster_unlock_kick(struct cluster *c);
/* A remote write from a ctl under cluster/: -EINPROGRESS, rq completed
 * with the target's answer; -EHOSTUNREACH at once while etcd is away. */
int cluster_remote_write(struct cluster *c, const char *node, const char *path, const char *line,
			 size_t len, struct breq *rq);
/* The inbox thread (its own etcd client, so an answer never waits behind
 * a publish): run this node's commands, write their answers, send this
 * node's, time them out, delete the answered. */
void *cluster_remote_main(void *arg);
/* End every command still waiting (-ESHUTDOWN) and free the queues. */
void cluster_remote_stop(struct cluster *c);

/* cluster.c */
void cwake_init(struct cwake *w);
void cwake_destroy(struct cwake *w);
void cwake_set(struct cwake *w);
void cwake_clear(struct cwake *w);
/* Sleep until set or ms pass (0: not at all). */
void cwake_wait(struct cwake *w, uint64_t ms);
/* Wake the publisher, the inbox thread (any thread, any locks but theirs). */
void cluster_wake(struct cluster *c);
void cluster_wake_remote(struct cluster *c);
bool cluster_stopping(struct cluster *c);
/* Point e at the leader's endpoint when it is known and answers: a write
 * there is one hop shorter, and its watchers see it first. */
void cluster_prefer_leader(struct cluster *c, struct etcd *e);
void cluster_fmt_time(time_t t, char *buf, size_t len);

#endif
