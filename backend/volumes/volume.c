/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * volume: the volume object, CSI volumes as nodefs keeps them.
 *
 * What the Mesos storage local resource provider does, as files: create
 * (CreateVolume) or import (ValidateVolumeCapabilities), publish, stage,
 * unpublish, unstage, expand, destroy. The work is split by concern:
 *
 *   volume.c          the object: its states' names, allocation, its record
 *                     (checkpoint), state changes and their events, removal,
 *                     and the lookups other modules make (mount source, ids)
 *   volume-steps.c    the state machine: one storage call per step with its
 *                     checkpoints, the walks up and down, an action
 *   volume-change.c   changes in place: expand, modify
 *   volume-call.c     what every storage call shares: its request, the
 *                     notes of its attempts in the operation
 *   volume-settle.c   calls whose answer never came, settled in the
 *                     background
 *   volume-ctl.c      volumes/ctl and volumes/NAME/ctl: commands validated
 *                     and queued as actions with their operations
 *   volume-files.c    what volumes/NAME/ shows, and the volume metrics
 *   volume-recover.c  reading the records at start, resuming operations
 *
 * This file owns struct volume's life and record. It must not know the
 * storage interface, commands or files: it never calls a plugin.
 */
#include "volume-internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jw.h"
#include "redact.h"
#include "store.h"

static const char *const vstate_names[] = {
	"CREATING", "CREATED", "CONTROLLER_PUBLISH", "NODE_READY", "NODE_STAGE", "VOL_READY",
	"NODE_PUBLISH", "PUBLISHED", "NODE_UNPUBLISH", "NODE_UNSTAGE", "CONTROLLER_UNPUBLISH",
	"DELETING",
};

const char *vstate_to_string(enum vstate s)
{
	return s <= V_DELETING ? vstate_names[s] : "UNKNOWN";
}

int vstate_from_string(const char *s)
{
	for (int i = 0; i <= V_DELETING; i++)
		if (s && strcmp(s, vstate_names[i]) == 0)
			return i;
	return -1;
}

