/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * docker: the Docker runtime driver, rt_docker_ops (runtime.h), speaking the
 * Engine API over its unix socket: the ops table, open, close and health,
 * create (with the pull), the lifecycle calls, inspect and list, exec and
 * logs. Each call is one or a few exchanges made through docker-http.c.
 *
 * Every JSON body and the HTTP status table live in docker-json.c; the
 * transport (curl easy handles, version negotiation, multiplexed streams)
 * in docker-http.c; stats from cgroup files in docker-cgroup.c; the /events
 * watcher in docker-watch.c. It knows nothing of the backend's objects,
 * FUSE or checkpoints.
 */
#include <ctype.h>
#include "lazycurl.h"	/* libcurl, loaded on first need */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "docker-driver-internal.h"
#include "macro.h"
#include "nerr.h"
#include "runtime.h"
#include "sbuf.h"

#define DK_DEFAULT_SOCK "/var/run/docker.sock"

/* --- open / close / health ----------------------------------------------- */

static int parse_seconds(const char *s, int *ret)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || v < 0)
		return -EINVAL;
	if (*end == 'm' && end[1] == '\0')
		v *= 60;
	else if (!(*end == '\0' || (*end == 's' && end[1] == '\0')))
		return -EINVAL;
	if (v > 86400)
		return -EINVAL;
	*ret = (int)v;
	return 0;
}

static int dk_open(const struct rt_config *cfg, void **ret_h, struct nerr *err)
{
	const char *sock = DK_DEFAULT_SOCK;
	pthread_condattr_t ca;
	struct docker *d;
	int stop_timeout = 10;
	char network[65] = "";

	for (size_t i = 0; cfg && i < cfg->nkv; i++) {
		const char *k = cfg->kv[i].key, *v = cfg->kv[i].val;

		if (strcmp(k, "endpoint") == 0) {
			if (strncmp(v, "unix://", 7) == 0)
				sock = v + 7;
			else if (v[0] != '/')
				return nerr_set(err, EINVAL,
						"docker endpoint '%s': only unix:///path is supported", v);
			else
				sock = v;
			if (sock[0] != '/' || strlen(sock) >= sizeof(d->sock))
				return nerr_set(err, EINVAL, "docker endpoint '%s': bad socket path", v);
		} else if (strcmp(k, "stop_timeout") == 0) {
			if (parse_seconds(v, &stop_timeout) < 0)
				return nerr_set(err, EINVAL, "docker stop_timeout '%s': want seconds (10s)", v);
		} else if (strcmp(k, "network") == 0) {
			/* a container's network= when it gives none */
			if (!v[0] || strlen(v) >= sizeof(network) || strpbrk(v, " \t\n/\"\\"))
				return nerr_set(err, EINVAL, "docker network '%.40s': a network's name", v);
			snprintf(network, sizeof(network), "%s", v);
		} else {
			return nerr_set(err, EINVAL, "[runtime docker]: unknown key '%s'", k);
		}
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return nerr_set(err, ENOMEM, "out of memory");
	snprintf(d->sock, sizeof(d->sock), "%s", sock);
	snprintf(d->instance, sizeof(d->instance), "%s", cfg && cfg->instance ? cfg->instance : "");
	d->stop_timeout = stop_timeout;
	snprintf(d->network, sizeof(d->network), "%s", network);
	d->cgroup_v2 = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0;
	pthread_mutex_init(&d->lock, NULL);
	pthread_mutex_init(&d->wlock, NULL);
	pthread_rwlock_init(&d->cglock, NULL);
	for (size_t i = 0; i < DK_CG_MAX; i++)
		for (int k = 0; k < DK_CG_NFD; k++)
			d->cg[i].fd[k] = -1;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->wcond, &ca);
	pthread_cond_init(&d->oomcond, &ca);
	pthread_condattr_destroy(&ca);
	/* an engine already there gets libcurl now, as the daemon starts, so
	 * the events watcher subscribes at once: a container run right after
	 * READY must not go before it (its oom event would be missed) */
	dk_curl_ready(d, &(struct nerr){ 0 });
	*ret_h = d;
	return 0;
}

