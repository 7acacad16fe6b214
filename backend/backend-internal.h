/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* backend-internal: what the backend's modules share; never seen by fs/. */
#ifndef NODEFS_BACKEND_INTERNAL_H
#define NODEFS_BACKEND_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include <jansson.h>

#include "backend.h"
#include "bctl.h"
#include "config.h"
#include "intern.h"
#include "loop.h"
#include "events.h"
#include "runtime.h"
#include "storage.h"
#include "tree.h"
#include "work.h"

enum backend_state { BACKEND_RECOVERING, BACKEND_READY, BACKEND_STOPPING };

/* A driver handle, shared by the calls made on it: a reload of the
 * runtime's section puts a new one in place, and the old one is closed
 * once the last call on it has finished (engine_put). */
struct engine_ref {
	atomic_uint refs;
	const struct runtime_ops *ops;
	void *h;
};

/* A container engine as the tree shows it (runtimes/NAME/). */
struct engine {
	struct backend *b;
	const struct runtime_ops *ops;
	struct bnode *node;
	pthread_mutex_t lock;	/* guards the fields below */
	struct engine_ref *cur;	/* the handle calls take; NULL when open failed */
	const struct config *cfg;	/* whose [runtime] section cur was opened with */
	rt_event_fn watch_fn;	/* who is told of the engine's events (engine_watch) */
	void *watch_ctx;
	bool healthy;
	char reason[256];	/* why unhealthy */
	char version[128];
	time_t since;
};

struct kind_ops;
struct pool;

struct backend {
	struct config *cfg;
	struct store *store;	/* store.h: the state dir's records and journal */
	/* instance.h: this instance's id (STATE_DIR/instance-id) and the
	 * prefix of the engine-side names it makes (name_prefix) */
	char instance[33];
	char name_prefix[40];
	struct uncertain *uncertain;	/* uncertain.c: creates a crash left unknown */
	/* The kinds of object, in the root directory's order (kind.h): all
	 * the hub knows of them. */
	const struct kind_ops *const *kinds;
	size_t nkinds;
	struct bnode *root, *metrics, *plugins, *profiles, *runtimes;
	int (*metrics_hook)(void *ctx, struct sbuf *out);	/* backend_set_metrics_hook */
	void *metrics_hook_ctx;
	struct bnode *volumes, *operations, *containers;
	struct bnode *cluster_dir;	/* cluster/ with [cluster] only (cluster.c) */
	struct cluster *cluster;
	struct events *events;
	struct work_pool *work;
	struct loop *loop;		/* the CSI connections; its own thread */
	/* What plugins are reached through: &csi_storage_ops unless set
	 * (before backend_start) to another implementation, e.g. a fake. */
	const struct storage_ops *storage;
	pthread_t loop_thread;
	bool loop_running;
	struct engine *engines;
	size_t nengines;
	atomic_int state;
	atomic_ullong next_op;		/* the next operation id */
	atomic_uint bad_records;	/* checkpoints that could not be read */
	atomic_ullong freed;		/* objects removed: the monitor trims the heap */
	/* names thousands of objects repeat (operation types, volumes'
	 * plugins, profiles, access modes, fs types), one copy each */
	struct intern names;
	/* Operations and their texts, in a region of their own: the kept
	 * ones are made among the volumes a mass destroy frees, and in
	 * malloc's heap would hold a page of it each (common/pool.c) */
	struct pool *op_pool;
	/* Ended operations, oldest end first, each holding a node reference:
	 * ops_trim drops from the front, so keeping operations_keep of them
	 * costs the same at 10 or 100,000 operations. */
	pthread_mutex_t ended_lock;
	struct bnode **ended;		/* a ring of ended_cap slots */
	size_t ended_head, ended_len, ended_cap;
	bool rebooted;			/* the boot id changed since the last run */
	struct timespec started_mono;
	time_t started;

	pthread_t monitor;	/* engine health */
	bool monitor_running;
	pthread_mutex_t mlock;
	pthread_cond_t mcond;
	bool stopping;
	bool plugins_poked;	/* a plugin's health changed: tick the plugins now */
	struct plugin_sup *sup;	/* plugin-proc.c: started plugins; made at first use (mlock) */

	/* Recovery runs on its own thread while fs serves (status says
	 * RECOVERING); commands wait for it in the parked list. dlock guards
	 * the list, recovered and the RECOVERING -> READY/STOPPING moves. */
	pthread_t recovery;
	bool recovery_running;
	int lock_fd;		/* STATE_DIR/lock, flock'ed while we run (-1: none) */
	pthread_mutex_t dlock;
	pthread_cond_t dcond;		/* recovered, or stopping */
	bool recovered;			/* the recovery thread is done */
	atomic_bool failed;		/* recovery failed: the daemon stops */
	atomic_ullong records, records_base;	/* backend_progress */
	uint64_t work_seen;		/* backend_moving */
	/* reload.c: the config whose profiles are current (NULL: cfg), and
	 * every config a reload brought, kept until backend_free */
	_Atomic(struct config *) pcfg;
	struct config **old_cfgs;
	size_t nold_cfgs;
	struct parked *parked, **parked_tail;
	void (*failed_hook)(void *ctx);
	void *failed_hook_ctx;
};

