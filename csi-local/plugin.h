/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * nodefs-csi-local: what its files share.
 *
 * main.c owns the process (options, loop, gRPC server, the RPC table and
 * the worker pool); auth.c the secrets it requires; store.c the records of volumes and snapshots and their
 * files under BASE/state; backing.c what a volume is on disk (a directory
 * or an image file, loop devices, mkfs, mounts); controller.c and node.c
 * the CSI services, identity.c the Identity service and the small answers.
 * RPC handlers get a decoded request, build their reply in an arena and
 * return a gRPC status code; they never see the wire.
 */
#ifndef NODEFS_CSI_LOCAL_PLUGIN_H
#define NODEFS_CSI_LOCAL_PLUGIN_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

struct sbuf;

#include "csi.pb-c.h"

#define PLUGIN_NAME "local.csi.nodefs.io"
#define ID_MAX 128		/* names and ids we accept, in bytes (the spec's minimum) */
#define PATH_CAP 4095

enum backing { BACKING_DIR, BACKING_IMAGE };
const char *backing_to_string(enum backing b);

enum obj_state { OBJ_CREATING, OBJ_READY, OBJ_DELETING };

struct target {
	char *path;
	bool readonly;
	bool block;
};

struct vol {
	char id[24];		/* "vol-" + 16 hex */
	char *name;
	int64_t size;		/* bytes; 0 = unknown (dir without a request) */
	int64_t fs_size;	/* image: bytes the filesystem was grown to */
	enum backing backing;
	char fs_type[16];	/* image: ext4|xfs|...; "" for a block-only image */
	char *params;		/* canonical parameters ("k=v" lines, encoded) */
	char src[24];		/* content source id ("vol-..", "snap-..") or "" */
	char *mparams;		/* mutable parameters in force (as params), NULL: none */
	bool quota;		/* dir: its size is enforced by a project quota */
	enum obj_state state;
	int access_mode;	/* of the stage (0 when not staged) */
	bool stage_block;
	char *staged;		/* staging path, or NULL */
	char loopdev[24];	/* image staged: "/dev/loopN" */
	struct target *targets;
	unsigned ntargets;
	bool busy;		/* a call is working on it: others get ABORTED */
};

struct snap {
	char id[24];		/* "snap-" + 16 hex */
	char *name;
	char src[24];		/* source volume */
	int64_t size;
	enum backing backing;
	char fs_type[16];
	int64_t ctime_s;
	int32_t ctime_ns;
	enum obj_state state;
	bool busy;
};

struct plugin {
	char *base;		/* --base-dir */
	char *state_dir;	/* BASE/state */
	char *data_dir;		/* BASE/data */
	enum backing backing;
	char node_id[256];
	uint64_t max_volumes;
	char **secrets;		/* --secrets: "k=v" every call must carry; NULL: none */
	/* Records, sorted by id; under mu. */
	pthread_mutex_t mu;
	struct vol **vols;
	size_t nvols, avols;
	struct snap **snaps;
	size_t nsnaps, asnaps;
};