int volume_strv_push(char ***v, const char *s)
{
	size_t n = 0;
	char **nv;

	while (*v && (*v)[n])
		n++;
	nv = realloc(*v, (n + 2) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[n] = strdup(s);
	nv[n + 1] = NULL;
	return nv[n] ? 0 : -ENOMEM;
}

int volume_strv_dup(char *const *v, char ***ret)
{
	char **r = NULL;

	for (size_t i = 0; v && v[i]; i++)
		if (volume_strv_push(&r, v[i]) < 0) {
			storage_strv_free(r);
			return -ENOMEM;
		}
	*ret = r;
	return 0;
}

void volume_free(struct volume *v)
{
	if (!v)
		return;
	intern_put(&v->b->names, v->plugin);
	intern_put(&v->b->names, v->profile);
	intern_put(&v->b->names, v->access_mode);
	intern_put(&v->b->names, v->fs_type);
	storage_strv_free(v->mount_flags);
	storage_strv_free(v->params);
	free(v->src);
	free(v->src_id);
	storage_strv_free(v->mparams);
	free(v->cond_msg);
	free(v->csi_name);
	free(v->id);
	storage_strv_free(v->vctx);
	storage_strv_free(v->pctx);
	free(v->target);
	op_unref(v->unc_op);
	vcall_clear(&v->call);
	vcall_clear(&v->unc);
	free(v->staging);
	pthread_mutex_destroy(&v->lock);
	free(v);
}

struct volume *volume_alloc(struct backend *b, const char *name)
{
	size_t len = strnlen(name, 64);
	struct volume *v = calloc(1, sizeof(*v) + len + 1);

	if (!v)
		return NULL;
	v->b = b;
	memcpy(v->name, name, len);
	actq_init(&v->q);
	pthread_mutex_init(&v->lock, NULL);
	return v;
}

/* ---- state and checkpoints ---- */

/* key=value pairs as an array; with hide, a value is "<redacted>" when
 * hide_all or its key is one of names. */
static void write_pairs(struct jw *w, const char *key, char *const *v, bool hide, bool hide_all,
			const char *const *names)
{
	jw_key(w, key);
	jw_arr(w);
	for (size_t i = 0; v && v[i]; i++) {
		size_t k = strcspn(v[i], "=");
		char buf[256];

		if (hide && (hide_all || redact_key(v[i], k, names)) && k < sizeof(buf) - 12) {
			snprintf(buf, sizeof(buf), "%.*s=" REDACTED, (int)k, v[i]);
			jw_str(w, buf);
		} else if (hide && (hide_all || redact_key(v[i], k, names))) {
			jw_str(w, REDACTED);
		} else {
			jw_str(w, v[i]);
		}
	}
	jw_arr_end(w);
}

/* A volume's members, as its record and spec.json show them; with redact,
 * as info.json does: the contexts the plugin returned and the parameters
 * the config's redact list names are "<redacted>". Lock held. */
/* A publish-side call as the record keeps it: what it acts on. */
static void write_call(struct jw *w, const char *key, const struct volume *v, const struct vcall *c)
{
	if (c->kind == VC_NONE)
		return;
	jw_key(w, key);
	jw_obj(w);
	jw_kstr(w, "rpc", vcall_name(c->kind));
	if (v->id)
		jw_kstr(w, "volume_id", v->id);
	if (c->node)
		jw_kstr(w, "node_id", c->node);
	if (c->path)
		jw_kstr(w, "path", c->path);
	if (c->op_id[0])
		jw_kstr(w, "operation", c->op_id);
	jw_obj_end(w);
}

void volume_write_locked(struct volume *v, struct jw *w, bool redact)
{
	const char *const *names = (const char *const *)v->b->cfg->redact;

	jw_kstr(w, "name", v->name);
	jw_kstr(w, "plugin", v->plugin);
	if (v->profile)
		jw_kstr(w, "profile", v->profile);
	if (v->access_mode)
		jw_kstr(w, "access_mode", v->access_mode);
	if (v->fs_type)
		jw_kstr(w, "fs_type", v->fs_type);
	jw_kstrv(w, "mount_flags", v->mount_flags);
	write_pairs(w, "parameters", v->params, redact, false, names);
	jw_kint(w, "size_requested", (long long)v->size_req);
	jw_kbool(w, "imported", v->imported);
	if (v->src) {
		jw_kstr(w, "content_source", v->src);
		jw_kstr(w, "content_source_id", v->src_id ? v->src_id : "");
	}
	if (v->mparams)
		write_pairs(w, "mutable_parameters", v->mparams, redact, false, names);
	jw_kstr(w, "state", vstate_to_string(v->state));
	if (v->csi_name)
		jw_kstr(w, "csi_name", v->csi_name);
	if (v->id)
		jw_kstr(w, "id", v->id);
	jw_kint(w, "capacity", v->capacity);
	write_pairs(w, "volume_context", v->vctx, redact, true, names);
	write_pairs(w, "publish_context", v->pctx, redact, true, names);
	jw_kbool(w, "controller_published", v->ctl_published);
	jw_kbool(w, "staged", v->staged);
	if (v->node_expand_to)
		jw_kint(w, "node_expand_to", v->node_expand_to);
	if (v->target)
		jw_kstr(w, "target", v->target);
	jw_kbool(w, "readonly", v->ro);
	if (v->staging)
		jw_kstr(w, "staging_path", v->staging);
	write_call(w, "call", v, &v->call);
	write_call(w, "uncertain", v, &v->unc);
}

static const char *const vcall_names[] = {
	[VC_NONE] = "", [VC_CTL_PUBLISH] = "ControllerPublishVolume",
	[VC_STAGE] = "NodeStageVolume", [VC_PUBLISH] = "NodePublishVolume",
	[VC_UNPUBLISH] = "NodeUnpublishVolume", [VC_UNSTAGE] = "NodeUnstageVolume",
	[VC_CTL_UNPUBLISH] = "ControllerUnpublishVolume",
};

const char *vcall_name(int kind)
{
	return kind > VC_NONE && kind <= VC_CTL_UNPUBLISH ? vcall_names[kind] : "";
}

int vcall_from_name(const char *s)
{
	for (int k = VC_NONE + 1; s && k <= VC_CTL_UNPUBLISH; k++)
		if (strcmp(s, vcall_names[k]) == 0)
			return k;
	return VC_NONE;
}

void vcall_set(struct vcall *c, int kind, const char *path, const char *node)
{
	free(c->path);
	free(c->node);
	c->kind = kind;
	c->path = path && kind != VC_NONE ? strdup(path) : NULL;
	c->node = node && kind != VC_NONE ? strdup(node) : NULL;
	c->op_id[0] = '\0';
	c->told = false;
}

void vcall_move(struct vcall *to, struct vcall *from)
{
	free(to->path);
	free(to->node);
	*to = *from;
	*from = (struct vcall){ 0 };
}

/* The staging path of a volume: one per volume id under the state dir.
 * Ids are the plugin's strings: bytes outside [A-Za-z0-9._-] are written
 * %XX, so any id is one path component. Lock held or v not yet shared. */
void volume_staging_locked(struct volume *v)
{
	static const char hex[] = "0123456789ABCDEF";
	char buf[PATH_MAX];
	size_t off;

	if (v->staging || !v->id)
		return;
	off = (size_t)snprintf(buf, sizeof(buf), "%s/staging/", v->b->cfg->state_dir);
	for (const unsigned char *c = (const unsigned char *)v->id; *c && off + 4 < sizeof(buf); c++) {
		if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		    *c == '_' || *c == '-' || (*c == '.' && c != (const unsigned char *)v->id)) {
			buf[off++] = (char)*c;
		} else {
			buf[off++] = '%';
			buf[off++] = hex[*c >> 4];
			buf[off++] = hex[*c & 15];
		}
	}
	buf[off] = '\0';
	v->staging = strdup(buf);	/* NULL on OOM: made again at the next look */
}