/* The backend a node belongs to: every node's type keeps it reachable. */
static inline struct backend *node_backend(struct bnode *n)
{
	return n->owner;
}

const char *backend_state_to_string(enum backend_state s);

/*
 * Commands wait for recovery (admit.c): a command that acts (a ctl line
 * that parsed and matched, a mkdir, an rmdir) asks first. 0: act now
 * (READY). -EINPROGRESS: RECOVERING, the command is parked and run again
 * once the daemon is READY (rq completes then, or with -ESHUTDOWN if it
 * stops first). -EAGAIN: RECOVERING and rq is nonblock. -ESHUTDOWN:
 * STOPPING. rq->err says why on failure. Any thread. A parked ctl line is
 * run again by redo(t, n, line, len, rq), the dispatcher that asked.
 */
typedef int (*backend_redo_fn)(const struct bctl_table *t, struct bnode *n, const char *line,
			       size_t len, struct breq *rq);
int backend_admit_ctl(const struct bctl_table *t, struct bnode *n, const char *line, size_t len,
		      struct breq *rq, backend_redo_fn redo);
int backend_admit_mkdir(struct bnode *dir, const char *name, struct breq *rq);
int backend_admit_rmdir(struct bnode *dir, struct bnode *child, struct breq *rq);
/* The parked commands: taken (dlock held) when recovery ends or the daemon
 * stops, then run in the order they came (run) or answered -ESHUTDOWN. */
struct parked;
struct parked *backend_parked_take_locked(struct backend *b);
void backend_parked_finish(struct parked *p, bool run);

int volumes_render_metrics(struct backend *b, struct sbuf *out);
struct engine *engine_find(struct backend *b, const char *name);
/* 0 when e is healthy and open; -EHOSTDOWN with the reason otherwise. */
int engine_ready(struct engine *e, struct nerr *err);
/* The handle to make a call on, held until engine_put: NULL when the
 * driver failed to open. Any thread; never blocks but on e->lock. */
struct engine_ref *engine_hold(struct engine *e);
/* Whether e's driver opened (it has a handle), healthy or not. */
bool engine_opened(struct engine *e);
/* engine_ready, then the handle held into *ret (the caller puts it). */
int engine_take(struct engine *e, struct engine_ref **ret, struct nerr *err);
/* NULL-safe; the last put of a handle a reload replaced closes it. */
void engine_put(struct engine_ref *r);
static inline void engine_putp(struct engine_ref **r)
{
	engine_put(*r);
}
#define _cleanup_engine_ __attribute__((cleanup(engine_putp)))
/* Deliver e's events to fn from now on, and from every handle a reload
 * puts in place; -errno from the driver's watch. */
int engine_watch(struct engine *e, rt_event_fn fn, void *ctx, struct nerr *err);
/* A reload: e's [runtime] section as nc has it, applied (1), unchanged
 * (0), or refused with the reason in err, the old handle kept (-errno: a
 * bad value, a driver that does not open, or a key that says where the
 * containers live changed while e has some: in_use). Calls in flight
 * finish on the old handle. */
int engine_reload(struct engine *e, const struct config *nc, bool in_use, struct nerr *err);
/* Whether any container of b's runs on e (container-sync.c). */
bool containers_on(struct backend *b, struct engine *e);

/* The collections' types and their set-up, one module each. */
extern const struct btype plugins_type;		/* plugin.c */
extern const struct btype profiles_type;	/* profile.c */
extern const struct btype runtimes_type;	/* engines.c */
extern const struct btype volumes_type;		/* volume-ctl.c */

/* profiles/NAME/ for p (which must outlive the node). -errno with err. */
int profile_add(struct backend *b, struct config_profile *p, struct nerr *err);
/* The config whose [profile] sections are current: b->cfg, or the last
 * reload's (reload.c). Borrowed; valid until backend_free. */
const struct config *backend_profiles(struct backend *b);
/* Free the configs reloads replaced (backend_free, after the tree). */
void backend_reload_free(struct backend *b);

/* How many containers (any state, until destroyed) mount volume vol with
 * volume=, their names comma-separated in buf (container.c). */
size_t containers_using_volume(struct backend *b, const char *vol, char *buf, size_t len);

