/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * container: containers/ and containers/NAME/, containers on the engines of
 * runtimes/ (Docker, LXC) and their lifecycle.
 *
 * What the Mesos Docker containerizer and Nomad's LXC driver do, as files:
 * create (pulling the image or building the rootfs), start, stop with a
 * timeout, kill, pause, resume, update, exec, destroy (which cancels a pull
 * in progress), usage (stats), logs, wait, and recovery after a restart.
 *
 * Every command is an operation run on the container's action queue, on the
 * worker pool: engine calls block, so they never run on a FUSE thread. State
 * follows the engine's event stream (driver watch()), not polling. Each
 * stable state is checkpointed under STATE_DIR/containers before the command
 * is acknowledged.
 */
#include "backend-internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "operation.h"
#include "reconcile.h"
#include "store.h"
#include "units.h"
#include "valid.h"

enum cstate {
	C_CREATED, C_PULLING, C_STARTING, C_RUNNING, C_PAUSED, C_STOPPING, C_EXITED,
	C_DESTROYING,
};

static const char *const cstate_names[] = {
	"CREATED", "PULLING", "STARTING", "RUNNING", "PAUSED", "STOPPING", "EXITED",
	"DESTROYING",
};

static const char *cstate_to_string(enum cstate s)
{
	return s <= C_DESTROYING ? cstate_names[s] : "UNKNOWN";
}

static int cstate_from_string(const char *s)
{
	for (int i = 0; i <= C_DESTROYING; i++)
		if (s && strcmp(s, cstate_names[i]) == 0)
			return i;
	return -1;
}

#define EXEC_OUT_CAP (1u << 20)
#define LOGS_MAX (1u << 20)

struct container {
	struct backend *b;
	struct bnode *node;		/* borrowed: the node owns the container */
	struct engine *eng;
	char name[65];
	struct actq q;

	/* the spec, as created; immutable after create except the limits */
	char *image;
	char **argv;
	struct rt_kv *env;
	size_t nenv;
	struct rt_mount *mounts;
	size_t nmounts;
	char **volumes;			/* VOLNAME of each volume= mount, NULL-terminated */
	char *template_name, *distro, *release, *arch, *image_variant, *image_server;
	char **template_args;
	bool flush_cache, force_cache, disable_gpg;

	pthread_mutex_t lock;		/* everything below */
	double cpus;
	uint64_t memory;
	int64_t pids;
	char *id;			/* engine id, NULL until created */
	enum cstate state;
	pid_t pid;
	bool has_exit;
	int exit_code;
	bool oom_killed;
	time_t started_at, finished_at;
	char progress[512];
	struct sbuf exec_out;
	bool has_exec;
	int exec_exit;
	struct rt_progress prog;	/* cancel is set by destroy */
	bool removed;
	/* An exit event is taken as news, not as the state: the inspect it
	 * queues moves the container to EXITED with the engine's final word
	 * (exit code and OOM flag together), so a waiter woken by EXITED never
	 * reads an OOM flag that is still on its way. */
	bool exit_pending;
	uint64_t exits[5];		/* nodefs_container_exits_total, by exit_reasons[] */
};

/* Why a container reached EXITED, for nodefs_container_exits_total. */
static const char *const exit_reasons[] = { "completed", "error", "signal", "oom", "lost" };
_Static_assert(ARRAY_SIZE(exit_reasons) == ARRAY_SIZE(((struct container *)0)->exits),
	       "one exit counter per reason");

/* Lock held. */
static int exit_reason_locked(const struct container *c)
{
	if (c->oom_killed)
		return 3;
	if (!c->has_exit || c->exit_code < 0)
		return 4;	/* gone from the engine, removed outside nodefs */
	if (c->exit_code == 0)
		return 0;
	return c->exit_code > 128 ? 2 : 1;
}

static struct container *cof(struct bnode *n)
{
	return n->priv;
}

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static char **strv_dup(char *const *v)
{
	size_t n = 0;
	char **r;

	while (v && v[n])
		n++;
	r = calloc(n + 1, sizeof(*r));
	if (!r)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!(r[i] = strdup(v[i]))) {
			strv_free(r);
			return NULL;
		}
	return r;
}

static void container_free(struct container *c)
{
	if (!c)
		return;
	free(c->image);
	strv_free(c->argv);
	for (size_t i = 0; i < c->nenv; i++) {
		free(c->env[i].key);
		free(c->env[i].val);
	}
	free(c->env);
	for (size_t i = 0; i < c->nmounts; i++) {
		free(c->mounts[i].source);
		free(c->mounts[i].target);
	}
	free(c->mounts);
	strv_free(c->volumes);
	free(c->template_name);
	free(c->distro);
	free(c->release);
	free(c->arch);
	free(c->image_variant);
	free(c->image_server);
	strv_free(c->template_args);
	free(c->id);
	sbuf_free(&c->exec_out);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* ---- state, checkpoints, events ---- */

static json_t *container_json_locked(struct container *c)
{
	json_t *j = json_object(), *a;
	char t[64];

	if (!j)
		return NULL;
	json_object_set_new(j, "name", json_string(c->name));
	json_object_set_new(j, "runtime", json_string(c->eng->ops->name));
	if (c->id)
		json_object_set_new(j, "id", json_string(c->id));
	json_object_set_new(j, "state", json_string(cstate_to_string(c->state)));
	if (c->image)
		json_object_set_new(j, "image", json_string(c->image));
	a = json_array();
	for (size_t i = 0; c->argv && c->argv[i]; i++)
		json_array_append_new(a, json_string(c->argv[i]));
	json_object_set_new(j, "cmd", a);
	a = json_object();
	for (size_t i = 0; i < c->nenv; i++)
		json_object_set_new(a, c->env[i].key, json_string(c->env[i].val));
	json_object_set_new(j, "env", a);
	a = json_array();
	for (size_t i = 0; i < c->nmounts; i++)
		json_array_append_new(a, json_pack("{s:s, s:s, s:b}", "source", c->mounts[i].source,
						   "target", c->mounts[i].target, "ro", c->mounts[i].ro));
	json_object_set_new(j, "mounts", a);
	a = json_array();
	for (size_t i = 0; c->volumes && c->volumes[i]; i++)
		json_array_append_new(a, json_string(c->volumes[i]));
	json_object_set_new(j, "volumes", a);
	json_object_set_new(j, "cpus", json_real(c->cpus));
	json_object_set_new(j, "memory", json_integer((json_int_t)c->memory));
	json_object_set_new(j, "pids", json_integer((json_int_t)c->pids));
#define OPTS(k) if (c->k) json_object_set_new(j, #k, json_string(c->k))
	OPTS(template_name);
	OPTS(distro);
	OPTS(release);
	OPTS(arch);
	OPTS(image_variant);
	OPTS(image_server);
#undef OPTS
	if (c->template_args) {
		a = json_array();
		for (size_t i = 0; c->template_args[i]; i++)
			json_array_append_new(a, json_string(c->template_args[i]));
		json_object_set_new(j, "template_args", a);
	}
	json_object_set_new(j, "flush_cache", json_boolean(c->flush_cache));
	json_object_set_new(j, "force_cache", json_boolean(c->force_cache));
	json_object_set_new(j, "disable_gpg", json_boolean(c->disable_gpg));
	json_object_set_new(j, "pid", json_integer(c->pid));
	if (c->has_exit)
		json_object_set_new(j, "exit_code", json_integer(c->exit_code));
	json_object_set_new(j, "oom_killed", json_boolean(c->oom_killed));
	json_object_set_new(j, "started_unix", json_integer((json_int_t)c->started_at));
	json_object_set_new(j, "finished_unix", json_integer((json_int_t)c->finished_at));
	fmt_time(c->started_at, t, sizeof(t));
	json_object_set_new(j, "started_at", json_string(t));
	fmt_time(c->finished_at, t, sizeof(t));
	json_object_set_new(j, "finished_at", json_string(t));
	return j;
}

static int checkpoint(struct container *c, struct nerr *err)
{
	json_t *j;
	int r;

	pthread_mutex_lock(&c->lock);
	j = container_json_locked(c);
	pthread_mutex_unlock(&c->lock);
	if (!j)
		return nerr_set(err, ENOMEM, "out of memory");
	r = store_put(c->b->cfg->state_dir, "containers", c->name, j, err);
	json_decref(j);
	return r;
}

static void set_state(struct container *c, enum cstate s, const char *msg)
{
	enum cstate old;

	pthread_mutex_lock(&c->lock);
	old = c->state;
	c->state = s;
	if (s == C_EXITED && old != C_EXITED)
		c->exits[exit_reason_locked(c)]++;
	pthread_mutex_unlock(&c->lock);
	if (old == s)
		return;
	bnode_changed(c->node);
	events_emit(c->b->events, "container", c->name, cstate_to_string(old),
		    cstate_to_string(s), NULL, msg);
}

static enum cstate state_of(struct container *c)
{
	enum cstate s;

	pthread_mutex_lock(&c->lock);
	s = c->state;
	pthread_mutex_unlock(&c->lock);
	return s;
}

/* Take what the engine reports. */
/* Take what the engine reports. An exit whose code the engine does not
 * know yet (-1: LXC's watcher records it when it sees init die, just after
 * liblxc already says STOPPED) is not taken from a command's own look: the
 * exit event follows with the code, and its sync takes it (defer false). */
static int apply_status(struct container *c, const struct rt_status *st, bool defer)
{
	char msg[64] = "";
	int code = st->exit_code;
	enum cstate s;

	pthread_mutex_lock(&c->lock);
	s = c->state;
	if (st->state == RT_STATE_EXITED && code < 0 && s != C_EXITED) {
		if (defer && !c->exit_pending) {
			pthread_mutex_unlock(&c->lock);
			return 1;
		}
		if (c->exit_pending)
			code = c->exit_code;	/* the event knew what the record lacks */
	}
	c->exit_pending = false;	/* the engine's word now, whatever an event said */
	c->pid = st->pid;
	if (st->started_at)
		c->started_at = st->started_at;
	if (st->state == RT_STATE_RUNNING || st->state == RT_STATE_PAUSED) {
		/* running again (started by the engine: a restart policy, a
		 * system container that rebooted): the last end is history */
		c->has_exit = false;
		c->oom_killed = false;
		c->finished_at = 0;
	}
	if (st->state == RT_STATE_EXITED) {
		c->has_exit = true;
		c->exit_code = code;
		/* the engine's flag, or the OOM event that came before */
		c->oom_killed = c->oom_killed || st->oom_killed;
		c->finished_at = st->finished_at ? st->finished_at : time(NULL);
		c->pid = 0;
		snprintf(msg, sizeof(msg), "exit_code=%d", code);
	}
	pthread_mutex_unlock(&c->lock);
	switch (st->state) {
	case RT_STATE_CREATED: s = C_CREATED; break;
	case RT_STATE_RUNNING: s = C_RUNNING; break;
	case RT_STATE_PAUSED: s = C_PAUSED; break;
	case RT_STATE_EXITED: s = C_EXITED; break;
	default: break;
	}
	set_state(c, s, msg[0] ? msg : NULL);
	return 0;
}

/* defer: a command's own look after its call (see apply_status). Then an
 * exit whose code is still unknown waits, up to a second, for the engine's
 * exit event that brings it, so the command returns with the container
 * EXITED rather than STOPPING. */
static int refresh(struct container *c, bool defer, struct nerr *err)
{
	struct rt_status st = { 0 };
	int r;

	r = c->eng->ops->inspect(c->eng->h, c->id, &st, err);
	if (r < 0)
		return r;
	if (apply_status(c, &st, defer) == 0)
		return 0;
	for (int i = 0; i < 1000; i++) {
		bool news;

		pthread_mutex_lock(&c->lock);
		news = c->exit_pending;
		pthread_mutex_unlock(&c->lock);
		if (news)
			break;
		usleep(1000);
	}
	r = c->eng->ops->inspect(c->eng->h, c->id, &st, err);
	if (r < 0)
		return r;
	apply_status(c, &st, false);
	return 0;
}

/* An engine that is down answers nothing: say so at once. */
static int engine_ready(struct engine *e, struct nerr *err)
{
	bool ok;
	char why[256];

	pthread_mutex_lock(&e->lock);
	ok = e->healthy && e->h;
	snprintf(why, sizeof(why), "%s", e->reason);
	pthread_mutex_unlock(&e->lock);
	if (!ok)
		return nerr_set(err, EHOSTDOWN, "runtime %s is unhealthy: %s", e->ops->name,
				why[0] ? why : "not probed yet");
	return 0;
}

/* The engine no longer has c's container (removed outside nodefs, seen by
 * an event, an inspect or reconciliation): EXITED with the reason, and no
 * id, until destroyed. Returns whether c had an engine container. */
static bool mark_gone(struct container *c, const char *why)
{
	bool had;

	pthread_mutex_lock(&c->lock);
	had = c->id != NULL;
	free(c->id);
	c->id = NULL;
	c->pid = 0;
	if (!c->has_exit) {
		c->has_exit = true;
		c->exit_code = -1;
	}
	pthread_mutex_unlock(&c->lock);
	bnode_set_error(c->node, why);
	set_state(c, C_EXITED, "removed outside nodefs");
	return had;
}

/* ---- files ---- */

static int show_state(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	enum cstate s;

	pthread_mutex_lock(&c->lock);
	s = c->state;
	pthread_mutex_unlock(&c->lock);
	return sbuf_printf(out, "%s\n", cstate_to_string(s));
}

static int show_runtime(struct bnode *n, struct sbuf *out)
{
	return sbuf_printf(out, "%s\n", cof(n)->eng->ops->name);
}

static int show_image(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);

	if (c->image)
		return sbuf_printf(out, "%s\n", c->image);
	if (c->template_name)
		return sbuf_printf(out, "%s%s%s%s%s\n", c->template_name,
				   c->distro ? ":" : "", c->distro ? c->distro : "",
				   c->release ? ":" : "", c->release ? c->release : "");
	return 0;
}

