/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plugin-container: a CSI plugin nodefs runs as a container of one of its
 * own runtimes ([plugin NAME] runtime = docker|lxc, image = IMAGE: for
 * lxc the template), as the
 * Mesos storage provider runs its plugin containers. This file owns that
 * container's life on the engine, through the runtime seam (runtime.h)
 * and never the engine's API: what it is made of (the image, the command
 * inside, CSI_ENDPOINT, the socket's directory bind-mounted at the same
 * path, and for a node plugin the publish and staging roots with rshared
 * propagation and the right to mount, every capability and device with
 * privileged = yes), its create and start on the worker
 * pool, its signals, the look at its exit status and its removal, whether
 * the container a record names can be adopted, and its log.
 *
 * The container is nodefs's, not a user's: it carries RT_ROLE_LABEL =
 * "plugin" (list() leaves it out, so containers/, recovery and
 * reconciliation never see it) and this instance's id; its engine name is
 * NAME_PREFIX + ".plugin-" + NAME, which no user container can take (their
 * names never start with a dot). Its init runs on the host's pid
 * namespace's side as any process does: plugin-proc.c watches it through
 * a pidfd like a process it started, and comes here for what differs.
 * Must not know: the state machine (plugin-proc.c), CSI, the tree.
 */
#include "plugin-proc-internal.h"
#include "plugin-proc.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engines.h"
#include "log.h"
#include "sbuf.h"

#define PC_MOUNTS_MAX 64		/* binds of one plugin container */
#define REAP_TRIES 20			/* the engine's word on an exit: 20 x 50 ms */

/* The driver handle of pp's runtime when it answers, held (the caller
 * puts it), else NULL with err set. */
static struct engine_ref *ready_engine(struct pproc *pp, struct nerr *err)
{
	struct engine *e = engine_find(pp->b, pp->runtime);
	struct engine_ref *r = NULL;

	if (!e) {
		nerr_set(err, ENOTSUP, "this nodefs has no runtime %s", pp->runtime);
		return NULL;
	}
	return engine_take(e, &r, err) < 0 ? NULL : r;
}

static void add_mount(struct rt_mount *m, size_t *n, const char *path, bool rshared)
{
	for (size_t i = 0; i < *n; i++)
		if (strcmp(m[i].target, path) == 0) {
			m[i].rshared |= rshared;
			return;
		}
	if (*n < PC_MOUNTS_MAX)
		m[(*n)++] = (struct rt_mount){ .source = (char *)path, .target = (char *)path,
					       .rshared = rshared };
}

/* Make and start the container; worker pool. */
static int spawn(struct pproc *pp, pid_t *ret_pid, char *ret_cid, struct nerr *err)
{
	struct backend *b = pp->b;
	struct rt_mount mounts[PC_MOUNTS_MAX];
	char sockdir[PATH_MAX], staging[PATH_MAX + 16], ep[PATH_MAX + 32], *slash;
	struct rt_kv env[2] = { { "CSI_ENDPOINT", ep }, { "NODEFS_PLUGIN", pp->name } };
	struct rt_status st = { 0 };
	struct nerr e2 = { 0 };
	_cleanup_engine_ struct engine_ref *e = NULL;
	char *id = NULL;
	size_t n = 0;
	int r;

	if (!(e = ready_engine(pp, err)))
		return -err->code;
	/* one copy only: what an earlier run or attempt left under the name
	 * (exited, or made and never checkpointed) goes first */
	if ((r = e->ops->destroy(e->h, pp->engine_name, err)) < 0)
		return r;
	snprintf(sockdir, sizeof(sockdir), "%s", pp->sock);
	slash = strrchr(sockdir, '/');
	if (slash && slash != sockdir)
		*slash = '\0';
	snprintf(ep, sizeof(ep), "unix://%s", pp->sock);
	add_mount(mounts, &n, sockdir, false);
	if (pp->node_plugin) {
		/* where NodeStage and NodePublish mount: what the plugin mounts
		 * there inside must show on the host */
		snprintf(staging, sizeof(staging), "%s/staging", b->cfg->state_dir);
		if (mkdir(staging, 0700) < 0 && errno != EEXIST)
			return nerr_set(err, errno, "cannot make %s: %s", staging, strerror(errno));
		add_mount(mounts, &n, staging, true);
		for (size_t i = 0; b->cfg->allowed_targets[i]; i++)
			add_mount(mounts, &n, b->cfg->allowed_targets[i], true);
	}
	for (size_t i = 0; pp->mounts[i]; i++)
		add_mount(mounts, &n, pp->mounts[i], false);
	struct rt_spec spec = {
		.name = pp->name, .engine_name = pp->engine_name, .instance = b->instance,
		.role = "plugin", .may_mount = pp->node_plugin,
		.privileged = pp->privileged, .image = pp->image,
		/* lxc: image names the template (busybox: the host's /lib,
		 * /lib64, /usr/lib bound read-only, so a host binary runs) */
		.template_name = pp->image,
		.argv = pp->argv[0] ? pp->argv : NULL, .env = env, .nenv = 2,
		.mounts = mounts, .nmounts = n,
	};
	r = e->ops->create(e->h, &spec, NULL, &id, err);
	if (r < 0)
		return r;
	if (strlen(id) >= PC_ID_MAX) {
		r = nerr_set(err, EIO, "container id '%.20s...' is too long", id);
		goto fail;
	}
	if ((r = e->ops->start(e->h, id, err)) < 0 || (r = e->ops->inspect(e->h, id, &st, err)) < 0)
		goto fail;
	if (st.state != RT_STATE_RUNNING || st.pid <= 0) {
		r = nerr_set(err, EIO, "container %.12s %s at once (status %d)", id,
			     rt_state_to_string(st.state), st.exit_code);
		goto fail;
	}
	snprintf(ret_cid, PC_ID_MAX, "%s", id);
	*ret_pid = st.pid;
	free(id);
	return 0;
fail:
	e->ops->destroy(e->h, id, &e2);
	free(id);
	return r;
}

