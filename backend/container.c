/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * container: containers/ and containers/NAME/, containers on the engines of
 * runtimes/ (Docker, LXC) and their lifecycle.
 */
#include "backend-internal.h"

#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "units.h"
#include "valid.h"

static int check_create(struct backend *b, const struct ctl_cmd *c, struct nerr *err)
{
	const char *rt = ctl_opt_get(c, "runtime");
	struct engine *e;
	const char *s;
	uint64_t size;
	double cpus;
	long long ll;
	char **argv;
	int r;

	r = valid_name(c->argv[1], err);
	if (r < 0)
		return r;
	if (!rt)
		return nerr_set(err, EINVAL, "%s: runtime=docker|lxc is required", c->argv[0]);
	e = engine_find(b, rt);
	if (!e)
		return nerr_set(err, EINVAL, "no runtime '%s' (runtimes: docker, lxc)", rt);
	if ((s = ctl_opt_get(c, "memory")) && (r = parse_size(s, &size, err)) < 0)
		return r;
	if ((s = ctl_opt_get(c, "cpus")) && (r = parse_cpus(s, &cpus, err)) < 0)
		return r;
	if ((s = ctl_opt_get(c, "pids")) && (r = parse_int(s, 1, 4194304, &ll, err)) < 0)
		return r;
	if ((s = ctl_opt_get(c, "cmd"))) {
		r = ctl_split_words(s, &argv, err);
		if (r < 0)
			return r;
		ctl_strv_free(argv);
	}
	return nerr_set(err, ENOTSUP, "runtime %s: containers are not wired yet", rt);
}

static int cmd_create(struct bnode *n, const struct ctl_cmd *c, struct breq *rq)
{
	return check_create(node_backend(n), c, &rq->err);
}

static const char *const create_opts[] = {
	"runtime", "image", "cmd", "env.", "cpus", "memory", "pids", "volume", "bind",
	"template", "distro", "release", "arch", "image_variant", "image_server",
	"template_args", "flush_cache", "force_cache", "disable_gpg", NULL
};

static const struct ctl_spec containers_specs[] = {
	{ .name = "create", .min_args = 1, .max_args = 1, .opts = create_opts,
	  .usage = "create NAME runtime=docker|lxc [image=IMG] [cmd='ARGV ...'] [env.K=V ...] [cpus=N] [memory=SIZE] [pids=N] [volume=VOLNAME:/path[:ro] ...] [bind=/host:/path[:ro] ...] [template=T] [distro=D] [release=R] [arch=A]" },
	{ .name = "run", .min_args = 1, .max_args = 1, .opts = create_opts,
	  .usage = "run NAME ... (create, then start)" },
};
static const bctl_fn containers_fns[] = { cmd_create, cmd_create };
static const struct bctl_table containers_ctl = { containers_specs, containers_fns, 2 };

static int containers_ctl_show(struct bnode *n, struct sbuf *out)
{
	return bctl_usage(&containers_ctl, out);
}

static int containers_ctl_store(struct bnode *n, const char *line, size_t len, struct breq *rq)
{
	return bctl_dispatch(&containers_ctl, n, line, len, rq);
}

static const struct battr containers_attrs[] = {
	{ .name = "ctl", .flags = BATTR_CTL, .show = containers_ctl_show, .store = containers_ctl_store },
	{ .name = "error", .show = battr_show_error },
};

const struct btype containers_type = {
	.name = "containers",
	.attrs = containers_attrs,
	.nattrs = sizeof(containers_attrs) / sizeof(containers_attrs[0]),
};
