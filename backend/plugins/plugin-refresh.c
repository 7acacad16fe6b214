/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plugin-refresh: the cache behind a plugin's files (info, capabilities,
 * node id, capacity per profile, the plugin's volume list), fetched on the
 * worker pool through struct storage_ops: at start, when the plugin
 * becomes READY, every reconcile_interval (plugins_tick, from the monitor)
 * and after a volume changed, so that a read never waits on a plugin.
 *
 * Must not know: CSI messages, FUSE.
 */
#include "backend-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "macro.h"
#include "plugin-internal.h"
#include "profiles.h"

static void refresh_capacity(struct plugin *p, const struct storage_caps *caps, struct sbuf *out)
{
	struct backend *b = p->b;

	if (!STORAGE_CAP(caps->controller, STORAGE_CTL_GET_CAPACITY)) {
		sbuf_adds(out, "unsupported: the plugin has no GET_CAPACITY capability\n");
		return;
	}
	const struct config *pc = profiles_config(b);

	for (size_t i = 0; i <= pc->nprofiles; i++) {
		const struct config_profile *pr = i < pc->nprofiles ? &pc->profiles[i] : NULL;
		struct storage_req rq = { 0 };
		struct nerr err = { 0 };
		int64_t bytes;

		if (pr && (!pr->plugin || strcmp(pr->plugin, p->name) != 0))
			continue;
		rq.cap = storage_cap_of(pr ? pr->access_mode : NULL, pr ? pr->fs_type : NULL,
					pr ? pr->mount_flags : NULL);
		rq.params = pr ? pr->params : NULL;
		if (p->ops->capacity(p->h, &rq, &bytes, NULL, NULL, NULL, &err) >= 0)
			sbuf_printf(out, "%s %lld\n", pr ? pr->name : "default", (long long)bytes);
		else
			sbuf_printf(out, "%s error: %s\n", pr ? pr->name : "default", err.msg);
	}
}

void plugin_vols_free(struct plugin_vol *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i].id);
	free(v);
}

/* ListVolumes, page by page, into *ret (n in *ret_n); a failure or a
 * missing capability as a line of out. */
static void refresh_volumes(struct plugin *p, const struct storage_caps *caps, struct sbuf *out,
			    struct plugin_vol **ret, size_t *ret_n)
{
	struct plugin_vol *v = NULL;
	size_t n = 0, cap = 0;
	char *token = NULL;

	if (!STORAGE_CAP(caps->controller, STORAGE_CTL_LIST_VOLUMES)) {
		sbuf_adds(out, "unsupported: the plugin has no LIST_VOLUMES capability\n");
		return;
	}
	for (int pages = 0; pages < 1000; pages++) {
		struct storage_page pg = { 0 };
		struct nerr err = { 0 };

		if (p->ops->list(p->h, token, &pg, NULL, NULL, NULL, &err) < 0) {
			sbuf_printf(out, "error: %s\n", err.msg);
			break;
		}
		for (size_t i = 0; i < pg.n && out->len == 0; i++) {
			if (n == cap) {
				struct plugin_vol *nv = realloc(v, (cap ? cap * 2 : 64) * sizeof(*v));

				if (!nv) {
					sbuf_adds(out, "error: out of memory\n");
					break;
				}
				v = nv;
				cap = cap ? cap * 2 : 64;
			}
			v[n].id = TAKE_PTR(pg.v[i].id);	/* storage_page_clear frees NULL */
			v[n].capacity = pg.v[i].capacity;
			n++;
		}
		free(token);
		token = TAKE_PTR(pg.next_token);
		storage_page_clear(&pg);
		if (!token || out->len)
			break;
	}
	free(token);
	*ret = v;
	*ret_n = n;
}

static void plugin_refresh(void *arg)
{
	struct bnode *n = arg;
	struct plugin *p = pof(n);
	struct sbuf cap = SBUF_INIT(1u << 20), vols = SBUF_INIT(1u << 20);
	struct plugin_vol *vlist = NULL;
	size_t nvlist = 0;
	struct nerr err = { 0 };
	struct storage_caps caps;
	char *iname = NULL, *iver = NULL;
	char node_id[256];
	int r;

	/* a refresh still queued at a stop would only hold the exit up */
	if (atomic_load(&n->dead) || atomic_load(&p->b->state) == BACKEND_STOPPING)
		goto out;
	pthread_mutex_lock(&p->lock);
	p->lists_stale = false;		/* a change from now on marks it again */
	pthread_mutex_unlock(&p->lock);
	r = p->ops->plugin_info(p->h, &iname, &iver, &err);
	if (r >= 0) {
		pthread_mutex_lock(&p->lock);
		snprintf(p->info_name, sizeof(p->info_name), "%s", iname ? iname : "");
		snprintf(p->info_version, sizeof(p->info_version), "%s", iver ? iver : "");
		p->have_info = true;
		pthread_mutex_unlock(&p->lock);
	}
	free(iname);
	free(iver);
	if (r >= 0) {
		r = p->ops->capabilities(p->h, &caps, &err);
		if (r >= 0) {
			pthread_mutex_lock(&p->lock);
			p->caps = caps;
			p->have_caps = true;
			pthread_mutex_unlock(&p->lock);
		}
	}
	if (r >= 0)
		r = plugin_node_id(p, node_id, sizeof(node_id), &err);
	if (r >= 0) {
		refresh_capacity(p, &caps, &cap);
		refresh_volumes(p, &caps, &vols, &vlist, &nvlist);
		if (p->b->links && p->b->links->volumes_refresh_stats)
			p->b->links->volumes_refresh_stats(p->b, p->name);
	}
	pthread_mutex_lock(&p->lock);
	if (r >= 0) {
		sbuf_free(&p->capacity);
		p->capacity = cap;
		sbuf_free(&p->volumes);
		p->volumes = vols;
		plugin_vols_free(p->vols, p->nvols);
		p->vols = TAKE_PTR(vlist);
		p->nvols = nvlist;
		nvlist = 0;
		p->have_lists = true;
		sbuf_init(&cap, 0);
		sbuf_init(&vols, 0);
		p->refresh_error[0] = '\0';
	} else {
		snprintf(p->refresh_error, sizeof(p->refresh_error), "%s", err.msg);
	}
	p->refreshed = time(NULL);
	p->refreshing = false;
	pthread_mutex_unlock(&p->lock);
	bnode_changed(n);
out:
	sbuf_free(&cap);
	sbuf_free(&vols);
	plugin_vols_free(vlist, nvlist);
	bnode_unref(n);
}

