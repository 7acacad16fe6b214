/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * container-ctl: the commands of containers/ctl (create, run) and of
 * containers/NAME/ctl (start, stop, kill, pause, resume, update, exec,
 * destroy). Each handler checks everything its line names (the runtime, the
 * limits, every mount and where it resolves to) before anything happens,
 * then queues the action (container-run.c).
 *
 * It must not call an engine or touch a container's state: it validates and
 * hands over.
 */
#include "container-internal.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "units.h"
#include "valid.h"

/* ---- containers/NAME/ctl ---- */

static int cmd_simple(struct bnode *n, const struct ctl_cmd *cmd, struct breq *rq, int kind)
{
	char line[512];

	if (rq->dry_run)
		return 0;
	return container_submit(cof(n), kind, cmdline_of(cmd, line, sizeof(line)), rq, NULL);
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
	if (rq->dry_run)
		return 0;
	return container_submit(c, CA_STOP, cmdline_of(cmd, line, sizeof(line)), rq, &t);
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
	if (rq->dry_run)
		return 0;
	return container_submit(cof(n), CA_KILL, cmdline_of(cmd, line, sizeof(line)), rq, &t);
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
	if (rq->dry_run)
		return 0;
	return container_submit(cof(n), CA_UPDATE, cmdline_of(cmd, line, sizeof(line)), rq, &t);
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
	if (rq->dry_run) {
		strv_free(t.argv);
		return 0;
	}
	return container_submit(cof(n), CA_EXEC, cmdline_of(cmd, line, sizeof(line)), rq, &t);
}

static int cmd_destroy(struct bnode *n, const struct ctl_cmd *cmd, struct breq *rq)
{
	struct container *c = cof(n);
	char line[512];
	int r;

	if (rq->dry_run)
		return 0;
	r = container_submit(c, CA_DESTROY, cmdline_of(cmd, line, sizeof(line)), rq, NULL);
	/* a pull in progress is cancelled now, not after it; once the destroy
	 * is queued, which then takes the container away (do_create) */
	if (r >= 0 || r == -EINPROGRESS)
		c->prog.cancel = 1;
	return r;
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
const struct bctl_table container_ctl = { container_specs, container_fns, 8 };

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
 * is where the volume is published (dry_run: the spec alone, the volume is
 * looked at when the line runs). */
static int parse_mount(struct backend *b, const char *key, const char *spec, bool dry_run,
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
		if (dry_run)
			return 0;
		r = b->links && b->links->volume_mount_source ?
			b->links->volume_mount_source(b, src, &m->source, err) :
			nerr_set(err, ENOENT, "no volume '%s'", src);
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

/* Everything create names, checked before anything happens. dry_run: the
 * values alone (the line's, the runtime's, the host paths'), *ret not
 * written; what depends on other objects (the name taken, a volume's
 * publish) is checked when the line runs. */
static int build_container(struct backend *b, const struct ctl_cmd *cmd, bool dry_run,
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
	k = dry_run ? NULL : bnode_lookup(containers_dir(b), name);
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
	c->state = C_CREATING;
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
			r = parse_mount(b, key, cmd->opts[i].val, dry_run, &c->mounts[c->nmounts - 1],
					&vol, err);
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
	if (dry_run) {
		container_free(c);
		return 0;
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

	r = build_container(b, cmd, rq->dry_run, &c, &rq->err);
	if (r < 0 || rq->dry_run)
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
	r = bnode_add(containers_dir(b), c->node);
	if (r < 0) {
		bnode_unref(c->node);	/* frees c */
		return nerr_set(&rq->err, -r, "container '%s': %s", cmd->argv[1],
				r == -EEXIST ? "exists" : strerror(-r));
	}
	/* announced by container_submit once its operation is on record; a
	 * create refused before that goes without a word. The node stays ours
	 * until the end: once submitted, the create may fail, unmake the
	 * container and the tree let it go */
	struct bnode *node = c->node;

	r = container_submit(c, CA_CREATE, cmdline_of(cmd, line, sizeof(line)), rq, &t);
	if (r < 0 && r != -EINPROGRESS)
		container_unmake(c);
	bnode_unref(node);
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
const struct bctl_table containers_ctl = { containers_specs, containers_fns, 2 };