static void dk_close(void *h)
{
	struct docker *d = h;

	if (!d)
		return;
	pthread_mutex_lock(&d->wlock);
	d->stopping = true;
	if (d->wmulti)
		curl_multi_wakeup(d->wmulti);
	pthread_cond_broadcast(&d->wcond);
	pthread_mutex_unlock(&d->wlock);
	if (d->watching)
		pthread_join(d->watcher, NULL);
	if (d->wmulti)
		curl_multi_cleanup(d->wmulti);
	for (size_t i = 0; i < d->nidle; i++)
		curl_easy_cleanup(d->idle[i]);
	for (size_t i = 0; i < DK_CG_MAX; i++)
		dk_cg_close(&d->cg[i]);
	pthread_rwlock_destroy(&d->cglock);
	pthread_cond_destroy(&d->wcond);
	pthread_cond_destroy(&d->oomcond);
	pthread_mutex_destroy(&d->wlock);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

static int dk_health(void *h, struct sbuf *version, struct nerr *err)
{
	struct docker *d = h;
	struct dk_req rq = { .method = "GET", .path = "/_ping", .unversioned = true,
			     .timeout_ms = 3000 };
	char api[16];
	int r;

	r = dk_call(d, &rq, NULL, NULL, err);
	if (r < 0)
		return r;
	r = dk_ensure_version(d, api, sizeof(api), err);
	if (r < 0)
		return r;
	if (version)
		return sbuf_adds(version, api);
	return 0;
}

/* --- create (with pull) --------------------------------------------------- */

struct pull_ctx {
	struct rt_progress *prog;
	struct dk_req *rq;
	char line[DOCKER_LINE_CAP];
	size_t len;
	char error[512];
};

static void pull_line(struct pull_ctx *pc)
{
	char msg[512];
	int r;

	if (pc->len == 0)
		return;
	r = docker_json_parse_pull_line(pc->line, pc->len, msg, sizeof(msg));
	if (r == -ENOENT && !pc->error[0])
		snprintf(pc->error, sizeof(pc->error), "%s", msg);
	else if (r == 0 && pc->prog && pc->prog->update && msg[0])
		pc->prog->update(pc->prog->ctx, msg);
	pc->len = 0;
}

static size_t pull_write(char *p, size_t sz, size_t nm, void *ctx)
{
	struct pull_ctx *pc = ctx;
	size_t n = sz * nm;

	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\n') {
			pull_line(pc);
			continue;
		}
		if (pc->len + 1 >= sizeof(pc->line)) {
			pc->rq->cb_err = E2BIG;
			snprintf(pc->rq->cb_msg, sizeof(pc->rq->cb_msg), "pull progress line too long");
			return 0;
		}
		pc->line[pc->len++] = p[i];
	}
	return n;
}

static int pull_xfer(void *ctx, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct pull_ctx *pc = ctx;

	if (pc->prog && pc->prog->cancel) {
		pc->rq->cb_err = ECANCELED;
		snprintf(pc->rq->cb_msg, sizeof(pc->rq->cb_msg), "pull cancelled");
		return 1;	/* closes the transfer: the engine stops pulling */
	}
	return 0;
}

static int pull_image(struct docker *d, const char *image, struct rt_progress *prog,
		      struct nerr *err)
{
	char repo[512], tag[256], path[1200];
	struct dk_req rq = { .method = "POST", .timeout_ms = -1, .write = pull_write,
			     .xfer = pull_xfer };
	_cleanup_free_ struct pull_ctx *pc = calloc(1, sizeof(*pc));
	struct nerr e = { 0 };
	char *er = NULL, *et = NULL;
	CURL *c;
	int r, n;

	if (!pc)
		return nerr_set(err, ENOMEM, "out of memory");
	if (docker_image_split(image, repo, sizeof(repo), tag, sizeof(tag)) < 0)
		return nerr_set(err, EINVAL, "bad image reference '%s'", image);
	r = dk_curl_ready(d, err);
	if (r < 0)
		return r;
	c = curl_easy_init();
	if (!c)
		return nerr_set(err, ENOMEM, "out of memory");
	er = curl_easy_escape(c, repo, 0);
	et = curl_easy_escape(c, tag, 0);
	n = er && et ? snprintf(path, sizeof(path), "/images/create?fromImage=%s%s%s", er,
				tag[0] ? "&tag=" : "", et) : -1;
	curl_free(er);
	curl_free(et);
	curl_easy_cleanup(c);
	if (n < 0 || (size_t)n >= sizeof(path))
		return nerr_set(err, EINVAL, "bad image reference '%s'", image);
	pc->prog = prog;
	pc->rq = &rq;
	rq.path = path;
	rq.write_ctx = pc;
	rq.xfer_ctx = pc;
	if (prog && prog->update)
		prog->update(prog->ctx, "pulling");
	r = dk_call(d, &rq, NULL, NULL, &e);
	pull_line(pc);	/* a last line without newline: often an error reply */
	if (r == -ECANCELED || r == -EHOSTDOWN)
		return nerr_set(err, -r, "%s", e.msg);
	if (r == 0 && !pc->error[0])
		return 0;
	/* the engine's reason: from the stream, else from the reply; its end
	 * kept when the whole does not fit (Podman's run long) */
	char head[NERR_MSG_MAX], msg[NERR_MSG_MAX];