int volume_checkpoint(struct volume *v, unsigned flags, struct nerr *err)
{
	struct sbuf sb = SBUF_INIT(0);
	struct jw w;
	int r;

	store_record_begin(&w, &sb);
	pthread_mutex_lock(&v->lock);
	volume_write_locked(v, &w, false);
	pthread_mutex_unlock(&v->lock);
	r = store_put_record(v->b->store, "volumes", v->name, &w, flags, err);
	sbuf_free(&sb);
	return r;
}

enum vstate volume_state(struct volume *v)
{
	enum vstate s;

	pthread_mutex_lock(&v->lock);
	s = v->state;
	pthread_mutex_unlock(&v->lock);
	return s;
}

void volume_set_state(struct volume *v, enum vstate s, const char *op_id)
{
	enum vstate old;

	pthread_mutex_lock(&v->lock);
	old = v->state;
	v->state = s;
	pthread_mutex_unlock(&v->lock);
	if (old == s)
		return;
	bnode_changed(v->node);
	op_events_emit(v->b, "volume", v->name, vstate_to_string(old), vstate_to_string(s),
		    op_id, NULL);
}

/* The volume is gone (destroyed, or a create or import that never made
 * it): its record and directory go, and its story on the event stream
 * ends with DELETED. */
void volume_unmake(struct volume *v)
{
	struct bnode *n = bnode_ref(v->node);

	store_del(v->b->store, "volumes", v->name, STORE_LAZY, NULL);
	bnode_remove(n);
	bnode_unref(n);
}

void volume_forget(struct volume *v, const char *op_id)
{
	struct bnode *n = bnode_ref(v->node);	/* v lives until the event is out */

	store_del(v->b->store, "volumes", v->name, STORE_LAZY, NULL);
	bnode_remove(n);
	atomic_fetch_add(&v->b->freed, 1);
	op_events_emit(v->b, "volume", v->name, vstate_to_string(volume_state(v)), "DELETED",
		    op_id, NULL);
	bnode_unref(n);
}

/* ---- for the other modules ---- */

int volume_identity(struct backend *b, const char *name, char *plugin, size_t plen, char *id,
		    size_t idlen, struct nerr *err)
{
	struct bnode *k = bnode_lookup(volumes_dir(b), name);
	struct volume *v;
	int r = 0;

	if (!k)
		return nerr_set(err, ENOENT, "no volume '%s'", name);
	v = vof(k);
	pthread_mutex_lock(&v->lock);
	if (!v->id || v->state == V_CREATING || v->state == V_DELETING)
		r = nerr_set(err, EBUSY, "volume '%s' is %s: it has no id yet", name, vstate_to_string(v->state));
	else {
		snprintf(plugin, plen, "%s", v->plugin);
		snprintf(id, idlen, "%s", v->id);
	}
	pthread_mutex_unlock(&v->lock);
	bnode_unref(k);
	return r;
}

