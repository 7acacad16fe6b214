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

/* VOLNAME:/path[:ro] or /host:/path[:ro]. */
static int check_mount_spec(struct backend *b, const char *key, const char *spec, struct nerr *err)
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
	if (strcmp(key, "bind") == 0) {
		const char *const *allowed = (const char *const *)b->cfg->allowed_targets;
		size_t n = 0;

		while (allowed && allowed[n])
			n++;
		r = valid_path(src, allowed, n, err);
		if (r < 0)
			nerr_prefix(err, "bind '%s': host path", spec);
		return r;
	}
	r = valid_name(src, err);
	if (r < 0) {
		nerr_prefix(err, "volume '%s'", spec);
		return -EINVAL;
	}
	return 0;
}

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
		goto bad;
	if ((s = ctl_opt_get(c, "cpus")) && (r = parse_cpus(s, &cpus, err)) < 0)
		goto bad;
	if ((s = ctl_opt_get(c, "pids")) && (r = parse_int(s, 1, 4194304, &ll, err)) < 0)
		goto bad;
	if ((s = ctl_opt_get(c, "cmd"))) {
		r = ctl_split_words(s, &argv, err);
		if (r < 0)
			goto bad;
		ctl_strv_free(argv);
	}
	for (size_t i = 0; i < c->nopts; i++) {
		const char *k = c->opts[i].key;
		if (strcmp(k, "volume") == 0 || strcmp(k, "bind") == 0) {
			r = check_mount_spec(b, k, c->opts[i].val, err);
			if (r < 0)
				return r;
		}
	}
	return nerr_set(err, ENOTSUP, "runtime %s: containers are not wired yet", rt);
bad:
	/* which option: the parsers name the value, the user needs the key */
	nerr_prefix(err, "%s", s == ctl_opt_get(c, "memory") ? "memory" :
		    s == ctl_opt_get(c, "cpus") ? "cpus" : s == ctl_opt_get(c, "pids") ? "pids" : "cmd");
	return -EINVAL;
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