	snprintf(head, sizeof(head), "image %s not found locally and cannot be pulled: ", image);
	docker_msg_join_tail(msg, sizeof(msg), head, pc->error[0] ? pc->error : e.msg);
	return nerr_set(err, ENOENT, "%s", msg);
}

static int dk_destroy(void *h, const char *id, struct nerr *err);

/* The first regular file of a tar stream (the archive API's answer for
 * one path): 0 with *ret and *ret_len inside buf, -ENOENT. */
static int tar_first_file(const char *buf, size_t len, const char **ret, size_t *ret_len)
{
	for (size_t off = 0; off + 512 <= len;) {
		const char *h = buf + off;
		unsigned long long size = 0;

		if (!h[0])
			return -ENOENT;	/* the end blocks */
		for (int i = 124; i < 136 && h[i] >= '0' && h[i] <= '7'; i++)
			size = size * 8 + (unsigned)(h[i] - '0');
		if (size > len - off - 512)
			return -ENOENT;
		if (h[156] == '0' || h[156] == '\0') {
			*ret = h + 512;
			*ret_len = (size_t)size;
			return 0;
		}
		off += 512 + ((size + 511) / 512) * 512;
	}
	return -ENOENT;
}

/* One file of a created container's file system (the archive API), into
 * body; *ret and *ret_len point into it. -errno. */
static int container_file(struct docker *d, const char *id, const char *file, struct sbuf *body,
			  const char **ret, size_t *ret_len, struct nerr *err)
{
	char path[300];
	int r;

	snprintf(path, sizeof(path), "/containers/%s/archive?path=%s", id, file);
	struct dk_req rq = { .method = "GET", .path = path };
	r = dk_call(d, &rq, body, NULL, err);
	if (r < 0)
		return r;
	return tar_first_file(body->buf, body->len, ret, ret_len);
}

/* user= names resolved in the created container's own /etc/passwd and
 * /etc/group: a name it lacks is EINVAL (the engine would take it and fail
 * only at start). */
static int check_user(struct docker *d, const struct rt_spec *spec, const char *id,
		      struct nerr *err)
{
	struct sbuf pb = SBUF_INIT(DOCKER_BODY_CAP), gb = SBUF_INIT(DOCKER_BODY_CAP);
	const char *pw = NULL, *gr = NULL;
	size_t pwl = 0, grl = 0;
	struct nerr e2 = { 0 };
	long uid, gid;
	int r;

	(void)container_file(d, id, "/etc/passwd", &pb, &pw, &pwl, &e2);
	(void)container_file(d, id, "/etc/group", &gb, &gr, &grl, &e2);
	r = rt_user_resolve(spec->user, pw, pwl, gr, grl, &uid, &gid, err);
	if (r == 0 && spec->ret_uid)
		*spec->ret_uid = uid;
	if (r == 0 && spec->ret_gid)
		*spec->ret_gid = gid;
	sbuf_free(&pb);
	sbuf_free(&gb);
	return r;
}

static int dk_create(void *h, const struct rt_spec *spec, struct rt_progress *prog, char **ret_id,
		     struct nerr *err)
{
	struct docker *d = h;
	struct sbuf body = SBUF_INIT(DOCKER_BODY_CAP);
	_cleanup_free_ char *json = NULL;
	char path[200];
	char *id = NULL;
	int r;

	/* network= unset: [runtime docker] network (unset: the engine's
	 * default, bridge) */
	struct rt_spec with_net;

	if (!spec->network && d->network[0]) {
		with_net = *spec;
		with_net.network = d->network;
		spec = &with_net;
	}
	/* Podman takes the engine's own check in other words (a shell line) */
	int podman = spec->health && spec->health->test && spec->health->test[0] ?
		     dk_is_podman(d, err) : 0;