int plugins_init(struct backend *b, struct nerr *err);
void plugins_stop(struct backend *b);
/* A stop's grace is over: every plugin's calls in flight end now (the
 * handles stay until plugins_stop). */
void plugins_cancel(struct backend *b);
int plugins_start(struct backend *b, struct nerr *err);
void plugins_tick(struct backend *b);
/* Wake the monitor to run plugins_tick now (any thread, no lock held but
 * maybe a CSI connection's: it only sets a flag and signals). */
void engines_poke_plugins(struct backend *b);
int plugins_render_metrics(struct backend *b, struct sbuf *out);

/* plugins/ctl remove, and a reload's: take plugin name out unless a
 * profile or a volume uses it (-EBUSY naming it), -ENOENT. Any thread. */
int plugin_remove(struct backend *b, const char *name, struct nerr *err);
/* A reload's: add the plugin of section cp, or (replace) put it in place
 * of the running one of its name, whose process is ended first (waits up
 * to 10 s for it: -EBUSY). -errno with err. Not a FUSE thread. */
struct config_plugin;
int plugin_from_config(struct backend *b, const struct config_plugin *cp, bool replace,
		       struct nerr *err);

/* Whether running plugin p is what section cp says (endpoint, command,
 * keep_running); *ret_from_config: p came from the config, not from
 * plugins/ctl. Any thread. */
struct plugin;
bool plugin_matches(struct plugin *p, const struct config_plugin *cp, bool *ret_from_config);

/* A plugin by name (its node referenced in *ret_node), or NULL. */
struct plugin *plugin_get(struct backend *b, const char *name, struct bnode **ret_node);
/* The plugin's capabilities, fetched once (a call the first time). */
int plugin_caps(struct plugin *p, struct storage_caps *ret, struct nerr *err);
/* The capabilities as last fetched, without a call: for checks on FUSE
 * threads, which must not wait on a plugin. false when never fetched. */
bool plugin_caps_cached(struct plugin *p, struct storage_caps *ret);
int plugin_node_id(struct plugin *p, char *buf, size_t len, struct nerr *err);
/* How to call the plugin: its storage implementation and handle (NULL
 * handle before plugins_start and after plugins_stop). */
const struct storage_ops *plugin_ops(struct plugin *p);
void *plugin_handle(struct plugin *p);
const char *plugin_name(struct plugin *p);
/* The secrets file plugin `name` was added with (plugins/ctl add
 * secrets=), malloc'd, or NULL (none, no such plugin, or OOM). Any thread. */
char *plugin_secrets_dup(struct backend *b, const char *name);
/* A volume of plugin `name` was made, adopted or deleted: its lists are
 * refreshed when next read. Any thread. */
void plugin_lists_stale(struct backend *b, const char *name);

/* volume*.c: helpers the plugin module shares */
bool volume_name_by_id(struct backend *b, const char *plugin, const char *id, char *buf, size_t len);
bool volume_uses_plugin(struct backend *b, const char *plugin, char *buf, size_t len);
int volumes_recover(struct backend *b, struct nerr *err);
/* Measure the plugin's volumes on this node for the metrics (a worker). */
void volumes_refresh_stats(struct backend *b, const char *plugin);
/* The plugin's volumes by id (NULL on OOM). */
struct volume_index;
struct volume_index *volume_index_new(struct backend *b, const char *plugin);
const char *volume_index_find(const struct volume_index *ix, const char *id);
void volume_index_free(struct volume_index *ix);
/* profile.c: a storage capability from a config access mode name (NULL
 * or unknown: single-node-writer), an fs type and mount flags (borrowed). */
struct storage_cap storage_cap_of(const char *access_mode, const char *fs_type,
				  char *const *mount_flags);
int profiles_init(struct backend *b, struct nerr *err);

/* volume.c: where a container mounts volume NAME from (its publish
 * target); -ENOENT no such volume, -EBUSY not published. */
int volume_mount_source(struct backend *b, const char *name, char **ret_path, struct nerr *err);

/* Recovery: drive a PENDING operation of this module to an end (0: taken,
 * op->claimed set), or <0 for the caller to drop it. */
struct operation;
int volume_resume(struct backend *b, struct operation *op);

/* Shared by the object modules (backend.c). */
/* Render j (consumed; NULL means out of memory) as indented JSON and a newline:
 * what every info.json shows. */
int show_json(struct sbuf *out, json_t *j);
/* t as 2026-11-29T17:55:07Z; "" for 0. */
void fmt_time(time_t t, char *buf, size_t len);
/* The command line of cmd, for the operation record (cut at len). */
char *cmdline_of(const struct ctl_cmd *cmd, char *buf, size_t len);

/* metrics.c: the Prometheus text of metrics/nodefs.prom. */
int metrics_render(struct backend *b, struct sbuf *out);

#endif
