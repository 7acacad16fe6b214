/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The volume state machine (backend/volume-*.c) against a fake storage
 * implementation (fake-storage.c): the real backend, its queues,
 * operations and checkpoints in a temporary state dir, commands written to
 * the ctl files as fs would, no FUSE and no plugin process.
 *
 * Covered: every transition of the walks up and down with each capability
 * combination (controller publish yes/no, stage yes/no), expand (controller,
 * node, both, neither, a node call owed), import, every error class at
 * every step (permanent, uncertain, UNIMPLEMENTED, and a failure after the
 * plugin acted), a transient state re-driven by a command walking the
 * other way, a reboot, and every crash point: the state dir is copied at a call,
 * before and after the plugin acted, a second backend starts on the copy,
 * and recovery must drive the command to its end with the plugin's model
 * consistent (one volume, nothing published twice).
 *
 * The snapshots room (backend/snapshots/) against the same fake: create,
 * a restore's and a clone's content source, refusals that make no call, a
 * certain failure (FAILED), an answer lost after the plugin acted (the same
 * line again settles it), a refused delete, and a crash at CreateSnapshot
 * and DeleteSnapshot before and after the plugin acted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "backend-internal.h"
#include "config.h"
#include "fake-storage.h"
#include "log.h"
#include "volume-internal.h"

/* Time bounds scale with the build (scripts/test.sh: 4 in build-san). */
static double slow(void)
{
	const char *s = getenv("NODEFS_TIME_SCALE");

	return s && atof(s) > 0 ? atof(s) : 1.0;
}

struct env {
	char root[256];		/* the test's temp dir */
	char state[290];	/* its state dir */
	char mnt[290];		/* allowed publish targets */
	struct backend *b;
};

static void env_init(struct env *e)
{
	const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

	snprintf(e->root, sizeof(e->root), "%s/nodefs-vol.XXXXXX", tmp);
	cr_assert_not_null(mkdtemp(e->root));
	snprintf(e->state, sizeof(e->state), "%s/state", e->root);
	snprintf(e->mnt, sizeof(e->mnt), "%s/mnt", e->root);
	cr_assert_eq(mkdir(e->mnt, 0755), 0);
	log_setup(LOG_LVL_ERR, false);	/* the runtimes' warnings are expected */
}

static void env_start(struct env *e, const char *state_dir)
{
	char text[4096];
	struct config *cfg;
	struct nerr err = { 0 };
	int r;

	snprintf(text, sizeof(text),
		 "[nodefs]\nstate_dir = %s\nallowed_targets = %s\nreconcile_interval = 0\n"
		 "csi_timeout = 5s\n"
		 "[plugin fake]\nendpoint = unix://%s/fake.sock\ndefault = yes\n"
		 "[runtime docker]\nendpoint = unix://%s/no-docker.sock\n"
		 "[runtime lxc]\nlxcpath = %s/lxc\n",
		 state_dir, e->mnt, e->root, e->root, e->root);
	r = config_parse(text, strlen(text), NULL, &cfg, &err);
	cr_assert_eq(r, 0, "config: %s", err.msg);
	r = backend_new(cfg, &e->b, &err);
	cr_assert_eq(r, 0, "backend_new: %s", err.msg);
	e->b->storage = &fake_storage_ops;
	r = backend_start(e->b, &err);
	cr_assert_eq(r, 0, "backend_start: %s", err.msg);
	/* recovery runs on its own thread: wait for READY */
	for (int i = 0; atomic_load(&e->b->state) != BACKEND_READY; i++) {
		cr_assert_lt(i, 20000 * slow(), "not READY after 20 s");
		usleep(1000);
	}
}

static void env_stop(struct env *e)
{
	backend_stop(e->b, 10000);
	backend_free(e->b);
	e->b = NULL;
}

static void env_done(struct env *e)
{
	char cmd[600];

	if (e->b)
		env_stop(e);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", e->root);
	(void)!system(cmd);
}

/* ---- driving the tree as fs does ---- */

static struct bnode *node_at(struct env *e, const char *path)
{
	char buf[256], *save = NULL;
	struct bnode *n = bnode_ref(backend_root(e->b));

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *c = strtok_r(buf, "/", &save); c && n; c = strtok_r(NULL, "/", &save)) {
		struct bnode *k = bnode_lookup(n, c);

		bnode_unref(n);
		n = k;
	}
	return n;
}

static const struct battr *attr_of(struct bnode *n, const char *name)
{
	for (size_t i = 0; i < n->type->nattrs; i++)
		if (strcmp(n->type->attrs[i].name, name) == 0)
			return &n->type->attrs[i];
	return NULL;
}

struct waiter {
	pthread_mutex_t m;
	pthread_cond_t c;
	bool done;
	int result;
};

static void on_done(struct breq *rq, int result)
{
	struct waiter *w = rq->fs_ctx;

	pthread_mutex_lock(&w->m);
	w->done = true;
	w->result = result;
	pthread_cond_broadcast(&w->c);
	pthread_mutex_unlock(&w->m);
}

static char last_error[NERR_MSG_MAX];

/* Write one line to PATH/ctl and wait for its answer: >= 0 or -errno
 * (the message in last_error). */