/* An RPC's status: a gRPC code and its message. */
struct rstat {
	int code;
	char msg[512];
};
/* Set st and return code. */
int rfail(struct rstat *st, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A bump allocator for one reply: everything freed at once. */
struct arena {
	struct arena_chunk *head;
};
void *arena_alloc(struct arena *a, size_t n);	/* zeroed; NULL on OOM */
char *arena_strdup(struct arena *a, const char *s);
void arena_free(struct arena *a);

/* An RPC handler: req is the decoded request; *ret_resp (arena-allocated)
 * the reply when it returns GRPC_OK. Returns a gRPC code; st says why. */
typedef int (*rpc_fn)(struct plugin *p, const ProtobufCMessage *req, struct arena *a,
		      ProtobufCMessage **ret_resp, struct rstat *st);

/* identity.c */
int rpc_get_plugin_info(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);
int rpc_get_plugin_capabilities(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);
int rpc_probe(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);
int rpc_controller_get_capabilities(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);
int rpc_node_get_capabilities(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);
int rpc_node_get_info(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);

/* controller.c */
int rpc_create_volume(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);
int rpc_delete_volume(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);
int rpc_validate_volume_capabilities(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);
int rpc_list_volumes(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);
int rpc_get_capacity(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);
int rpc_controller_expand_volume(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);
int rpc_create_snapshot(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);
int rpc_delete_snapshot(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);
int rpc_list_snapshots(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);
int rpc_controller_get_volume(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);
int rpc_controller_modify_volume(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);

/* node.c */
int rpc_node_stage_volume(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);
int rpc_node_unstage_volume(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);
int rpc_node_publish_volume(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);
int rpc_node_unpublish_volume(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);
int rpc_node_get_volume_stats(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);
int rpc_node_expand_volume(struct plugin *, const ProtobufCMessage *, struct arena *, ProtobufCMessage **, struct rstat *);

/* check (controller.c): the field checks every service shares. Each
 * returns GRPC_OK or INVALID_ARGUMENT naming field. */
int check_name(const char *field, const char *v, struct rstat *st);
int check_id(const char *field, const char *v, struct rstat *st);
int check_path(const char *field, const char *v, struct rstat *st);
/* RESOURCE_EXHAUSTED for a failed allocation. */
#define OOM(st) rfail(st, GRPC_RESOURCE_EXHAUSTED, "out of memory")
/* ABORTED: an operation is pending on what id (controller.c). */
int busy_on(struct rstat *st, const char *what, const char *id);
/* Volume id, found and idle, with plugin.mu held; NULL with the lock
 * released and *code set otherwise. */
struct vol *idle_vol(struct plugin *p, const char *id, int *code, struct rstat *st);
/* The paging fields of a List request (max_entries, starting_token of
 * ids with prefix), checked; room for a page's entries from index i of
 * total, at most max_entries (0 = all) pointers, their number in *ret_cap. */
int check_page(int32_t max_entries, const char *tok, const char *prefix, struct rstat *st);
void *page_entries(struct arena *a, size_t i, size_t total, int32_t max_entries, size_t *ret_cap);
/* A capability we can serve on backing b (fs_type: the volume's, or NULL
 * before it exists). INVALID_ARGUMENT with the reason otherwise. */
int check_capability(const char *field, const Csi__V1__VolumeCapability *cap, enum backing b,
		     const char *fs_type, struct rstat *st);

/* auth.c: --secrets FILE read into p->secrets (-errno, err says why). */
int auth_load(struct plugin *p, const char *path, char *err, size_t errsz);
/* GRPC_OK, or UNAUTHENTICATED when req has a secrets field that lacks one
 * of p->secrets or holds another value (st names the key, never a value). */
int auth_check(const struct plugin *p, const ProtobufCMessage *req, struct rstat *st);
/* Overwrite the secret values req carries (before it is freed). */
void auth_wipe(ProtobufCMessage *req);

/* store.c: records. Every function needs p->mu held unless it says so. */
int store_open(struct plugin *p, char *err, size_t errsz);	/* load + recover; before serving */
struct vol *store_vol(struct plugin *p, const char *id);
struct vol *store_vol_by_name(struct plugin *p, const char *name);
struct snap *store_snap(struct plugin *p, const char *id);
struct snap *store_snap_by_name(struct plugin *p, const char *name);
/* Insert a new record (takes ownership); -ENOMEM. */
int store_add_vol(struct plugin *p, struct vol *v);
int store_add_snap(struct plugin *p, struct snap *s);
/* Write the record atomically (tmp + fsync + rename). -errno. */
int store_save_vol(struct plugin *p, const struct vol *v);
int store_save_snap(struct plugin *p, const struct snap *s);
/* Remove the record's file (the object stays in memory). */
void store_unlink(struct plugin *p, const char *id);
/* Remove the record from memory and disk, and free it. */
void store_drop_vol(struct plugin *p, struct vol *v);
void store_drop_snap(struct plugin *p, struct snap *s);
/* First index whose id is >= id (paging). */
size_t store_vol_index(struct plugin *p, const char *id);
size_t store_snap_index(struct plugin *p, const char *id);
void vol_free(struct vol *v);
void snap_free(struct snap *s);
/* A fresh random id with prefix ("vol-", "snap-") into out[24]. */
void store_new_id(const char *prefix, char out[24]);
/* params.c: a record value percent-encoded (anything but
 * [A-Za-z0-9._/:,+@-] as %XX) into sb, and decoded (malloc'd, NULL on
 * OOM). */
int params_enc(struct sbuf *sb, const char *s);
char *params_dec(const char *v);
/* Canonical parameters of a map, for idempotency; malloc'd. */
char *store_params(size_t n, Csi__V1__CreateVolumeRequest__ParametersEntry **e);
/* old (canonical, may be NULL) with the n entries put over it (a key given
 * replaces its value); malloc'd, NULL on OOM. The map entries of every
 * request share the layout of ParametersEntry. */
char *store_params_merge(const char *old, size_t n, Csi__V1__CreateVolumeRequest__ParametersEntry **e);
/* Call fn for each key and value of canonical params (decoded); stops at
 * fn's nonzero return, which it returns; -ENOMEM. */
int store_params_each(const char *canon, int (*fn)(void *ud, const char *k, const char *v), void *ud);

/* backing.c: on-disk work; no lock held, the object busy. -errno + msg. */
/* Data path of a volume or snapshot: BASE/data/ID (".img" for an image). */
void backing_path(const struct plugin *p, const char *id, enum backing b, char *out, size_t outsz);
int backing_create(struct plugin *p, const struct vol *v, const char *src_path,
		   enum backing src_backing, char *err, size_t errsz);
int backing_remove(struct plugin *p, const char *id, enum backing b);
int backing_copy(const char *from, const char *to, enum backing b, char *err, size_t errsz);
int backing_grow(struct plugin *p, const struct vol *v, int64_t size, char *err, size_t errsz);
/* Stage: bind (dir) or attach + mount (image; block: attach only). The
 * loop device used goes to ret_loop[24]; *ret_grown tells whether an ext
 * filesystem smaller than its image was grown (offline, before the mount). */
int backing_stage(struct plugin *p, const struct vol *v, const char *path, bool block,
		  unsigned long msflags, const char *data, char ret_loop[24], bool *ret_grown,
		  char *err, size_t errsz);
int backing_unstage(const struct vol *v, char *err, size_t errsz);
int backing_fs_grow(const struct vol *v, const char *mnt, char *err, size_t errsz);
int backing_bind(const char *from, const char *to, bool block, bool readonly,
		 unsigned long msflags, char *err, size_t errsz);
int backing_unmount(const char *path, bool remove_dir, char *err, size_t errsz);
/* Parse mount flags into MS_* bits and a data string (unknown words). */
int backing_mount_flags(size_t n, char **flags, unsigned long *ret_flags, char *data, size_t datasz,
			char *err, size_t errsz);
/* Freeze the filesystem mounted at path (an image's) so a copy of its
 * image is consistent: an fd for backing_thaw, or -1 (not frozen; synced
 * at least). */
int backing_freeze(const char *path);
void backing_thaw(int fd);
/* Is path the root of a mount? 1, 0, -errno. */
int backing_is_mount(const char *path);
/* Is what v's record says of its stage really in place: a mount at the
 * staging path (the mount table's word, through statx) of the volume's
 * own data (the device and inode of the path against the backing
 * directory, or the loop device attached to the volume's image)? A
 * reboot, or an unmount behind the plugin's back, leaves records that name
 * mounts no longer there. STAGE_MOUNT_GONE: the staging path's mount went,
 * but what it mounted is still there (the directory; the image's loop
 * device, which other mounts may still use): backing_stage_remount makes
 * the same mount again. STAGE_GONE: nothing of it is left (an image whose
 * loop device went with a reboot), or the record says not staged. */
enum { STAGE_PRESENT, STAGE_MOUNT_GONE, STAGE_GONE };
int backing_stage_check(struct plugin *p, const struct vol *v);
int backing_stage_remount(struct plugin *p, const struct vol *v, unsigned long msflags,
			  const char *data, char *err, size_t errsz);
/* Is target t, as v's record names it, a mount of the volume's data? */
bool backing_target_present(struct plugin *p, const struct vol *v, const struct target *t);
/* Detach v's recorded loop device if it still holds v's image (a stage
 * whose mount went); else leave it alone. */
void backing_loop_release(struct plugin *p, const struct vol *v);
int backing_min_size(enum backing b, const char *fs_type, int64_t *ret);

/* quota.c: a dir volume's own capacity. quota_set gives dir (volume id's)
 * a project quota of bytes: 1 enforced, 0 the filesystem keeps no project
 * quotas (reported, not enforced), -errno with err. quota_enforced: 1 when
 * dir carries id's project and a limit. quota_usage: bytes and inodes its
 * tree uses (no symlink followed, no mount crossed); -errno. */
uint32_t quota_project(const char *id);
int quota_set(const char *dir, const char *id, int64_t bytes, char *err, size_t errsz);
int quota_enforced(const char *dir, const char *id);
int quota_usage(const char *dir, int64_t *ret_bytes, int64_t *ret_inodes);

/* ids.c: the spec's error tables put an unknown id before every other
 * field: GRPC_OK when every id req names exists (or the call is one an
 * unknown id answers OK or an empty list), INVALID_ARGUMENT for an id that
 * is empty or not an id, NOT_FOUND naming the first unknown one. Takes
 * p->mu. */
int ids_known(struct plugin *p, const ProtobufCMessage *req, struct rstat *st);

#endif
