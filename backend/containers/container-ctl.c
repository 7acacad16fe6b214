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

/* Everything create names, checked before anything happens, through the
 * option table (container-options.c). dry_run: the values alone (the
 * line's, the runtime's, the host paths'), *ret not written; what depends
 * on other objects (the name taken, a volume's publish) is checked when the
 * line runs. */
static int build_container(struct backend *b, const struct ctl_cmd *cmd, bool dry_run,
			   struct container **ret, struct nerr *err)
{
	const char *rt = ctl_opt_get(cmd, "runtime");
	const char *name = cmd->argv[1];
	struct copt_ctx x = { .dry_run = dry_run, .b = b,
			      .allowed_targets = (const char *const *)b->cfg->allowed_targets };
	struct container *c;
	struct engine *e;
	struct bnode *k;
	int r;

	r = valid_name(name, err);
	if (r < 0)
		return r;
	if (!rt)
		return nerr_set(err, EINVAL, "%s: runtime=docker|lxc is required", cmd->argv[0]);
	e = engine_find(b, rt);
	x.runtime = copt_runtime_bit(rt);
	x.runtime_name = rt;
	if (!e || !x.runtime)
		return nerr_set(err, EINVAL, "no runtime '%s' (runtimes: docker, lxc)", rt);
	k = dry_run ? NULL : bnode_lookup(containers_dir(b), name);
	if (k) {
		bnode_unref(k);
		return nerr_set(err, EEXIST, "container '%s' exists", name);
	}

	c = container_alloc(b, e, name);
	if (!c)
		return nerr_set(err, ENOMEM, "out of memory");
	c->state = C_CREATING;
	r = copts_parse(cmd, &x, &c->spec, err);
	if (r < 0)
		goto fail;
	if (x.runtime == COPT_LXC && !c->spec.template_name &&
	    !(c->spec.template_name = strdup("busybox"))) {
		r = nerr_set(err, ENOMEM, "out of memory");
		goto fail;
	}
	if (dry_run) {
		container_free(c);
		return 0;
	}
	*ret = c;
	return 0;
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

static const struct ctl_spec containers_specs[] = {
	/* the options are the table's (container-options.c): checked by
	 * copt_known, listed after these lines by the ctl file's read */
	{ .name = "create", .min_args = 1, .max_args = 1, .opt_known = copt_known,
	  .usage = "create NAME runtime=docker|lxc [OPTION=VALUE ...] (the options below)" },
	{ .name = "run", .min_args = 1, .max_args = 1, .opt_known = copt_known,
	  .usage = "run NAME runtime=docker|lxc [OPTION=VALUE ...] (create, then start)" },
};
static const bctl_fn containers_fns[] = { cmd_create_run, cmd_create_run };
const struct bctl_table containers_ctl = { containers_specs, containers_fns, 2 };