static int ctl(struct env *e, const char *path, const char *line)
{
	struct waiter w = { .m = PTHREAD_MUTEX_INITIALIZER, .c = PTHREAD_COND_INITIALIZER };
	struct breq rq = { .done = on_done, .fs_ctx = &w };
	struct bnode *n = node_at(e, path);
	const struct battr *a;
	int r;

	cr_assert_not_null(n, "no %s", path);
	a = attr_of(n, "ctl");
	cr_assert_not_null(a);
	sbuf_init(&rq.reply, 4096);
	r = a->store(n, line, strlen(line), &rq);
	if (r == -EINPROGRESS) {
		pthread_mutex_lock(&w.m);
		while (!w.done)
			pthread_cond_wait(&w.c, &w.m);
		pthread_mutex_unlock(&w.m);
		r = w.result;
	}
	snprintf(last_error, sizeof(last_error), "%s", r < 0 ? rq.err.msg : "");
	sbuf_free(&rq.reply);
	bnode_unref(n);
	return r;
}

#define CTL_OK(e, path, line)							\
	do {									\
		int r_ = ctl(e, path, line);					\
		cr_assert_geq(r_, 0, "%s <- %s: %s (%s)", path, line,		\
			      strerror(-r_), last_error);			\
	} while (0)

/* The text of PATH's file NAME, without its last newline ("" if none). */
static void show(struct env *e, const char *path, const char *name, char *buf, size_t len)
{
	struct sbuf out = SBUF_INIT(1u << 20);
	struct bnode *n = node_at(e, path);
	const struct battr *a;

	cr_assert_not_null(n, "no %s", path);
	a = attr_of(n, name);
	cr_assert_not_null(a, "no %s/%s", path, name);
	cr_assert_geq(a->show(n, &out), 0);
	snprintf(buf, len, "%.*s", (int)out.len, out.buf ? out.buf : "");
	if (out.len && buf[strlen(buf) - 1] == '\n')
		buf[strlen(buf) - 1] = '\0';
	sbuf_free(&out);
	bnode_unref(n);
}

static const char *state_of(struct env *e, const char *vol)
{
	static char buf[64];
	char path[128];
	struct bnode *n;

	snprintf(path, sizeof(path), "volumes/%s", vol);
	n = node_at(e, path);
	if (!n)
		return "GONE";
	bnode_unref(n);
	show(e, path, "state", buf, sizeof(buf));
	return buf;
}

/* Wait until vol has no action queued or running (or is gone): what
 * recovery resumed runs after READY. */
static void settle(struct env *e, const char *vol)
{
	char path[128];

	snprintf(path, sizeof(path), "volumes/%s", vol);
	for (int i = 0;; i++) {
		struct bnode *n = node_at(e, path);
		bool busy = n && atomic_load(&vof(n)->inflight) > 0;

		bnode_unref(n);
		if (!busy)
			return;
		cr_assert_lt(i, 20000 * slow(), "%s still busy after 20 s", vol);
		usleep(1000);
	}
}

static const char *logged(void)
{
	static char buf[8192];

	fake_log(buf, sizeof(buf));
	return buf;
}

#define EXPECT_LOG(want)							\
	do {									\
		cr_expect_str_eq(logged(), want, "calls: [%s], want [%s]",	\
				 logged(), want);				\
		fake_log_clear();						\
	} while (0)

#define EXPECT_STATE(e, vol, want)						\
	cr_expect_str_eq(state_of(e, vol), want, "%s is %s, want %s", vol,	\
			 state_of(e, vol), want)

static const char *vol_id(struct env *e, const char *vol)
{
	static char buf[128];
	char path[128];

	snprintf(path, sizeof(path), "volumes/%s", vol);
	show(e, path, "id", buf, sizeof(buf));
	return buf;
}

/* Capabilities: controller publish, stage. */
#define CTL_ALL ((1u << STORAGE_CTL_CREATE_DELETE_VOLUME) | (1u << STORAGE_CTL_LIST_VOLUMES))
#define CTL_PUB (1u << STORAGE_CTL_PUBLISH_UNPUBLISH_VOLUME)
#define NODE_STAGE (1u << STORAGE_NODE_STAGE_UNSTAGE_VOLUME)

/* The calls of each command for a combination, "" where none. */
struct combo {
	bool ctl_pub, stage;
};
static const struct combo combos[] = {
	{ false, false }, { false, true }, { true, false }, { true, true },
};

static void combo_reset(const struct combo *c, uint32_t ctl_more, uint32_t node_more)
{
	fake_reset(CTL_ALL | (c->ctl_pub ? CTL_PUB : 0) | ctl_more,
		   (c->stage ? NODE_STAGE : 0) | node_more);
}

static void join(char *buf, size_t len, const char *const *calls)
{
	buf[0] = '\0';
	for (size_t i = 0; calls[i]; i++)
		if (calls[i][0])
			snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? " " : "",
				 calls[i]);
}

/* ---- transitions and capability combinations ---- */

