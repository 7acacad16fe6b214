/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * container-recover: containers after a restart. The checkpoints come back
 * as containers/NAME, each is checked against its engine (gone: EXITED with
 * the reason), creates a crash cut short are taken back (what the engine
 * made under their name is removed), and a PENDING operation whose command
 * can safely be sent again is resumed on the container's queue.
 *
 * It must not know the ctl syntax beyond the command word of a recorded
 * operation, nor the files.
 */
#include "container-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "log.h"
#include "events.h"
#include "store.h"
#include "uncertain.h"
#include "valid.h"

static void recover_one(void *ctx, const char *name, json_t *j)
{
	struct backend *b = ctx;
	const char *rt = json_string_value(json_object_get(j, "runtime"));
	struct engine *e = rt ? engine_find(b, rt) : NULL;
	struct container *c;
	json_t *v;
	const char *s;
	int st;

	if (!e || valid_name(name, NULL) < 0) {
		log_err("container %s: its checkpoint names an unknown runtime '%s'", name, rt ? rt : "");
		atomic_fetch_add(&b->bad_records, 1);
		return;
	}
	c = container_alloc(b, e, name);
	if (!c)
		return;
#define S(field, key) if ((s = json_string_value(json_object_get(j, key))) && s[0]) c->field = strdup(s)
	S(id, "id");
	/* as made, never recomputed: a record from before names had a
	 * prefix keeps "" (the driver's "nodefs-NAME") */
	s = json_string_value(json_object_get(j, "engine_name"));
	snprintf(c->engine_name, sizeof(c->engine_name), "%s", s && e->ops->engine_names ? s : "");
	copts_read(j, &c->spec);
	S(sandbox, "sandbox_dir");
#undef S
	container_service_read(c, j);	/* the restart policy's state */
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
	if (bnode_add(containers_dir(b), c->node) < 0) {
		bnode_unref(c->node);
		return;
	}
	bnode_unref(c->node);
}

