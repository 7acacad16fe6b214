/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * storage: the interface the backend reaches volume plugins through, in the
 * backend's own words (volume id, capability, parameters, contexts), as
 * runtimes/runtime.h is for container engines. csi/csi-storage.c implements
 * it over gRPC (csi_storage_ops); unit tests implement it with a fake.
 *
 * Must not know: protobuf-c, the generated CSI types, gRPC, sockets. This
 * header compiles on its own with libc only: csi/ includes it and nothing
 * else of backend/.
 *
 * String maps (parameters, volume context, publish context) are NULL-
 * terminated arrays of "key=value" strings, the key what comes before the
 * first '=' (what the volume checkpoints hold). In requests they are the
 * caller's; in replies they are malloc'd and the caller's to free
 * (storage_strv_free).
 *
 * Threads: every call but health(), on_health() and render_metrics() may
 * block (the plugin's answer, retries with backoff for transient failures)
 * and runs on the backend's worker pool or a FUSE thread for stats() with
 * a short deadline, never on the event loop. Calls on one handle may run
 * concurrently; the backend serialises the calls of one volume.
 *
 * Errors: -errno with a message in err (the implementation's words, e.g.
 * "NodeStageVolume: NOT_FOUND: no such volume"), and res (may be NULL)
 * says how it ended: the remote's raw code and its name for the operation,
 * whether the outcome is uncertain (deadline, unavailable, aborted,
 * cancelled: the call may have acted; the backend leaves the volume in its
 * transient state and re-drives it) and how many attempts it took. errnos:
 * ENOENT, EEXIST, EINVAL, EBUSY, ETIMEDOUT, EAGAIN, ENOSPC, EACCES,
 * EOPNOTSUPP (the plugin does not implement the call: never retried),
 * ECANCELED, ENOMEM, EIO.
 */
#ifndef NODEFS_STORAGE_H
#define NODEFS_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

struct loop;
struct nerr;
struct sbuf;

/* Access modes in the order the config lists them (config_access_modes). */
enum storage_mode {
	STORAGE_MODE_UNKNOWN = 0,
	STORAGE_MODE_SINGLE_NODE_WRITER,
	STORAGE_MODE_SINGLE_NODE_READER_ONLY,
	STORAGE_MODE_MULTI_NODE_READER_ONLY,
	STORAGE_MODE_MULTI_NODE_SINGLE_WRITER,
	STORAGE_MODE_MULTI_NODE_MULTI_WRITER,
	STORAGE_MODE_SINGLE_NODE_SINGLE_WRITER,
	STORAGE_MODE_SINGLE_NODE_MULTI_WRITER,
};

enum storage_access { STORAGE_ACCESS_MOUNT, STORAGE_ACCESS_BLOCK };

/* How a volume is used: what CreateVolume and every node call are told. */
struct storage_cap {
	enum storage_mode mode;		/* UNKNOWN: single-node-writer */
	enum storage_access access;
	const char *fs_type;		/* mount: NULL or "" for the plugin's default */
	char *const *mount_flags;	/* mount: NULL-terminated, may be NULL */
};

/* What a call names of a volume; each call reads the fields it lists. */
struct storage_req {
	const char *name;		/* create: the idempotency name */
	const char *id;			/* the plugin's volume id */
	struct storage_cap cap;
	char *const *params;		/* create, validate, capacity: "k=v" */
	char *const *vctx;		/* volume context: controller publish, stage, publish */
	char *const *pctx;		/* publish context: stage, publish */
	const char *node_id;		/* controller publish, unpublish */
	const char *staging;		/* stage, unstage; publish, node expand, stats: "" when not staged */
	const char *target;		/* publish, unpublish */
	const char *path;		/* node expand, stats: where the volume is on this node */
	bool readonly;			/* controller publish, publish */
	int64_t bytes;			/* create (0: no range), expands: required bytes */
	/* create: the content source, a plugin's snapshot id or volume id
	 * (at most one; NULL: an empty volume); snapshot_create: the source
	 * volume is id */
	const char *from_snapshot;
	const char *from_volume;
	char *const *mparams;		/* create, modify: mutable parameters "k=v" */
	/* snapshot_list: nonzero, one attempt with this deadline (a read on
	 * a FUSE thread); 0, the handle's timeout and retries */
	uint64_t timeout_ms;
	/* "k=v", may be NULL: sent in the secrets field of every call the CSI
	 * spec gives one (create, delete, validate, controller publish and
	 * unpublish, controller expand, stage, publish, node expand); never
	 * logged, never put in a message */
	char *const *secrets;
};

/* How a call ended (filled on success and on failure). */
struct storage_result {
	const char *call;		/* the plugin's name of the call, "CreateVolume" (static) */
	int code;			/* the remote's raw status, 0 OK */
	const char *code_name;		/* its name, "DEADLINE_EXCEEDED" (static) */
	bool uncertain;			/* the outcome is unknown: re-drive it */
	unsigned attempts;		/* attempts made (>= 1 once sent) */
};

/* Told after each failed attempt of a call that is to be retried, on the
 * caller's thread, with the result so far: every call that takes a
 * struct storage_result takes one (NULL: not told) and its context. */
typedef void (*storage_retry_fn)(void *ctx, const struct storage_result *so_far);

/* A volume the plugin made or lists. Free with storage_volume_clear. */
struct storage_volume {
	char *id;
	int64_t capacity;		/* bytes, 0: unknown */
	char **vctx;			/* "k=v", NULL-terminated, never NULL */
};

/* One page of the plugin's volumes. Free with storage_page_clear. */
struct storage_page {
	struct storage_volume *v;
	size_t n;
	char *next_token;		/* NULL: the last page */
};

/* Bytes and inodes {used, available, total}, -1 where not reported; the
 * volume's condition where the plugin reports one (VOLUME_CONDITION). */
struct storage_stats {
	long long bytes[3];
	long long inodes[3];
	bool has_condition;
	bool abnormal;
	char condition[256];		/* the plugin's message */
};

/* A snapshot the plugin made or lists. Free with storage_snapshot_clear. */
struct storage_snapshot {
	char *id;
	char *source_id;		/* the volume it was taken of */
	int64_t size;			/* bytes, 0: unknown */
	int64_t created_s;		/* creation time, unix seconds; 0: unknown */
	int32_t created_ns;
	bool ready;			/* ready_to_use */
};

/* One page of the plugin's snapshots. Free with storage_snap_page_clear. */
struct storage_snap_page {
	struct storage_snapshot *s;
	size_t n;
	char *next_token;		/* NULL: the last page */
};

/* What ControllerGetVolume says of a volume. */
struct storage_volume_status {
	struct storage_volume v;
	bool has_condition;
	bool abnormal;
	char condition[256];
};

/* Capabilities as bit sets: bit N set when the plugin reports value N, in
 * the numbering of the CSI spec (the plugin's files show the names). */
struct storage_caps {
	uint32_t plugin;		/* STORAGE_PLUGIN_* */
	uint32_t expansion;		/* 1 ONLINE, 2 OFFLINE */
	uint32_t controller;		/* STORAGE_CTL_*; 0 without a controller service */
	uint32_t node;			/* STORAGE_NODE_* */
};
#define STORAGE_CAP(set, bit) ((((set) >> (bit)) & 1u) != 0)
enum {
	STORAGE_PLUGIN_CONTROLLER_SERVICE = 1,
};
enum {
	STORAGE_CTL_CREATE_DELETE_VOLUME = 1,
	STORAGE_CTL_PUBLISH_UNPUBLISH_VOLUME = 2,
	STORAGE_CTL_LIST_VOLUMES = 3,
	STORAGE_CTL_GET_CAPACITY = 4,
	STORAGE_CTL_CREATE_DELETE_SNAPSHOT = 5,
	STORAGE_CTL_LIST_SNAPSHOTS = 6,
	STORAGE_CTL_CLONE_VOLUME = 7,
	STORAGE_CTL_EXPAND_VOLUME = 9,
	STORAGE_CTL_VOLUME_CONDITION = 11,
	STORAGE_CTL_GET_VOLUME = 12,
	STORAGE_CTL_MODIFY_VOLUME = 14,
};
enum {
	STORAGE_NODE_STAGE_UNSTAGE_VOLUME = 1,
	STORAGE_NODE_GET_VOLUME_STATS = 2,
	STORAGE_NODE_EXPAND_VOLUME = 3,
};

/* DOWN: not reachable; NOT_READY: reachable, not ready; READY. */
enum storage_health { STORAGE_HEALTH_DOWN, STORAGE_HEALTH_NOT_READY, STORAGE_HEALTH_READY };

struct storage_health_info {
	enum storage_health health;
	time_t since;			/* wall clock of the last change */
	char reason[256];		/* why, "" when READY */
};

/* Told of every change of health; see on_health. */
typedef void (*storage_health_fn)(void *userdata);

/* A plugin as the config names it. */
struct storage_config {
	const char *name;
	const char *endpoint;		/* "unix:///abs/path.sock" */
	uint64_t retry_backoff_ms;	/* 0: the implementation's default */
	uint64_t retry_max_ms;
	uint64_t timeout_ms;		/* per attempt; 0: default */
};

struct storage_ops {
	const char *name;

	/* Make a handle; connecting starts at once and an absent plugin is
	 * not an error (health says DOWN). -EINVAL bad endpoint, -ENOMEM.
	 * The loop must be running. */
	int (*open)(struct loop *loop, const struct storage_config *cfg, void **ret_h,
		    struct nerr *err);
	/* Blocked calls end (-ECANCELED), then the handle is freed. NULL-safe. */
	void (*close)(void *h);
	/* Calls in flight end now (-ECANCELED; the plugin is told) and later
	 * ones fail at once; the handle stays valid until close. For a stop
	 * whose grace ran out. Any thread but the loop's. */
	void (*cancel)(void *h);

	/* Any thread, never blocks. */
	void (*health)(void *h, struct storage_health_info *ret);
	/* fn runs on whichever thread saw the change, with locks of the
	 * handle held: it only takes note. NULL stops it. */
	void (*on_health)(void *h, storage_health_fn fn, void *userdata);

	/* Identity. *ret_* strings are malloc'd, the caller's. */
	int (*probe)(void *h, bool *ret_ready, struct nerr *err);
	int (*plugin_info)(void *h, char **ret_name, char **ret_vendor_version, struct nerr *err);
	int (*capabilities)(void *h, struct storage_caps *ret, struct nerr *err);
	int (*node_info)(void *h, char **ret_node_id, struct nerr *err);

	/* Controller. create: name, cap, params, bytes; *ret filled on
	 * success (an answer without a volume id is -EIO). delete: id (a
	 * missing volume is success). validate: id, cap, params; -EINVAL when
	 * the plugin does not confirm them. controller_publish: id, node_id,
	 * cap, readonly, vctx; *ret_pctx the publish context. list: one page
	 * from token (NULL: the first). capacity: cap, params. */
	int (*create)(void *h, const struct storage_req *rq, struct storage_volume *ret,
		      storage_retry_fn on_retry, void *on_retry_ctx, struct storage_result *res,
		      struct nerr *err);
	int (*delete)(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
		      void *on_retry_ctx, struct storage_result *res, struct nerr *err);
	int (*validate)(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
			void *on_retry_ctx, struct storage_result *res, struct nerr *err);
	int (*controller_publish)(void *h, const struct storage_req *rq, char ***ret_pctx,
				  storage_retry_fn on_retry, void *on_retry_ctx,
				  struct storage_result *res, struct nerr *err);
	int (*controller_unpublish)(void *h, const struct storage_req *rq,
				    storage_retry_fn on_retry, void *on_retry_ctx,
				    struct storage_result *res, struct nerr *err);
	int (*list)(void *h, const char *token, struct storage_page *ret, storage_retry_fn on_retry,
		    void *on_retry_ctx, struct storage_result *res, struct nerr *err);
	int (*capacity)(void *h, const struct storage_req *rq, int64_t *ret_bytes,
			storage_retry_fn on_retry, void *on_retry_ctx, struct storage_result *res,
			struct nerr *err);
	/* id, bytes, cap; *ret_capacity 0 when not reported. */
	int (*controller_expand)(void *h, const struct storage_req *rq, int64_t *ret_capacity,
				 bool *ret_node_needed, storage_retry_fn on_retry,
				 void *on_retry_ctx, struct storage_result *res, struct nerr *err);

	/* Snapshots and live changes (NULL in an implementation without
	 * them: the backend answers ENOTSUP). snapshot_create: name (the
	 * idempotency name), id (the source volume's), params; *ret filled
	 * (no snapshot id is -EIO). snapshot_delete: id (the snapshot's; a
	 * missing one is success). snapshot_list: one page from token, of
	 * source volume rq->id when set. modify: id, mparams. get_volume:
	 * id; one attempt with a 5 s deadline (read on a FUSE thread). */
	int (*snapshot_create)(void *h, const struct storage_req *rq, struct storage_snapshot *ret,
			       storage_retry_fn on_retry, void *on_retry_ctx,
			       struct storage_result *res, struct nerr *err);
	int (*snapshot_delete)(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
			       void *on_retry_ctx, struct storage_result *res, struct nerr *err);
	int (*snapshot_list)(void *h, const struct storage_req *rq, const char *token,
			     struct storage_snap_page *ret, storage_retry_fn on_retry,
			     void *on_retry_ctx, struct storage_result *res, struct nerr *err);
	int (*modify)(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
		      void *on_retry_ctx, struct storage_result *res, struct nerr *err);
	int (*get_volume)(void *h, const struct storage_req *rq, struct storage_volume_status *ret,
			  storage_retry_fn on_retry, void *on_retry_ctx,
			  struct storage_result *res, struct nerr *err);

	/* Node. stage: id, staging, cap, pctx, vctx. unstage: id, staging.
	 * publish: id, staging, target, cap, readonly, pctx, vctx. unpublish:
	 * id, target. node_expand: id, path, staging, bytes, cap. stats: id,
	 * path, staging; one attempt with a timeout_ms deadline (a read must
	 * not hang on a plugin). */
	int (*stage)(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
		     void *on_retry_ctx, struct storage_result *res, struct nerr *err);
	int (*unstage)(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
		       void *on_retry_ctx, struct storage_result *res, struct nerr *err);
	int (*publish)(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
		       void *on_retry_ctx, struct storage_result *res, struct nerr *err);
	int (*unpublish)(void *h, const struct storage_req *rq, storage_retry_fn on_retry,
			 void *on_retry_ctx, struct storage_result *res, struct nerr *err);
	int (*node_expand)(void *h, const struct storage_req *rq, int64_t *ret_capacity,
			   storage_retry_fn on_retry, void *on_retry_ctx,
			   struct storage_result *res, struct nerr *err);
	int (*stats)(void *h, const struct storage_req *rq, uint64_t timeout_ms,
		     struct storage_stats *ret, storage_retry_fn on_retry, void *on_retry_ctx,
		     struct storage_result *res, struct nerr *err);

	/* The Prometheus text of the handles' call metrics (labelled with
	 * names[i]); a NULL handle is skipped. May be NULL: no metrics. */
	int (*render_metrics)(void *const *h, const char *const *names, size_t n,
			      struct sbuf *out);
};

/* csi/csi-storage.c: CSI v1 over gRPC. */
extern const struct storage_ops csi_storage_ops;

static inline void storage_strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static inline void storage_volume_clear(struct storage_volume *v)
{
	free(v->id);
	storage_strv_free(v->vctx);
	v->id = NULL;
	v->vctx = NULL;
}

static inline void storage_page_clear(struct storage_page *p)
{
	for (size_t i = 0; i < p->n; i++)
		storage_volume_clear(&p->v[i]);
	free(p->v);
	free(p->next_token);
	p->v = NULL;
	p->n = 0;
	p->next_token = NULL;
}

static inline void storage_snapshot_clear(struct storage_snapshot *s)
{
	free(s->id);
	free(s->source_id);
	s->id = s->source_id = NULL;
}

static inline void storage_snap_page_clear(struct storage_snap_page *p)
{
	for (size_t i = 0; i < p->n; i++)
		storage_snapshot_clear(&p->s[i]);
	free(p->s);
	free(p->next_token);
	p->s = NULL;
	p->n = 0;
	p->next_token = NULL;
}

#endif