Test(volume, lifecycle_every_combination, .timeout = 120)
{
	for (size_t k = 0; k < sizeof(combos) / sizeof(combos[0]); k++) {
		const struct combo *c = &combos[k];
		const char *cp = c->ctl_pub ? "ControllerPublishVolume" : "";
		const char *cu = c->ctl_pub ? "ControllerUnpublishVolume" : "";
		const char *st = c->stage ? "NodeStageVolume" : "";
		const char *us = c->stage ? "NodeUnstageVolume" : "";
		const char *ready = c->stage ? "VOL_READY" : "NODE_READY";
		char want[512], line[512];
		struct env e;
		struct fake_vol fv;

		cr_log_info("controller publish %d, stage %d", c->ctl_pub, c->stage);
		combo_reset(c, 0, 0);
		env_init(&e);
		env_start(&e, e.state);

		CTL_OK(&e, "volumes", "create db size=4M");
		EXPECT_STATE(&e, "db", "CREATED");
		EXPECT_LOG("CreateVolume");
		cr_assert(fake_vol_get(vol_id(&e, "db"), &fv));
		cr_expect_eq(fv.capacity, 4 << 20);

		/* stage: up to where a publish would bind */
		CTL_OK(&e, "volumes/db", "stage");
		EXPECT_STATE(&e, "db", ready);
		join(want, sizeof(want), (const char *[]){ cp, st, NULL });
		EXPECT_LOG(want);

		snprintf(line, sizeof(line), "publish %s/db ro", e.mnt);
		CTL_OK(&e, "volumes/db", line);
		EXPECT_STATE(&e, "db", "PUBLISHED");
		EXPECT_LOG("NodePublishVolume");
		cr_assert(fake_vol_get(vol_id(&e, "db"), &fv));
		cr_expect(fv.published && fv.staged == c->stage && fv.ctl_published == c->ctl_pub);
		cr_expect_eq(fv.got_pctx, c->ctl_pub, "the publish context is handed on");

		/* a second publish is refused, nothing called */
		cr_expect_eq(ctl(&e, "volumes/db", line), -EBUSY);
		EXPECT_LOG("");

		CTL_OK(&e, "volumes/db", "unpublish");
		EXPECT_STATE(&e, "db", ready);
		EXPECT_LOG("NodeUnpublishVolume");
		cr_expect_eq(ctl(&e, "volumes/db", "unpublish"), -EINVAL, "not published");

		CTL_OK(&e, "volumes/db", "unstage");
		EXPECT_STATE(&e, "db", "CREATED");
		join(want, sizeof(want), (const char *[]){ us, cu, NULL });
		EXPECT_LOG(want);

		/* publish from CREATED walks the whole way up */
		CTL_OK(&e, "volumes/db", line);
		join(want, sizeof(want), (const char *[]){ cp, st, "NodePublishVolume", NULL });
		EXPECT_LOG(want);

		/* destroy from PUBLISHED walks the whole way down */
		CTL_OK(&e, "volumes/db", "destroy");
		EXPECT_STATE(&e, "db", "GONE");
		join(want, sizeof(want),
		     (const char *[]){ "NodeUnpublishVolume", us, cu, "DeleteVolume", NULL });
		EXPECT_LOG(want);
		cr_expect_eq(fake_nvols(), 0);
		env_done(&e);
	}
}

Test(volume, create_needs_create_delete, .timeout = 60)
{
	struct env e;

	fake_reset(CTL_PUB, 0);
	env_init(&e);
	env_start(&e, e.state);
	cr_expect_eq(ctl(&e, "volumes", "create db"), -ENOTSUP);
	cr_expect(strstr(last_error, "CREATE_DELETE_VOLUME"), "%s", last_error);
	EXPECT_STATE(&e, "db", "GONE");
	EXPECT_LOG("");
	env_done(&e);
}

Test(volume, import, .timeout = 60)
{
	struct env e;
	char buf[256];

	fake_reset(CTL_ALL, 0);
	fake_seed("ext-1", 1 << 20);
	fake_seed("ext-2", 2 << 20);	/* ListVolumes takes two pages */
	env_init(&e);
	env_start(&e, e.state);
	CTL_OK(&e, "volumes", "import old ext-2");
	EXPECT_STATE(&e, "old", "CREATED");
	EXPECT_LOG("ValidateVolumeCapabilities");
	show(&e, "volumes/old", "capacity", buf, sizeof(buf));
	cr_expect_str_eq(buf, "2097152", "capacity from the second page of ListVolumes");
	/* an id the plugin does not confirm makes no volume */
	cr_expect_lt(ctl(&e, "volumes", "import bad no-such-id"), 0);
	EXPECT_STATE(&e, "bad", "GONE");
	/* the same id twice is refused before any call */
	cr_expect_eq(ctl(&e, "volumes", "import again ext-2"), -EEXIST);
	EXPECT_LOG("ValidateVolumeCapabilities");
	env_done(&e);
}

/* ---- expand ---- */

struct expand_case {
	uint32_t ctl, node;
	bool node_needed;
	const char *calls;
	int result;
};

Test(volume, expand_every_combination, .timeout = 120)
{
	static const struct expand_case cases[] = {
		{ 1u << STORAGE_CTL_EXPAND_VOLUME, 0, true, "ControllerExpandVolume", 0 },
		{ 0, 1u << STORAGE_NODE_EXPAND_VOLUME, true, "NodeExpandVolume", 0 },
		{ 1u << STORAGE_CTL_EXPAND_VOLUME, 1u << STORAGE_NODE_EXPAND_VOLUME, true,
		  "ControllerExpandVolume NodeExpandVolume", 0 },
		{ 1u << STORAGE_CTL_EXPAND_VOLUME, 1u << STORAGE_NODE_EXPAND_VOLUME, false,
		  "ControllerExpandVolume", 0 },
		{ 0, 0, true, "", -ENOTSUP },
	};

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		const struct expand_case *c = &cases[k];
		struct env e;
		char buf[64], line[400];

		fake_reset(CTL_ALL | c->ctl, NODE_STAGE | c->node);
		fake.node_needed = c->node_needed;
		env_init(&e);
		env_start(&e, e.state);
		CTL_OK(&e, "volumes", "create db size=1M");
		snprintf(line, sizeof(line), "publish %s/db", e.mnt);
		CTL_OK(&e, "volumes/db", line);
		fake_log_clear();
		cr_expect_eq(ctl(&e, "volumes/db", "expand 1M"), -EINVAL, "not more than the capacity");
		cr_expect_eq(ctl(&e, "volumes/db", "expand 8M"), c->result, "case %zu: %s", k,
			     last_error);
		EXPECT_LOG(c->calls);
		show(&e, "volumes/db", "capacity", buf, sizeof(buf));
		cr_expect_str_eq(buf, c->result ? "1048576" : "8388608", "case %zu", k);
		EXPECT_STATE(&e, "db", "PUBLISHED");
		env_done(&e);
	}
}

