/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cluster-internal: what the cluster modules share (cluster.c: the config,
 * the lease, publishing; cluster-remote.c: remote commands; cluster-view.c:
 * the cache the watches keep (every node's summary, this node's inbox,
 * another node's objects while read) and the cluster/ tree served from it;
 * cluster-res.c: the records' decoders).
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
	/* its create is in flight (the inbox thread holds it): an answer
	 * that comes meanwhile (an earlier attempt of the create committed,
	 * its reply lost) is kept here and completed once the call returns */
	bool inflight, answered;
	unsigned tries;			/* creates that timed out (an election) */
	struct timespec retry_at;	/* the next, CLOCK_MONOTONIC */
	int aerrno;
	char *amsg, *areply;
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

/* A watch on another node's objects (nodes/NODE/), open while someone
 * reads under cluster/nodes/NODE/{volumes,containers}/ and for
 * detail_idle after the last read (cluster-view.c). Under c->lock. */
struct dwatch;
struct cdetail {
	struct cdetail *next;
	struct cluster *c;
	char node[65];
	pthread_t th;			/* its thread (https:// members) */
	struct dwatch *mux;		/* or its place on the detail thread */
	bool muxed;			/* on the detail thread (no th) */
	struct timespec last_read;	/* CLOCK_MONOTONIC */
	time_t since;			/* opened (wall clock) */
	int64_t rev;			/* its objects are as of this revision */
	bool listed;			/* its first range read is in */
	bool list_failed;		/* ... or failed: a reader waits no more */
	bool watching;
	bool closing;			/* idle: its objects dropped, its thread ending */
	bool done;			/* its thread has ended: join it */
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
	uint64_t detail_idle_ms;
	bool accept_remote;
	char boot_id[64];
	char token[17];		/* this run's: in command ids */
	time_t started;
	struct bnode *dir, *nodes;

	struct cwake pub_wake, remote_wake;	/* the publisher's, the inbox thread's */

	pthread_mutex_t lock;	/* guards everything below */
	pthread_cond_t cond;	/* the watch and status threads' sleeps (CLOCK_MONOTONIC) */
	pthread_cond_t detail_cond;	/* a detail's first list is in (CLOCK_MONOTONIC) */
	bool stopping;
	bool connected;
	time_t since;			/* of the current connected/unavailable state */
	char reason[NERR_MSG_MAX];
	int64_t lease;
	long lease_ttl;			/* as last kept alive */
	struct timespec lease_at;	/* when */
	int64_t rev_seen, rev_store;	/* the summary watch's, the store's last known */
	int64_t boot_rev;		/* the revision of this run's first inbox list */
	bool watching;			/* the summary watch */
	bool inbox_watching;
	size_t sum_ep;			/* the summary watch's endpoint */
	struct timespec sum_live_at;	/* when the summary view was last known
					 * current (CLOCK_MONOTONIC; 0: never) */
	struct cdetail *details;	/* open watches on other nodes' objects */
	pthread_t detail_thread;	/* reads them all (http:// members) */
	bool detail_thread_on;
	int detail_wake;		/* its eventfd: a detail added, or stopping */
	uint64_t details_opened, watch_events;
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
	pthread_t pub_thread, watch_thread, status_thread, remote_thread, inbox_thread;
	bool threads;
	struct hmap pubs;		/* "volumes/NAME" -> struct pubrec (publisher only) */
	char *pub_summary;		/* the summary last written, less `updated` (publisher) */
	uint64_t summary_at, summary_due;	/* when written; when one held back is due */
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
/* Whether node (len bytes) holds its lease, as last seen; c->lock held. */
bool cluster_node_up_locked(struct cluster *c, const char *node, size_t len);
/* The summary view's liveness for the status thread: the member the
 * summary watch uses answered just now (c->lock held). */
void cluster_view_live_locked(struct cluster *c);
/* The cache (c->lock held), and an open detail watch of node, if any. */
bool cluster_centry_eq(const void *v, const void *k);
struct centry *cluster_cache_get_locked(struct cluster *c, const char *key);
struct cdetail *cluster_detail_find_locked(struct cluster *c, const char *node);

/* cluster-watch.c: the watches that keep the cache. */
/* The watches' threads: every node's summary (summary/), this node's
 * inbox (nodes/NODE/inbox/). */
void *cluster_watch_main(void *arg);
void *cluster_inbox_watch_main(void *arg);
/* Someone reads under cluster/nodes/NODE/{volumes,containers}/: keep its
 * detail watch open, or open one and wait for its first range read. */
void cluster_detail_touch(struct cluster *c, const char *node);
/* End and join the detail watches (c->stopping set). */
void cluster_details_stop(struct cluster *c);

static inline double cluster_ts_s(const struct timespec *t)
{
	return (double)t->tv_sec + (double)t->tv_nsec / 1e9;
}

static inline double cluster_mono_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return cluster_ts_s(&t);
}

/* cluster-res.c: decoders of peers' records (fuzzed: fuzz_cluster_records). */
#define CRES_MAX_PROF 64
#define CRES_MAX_RT 16
struct cres {
	double cpus_total, cpus_allocated, cpus_free;
	long long memory_total, memory_allocated, memory_free;
	long long containers_unlimited, volumes_bytes_provisioned;
	struct {
		char name[65];
		double cpus;
		long long memory;
	} rt[CRES_MAX_RT];
	size_t nrt;
	struct {
		char name[65];
		long long bytes;
	} prof[CRES_MAX_PROF];
	size_t nprof;
};
/* A node's summary record (summary/NODE/info or alive). */
struct cinfo {
	char version[64], boot_id[64];
	long long started, updated, volumes, containers;
	bool has_counts, has_res;
	struct cres res;
};
/* Parse a summary record (len bytes, from a peer): 0, or -EINVAL with
 * why (a record that is not what nodefs writes). Fields it lacks stay 0. */
int cluster_info_parse(const char *val, size_t len, struct cinfo *ret, char *why, size_t wlen);
/* A node's resources as the `resources` file shows them. -E2BIG/-ENOMEM. */
int cluster_res_text(const struct cres *r, struct sbuf *out);
/* cpus as the resources files show them: "2", "1.5". */
void cluster_fmt_cpus(double v, char *buf, size_t len);

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