void plugin_refresh_soon(struct plugin *p)
{
	bool go;

	if (!p->h)
		return;
	pthread_mutex_lock(&p->lock);
	go = !p->refreshing;
	p->refreshing = true;
	pthread_mutex_unlock(&p->lock);
	if (go && work_submit(p->b->work, plugin_refresh, bnode_ref(p->node)) < 0) {
		pthread_mutex_lock(&p->lock);
		p->refreshing = false;
		pthread_mutex_unlock(&p->lock);
		bnode_unref(p->node);
	}
}

/* From the monitor thread: refresh what is stale, and right away when a
 * plugin has just become READY. */
void plugins_tick(struct backend *b)
{
	/* 0: no periodic refresh (reconciliation off); a plugin that becomes
	 * READY and a read after a volume change still refresh */
	uint64_t every = b->cfg->reconcile_interval_ms / 1000;

	if (b->cfg->reconcile_interval_ms && every == 0)
		every = 1;
	struct bnode **v;
	size_t n;

	if (bnode_list(plugins_dir(b), &v, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct plugin *p = pof(v[i]);
		struct storage_health_info h;
		bool stale;

		if (!p->h)
			continue;
		p->ops->health(p->h, &h);
		pthread_mutex_lock(&p->lock);
		stale = (h.health == STORAGE_HEALTH_READY && p->last_health != STORAGE_HEALTH_READY) ||
			(every && (uint64_t)(time(NULL) - p->refreshed) >= every);
		if (h.health != p->last_health) {
			const char *old = plugin_health_name(p->last_health);
			p->last_health = h.health;
			pthread_mutex_unlock(&p->lock);
			events_emit(b->events, "plugin", p->name, old, plugin_health_name(h.health),
				    NULL, h.reason[0] ? h.reason : NULL);
			bnode_changed(v[i]);
			pthread_mutex_lock(&p->lock);
		}
		pthread_mutex_unlock(&p->lock);
		if (stale)
			plugin_refresh_soon(p);
	}
	bnode_list_free(v, n);
}

/* What a list file says before its first fetch. p->lock held. */
static int show_unknown_locked(struct plugin *p, struct sbuf *out)
{
	return sbuf_printf(out, "unknown: %s\n",
			   p->refresh_error[0] ? p->refresh_error : "not fetched yet");
}

int plugin_show_cached(struct plugin *p, struct sbuf *src, struct sbuf *out)
{
	int r;

	pthread_mutex_lock(&p->lock);
	if (p->have_lists)
		r = sbuf_add(out, src->buf ? src->buf : "", src->len);
	else
		r = show_unknown_locked(p, out);
	pthread_mutex_unlock(&p->lock);
	return r;
}

/*
 * Whether each listed volume is nodefs's is told by what nodefs holds now,
 * not when the list was fetched: a fetch made while recovery was still
 * loading the volumes (the plugin became READY first), or before a create,
 * would otherwise call nodefs's own volumes discovered until the next one.
 * The index is made before p->lock is taken (it takes the tree's and the
 * volumes' locks).
 */
int plugin_show_volumes(struct plugin *p, struct sbuf *out)
{
	const struct backend_links *ln = p->b->links;
	/* volumes/ makes the index (links.h): plugins/ does not know volumes */
	struct volume_index *ix = ln && ln->volume_index_new ? ln->volume_index_new(p->b, p->name)
							     : NULL;
	int r = 0;

	if (!ix)
		return -ENOMEM;
	pthread_mutex_lock(&p->lock);
	if (!p->have_lists)
		r = show_unknown_locked(p, out);
	for (size_t i = 0; r >= 0 && p->have_lists && i < p->nvols; i++) {
		const struct plugin_vol *v = &p->vols[i];
		const char *known = ln->volume_index_find(ix, v->id);

		r = known ? sbuf_printf(out, "%s %lld known %s\n", v->id, (long long)v->capacity, known)
			  : sbuf_printf(out, "%s %lld discovered\n", v->id, (long long)v->capacity);
	}
	if (r >= 0 && p->have_lists && p->volumes.len)
		r = sbuf_add(out, p->volumes.buf, p->volumes.len);
	pthread_mutex_unlock(&p->lock);
	ln->volume_index_free(ix);
	return r;
}

/* The capacity and volume lists are refreshed in the background: the read
 * that finds them stale still shows the cached lists. */
void plugin_lists_stale(struct backend *b, const char *name)
{
	struct bnode *n = bnode_lookup(plugins_dir(b), name);

	if (!n)
		return;
	pthread_mutex_lock(&pof(n)->lock);
	pof(n)->lists_stale = true;
	pthread_mutex_unlock(&pof(n)->lock);
	bnode_unref(n);
}

void plugin_refresh_if_stale(struct plugin *p)
{
	bool stale;

	pthread_mutex_lock(&p->lock);
	stale = p->lists_stale;
	pthread_mutex_unlock(&p->lock);
	if (stale)
		plugin_refresh_soon(p);
}