Test(volume, expand_node_owed, .timeout = 60)
{
	struct env e;
	char line[400], buf[4096];

	fake_reset(CTL_ALL | (1u << STORAGE_CTL_EXPAND_VOLUME),
		   NODE_STAGE | (1u << STORAGE_NODE_EXPAND_VOLUME));
	env_init(&e);
	env_start(&e, e.state);
	CTL_OK(&e, "volumes", "create db size=1M");
	snprintf(line, sizeof(line), "publish %s/db", e.mnt);
	CTL_OK(&e, "volumes/db", line);
	fake_log_clear();
	fake_fail("NodeExpandVolume", false, EINVAL, 3, "INVALID_ARGUMENT", false, 1);
	cr_expect_eq(ctl(&e, "volumes/db", "expand 8M"), -EINVAL);
	cr_expect(strstr(last_error, "finishes on the node"), "%s", last_error);
	EXPECT_LOG("ControllerExpandVolume NodeExpandVolume");
	show(&e, "volumes/db", "info.json", buf, sizeof(buf));
	cr_expect(strstr(buf, "\"node_expand_to\": 8388608"), "%s", buf);
	/* the same size again: only the node call is owed */
	CTL_OK(&e, "volumes/db", "expand 8M");
	EXPECT_LOG("NodeExpandVolume");
	show(&e, "volumes/db", "info.json", buf, sizeof(buf));
	cr_expect_null(strstr(buf, "node_expand_to"), "%s", buf);
	env_done(&e);
}

Test(volume, stats, .timeout = 60)
{
	struct env e;
	char line[400], buf[256];

	fake_reset(CTL_ALL, 1u << STORAGE_NODE_GET_VOLUME_STATS);
	env_init(&e);
	env_start(&e, e.state);
	CTL_OK(&e, "volumes", "create db");
	show(&e, "volumes/db", "stats", buf, sizeof(buf));
	cr_expect_str_eq(buf, "", "not on this node: nothing to measure");
	snprintf(line, sizeof(line), "publish %s/db", e.mnt);
	CTL_OK(&e, "volumes/db", line);
	show(&e, "volumes/db", "stats", buf, sizeof(buf));
	cr_expect_str_eq(buf, "bytes_used 1\nbytes_available 2\nbytes_total 3");
	env_done(&e);

	fake_reset(CTL_ALL, 0);
	env_init(&e);
	env_start(&e, e.state);
	CTL_OK(&e, "volumes", "create db");
	snprintf(line, sizeof(line), "publish %s/db", e.mnt);
	CTL_OK(&e, "volumes/db", line);
	/* the capabilities are cached by the publish */
	show(&e, "volumes/db", "stats", buf, sizeof(buf));
	cr_expect_str_eq(buf, "unsupported: plugin has no GET_VOLUME_STATS");
	env_done(&e);
}

/* ---- error classes ---- */

struct eclass {
	const char *name;
	int err, code;
	const char *code_name;
	bool uncertain, after;
};
static const struct eclass classes[] = {
	{ "permanent", EINVAL, 3, "INVALID_ARGUMENT", false, false },
	{ "UNIMPLEMENTED", EOPNOTSUPP, 12, "UNIMPLEMENTED", false, false },
	{ "transient", EAGAIN, 14, "UNAVAILABLE", true, false },
	{ "deadline after acting", ETIMEDOUT, 4, "DEADLINE_EXCEEDED", true, true },
};

/* A step of the walk up, the stable state before it and its transient. */
struct upstep {
	const char *call, *before, *transient;
};
static const struct upstep upsteps[] = {
	{ "ControllerPublishVolume", "CREATED", "CONTROLLER_PUBLISH" },
	{ "NodeStageVolume", "NODE_READY", "NODE_STAGE" },
	{ "NodePublishVolume", "VOL_READY", "NODE_PUBLISH" },
};

Test(volume, errors_walking_up, .timeout = 180)
{
	for (size_t s = 0; s < sizeof(upsteps) / sizeof(upsteps[0]); s++)
		for (size_t k = 0; k < sizeof(classes) / sizeof(classes[0]); k++) {
			const struct upstep *u = &upsteps[s];
			const struct eclass *c = &classes[k];
			struct env e;
			char line[400];
			int r;

			cr_log_info("%s fails %s", u->call, c->name);
			fake_reset(CTL_ALL | CTL_PUB, NODE_STAGE);
			env_init(&e);
			env_start(&e, e.state);
			CTL_OK(&e, "volumes", "create db");
			fake_fail(u->call, c->after, c->err, c->code, c->code_name, c->uncertain, 1);
			snprintf(line, sizeof(line), "publish %s/db", e.mnt);
			r = ctl(&e, "volumes/db", line);
			cr_expect_eq(r, -c->err, "%s %s: %d (%s)", u->call, c->name, r, last_error);
			cr_expect(strstr(last_error, u->call), "%s", last_error);
			/* uncertain: left in the transient state for the next
			 * command; certain: back to where it was */
			EXPECT_STATE(&e, "db", c->uncertain ? u->transient : u->before);
			if (c->uncertain)
				cr_expect(strstr(last_error, "the next command retries"), "%s", last_error);
			fake_log_clear();
			CTL_OK(&e, "volumes/db", line);
			EXPECT_STATE(&e, "db", "PUBLISHED");
			/* the failed call is made again, and only what follows */
			cr_expect(strncmp(logged(), u->call, strlen(u->call)) == 0, "[%s]", logged());
			fake_log_clear();
			CTL_OK(&e, "volumes/db", "destroy");
			EXPECT_STATE(&e, "db", "GONE");
			cr_expect_eq(fake_nvols(), 0);
			env_done(&e);
		}
}

