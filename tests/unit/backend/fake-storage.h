/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fake-storage: a fake implementation of struct storage_ops (backend/
 * storage.h) for the unit tests of the volume state machine. It models a
 * plugin that keeps volumes as CSI says (create idempotent by name, delete
 * of a missing volume OK, stage/publish flags per volume), logs the volume
 * calls in order, fails a call when a rule says so (before or after it
 * acted, with any error class) and calls a hook at a chosen call, before
 * or after it acted: a test takes the state dir's snapshot there, which is
 * what a crash at that moment would leave. Snapshots too (CreateSnapshot
 * idempotent by name, DeleteSnapshot of a missing one OK), and the content
 * source the last CreateVolume named. One plugin per process.
 */
#ifndef NODEFS_FAKE_STORAGE_H
#define NODEFS_FAKE_STORAGE_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "storage.h"

#define FAKE_VOLS 16

struct fake_vol {
	char id[64];
	char name[256];
	int64_t capacity;
	bool ctl_published, staged, published;
	char staging[PATH_MAX];
	char target[PATH_MAX];
	bool got_pctx;			/* NodeStage/NodePublish saw the publish context */
};

struct fake_snap {
	char id[64];
	char name[256];
	char source[64];
};

struct fake_rule {
	const char *call;		/* "NodeStageVolume", ... */
	bool after;			/* fail after acting (the plugin did it) */
	int err;			/* positive errno */
	int code;			/* raw status */
	const char *code_name;
	bool uncertain;
	int times;			/* failures left */
};

struct fake {
	pthread_mutex_t lock;
	struct storage_caps caps;
	bool node_needed;		/* ControllerExpand asks for a NodeExpand */
	struct fake_vol vols[FAKE_VOLS];
	size_t nvols;
	struct fake_snap snaps[FAKE_VOLS];	/* CreateSnapshot idempotent by name */
	size_t nsnaps;
	char last_source[64];			/* CreateVolume's content source id */
	unsigned next_id;
	char log[8192];			/* volume calls, space-separated */
	unsigned calls;			/* volume calls so far */
	struct fake_rule rules[8];
	size_t nrules;
	/* the hook: at `hook_call`, before (or after) it acts, once */
	const char *hook_call;
	bool hook_after;
	void (*hook)(void *ctx);
	void *hook_ctx;
	bool hook_fired;
};

extern struct fake fake;
extern const struct storage_ops fake_storage_ops;

/* Reset the model: capabilities as given (plugin CONTROLLER_SERVICE when
 * ctl is not 0), no volumes, empty log, no rules, no hook. */
void fake_reset(uint32_t ctl, uint32_t node);
/* Fail the next `times` calls named call with this class. */
void fake_fail(const char *call, bool after, int err, int code, const char *code_name,
	       bool uncertain, int times);
/* A volume the plugin has from before (for import). */
void fake_seed(const char *id, int64_t capacity);
/* Clear the log (what a test compares next). */
void fake_log_clear(void);
/* The log, a copy. */
void fake_log(char *buf, size_t len);
/* The model's volume by id or name, a copy; false when none. */
bool fake_vol_get(const char *id, struct fake_vol *ret);
size_t fake_nvols(void);
size_t fake_nsnaps(void);
/* The content source the last CreateVolume named ("" none), a copy. */
void fake_last_source(char *buf, size_t len);

#endif