	if (podman < 0)
		return podman;
	r = docker_json_create_body_for(spec, podman > 0, &json, err);
	if (r < 0)
		return r == -ENOMEM ? nerr_set(err, ENOMEM, "out of memory") : r;
	/* a network the engine lacks: Docker makes the container and refuses
	 * only its start, so it is asked first and nothing is made */
	if (spec->network && strcmp(spec->network, "none") != 0 &&
	    strcmp(spec->network, "host") != 0 && strcmp(spec->network, "bridge") != 0 &&
	    strcmp(spec->network, "default") != 0 && dk_check_id(spec->network, NULL) == 0) {
		struct dk_req nq = { .method = "GET", .path = path };
		struct nerr e2 = { 0 };

		snprintf(path, sizeof(path), "/networks/%s", spec->network);
		r = dk_call(d, &nq, &body, NULL, &e2);
		sbuf_reset(&body);
		if (r == -ENOENT) {
			r = nerr_set(err, EINVAL, "network=%s: the engine says: %.180s", spec->network,
				     e2.msg);
			goto out;
		}
		if (r < 0) {
			*err = e2;
			goto out;
		}
	}
	if (dk_check_id(spec->name, err) < 0 || strlen(spec->name) > 64)
		return nerr_set(err, EINVAL, "bad container name '%s'", spec->name);
	if (spec->engine_name && (dk_check_id(spec->engine_name, err) < 0 ||
				  strlen(spec->engine_name) > 128))
		return nerr_set(err, EINVAL, "bad engine name '%s'", spec->engine_name);
	if (spec->engine_name)
		snprintf(path, sizeof(path), "/containers/create?name=%s", spec->engine_name);
	else
		snprintf(path, sizeof(path), "/containers/create?name=nodefs-%s", spec->name);

	if (spec->force_pull) {
		/* force_pull: the engine's copy is not taken as it is */
		if (prog && prog->pulling)
			prog->pulling(prog->ctx, true);
		r = pull_image(d, spec->image, prog, err);
		if (r < 0)
			goto out;
		if (prog && prog->pulling)
			prog->pulling(prog->ctx, false);
	}
	for (int attempt = 0;; attempt++) {
		struct dk_req rq = { .method = "POST", .path = path, .body = json,
				     .call = DOCKER_CALL_CREATE };

		if (prog && prog->cancel)
			return nerr_set(err, ECANCELED, "create cancelled");
		sbuf_reset(&body);
		r = dk_call(d, &rq, &body, NULL, err);
		/* a 404 that names the network= (Docker: "network NAME not
		 * found"): the spec is wrong, the image is not missing */
		if (r == -ENOENT && spec->network && strstr(err->msg, "network") &&
		    strstr(err->msg, spec->network)) {
			r = nerr_set(err, EINVAL, "network=%s: the engine says: %.180s", spec->network,
				     err->msg);
			goto out;
		}
		/* 404 on create means the image: no container exists yet */
		if (r == -ENOENT && attempt == 0) {
			if (prog && prog->pulling)
				prog->pulling(prog->ctx, true);
			r = pull_image(d, spec->image, prog, err);
			if (r < 0)
				goto out;
			if (prog && prog->pulling)
				prog->pulling(prog->ctx, false);
			continue;
		}
		break;
	}
	if (r == -EEXIST)
		nerr_prefix(err, "name taken");
	if (r < 0)
		goto out;
	r = docker_json_parse_id(body.buf, body.len, &id, err);
	if (r < 0)
		goto out;
	if (spec->user && (r = check_user(d, spec, id, err)) < 0) {
		struct nerr e2 = { 0 };

		dk_destroy(d, id, &e2);	/* a create refused leaves nothing */
		free(id);
		goto out;
	}
	*ret_id = id;
out:
	sbuf_free(&body);
	return r;
}

/* --- lifecycle ------------------------------------------------------------ */

/*
 * The bind sources were checked at create (under allowed_targets, no
 * symlink on the way), but the engine resolves them again at every start:
 * a source replaced since by a symlink would bind wherever that leads. So,
 * as LXC's driver does, each source must still be itself (realpath) and
 * exist, or the container is not started.
 */