/* A step of the walk down from PUBLISHED (destroy), the state a certain
 * failure leaves and the transient. */
static const struct upstep downsteps[] = {
	{ "NodeUnpublishVolume", "PUBLISHED", "NODE_UNPUBLISH" },
	{ "NodeUnstageVolume", "VOL_READY", "NODE_UNSTAGE" },
	{ "ControllerUnpublishVolume", "NODE_READY", "CONTROLLER_UNPUBLISH" },
	{ "DeleteVolume", "CREATED", "DELETING" },
};

Test(volume, errors_walking_down, .timeout = 180)
{
	for (size_t s = 0; s < sizeof(downsteps) / sizeof(downsteps[0]); s++)
		for (size_t k = 0; k < sizeof(classes) / sizeof(classes[0]); k++) {
			const struct upstep *d = &downsteps[s];
			const struct eclass *c = &classes[k];
			struct env e;
			char line[400];
			int r;

			cr_log_info("%s fails %s", d->call, c->name);
			fake_reset(CTL_ALL | CTL_PUB, NODE_STAGE);
			env_init(&e);
			env_start(&e, e.state);
			CTL_OK(&e, "volumes", "create db");
			snprintf(line, sizeof(line), "publish %s/db", e.mnt);
			CTL_OK(&e, "volumes/db", line);
			fake_fail(d->call, c->after, c->err, c->code, c->code_name, c->uncertain, 1);
			r = ctl(&e, "volumes/db", "destroy");
			cr_expect_eq(r, -c->err, "%s %s: %d (%s)", d->call, c->name, r, last_error);
			EXPECT_STATE(&e, "db", c->uncertain ? d->transient : d->before);
			fake_log_clear();
			/* a destroy again finishes the walk, re-driving the call */
			CTL_OK(&e, "volumes/db", "destroy");
			EXPECT_STATE(&e, "db", "GONE");
			cr_expect(strncmp(logged(), d->call, strlen(d->call)) == 0, "[%s]", logged());
			cr_expect_eq(fake_nvols(), 0);
			env_done(&e);
		}
}

Test(volume, errors_create, .timeout = 120)
{
	for (size_t k = 0; k < sizeof(classes) / sizeof(classes[0]); k++) {
		const struct eclass *c = &classes[k];
		struct env e;
		char line[400];

		cr_log_info("CreateVolume fails %s", c->name);
		fake_reset(CTL_ALL, 0);
		env_init(&e);
		env_start(&e, e.state);
		fake_fail("CreateVolume", c->after, c->err, c->code, c->code_name, c->uncertain, 1);
		cr_expect_eq(ctl(&e, "volumes", "create db"), -c->err, "%s", last_error);
		/* a create that failed for certain made nothing: the name is
		 * free; an uncertain one keeps the volume CREATING */
		EXPECT_STATE(&e, "db", c->uncertain ? "CREATING" : "GONE");
		if (c->uncertain) {
			/* the next command finishes the create first: the same
			 * name makes the same volume */
			snprintf(line, sizeof(line), "publish %s/db", e.mnt);
			CTL_OK(&e, "volumes/db", line);
			EXPECT_STATE(&e, "db", "PUBLISHED");
			cr_expect_eq(fake_nvols(), 1);
		} else {
			CTL_OK(&e, "volumes", "create db");
			EXPECT_STATE(&e, "db", "CREATED");
		}
		env_done(&e);
	}
}

Test(volume, unstage_failed_restages, .timeout = 60)
{
	struct env e;
	char line[400];

	fake_reset(CTL_ALL, NODE_STAGE);
	env_init(&e);
	env_start(&e, e.state);
	CTL_OK(&e, "volumes", "create db");
	CTL_OK(&e, "volumes/db", "stage");
	fake_fail("NodeUnstageVolume", false, EAGAIN, 14, "UNAVAILABLE", true, 1);
	cr_expect_eq(ctl(&e, "volumes/db", "unstage"), -EAGAIN);
	EXPECT_STATE(&e, "db", "NODE_UNSTAGE");
	fake_log_clear();
	/* a publish now stages again before it publishes */
	snprintf(line, sizeof(line), "publish %s/db", e.mnt);
	CTL_OK(&e, "volumes/db", line);
	EXPECT_LOG("NodeStageVolume NodePublishVolume");
	EXPECT_STATE(&e, "db", "PUBLISHED");
	env_done(&e);
}

/* An uncertain failure walking one way, then a command walking the other
 * way: the transient state is re-driven in the new direction. */
struct turn {
	const char *setup;	/* "publish", "publish+unpublish", "stage+unstage", "create" */
	const char *fails;	/* the call that fails, uncertain */
	const char *failing;	/* the command that meets it */
	const char *transient;
	const char *then;	/* the command in the other direction */
	int then_result;
	const char *calls;	/* what `then` calls */
	const char *end;
};

