/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plugin-internal: what plugin.c (the objects, their files and commands)
 * and plugin-refresh.c (the cache of what needs a call) share: the plugin
 * object itself. Nothing outside these two (and plugin-kind.c) includes it.
 * Must not know: volumes (links.h gives their index and stats), containers,
 * how a plugin's process is run (supervise/).
 */
#ifndef NODEFS_PLUGIN_INTERNAL_H
#define NODEFS_PLUGIN_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "backend-internal.h"
#include "engines.h"
#include "links.h"
#include "plugins.h"
#include "profiles.h"
#include "nerr.h"
#include "sbuf.h"

/* A volume of the plugin's list, as last fetched. */
struct plugin_vol {
	char *id;
	int64_t capacity;
};

struct plugin {
	struct backend *b;
	struct bnode *node;		/* borrowed */
	char *name;
	char *endpoint;
	char *secrets;			/* add's secrets=, or NULL */
	bool from_config;
	const struct storage_ops *ops;
	void *h;			/* storage handle; NULL until plugins_start */
	struct pproc *proc;		/* started by nodefs (command); else NULL */

	pthread_mutex_t lock;		/* the cache below */
	bool have_info, have_caps;
	char info_name[256], info_version[256];
	struct storage_caps caps;
	char node_id[256];
	struct sbuf capacity;		/* the capacity file */
	struct sbuf volumes;		/* the volumes file's own lines (error:, unsupported:) */
	struct plugin_vol *vols;	/* the plugin's list; known or not is told at a read */
	size_t nvols;
	time_t refreshed;
	bool refreshing;
	bool have_lists;		/* capacity and volumes fetched once */
	bool lists_stale;		/* a volume changed since the fetch */
	enum storage_health last_health;
	char refresh_error[NERR_MSG_MAX];
};

static inline struct plugin *pof(struct bnode *n)
{
	return n->priv;
}

const char *plugin_health_name(enum storage_health h);

/* --- plugin-refresh.c --- */
/* Queue a refresh of p's cache on the worker pool, unless one is queued. */
void plugin_refresh_soon(struct plugin *p);
/* A read of capacity or volumes: refresh (in the background) when a
 * volume changed since the lists were fetched. */
void plugin_refresh_if_stale(struct plugin *p);
/* One of p's cached lists (src), or why it is not there yet. */
int plugin_show_cached(struct plugin *p, struct sbuf *src, struct sbuf *out);
/* The volumes file: the fetched list, each volume told known or
 * discovered by what nodefs holds at the read. */
int plugin_show_volumes(struct plugin *p, struct sbuf *out);
void plugin_vols_free(struct plugin_vol *v, size_t n);

/* The kind's hooks (plugin-kind.c's table): plugin.c, but plugins_tick
 * (plugin-refresh.c). */
int plugins_init(struct backend *b, struct nerr *err);
/* The plugins' reload hooks (plugin-reload.c, kind.h): the [plugin]
 * sections added and changed; then the ones nc no longer has removed. */
int plugins_reload(struct backend *b, struct config *nc, struct reload_tally *t,
		   struct nerr *err);
void plugins_reload_finish(struct backend *b, struct config *nc, struct reload_tally *t);
void plugins_stop(struct backend *b);
/* A stop's grace is over: every plugin's calls in flight end now (the
 * handles stay until plugins_stop). */
void plugins_cancel(struct backend *b);
int plugins_start(struct backend *b, struct nerr *err);
void plugins_tick(struct backend *b);
int plugins_render_metrics(struct backend *b, struct sbuf *out);

#endif