static int binds_unchanged(void *h, const char *id, struct nerr *err)
{
	struct sbuf body = SBUF_INIT(DOCKER_BODY_CAP);
	char path[200], real[PATH_MAX];
	char **src = NULL;
	int r;

	snprintf(path, sizeof(path), "/containers/%s/json", id);
	struct dk_req rq = { .method = "GET", .path = path };
	r = dk_call(h, &rq, &body, NULL, err);
	if (r == 0)
		r = docker_json_parse_bind_sources(body.buf, body.len, &src, err);
	sbuf_free(&body);
	for (size_t i = 0; r == 0 && src && src[i]; i++) {
		if (!realpath(src[i], real))
			r = nerr_set(err, errno == ENOENT ? ENOENT : EIO,
				     "bind source %.200s: %s; not started", src[i], strerror(errno));
		else if (strcmp(real, src[i]) != 0)
			r = nerr_set(err, EPERM, "bind source %.100s now leads to %.100s through a "
				     "symlink; not started", src[i], real);
	}
	for (size_t i = 0; src && src[i]; i++)
		free(src[i]);
	free(src);
	return r;
}

static int dk_start(void *h, const char *id, struct nerr *err)
{
	char path[200];
	int r;

	if (dk_check_id(id, err) < 0)
		return -EINVAL;
	r = binds_unchanged(h, id, err);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "/containers/%s/start", id);
	r = dk_simple_post(h, path, DOCKER_CALL_STARTSTOP, 0, err);
	if (r == 0) {
		struct nerr e2 = { 0 };
		struct rt_status st;

		/* stats() learns nothing by itself: its cgroups now, here. The
		 * files of the last run are stale (the engine made the cgroup
		 * anew): a kept entry would stop the inspect from learning,
		 * and stats() could then find the new one only by its path */
		dk_cg_forget(h, id);
		(void)dk_inspect(h, id, &st, &e2);
	}
	return r;
}

static int dk_stop(void *h, const char *id, int timeout_s, struct nerr *err)
{
	struct docker *d = h;
	char path[200];

	if (dk_check_id(id, err) < 0)
		return -EINVAL;
	if (timeout_s < 0)
		timeout_s = d->stop_timeout;
	snprintf(path, sizeof(path), "/containers/%s/stop?t=%d", id, timeout_s);
	dk_oom_asked(d, id);
	/* the engine waits timeout_s, then kills and waits for the exit */
	return dk_simple_post(h, path, DOCKER_CALL_STARTSTOP, (timeout_s + 30) * 1000L, err);
}

static int dk_kill(void *h, const char *id, int sig, struct nerr *err)
{
	char path[200];

	if (dk_check_id(id, err) < 0)
		return -EINVAL;
	if (sig <= 0 || sig > 64)
		return nerr_set(err, EINVAL, "bad signal %d", sig);
	snprintf(path, sizeof(path), "/containers/%s/kill?signal=%d", id, sig);
	dk_oom_asked(h, id);
	return dk_simple_post(h, path, DOCKER_CALL_OTHER, 0, err);
}

/*
 * A command on a container in the wrong state is EBUSY, as the engine's 409
 * makes it when it knows; but Docker 20.10 answers some with a bare 500,
 * which reads as EIO: an unpause of a container that is not paused, and a
 * pause, update or exec start on one that has just stopped (nodefs has not
 * seen its die event yet): "Container ... is not paused", "cannot pause a
 * stopped container", "cannot update a stopped container", "Container ...
 * is not running". So a 500 is checked against what the container is now:
 * not running is EBUSY, and so is running when want_paused (an unpause).
 * A 500 in the words of a container that is not running is EBUSY even when
 * the engine's state still says running: runc found the process gone
 * before dockerd saw it exit (an update right after a `kill TERM`).
 */
static int wrong_state(void *h, const char *id, int r, bool want_paused, struct nerr *err)
{
	struct nerr e2 = { 0 };
	struct rt_status st;

	if (r == -EIO && docker_msg_not_running(err->msg))
		return nerr_set(err, EBUSY, "container not running");
	if (r != -EIO || dk_inspect(h, id, &st, &e2) < 0)
		return r;
	if (st.state != RT_STATE_RUNNING && st.state != RT_STATE_PAUSED)
		return nerr_set(err, EBUSY, "container not running");
	if (want_paused && st.state == RT_STATE_RUNNING)
		return nerr_set(err, EBUSY, "container not paused");
	return r;
}

