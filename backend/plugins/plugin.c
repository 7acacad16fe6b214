/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plugin: plugins/ and plugins/NAME/, the CSI plugins nodefs talks to.
 *
 * Plugins come from the config and from `plugins/ctl add NAME ENDPOINT`.
 * Each holds a storage handle (storage.h; csi_storage_ops: one gRPC
 * connection on the event loop), reached only through struct storage_ops:
 * this module never sees a CSI message. What the files show that needs a
 * call (info, capabilities, node id, capacity, the plugin's volume list) is
 * fetched by a refresh on the worker pool — at start, when the plugin
 * becomes READY, and every reconcile_interval — and served from that
 * cache (plugin-refresh.c), so a read never waits on a plugin. health
 * follows Probe and the connection, live.
 */
#include "backend-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#include "jw.h"
#include "log.h"
#include "profiles.h"
#include "macro.h"
#include "plugin-internal.h"
#include "plugin-proc.h"
#include "secrets.h"
#include "units.h"
#include "valid.h"


static void plugin_free(struct plugin *p)
{
	if (!p)
		return;
	if (p->h)
		p->ops->close(p->h);
	pproc_unref(p->proc);
	free(p->name);
	free(p->endpoint);
	free(p->secrets);
	sbuf_free(&p->capacity);
	sbuf_free(&p->volumes);
	sbuf_free(&p->snapshots);
	plugin_vols_free(p->vols, p->nvols);
	pthread_mutex_destroy(&p->lock);
	free(p);
}


/* The backend's storage implementation: CSI unless a test set another. */
static const struct storage_ops *storage_of(struct backend *b)
{
	return b->storage ? b->storage : &csi_storage_ops;
}

const char *plugin_health_name(enum storage_health h)
{
	switch (h) {
	case STORAGE_HEALTH_READY: return "READY";
	case STORAGE_HEALTH_NOT_READY: return "NOT_READY";
	default: return "DOWN";
	}
}

/* The health of a plugin; DOWN while it has no handle. */
static void plugin_health(struct plugin *p, struct storage_health_info *ret)
{
	*ret = (struct storage_health_info){ .health = STORAGE_HEALTH_DOWN };
	if (p->h)
		p->ops->health(p->h, ret);
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

int plugin_caps(struct plugin *p, struct storage_caps *ret, struct nerr *err)
{
	struct storage_caps caps;
	int r;

	pthread_mutex_lock(&p->lock);
	if (p->have_caps) {
		*ret = p->caps;
		pthread_mutex_unlock(&p->lock);
		return 0;
	}
	pthread_mutex_unlock(&p->lock);
	r = p->ops->capabilities(p->h, &caps, err);
	if (r < 0)
		return r;
	pthread_mutex_lock(&p->lock);
	p->caps = caps;
	p->have_caps = true;
	pthread_mutex_unlock(&p->lock);
	*ret = caps;
	return 0;
}

bool plugin_caps_cached(struct plugin *p, struct storage_caps *ret)
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
	char *id;
	int r;

	pthread_mutex_lock(&p->lock);
	if (p->node_id[0]) {
		snprintf(buf, len, "%s", p->node_id);
		pthread_mutex_unlock(&p->lock);
		return 0;
	}
	pthread_mutex_unlock(&p->lock);
	r = p->ops->node_info(p->h, &id, err);
	if (r < 0)
		return r;
	pthread_mutex_lock(&p->lock);
	snprintf(p->node_id, sizeof(p->node_id), "%s", id);
	snprintf(buf, len, "%s", p->node_id);
	pthread_mutex_unlock(&p->lock);
	free(id);
	return 0;
}

int plugin_probe(struct bnode *node, bool *ready, struct nerr *err)
{
	struct plugin *p = node->priv;

	if (!p->h)
		return -ECANCELED;
	return p->ops->probe(p->h, ready, err);
}

void profiles_capacity(struct backend *b,
		       void (*fn)(void *ctx, const char *profile, long long bytes), void *ctx)
{
	struct bnode **v;
	size_t n;

	if (!plugins_dir(b) || bnode_list(plugins_dir(b), &v, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct plugin *p = pof(v[i]);
		char *text;

		pthread_mutex_lock(&p->lock);
		text = p->capacity.buf ? strndup(p->capacity.buf, p->capacity.len) : NULL;
		pthread_mutex_unlock(&p->lock);
		for (char *save = NULL, *line = text ? strtok_r(text, "\n", &save) : NULL; line;
		     line = strtok_r(NULL, "\n", &save)) {
			char name[65], *end;
			const char *num;
			long long bytes;

			if (sscanf(line, "%64s", name) != 1 || strcmp(name, "default") == 0)
				continue;
			num = line + strlen(name);
			if (*num != ' ' || !num[1])
				continue;
			bytes = strtoll(num + 1, &end, 10);
			if (*end == '\0' && bytes >= 0)
				fn(ctx, name, bytes);
		}
		free(text);
	}
	bnode_list_free(v, n);
}

const struct storage_ops *plugin_ops(struct plugin *p)
{
	return p->ops;
}

void *plugin_handle(struct plugin *p)
{
	return p->h;
}

const char *plugin_name(struct plugin *p)
{
	return p->name;
}

char *plugin_secrets_dup(struct backend *b, const char *name)
{
	struct bnode *n = bnode_lookup(plugins_dir(b), name);
	char *s = n && pof(n)->secrets ? strdup(pof(n)->secrets) : NULL;

	bnode_unref(n);
	return s;
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
	struct storage_caps c;
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
	struct storage_health_info h;
	char t[64] = "";
	struct tm tm;

	plugin_health(p, &h);
	if (p->proc && h.health != STORAGE_HEALTH_READY)
		pproc_health(p->proc, &h);	/* no process: why */
	if (h.since) {
		gmtime_r(&h.since, &tm);
		strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%SZ", &tm);
	}
	if (h.reason[0])
		return sbuf_printf(out, "%s since %s: %s\n", plugin_health_name(h.health), t, h.reason);
	return sbuf_printf(out, "%s since %s\n", plugin_health_name(h.health), t);
}

static int show_capacity(struct bnode *n, struct sbuf *out)
{
	plugin_refresh_if_stale(pof(n));
	return plugin_show_cached(pof(n), &pof(n)->capacity, out);
}

static int show_volumes(struct bnode *n, struct sbuf *out)
{
	plugin_refresh_if_stale(pof(n));
	return plugin_show_volumes(pof(n), out);
}

static int show_snapshots(struct bnode *n, struct sbuf *out)
{
	plugin_refresh_if_stale(pof(n));
	return plugin_show_snapshots(pof(n), out);
}

/* Rendered with common/jw.c, the one writer of what nodefs shows: the
 * text is what jansson's JSON_INDENT(2) dump of the same members gave. */
static int show_info_json(struct bnode *n, struct sbuf *out)
{
	struct plugin *p = pof(n);
	struct storage_health_info h;
	struct jw w;
	int r;

	plugin_health(p, &h);
	jw_init(&w, out, 2);
	pthread_mutex_lock(&p->lock);
	jw_obj(&w);
	jw_kstr(&w, "name", p->name);
	jw_kstr(&w, "endpoint", p->endpoint);
	jw_kbool(&w, "from_config", p->from_config);
	jw_kstr(&w, "plugin_name", p->have_info ? p->info_name : NULL);
	jw_kstr(&w, "vendor_version", p->have_info ? p->info_version : NULL);
	jw_kstr(&w, "health", plugin_health_name(h.health));
	jw_kint(&w, "health_since_unix", (long long)h.since);
	jw_kstr(&w, "health_reason", h.reason);
	jw_key(&w, "capabilities");
	jw_obj(&w);
	if (p->have_caps) {
		jw_kint(&w, "plugin", p->caps.plugin);
		jw_kint(&w, "controller", p->caps.controller);
		jw_kint(&w, "node", p->caps.node);
	}
	jw_obj_end(&w);
	jw_kstr(&w, "node_id", p->node_id);
	jw_obj_end(&w);
	pthread_mutex_unlock(&p->lock);
	r = jw_end(&w);
	return r < 0 ? r : sbuf_adds(out, "\n");
}

static int show_process(struct bnode *n, struct sbuf *out)
{
	if (!pof(n)->proc)
		return sbuf_adds(out, "external: nodefs does not start this plugin\n");
	return pproc_show_process(pof(n)->proc, out);
}

static int show_log(struct bnode *n, struct sbuf *out)
{
	return pof(n)->proc ? pproc_show_log(pof(n)->proc, out) : 0;
}

static const struct battr plugin_attrs[] = {
	{ .name = "endpoint", .show = show_endpoint },
	{ .name = "process", .show = show_process },
	{ .name = "log", .flags = BATTR_PRIV, .show = show_log },
	{ .name = "info", .show = show_info },
	{ .name = "capabilities", .show = show_capabilities },
	{ .name = "health", .flags = BATTR_POLL, .show = show_health },
	{ .name = "capacity", .show = show_capacity },
	{ .name = "volumes", .show = show_volumes },
	{ .name = "snapshots", .show = show_snapshots },
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

static void on_health(void *userdata)
{
	engines_poke_plugins(userdata);
}

static int plugin_connect(struct plugin *p, struct nerr *err)
{
	struct backend *b = p->b;
	struct storage_config sc = {
		.name = p->name,
		.endpoint = p->endpoint,
		.retry_backoff_ms = b->cfg->retry_backoff_ms,
		.retry_max_ms = b->cfg->retry_max_ms,
		.timeout_ms = b->cfg->csi_timeout_ms,
	};
	int r;

	p->ops = storage_of(b);
	r = p->ops->open(b->loop, &sc, &p->h, err);
	if (r < 0)
		return r;
	/* A change of health is an event at once, not at the monitor's next
	 * tick: the monitor is woken to look (plugins_tick). */
	p->ops->on_health(p->h, on_health, b);
	if (p->proc && (r = pproc_start(p->proc, err)) < 0)
		return r;
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

/* What a plugin's definition says, whoever gives it (plugins/ctl, the
 * config, a record). */
static int plugin_def_check(const struct plugin_def *def, struct nerr *err)
{
	int r = valid_name(def->name, err);

	return r < 0 ? r : valid_endpoint(def->endpoint, err);
}

static int plugin_add(struct backend *b, const struct plugin_def *def, struct nerr *err)
{
	const char *name = def->name, *endpoint = def->endpoint;
	bool from_config = def->from_config;
	struct plugin *p;
	struct bnode *n;
	int r;

	r = plugin_def_check(def, err);
	if (r < 0)
		return r;
	p = calloc(1, sizeof(*p));
	if (!p)
		return nerr_set(err, ENOMEM, "out of memory");
	p->b = b;
	p->name = strdup(name);
	p->endpoint = strdup(endpoint);
	p->secrets = def->secrets ? strdup(def->secrets) : NULL;
	p->from_config = from_config;
	p->ops = storage_of(b);
	p->last_health = STORAGE_HEALTH_DOWN;
	pthread_mutex_init(&p->lock, NULL);
	sbuf_init(&p->capacity, 1u << 20);
	sbuf_init(&p->volumes, 1u << 20);
	sbuf_init(&p->snapshots, 1u << 20);
	if (!p->name || !p->endpoint || (def->secrets && !p->secrets)) {
		plugin_free(p);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	n = bnode_new(&plugin_type, name, p);
	if (!n) {
		plugin_free(p);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	p->node = n;
	if (plugin_def_started(def) && (r = pproc_new(b, def, n, &p->proc, err)) < 0) {
		bnode_unref(n);
		return r;
	}
	r = bnode_add(plugins_dir(b), n);
	if (r < 0) {
		bnode_unref(n);
		if (r == -EEXIST)
			return nerr_set(err, EEXIST, "plugin '%s' exists", name);
		return nerr_set(err, -r, "plugin '%s': %s", name, strerror(-r));
	}
	/* added at run time: back after a restart, with its volumes */
	if (!from_config && !def->from_record &&
	    (r = p->proc ? pproc_checkpoint(p->proc, err) : plugin_record_put(b, def, err)) < 0) {
		bnode_remove(n);
		bnode_unref(n);
		return r;
	}
	if (b->loop_running) {
		r = plugin_connect(p, err);
		if (r < 0) {
			if (p->proc)
				pproc_remove(p->proc);
			else if (!from_config)
				plugin_record_del(b, name, &(struct nerr){ 0 });
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
	struct bnode *n = bnode_lookup(plugins_dir(b), name);

	if (!n)
		return NULL;
	*ret_node = n;
	return pof(n);
}

/* A quoted word list option of add (command=, mounts=): *ret NULL when
 * absent. */
static int add_words(const struct ctl_cmd *c, const char *key, char ***ret, struct nerr *err)
{
	const char *v = ctl_opt_get(c, key);
	int r;

	*ret = NULL;
	if (!v)
		return 0;
	r = ctl_split_words(v, ret, err);
	if (r == 0) {
		ctl_strv_free(*ret);
		*ret = NULL;
		return nerr_set(err, EINVAL, "%s= is empty", key);
	}
	return r;
}

static int cmd_add(struct bnode *n, const struct ctl_cmd *c, struct breq *rq)
{
	struct backend *b = node_backend(n);
	const char *keep = ctl_opt_get(c, "keep_running"), *node = ctl_opt_get(c, "node");
	const char *priv = ctl_opt_get(c, "privileged");
	struct plugin_def def = { .name = c->argv[1], .endpoint = c->argv[2], .node = true,
				  .runtime = ctl_opt_get(c, "runtime"), .image = ctl_opt_get(c, "image"),
				  .secrets = ctl_opt_get(c, "secrets") };
	char **argv = NULL, **mounts = NULL;
	int r;

	if (keep && parse_bool(keep, &def.keep_running, &rq->err) < 0)
		return -rq->err.code;
	if ((node && parse_bool(node, &def.node, &rq->err) < 0) ||
	    (priv && parse_bool(priv, &def.privileged, &rq->err) < 0))
		return -rq->err.code;
	if ((r = add_words(c, "command", &argv, &rq->err)) < 0)
		return r;
	def.command = argv;
	if ((r = add_words(c, "mounts", &mounts, &rq->err)) < 0)
		goto out;
	def.mounts = mounts;
	if (keep && !plugin_def_started(&def))
		r = nerr_set(&rq->err, EINVAL, "keep_running needs command= or runtime=");
	else if (def.runtime && strcmp(def.runtime, "docker") != 0 && strcmp(def.runtime, "lxc") != 0)
		r = nerr_set(&rq->err, EINVAL, "runtime=?: plugins run as containers of docker or lxc");
	else if (!def.runtime != !def.image || ((mounts || node || priv) && !def.runtime))
		r = nerr_set(&rq->err, EINVAL, "%s", def.runtime ? "runtime= needs image=" :
			     def.image ? "image= needs runtime=" :
			     "mounts=, node= and privileged= need runtime=");
	else
		r = 0;
	for (size_t i = 0; r >= 0 && mounts && mounts[i]; i++)
		r = valid_path(mounts[i], NULL, 0, &rq->err);
	/* checked as the config's are (root's, no one else's), read at each call */
	if (r >= 0 && def.secrets)
		r = secrets_read(def.secrets, NULL, &rq->err);
	if (r < 0 || (r = plugin_def_check(&def, &rq->err)) < 0 || rq->dry_run)
		;	/* a dry run ends here: the rest looks at the plugins */
	else if (pproc_stopping(b, def.name))
		r = nerr_set(&rq->err, EBUSY, "plugin '%s' was removed and its process is still "
			     "stopping: try again", def.name);
	else
		r = plugin_add(b, &def, &rq->err);
out:
	ctl_strv_free(argv);
	ctl_strv_free(mounts);
	return r;
}

static void plugin_drop(struct backend *b, struct bnode *k);

int plugin_remove(struct backend *b, const char *name, struct nerr *err)
{
	struct bnode *k = bnode_lookup(plugins_dir(b), name);
	char user[80];

	if (!k)
		return nerr_set(err, ENOENT, "no plugin '%s'", name);
	const struct config *pc = profiles_config(b);

	for (size_t i = 0; i < pc->nprofiles; i++) {
		const char *pp = pc->profiles[i].plugin;
		if (pp && strcmp(pp, name) == 0) {
			bnode_unref(k);
			return nerr_set(err, EBUSY, "plugin '%s' is used by profile '%s'", name,
					pc->profiles[i].name);
		}
	}
	if (b->links && b->links->volume_uses_plugin &&
	    b->links->volume_uses_plugin(b, name, user, sizeof(user))) {
		bnode_unref(k);
		return nerr_set(err, EBUSY, "plugin '%s' holds volume '%s'", name, user);
	}
	plugin_drop(b, k);
	return 0;
}

/* Take plugin node k out of the tree (its process ended, its record
 * dropped); the caller's reference goes. No check: the caller made them. */
static void plugin_drop(struct backend *b, struct bnode *k)
{
	char name[128];

	snprintf(name, sizeof(name), "%s", pof(k)->name);
	if (pof(k)->proc)
		pproc_remove(pof(k)->proc);	/* ended, then its record goes */
	else if (!pof(k)->from_config)
		plugin_record_del(b, name, &(struct nerr){ 0 });
	bnode_remove(k);
	bnode_unref(k);
	events_emit(b->events, "plugin", name, "added", "removed", NULL, NULL);
}

static int cmd_remove(struct bnode *n, const struct ctl_cmd *c, struct breq *rq)
{
	int r = valid_name(c->argv[1], &rq->err);

	if (r < 0 || rq->dry_run)
		return r;
	return plugin_remove(node_backend(n), c->argv[1], &rq->err);
}

/* What a [plugin] section defines. */
static struct plugin_def config_def(const struct config_plugin *cp)
{
	return (struct plugin_def){
		.name = cp->name, .endpoint = cp->endpoint, .command = cp->command,
		.runtime = cp->runtime, .image = cp->image, .mounts = cp->mounts, .node = cp->node,
		.privileged = cp->privileged,
		.keep_running = cp->keep_running, .from_config = true,
	};
}

bool plugin_matches(struct plugin *p, const struct config_plugin *cp, bool *ret_from_config)
{
	*ret_from_config = p->from_config;
	struct plugin_def def = config_def(cp);

	if (strcmp(p->endpoint, cp->endpoint) != 0 || !p->proc != !plugin_def_started(&def))
		return false;
	return !p->proc || pproc_same(p->proc, &def);
}

int plugin_from_config(struct backend *b, const struct config_plugin *cp, bool replace,
		       struct nerr *err)
{
	struct plugin_def def = config_def(cp);
	struct bnode *k;
	int r;

	r = valid_name(cp->name, err);
	if (r >= 0)
		r = valid_endpoint(cp->endpoint, err);
	if (r < 0)
		return r;
	if (replace && (k = bnode_lookup(plugins_dir(b), cp->name)))
		plugin_drop(b, k);
	/* the process of the one replaced ends first: never two copies, and
	 * its record is gone before the new one's is written */
	for (int i = 0; i < 100 && pproc_stopping(b, cp->name); i++)
		usleep(100 * 1000);
	if (pproc_stopping(b, cp->name))
		return nerr_set(err, EBUSY, "plugin '%s': the process replaced is still stopping",
				cp->name);
	return plugin_add(b, &def, err);
}

static const char *const add_opts[] = { "command", "keep_running", "runtime", "image", "mounts",
					"node", "privileged", "secrets", NULL };
static const struct ctl_spec plugins_specs[] = {
	{ .name = "add", .min_args = 2, .max_args = 2, .opts = add_opts,
	  .usage = "add NAME ENDPOINT [command='PROGRAM ARGS...'] [keep_running=yes|no] "
		   "[runtime=docker|lxc image=IMAGE [mounts='PATH...'] [node=yes|no] "
		   "[privileged=yes|no]] [secrets=FILE]" },
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

/* A record of the state dir: a plugin added at run time comes back; one
 * whose process the config no longer starts has that process ended. */
static void plugin_from_record(void *ctx, const struct plugin_def *def)
{
	struct backend *b = ctx;
	const struct config_plugin *cp = config_plugin_find(b->cfg, def->name);
	struct plugin_def d = *def;
	struct nerr err = { 0 };

	if (def->from_config) {
		if (!cp || (!cp->command && !cp->runtime))
			plugin_record_retire(b, def->name);
		return;
	}
	if (cp) {
		log_warn("plugin %s: added at run time and now in the config: the config's is used",
			 def->name);
		plugin_record_retire(b, def->name);
		return;
	}
	d.from_record = true;
	if (plugin_add(b, &d, &err) < 0)
		log_warn("plugin %s: not brought back: %s", def->name, err.msg);
}

int plugins_init(struct backend *b, struct nerr *err)
{
	for (size_t i = 0; i < b->cfg->nplugins; i++) {
		struct config_plugin *cp = &b->cfg->plugins[i];
		struct plugin_def def = config_def(cp);
		int r = plugin_add(b, &def, err);

		if (r < 0)
			return r;
	}
	return plugin_records_load(b, plugin_from_record, b);
}

/* The loop runs: connect every plugin. */
int plugins_start(struct backend *b, struct nerr *err)
{
	struct bnode **v;
	size_t n;
	int r = 0;

	if (bnode_list(plugins_dir(b), &v, &n) < 0)
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

	if (!plugins_dir(b) || bnode_list(plugins_dir(b), &v, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct plugin *p = pof(v[i]);
		void *h = p->h;

		p->h = NULL;
		if (h)
			p->ops->close(h);
	}
	bnode_list_free(v, n);
	plugins_proc_stop(b, 5000);	/* the plugins nodefs started */
}

void plugins_cancel(struct backend *b)
{
	struct bnode **v;
	size_t n;

	if (!plugins_dir(b) || bnode_list(plugins_dir(b), &v, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct plugin *p = pof(v[i]);

		if (p->h && p->ops->cancel)
			p->ops->cancel(p->h);
	}
	bnode_list_free(v, n);
}

int plugins_render_metrics(struct backend *b, struct sbuf *out)
{
	struct bnode **v;
	size_t n;
	int r;

	if (bnode_list(plugins_dir(b), &v, &n) < 0)
		return -ENOMEM;
	r = sbuf_adds(out, "# HELP nodefs_csi_plugin_up 1 when the plugin answers Probe as ready.\n"
			   "# TYPE nodefs_csi_plugin_up gauge\n");
	for (size_t i = 0; r >= 0 && i < n; i++) {
		struct plugin *p = pof(v[i]);
		struct storage_health_info h;

		plugin_health(p, &h);
		r = sbuf_printf(out, "nodefs_csi_plugin_up{plugin=\"%s\"} %d\n", p->name,
				h.health == STORAGE_HEALTH_READY);
	}
	/* the call metrics, rendered by the implementation for all its
	 * plugins at once (one family after the other) */
	void **hs = calloc(n ? n : 1, sizeof(*hs));
	const char **names = calloc(n ? n : 1, sizeof(*names));
	const struct storage_ops *ops = storage_of(b);

	if (!hs || !names)
		r = -ENOMEM;
	for (size_t i = 0; r >= 0 && i < n; i++) {
		hs[i] = pof(v[i])->h;
		names[i] = pof(v[i])->name;
	}
	if (r >= 0 && ops->render_metrics)
		r = ops->render_metrics(hs, names, n, out);
	free(hs);
	free(names);
	bnode_list_free(v, n);
	return r;
}