int volume_mount_source(struct backend *b, const char *name, char **ret_path, struct nerr *err)
{
	struct bnode *k = bnode_lookup(volumes_dir(b), name);
	struct volume *v;
	int r = 0;

	if (!k)
		return nerr_set(err, ENOENT, "no volume '%s'", name);
	v = vof(k);
	pthread_mutex_lock(&v->lock);
	if (v->state != V_PUBLISHED || !v->target)
		r = nerr_set(err, EBUSY, "volume '%s' is not published (%s): publish it first", name,
			     vstate_to_string(v->state));
	else if (!(*ret_path = strdup(v->target)))
		r = nerr_set(err, ENOMEM, "out of memory");
	pthread_mutex_unlock(&v->lock);
	bnode_unref(k);
	return r;
}

static bool find_volume(struct backend *b, const char *plugin, const char *id, char *buf, size_t len)
{
	struct bnode **v;
	size_t n;
	bool found = false;

	if (bnode_list(volumes_dir(b), &v, &n) < 0)
		return false;
	for (size_t i = 0; i < n && !found; i++) {
		struct volume *x = vof(v[i]);
		pthread_mutex_lock(&x->lock);
		if (strcmp(x->plugin, plugin) == 0 && (!id || (x->id && strcmp(x->id, id) == 0))) {
			found = true;
			snprintf(buf, len, "%s", x->name);
		}
		pthread_mutex_unlock(&x->lock);
	}
	bnode_list_free(v, n);
	return found;
}

/* The volumes of one plugin by id, for the plugin's refresh: one pass over
 * the volumes, then a binary search per listed volume (ListVolumes of
 * 10,000 volumes must not walk 10,000 volumes each). */
struct volume_index {
	size_t n;
	struct { char *id; char name[65]; } *v;
};

static int vix_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

struct volume_index *volume_index_new(struct backend *b, const char *plugin)
{
	struct volume_index *ix = calloc(1, sizeof(*ix));
	struct bnode **v;
	size_t n;

	if (!ix || bnode_list(volumes_dir(b), &v, &n) < 0) {
		free(ix);
		return NULL;
	}
	ix->v = calloc(n ? n : 1, sizeof(*ix->v));
	for (size_t i = 0; ix->v && i < n; i++) {
		struct volume *x = vof(v[i]);
		pthread_mutex_lock(&x->lock);
		if (x->id && strcmp(x->plugin, plugin) == 0 && (ix->v[ix->n].id = strdup(x->id))) {
			snprintf(ix->v[ix->n].name, sizeof(ix->v[ix->n].name), "%s", x->name);
			ix->n++;
		}
		pthread_mutex_unlock(&x->lock);
	}
	bnode_list_free(v, n);
	if (!ix->v) {
		free(ix);
		return NULL;
	}
	qsort(ix->v, ix->n, sizeof(*ix->v), vix_cmp);	/* id is the first member */
	return ix;
}

const char *volume_index_find(const struct volume_index *ix, const char *id)
{
	size_t lo = 0, hi = ix->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(ix->v[mid].id, id);
		if (c == 0)
			return ix->v[mid].name;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

void volume_index_free(struct volume_index *ix)
{
	if (!ix)
		return;
	for (size_t i = 0; i < ix->n; i++)
		free(ix->v[i].id);
	free(ix->v);
	free(ix);
}

bool volume_name_by_id(struct backend *b, const char *plugin, const char *id, char *buf, size_t len)
{
	return find_volume(b, plugin, id, buf, len);
}

bool volume_uses_plugin(struct backend *b, const char *plugin, char *buf, size_t len)
{
	return find_volume(b, plugin, NULL, buf, len);
}

uint64_t volumes_bytes_provisioned(struct backend *b)
{
	struct bnode **v;
	size_t n;
	uint64_t sum = 0;

	if (!volumes_dir(b) || bnode_list(volumes_dir(b), &v, &n) < 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		struct volume *vol = vof(v[i]);

		pthread_mutex_lock(&vol->lock);
		/* made on its plugin: it has an id */
		if (vol->id)
			sum += vol->capacity > 0 ? (uint64_t)vol->capacity : vol->size_req;
		pthread_mutex_unlock(&vol->lock);
	}
	bnode_list_free(v, n);
	return sum;
}
