/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * volume-recover: volumes at start. Every record in STATE_DIR/volumes is
 * read back into a volume (a node reboot drops what was mounted: such
 * volumes go back to NODE_READY), and a PENDING operation on a volume is
 * resumed as an action on its queue, as if its command had just been
 * written again.
 *
 * Must not know: the storage interface, how steps run, files.
 */
#include "volume-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "ctl.h"
#include "log.h"
#include "operation.h"
#include "store.h"
#include "units.h"
#include "valid.h"

static char **json_strv(json_t *a)
{
	char **v = NULL;	/* none: NULL (volume_strv_dup) */
	size_t i;
	json_t *x;

	json_array_foreach(a, i, x)
		if (json_string_value(x) && volume_strv_push(&v, json_string_value(x)) < 0) {
			storage_strv_free(v);
			return NULL;
		}
	return v;
}

/* A publish-side call as the record keeps it (volume.c's write_call). */
static void read_call(json_t *o, struct vcall *c)
{
	int kind = vcall_from_name(json_string_value(json_object_get(o, "rpc")));
	const char *op = json_string_value(json_object_get(o, "operation"));

	if (kind == VC_NONE)
		return;
	vcall_set(c, kind, json_string_value(json_object_get(o, "path")),
		  json_string_value(json_object_get(o, "node_id")));
	snprintf(c->op_id, sizeof(c->op_id), "%s", op ? op : "");
}

/* ---- recovery ---- */

static void recover_one(void *ctx, const char *name, json_t *j)
{
	struct backend *b = ctx;
	struct volume *v;
	const char *s;
	char rebooted[PATH_MAX + 160] = "";
	int st;

	s = json_string_value(json_object_get(j, "plugin"));
	if (valid_name(name, NULL) < 0 || !s || !s[0]) {
		log_err("volume %s: its checkpoint names no plugin", name);
		atomic_fetch_add(&b->bad_records, 1);
		return;
	}
	v = volume_alloc(b, name);
	if (!v)
		return;
#define SI(field, key) if ((s = json_string_value(json_object_get(j, key))) && s[0]) v->field = intern_get(&b->names, s)
	SI(plugin, "plugin");
	SI(profile, "profile");
	SI(access_mode, "access_mode");
	SI(fs_type, "fs_type");
#undef SI
#define S(field, key) if ((s = json_string_value(json_object_get(j, key))) && s[0]) v->field = strdup(s)
	S(csi_name, "csi_name");
	S(id, "id");
	S(target, "target");
#undef S
	if ((s = json_string_value(json_object_get(j, "staging_path"))))
		v->staging = strdup(s);
	volume_staging_locked(v);
	v->mount_flags = json_strv(json_object_get(j, "mount_flags"));
	v->params = json_strv(json_object_get(j, "parameters"));
	v->vctx = json_strv(json_object_get(j, "volume_context"));
	v->pctx = json_strv(json_object_get(j, "publish_context"));
	v->size_req = (uint64_t)json_integer_value(json_object_get(j, "size_requested"));
	v->imported = json_is_true(json_object_get(j, "imported"));
	v->capacity = json_integer_value(json_object_get(j, "capacity"));
	v->ctl_published = json_is_true(json_object_get(j, "controller_published"));
	v->staged = json_is_true(json_object_get(j, "staged"));
	v->node_expand_to = json_integer_value(json_object_get(j, "node_expand_to"));
	v->ro = json_is_true(json_object_get(j, "readonly"));
	atomic_store(&v->queued, true);
	st = vstate_from_string(json_string_value(json_object_get(j, "state")));
	v->state = st < 0 ? V_CREATED : (enum vstate)st;
	if (b->rebooted && v->state >= V_NODE_STAGE && v->state <= V_NODE_UNSTAGE) {
		/* the node rebooted: its mounts are gone; back to NODE_READY, and
		 * publish or stage again on demand (Mesos does the same). The
		 * error file says so, and where it was mounted. */
		snprintf(rebooted, sizeof(rebooted), "the node rebooted and its mounts went with "
			 "it: was %s%s%s, now NODE_READY; write publish TARGET to mount it again",
			 vstate_to_string(v->state), v->target ? " at " : "",
			 v->target ? v->target : "");
		log_warn("volume %s: %s", v->name, rebooted);
		v->state = V_NODE_READY;
		v->staged = false;
		free(v->target);
		v->target = NULL;
	}
	/* the last call whose answer never came, and the one in flight at the
	 * crash: its answer is lost too */
	read_call(json_object_get(j, "uncertain"), &v->unc);
	read_call(json_object_get(j, "call"), &v->unc);
	if (b->rebooted && v->unc.kind != VC_NONE && v->unc.kind != VC_CTL_PUBLISH &&
	    v->unc.kind != VC_CTL_UNPUBLISH)
		vcall_clear(&v->unc);	/* the node's mounts, and its late calls, went with it */
	v->node = bnode_new(&volume_type, name, v);
	if (!v->node) {
		volume_free(v);
		return;
	}
	if (bnode_add(volumes_dir(b), v->node) < 0) {
		log_err("volume %s: read from its checkpoint, but cannot be added", name);
		bnode_unref(v->node);
		return;
	}
	if (rebooted[0])
		bnode_set_error(v->node, rebooted);
	if (v->state == V_CREATING || v->state == V_DELETING || v->unc.kind != VC_NONE) {
		/* a call whose answer no one has: settled in the background
		 * unless a resumed command does it first (it then names itself:
		 * volume_resume); a publish-side call names the command that sent
		 * it */
		struct operation *op = v->unc.op_id[0] ? op_find(b, v->unc.op_id) : NULL;

		volume_watch_uncertain(v, op, false);
		op_unref(op);
	}
	bnode_unref(v->node);
}