Test(volume, uncertain_then_the_other_way, .timeout = 180)
{
	static const struct turn turns[] = {
		{ "", "CreateVolume", "create", "CREATING", "destroy", 0,
		  "CreateVolume DeleteVolume", "GONE" },
		{ "create", "ControllerPublishVolume", "publish", "CONTROLLER_PUBLISH", "destroy", 0,
		  "ControllerUnpublishVolume DeleteVolume", "GONE" },
		{ "create", "NodeStageVolume", "publish", "NODE_STAGE", "destroy", 0,
		  "NodeUnstageVolume ControllerUnpublishVolume DeleteVolume", "GONE" },
		/* an unfinished publish is not PUBLISHED: unstage takes it down */
		{ "create", "NodePublishVolume", "publish", "NODE_PUBLISH", "unstage", 0,
		  "NodeUnpublishVolume NodeUnstageVolume ControllerUnpublishVolume", "CREATED" },
		{ "create", "NodePublishVolume", "publish", "NODE_PUBLISH", "destroy", 0,
		  "NodeUnpublishVolume NodeUnstageVolume ControllerUnpublishVolume DeleteVolume", "GONE" },
		{ "publish", "NodeUnpublishVolume", "unpublish", "NODE_UNPUBLISH", "publish", 0,
		  "NodePublishVolume", "PUBLISHED" },
		{ "stage", "ControllerUnpublishVolume", "unstage", "CONTROLLER_UNPUBLISH", "publish", 0,
		  "ControllerPublishVolume NodeStageVolume NodePublishVolume", "PUBLISHED" },
		{ "create", "DeleteVolume", "destroy", "DELETING", "publish", -EBUSY, "", "DELETING" },
	};

	for (size_t k = 0; k < sizeof(turns) / sizeof(turns[0]); k++) {
		const struct turn *t = &turns[k];
		struct env e;
		char pub[400], line[400];
		int r;

		cr_log_info("%s fails during %s, then %s", t->fails, t->failing, t->then);
		fake_reset(CTL_ALL | CTL_PUB, NODE_STAGE);
		env_init(&e);
		env_start(&e, e.state);
		snprintf(pub, sizeof(pub), "publish %s/db", e.mnt);
		if (t->setup[0])
			CTL_OK(&e, "volumes", "create db");
		if (strcmp(t->setup, "publish") == 0)
			CTL_OK(&e, "volumes/db", pub);
		if (strcmp(t->setup, "stage") == 0)
			CTL_OK(&e, "volumes/db", "stage");
		fake_fail(t->fails, false, EAGAIN, 14, "UNAVAILABLE", true, 1);
		if (strcmp(t->failing, "create") == 0)
			r = ctl(&e, "volumes", "create db");
		else
			r = ctl(&e, "volumes/db", strcmp(t->failing, "publish") == 0 ? pub : t->failing);
		cr_expect_eq(r, -EAGAIN, "%s: %s", t->failing, last_error);
		EXPECT_STATE(&e, "db", t->transient);
		fake_log_clear();
		snprintf(line, sizeof(line), "%s", strcmp(t->then, "publish") == 0 ? pub : t->then);
		r = ctl(&e, "volumes/db", line);
		cr_expect_eq(r, t->then_result, "%s after %s: %d %s", t->then, t->fails, r, last_error);
		EXPECT_LOG(t->calls);
		EXPECT_STATE(&e, "db", t->end);
		env_done(&e);
	}
}

/* ---- crash points ---- */

/* What a crash leaves: the state dir as it is at this moment. */
static void snapshot(void *ctx)
{
	struct env *e = ctx;
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "cp -a '%s' '%s/crashed'", e->state, e->root);
	cr_assert_eq(system(cmd), 0);
}

struct crash_case {
	const char *cmd;	/* "publish" or "destroy" or "create" */
	const char *call;
	const char *end;	/* the state recovery must reach */
};

/* Start, bring db to where cmd begins, write cmd with the crash hook at
 * call (after acting or not), then start a second backend on the copy
 * taken at the hook and let recovery finish. */
static void crash_at(const struct combo *c, const struct crash_case *cc, bool after)
{
	struct env e;
	char line[400], path[400];
	struct fake_vol fv;

	cr_log_info("crash at %s %s, %s acting (ctl %d, stage %d)", cc->cmd, cc->call,
		    after ? "after" : "before", c->ctl_pub, c->stage);
	combo_reset(c, 0, 0);
	env_init(&e);
	env_start(&e, e.state);
	snprintf(line, sizeof(line), "publish %s/db", e.mnt);
	if (strcmp(cc->cmd, "create") != 0)
		CTL_OK(&e, "volumes", "create db");
	if (strcmp(cc->cmd, "publish") != 0 && strcmp(cc->cmd, "create") != 0)
		CTL_OK(&e, "volumes/db", line);
	pthread_mutex_lock(&fake.lock);
	fake.hook_call = cc->call;
	fake.hook_after = after;
	fake.hook = snapshot;
	fake.hook_ctx = &e;
	fake.hook_fired = false;
	pthread_mutex_unlock(&fake.lock);
	if (strcmp(cc->cmd, "create") == 0)
		CTL_OK(&e, "volumes", "create db");
	else if (strcmp(cc->cmd, "publish") == 0)
		CTL_OK(&e, "volumes/db", line);
	else
		CTL_OK(&e, "volumes/db", cc->cmd);
	cr_assert(fake.hook_fired, "no %s call", cc->call);
	env_stop(&e);

	/* The plugin is what it was when the process died: undo what the
	 * first backend did after the hook (when it acted, the plugin kept
	 * it; the calls after the crash never happened). The fake replays
	 * them idempotently, so only a destroy's DeleteVolume before acting
	 * needs the volume back. */
	snprintf(path, sizeof(path), "%s/crashed", e.root);
	if (strcmp(cc->cmd, "destroy") == 0 && fake_nvols() == 0 &&
	    !(after && strcmp(cc->call, "DeleteVolume") == 0))
		fake_seed("vol-1", 1 << 20);
	fake_log_clear();
	env_start(&e, path);
	settle(&e, "db");
	EXPECT_STATE(&e, "db", cc->end);
	cr_expect(strstr(logged(), cc->call) == logged(), "recovery re-drives %s first: [%s]",
		  cc->call, logged());
	if (strcmp(cc->end, "GONE") == 0) {
		cr_expect_eq(fake_nvols(), 0);
	} else {
		cr_expect_eq(fake_nvols(), 1, "one volume, however often CreateVolume ran");
		cr_assert(fake_vol_get(vol_id(&e, "db"), &fv));
		if (strcmp(cc->end, "PUBLISHED") == 0)
			cr_expect(fv.published && fv.staged == c->stage &&
				  fv.ctl_published == c->ctl_pub);
	}
	/* and the volume is usable: down and gone */
	if (strcmp(cc->end, "GONE") != 0) {
		CTL_OK(&e, "volumes/db", "destroy");
		cr_expect_eq(fake_nvols(), 0);
	}
	env_done(&e);
}