struct spawn_job {
	struct pproc *pp;	/* the supervisor list's reference keeps it */
	int r;
	pid_t pid;
	char cid[PC_ID_MAX];
	struct nerr err;
};

static void spawn_done(struct loop *l, void *ud)
{
	struct spawn_job *j = ud;

	if (j->r >= 0) {
		pthread_mutex_lock(&j->pp->lock);
		snprintf(j->pp->cid, sizeof(j->pp->cid), "%s", j->cid);
		pthread_mutex_unlock(&j->pp->lock);
	}
	pp_spawned(j->pp, j->r, j->pid, &j->err);
	free(j);
}

static void spawn_work(void *arg)
{
	struct spawn_job *j = arg;

	j->r = spawn(j->pp, &j->pid, j->cid, &j->err);
	if (loop_submit(j->pp->sup->loop, spawn_done, j) < 0) {
		/* the supervisor is gone (out of memory): nothing will watch it */
		log_warn("plugin %s: container %.12s left: the supervisor cannot take it",
			 j->pp->name, j->cid);
		free(j);
	}
}

void pc_spawn_submit(struct pproc *pp)
{
	struct spawn_job *j = calloc(1, sizeof(*j));
	struct nerr err = { 0 };

	pp->st = PP_SPAWNING;
	if (!j) {
		nerr_set(&err, ENOMEM, "out of memory");
		pp_spawned(pp, -ENOMEM, 0, &err);
		return;
	}
	j->pp = pp;
	if (work_submit(pp->b->work, spawn_work, j) < 0) {
		free(j);
		nerr_set(&err, ESHUTDOWN, "no worker to make the container");
		pp_spawned(pp, -ESHUTDOWN, 0, &err);
	}
}

void pc_signal(struct pproc *pp, int sig)
{
	struct nerr err = { 0 };
	_cleanup_engine_ struct engine_ref *e = ready_engine(pp, &err);

	if (e && pp->cid[0] && e->ops->kill(e->h, pp->cid, sig, &err) >= 0)
		return;
	/* the engine does not answer: its init, from the host */
	if (pp->pid > 0)
		kill(pp->pid, sig);
}

void pc_reap(struct pproc *pp, char *what, size_t len)
{
	struct nerr err = { 0 };
	_cleanup_engine_ struct engine_ref *e = ready_engine(pp, &err);
	struct rt_status st = { 0 };
	int r = -ENOENT;

	snprintf(what, len, "exited (status unknown: %s)", e ? "the engine lost it" : err.msg);
	if (!e || !pp->cid[0])
		return;		/* left to the next start, which removes it by name */
	/* the init is gone; the engine notices a moment later */
	for (int i = 0; i < REAP_TRIES; i++) {
		r = e->ops->inspect(e->h, pp->cid, &st, &err);
		if (r < 0 || st.state != RT_STATE_RUNNING)
			break;
		usleep(50 * 1000);
	}
	if (r >= 0 && st.state == RT_STATE_EXITED)
		snprintf(what, len, "container exited with status %d%s", st.exit_code,
			 st.oom_killed ? " (out of memory)" : "");
	if (e->ops->destroy(e->h, pp->cid, &err) < 0) {
		log_warn("plugin %s: cannot remove container %.12s: %s", pp->name, pp->cid, err.msg);
		return;
	}
	pthread_mutex_lock(&pp->lock);
	pp->cid[0] = '\0';
	pthread_mutex_unlock(&pp->lock);
}

bool pc_adoptable(struct pproc *pp)
{
	struct nerr err = { 0 };
	_cleanup_engine_ struct engine_ref *e = NULL;
	struct rt_status st = { 0 };

	if (!pp->rec_cid[0])
		return false;
	/* the caller saw the very init the record names run (pid, start time,
	 * boot); the engine, when it answers, must agree it is that one */
	e = ready_engine(pp, &err);
	if (e && (e->ops->inspect(e->h, pp->rec_cid, &st, &err) < 0 ||
		  st.state != RT_STATE_RUNNING || st.pid != pp->rec_pid))
		return false;
	pthread_mutex_lock(&pp->lock);
	snprintf(pp->cid, sizeof(pp->cid), "%s", pp->rec_cid);
	pthread_mutex_unlock(&pp->lock);
	return true;
}

int pc_show_log(struct pproc *pp, struct sbuf *out)
{
	struct nerr err = { 0 };
	_cleanup_engine_ struct engine_ref *e = ready_engine(pp, &err);
	char cid[PC_ID_MAX];

	pthread_mutex_lock(&pp->lock);
	snprintf(cid, sizeof(cid), "%s", pp->cid);
	pthread_mutex_unlock(&pp->lock);
	if (!cid[0])
		return 0;
	if (!e)
		return sbuf_printf(out, "(no log: %s)\n", err.msg);
	if (e->ops->logs(e->h, cid, LOG_RING, out, &err) < 0)
		return sbuf_printf(out, "(no log: %s)\n", err.msg);
	return 0;
}