static void recover_bad(void *ctx, const char *name, const char *why)
{
	struct backend *b = ctx;

	log_err("container %s: checkpoint unreadable: %s", name, why);
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
static int take_back_half_made_n(struct engine *e, const char *name, int *ret_removed);

static int take_back_half_made(struct engine *e, const char *name)
{
	return take_back_half_made_n(e, name, NULL);
}

/* The same, counting in *ret_removed (when set) every container removed. */
static int take_back_half_made_n(struct engine *e, const char *name, int *ret_removed)
{
	_cleanup_engine_ struct engine_ref *h = engine_hold(e);
	struct rt_listing *l = NULL;
	struct nerr err = { 0 };
	size_t n = 0;
	int half = 0;

	if (engine_ready(e, &err) < 0 || !h || e->ops->list(h->h, &l, &n, &err) < 0) {
		if (name)
			log_warn("container %s: a create was cut short; cannot check %s for what it made: %s",
				 name, e->ops->name, err.msg);
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		if (!l[i].name || (name ? strcmp(l[i].name, name) != 0 : !l[i].half_made))
			continue;
		if (!name && container_creating_now(e->b, e, l[i].name))
			continue;	/* a create written since the mount came up */
		if (e->ops->destroy(h->h, l[i].id, &err) < 0) {
			log_warn("container %s: cannot remove the half-made %s container %s: %s",
				 l[i].name, e->ops->name, l[i].id, err.msg);
			continue;
		}
		log_info("container %s: removed the half-made %s container %s%s", l[i].name,
			 e->ops->name, l[i].id, l[i].half_made ? " (its create was under way)" : "");
		half += l[i].half_made;
		if (ret_removed)
			(*ret_removed)++;
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
/* The value of KEY=VALUE in an operation's intent, or "". */
static void intent_word(const char *intent, const char *key, char *buf, size_t size)
{
	size_t k = strlen(key);

	buf[0] = '\0';
	for (const char *p = intent; p && *p;) {
		const char *end = strchr(p, ' ');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len > k && strncmp(p, key, k) == 0 && p[k] == '=') {
			snprintf(buf, size, "%.*s", (int)(len - k - 1), p + k + 1);
			return;
		}
		p = end ? end + 1 : NULL;
	}
}

static void take_back_cut_creates(struct backend *b)
{
	struct bnode **v;
	size_t n;

	if (bnode_list(operations_dir(b), &v, &n) < 0)
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
		k = bnode_lookup(containers_dir(b), name);
		if (k) {
			bnode_unref(k);
			continue;	/* it has a record: recover_check has it */
		}
		int half = 0;
		char rt[32] = "", ename[112] = "";

		/* what it would have made, recorded before it was sent (none
		 * in an operation of an older nodefs: any runtime, by name) */
		pthread_mutex_lock(&op->lock);
		intent_word(op->intent, "runtime", rt, sizeof(rt));
		intent_word(op->intent, "engine_name", ename, sizeof(ename));
		pthread_mutex_unlock(&op->lock);
		for (size_t e = 0; e < engines_of(b)->n; e++) {
			struct engine *eng = &engines_of(b)->v[e];
			int removed = 0;

			if (!engine_opened(eng) || (rt[0] && strcmp(rt, eng->ops->name) != 0))
				continue;
			half += take_back_half_made_n(eng, name, &removed);
			if (removed) {
				char line[300];

				snprintf(line, sizeof(line), "the %s container%s%s a create cut short by "
					 "a crash made was removed at the restart", eng->ops->name,
					 ename[0] && strcmp(ename, "-") ? " " : "",
					 ename[0] && strcmp(ename, "-") ? ename : "");
				op_note_outcome(op, line);
				events_tally(b->events, eng->ops->name[0] == 'd'
					     ? "nodefs_uncertain_outcomes_total{kind=\"docker.create\",result=\"removed\"}"
					     : "nodefs_uncertain_outcomes_total{kind=\"lxc.create\",result=\"removed\"}", 1);
			} else if (eng->ops->late_creates) {
				/* the engine may still be making it (dockerd goes
				 * on with a create its client left): keep looking */
				uncertain_watch_container(b, eng, name,
							  strcmp(ename, "-") ? ename : "", op);
			}
		}
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
	for (size_t e = 0; e < engines_of(b)->n; e++)
		if (engine_opened(&engines_of(b)->v[e]))
			take_back_half_made(&engines_of(b)->v[e], NULL);
}

static void recover_check(struct container *c)
{
	struct nerr err = { 0 };
	int r;

	if (!c->id) {
		/* never made (a record from before the engine answered), or
		 * gone from the engine and already EXITED with the reason,
		 * which stays until destroyed */
		if (cstate_making(c->state)) {
			take_back_half_made(c->eng, c->name);
			container_forget(c, NULL);
		} else if (c->state == C_EXITED) {
			/* the record of one container_mark_gone took: the reason
			 * is not in it, but no other way leaves EXITED without an id */
			bnode_set_error(c->node, "the engine container was removed outside nodefs");
		}
		return;
	}
	if (engine_ready(c->eng, &err) < 0) {
		bnode_set_error(c->node, err.msg);
		return;
	}
	r = container_refresh(c, false, NULL, &err);
	if (r == -ENOENT) {
		pthread_mutex_lock(&c->lock);
		free(c->id);
		c->id = NULL;
		c->pid = 0;
		pthread_mutex_unlock(&c->lock);
		bnode_set_error(c->node, "the engine no longer has this container");
		container_set_state(c, C_EXITED, NULL, "gone from the engine");
	}
	container_checkpoint(c, &err);
	/* a start its policy had due when nodefs stopped (one that died
	 * meanwhile was judged by the refresh above) */
	container_policy_recover(c);
	if (r >= 0 && container_state_of(c) == C_RUNNING)
		container_health_run(c);
}

int containers_recover(struct backend *b, struct nerr *err)
{
	struct bnode **v;
	size_t n;
	int r;

	r = store_load(b->store, "containers", recover_one, recover_bad, b);
	if (r < 0)
		return nerr_set(err, -r, "cannot read the container checkpoints: %s", strerror(-r));
	/* the engines' first probe has run (engines_start): check each */
	if (bnode_list(containers_dir(b), &v, &n) < 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		recover_check(cof(v[i]));
	bnode_list_free(v, n);
	take_back_cut_creates(b);
	/* after the forgotten records: their sandboxes are no one's too */
	containers_sandbox_reclaim(b);
	return 0;
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
	bool is_create = false;

	if (strncmp(op->object, "containers/", 11) != 0)
		return -EINVAL;
	n = bnode_lookup(containers_dir(b), op->object + 11);
	if (!n)
		return -ENOENT;
	c = cof(n);
	if (ctl_parse(op->command, strlen(op->command), &cmd, NULL) >= 0) {
		const char *w = cmd.argv[0];
		bool running;

		pthread_mutex_lock(&c->lock);
		running = c->state == C_RUNNING || c->state == C_PAUSED;
		pthread_mutex_unlock(&c->lock);
		is_create = strcmp(w, "create") == 0;
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
	/* a create cut in its fetch stage goes on with it (a run's start
	 * runs what is not done anyway) */
	x->then_fetch = kind == CA_SYNC && is_create && container_fetch_pending(c);
	x->timeout_s = -1;	/* the runtime's stop_timeout */
	x->a.b = b;
	x->a.op = op;
	bnode_ref(op->node);	/* the action's reference, dropped when it ends */
	x->a.run = container_run_action;
	x->a.free = cact_free;
	op->claimed = true;
	events_emit(b->events, "operation", op->id, "PENDING", "PENDING", op->id,
		    "resumed after a restart");
	actq_submit(&c->q, &x->a);
	return 0;
}