Test(volume, crash_points, .timeout = 300)
{
	static const struct crash_case cases[] = {
		{ "create", "CreateVolume", "CREATED" },
		{ "publish", "ControllerPublishVolume", "PUBLISHED" },
		{ "publish", "NodeStageVolume", "PUBLISHED" },
		{ "publish", "NodePublishVolume", "PUBLISHED" },
		{ "destroy", "NodeUnpublishVolume", "GONE" },
		{ "destroy", "NodeUnstageVolume", "GONE" },
		{ "destroy", "ControllerUnpublishVolume", "GONE" },
		{ "destroy", "DeleteVolume", "GONE" },
	};
	const struct combo all = { true, true };

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
		for (int after = 0; after < 2; after++)
			crash_at(&all, &cases[k], after);
}

Test(volume, crash_points_without_optional_steps, .timeout = 120)
{
	static const struct crash_case cases[] = {
		{ "publish", "NodePublishVolume", "PUBLISHED" },
		{ "destroy", "NodeUnpublishVolume", "GONE" },
		{ "destroy", "DeleteVolume", "GONE" },
	};
	const struct combo none = { false, false };

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++)
		for (int after = 0; after < 2; after++)
			crash_at(&none, &cases[k], after);
}

/* A reboot loses the mounts: a published volume comes back NODE_READY and
 * is published again on demand; a publish in that run counts only once
 * its target is a mount point. The fake plugin mounts nothing (its OK is
 * a plugin answering from its records): nodefs has it undo and redo the
 * stage and publish once, then fails the publish, and the volume is not
 * PUBLISHED. (That a real mount passes: volumes-restart.) */
Test(volume, recovery_after_reboot, .timeout = 60)
{
	struct env e;
	char line[400], path[400];
	FILE *fp;

	fake_reset(CTL_ALL | CTL_PUB, NODE_STAGE);
	env_init(&e);
	env_start(&e, e.state);
	CTL_OK(&e, "volumes", "create db");
	snprintf(line, sizeof(line), "publish %s/db", e.mnt);
	CTL_OK(&e, "volumes/db", line);
	env_stop(&e);
	snprintf(path, sizeof(path), "%s/boot_id", e.state);
	fp = fopen(path, "w");
	cr_assert_not_null(fp);
	fputs("00000000-0000-0000-0000-000000000000\n", fp);
	fclose(fp);
	fake_log_clear();
	env_start(&e, e.state);
	EXPECT_STATE(&e, "db", "NODE_READY");
	{	/* NODE_READY says why: the reboot, and where it was mounted */
		char err[600];

		show(&e, "volumes/db", "error", err, sizeof(err));
		cr_expect(strstr(err, "the node rebooted") && strstr(err, "was PUBLISHED at ") &&
			  strstr(err, e.mnt), "%s", err);
	}
	EXPECT_LOG("");
	cr_assert_eq(ctl(&e, "volumes/db", line), -EIO);
	cr_expect(strstr(last_error, "is not a mount point: not published"), "%s", last_error);
	EXPECT_STATE(&e, "db", "VOL_READY");
	EXPECT_LOG("NodeStageVolume NodePublishVolume NodeUnpublishVolume NodeUnstageVolume "
		   "NodeStageVolume NodePublishVolume");
	env_done(&e);
}

/* ---- snapshots (backend/snapshots/) against the same fake ---- */

#define SNAP_CTL ((1u << STORAGE_CTL_CREATE_DELETE_VOLUME) | (1u << STORAGE_CTL_CREATE_DELETE_SNAPSHOT) | \
		  (1u << STORAGE_CTL_CLONE_VOLUME))

/* snapshots/NAME's state, "GONE" when there is none, once no command of
 * it is in flight (recovery's resumed ones run after READY). */
static const char *snap_state(struct env *e, const char *name)
{
	static char buf[64];
	char path[128];

	snprintf(path, sizeof(path), "snapshots/%s", name);
	for (int i = 0;; i++) {
		struct bnode *n = node_at(e, path);

		if (!n)
			return "GONE";
		bnode_unref(n);
		show(e, path, "state", buf, sizeof(buf));
		if (strcmp(buf, "CREATING") != 0 && strcmp(buf, "DELETING") != 0)
			return buf;
		if (i > 2000 * slow())
			return buf;	/* a state recovery left: the caller says */
		usleep(1000);
	}
}

