/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plugin: plugins/ and plugins/NAME/, the CSI plugins nodefs talks to.
 *
 * Plugins come from the config and from `plugins/ctl add NAME ENDPOINT`.
 * Each holds a csi_plugin (csi/csi.h: one gRPC connection on the event
 * loop). What the files show that needs a call (info, capabilities, node
 * id, capacity, the plugin's volume list) is fetched by a refresh on the
 * worker pool — at start, when the plugin becomes READY, and every
 * reconcile_interval — and served from that cache, so a read never waits
 * on a plugin. health follows Probe and the connection, live.
 */
#include "backend-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "csi.h"
#include "log.h"
#include "valid.h"

/* volume.c: measure the plugin's volumes on this node for the metrics.
 * (To move to backend-internal.h beside volume_name_by_id.) */
void volumes_refresh_stats(struct backend *b, const char *plugin);
/* volume.c: the plugin's volumes by id (NULL on OOM). */
struct volume_index;
struct volume_index *volume_index_new(struct backend *b, const char *plugin);
const char *volume_index_find(const struct volume_index *ix, const char *id);
void volume_index_free(struct volume_index *ix);

struct plugin {
	struct backend *b;
	struct bnode *node;		/* borrowed */
	char *name;
	char *endpoint;
	bool from_config;
	struct csi_plugin *csi;		/* NULL until plugins_start */

	pthread_mutex_t lock;		/* the cache below */
	bool have_info, have_caps;
	char info_name[256], info_version[256];
	struct csi_caps caps;
	char node_id[256];
	struct sbuf capacity;		/* the capacity file */
	struct sbuf volumes;		/* the volumes file */
	time_t refreshed;
	bool refreshing;
	bool have_lists;		/* capacity and volumes fetched once */
	bool lists_stale;		/* a volume changed since the fetch */
	enum csi_health last_health;
	char refresh_error[NERR_MSG_MAX];
};

static void plugin_free(struct plugin *p)
{
	if (!p)
		return;
	csi_plugin_free(p->csi);
	free(p->name);
	free(p->endpoint);
	sbuf_free(&p->capacity);
	sbuf_free(&p->volumes);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

static struct plugin *pof(struct bnode *n)
{
	return n->priv;
}

/* ---- the refresh (worker) ---- */

static const char *const ctl_cap_names[] = {
	"UNKNOWN", "CREATE_DELETE_VOLUME", "PUBLISH_UNPUBLISH_VOLUME", "LIST_VOLUMES",
	"GET_CAPACITY", "CREATE_DELETE_SNAPSHOT", "LIST_SNAPSHOTS", "CLONE_VOLUME",
	"PUBLISH_READONLY", "EXPAND_VOLUME", "LIST_VOLUMES_PUBLISHED_NODES", "VOLUME_CONDITION",
	"GET_VOLUME", "SINGLE_NODE_MULTI_WRITER", "MODIFY_VOLUME", "GET_SNAPSHOT",
};
static const char *const node_cap_names[] = {
	"UNKNOWN", "STAGE_UNSTAGE_VOLUME", "GET_VOLUME_STATS", "EXPAND_VOLUME",
	"VOLUME_CONDITION", "SINGLE_NODE_MULTI_WRITER", "VOLUME_MOUNT_GROUP",
};
static const char *const plugin_cap_names[] = {
	"UNKNOWN", "CONTROLLER_SERVICE", "VOLUME_ACCESSIBILITY_CONSTRAINTS", "GROUP_CONTROLLER_SERVICE",
};

int plugin_caps(struct plugin *p, struct csi_caps *ret, struct nerr *err)
{
	struct csi_caps caps;
	int r;

	pthread_mutex_lock(&p->lock);
	if (p->have_caps) {
		*ret = p->caps;
		pthread_mutex_unlock(&p->lock);
		return 0;
	}
	pthread_mutex_unlock(&p->lock);
	r = csi_get_caps(p->csi, &caps, err);
	if (r < 0)
		return r;
	pthread_mutex_lock(&p->lock);
	p->caps = caps;
	p->have_caps = true;
	pthread_mutex_unlock(&p->lock);
	*ret = caps;
	return 0;
}

/* The capabilities as last fetched, without a call: for checks on FUSE
 * threads, which must not wait on a plugin. false when never fetched. */
bool plugin_caps_cached(struct plugin *p, struct csi_caps *ret)
{
	bool have;

	pthread_mutex_lock(&p->lock);
	have = p->have_caps;
	if (have)
		*ret = p->caps;
	pthread_mutex_unlock(&p->lock);
	return have;
}

int plugin_node_id(struct plugin *p, char *buf, size_t len, struct nerr *err)
{
	Csi__V1__NodeGetInfoRequest req = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
	ProtobufCMessage *resp;
	struct csi_result res;
	int r;

	pthread_mutex_lock(&p->lock);
	if (p->node_id[0]) {
		snprintf(buf, len, "%s", p->node_id);
		pthread_mutex_unlock(&p->lock);
		return 0;
	}
	pthread_mutex_unlock(&p->lock);
	r = csi_call(p->csi, CSI_RPC_NODE_GET_INFO, &req.base, &resp, &res, err);
	if (r < 0)
		return r;
	pthread_mutex_lock(&p->lock);
	snprintf(p->node_id, sizeof(p->node_id), "%s",
		 ((Csi__V1__NodeGetInfoResponse *)resp)->node_id ?: "");
	snprintf(buf, len, "%s", p->node_id);
	pthread_mutex_unlock(&p->lock);
	protobuf_c_message_free_unpacked(resp, NULL);
	return 0;
}

struct csi_plugin *plugin_csi(struct plugin *p)
{
	return p->csi;
}

const char *plugin_name(struct plugin *p)
{
	return p->name;
}

static void refresh_capacity(struct plugin *p, const struct csi_caps *caps, struct sbuf *out)
{
	struct backend *b = p->b;

	if (!CSI_CAP(caps->controller, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_CAPACITY)) {
		sbuf_adds(out, "unsupported: the plugin has no GET_CAPACITY capability\n");
		return;
	}
	for (size_t i = 0; i <= b->cfg->nprofiles; i++) {
		const struct config_profile *pr = i < b->cfg->nprofiles ? &b->cfg->profiles[i] : NULL;
		Csi__V1__GetCapacityRequest req = CSI__V1__GET_CAPACITY_REQUEST__INIT;
		Csi__V1__VolumeCapability cap;
		Csi__V1__VolumeCapability__MountVolume mnt;
		Csi__V1__VolumeCapability__AccessMode am;
		Csi__V1__VolumeCapability *caps1[1] = { &cap };
		struct csi_kv_array params = { 0 };
		ProtobufCMessage *resp;
		struct csi_result res;
		struct nerr err = { 0 };

		if (pr && (!pr->plugin || strcmp(pr->plugin, p->name) != 0))
			continue;
		volume_capability_build(pr ? pr->access_mode : NULL, pr ? pr->fs_type : NULL,
					pr ? pr->mount_flags : NULL, &cap, &mnt, &am);
		req.n_volume_capabilities = 1;
		req.volume_capabilities = caps1;
		if (pr && csi_kv_array_from_strv(&params, pr->params) == 0) {
			req.n_parameters = params.n;
			req.parameters = (Csi__V1__GetCapacityRequest__ParametersEntry **)params.v;
		}
		if (csi_call(p->csi, CSI_RPC_GET_CAPACITY, &req.base, &resp, &res, &err) >= 0) {
			sbuf_printf(out, "%s %lld\n", pr ? pr->name : "default",
				    (long long)((Csi__V1__GetCapacityResponse *)resp)->available_capacity);
			protobuf_c_message_free_unpacked(resp, NULL);
		} else {
			sbuf_printf(out, "%s error: %s\n", pr ? pr->name : "default", err.msg);
		}
		csi_kv_array_free(&params);
	}
}

static void refresh_volumes(struct plugin *p, const struct csi_caps *caps, struct sbuf *out)
{
	Csi__V1__ListVolumesRequest req = CSI__V1__LIST_VOLUMES_REQUEST__INIT;
	struct volume_index *ix;
	char *token = NULL;

	if (!CSI_CAP(caps->controller, CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_VOLUMES)) {
		sbuf_adds(out, "unsupported: the plugin has no LIST_VOLUMES capability\n");
		return;
	}
	ix = volume_index_new(p->b, p->name);
	if (!ix) {
		sbuf_adds(out, "error: out of memory\n");
		return;
	}
	for (int pages = 0; pages < 1000; pages++) {
		Csi__V1__ListVolumesResponse *lr;
		ProtobufCMessage *resp;
		struct csi_result res;
		struct nerr err = { 0 };

		req.starting_token = token ? token : (char *)"";
		if (csi_call(p->csi, CSI_RPC_LIST_VOLUMES, &req.base, &resp, &res, &err) < 0) {
			sbuf_printf(out, "error: %s\n", err.msg);
			break;
		}
		lr = (Csi__V1__ListVolumesResponse *)resp;
		for (size_t i = 0; i < lr->n_entries; i++) {
			Csi__V1__Volume *v = lr->entries[i]->volume;
			const char *known;

			if (!v || !v->volume_id)
				continue;
			if ((known = volume_index_find(ix, v->volume_id)))
				sbuf_printf(out, "%s %lld known %s\n", v->volume_id,
					    (long long)v->capacity_bytes, known);
			else
				sbuf_printf(out, "%s %lld discovered\n", v->volume_id,
					    (long long)v->capacity_bytes);
		}
		free(token);
		token = lr->next_token && lr->next_token[0] ? strdup(lr->next_token) : NULL;
		protobuf_c_message_free_unpacked(resp, NULL);
		if (!token)
			break;
	}
	free(token);
	volume_index_free(ix);
}

static void plugin_refresh(void *arg)
{
	struct bnode *n = arg;
	struct plugin *p = pof(n);
	struct sbuf cap = SBUF_INIT(1u << 20), vols = SBUF_INIT(8u << 20);
	struct nerr err = { 0 };
	struct csi_caps caps;
	char *iname = NULL, *iver = NULL;
	char node_id[256];
	int r;

	/* a refresh still queued at a stop would only hold the exit up */
	if (atomic_load(&n->dead) || atomic_load(&p->b->state) == BACKEND_STOPPING)
		goto out;
	pthread_mutex_lock(&p->lock);
	p->lists_stale = false;		/* a change from now on marks it again */
	pthread_mutex_unlock(&p->lock);
	r = csi_get_plugin_info(p->csi, &iname, &iver, &err);
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
		r = csi_get_caps(p->csi, &caps, &err);
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
		refresh_volumes(p, &caps, &vols);
		volumes_refresh_stats(p->b, p->name);
	}
	pthread_mutex_lock(&p->lock);
	if (r >= 0) {
		sbuf_free(&p->capacity);
		p->capacity = cap;
		sbuf_free(&p->volumes);
		p->volumes = vols;
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
	bnode_unref(n);
}

static void plugin_refresh_soon(struct plugin *p)
{
	bool go;

	if (!p->csi)
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

	if (bnode_list(b->plugins, &v, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct plugin *p = pof(v[i]);
		struct csi_health_info h;
		bool stale;

		if (!p->csi)
			continue;
		csi_plugin_health(p->csi, &h);
		pthread_mutex_lock(&p->lock);
		stale = (h.health == CSI_HEALTH_READY && p->last_health != CSI_HEALTH_READY) ||
			(every && (uint64_t)(time(NULL) - p->refreshed) >= every);
		if (h.health != p->last_health) {
			const char *old = csi_health_to_string(p->last_health);
			p->last_health = h.health;
			pthread_mutex_unlock(&p->lock);
			events_emit(b->events, "plugin", p->name, old, csi_health_to_string(h.health),
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

/* ---- files ---- */

static int show_endpoint(struct bnode *n, struct sbuf *out)
{
	return sbuf_printf(out, "%s\n", pof(n)->endpoint);
}

static int show_info(struct bnode *n, struct sbuf *out)
{
	struct plugin *p = pof(n);
	int r;

	pthread_mutex_lock(&p->lock);
	if (p->have_info)
		r = sbuf_printf(out, "name: %s\nvendor_version: %s\n", p->info_name, p->info_version);
	else
		r = sbuf_printf(out, "unknown: %s\n",
				p->refresh_error[0] ? p->refresh_error : "not fetched yet");
	pthread_mutex_unlock(&p->lock);
	return r;
}

static void cap_line(struct sbuf *out, const char *what, uint32_t set, const char *const *names,
		     size_t nnames)
{
	sbuf_printf(out, "%s:", what);
	for (size_t i = 1; i < 32; i++)
		if ((set >> i) & 1u) {
			if (i < nnames)
				sbuf_printf(out, " %s", names[i]);
			else
				sbuf_printf(out, " %zu", i);
		}
	sbuf_addc(out, '\n');
}

static int show_capabilities(struct bnode *n, struct sbuf *out)
{
	struct plugin *p = pof(n);
	struct csi_caps c;
	bool have;

	pthread_mutex_lock(&p->lock);
	have = p->have_caps;
	c = p->caps;
	pthread_mutex_unlock(&p->lock);
	if (!have)
		return sbuf_printf(out, "unknown: not fetched yet\n");
	cap_line(out, "plugin", c.plugin, plugin_cap_names, sizeof(plugin_cap_names) / sizeof(char *));
	cap_line(out, "controller", c.controller, ctl_cap_names, sizeof(ctl_cap_names) / sizeof(char *));
	cap_line(out, "node", c.node, node_cap_names, sizeof(node_cap_names) / sizeof(char *));
	return sbuf_printf(out, "expansion: %s%s\n",
			   (c.expansion >> 1) & 1u ? "ONLINE " : "", (c.expansion >> 2) & 1u ? "OFFLINE" : "");
}

static int show_health(struct bnode *n, struct sbuf *out)
{
	struct plugin *p = pof(n);
	struct csi_health_info h = { .health = CSI_HEALTH_DOWN };
	char t[64] = "";
	struct tm tm;

	if (p->csi)
		csi_plugin_health(p->csi, &h);
	if (h.since) {
		gmtime_r(&h.since, &tm);
		strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%SZ", &tm);
	}
	if (h.reason[0])
		return sbuf_printf(out, "%s since %s: %s\n", csi_health_to_string(h.health), t, h.reason);
	return sbuf_printf(out, "%s since %s\n", csi_health_to_string(h.health), t);
}

static int show_cached(struct plugin *p, struct sbuf *src, struct sbuf *out)
{
	int r;

	pthread_mutex_lock(&p->lock);
	if (p->have_lists)
		r = sbuf_add(out, src->buf ? src->buf : "", src->len);
	else
		r = sbuf_printf(out, "unknown: %s\n",
				p->refresh_error[0] ? p->refresh_error : "not fetched yet");
	pthread_mutex_unlock(&p->lock);
	return r;
}

/* A volume of plugin `name` was made, adopted or deleted: the capacity and
 * volume lists are refreshed when next read (in the background: that read
 * still shows the cached lists). Any thread. */
void plugin_lists_stale(struct backend *b, const char *name)
{
	struct bnode *n = bnode_lookup(b->plugins, name);

	if (!n)
		return;
	pthread_mutex_lock(&pof(n)->lock);
	pof(n)->lists_stale = true;
	pthread_mutex_unlock(&pof(n)->lock);
	bnode_unref(n);
}

static void refresh_if_stale(struct plugin *p)
{
	bool stale;

	pthread_mutex_lock(&p->lock);
	stale = p->lists_stale;
	pthread_mutex_unlock(&p->lock);
	if (stale)
		plugin_refresh_soon(p);
}

static int show_capacity(struct bnode *n, struct sbuf *out)
{
	refresh_if_stale(pof(n));
	return show_cached(pof(n), &pof(n)->capacity, out);
}

static int show_volumes(struct bnode *n, struct sbuf *out)
{
	refresh_if_stale(pof(n));
	return show_cached(pof(n), &pof(n)->volumes, out);
}

static int show_info_json(struct bnode *n, struct sbuf *out)
{
	struct plugin *p = pof(n);
	struct csi_health_info h = { .health = CSI_HEALTH_DOWN };
	json_t *j, *caps = json_object();

	if (p->csi)
		csi_plugin_health(p->csi, &h);
	pthread_mutex_lock(&p->lock);
	if (p->have_caps) {
		json_object_set_new(caps, "plugin", json_integer(p->caps.plugin));
		json_object_set_new(caps, "controller", json_integer(p->caps.controller));
		json_object_set_new(caps, "node", json_integer(p->caps.node));
	}
	j = json_pack("{s:s, s:s, s:b, s:s?, s:s?, s:s, s:I, s:s, s:o, s:s}",
		      "name", p->name, "endpoint", p->endpoint, "from_config", p->from_config,
		      "plugin_name", p->have_info ? p->info_name : NULL,
		      "vendor_version", p->have_info ? p->info_version : NULL,
		      "health", csi_health_to_string(h.health), "health_since_unix", (json_int_t)h.since,
		      "health_reason", h.reason, "capabilities", caps, "node_id", p->node_id);
	pthread_mutex_unlock(&p->lock);
	return show_json(out, j);
}

static const struct battr plugin_attrs[] = {
	{ .name = "endpoint", .show = show_endpoint },
	{ .name = "info", .show = show_info },
	{ .name = "capabilities", .show = show_capabilities },
	{ .name = "health", .flags = BATTR_POLL, .show = show_health },
	{ .name = "capacity", .show = show_capacity },
	{ .name = "volumes", .show = show_volumes },
	{ .name = "error", .show = battr_show_error },
	{ .name = "info.json", .show = show_info_json },
};

static void plugin_node_free(struct bnode *n)
{
	plugin_free(n->priv);
}

static const struct btype plugin_type = {
	.name = "plugin",
	.attrs = plugin_attrs,
	.nattrs = sizeof(plugin_attrs) / sizeof(plugin_attrs[0]),
	.free = plugin_node_free,
};

static void on_csi_health(void *userdata)
{
	engines_poke_plugins(userdata);
}

static int plugin_connect(struct plugin *p, struct nerr *err)
{
	struct backend *b = p->b;
	struct csi_retry retry = {
		.backoff_ms = b->cfg->retry_backoff_ms,
		.max_ms = b->cfg->retry_max_ms,
	};
	int r;

	r = csi_plugin_new(b->loop, p->name, p->endpoint, &retry, b->cfg->csi_timeout_ms,
			   &p->csi, err);
	if (r < 0)
		return r;
	/* A change of health is an event at once, not at the monitor's next
	 * tick: the monitor is woken to look (plugins_tick). */
	csi_plugin_on_health(p->csi, on_csi_health, b);
	plugin_refresh_soon(p);
	return 0;
}

static int valid_endpoint(const char *ep, struct nerr *err)
{
	static const char pre[] = "unix://";

	if (strncmp(ep, pre, sizeof(pre) - 1) != 0 || ep[sizeof(pre) - 1] != '/')
		return nerr_set(err, EINVAL, "endpoint '%s' is not unix:///absolute/path", ep);
	return valid_path(ep + sizeof(pre) - 1, NULL, 0, err);
}

static int plugin_add(struct backend *b, const char *name, const char *endpoint,
		      bool from_config, struct nerr *err)
{
	struct plugin *p;
	struct bnode *n;
	int r;

	r = valid_name(name, err);
	if (r < 0)
		return r;
	r = valid_endpoint(endpoint, err);
	if (r < 0)
		return r;
	p = calloc(1, sizeof(*p));
	if (!p)
		return nerr_set(err, ENOMEM, "out of memory");
	p->b = b;
	p->name = strdup(name);
	p->endpoint = strdup(endpoint);
	p->from_config = from_config;
	p->last_health = CSI_HEALTH_DOWN;
	pthread_mutex_init(&p->lock, NULL);
	sbuf_init(&p->capacity, 1u << 20);
	sbuf_init(&p->volumes, 8u << 20);
	if (!p->name || !p->endpoint) {
		plugin_free(p);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	n = bnode_new(&plugin_type, name, p);
	if (!n) {
		plugin_free(p);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	p->node = n;
	r = bnode_add(b->plugins, n);
	if (r < 0) {
		bnode_unref(n);
		if (r == -EEXIST)
			return nerr_set(err, EEXIST, "plugin '%s' exists", name);
		return nerr_set(err, -r, "plugin '%s': %s", name, strerror(-r));
	}
	if (b->loop_running) {
		r = plugin_connect(p, err);
		if (r < 0) {
			bnode_remove(n);
			bnode_unref(n);
			return r;
		}
	}
	bnode_unref(n);
	events_emit(b->events, "plugin", name, NULL, "added", NULL, endpoint);
	return 0;
}

struct plugin *plugin_get(struct backend *b, const char *name, struct bnode **ret_node)
{
	struct bnode *n = bnode_lookup(b->plugins, name);

	if (!n)
		return NULL;
	*ret_node = n;
	return pof(n);
}

static int cmd_add(struct bnode *n, const struct ctl_cmd *c, struct breq *rq)
{
	return plugin_add(node_backend(n), c->argv[1], c->argv[2], false, &rq->err);
}

static int cmd_remove(struct bnode *n, const struct ctl_cmd *c, struct breq *rq)
{
	struct backend *b = node_backend(n);
	struct bnode *k = bnode_lookup(b->plugins, c->argv[1]);
	char user[80];

	if (!k)
		return nerr_set(&rq->err, ENOENT, "no plugin '%s'", c->argv[1]);
	for (size_t i = 0; i < b->cfg->nprofiles; i++) {
		const char *pp = b->cfg->profiles[i].plugin;
		if (pp && strcmp(pp, c->argv[1]) == 0) {
			bnode_unref(k);
			return nerr_set(&rq->err, EBUSY, "plugin '%s' is used by profile '%s'",
					c->argv[1], b->cfg->profiles[i].name);
		}
	}
	if (volume_uses_plugin(b, c->argv[1], user, sizeof(user))) {
		bnode_unref(k);
		return nerr_set(&rq->err, EBUSY, "plugin '%s' holds volume '%s'", c->argv[1], user);
	}
	bnode_remove(k);
	bnode_unref(k);
	events_emit(b->events, "plugin", c->argv[1], "added", "removed", NULL, NULL);
	return 0;
}

static const struct ctl_spec plugins_specs[] = {
	{ .name = "add", .min_args = 2, .max_args = 2, .usage = "add NAME ENDPOINT" },
	{ .name = "remove", .min_args = 1, .max_args = 1, .usage = "remove NAME" },
};
static const bctl_fn plugins_fns[] = { cmd_add, cmd_remove };
static const struct bctl_table plugins_ctl = { plugins_specs, plugins_fns, 2 };
BCTL_FUNCS(plugins_ctl, plugins_ctl)

static const struct battr plugins_attrs[] = {
	BCTL_ATTR(plugins_ctl),
	{ .name = "error", .show = battr_show_error },
};

const struct btype plugins_type = {
	.name = "plugins",
	.attrs = plugins_attrs,
	.nattrs = sizeof(plugins_attrs) / sizeof(plugins_attrs[0]),
};

int plugins_init(struct backend *b, struct nerr *err)
{
	for (size_t i = 0; i < b->cfg->nplugins; i++) {
		struct config_plugin *cp = &b->cfg->plugins[i];
		int r = plugin_add(b, cp->name, cp->endpoint, true, err);

		if (r < 0)
			return r;
	}
	return 0;
}

/* The loop runs: connect every plugin. */
int plugins_start(struct backend *b, struct nerr *err)
{
	struct bnode **v;
	size_t n;
	int r = 0;

	if (bnode_list(b->plugins, &v, &n) < 0)
		return nerr_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n && r >= 0; i++)
		r = plugin_connect(pof(v[i]), err);
	bnode_list_free(v, n);
	return r;
}

/* Before the loop stops: close every connection (blocked calls return). */
void plugins_stop(struct backend *b)
{
	struct bnode **v;
	size_t n;

	if (!b->plugins || bnode_list(b->plugins, &v, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct plugin *p = pof(v[i]);
		csi_plugin_free(p->csi);
		p->csi = NULL;
	}
	bnode_list_free(v, n);
}

int plugins_render_metrics(struct backend *b, struct sbuf *out)
{
	struct bnode **v;
	size_t n;
	int r;

	if (bnode_list(b->plugins, &v, &n) < 0)
		return -ENOMEM;
	r = sbuf_adds(out, "# HELP nodefs_csi_plugin_up 1 when the plugin answers Probe as ready.\n"
			   "# TYPE nodefs_csi_plugin_up gauge\n");
	for (size_t i = 0; r >= 0 && i < n; i++) {
		struct plugin *p = pof(v[i]);
		struct csi_health_info h = { .health = CSI_HEALTH_DOWN };

		if (p->csi)
			csi_plugin_health(p->csi, &h);
		r = sbuf_printf(out, "nodefs_csi_plugin_up{plugin=\"%s\"} %d\n", p->name,
				h.health == CSI_HEALTH_READY);
	}
	static const struct { const char *name, *type, *help; } fam[] = {
		{ "nodefs_csi_rpcs_pending", "gauge", "CSI calls in flight." },
		{ "nodefs_csi_rpcs_total", "counter", "CSI calls completed, by gRPC status code." },
		{ "nodefs_csi_rpc_duration_seconds", "histogram", "CSI call latency, retries included." },
	};
	for (size_t f = 0; r >= 0 && f < 3; f++) {
		r = sbuf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", fam[f].name, fam[f].help,
				fam[f].name, fam[f].type);
		for (size_t i = 0; r >= 0 && i < n; i++) {
			struct plugin *p = pof(v[i]);
			struct csi_metrics m;

			if (!p->csi)
				continue;
			csi_plugin_metrics(p->csi, &m);
			for (int rpc = 0; r >= 0 && rpc < _CSI_RPC_MAX; rpc++) {
				const struct csi_rpc_metrics *x = &m.rpc[rpc];
				const char *rn = csi_rpc_to_string(rpc);

				if (f == 0) {
					r = sbuf_printf(out, "%s{plugin=\"%s\",rpc=\"%s\"} %llu\n", fam[f].name,
							p->name, rn, (unsigned long long)x->pending);
				} else if (f == 1) {
					if (x->successes)
						r = sbuf_printf(out, "%s{plugin=\"%s\",rpc=\"%s\",code=\"OK\"} %llu\n",
								fam[f].name, p->name, rn,
								(unsigned long long)x->successes);
					for (int c = 1; r >= 0 && c < _GRPC_CODE_MAX; c++)
						if (x->errors[c])
							r = sbuf_printf(out, "%s{plugin=\"%s\",rpc=\"%s\",code=\"%s\"} %llu\n",
									fam[f].name, p->name, rn,
									grpc_code_to_string(c),
									(unsigned long long)x->errors[c]);
				} else if (x->count) {
					uint64_t cum = 0;
					for (int k = 0; r >= 0 && k < CSI_LATENCY_BUCKETS; k++) {
						cum += x->hist[k];
						r = sbuf_printf(out, "%s_bucket{plugin=\"%s\",rpc=\"%s\",le=\"%g\"} %llu\n",
								fam[f].name, p->name, rn, csi_latency_buckets[k],
								(unsigned long long)cum);
					}
					if (r >= 0)
						r = sbuf_printf(out, "%s_bucket{plugin=\"%s\",rpc=\"%s\",le=\"+Inf\"} %llu\n"
								"%s_sum{plugin=\"%s\",rpc=\"%s\"} %.6f\n"
								"%s_count{plugin=\"%s\",rpc=\"%s\"} %llu\n",
								fam[f].name, p->name, rn, (unsigned long long)x->count,
								fam[f].name, p->name, rn, x->latency_sum,
								fam[f].name, p->name, rn, (unsigned long long)x->count);
				}
			}
		}
	}
	bnode_list_free(v, n);
	return r;
}
