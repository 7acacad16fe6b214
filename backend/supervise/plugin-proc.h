/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plugin-proc: the CSI plugins nodefs starts and supervises itself
 * ([plugin NAME] command = ..., or `add NAME ENDPOINT command=...`; with
 * runtime = docker and image = as a container, plugin-container.c), and
 * the checkpoint records of plugins (STATE_DIR/plugins/NAME.json).
 *
 * A supervised plugin runs in its own process group with CSI_ENDPOINT set
 * to its endpoint; its stdout and stderr go to a FIFO nodefs reads
 * (STATE_DIR/plugins/NAME.log, opened read-write by the plugin too, so its
 * writes never meet EPIPE while nodefs is away), of which plugins/NAME/log
 * shows the last 64 KiB. One supervisor thread (`nodefs-superv`, its own
 * common/loop) watches each process through a pidfd (no SIGCHLD handler:
 * liblxc forks in the daemon too, and a waitpid(-1) would steal its
 * children), waits for the socket, has the plugin probed on the worker pool,
 * and when the plugin exits or stops answering Probe kills what is left of
 * its group and starts it again after a randomized exponential backoff
 * (retry_backoff .. retry_max). The pid, the process's start time (from
 * /proc/PID/stat) and the boot id are checkpointed at every start, so a
 * daemon restarted after a kill -9 adopts the plugin it started if it
 * answers Probe, or ends it before starting another: never two copies.
 *
 * A container's init is watched through a pidfd the same way; its exit
 * status, its signals and its removal go through the runtime seam, and its
 * record keeps the container id too, so an adoption checks that id.
 *
 * Records also keep the plugins added at run time, so they are back after
 * a restart. This module knows processes, the FIFO and the record; it does
 * not know the tree's files beyond rendering `process` and `log`, nor the
 * plugin's protocol beyond a probe through its storage handle (storage.h).
 */
#ifndef NODEFS_PLUGIN_PROC_H
#define NODEFS_PLUGIN_PROC_H

#include <stdbool.h>
#include <stddef.h>

struct backend;
struct bnode;
struct storage_health_info;
struct kind_ops;

/* The supervisor's table (no directory: its state and the plugin processes'
 * metric families); last in the registry's list. */
extern const struct kind_ops supervise_kind;
struct nerr;
struct pproc;
struct sbuf;

/* What the record of a plugin says (plugin_records_load hands these out;
 * every string borrowed for the call). */
struct plugin_def {
	const char *name;
	const char *endpoint;
	char *const *command;		/* NULL: an external plugin (unless runtime) */
	/* a container of this runtime ("docker") from image, command its argv
	 * inside (NULL: the image's); mounts: host paths bind-mounted at the
	 * same place; node: may mount, target roots rshared; privileged: every
	 * capability and device (plugin-container.c) */
	const char *runtime, *image;
	char *const *mounts;		/* NULL: none */
	bool node, privileged;
	bool keep_running;
	/* secrets: the file of CSI secrets of its volumes without a profile's
	 * (plugins/ctl add secrets=; a [plugin]'s own is read from the config) */
	const char *secrets;
	bool from_config;		/* the record only carries its process */
	bool from_record;		/* brought back from its record: not rewritten */
};

/* Whether def is a plugin nodefs starts (a command, or a container). */
static inline bool plugin_def_started(const struct plugin_def *def)
{
	return def->command || def->runtime;
}

/* A supervised plugin for def (plugin_def_started). Nothing runs until
 * pproc_start. The process of a previous run, if any, is taken from the
 * record (adopted or ended at pproc_start). node: the plugin's node,
 * borrowed until pproc_detach. Returns 0, -ENOMEM. Any thread. */
int pproc_new(struct backend *b, const struct plugin_def *def, struct bnode *node,
	      struct pproc **ret, struct nerr *err);

/* Write the plugin's record now (a plugin added at run time: before its
 * add is acknowledged). -errno with err. Any thread. */
int pproc_checkpoint(struct pproc *pp, struct nerr *err);

/* Start it (or adopt the process the record names) on the supervisor
 * thread; it is probed through the plugin's storage handle (plugin_ops,
 * plugin_handle of the node). Called once the plugin's handle is open. */
int pproc_start(struct pproc *pp, struct nerr *err);

/* The plugin was removed: its process is ended (SIGTERM, then SIGKILL after
 * a grace) and its record deleted once it is gone; the node is no longer
 * touched. Drops the caller's reference. Any thread. */
void pproc_remove(struct pproc *pp);

/* The plugin's node is freed (the daemon stops): drop the reference. */
void pproc_unref(struct pproc *pp);

/* True while a removed plugin of this name is still being ended (a new add
 * of the name waits for it). */
bool pproc_stopping(struct backend *b, const char *name);

/* The health to show instead of the connection's when there is no process
 * to talk to (it cannot be executed, it exited and waits for its restart):
 * true and *h filled (DOWN, since, why). Any thread. */
bool pproc_health(struct pproc *pp, struct storage_health_info *h);

/* Whether pp runs what def says (command, container, keep_running: a
 * reload's check). */
bool pproc_same(struct pproc *pp, const struct plugin_def *def);

/* plugins/NAME/process and plugins/NAME/log. Any thread. */
int pproc_show_process(struct pproc *pp, struct sbuf *out);
int pproc_show_log(struct pproc *pp, struct sbuf *out);

/* The records of plugins added at run time, and of supervised plugins'
 * processes: fn for each (oldest first). Corrupt ones are set aside as
 * store_load does. 0 or -errno. */
typedef void (*plugin_record_fn)(void *ctx, const struct plugin_def *def);
int plugin_records_load(struct backend *b, plugin_record_fn fn, void *ctx);
/* Write the record of an external plugin added at run time / remove a
 * plugin's record. -errno with err. */
int plugin_record_put(struct backend *b, const struct plugin_def *def, struct nerr *err);
int plugin_record_del(struct backend *b, const char *name, struct nerr *err);
/* A record left by a previous run for a plugin the config no longer
 * starts: end the process it names, if that still runs, and drop it. */
void plugin_record_retire(struct backend *b, const char *name);

/* The daemon stops (the workers are done): end every started plugin
 * without keep_running (SIGTERM, then SIGKILL after grace_ms), wait for
 * them, and stop the supervisor thread. Main thread. */
void plugins_proc_stop(struct backend *b, unsigned grace_ms);

#endif