Test(snapshot, commands_errors_and_uncertain, .timeout = 60)
{
	struct env e;
	char id[128], src[64];

	fake_reset(SNAP_CTL, 0);
	env_init(&e);
	env_start(&e, e.state);
	CTL_OK(&e, "volumes", "create db");
	fake_log_clear();
	CTL_OK(&e, "snapshots", "create s volume=db param.k=v");
	EXPECT_LOG("CreateSnapshot");
	cr_expect_str_eq(snap_state(&e, "s"), "READY");
	show(&e, "snapshots/s", "id", id, sizeof(id));
	cr_expect_eq(fake_nsnaps(), 1);
	/* a restore names the snapshot's id as its content source */
	CTL_OK(&e, "volumes", "create r from=snapshot:s");
	fake_last_source(src, sizeof(src));
	cr_expect_str_eq(src, id);
	CTL_OK(&e, "volumes", "create c from=volume:db");
	fake_last_source(src, sizeof(src));
	cr_expect_str_eq(src, vol_id(&e, "db"));
	/* refused before any call */
	fake_log_clear();
	cr_expect_eq(ctl(&e, "snapshots", "create s volume=db"), -EEXIST);
	cr_expect_eq(ctl(&e, "snapshots", "create t volume=nope"), -ENOENT);
	cr_expect_eq(ctl(&e, "snapshots", "create t"), -EINVAL);
	cr_expect_eq(ctl(&e, "volumes", "create x from=snapshot:nope"), -ENOENT);
	EXPECT_LOG("");
	/* a certain refusal: FAILED with the words; delete forgets it, no call */
	fake_fail("CreateSnapshot", false, EINVAL, 3, "INVALID_ARGUMENT", false, 1);
	cr_expect_eq(ctl(&e, "snapshots", "create f volume=db"), -EINVAL);
	cr_expect_str_eq(snap_state(&e, "f"), "FAILED");
	fake_log_clear();
	CTL_OK(&e, "snapshots/f", "delete");
	cr_expect_str_eq(snap_state(&e, "f"), "GONE");
	EXPECT_LOG("");
	/* an answer lost after the plugin acted: CREATING, and the call is
	 * repeated in the background (its first look a second later), which
	 * learns the one snapshot it made: READY with nothing written again
	 * (snap_state waits while CREATING); the same line then finds it */
	fake_fail("CreateSnapshot", true, ETIMEDOUT, 4, "DEADLINE_EXCEEDED", true, 1);
	cr_expect_eq(ctl(&e, "snapshots", "create u volume=db"), -ETIMEDOUT);
	cr_expect_eq(fake_nsnaps(), 2);
	cr_expect_str_eq(snap_state(&e, "u"), "READY");
	cr_expect_eq(fake_nsnaps(), 2, "one snapshot, however often CreateSnapshot ran");
	cr_expect_eq(ctl(&e, "snapshots", "create u volume=db"), -EEXIST);
	/* a refused delete puts it back READY */
	fake_fail("DeleteSnapshot", false, EBUSY, 9, "FAILED_PRECONDITION", false, 1);
	cr_expect_eq(ctl(&e, "snapshots/u", "delete"), -EBUSY);
	cr_expect_str_eq(snap_state(&e, "u"), "READY");
	CTL_OK(&e, "snapshots/u", "delete");
	CTL_OK(&e, "snapshots/s", "delete");
	cr_expect_eq(fake_nsnaps(), 0);
	env_done(&e);
}

/* A crash at CreateSnapshot or DeleteSnapshot, before or after the plugin
 * acted: a second backend on the state dir copied there drives the
 * command to its end, with one snapshot (or none) at the plugin. */
Test(snapshot, crash_points, .timeout = 120)
{
	static const struct { const char *call; const char *end; } cases[] = {
		{ "CreateSnapshot", "READY" }, { "DeleteSnapshot", "GONE" },
	};

	for (size_t k = 0; k < 2; k++)
		for (int after = 0; after < 2; after++) {
			struct env e;
			char path[400];
			bool del = strcmp(cases[k].call, "DeleteSnapshot") == 0;

			cr_log_info("crash at %s, %s acting", cases[k].call, after ? "after" : "before");
			fake_reset(SNAP_CTL, 0);
			env_init(&e);
			env_start(&e, e.state);
			CTL_OK(&e, "volumes", "create db");
			if (del)
				CTL_OK(&e, "snapshots", "create s volume=db");
			pthread_mutex_lock(&fake.lock);
			fake.hook_call = cases[k].call;
			fake.hook_after = after;
			fake.hook = snapshot;
			fake.hook_ctx = &e;
			fake.hook_fired = false;
			pthread_mutex_unlock(&fake.lock);
			if (del)
				CTL_OK(&e, "snapshots/s", "delete");
			else
				CTL_OK(&e, "snapshots", "create s volume=db");
			cr_assert(fake.hook_fired, "no %s call", cases[k].call);
			env_stop(&e);
			fake_log_clear();
			snprintf(path, sizeof(path), "%s/crashed", e.root);
			env_start(&e, path);
			cr_expect_str_eq(snap_state(&e, "s"), cases[k].end, "%s %s", cases[k].call,
					 after ? "after" : "before");
			cr_expect(strstr(logged(), cases[k].call) == logged(),
				  "recovery repeats %s first: [%s]", cases[k].call, logged());
			cr_expect_eq(fake_nsnaps(), del ? 0u : 1u);
			env_done(&e);
		}
}
