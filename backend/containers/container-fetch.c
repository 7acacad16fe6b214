/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * container-fetch: the launch's fetch stage, between the create and the
 * first start, the same for every runtime: each fetch= the container was
 * made with runs in order through backend/fetch/ into its sandbox, on the
 * worker that runs the container's action (never a FUSE thread), with the
 * state FETCHING meanwhile and containers/NAME/fetch showing each one's
 * progress. A fetch that fails leaves the container CREATED with the
 * reason in its error file; a later start runs what is not done yet.
 *
 * It must not know HTTP, archives or the cache's layout (fetch.h), nor
 * the engines, nor move the container's state: the start action
 * (container-run.c) says FETCHING around container_fetch_run.
 */
#include "container-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "kind.h"
#include "sbuf.h"


static const double fetch_le[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
				   5, 10, 30, 60, 300 };

static void progress(void *ctx, const struct fetch_status *st)
{
	struct container *c = ctx;

	/* st is c->fst[i] itself, written by the fetch as it goes: the file
	 * shows a snapshot (a number read mid-write is a stale number) */
	bnode_changed(c->node);
}

bool container_fetch_pending(struct container *c)
{
	bool fetched;

	pthread_mutex_lock(&c->lock);
	fetched = c->fetched;
	pthread_mutex_unlock(&c->lock);
	return c->spec.fetches.n && !fetched;
}

static void cache_dir(struct backend *b, char *buf, size_t size)
{
	if (b->cfg->fetch_cache)
		snprintf(buf, size, "%s", b->cfg->fetch_cache);
	else
		snprintf(buf, size, "%s/fetch-cache", b->cfg->state_dir);
}

void container_fetch_release(struct container *c, const char *sandbox)
{
	char cache[4200];

	if (!c->spec.fetches.n || c->b->cfg->fetch_cache_size == 0)
		return;
	cache_dir(c->b, cache, sizeof(cache));
	for (size_t i = 0; i < c->spec.fetches.n; i++)
		fetch_unlink(cache, sandbox, &c->spec.fetches.v[i]);
}

int container_fetch_run(struct container *c, struct nerr *err)
{
	struct backend *b = c->b;
	char cache[4200];
	long uid = -1, gid = -1;
	size_t n = c->spec.fetches.n;
	int r = 0;

	if (!c->sandbox)
		return nerr_set(err, EINVAL, "fetch=: the container has no sandbox (sandbox=no)");
	pthread_mutex_lock(&c->lock);
	if (!c->fst)
		c->fst = calloc(n, sizeof(*c->fst));
	pthread_mutex_unlock(&c->lock);
	if (!c->fst)
		return nerr_set(err, ENOMEM, "out of memory");
	cache_dir(b, cache, sizeof(cache));
	if (c->spec.user)
		(void)rt_user_resolve(c->spec.user, NULL, 0, NULL, 0, &uid, &gid, NULL);
	{
		struct stat st;

		/* a name resolved at create: the sandbox is the user's */
		if (stat(c->sandbox, &st) == 0 && st.st_uid != 0) {
			uid = st.st_uid;
			gid = st.st_gid;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (c->fst[i].state == FETCH_DONE)
			continue;
		struct fetch_env env = {
			.cache_dir = cache, .cache_size = b->cfg->fetch_cache_size,
			.sandbox = c->sandbox, .uid = (uid_t)uid, .gid = (gid_t)gid,
			.sandbox_limit = c->spec.sandbox_size, .progress = progress, .ctx = c,
			.cancel = &c->prog.cancel,
		};

		r = fetch_run(&env, &c->spec.fetches.v[i], &c->fst[i], err);
		if (r >= 0 && c->fst[i].served >= FETCH_SERVED_DOWNLOADED) {
			struct containers_state *cs = kind_state_named(b, "containers");

			if (cs)
				hist_observe(&cs->fetch_seconds[c->fst[i].served - FETCH_SERVED_DOWNLOADED],
					     fetch_le, ARRAY_SIZE(fetch_le),
					     c->fst[i].end_ns - c->fst[i].start_ns);
		}
		bnode_changed(c->node);
		if (r < 0)
			break;
	}
	if (r >= 0) {
		pthread_mutex_lock(&c->lock);
		c->fetched = true;
		pthread_mutex_unlock(&c->lock);
	} else {
		bnode_set_error(c->node, err->msg);
	}
	return r;
}

int container_fetch_render_metrics(struct backend *b, struct sbuf *out)
{
	struct containers_state *cs = kind_state_named(b, "containers");
	static const char h[] = "nodefs_fetch_seconds";
	int r;

	if (!cs)
		return 0;
	r = sbuf_printf(out, "# HELP %s The fetch stage's own time per fetch= that succeeded, by how "
			"it was served.\n# TYPE %s histogram\n", h, h);
	for (int i = 0; r >= 0 && i < 3; i++) {
		char labels[32];

		snprintf(labels, sizeof(labels), "how=\"%s\"",
			 fetch_served_to_string((enum fetch_served)(FETCH_SERVED_DOWNLOADED + i)));
		r = hist_render(out, h, labels, fetch_le, ARRAY_SIZE(fetch_le), &cs->fetch_seconds[i]);
	}
	return r;
}