static int show_id(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	int r = 0;

	pthread_mutex_lock(&c->lock);
	if (c->id)
		r = sbuf_printf(out, "%s\n", c->id);
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int show_pid(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	int r;

	pthread_mutex_lock(&c->lock);
	r = c->pid ? sbuf_printf(out, "%d\n", (int)c->pid) : 0;
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int show_exit_code(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	int r;

	pthread_mutex_lock(&c->lock);
	r = c->has_exit ? sbuf_printf(out, "%d\n", c->exit_code) : 0;
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int show_oom(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	int r;

	pthread_mutex_lock(&c->lock);
	r = sbuf_printf(out, "%d\n", c->oom_killed);
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int show_started(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	char t[64];

	pthread_mutex_lock(&c->lock);
	fmt_time(c->started_at, t, sizeof(t));
	pthread_mutex_unlock(&c->lock);
	return t[0] ? sbuf_printf(out, "%s\n", t) : 0;
}

static int show_finished(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	char t[64];

	pthread_mutex_lock(&c->lock);
	fmt_time(c->finished_at, t, sizeof(t));
	pthread_mutex_unlock(&c->lock);
	return t[0] ? sbuf_printf(out, "%s\n", t) : 0;
}

static int show_progress(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	int r;

	pthread_mutex_lock(&c->lock);
	r = c->progress[0] ? sbuf_printf(out, "%s\n", c->progress) : 0;
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* The engine id, or 0 when the container has none yet. */
static int current_id(struct container *c, char *buf, size_t len)
{
	int r = 0;

	pthread_mutex_lock(&c->lock);
	if (c->id && !c->removed) {
		snprintf(buf, len, "%s", c->id);
		r = 1;
	}
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* "key value\n" for show_stats; value in decimal, with six decimals when
 * micro is set (v is then in millionths), as "%.6f" would. */
static char *stats_line(char *p, const char *key, uint64_t v, bool micro)
{
	char d[24];
	int k = 0;

	while (*key)
		*p++ = *key++;
	*p++ = ' ';
	do {
		d[k++] = (char)('0' + v % 10);
		v /= 10;
		if (micro && k == 6)
			d[k++] = '.';
	} while (v || (micro && k < 8));
	while (k)
		*p++ = d[--k];
	*p++ = '\n';
	return p;
}

static uint64_t stats_micros(double s)
{
	return s > 0 && s < 1e12 ? (uint64_t)(s * 1e6 + 0.5) : 0;
}

/* stats and logs read the container's cgroup files and log (microseconds,
 * per the drivers' contract), so they are served from the reading thread.
 * Formatted by hand: sbuf_printf's two vsnprintf passes over two doubles
 * cost more than the four cgroup reads. */
static int show_stats(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	struct rt_stats st = { 0 };
	struct nerr err = { 0 };
	char id[256], buf[5 * 48], *p = buf;
	bool running;

	pthread_mutex_lock(&c->lock);
	running = (c->state == C_RUNNING || c->state == C_PAUSED || c->state == C_STOPPING) &&
		  c->id && !c->removed && strlen(c->id) < sizeof(id);
	if (running)
		strcpy(id, c->id);
	pthread_mutex_unlock(&c->lock);
	if (running && c->eng->h)
		c->eng->ops->stats(c->eng->h, id, &st, &err);
	p = stats_line(p, "cpu_user_seconds", stats_micros(st.cpu_user_seconds), true);
	p = stats_line(p, "cpu_system_seconds", stats_micros(st.cpu_system_seconds), true);
	p = stats_line(p, "memory_bytes", st.memory_bytes, false);
	p = stats_line(p, "memory_limit_bytes", st.memory_limit_bytes, false);
	p = stats_line(p, "pids", st.pids, false);
	return sbuf_add(out, buf, (size_t)(p - buf));
}

static int show_logs(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	struct nerr err = { 0 };
	char id[256];
	int r;

	if (!current_id(c, id, sizeof(id)) || !c->eng->h)
		return 0;
	r = c->eng->ops->logs(c->eng->h, id, LOGS_MAX, out, &err);
	if (r < 0)
		bnode_set_error(n, err.msg);
	return r < 0 && r != -ENOENT ? r : 0;
}

static int show_exec_output(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	int r;

	pthread_mutex_lock(&c->lock);
	r = c->exec_out.len ? sbuf_add(out, c->exec_out.buf, c->exec_out.len) : 0;
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int show_exec_exit_code(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	int r;

	pthread_mutex_lock(&c->lock);
	r = c->has_exec ? sbuf_printf(out, "%d\n", c->exec_exit) : 0;
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int show_limits(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	int r;

	pthread_mutex_lock(&c->lock);
	r = sbuf_printf(out, "cpus %g\nmemory_bytes %llu\npids %lld\n", c->cpus,
			(unsigned long long)c->memory, (long long)c->pids);
	pthread_mutex_unlock(&c->lock);
	return r;
}

static int show_info(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	json_t *j;

	pthread_mutex_lock(&c->lock);
	j = container_json_locked(c);
	pthread_mutex_unlock(&c->lock);
	return show_json(out, j);
}

/* wait: blocks until the container has exited, then one line, then EOF. */
static bool container_ended(struct bnode *n)
{
	struct container *c = cof(n);
	bool e;

	pthread_mutex_lock(&c->lock);
	e = c->state == C_EXITED || c->removed;
	pthread_mutex_unlock(&c->lock);
	return e;
}

static int container_wait_line(struct bnode *n, struct sbuf *out)
{
	struct container *c = cof(n);
	int r;

	pthread_mutex_lock(&c->lock);
	r = sbuf_printf(out, "exit_code=%d oom_killed=%d\n", c->has_exit ? c->exit_code : -1,
			c->oom_killed);
	pthread_mutex_unlock(&c->lock);
	return r;
}

BWAIT_STREAM(wait_stream, container_ended, container_wait_line);

/* ---- actions ---- */

struct cact {
	struct action a;
	struct container *c;
	struct bnode *node;		/* keeps c alive */
	int kind;
	int timeout_s;
	int sig;
	struct rt_limits lim;
	char **argv;
	bool then_start;
};

enum { CA_CREATE, CA_START, CA_STOP, CA_KILL, CA_PAUSE, CA_RESUME, CA_UPDATE, CA_EXEC,
       CA_DESTROY, CA_SYNC };

static void cact_free(struct action *a)
{
	struct cact *x = (struct cact *)a;

	strv_free(x->argv);
	bnode_unref(x->node);
	free(x);
}

static void progress_update(void *ctx, const char *line)
{
	struct container *c = ctx;

	pthread_mutex_lock(&c->lock);
	snprintf(c->progress, sizeof(c->progress), "%s", line);
	pthread_mutex_unlock(&c->lock);
	bnode_changed(c->node);
}

static void container_forget(struct container *c)
{
	enum cstate last;
	struct bnode *n = bnode_ref(c->node);	/* c lives until the event is out */

	pthread_mutex_lock(&c->lock);
	c->removed = true;
	last = c->state;
	pthread_mutex_unlock(&c->lock);
	store_del(c->b->cfg->state_dir, "containers", c->name, NULL);
	bnode_remove(n);
	/* the stream's last word on it: containers/NAME is gone */
	events_emit(c->b->events, "container", c->name, cstate_to_string(last), "DESTROYED",
		    NULL, NULL);
	bnode_unref(n);
}

static int do_create(struct cact *x, struct nerr *err)
{
	struct container *c = x->c;
	struct rt_spec spec = {
		.name = c->name, .image = c->image, .argv = c->argv, .env = c->env,
		.nenv = c->nenv, .cpus = c->cpus, .memory = c->memory, .pids = c->pids,
		.mounts = c->mounts, .nmounts = c->nmounts, .template_name = c->template_name,
		.distro = c->distro, .release = c->release, .arch = c->arch,
		.image_variant = c->image_variant, .image_server = c->image_server,
		.template_args = c->template_args, .flush_cache = c->flush_cache,
		.force_cache = c->force_cache, .disable_gpg = c->disable_gpg,
	};
	char *id = NULL;
	int r;

	r = engine_ready(c->eng, err);
	if (r < 0)
		goto fail;
	r = c->eng->ops->create(c->eng->h, &spec, &c->prog, &id, err);
	if (r < 0)
		goto fail;
	pthread_mutex_lock(&c->lock);
	c->id = id;
	c->progress[0] = '\0';
	c->state = C_CREATED;
	pthread_mutex_unlock(&c->lock);
	r = checkpoint(c, err);
	if (r < 0) {
		/* unacknowledged: take back what the engine made */
		struct nerr e2 = { 0 };
		c->eng->ops->destroy(c->eng->h, id, &e2);
		goto fail;
	}
	events_emit(c->b->events, "container", c->name, "PULLING", "CREATED", NULL, NULL);
	bnode_changed(c->node);
	return 0;
fail:
	if (r == -ECANCELED)
		nerr_set(err, ECANCELED, "create of %s cancelled by destroy", c->name);
	container_forget(c);
	return r;
}

static int do_start(struct container *c, struct nerr *err)
{
	enum cstate old;
	char id[256];
	int r;

	if (!current_id(c, id, sizeof(id)))
		return nerr_set(err, ENOENT, "container %s has no engine container", c->name);
	r = engine_ready(c->eng, err);
	if (r < 0)
		return r;
	pthread_mutex_lock(&c->lock);
	old = c->state;
	pthread_mutex_unlock(&c->lock);
	if (old == C_RUNNING || old == C_PAUSED)
		return nerr_set(err, EBUSY, "container %s is already %s", c->name,
				cstate_to_string(old));
	set_state(c, C_STARTING, NULL);
	pthread_mutex_lock(&c->lock);
	c->has_exit = false;
	c->oom_killed = false;
	c->finished_at = 0;
	pthread_mutex_unlock(&c->lock);
	r = c->eng->ops->start(c->eng->h, id, err);
	if (r < 0) {
		set_state(c, old, err->msg);
		return r;
	}
	r = refresh(c, true, err);
	if (r < 0)
		return r;
	return checkpoint(c, err);
}

static int run_action_masked(struct action *a, struct nerr *err);

/*
 * Processes an engine call spawns here inherit this thread's signal mask:
 * liblxc gives a container's init (and attach_run_wait an exec'd command)
 * the mask of the thread that called start(), and a worker started from a
 * FUSE thread has SIGHUP, SIGINT, SIGQUIT and SIGTERM blocked (libfuse
 * blocks them in its workers). A command whose TERM stays blocked can never
 * stop gracefully and never sees `kill HUP`. So actions run with nothing
 * blocked; the daemon still gets its signals, since the kernel hands a
 * process-directed signal to the main thread first when it does not block
 * it (complete_signal).
 */
static int run_action(struct action *a, struct nerr *err)
{
	struct cact *x = (struct cact *)a;
	struct container *c = x->c;
	sigset_t none, old;
	bool pending;
	int r;

	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, &old);
	r = run_action_masked(a, err);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (x->kind != CA_SYNC)
		return r;
	/* the sync an exit event queued could not ask the engine (down, or
	 * the container removed meanwhile): the event's word is the last */
	pthread_mutex_lock(&c->lock);
	pending = c->exit_pending;
	c->exit_pending = false;
	pthread_mutex_unlock(&c->lock);
	if (pending && state_of(c) != C_EXITED && state_of(c) != C_DESTROYING) {
		char msg[64];

		pthread_mutex_lock(&c->lock);
		c->has_exit = true;
		c->pid = 0;
		snprintf(msg, sizeof(msg), "exit_code=%d", c->exit_code);
		pthread_mutex_unlock(&c->lock);
		set_state(c, C_EXITED, msg);
		checkpoint(c, &(struct nerr){ 0 });
	}
	return r;
}

static int run_action_masked(struct action *a, struct nerr *err)
{
	struct cact *x = (struct cact *)a;
	struct container *c = x->c;
	char id[256];
	int r = 0;

	if (x->kind == CA_CREATE) {
		r = do_create(x, err);
		if (r >= 0 && x->then_start)
			r = do_start(c, err);
		return r;
	}
	if (x->kind == CA_START)
		return do_start(c, err);
	if (x->kind == CA_DESTROY) {
		set_state(c, C_DESTROYING, NULL);
		if (current_id(c, id, sizeof(id))) {
			r = engine_ready(c->eng, err);
			if (r >= 0)
				r = c->eng->ops->destroy(c->eng->h, id, err);
			if (r < 0) {
				refresh(c, true, &(struct nerr){ 0 });
				return r;
			}
		}
		container_forget(c);
		return 0;
	}
	if (!current_id(c, id, sizeof(id)))
		return nerr_set(err, ENOENT, "container %s has no engine container", c->name);
	r = engine_ready(c->eng, err);
	if (r < 0)
		return r;
	switch (x->kind) {
	case CA_STOP: {
		enum cstate old;
		pthread_mutex_lock(&c->lock);
		old = c->state;
		pthread_mutex_unlock(&c->lock);
		if (old != C_RUNNING && old != C_PAUSED)
			return nerr_set(err, EINVAL, "container %s is not running (%s)", c->name,
					cstate_to_string(old));
		set_state(c, C_STOPPING, NULL);
		r = c->eng->ops->stop(c->eng->h, id, x->timeout_s, err);
		break;
	}
	case CA_KILL:
		r = c->eng->ops->kill(c->eng->h, id, x->sig, err);
		break;
	case CA_PAUSE:
		r = c->eng->ops->pause(c->eng->h, id, err);
		break;
	case CA_RESUME:
		r = c->eng->ops->resume(c->eng->h, id, err);
		break;
	case CA_UPDATE:
		r = c->eng->ops->update(c->eng->h, id, &x->lim, err);
		if (r >= 0) {
			pthread_mutex_lock(&c->lock);
			if (x->lim.set & RT_LIMIT_CPUS)
				c->cpus = x->lim.cpus;
			if (x->lim.set & RT_LIMIT_MEMORY)
				c->memory = x->lim.memory;
			if (x->lim.set & RT_LIMIT_PIDS)
				c->pids = x->lim.pids;
			pthread_mutex_unlock(&c->lock);
		}
		break;
	case CA_EXEC: {
		struct sbuf out = SBUF_INIT(EXEC_OUT_CAP);
		int code = -1;
		r = c->eng->ops->exec(c->eng->h, id, x->argv, &out, &code, err);
		if (r >= 0) {
			pthread_mutex_lock(&c->lock);
			sbuf_free(&c->exec_out);
			c->exec_out = out;
			c->has_exec = true;
			c->exec_exit = code;
			pthread_mutex_unlock(&c->lock);
			if (a->rq) {
				sbuf_add(&a->rq->reply, out.buf ? out.buf : "", out.len < 3000 ? out.len : 3000);
				sbuf_printf(&a->rq->reply, "exit_code=%d\n", code);
			}
			bnode_changed(c->node);
		} else {
			sbuf_free(&out);
		}
		return r;
	}
	case CA_SYNC:
		break;
	}
	/* what the engine says now, whatever the call did */
	{
		struct nerr e2 = { 0 };
		int rr = refresh(c, x->kind != CA_SYNC, &e2);
		if (rr == -ENOENT && x->kind == CA_SYNC) {
			/* an event's or reconciliation's look: the engine
			 * container is gone, which is news to take in */
			mark_gone(c, "the engine container was removed outside nodefs");
			return checkpoint(c, err);
		}
		if (r >= 0 && rr == -ENOENT) {
			*err = e2;
			return rr;
		}
	}
	if (r >= 0)
		r = checkpoint(c, err);
	return r;
}

static int submit(struct container *c, int kind, const char *cmdline, struct breq *rq,
		  struct cact *tmpl)
{
	struct cact *x = calloc(1, sizeof(*x));
	static const char *const types[] = {
		"container.create", "container.start", "container.stop", "container.kill",
		"container.pause", "container.resume", "container.update", "container.exec",
		"container.destroy", "container.sync",
	};
	char object[80];
	int r;

	if (!x)
		return nerr_set(rq ? &rq->err : NULL, ENOMEM, "out of memory");
	if (tmpl)
		*x = *tmpl;
	if (rq && rq->nonblock && actq_busy(&c->q)) {
		strv_free(x->argv);
		free(x);
		return nerr_set(&rq->err, EBUSY, "container %s has a command in flight", c->name);
	}
	x->c = c;
	x->node = bnode_ref(c->node);
	x->kind = kind;
	x->a.b = c->b;
	x->a.rq = rq;
	x->a.run = run_action;
	x->a.free = cact_free;
	if (rq) {
		snprintf(object, sizeof(object), "containers/%s", c->name);
		r = op_begin(c->b, types[kind], object, cmdline, &x->a.op, &rq->err);
		if (r < 0) {
			cact_free(&x->a);
			return r;
		}
	}
	r = actq_submit(&c->q, &x->a);
	if (r == -EBUSY) {
		op_drop(x->a.op, "the container had a command in flight");
		op_unref(x->a.op);
		cact_free(&x->a);
		return nerr_set(&rq->err, EBUSY, "container %s has a command in flight", c->name);
	}
	return r;
}

/* ---- containers/NAME/ctl ---- */

static int cmd_simple(struct bnode *n, const struct ctl_cmd *cmd, struct breq *rq, int kind)
{
	char line[512];

	return submit(cof(n), kind, cmdline_of(cmd, line, sizeof(line)), rq, NULL);
}

static int cmd_start(struct bnode *n, const struct ctl_cmd *c, struct breq *rq)
{
	return cmd_simple(n, c, rq, CA_START);
}

static int cmd_pause(struct bnode *n, const struct ctl_cmd *c, struct breq *rq)
{
	return cmd_simple(n, c, rq, CA_PAUSE);
}

static int cmd_resume(struct bnode *n, const struct ctl_cmd *c, struct breq *rq)
{
	return cmd_simple(n, c, rq, CA_RESUME);
}

static int cmd_stop(struct bnode *n, const struct ctl_cmd *cmd, struct breq *rq)
{
	struct container *c = cof(n);
	/* no TIMEOUT_S: the runtime's stop_timeout ([runtime X] stop_timeout,
	 * 10 s by default); both drivers take a negative timeout as that */
	struct cact t = { .timeout_s = -1 };
	char line[512];
	long long v;
	int r;

	if (cmd->argc > 1) {
		r = parse_int(cmd->argv[1], 0, 86400, &v, &rq->err);
		if (r < 0) {
			nerr_prefix(&rq->err, "stop TIMEOUT_S");
			return -EINVAL;
		}
		t.timeout_s = (int)v;
	}
	return submit(c, CA_STOP, cmdline_of(cmd, line, sizeof(line)), rq, &t);
}

static int parse_signal(const char *s, int *ret, struct nerr *err)
{
	static const struct { const char *name; int sig; } sigs[] = {
		{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
		{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "TERM", SIGTERM }, { "STOP", SIGSTOP },
		{ "CONT", SIGCONT }, { "ALRM", SIGALRM }, { "WINCH", SIGWINCH },
	};
	const char *p = strncmp(s, "SIG", 3) == 0 ? s + 3 : s;
	long long v;

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (strcmp(p, sigs[i].name) == 0) {
			*ret = sigs[i].sig;
			return 0;
		}
	if (parse_int(s, 1, 64, &v, NULL) == 0) {
		*ret = (int)v;
		return 0;
	}
	return nerr_set(err, EINVAL, "kill: unknown signal '%s' (a number 1-64 or a name like TERM, KILL, HUP)", s);
}

static int cmd_kill(struct bnode *n, const struct ctl_cmd *cmd, struct breq *rq)
{
	struct cact t = { .sig = SIGKILL };
	char line[512];
	int r;

	if (cmd->argc > 1 && (r = parse_signal(cmd->argv[1], &t.sig, &rq->err)) < 0)
		return r;
	return submit(cof(n), CA_KILL, cmdline_of(cmd, line, sizeof(line)), rq, &t);
}

static int parse_limits(const struct ctl_cmd *cmd, struct rt_limits *lim, struct nerr *err)
{
	const char *s;
	long long v;
	int r;

	memset(lim, 0, sizeof(*lim));
	if ((s = ctl_opt_get(cmd, "cpus"))) {
		if ((r = parse_cpus(s, &lim->cpus, err)) < 0)
			goto bad;
		lim->set |= RT_LIMIT_CPUS;
	}
	if ((s = ctl_opt_get(cmd, "memory"))) {
		if ((r = parse_size(s, &lim->memory, err)) < 0)
			goto bad;
		if (lim->memory < (4u << 20))
			return nerr_set(err, EINVAL, "memory=%s: at least 4M", s);
		lim->set |= RT_LIMIT_MEMORY;
	}
	if ((s = ctl_opt_get(cmd, "pids"))) {
		if ((r = parse_int(s, 1, 4194304, &v, err)) < 0)
			goto bad;
		lim->pids = v;
		lim->set |= RT_LIMIT_PIDS;
	}
	return 0;
bad:
	nerr_prefix(err, "%s", s == ctl_opt_get(cmd, "cpus") ? "cpus" :
		    s == ctl_opt_get(cmd, "memory") ? "memory" : "pids");
	return -EINVAL;
}

static int cmd_update(struct bnode *n, const struct ctl_cmd *cmd, struct breq *rq)
{
	struct cact t = { 0 };
	char line[512];
	int r = parse_limits(cmd, &t.lim, &rq->err);

	if (r < 0)
		return r;
	if (!t.lim.set)
		return nerr_set(&rq->err, EINVAL, "update: give cpus=N, memory=SIZE or pids=N");
	return submit(cof(n), CA_UPDATE, cmdline_of(cmd, line, sizeof(line)), rq, &t);
}

static int cmd_exec(struct bnode *n, const struct ctl_cmd *cmd, struct breq *rq)
{
	struct cact t = { 0 };
	char line[512];
	int r;

	if (cmd->argc == 2) {
		r = ctl_split_words(cmd->argv[1], &t.argv, &rq->err);
	} else {
		t.argv = strv_dup(cmd->argv + 1);
		r = t.argv ? 0 : -ENOMEM;
	}
	if (r < 0)
		return r;
	if (!t.argv[0]) {
		strv_free(t.argv);
		return nerr_set(&rq->err, EINVAL, "exec: empty command");
	}
	return submit(cof(n), CA_EXEC, cmdline_of(cmd, line, sizeof(line)), rq, &t);
}

static int cmd_destroy(struct bnode *n, const struct ctl_cmd *cmd, struct breq *rq)
{
	struct container *c = cof(n);
	char line[512];

	/* a pull in progress is cancelled now, not after it */
	c->prog.cancel = 1;
	return submit(c, CA_DESTROY, cmdline_of(cmd, line, sizeof(line)), rq, NULL);
}

static const char *const update_opts[] = { "cpus", "memory", "pids", NULL };

static const struct ctl_spec container_specs[] = {
	{ .name = "start", .min_args = 0, .max_args = 0, .usage = "start" },
	{ .name = "stop", .min_args = 0, .max_args = 1, .usage = "stop [TIMEOUT_S]" },
	{ .name = "kill", .min_args = 0, .max_args = 1, .usage = "kill [SIGNAL]" },
	{ .name = "pause", .min_args = 0, .max_args = 0, .usage = "pause" },
	{ .name = "resume", .min_args = 0, .max_args = 0, .usage = "resume" },
	{ .name = "update", .min_args = 0, .max_args = 0, .opts = update_opts,
	  .usage = "update [cpus=N] [memory=SIZE] [pids=N]" },
	{ .name = "exec", .min_args = 1, .max_args = -1, .usage = "exec 'ARGV ...'" },
	{ .name = "destroy", .min_args = 0, .max_args = 0, .usage = "destroy" },
};
static const bctl_fn container_fns[] = {
	cmd_start, cmd_stop, cmd_kill, cmd_pause, cmd_resume, cmd_update, cmd_exec, cmd_destroy,
};
static const struct bctl_table container_ctl = { container_specs, container_fns, 8 };
BCTL_FUNCS(container_ctl, container_ctl)

static const struct battr container_attrs[] = {
	BCTL_ATTR(container_ctl),
	{ .name = "state", .flags = BATTR_POLL, .show = show_state },
	{ .name = "runtime", .show = show_runtime },
	{ .name = "image", .show = show_image },
	{ .name = "id", .show = show_id },
	{ .name = "pid", .show = show_pid },
	{ .name = "exit_code", .show = show_exit_code },
	{ .name = "oom_killed", .show = show_oom },
	{ .name = "started_at", .show = show_started },
	{ .name = "finished_at", .show = show_finished },
	{ .name = "limits", .show = show_limits },
	{ .name = "stats", .show = show_stats },
	{ .name = "logs", .show = show_logs },
	{ .name = "progress", .flags = BATTR_POLL, .show = show_progress },
	{ .name = "exec_output", .show = show_exec_output },
	{ .name = "exec_exit_code", .show = show_exec_exit_code },
	{ .name = "wait", .stream = &wait_stream },
	{ .name = "error", .show = battr_show_error },
	{ .name = "info.json", .show = show_info },
};

static void container_node_free(struct bnode *n)
{
	container_free(n->priv);
}

static const struct btype container_type = {
	.name = "container",
	.attrs = container_attrs,
	.nattrs = sizeof(container_attrs) / sizeof(container_attrs[0]),
	.free = container_node_free,
};

/* ---- containers/ctl: create and run ---- */

static struct container *container_alloc(struct backend *b, struct engine *e, const char *name)
{
	struct container *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->b = b;
	c->eng = e;
	snprintf(c->name, sizeof(c->name), "%s", name);
	actq_init(&c->q);
	pthread_mutex_init(&c->lock, NULL);
	sbuf_init(&c->exec_out, EXEC_OUT_CAP);
	c->prog.update = progress_update;
	c->prog.ctx = c;
	return c;
}

static int dupopt(const struct ctl_cmd *cmd, const char *key, char **ret)
{
	const char *s = ctl_opt_get(cmd, key);

	*ret = NULL;
	if (s && !(*ret = strdup(s)))
		return -ENOMEM;
	return 0;
}

/* path with its symlinks resolved, as far as it exists (the rest, which
 * the engine may create, appended as written): what mount(2) would reach.
 * A dangling symlink on the way is refused: what it will lead to is not
 * known yet. */
static int resolve_existing(const char *path, char *ret, size_t size, struct nerr *err)
{
	char buf[PATH_MAX], real[PATH_MAX];
	size_t cut = strlen(path);
	struct stat st;

	if (cut >= sizeof(buf))
		return nerr_set(err, ENAMETOOLONG, "path too long");
	memcpy(buf, path, cut + 1);
	for (;;) {
		char *slash;

		if (realpath(buf, real)) {
			const char *rest = path + cut;

			if ((size_t)snprintf(ret, size, "%s%s", strcmp(real, "/") == 0 && *rest ? "" : real,
					     rest) >= size)
				return nerr_set(err, ENAMETOOLONG, "path too long");
			return 0;
		}
		if (errno != ENOENT)
			return nerr_set(err, errno, "%s: %s", buf, strerror(errno));
		if (lstat(buf, &st) == 0 && S_ISLNK(st.st_mode))
			return nerr_set(err, EPERM, "%s is a dangling symlink", buf);
		slash = strrchr(buf, '/');
		if (!slash || slash == buf) {
			snprintf(ret, size, "%s", path);	/* nothing of it exists */
			return 0;
		}
		*slash = '\0';
		cut = (size_t)(slash - buf);
	}
}

/* A bind source after its symlinks must still lie under allowed_targets
 * (or under what an allowed prefix itself resolves to): mount(2) follows
 * links, and a text check alone lets a link under an allowed prefix lead to
 * /etc. The resolved path, not the link, is what the engine gets. */
static int resolve_bind_source(const char *spec, const char *src, const char *const *allowed,
			       size_t n, char **ret, struct nerr *err)
{
	char real[PATH_MAX], ra[PATH_MAX];
	const char **both;
	int r;

	r = resolve_existing(src, real, sizeof(real), err);
	if (r < 0) {
		nerr_prefix(err, "bind '%s': host path", spec);
		return r;
	}
	if (n && strcmp(real, src) != 0) {
		/* each prefix as written, then as it resolves (NULL: the same) */
		both = calloc(2 * n, sizeof(*both));
		if (!both)
			return nerr_set(err, ENOMEM, "out of memory");
		for (size_t i = 0; i < n; i++) {
			both[2 * i] = allowed[i];
			if (realpath(allowed[i], ra) && strcmp(ra, allowed[i]) != 0)
				both[2 * i + 1] = strdup(ra);
		}
		r = valid_path(real, both, 2 * n, NULL);
		for (size_t i = 0; i < n; i++)
			free((char *)both[2 * i + 1]);
		free(both);
		if (r < 0)
			return nerr_set(err, EPERM, "bind '%s': host path %s resolves to %s, outside the "
					"allowed targets", spec, src, real);
	}
	*ret = strdup(real);
	return *ret ? 0 : nerr_set(err, ENOMEM, "out of memory");
}

/* VOLNAME:/path[:ro] or /host:/path[:ro] into m; for a volume, the source
 * is where the volume is published. */
static int parse_mount(struct backend *b, const char *key, const char *spec,
		       struct rt_mount *m, char **ret_vol, struct nerr *err)
{
	char buf[4200], *src, *dst, *mode;
	int r;

	if (snprintf(buf, sizeof(buf), "%s", spec) >= (int)sizeof(buf))
		return nerr_set(err, EINVAL, "%s: '%.40s...' is too long", key, spec);
	src = buf;
	dst = strchr(buf, ':');
	if (!dst)
		return nerr_set(err, EINVAL, "%s '%s': expected %s:/path[:ro]", key, spec,
				strcmp(key, "bind") == 0 ? "/host" : "VOLNAME");
	*dst++ = '\0';
	mode = strchr(dst, ':');
	if (mode) {
		*mode++ = '\0';
		if (strcmp(mode, "ro") != 0 && strcmp(mode, "rw") != 0)
			return nerr_set(err, EINVAL, "%s '%s': mode '%s' is not ro or rw", key, spec, mode);
	}
	r = valid_path(dst, NULL, 0, err);
	if (r < 0) {
		nerr_prefix(err, "%s '%s': container path", key, spec);
		return -EINVAL;
	}
	m->ro = mode && strcmp(mode, "ro") == 0;
	if (strcmp(key, "bind") == 0) {
		const char *const *allowed = (const char *const *)b->cfg->allowed_targets;
		size_t n = 0;

		while (allowed && allowed[n])
			n++;
		r = valid_path(src, allowed, n, err);
		if (r < 0) {
			nerr_prefix(err, "bind '%s': host path", spec);
			return r;
		}
		r = resolve_bind_source(spec, src, allowed, n, &m->source, err);
		if (r < 0)
			return r;
	} else {
		r = valid_name(src, err);
		if (r < 0) {
			nerr_prefix(err, "volume '%s'", spec);
			return -EINVAL;
		}
		r = volume_mount_source(b, src, &m->source, err);
		if (r < 0)
			return r;
		*ret_vol = strdup(src);
		if (!*ret_vol)
			return -ENOMEM;
	}
	m->target = strdup(dst);
	if (!m->source || !m->target)
		return nerr_set(err, ENOMEM, "out of memory");
	return 0;
}

/* Everything create names, checked before anything happens. */
static int build_container(struct backend *b, const struct ctl_cmd *cmd,
			   struct container **ret, struct nerr *err)
{
	const char *rt = ctl_opt_get(cmd, "runtime");
	const char *name = cmd->argv[1];
	struct container *c;
	struct engine *e;
	struct rt_limits lim;
	struct bnode *k;
	const char *s;
	size_t nvol = 0;
	int r;

	r = valid_name(name, err);
	if (r < 0)
		return r;
	if (!rt)
		return nerr_set(err, EINVAL, "%s: runtime=docker|lxc is required", cmd->argv[0]);
	e = engine_find(b, rt);
	if (!e)
		return nerr_set(err, EINVAL, "no runtime '%s' (runtimes: docker, lxc)", rt);
	r = parse_limits(cmd, &lim, err);
	if (r < 0)
		return r;
	if (strcmp(rt, "docker") == 0) {
		static const char *const lxc_only[] = { "template", "distro", "release", "arch",
			"image_variant", "image_server", "template_args", "flush_cache", "force_cache",
			"disable_gpg", NULL };
		for (size_t i = 0; lxc_only[i]; i++)
			if (ctl_opt_get(cmd, lxc_only[i]))
				return nerr_set(err, EINVAL, "%s=: an LXC option, not for runtime=docker", lxc_only[i]);
	}
	k = bnode_lookup(b->containers, name);
	if (k) {
		bnode_unref(k);
		return nerr_set(err, EEXIST, "container '%s' exists", name);
	}

	c = container_alloc(b, e, name);
	if (!c)
		return nerr_set(err, ENOMEM, "out of memory");
	c->cpus = lim.cpus;
	c->memory = lim.memory;
	c->pids = lim.pids;
	c->state = C_PULLING;
	if ((s = ctl_opt_get(cmd, "cmd"))) {
		r = ctl_split_words(s, &c->argv, err);
		if (r < 0) {
			nerr_prefix(err, "cmd");
			goto fail;
		}
	}
	r = -ENOMEM;
	if (dupopt(cmd, "image", &c->image) < 0 || dupopt(cmd, "template", &c->template_name) < 0 ||
	    dupopt(cmd, "distro", &c->distro) < 0 || dupopt(cmd, "release", &c->release) < 0 ||
	    dupopt(cmd, "arch", &c->arch) < 0 || dupopt(cmd, "image_variant", &c->image_variant) < 0 ||
	    dupopt(cmd, "image_server", &c->image_server) < 0)
		goto oom;
	if (strcmp(rt, "lxc") == 0 && !c->template_name && !(c->template_name = strdup("busybox")))
		goto oom;
	if ((s = ctl_opt_get(cmd, "template_args"))) {
		r = ctl_split_words(s, &c->template_args, err);
		if (r < 0) {
			nerr_prefix(err, "template_args");
			goto fail;
		}
	}
	{
		static const char *const flags[] = { "flush_cache", "force_cache", "disable_gpg" };
		bool *dst[] = { &c->flush_cache, &c->force_cache, &c->disable_gpg };
		for (size_t i = 0; i < 3; i++)
			if ((s = ctl_opt_get(cmd, flags[i])) && (r = parse_bool(s, dst[i], err)) < 0) {
				nerr_prefix(err, "%s", flags[i]);
				r = -EINVAL;
				goto fail;
			}
	}
	for (size_t i = 0; i < cmd->nopts; i++) {
		const char *key = cmd->opts[i].key;

		if (strncmp(key, "env.", 4) == 0) {
			struct rt_kv *ne = realloc(c->env, (c->nenv + 1) * sizeof(*ne));
			if (!ne)
				goto oom;
			c->env = ne;
			if (!key[4]) {
				r = nerr_set(err, EINVAL, "env.: empty variable name");
				goto fail;
			}
			c->env[c->nenv].key = strdup(key + 4);
			c->env[c->nenv].val = strdup(cmd->opts[i].val);
			c->nenv++;
			if (!c->env[c->nenv - 1].key || !c->env[c->nenv - 1].val)
				goto oom;
		} else if (strcmp(key, "volume") == 0 || strcmp(key, "bind") == 0) {
			struct rt_mount *nm = realloc(c->mounts, (c->nmounts + 1) * sizeof(*nm));
			char *vol = NULL;
			if (!nm)
				goto oom;
			c->mounts = nm;
			memset(&c->mounts[c->nmounts], 0, sizeof(*nm));
			c->nmounts++;
			r = parse_mount(b, key, cmd->opts[i].val, &c->mounts[c->nmounts - 1], &vol, err);
			if (r < 0)
				goto fail;
			if (vol) {
				char **nv = realloc(c->volumes, (nvol + 2) * sizeof(*nv));
				if (!nv) {
					free(vol);
					goto oom;
				}
				c->volumes = nv;
				c->volumes[nvol++] = vol;
				c->volumes[nvol] = NULL;
			}
		}
	}
	if (strcmp(rt, "docker") == 0 && !c->image) {
		r = nerr_set(err, EINVAL, "%s: image=IMG is required for runtime=docker", cmd->argv[0]);
		goto fail;
	}
	*ret = c;
	return 0;
oom:
	r = nerr_set(err, ENOMEM, "out of memory");
fail:
	container_free(c);
	return r;
}

static int cmd_create_run(struct bnode *n, const struct ctl_cmd *cmd, struct breq *rq)
{
	struct backend *b = node_backend(n);
	struct cact t = { .then_start = strcmp(cmd->argv[0], "run") == 0 };
	struct container *c = NULL;
	char line[512];
	int r;

	r = build_container(b, cmd, &c, &rq->err);
	if (r < 0)
		return r;
	r = engine_ready(c->eng, &rq->err);
	if (r < 0) {
		container_free(c);
		return r;
	}
	c->node = bnode_new(&container_type, c->name, c);
	if (!c->node) {
		container_free(c);
		return nerr_set(&rq->err, ENOMEM, "out of memory");
	}
	r = bnode_add(b->containers, c->node);
	if (r < 0) {
		bnode_unref(c->node);	/* frees c */
		return nerr_set(&rq->err, -r, "container '%s': %s", cmd->argv[1],
				r == -EEXIST ? "exists" : strerror(-r));
	}
	bnode_unref(c->node);	/* the tree holds it now */
	events_emit(b->events, "container", c->name, NULL, "PULLING", NULL, NULL);
	r = submit(c, CA_CREATE, cmdline_of(cmd, line, sizeof(line)), rq, &t);
	if (r < 0 && r != -EINPROGRESS)
		container_forget(c);
	return r;
}

static const char *const create_opts[] = {
	"runtime", "image", "cmd", "env.", "cpus", "memory", "pids", "volume", "bind",
	"template", "distro", "release", "arch", "image_variant", "image_server",
	"template_args", "flush_cache", "force_cache", "disable_gpg", NULL
};

static const struct ctl_spec containers_specs[] = {
	{ .name = "create", .min_args = 1, .max_args = 1, .opts = create_opts,
	  .usage = "create NAME runtime=docker|lxc [image=IMG] [cmd='ARGV ...'] [env.K=V ...] [cpus=N] [memory=SIZE] [pids=N] [volume=VOLNAME:/path[:ro] ...] [bind=/host:/path[:ro] ...] [template=T] [distro=D] [release=R] [arch=A] [image_variant=V] [image_server=HOST] [template_args='ARG ...'] [flush_cache=BOOL] [force_cache=BOOL] [disable_gpg=BOOL]" },
	{ .name = "run", .min_args = 1, .max_args = 1, .opts = create_opts,
	  .usage = "run NAME ... (create, then start)" },
};
static const bctl_fn containers_fns[] = { cmd_create_run, cmd_create_run };
static const struct bctl_table containers_ctl = { containers_specs, containers_fns, 2 };
BCTL_FUNCS(containers_ctl, containers_ctl)

static const struct battr containers_attrs[] = {
	BCTL_ATTR(containers_ctl),
	{ .name = "error", .show = battr_show_error },
};

const struct btype containers_type = {
	.name = "containers",
	.attrs = containers_attrs,
	.nattrs = sizeof(containers_attrs) / sizeof(containers_attrs[0]),
};

/* ---- engine events and recovery ---- */

static struct container *find_by_id(struct backend *b, struct engine *e, const char *id,
				    struct bnode **ret_node)
{
	struct bnode **v;
	size_t n;
	struct container *found = NULL;

	if (bnode_list(b->containers, &v, &n) < 0)
		return NULL;
	for (size_t i = 0; i < n && !found; i++) {
		struct container *c = cof(v[i]);
		pthread_mutex_lock(&c->lock);
		if (c->eng == e && c->id && strcmp(c->id, id) == 0) {
			found = c;
			*ret_node = bnode_ref(v[i]);
		}
		pthread_mutex_unlock(&c->lock);
	}
	bnode_list_free(v, n);
	return found;
}

/* Queue an inspect of every container of e (engine back, or at start). */
static void resync_engine(struct backend *b, struct engine *e)
{
	struct bnode **v;
	size_t n;

	if (bnode_list(b->containers, &v, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct container *c = cof(v[i]);
		if (c->eng == e)
			submit(c, CA_SYNC, "sync", NULL, NULL);
	}
	bnode_list_free(v, n);
}

static void on_engine_event(void *ctx, const struct rt_event *ev)
{
	struct engine *e = ctx;
	struct backend *b = e->b;
	struct bnode *node = NULL;
	struct container *c;

	if (ev->kind == RT_EV_ENGINE_UP) {
		resync_engine(b, e);
		return;
	}
	if (ev->kind == RT_EV_ENGINE_DOWN || !ev->id)
		return;
	c = find_by_id(b, e, ev->id, &node);
	if (!c)
		return;
	switch (ev->kind) {
	case RT_EV_START: {
		bool ours;
		pthread_mutex_lock(&c->lock);
		if (!c->started_at || ev->time > c->started_at)
			c->started_at = ev->time ? ev->time : time(NULL);
		/* STARTING is ours: the start action moves on from it; RUNNING
		 * is news we already have */
		ours = c->state == C_STARTING || c->state == C_RUNNING;
		if (!ours) {
			/* started by the engine (a restart policy, a system
			 * container rebooting): the last run's end is history */
			c->has_exit = false;
			c->oom_killed = false;
			c->finished_at = 0;
		}
		pthread_mutex_unlock(&c->lock);
		if (!ours) {
			set_state(c, C_RUNNING, NULL);
			submit(c, CA_SYNC, "sync", NULL, NULL);	/* pid and checkpoint */
		}
		break;
	}
	case RT_EV_DIE: {
		/* the inspect queued here says EXITED, with the OOM flag */
		pthread_mutex_lock(&c->lock);
		c->exit_pending = true;
		c->exit_code = ev->exit_code;
		c->finished_at = ev->time ? ev->time : time(NULL);
		pthread_mutex_unlock(&c->lock);
		submit(c, CA_SYNC, "sync", NULL, NULL);
		break;
	}
	case RT_EV_OOM:
		pthread_mutex_lock(&c->lock);
		c->oom_killed = true;
		pthread_mutex_unlock(&c->lock);
		bnode_changed(c->node);
		break;
	case RT_EV_PAUSE:
		set_state(c, C_PAUSED, NULL);
		break;
	case RT_EV_UNPAUSE:
		set_state(c, C_RUNNING, NULL);
		break;
	case RT_EV_DESTROY:
		if (state_of(c) != C_DESTROYING)
			mark_gone(c, "the engine container was removed outside nodefs");
		break;
	default:
		break;
	}
	bnode_unref(node);
}

/* ---- reconciliation (reconcile.h) ---- */

#define RECONCILE_GRACE_S 2

/* Whether s and r say the same about running: CREATED and EXITED are both
 * "not running" (a start that failed leaves nodefs CREATED and LXC's record
 * EXITED), so only running, paused and down are told apart. */
static int run_class(enum cstate s)
{
	return s == C_RUNNING ? 1 : s == C_PAUSED ? 2 : 0;
}

static int rt_run_class(enum rt_state r)
{
	return r == RT_STATE_RUNNING ? 1 : r == RT_STATE_PAUSED ? 2 : 0;
}

static const char *rt_state_upper(enum rt_state r)
{
	switch (r) {
	case RT_STATE_CREATED: return "CREATED";
	case RT_STATE_RUNNING: return "RUNNING";
	case RT_STATE_PAUSED: return "PAUSED";
	case RT_STATE_EXITED: return "EXITED";
	case RT_STATE_GONE: return "GONE";
	default: return "UNKNOWN";
	}
}

/* Nothing in flight that the listing could have raced: no command queued
 * or running, no event waiting for its sync, a state that is no step of a
 * command. */
static bool settled(struct container *c)
{
	bool ok;

	if (actq_busy(&c->q))
		return false;
	pthread_mutex_lock(&c->lock);
	ok = !c->removed && !c->exit_pending &&
	     (c->state == C_CREATED || c->state == C_RUNNING || c->state == C_PAUSED ||
	      c->state == C_EXITED);
	pthread_mutex_unlock(&c->lock);
	return ok;
}

static int drift_add(struct drift_report *r, size_t *cap, enum drift_kind k, const char *name,
		     const char *id, const char *nodefs, const char *runtime, const char *note)
{
	struct drift *d;

	if (r->n == *cap) {
		size_t nc = *cap ? *cap * 2 : 8;
		struct drift *nv = realloc(r->v, nc * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		r->v = nv;
		*cap = nc;
	}
	d = &r->v[r->n++];
	memset(d, 0, sizeof(*d));
	d->kind = k;
	snprintf(d->name, sizeof(d->name), "%s", name ? name : "");
	snprintf(d->id, sizeof(d->id), "%s", id ? id : "");
	snprintf(d->nodefs, sizeof(d->nodefs), "%s", nodefs ? nodefs : "");
	snprintf(d->runtime, sizeof(d->runtime), "%s", runtime ? runtime : "");
	snprintf(d->note, sizeof(d->note), "%s", note ? note : "");
	return 0;
}

/* A container of e named name whose create is under way (its engine id is
 * not known yet). */
static bool creating_now(struct backend *b, struct engine *e, const char *name)
{
	struct bnode *k = name ? bnode_lookup(b->containers, name) : NULL;
	bool yes = false;

	if (!k)
		return false;
	if (cof(k)->eng == e) {
		pthread_mutex_lock(&cof(k)->lock);
		yes = cof(k)->state == C_PULLING && !cof(k)->id;
		pthread_mutex_unlock(&cof(k)->lock);
	}
	bnode_unref(k);
	return yes;
}

/* One of nodefs's containers against the listing: marks the entry it
 * matches in seen. */
static int reconcile_one(struct backend *b, struct engine *e, struct container *c,
			 const struct rt_listing *l, size_t n, bool *seen,
			 struct drift_report *rep, size_t *cap)
{
	char id[256], note[160];
	enum cstate s;
	bool has_id, gone;
	size_t i;

	pthread_mutex_lock(&c->lock);
	s = c->state;
	has_id = c->id != NULL;
	snprintf(id, sizeof(id), "%s", c->id ? c->id : "");
	gone = c->removed;
	pthread_mutex_unlock(&c->lock);
	if (gone)
		return 0;
	if (s == C_PULLING && !has_id) {
		/* its create is under way: what the engine has of it so far
		 * is no orphan */
		for (i = 0; i < n; i++)
			if (l[i].name && strcmp(l[i].name, c->name) == 0)
				seen[i] = true;
		return 0;
	}
	if (!has_id) {
		/* lost its engine container before (an event, recovery, or
		 * an earlier pass took it in): the difference stands until
		 * the container is destroyed */
		return drift_add(rep, cap, DRIFT_MISSING, c->name, "", cstate_to_string(s), "GONE",
				 "the runtime no longer has it; destroy removes containers/NAME");
	}
	for (i = 0; i < n; i++)
		if (l[i].id && strcmp(l[i].id, id) == 0)
			break;
	if (i < n)
		seen[i] = true;
	if (!settled(c) || !c->eng->h)
		return 0;
	if (i == n || run_class(s) != rt_run_class(l[i].status.state)) {
		/* the listing is a moment old: look again at this one */
		struct rt_status st = { 0 };
		struct nerr err = { 0 };
		int r = e->ops->inspect(e->h, id, &st, &err);

		if (r < 0 && r != -ENOENT)
			return 0;	/* cannot tell now; the next pass will */
		pthread_mutex_lock(&c->lock);
		if (!c->id || strcmp(c->id, id) != 0 || c->state != s)
			r = 1;	/* moved on meanwhile: no difference to report */
		pthread_mutex_unlock(&c->lock);
		if (r == 1 || !settled(c))
			return 0;
		if (r == -ENOENT) {
			snprintf(note, sizeof(note), "removed outside nodefs; taken in: %s with the reason in error",
				 s == C_EXITED ? "stays EXITED" : "now EXITED");
			r = drift_add(rep, cap, DRIFT_MISSING, c->name, id, cstate_to_string(s), "GONE",
				      note);
			submit(c, CA_SYNC, "sync", NULL, NULL);
			return r;
		}
		if (run_class(s) == rt_run_class(st.state))
			return 0;	/* the listing was behind */
		{
			/* a change the engine made a moment ago: its event may
			 * still be on the way (they take milliseconds), so the
			 * next pass judges */
			time_t when = st.state == RT_STATE_EXITED ? st.finished_at : st.started_at;

			if (when && time(NULL) - when < RECONCILE_GRACE_S)
				return 0;
		}
		snprintf(note, sizeof(note), "an event was missed; taken in: the runtime's %s",
			 rt_state_upper(st.state));
		r = drift_add(rep, cap, DRIFT_STATE, c->name, id, cstate_to_string(s),
			      rt_state_upper(st.state), note);
		submit(c, CA_SYNC, "sync", NULL, NULL);
		return r;
	}
	return 0;
}

int containers_reconcile(struct backend *b, struct engine *e, struct drift_report *ret,
			 struct nerr *err)
{
	struct drift_report rep = { 0 };
	struct rt_listing *l = NULL;
	struct bnode **v = NULL;
	bool *seen = NULL;
	size_t n = 0, nv = 0, cap = 0;
	int r;

	if (!e->h || !e->ops->list)
		return nerr_set(err, EHOSTDOWN, "runtime %s has no driver handle", e->ops->name);
	r = e->ops->list(e->h, &l, &n, err);
	if (r < 0)
		return r;
	seen = calloc(n ? n : 1, sizeof(*seen));
	if (!seen || bnode_list(b->containers, &v, &nv) < 0) {
		r = nerr_set(err, ENOMEM, "out of memory");
		goto out;
	}
	rep.listed = n;
	for (size_t i = 0; r >= 0 && i < nv; i++)
		if (cof(v[i])->eng == e)
			r = reconcile_one(b, e, cof(v[i]), l, n, seen, &rep, &cap);
	for (size_t i = 0; r >= 0 && i < n; i++) {
		struct bnode *node = NULL;
		struct rt_status st;
		struct nerr e2 = { 0 };
		const char *note;

		if (seen[i] || !l[i].id)
			continue;
		/* made or destroyed by nodefs since the listing? */
		if (creating_now(b, e, l[i].name))
			continue;
		if (find_by_id(b, e, l[i].id, &node)) {
			bnode_unref(node);
			continue;
		}
		if (l[i].half_made) {
			note = "half-made: a create cut short by a crash; not removed (a restart "
			       "of nodefs removes it, or lxc-destroy)";
		} else {
			if (e->ops->inspect(e->h, l[i].id, &st, &e2) == -ENOENT)
				continue;
			note = "carries nodefs's marks but nodefs does not know it; not removed";
		}
		r = drift_add(&rep, &cap, DRIFT_ORPHAN, l[i].name, l[i].id, "",
			      l[i].half_made ? "HALF_MADE" : rt_state_upper(l[i].status.state), note);
	}
	if (r < 0)
		r = nerr_set(err, -r, "out of memory");
out:
	bnode_list_free(v, nv);
	free(seen);
	rt_listing_free(l, n);
	if (r < 0) {
		drift_report_free(&rep);
		return r;
	}
	*ret = rep;
	return 0;
}

static void recover_one(void *ctx, const char *name, json_t *j)
{
	struct backend *b = ctx;
	const char *rt = json_string_value(json_object_get(j, "runtime"));
	struct engine *e = rt ? engine_find(b, rt) : NULL;
	struct container *c;
	json_t *a, *v;
	size_t i;
	const char *s;
	int st;

	if (!e || valid_name(name, NULL) < 0) {
		log_err("container checkpoint %s: unknown runtime '%s'", name, rt ? rt : "");
		atomic_fetch_add(&b->bad_records, 1);
		return;
	}
	c = container_alloc(b, e, name);
	if (!c)
		return;
#define S(field, key) if ((s = json_string_value(json_object_get(j, key))) && s[0]) c->field = strdup(s)
	S(id, "id");
	S(image, "image");
	S(template_name, "template_name");
	S(distro, "distro");
	S(release, "release");
	S(arch, "arch");
	S(image_variant, "image_variant");
	S(image_server, "image_server");
#undef S
	a = json_object_get(j, "cmd");
	if (json_array_size(a)) {
		c->argv = calloc(json_array_size(a) + 1, sizeof(char *));
		json_array_foreach(a, i, v)
			if (c->argv)
				c->argv[i] = strdup(json_string_value(v) ? json_string_value(v) : "");
	}
	{
		const char *k;
		a = json_object_get(j, "env");
		c->env = calloc(json_object_size(a) + 1, sizeof(*c->env));
		json_object_foreach(a, k, v) {
			if (!c->env)
				break;
			c->env[c->nenv].key = strdup(k);
			c->env[c->nenv].val = strdup(json_string_value(v) ? json_string_value(v) : "");
			c->nenv++;
		}
	}
	a = json_object_get(j, "mounts");
	c->mounts = calloc(json_array_size(a) + 1, sizeof(*c->mounts));
	json_array_foreach(a, i, v) {
		if (!c->mounts)
			break;
		c->mounts[i].source = strdup(json_string_value(json_object_get(v, "source")) ?: "");
		c->mounts[i].target = strdup(json_string_value(json_object_get(v, "target")) ?: "");
		c->mounts[i].ro = json_is_true(json_object_get(v, "ro"));
		c->nmounts++;
	}
	a = json_object_get(j, "volumes");
	c->volumes = calloc(json_array_size(a) + 1, sizeof(char *));
	json_array_foreach(a, i, v)
		if (c->volumes)
			c->volumes[i] = strdup(json_string_value(v) ?: "");
	c->cpus = json_number_value(json_object_get(j, "cpus"));
	c->memory = (uint64_t)json_integer_value(json_object_get(j, "memory"));
	c->pids = json_integer_value(json_object_get(j, "pids"));
	c->flush_cache = json_is_true(json_object_get(j, "flush_cache"));
	c->force_cache = json_is_true(json_object_get(j, "force_cache"));
	c->disable_gpg = json_is_true(json_object_get(j, "disable_gpg"));
	st = cstate_from_string(json_string_value(json_object_get(j, "state")));
	c->state = st < 0 ? C_EXITED : (enum cstate)st;
	if ((v = json_object_get(j, "exit_code"))) {
		c->has_exit = true;
		c->exit_code = (int)json_integer_value(v);
	}
	c->oom_killed = json_is_true(json_object_get(j, "oom_killed"));
	c->started_at = (time_t)json_integer_value(json_object_get(j, "started_unix"));
	c->finished_at = (time_t)json_integer_value(json_object_get(j, "finished_unix"));
	c->node = bnode_new(&container_type, name, c);
	if (!c->node) {
		container_free(c);
		return;
	}
	if (bnode_add(b->containers, c->node) < 0) {
		bnode_unref(c->node);
		return;
	}
	bnode_unref(c->node);
}

static void recover_bad(void *ctx, const char *name, const char *why)
{
	struct backend *b = ctx;

	log_err("checkpoint of container %s is unreadable: %s", name, why);
	atomic_fetch_add(&b->bad_records, 1);
}

/* What the checkpoints say, then what the engines say: a container whose
 * engine no longer has it is EXITED with the reason; one that was being
 * made when nodefs stopped is taken back (it was never acknowledged). */
/* A create that a crash cut short: remove what engine e made under this
 * name (our mark, the name in it), so the name is free again. Best effort:
 * an engine that is down keeps its half-made container, and a later create
 * of the same name is then refused as taken. */
/* name NULL: every container listed as half_made (a create in progress
 * when the daemon died, whatever its operation's fate). Returns how many
 * half_made ones (an in-progress mark: the daemon died inside the engine's
 * create) were removed. */
static int take_back_half_made(struct engine *e, const char *name)
{
	struct rt_listing *l = NULL;
	struct nerr err = { 0 };
	size_t n = 0;
	int half = 0;

	if (engine_ready(e, &err) < 0 || e->ops->list(e->h, &l, &n, &err) < 0) {
		if (name)
			log_warn("container %s: a create was cut short; cannot check %s for what it made: %s",
				 name, e->ops->name, err.msg);
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		if (!l[i].name || (name ? strcmp(l[i].name, name) != 0 : !l[i].half_made))
			continue;
		if (!name && creating_now(e->b, e, l[i].name))
			continue;	/* a create written since the mount came up */
		if (e->ops->destroy(e->h, l[i].id, &err) < 0) {
			log_warn("container %s: cannot remove the half-made %s container %s: %s",
				 l[i].name, e->ops->name, l[i].id, err.msg);
			continue;
		}
		log_info("container %s: removed the half-made %s container %s%s", l[i].name,
			 e->ops->name, l[i].id, l[i].half_made ? " (its create was under way)" : "");
		half += l[i].half_made;
	}
	rt_listing_free(l, n);
	return half;
}

/* The create checkpoints nothing of the container before the engine has
 * made it (an fsync less on every run); its operation was checkpointed
 * PENDING before it began. So a PENDING container.create whose container
 * has no record is a create a crash cut short: whatever the engine made
 * for it is taken back. The operation itself is dropped, with the reason,
 * by ops_drop_orphans. */
static void take_back_cut_creates(struct backend *b)
{
	struct bnode **v;
	size_t n;

	if (bnode_list(b->operations, &v, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct operation *op = v[i]->priv;
		const char *name;
		struct bnode *k;
		bool pending;

		pthread_mutex_lock(&op->lock);
		pending = op->state == OP_PENDING;
		pthread_mutex_unlock(&op->lock);
		if (!pending || strcmp(op->type, "container.create") != 0 ||
		    strncmp(op->object, "containers/", 11) != 0)
			continue;
		name = op->object + 11;
		if (valid_name(name, NULL) < 0)
			continue;
		k = bnode_lookup(b->containers, name);
		if (k) {
			bnode_unref(k);
			continue;	/* it has a record: recover_check has it */
		}
		int half = 0;

		for (size_t e = 0; e < b->nengines; e++)
			if (b->engines[e].h)
				half += take_back_half_made(&b->engines[e], name);
		if (half) {
			/* the engine was making it when the daemon died: the
			 * create failed, and says why (with none made, nothing
			 * failed: ops_drop_orphans drops it) */
			struct nerr why = { 0 };

			nerr_set(&why, EINTR, "nodefs stopped while the runtime was making the "
				 "container (a template or pull under way); the half-made container "
				 "was removed at restart");
			op_end(op, -EINTR, &why);
		}
	}
	bnode_list_free(v, n);
	/* half-made containers whose operation is not there to say so */
	for (size_t e = 0; e < b->nengines; e++)
		if (b->engines[e].h)
			take_back_half_made(&b->engines[e], NULL);
}

static void recover_check(struct container *c)
{
	struct nerr err = { 0 };
	int r;

	if (!c->id) {
		/* never made (a record from before the engine answered), or
		 * gone from the engine and already EXITED with the reason,
		 * which stays until destroyed */
		if (c->state == C_PULLING) {
			take_back_half_made(c->eng, c->name);
			container_forget(c);
		}
		return;
	}
	if (engine_ready(c->eng, &err) < 0) {
		bnode_set_error(c->node, err.msg);
		return;
	}
	r = refresh(c, false, &err);
	if (r == -ENOENT) {
		pthread_mutex_lock(&c->lock);
		free(c->id);
		c->id = NULL;
		c->pid = 0;
		pthread_mutex_unlock(&c->lock);
		bnode_set_error(c->node, "the engine no longer has this container");
		set_state(c, C_EXITED, "gone from the engine");
	}
	checkpoint(c, &err);
}

int containers_recover(struct backend *b, struct nerr *err)
{
	struct bnode **v;
	size_t n;
	int r;

	r = store_load(b->cfg->state_dir, "containers", recover_one, recover_bad, b);
	if (r < 0)
		return nerr_set(err, -r, "cannot read the container checkpoints: %s", strerror(-r));
	/* the engines' first probe has run (engines_start): check each */
	if (bnode_list(b->containers, &v, &n) < 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		recover_check(cof(v[i]));
	bnode_list_free(v, n);
	take_back_cut_creates(b);
	return 0;
}

int containers_watch(struct backend *b)
{
	for (size_t i = 0; i < b->nengines; i++) {
		struct engine *e = &b->engines[i];
		struct nerr err = { 0 };

		if (e->h && e->ops->watch && e->ops->watch(e->h, on_engine_event, e, &err) < 0)
			log_warn("runtime %s: no event stream: %s", e->ops->name, err.msg);
	}
	return 0;
}

int containers_render_metrics(struct backend *b, struct sbuf *out)
{
	struct cm {
		bool has_stats;
		struct rt_stats st;
		uint64_t exits[ARRAY_SIZE(exit_reasons)];
	} *m;
	struct bnode **v;
	size_t n;
	int r;

	if (bnode_list(b->containers, &v, &n) < 0)
		return -ENOMEM;
	m = calloc(n ? n : 1, sizeof(*m));
	if (!m) {
		bnode_list_free(v, n);
		return -ENOMEM;
	}
	/* one pass collects, so every family shows the same moment and each
	 * family's samples stay together, as the format requires */
	for (size_t i = 0; i < n; i++) {
		struct container *c = cof(v[i]);
		struct nerr err = { 0 };
		char id[256];
		bool running;

		pthread_mutex_lock(&c->lock);
		running = c->state == C_RUNNING || c->state == C_PAUSED;
		memcpy(m[i].exits, c->exits, sizeof(m[i].exits));
		pthread_mutex_unlock(&c->lock);
		m[i].has_stats = running && current_id(c, id, sizeof(id)) && c->eng->h &&
				 c->eng->ops->stats(c->eng->h, id, &m[i].st, &err) >= 0;
	}
	r = sbuf_adds(out, "# HELP nodefs_containers Containers by runtime and state.\n"
			   "# TYPE nodefs_containers gauge\n");
	for (size_t e = 0; r >= 0 && e < b->nengines; e++)
		for (int s = 0; r >= 0 && s <= C_DESTROYING; s++) {
			size_t count = 0;
			for (size_t i = 0; i < n; i++)
				count += cof(v[i])->eng == &b->engines[e] && cof(v[i])->state == (enum cstate)s;
			if (count)
				r = sbuf_printf(out, "nodefs_containers{runtime=\"%s\",state=\"%s\"} %zu\n",
						b->engines[e].ops->name, cstate_names[s], count);
		}
	if (r >= 0)
		r = sbuf_adds(out, "# HELP nodefs_container_memory_bytes Memory the container uses.\n"
				   "# TYPE nodefs_container_memory_bytes gauge\n");
	for (size_t i = 0; r >= 0 && i < n; i++)
		if (m[i].has_stats)
			r = sbuf_printf(out, "nodefs_container_memory_bytes{container=\"%s\"} %llu\n",
					cof(v[i])->name, (unsigned long long)m[i].st.memory_bytes);
	if (r >= 0)
		r = sbuf_adds(out, "# HELP nodefs_container_cpu_seconds_total CPU time the container used, by mode.\n"
				   "# TYPE nodefs_container_cpu_seconds_total counter\n");
	for (size_t i = 0; r >= 0 && i < n; i++)
		if (m[i].has_stats)
			r = sbuf_printf(out, "nodefs_container_cpu_seconds_total{container=\"%s\",mode=\"user\"} %.6f\n"
					"nodefs_container_cpu_seconds_total{container=\"%s\",mode=\"system\"} %.6f\n",
					cof(v[i])->name, m[i].st.cpu_user_seconds,
					cof(v[i])->name, m[i].st.cpu_system_seconds);
	if (r >= 0)
		r = sbuf_adds(out, "# HELP nodefs_container_exits_total Times the container reached EXITED "
				   "since the daemon started, by reason (completed, error, signal, oom, lost).\n"
				   "# TYPE nodefs_container_exits_total counter\n");
	for (size_t i = 0; r >= 0 && i < n; i++)
		for (size_t k = 0; r >= 0 && k < ARRAY_SIZE(exit_reasons); k++)
			r = sbuf_printf(out, "nodefs_container_exits_total{container=\"%s\",reason=\"%s\"} %llu\n",
					cof(v[i])->name, exit_reasons[k], (unsigned long long)m[i].exits[k]);
	free(m);
	bnode_list_free(v, n);
	return r;
}

/*
 * Recovery: a PENDING operation on a container whose command can safely be
 * sent again (run or start: start if not running; stop; destroy) is driven
 * to an end once recover_check has reconciled the container with its
 * engine. Others (kill, exec, update, pause, resume) are not repeated: the
 * caller drops them with the reason.
 */
int container_resume(struct backend *b, struct operation *op)
{
	struct ctl_cmd cmd = { 0 };
	struct container *c;
	struct bnode *n;
	struct cact *x;
	int kind = -1;

	if (strncmp(op->object, "containers/", 11) != 0)
		return -EINVAL;
	n = bnode_lookup(b->containers, op->object + 11);
	if (!n)
		return -ENOENT;
	c = cof(n);
	if (ctl_parse(op->command, strlen(op->command), &cmd, NULL) >= 0) {
		const char *w = cmd.argv[0];
		bool running;

		pthread_mutex_lock(&c->lock);
		running = c->state == C_RUNNING || c->state == C_PAUSED;
		pthread_mutex_unlock(&c->lock);
		if (strcmp(w, "run") == 0 || strcmp(w, "create") == 0 || strcmp(w, "start") == 0)
			kind = strcmp(w, "create") == 0 || running ? CA_SYNC : CA_START;
		else if (strcmp(w, "stop") == 0)
			kind = running ? CA_STOP : CA_SYNC;
		else if (strcmp(w, "destroy") == 0)
			kind = CA_DESTROY;
	}
	ctl_cmd_free(&cmd);
	x = kind >= 0 ? calloc(1, sizeof(*x)) : NULL;
	if (!x) {
		bnode_unref(n);
		return -EINVAL;
	}
	x->c = c;
	x->node = n;	/* the lookup's reference */
	x->kind = kind;
	x->timeout_s = -1;	/* the runtime's stop_timeout */
	x->a.b = b;
	x->a.op = op;
	bnode_ref(op->node);	/* the action's reference, dropped when it ends */
	x->a.run = run_action;
	x->a.free = cact_free;
	op->claimed = true;
	events_emit(b->events, "operation", op->id, "PENDING", "PENDING", op->id,
		    "resumed after a restart");
	actq_submit(&c->q, &x->a);
	return 0;
}