/*
 * runc on cgroup v1 freezes by writing FROZEN and reading the state back,
 * a bounded number of times; a task being forked or exiting meanwhile can
 * keep the cgroup FREEZING, and runc then thaws it and gives up ("OCI
 * runtime pause failed: unable to freeze", a 500). Nothing is paused and
 * the container runs on: a pause is tried again, 100 ms and then 300 ms
 * later, and a third failure is EAGAIN, for the writer to try again.
 */
static const unsigned pause_retry_ms[] = { 100, 300 };

static int dk_pause(void *h, const char *id, struct nerr *err)
{
	char path[200];
	int r;

	if (dk_check_id(id, err) < 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/containers/%s/pause", id);
	for (size_t i = 0;; i++) {
		r = wrong_state(h, id, dk_simple_post(h, path, DOCKER_CALL_OTHER, 0, err), false, err);
		if (r != -EIO || !docker_msg_freeze_failed(err->msg))
			return r;
		if (i == ARRAY_SIZE(pause_retry_ms))
			return nerr_set(err, EAGAIN, "the engine could not freeze the container's "
					"processes (%u tries): %s", (unsigned)i + 1, err->msg);
		usleep(pause_retry_ms[i] * 1000);
	}
}

static int dk_resume(void *h, const char *id, struct nerr *err)
{
	char path[200];

	if (dk_check_id(id, err) < 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/containers/%s/unpause", id);
	return wrong_state(h, id, dk_simple_post(h, path, DOCKER_CALL_OTHER, 0, err), true, err);
}

/* The version of Podman's own API its update is asked in: the oldest
 * Podman 4 takes (Podman 4.3 serves 4.0.0 to 4.3.1). */
#define LIBPOD_API "4.0.0"

static int dk_update(void *h, const char *id, const struct rt_limits *lim, struct nerr *err)
{
	_cleanup_free_ char *json = NULL;
	char path[200];
	int podman, r;

	if (dk_check_id(id, err) < 0)
		return -EINVAL;
	podman = dk_is_podman(h, err);
	if (podman < 0)
		return podman;
	/* Podman 4 has no /containers/{id}/update in its Engine API (404):
	 * its own API's update takes the same limits. It changes the cgroup
	 * only: Podman's inspect keeps the create's limits, and the next
	 * start goes back to them (nodefs(5), "Podman as the Docker
	 * engine") */
	r = podman ? docker_json_libpod_update_body(lim, &json, err)
		   : docker_json_update_body(lim, &json, err);
	if (r < 0)
		return r == -ENOMEM ? nerr_set(err, ENOMEM, "out of memory") : r;
	snprintf(path, sizeof(path), podman ? "/v" LIBPOD_API "/libpod/containers/%s/update"
		 : "/containers/%s/update", id);
	struct dk_req rq = { .method = "POST", .path = path, .body = json,
			     .unversioned = podman };
	return wrong_state(h, id, dk_call(h, &rq, NULL, NULL, err), false, err);
}

/* The engine is removing id already (409 "removal ... is already in
 * progress": a DELETE sent before a crash of nodefs, or by someone else):
 * wait until it is gone, -ENOENT, for up to 30 s. The removal the caller
 * asked for is then done; a container still there after that is -EBUSY
 * with the engine's words. */
static int wait_removed(struct docker *d, const char *id, struct nerr *err)
{
	char path[200];
	int r = -EBUSY;

	snprintf(path, sizeof(path), "/containers/%s/json", id);
	for (int i = 0; i < 300 && r == -EBUSY; i++) {
		struct dk_req rq = { .method = "GET", .path = path };
		struct nerr e = { 0 };

		usleep(100 * 1000);
		r = dk_call(d, &rq, NULL, NULL, &e);
		if (r == 0)
			r = -EBUSY;	/* still listed */
		else if (r != -ENOENT)
			*err = e;
	}
	return r;
}

static int dk_destroy(void *h, const char *id, struct nerr *err)
{
	struct docker *d = h;
	char path[200];
	int r;

	if (dk_check_id(id, err) < 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", id);
	struct dk_req rq = { .method = "DELETE", .path = path };
	r = dk_call(d, &rq, NULL, NULL, err);
	if (r == -EBUSY && err && strstr(err->msg, "already in progress"))
		r = wait_removed(d, id, err);
	if (r == -ENOENT) {
		nerr_clear(err);
		r = 0;
	}
	if (r == 0)
		dk_cg_forget(d, id);
	return r;
}


int dk_inspect(void *h, const char *id, struct rt_status *ret, struct nerr *err)
{
	struct sbuf body = SBUF_INIT(DOCKER_BODY_CAP);
	char path[200];
	int r;

	if (dk_check_id(id, err) < 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/containers/%s/json", id);
	struct dk_req rq = { .method = "GET", .path = path };
	r = dk_call(h, &rq, &body, NULL, err);
	if (r == 0)
		r = docker_json_parse_inspect(body.buf, body.len, ret, err);
	if (r == 0 && ret->state == RT_STATE_EXITED)
		ret->oom_killed = dk_oom_killed(h, id, ret);
	if (r == 0 && ret->pid > 0)
		dk_cg_note_running(h, id, ret->pid);
	sbuf_free(&body);
	return r;
}

/* The bindings the engine made (the host ports it chose): one inspect. */
static int dk_ports(void *h, const char *id, struct sbuf *out, struct nerr *err)
{
	struct sbuf body = SBUF_INIT(DOCKER_BODY_CAP);
	char path[200];
	int r;

	if (dk_check_id(id, err) < 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/containers/%s/json", id);
	struct dk_req rq = { .method = "GET", .path = path };
	r = dk_call(h, &rq, &body, NULL, err);
	if (r == 0)
		r = docker_json_parse_ports(body.buf, body.len, out, err);
	sbuf_free(&body);
	return r;
}

/* The engine's own check, once now. dockerd times its checks itself;
 * Podman 4 times them with systemd timers (transient units through
 * systemd's bus), which a host without systemd never fires ("unable to get
 * systemd connection to add healthchecks" in its log, State.Health
 * "starting" for ever): libpod's healthcheck call runs it, as `podman
 * healthcheck run` does, and Podman keeps its log and judges the streak. */
static int dk_health_run(void *h, const char *id, struct rt_status *ret, struct nerr *err)
{
	struct sbuf body = SBUF_INIT(DOCKER_BODY_CAP);
	char path[200];
	int podman, r;

	if (dk_check_id(id, err) < 0)
		return -EINVAL;
	podman = dk_is_podman(h, err);
	if (podman <= 0)
		return podman < 0 ? podman : nerr_set(err, ENOTSUP, "the engine times its own checks");
	snprintf(path, sizeof(path), "/v" LIBPOD_API "/libpod/containers/%s/healthcheck", id);
	struct dk_req rq = { .method = "GET", .path = path, .unversioned = true };
	r = dk_call(h, &rq, &body, NULL, err);
	sbuf_free(&body);
	if (r < 0)
		return r;
	return dk_inspect(h, id, ret, err);
}

static int dk_list(void *h, struct rt_listing **ret, size_t *ret_n, struct nerr *err)
{
	struct docker *d = h;
	struct sbuf body = SBUF_INIT(DOCKER_BODY_CAP);
	char path[256];
	int r;

	/* filters={"label":["io.nodefs.managed=1","io.nodefs.instance=ID"]},
	 * escaped (the id is hex); both labels must match */
	if (d->instance[0])
		snprintf(path, sizeof(path), "/containers/json?all=1&filters="
			 "%%7B%%22label%%22%%3A%%5B%%22" RT_OWNER_LABEL "%%3D1%%22%%2C%%22"
			 RT_INSTANCE_LABEL "%%3D%s%%22%%5D%%7D", d->instance);
	else
		snprintf(path, sizeof(path), "/containers/json?all=1&filters="
			 "%%7B%%22label%%22%%3A%%5B%%22" RT_OWNER_LABEL "%%3D1%%22%%5D%%7D");
	struct dk_req rq = { .method = "GET", .path = path };

	r = dk_call(h, &rq, &body, NULL, err);
	if (r == 0) {
		r = docker_json_parse_list_of(body.buf, body.len, d->instance[0] ? d->instance : NULL,
					      ret, ret_n, err);
		if (r == -ENOMEM)
			nerr_set(err, ENOMEM, "out of memory");
	}
	sbuf_free(&body);
	return r;
}


/* --- exec and logs -------------------------------------------------------- */

static int sbuf_sink(void *ctx, int stream, const char *p, size_t n)
{
	return sbuf_add(ctx, p, n) < 0 ? -E2BIG : 0;
}


static int dk_exec(void *h, const char *id, char *const argv[], struct sbuf *out,
		   int *ret_exit_code, struct nerr *err)
{
	struct docker *d = h;
	static const char start_body[] = "{\"Detach\":false,\"Tty\":false}";
	struct sbuf body = SBUF_INIT(DOCKER_BODY_CAP), buf = SBUF_INIT(DK_EXEC_CAP);
	_cleanup_free_ char *json = NULL, *eid = NULL;
	char path[300];
	bool running = true;
	int r, code = -1;

	if (dk_check_id(id, err) < 0)
		return -EINVAL;
	r = docker_json_exec_body(argv, &json, err);
	if (r < 0)
		return r == -ENOMEM ? nerr_set(err, ENOMEM, "out of memory") : r;
	snprintf(path, sizeof(path), "/containers/%s/exec", id);
	struct dk_req rq = { .method = "POST", .path = path, .body = json };
	r = dk_call(d, &rq, &body, NULL, err);
	if (r == 0)
		r = docker_json_parse_id(body.buf, body.len, &eid, err);
	if (r < 0)
		goto out;
	if (dk_check_id(eid, err) < 0) {
		r = -EINVAL;
		goto out;
	}
	snprintf(path, sizeof(path), "/exec/%s/start", eid);
	r = dk_mux_call(d, "POST", path, start_body, -1, sbuf_sink, &buf, err);
	if (r == -E2BIG)
		nerr_set(err, E2BIG, "exec output larger than %u bytes", DK_EXEC_CAP);
	if (r < 0)
		goto out;
	/* the stream ends when the process has exited; its code follows at once */
	snprintf(path, sizeof(path), "/exec/%s/json", eid);
	for (int i = 0; running && i < 200; i++) {
		struct dk_req iq = { .method = "GET", .path = path };

		if (i)
			usleep(5000);
		sbuf_reset(&body);
		r = dk_call(d, &iq, &body, NULL, err);
		if (r == 0)
			r = docker_json_parse_exec_inspect(body.buf, body.len, &code, &running, err);
		if (r < 0)
			goto out;
	}
	if (running) {
		r = nerr_set(err, ETIMEDOUT, "exec output ended but the process still runs");
		goto out;
	}
	r = sbuf_add(out, buf.buf ? buf.buf : "", buf.len);
	if (r < 0) {
		nerr_set(err, -r, "exec output does not fit its buffer");
		goto out;
	}
	*ret_exit_code = code;
out:
	sbuf_free(&body);
	sbuf_free(&buf);
	return wrong_state(h, id, r, false, err);
}

static int dk_logs(void *h, const char *id, size_t max, struct sbuf *out, struct nerr *err)
{
	struct docker_tail tail;
	const char *data;
	char path[200];
	size_t len;
	int r;

	if (dk_check_id(id, err) < 0)
		return -EINVAL;
	if (max == 0)
		max = DK_EXEC_CAP;
	r = docker_tail_init(&tail, max);
	if (r < 0)
		return nerr_set(err, -r, "logs: cannot keep %zu bytes", max);
	/* a line has at least one byte, so the last max lines hold the last
	 * max bytes: the engine need not send the whole log */
	snprintf(path, sizeof(path), "/containers/%s/logs?stdout=1&stderr=1&follow=0&tail=%zu", id,
		 max);
	r = dk_mux_call(h, "GET", path, NULL, 0, docker_tail_sink, &tail, err);
	if (r == 0) {
		data = docker_tail_data(&tail, &len);
		r = sbuf_add(out, data, len);
		if (r < 0)
			nerr_set(err, -r, "logs do not fit their buffer");
	}
	docker_tail_free(&tail);
	return r;
}

static const char *const home_keys[] = { "endpoint", NULL };

const struct runtime_ops rt_docker_ops = {
	.home_keys = home_keys,
	.name = "docker",
	.engine_names = true,
	.late_creates = true,
	.open = dk_open,
	.close = dk_close,
	.health = dk_health,
	.create = dk_create,
	.start = dk_start,
	.stop = dk_stop,
	.kill = dk_kill,
	.pause = dk_pause,
	.resume = dk_resume,
	.update = dk_update,
	.exec = dk_exec,
	.inspect = dk_inspect,
	.ports = dk_ports,
	.health_run = dk_health_run,
	.stats = dk_stats,
	.logs = dk_logs,
	.destroy = dk_destroy,
	.list = dk_list,
	.watch = dk_watch,
};

