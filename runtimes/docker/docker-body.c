/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * docker-body: every JSON body the Docker driver sends (create, update,
 * Podman's libpod update, exec), written with common/jw, and the checks
 * that refuse a spec the engine would misread. Part of the driver's pure
 * half (see docker-internal.h): no I/O, no curl, no threads; unit-tested
 * and failing-allocation tested as is. What the engine sends back is
 * docker-json.c.
 */
#include "docker-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jw.h"
#include "macro.h"
#include "nerr.h"
#include "sbuf.h"
#include "valid.h"

/* Docker binds are "src:dst[:ro]": a colon or comma in a path cannot be said. */
static bool bind_path_ok(const char *p)
{
	return p && p[0] == '/' && !strpbrk(p, ":,\n");
}

/* RFC 3629 UTF-8: what the engine takes (jw would write U+FFFD for a bad
 * byte, which is not what the user asked for, so bad input is refused). */
static bool utf8_ok(const char *s)
{
	return valid_utf8(s, strlen(s));
}

/* a + b + c [+ d], malloc'd (NULL on OOM); plain malloc so failing-allocation
 * tests see every allocation of this file */
static char *concat(const char *a, const char *b, const char *c, const char *d)
{
	size_t la = strlen(a), lb = strlen(b), lc = strlen(c), ld = d ? strlen(d) : 0;
	char *s = malloc(la + lb + lc + ld + 1);

	if (!s)
		return NULL;
	memcpy(s, a, la);
	memcpy(s + la, b, lb);
	memcpy(s + la + lb, c, lc);
	if (d)
		memcpy(s + la + lb + lc, d, ld);
	s[la + lb + lc + ld] = '\0';
	return s;
}

/* A body is written with common/jw into an sbuf capped at DOCKER_BODY_CAP:
 * body_begin opens its object, body_end closes it and hands the text over
 * in *ret, or fails with the writer's error in words. */
struct req_body {
	struct sbuf sb;
	struct jw w;
};

static void body_begin(struct req_body *b)
{
	sbuf_init(&b->sb, DOCKER_BODY_CAP);
	jw_init(&b->w, &b->sb, 0);
	jw_obj(&b->w);
}

static int body_end(struct req_body *b, char **ret, struct nerr *err)
{
	int r;

	jw_obj_end(&b->w);
	r = jw_end(&b->w);
	if (r < 0) {
		sbuf_free(&b->sb);
		if (r == -E2BIG)
			return nerr_set(err, E2BIG, "request body over %u bytes", DOCKER_BODY_CAP);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	*ret = sbuf_steal(&b->sb);
	if (!*ret)
		return nerr_set(err, ENOMEM, "out of memory");
	return 0;
}

/* key = s1 + s2 + s3 [+ s4] as one string of the current array. */
static void concat_str(struct jw *w, const char *a, const char *b, const char *c, const char *d)
{
	_cleanup_free_ char *s = concat(a, b, c, d);

	if (!s)
		jw_fail(w, -ENOMEM);
	else
		jw_str(w, s);
}

/* A bind's "src:dst[:opts]". */
static void bind_str(struct jw *w, const struct rt_mount *m)
{
	concat_str(w, m->source, ":", m->target,
		   m->rshared ? (m->ro ? ":ro,rshared" : ":rw,rshared") : m->ro ? ":ro" : NULL);
}

/* Everything docker_json_create_body refuses, checked before a byte is
 * written, in the order the checks have always run. */
static int create_check(const struct rt_spec *spec, struct nerr *err)
{
	if (!spec->name || !*spec->name)
		return nerr_set(err, EINVAL, "container name missing");
	if (!spec->image || !*spec->image)
		return nerr_set(err, EINVAL, "docker needs image=");
	if (!utf8_ok(spec->image) || !utf8_ok(spec->name))
		return nerr_set(err, EINVAL, "image and name must be UTF-8");
	for (char *const *v = spec->argv; v && *v; v++)
		if (!utf8_ok(*v))
			return nerr_set(err, EINVAL, "cmd is not valid UTF-8");
	for (size_t i = 0; i < spec->nenv; i++) {
		const struct rt_kv *kv = &spec->env[i];

		if (!kv->key || !*kv->key || strchr(kv->key, '=') || !kv->val)
			return nerr_set(err, EINVAL, "bad environment variable name '%s'",
					kv->key ? kv->key : "");
		if (!utf8_ok(kv->key) || !utf8_ok(kv->val))
			return nerr_set(err, EINVAL, "environment is not valid UTF-8");
	}
	if (spec->memory > INT64_MAX)
		return nerr_set(err, EINVAL, "memory too large");
	if (spec->cpus != 0 && (!(spec->cpus > 0) || !isfinite(spec->cpus) || spec->cpus > 1e6))
		return nerr_set(err, EINVAL, "bad cpus %g", spec->cpus);
	if (spec->pids < 0)
		return nerr_set(err, EINVAL, "bad pids %" PRId64, spec->pids);
	if (spec->user && rt_user_valid(spec->user, err) < 0)
		return -EINVAL;
	if (spec->workdir && (spec->workdir[0] != '/' || !utf8_ok(spec->workdir)))
		return nerr_set(err, EINVAL, "bad workdir '%.100s'", spec->workdir);
	if (spec->hostname && !utf8_ok(spec->hostname))
		return nerr_set(err, EINVAL, "hostname is not valid UTF-8");
	for (char *const *v = spec->entrypoint; v && *v; v++)
		if (!utf8_ok(*v))
			return nerr_set(err, EINVAL, "entrypoint is not valid UTF-8");
	for (size_t i = 0; i < spec->nlabels; i++) {
		const struct rt_kv *kv = &spec->labels[i];

		if (!kv->key || !kv->key[0] || !kv->val || !utf8_ok(kv->key) || !utf8_ok(kv->val) ||
		    strncmp(kv->key, "io.nodefs.", 10) == 0)
			return nerr_set(err, EINVAL, "bad label '%.64s'", kv->key ? kv->key : "");
	}
	for (size_t i = 0; i < spec->nmounts; i++) {
		const struct rt_mount *m = &spec->mounts[i];

		if (!bind_path_ok(m->source) || !bind_path_ok(m->target))
			return nerr_set(err, EINVAL, "bad bind %s:%s (absolute paths without ':' or ',')",
					m->source ? m->source : "", m->target ? m->target : "");
		if (!utf8_ok(m->source) || !utf8_ok(m->target))
			return nerr_set(err, EINVAL, "bind is not valid UTF-8");
	}
	return 0;
}

static void port_key(const struct rt_port *p, char *buf, size_t len)
{
	snprintf(buf, len, "%u/%s", p->port, p->udp ? "udp" : "tcp");
}

/* Whether ports[i] is the first with its key (one JSON member a port),
 * the key in key. */
static bool port_first(const struct rt_spec *spec, size_t i, char *key, size_t len)
{
	port_key(&spec->ports[i], key, len);
	for (size_t k = 0; k < i; k++) {
		char other[32];

		port_key(&spec->ports[k], other, sizeof(other));
		if (strcmp(key, other) == 0)
			return false;
	}
	return true;
}

/* HostConfig's NetworkMode and PortBindings (network=, port=). The
 * engine's own RestartPolicy is never set: it stays "no", so that every
 * exit reaches nodefs, whose policy (restart=) restarts the container. */
static void service_host_config(struct jw *w, const struct rt_spec *spec)
{
	char key[32], hp[8];

	if (spec->network)
		jw_kstr(w, "NetworkMode", spec->network);
	if (!spec->nports)
		return;
	jw_key(w, "PortBindings");
	jw_obj(w);
	for (size_t i = 0; i < spec->nports; i++) {
		if (!port_first(spec, i, key, sizeof(key)))
			continue;	/* one member a port, its bindings together */
		jw_key(w, key);
		jw_arr(w);
		for (size_t k = i; k < spec->nports; k++) {
			char other[32];

			port_key(&spec->ports[k], other, sizeof(other));
			if (strcmp(key, other) != 0)
				continue;
			jw_obj(w);
			jw_kstr(w, "HostIp", spec->ports[k].host_ip);
			/* "": the engine chooses */
			snprintf(hp, sizeof(hp), "%u", spec->ports[k].host_port);
			jw_kstr(w, "HostPort", spec->ports[k].host_port ? hp : "");
			jw_obj_end(w);
		}
		jw_arr_end(w);
	}
	jw_obj_end(w);
}

/* argv as one shell command line: each word in single quotes. */
static int shell_line(char *const *argv, struct sbuf *out)
{
	int r = 0;

	for (size_t i = 0; r >= 0 && argv[i]; i++) {
		r = sbuf_adds(out, i ? " '" : "'");
		for (const char *p = argv[i]; r >= 0 && *p; p++)
			r = *p == '\'' ? sbuf_adds(out, "'\\''") : sbuf_printf(out, "%c", *p);
		if (r >= 0)
			r = sbuf_adds(out, "'");
	}
	return r;
}

/* ExposedPorts and the engine's own Healthcheck (health=cmd). Podman 4's
 * Engine API joins Test with spaces and splits a CMD again at every space
 * (["CMD","sh","-c","test -e /x"] runs `sh -c test -e /x`), but keeps a
 * CMD-SHELL's rest whole: for Podman the argv goes as one quoted shell
 * line (its image needs /bin/sh). */
static int service_config(struct jw *w, const struct rt_spec *spec, bool podman)
{
	char key[32];

	if (spec->nports) {
		jw_key(w, "ExposedPorts");
		jw_obj(w);
		for (size_t i = 0; i < spec->nports; i++) {
			if (!port_first(spec, i, key, sizeof(key)))
				continue;
			jw_key(w, key);
			jw_obj(w);
			jw_obj_end(w);
		}
		jw_obj_end(w);
	}
	if (spec->health && spec->health->test && spec->health->test[0]) {
		jw_key(w, "Healthcheck");
		jw_obj(w);
		jw_key(w, "Test");
		jw_arr(w);
		if (podman) {
			struct sbuf line = SBUF_INIT(DOCKER_BODY_CAP);
			int r = shell_line(spec->health->test, &line);

			if (r < 0) {
				sbuf_free(&line);
				return r;
			}
			jw_str(w, "CMD-SHELL");
			jw_str(w, line.buf ? line.buf : "");
			sbuf_free(&line);
		} else {
			jw_str(w, "CMD");
			for (size_t i = 0; spec->health->test[i]; i++)
				jw_str(w, spec->health->test[i]);
		}
		jw_arr_end(w);
		/* nanoseconds */
		jw_kint(w, "Interval", (long long)(spec->health->interval_ms * 1000000ull));
		jw_kint(w, "Timeout", (long long)(spec->health->timeout_ms * 1000000ull));
		jw_kint(w, "StartPeriod", (long long)(spec->health->start_period_ms * 1000000ull));
		jw_kint(w, "Retries", spec->health->retries);
		jw_obj_end(w);
	}
	return 0;
}

/* The members in the order the engine has always been sent them:
 * HostConfig, Labels, Image, Cmd, Env (then what a service adds). */
int docker_json_create_body(const struct rt_spec *spec, char **ret, struct nerr *err)
{
	return docker_json_create_body_for(spec, false, ret, err);
}

int docker_json_create_body_for(const struct rt_spec *spec, bool podman, char **ret,
				struct nerr *err)
{
	struct req_body b;
	struct jw *w = &b.w;
	int r;

	r = create_check(spec, err);
	if (r < 0)
		return r;
	body_begin(&b);
	jw_key(w, "HostConfig");
	jw_obj(w);
	if (spec->privileged)
		jw_kbool(w, "Privileged", true);
	if (spec->may_mount) {
		jw_key(w, "CapAdd");
		jw_arr(w);
		jw_str(w, "SYS_ADMIN");
		jw_arr_end(w);
		jw_key(w, "SecurityOpt");
		jw_arr(w);
		jw_str(w, "seccomp=unconfined");
		jw_str(w, "apparmor=unconfined");
		jw_arr_end(w);
	}
	if (spec->memory) {
		jw_kint(w, "Memory", (long long)spec->memory);
		jw_kint(w, "MemorySwap", (long long)spec->memory);
	}
	if (spec->cpus != 0)
		jw_kint(w, "NanoCpus", (long long)(spec->cpus * 1e9 + 0.5));
	if (spec->pids)
		jw_kint(w, "PidsLimit", spec->pids);
	if (spec->nmounts) {
		jw_key(w, "Binds");
		jw_arr(w);
		for (size_t i = 0; i < spec->nmounts; i++)
			bind_str(w, &spec->mounts[i]);
		jw_arr_end(w);
	}
	service_host_config(w, spec);
	jw_obj_end(w);
	jw_key(w, "Labels");
	jw_obj(w);
	jw_kstr(w, RT_OWNER_LABEL, "1");
	jw_kstr(w, RT_NAME_LABEL, spec->name);
	if (spec->instance)
		jw_kstr(w, RT_INSTANCE_LABEL, spec->instance);
	if (spec->role)
		jw_kstr(w, RT_ROLE_LABEL, spec->role);
	for (size_t i = 0; i < spec->nlabels; i++)
		jw_kstr(w, spec->labels[i].key, spec->labels[i].val);
	jw_obj_end(w);
	jw_kstr(w, "Image", spec->image);
	if (spec->user)
		jw_kstr(w, "User", spec->user);
	if (spec->workdir)
		jw_kstr(w, "WorkingDir", spec->workdir);
	if (spec->hostname)
		jw_kstr(w, "Hostname", spec->hostname);
	if (spec->entrypoint && spec->entrypoint[0])
		jw_kstrv(w, "Entrypoint", spec->entrypoint);
	if (spec->argv && spec->argv[0])
		jw_kstrv(w, "Cmd", spec->argv);
	if (spec->nenv) {
		jw_key(w, "Env");
		jw_arr(w);
		for (size_t i = 0; i < spec->nenv; i++)
			concat_str(w, spec->env[i].key, "=", spec->env[i].val, NULL);
		jw_arr_end(w);
	}
	r = service_config(w, spec, podman);
	if (r < 0) {
		sbuf_free(&b.sb);
		return r == -E2BIG ? nerr_set(err, E2BIG, "request body over %u bytes", DOCKER_BODY_CAP)
				   : nerr_set(err, ENOMEM, "out of memory");
	}
	return body_end(&b, ret, err);
}

/* What an update may ask, for both engines' bodies. */
static int update_check(const struct rt_limits *lim, struct nerr *err)
{
	if (!(lim->set & (RT_LIMIT_CPUS | RT_LIMIT_MEMORY | RT_LIMIT_PIDS)))
		return nerr_set(err, EINVAL, "update: nothing to change");
	if ((lim->set & RT_LIMIT_MEMORY) && lim->memory > INT64_MAX)
		return nerr_set(err, EINVAL, "memory too large");
	if ((lim->set & RT_LIMIT_CPUS) && (!(lim->cpus >= 0) || !isfinite(lim->cpus) || lim->cpus > 1e6))
		return nerr_set(err, EINVAL, "bad cpus %g", lim->cpus);
	if ((lim->set & RT_LIMIT_PIDS) && lim->pids < 0)
		return nerr_set(err, EINVAL, "bad pids %" PRId64, lim->pids);
	return 0;
}

int docker_json_update_body(const struct rt_limits *lim, char **ret, struct nerr *err)
{
	struct req_body b;
	int r = update_check(lim, err);

	if (r < 0)
		return r;
	body_begin(&b);
	if (lim->set & RT_LIMIT_MEMORY) {
		/* 0 means unlimited; -1 swap follows it */
		long long m = (long long)lim->memory;

		jw_kint(&b.w, "Memory", m);
		jw_kint(&b.w, "MemorySwap", m ? m : -1);
	}
	if (lim->set & RT_LIMIT_CPUS)
		jw_kint(&b.w, "NanoCpus", (long long)(lim->cpus * 1e9 + 0.5));
	/* Docker: 0 or -1 both mean unlimited */
	if (lim->set & RT_LIMIT_PIDS)
		jw_kint(&b.w, "PidsLimit", lim->pids ? lim->pids : -1);
	return body_end(&b, ret, err);
}

/* Podman's libpod update takes an OCI LinuxResources object: CPUs as a
 * quota over a period, and -1 for unlimited where Docker's body says 0. */
#define LIBPOD_CPU_PERIOD 100000

int docker_json_libpod_update_body(const struct rt_limits *lim, char **ret, struct nerr *err)
{
	struct req_body b;
	int r = update_check(lim, err);

	if (r < 0)
		return r;
	body_begin(&b);
	if (lim->set & RT_LIMIT_MEMORY) {
		long long m = lim->memory ? (long long)lim->memory : -1;

		jw_key(&b.w, "memory");
		jw_obj(&b.w);
		jw_kint(&b.w, "limit", m);
		jw_kint(&b.w, "swap", m);
		jw_obj_end(&b.w);
	}
	if (lim->set & RT_LIMIT_CPUS) {
		long long q = lim->cpus > 0 ? (long long)(lim->cpus * LIBPOD_CPU_PERIOD + 0.5) : -1;

		jw_key(&b.w, "cpu");
		jw_obj(&b.w);
		jw_kint(&b.w, "quota", q);
		jw_kint(&b.w, "period", LIBPOD_CPU_PERIOD);
		jw_obj_end(&b.w);
	}
	if (lim->set & RT_LIMIT_PIDS) {
		jw_key(&b.w, "pids");
		jw_obj(&b.w);
		jw_kint(&b.w, "limit", lim->pids ? (long long)lim->pids : -1);
		jw_obj_end(&b.w);
	}
	return body_end(&b, ret, err);
}

int docker_json_exec_body(char *const argv[], char **ret, struct nerr *err)
{
	struct req_body b;

	if (!argv || !argv[0] || !argv[0][0])
		return nerr_set(err, EINVAL, "exec: empty command");
	for (char *const *v = argv; *v; v++)
		if (!utf8_ok(*v))
			return nerr_set(err, EINVAL, "exec: argument is not valid UTF-8");
	body_begin(&b);
	jw_kstrv(&b.w, "Cmd", argv);
	jw_kbool(&b.w, "AttachStdout", true);
	jw_kbool(&b.w, "AttachStderr", true);
	jw_kbool(&b.w, "AttachStdin", false);
	jw_kbool(&b.w, "Tty", false);
	return body_end(&b, ret, err);
}