static void recover_bad(void *ctx, const char *name, const char *why)
{
	struct backend *b = ctx;

	log_err("volume %s: checkpoint unreadable: %s", name, why);
	atomic_fetch_add(&b->bad_records, 1);
}

int volumes_recover(struct backend *b, struct nerr *err)
{
	int r = store_load(b->store, "volumes", recover_one, recover_bad, b);

	if (r < 0)
		return nerr_set(err, -r, "cannot read the volume checkpoints: %s", strerror(-r));
	return 0;
}

/*
 * Recovery: a PENDING operation on a volume is driven to an end as if its
 * command had just been written again (the calls are idempotent, and the
 * CreateVolume name is kept in the record, so nothing is made twice). Its
 * answer goes to the operation, there being no writer any more.
 */
int volume_resume(struct backend *b, struct operation *op)
{
	static const struct { const char *cmd; int kind; } kinds[] = {
		{ "create", VA_CREATE }, { "mkdir", VA_CREATE }, { "import", VA_IMPORT },
		{ "publish", VA_PUBLISH }, { "stage", VA_STAGE }, { "unpublish", VA_UNPUBLISH },
		{ "unstage", VA_UNSTAGE }, { "expand", VA_EXPAND }, { "destroy", VA_DESTROY },
		{ "rmdir", VA_DESTROY },
	};
	struct ctl_cmd cmd = { 0 };
	struct bnode *n;
	struct volume *v;
	struct vact *x;
	int kind = -1, r;

	if (strncmp(op->object, "volumes/", 8) != 0)
		return -EINVAL;
	n = bnode_lookup(volumes_dir(b), op->object + 8);
	if (!n)
		return -ENOENT;	/* it never reached its first checkpoint */
	v = vof(n);
	r = ctl_parse(op->command, strlen(op->command), &cmd, NULL);
	for (size_t i = 0; r >= 0 && i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(cmd.argv[0], kinds[i].cmd) == 0)
			kind = kinds[i].kind;
	x = kind >= 0 ? calloc(1, sizeof(*x)) : NULL;
	if (!x) {
		ctl_cmd_free(&cmd);
		bnode_unref(n);
		return -EINVAL;
	}
	if (kind == VA_PUBLISH && cmd.argc > 1) {
		x->target = strdup(cmd.argv[1]);
		x->ro = cmd.argc > 2 && strcmp(cmd.argv[2], "ro") == 0;
	} else if (kind == VA_PUBLISH) {
		pthread_mutex_lock(&v->lock);
		x->target = v->target ? strdup(v->target) : NULL;
		x->ro = v->ro;
		pthread_mutex_unlock(&v->lock);
	}
	if (kind == VA_EXPAND && cmd.argc > 1)
		parse_size(cmd.argv[1], &x->size, NULL);
	ctl_cmd_free(&cmd);
	if ((kind == VA_PUBLISH && !x->target) || (kind == VA_EXPAND && !x->size)) {
		free(x->target);
		free(x);
		bnode_unref(n);
		return -EINVAL;
	}
	{
		/* A call that makes something (CreateVolume, ControllerPublish,
		 * NodeStage, NodePublish) or undoes it was in flight at the
		 * crash: its outcome is uncertain. CSI calls are idempotent by
		 * name, so the resumed action repeats it to learn the answer;
		 * the operation says so. */
		static const char *const calls[] = {
			[V_CREATING] = "CreateVolume", [V_CONTROLLER_PUBLISH] = "ControllerPublishVolume",
			[V_NODE_STAGE] = "NodeStageVolume", [V_NODE_PUBLISH] = "NodePublishVolume",
			[V_NODE_UNPUBLISH] = "NodeUnpublishVolume",
			[V_NODE_UNSTAGE] = "NodeUnstageVolume",
			[V_CONTROLLER_UNPUBLISH] = "ControllerUnpublishVolume",
			[V_DELETING] = "DeleteVolume",
		};
		char line[300];
		enum vstate st;
		bool unc;

		pthread_mutex_lock(&v->lock);
		st = v->state;
		unc = v->unc.kind != VC_NONE;
		snprintf(line, sizeof(line), "%s of volume %s (CSI name %s) was in flight at a crash, "
			 "its answer lost: sent again after the restart (idempotent) to learn it",
			 (size_t)st < sizeof(calls) / sizeof(calls[0]) && calls[st] ? calls[st] : "",
			 v->name, v->csi_name ? v->csi_name : "-");
		pthread_mutex_unlock(&v->lock);
		if ((size_t)st < sizeof(calls) / sizeof(calls[0]) && calls[st]) {
			char series[128];

			op_note_outcome(op, line);
			snprintf(series, sizeof(series), "nodefs_uncertain_outcomes_total{kind=\"csi.%s\","
				 "result=\"resumed\"}", calls[st]);
			events_tally(b->events, series, 1);
		}
		if (st == V_CREATING || st == V_DELETING || unc)
			volume_watch_uncertain(v, op, kind == VA_DESTROY);
	}
	x->v = v;
	x->node = n;	/* the lookup's reference */
	x->kind = kind;
	x->a.b = b;
	x->a.op = op;
	bnode_ref(op->node);	/* the action's reference, dropped when it ends */
	x->a.run = volume_run_action;
	x->a.done = volume_act_done;
	x->a.free = volume_act_free;
	op->claimed = true;
	events_emit(b->events, "operation", op->id, "PENDING", "PENDING", op->id,
		    "resumed after a restart");
	atomic_fetch_add(&v->inflight, 1);
	actq_submit(&v->q, &x->a);
	return 0;
}
