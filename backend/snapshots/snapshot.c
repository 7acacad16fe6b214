/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * snapshot: the object, its record and its state changes, the records read
 * back at start, and the lookups other rooms make through links.h (a
 * restore's source, a volume's snapshots, a plugin's listing).
 *
 * Must not know: how a call is made (snapshot-run.c), commands, files.
 */
#include "snapshot-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jw.h"
#include "kind.h"
#include "log.h"
#include "store.h"
#include "valid.h"

struct bnode *snapshots_dir(struct backend *b)
{
	struct bnode *d = kind_dir_named(b, "snapshots");

	return d ? bnode_ref(d) : NULL;
}

struct snapshot *snapshot_alloc(struct backend *b, const char *name)
{
	size_t n = strlen(name);
	struct snapshot *s = calloc(1, sizeof(*s) + n + 1);

	if (!s)
		return NULL;
	memcpy(s->name, name, n + 1);
	s->b = b;
	actq_init(&s->q);
	pthread_mutex_init(&s->lock, NULL);
	return s;
}

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

void snapshot_free(struct snapshot *s)
{
	if (!s)
		return;
	free(s->plugin);
	free(s->volume);
	strv_free(s->params);
	free(s->csi_name);
	free(s->id);
	free(s->volume_id);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

enum sstate snapshot_state(struct snapshot *s)
{
	pthread_mutex_lock(&s->lock);
	enum sstate st = s->state;
	pthread_mutex_unlock(&s->lock);
	return st;
}

int snapshot_apply(struct snapshot *s, enum sevent e, const char *op_id)
{
	enum sstate old, n;
	int r;

	pthread_mutex_lock(&s->lock);
	old = s->state;
	r = snapshot_next(old, e, &n);
	if (r == 0 && n != S_GONE)
		s->state = n;
	pthread_mutex_unlock(&s->lock);
	if (r < 0 || old == n || n == S_GONE)
		return r;
	bnode_changed(s->node);
	op_events_emit(s->b, "snapshot", s->name, sstate_to_string(old), sstate_to_string(n), op_id,
		       NULL);
	return 0;
}

void snapshot_write_locked(struct snapshot *s, struct jw *w)
{
	jw_kstr(w, "name", s->name);
	jw_kstr(w, "plugin", s->plugin);
	jw_kstr(w, "volume", s->volume ? s->volume : "");
	jw_kstr(w, "volume_id", s->volume_id ? s->volume_id : "");
	jw_kstrv(w, "parameters", s->params);
	jw_kbool(w, "imported", s->imported);
	jw_kstr(w, "state", sstate_to_string(s->state));
	if (s->csi_name)
		jw_kstr(w, "csi_name", s->csi_name);
	if (s->id)
		jw_kstr(w, "id", s->id);
	jw_kint(w, "size", s->size);
	jw_kint(w, "created_s", s->created_s);
	jw_kint(w, "created_ns", s->created_ns);
	jw_kbool(w, "ready", s->ready);
}

int snapshot_checkpoint(struct snapshot *s, unsigned flags, struct nerr *err)
{
	struct sbuf sb = SBUF_INIT(0);
	struct jw w;
	int r;

	store_record_begin(&w, &sb);
	pthread_mutex_lock(&s->lock);
	snapshot_write_locked(s, &w);
	pthread_mutex_unlock(&s->lock);
	r = store_put_record(s->b->store, "snapshots", s->name, &w, flags, err);
	sbuf_free(&sb);
	return r;
}

void snapshot_forget(struct snapshot *s, const char *op_id)
{
	struct bnode *n = bnode_ref(s->node);
	enum sstate st = snapshot_state(s);

	store_del(s->b->store, "snapshots", s->name, STORE_LAZY, NULL);
	bnode_remove(n);
	atomic_fetch_add(&s->b->freed, 1);
	op_events_emit(s->b, "snapshot", s->name, sstate_to_string(st), "DELETED", op_id, NULL);
	bnode_unref(n);
}

/* ---- recovery ---- */

static char **json_strv(json_t *a)
{
	size_t n = json_array_size(a), i;
	char **v;

	if (!n)
		return NULL;
	v = calloc(n + 1, sizeof(*v));
	for (i = 0; v && i < n; i++)
		if (!(v[i] = strdup(json_string_value(json_array_get(a, i)) ?: ""))) {
			strv_free(v);
			return NULL;
		}
	return v;
}

static void recover_one(void *ctx, const char *name, json_t *j)
{
	struct bnode *dir = ctx;
	struct backend *b = node_backend(dir);
	const char *p = json_string_value(json_object_get(j, "plugin")), *v;
	int st = sstate_from_string(json_string_value(json_object_get(j, "state")));
	struct snapshot *s;

	if (valid_name(name, NULL) < 0 || !p || !p[0] || st < 0) {
		log_err("snapshot %s: its checkpoint names no plugin or state", name);
		atomic_fetch_add(&b->bad_records, 1);
		return;
	}
	s = snapshot_alloc(b, name);
	if (!s || !(s->plugin = strdup(p)))
		goto oom;
#define S(field, key) if ((v = json_string_value(json_object_get(j, key))) && v[0] && !(s->field = strdup(v))) goto oom
	S(volume, "volume");
	S(volume_id, "volume_id");
	S(csi_name, "csi_name");
	S(id, "id");
#undef S
	s->params = json_strv(json_object_get(j, "parameters"));
	s->imported = json_is_true(json_object_get(j, "imported"));
	s->size = json_integer_value(json_object_get(j, "size"));
	s->created_s = json_integer_value(json_object_get(j, "created_s"));
	s->created_ns = (int32_t)json_integer_value(json_object_get(j, "created_ns"));
	s->ready = json_is_true(json_object_get(j, "ready"));
	s->state = (enum sstate)st;
	s->node = bnode_new(&snapshot_type, name, s);
	if (!s->node)
		goto oom;
	if (bnode_add(dir, s->node) < 0)
		log_err("snapshot %s: read from its checkpoint, but cannot be added", name);
	bnode_unref(s->node);
	return;
oom:
	log_err("snapshot %s: out of memory reading its checkpoint", name);
	snapshot_free(s);
}

static void recover_bad(void *ctx, const char *name, const char *why)
{
	struct backend *b = node_backend(ctx);

	log_err("snapshot %s: checkpoint unreadable: %s", name, why);
	atomic_fetch_add(&b->bad_records, 1);
}

int snapshots_recover(struct backend *b, struct nerr *err)
{
	struct bnode *dir = snapshots_dir(b);
	int r;

	if (!dir)
		return 0;
	r = store_load(b->store, "snapshots", recover_one, recover_bad, dir);
	bnode_unref(dir);
	if (r < 0)
		return nerr_set(err, -r, "cannot read the snapshot checkpoints: %s", strerror(-r));
	return 0;
}

/* ---- for the other rooms (links.h) ---- */

int snapshot_identity(struct backend *b, const char *name, char *plugin, size_t plen, char *id,
		      size_t idlen, struct nerr *err)
{
	struct bnode *dir = snapshots_dir(b);
	struct bnode *n = dir ? bnode_lookup(dir, name) : NULL;
	int r = 0;

	bnode_unref(dir);
	if (!n)
		return nerr_set(err, ENOENT, "no snapshot '%s'", name);
	struct snapshot *s = sof(n);
	pthread_mutex_lock(&s->lock);
	if (s->state != S_READY || !s->id)
		r = nerr_set(err, EBUSY, "snapshot %s is %s, not READY", name, sstate_to_string(s->state));
	else {
		snprintf(plugin, plen, "%s", s->plugin);
		snprintf(id, idlen, "%s", s->id);
	}
	pthread_mutex_unlock(&s->lock);
	bnode_unref(n);
	return r;
}

int snapshots_of_volume(struct backend *b, const char *vol, struct sbuf *out)
{
	struct bnode *dir = snapshots_dir(b);
	struct bnode **v;
	size_t n;
	int r = 0;

	if (!dir)
		return 0;
	if (bnode_list(dir, &v, &n) < 0) {
		bnode_unref(dir);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n && r >= 0; i++) {
		struct snapshot *s = sof(v[i]);

		if (s->volume && strcmp(s->volume, vol) == 0)
			r = sbuf_printf(out, "%s\n", s->name);
	}
	bnode_list_free(v, n);
	bnode_unref(dir);
	return r < 0 ? r : 0;
}

bool snapshot_name_by_id(struct backend *b, const char *plugin, const char *id, char *buf,
			 size_t len)
{
	struct bnode *dir = snapshots_dir(b);
	struct bnode **v;
	size_t n;
	bool found = false;

	if (!dir)
		return false;
	if (bnode_list(dir, &v, &n) < 0) {
		bnode_unref(dir);
		return false;
	}
	for (size_t i = 0; i < n && !found; i++) {
		struct snapshot *s = sof(v[i]);

		pthread_mutex_lock(&s->lock);
		if (s->id && strcmp(s->id, id) == 0 && strcmp(s->plugin, plugin) == 0) {
			snprintf(buf, len, "%s", s->name);
			found = true;
		}
		pthread_mutex_unlock(&s->lock);
	}
	bnode_list_free(v, n);
	bnode_unref(dir);
	return found;
}
