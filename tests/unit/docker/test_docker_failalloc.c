/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Failing-allocation runs of the Docker driver's JSON layer: every body it
 * builds and every reply it parses is run with its 1st, 2nd, ... allocation
 * failing (ours through --wrap, jansson's through json_set_alloc_funcs), until
 * a run needs no failure. Each run must free everything it took, and either
 * fail cleanly or give exactly what a run without failures gives: a body
 * builder -ENOMEM ("out of memory" in its nerr), a parser -ENOMEM or, when
 * the failure hit inside jansson's lexer (which reports some of its own
 * allocation failures as parse errors), -EBADMSG. The bodies are written
 * with common/jw, whose buffer's allocation failures stick.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "docker-internal.h"
#include "failalloc.h"
#include "nerr.h"

/* run fn(ctx) with allocation n failing, for n = 1, 2, ... */
typedef int (*op_fn)(void *ctx, struct nerr *err, void **ret);

static void run(const char *what, op_fn fn, void *ctx, void (*release)(void *), bool is_body)
{
	struct nerr e0 = { 0 };
	void *ref = NULL;

	json_set_alloc_funcs(malloc, free);	/* jansson's go through the wrap */
	cr_assert_geq(fn(ctx, &e0, &ref), 0, "%s: %s", what, e0.msg);
	if (!is_body && ref && release) {	/* only bodies are compared */
		release(ref);
		ref = NULL;
	}
	for (unsigned long n = 1;; n++) {
		struct nerr err = { 0 };
		void *res = NULL;
		bool fired;
		long live;
		int r;

		failalloc_arm(n);
		r = fn(ctx, &err, &res);
		fired = failalloc_fired();
		failalloc_hold();
		if (is_body && r >= 0)
			cr_assert_str_eq(res, ref, "%s: allocation %lu failing changed the body to %s",
					 what, n, (char *)res);
		if (r >= 0 && res && release)
			release(res);
		live = failalloc_live();
		failalloc_disarm();
		cr_assert_eq(live, 0, "%s: allocation %lu failing: %ld blocks leaked", what, n, live);
		if (!fired) {
			cr_assert_geq(r, 0, "%s: %d with no failure injected", what, r);
			break;
		}
		if (is_body)
			cr_assert(r >= 0 || r == -ENOMEM, "%s: allocation %lu failing gave %d (%s)",
				  what, n, r, err.msg);
		else
			cr_assert(r >= 0 || r == -ENOMEM || r == -EBADMSG,
				  "%s: allocation %lu failing gave %d (%s)", what, n, r, err.msg);
		if (r == -ENOMEM && err.code)
			cr_assert_str_eq(err.msg, "out of memory", "%s", what);
		if (r < 0 && err.code)
			cr_assert_eq(err.code, -r, "%s: nerr %d for %d", what, err.code, r);
		cr_assert_lt(n, 10000, "%s never finished", what);
	}
	if (ref && release)
		release(ref);
}

static void free_str(void *p)
{
	free(p);
}

static int op_create(void *ctx, struct nerr *err, void **ret)
{
	static char *argv[] = { "sh", "-c", "sleep 1000", NULL };
	static struct rt_kv env[] = { { "MODE", "test" }, { "B", "2" } };
	static struct rt_mount m[] = { { "/srv/a", "/a", true }, { "/srv/b", "/b", false } };
	struct rt_spec spec = { .name = "web", .image = "nodefs-test/busybox", .argv = argv,
				.env = env, .nenv = 2, .cpus = 0.5, .memory = 64u << 20,
				.pids = 10, .mounts = m, .nmounts = 2 };

	return docker_json_create_body(&spec, (char **)ret, err);
}

static int op_update(void *ctx, struct nerr *err, void **ret)
{
	struct rt_limits lim = { .cpus = 1, .memory = 1u << 27, .pids = 5,
				 .set = RT_LIMIT_CPUS | RT_LIMIT_MEMORY | RT_LIMIT_PIDS };

	return docker_json_update_body(&lim, (char **)ret, err);
}

static int op_libpod_update(void *ctx, struct nerr *err, void **ret)
{
	struct rt_limits lim = { .cpus = 1, .memory = 1u << 27, .pids = 5,
				 .set = RT_LIMIT_CPUS | RT_LIMIT_MEMORY | RT_LIMIT_PIDS };

	return docker_json_libpod_update_body(&lim, (char **)ret, err);
}

static int op_exec(void *ctx, struct nerr *err, void **ret)
{
	static char *argv[] = { "printenv", "MODE", NULL };

	return docker_json_exec_body(argv, (char **)ret, err);
}

static const char inspect_body[] =
	"{\"Id\":\"abc\",\"Name\":\"/nodefs-web\",\"State\":{\"Status\":\"exited\",\"OOMKilled\":true,"
	"\"Pid\":0,\"ExitCode\":137,\"StartedAt\":\"2026-11-29T17:44:36Z\","
	"\"FinishedAt\":\"2026-11-29T17:44:40.5Z\"},\"Config\":{\"Labels\":{\"a\":\"b\"}}}";

static int op_inspect(void *ctx, struct nerr *err, void **ret)
{
	struct rt_status st;

	return docker_json_parse_inspect(inspect_body, strlen(inspect_body), &st, err);
}

static const char list_body[] =
	"[{\"Id\":\"aaa\",\"State\":\"running\",\"Labels\":{\"io.nodefs.managed\":\"1\",\"io.nodefs.name\":\"web\"}},"
	"{\"Id\":\"bbb\",\"State\":\"exited\",\"Status\":\"Exited (1) 2 s ago\","
	"\"Labels\":{\"io.nodefs.managed\":\"1\",\"io.nodefs.name\":\"db\"}}]";

struct listing_res {
	struct rt_listing *l;
	size_t n;
};

static int op_list(void *ctx, struct nerr *err, void **ret)
{
	static struct listing_res res;
	int r = docker_json_parse_list(list_body, strlen(list_body), &res.l, &res.n, err);

	if (r >= 0)
		*ret = &res;
	return r;
}

static void free_listing(void *p)
{
	struct listing_res *res = p;

	for (size_t i = 0; i < res->n; i++) {
		free(res->l[i].id);
		free(res->l[i].name);
	}
	free(res->l);
}

static int op_event(void *ctx, struct nerr *err, void **ret)
{
	static const char line[] =
		"{\"Type\":\"container\",\"Action\":\"die\",\"Actor\":{\"ID\":\"c0ffee\","
		"\"Attributes\":{\"exitCode\":\"137\",\"io.nodefs.managed\":\"1\"}},\"time\":5}";
	struct rt_event ev;
	char id[80];
	int r = docker_json_parse_event(line, strlen(line), &ev, id, sizeof(id));

	return r == 1 ? 0 : r;
}

static int op_version(void *ctx, struct nerr *err, void **ret)
{
	static const char body[] = "{\"Version\":\"20.10\",\"ApiVersion\":\"1.41\",\"MinAPIVersion\":\"1.12\"}";
	char api[16], min[16];

	return docker_json_parse_version(body, strlen(body), api, min, sizeof(api), err);
}

static int op_id(void *ctx, struct nerr *err, void **ret)
{
	static const char body[] = "{\"Id\":\"deadbeef\",\"Warnings\":[]}";

	return docker_json_parse_id(body, strlen(body), (char **)ret, err);
}

static int op_exec_inspect(void *ctx, struct nerr *err, void **ret)
{
	static const char body[] = "{\"ID\":\"e\",\"Running\":false,\"ExitCode\":3}";
	bool running;
	int code;

	return docker_json_parse_exec_inspect(body, strlen(body), &code, &running, err);
}

static int op_pull(void *ctx, struct nerr *err, void **ret)
{
	static const char line[] = "{\"status\":\"Downloading\",\"progress\":\"[=> ]\",\"id\":\"abc\"}";
	char buf[128];

	return docker_json_parse_pull_line(line, strlen(line), buf, sizeof(buf));
}

static int op_tail(void *ctx, struct nerr *err, void **ret)
{
	static struct docker_tail t;
	int r = docker_tail_init(&t, 64);

	if (r == 0)
		docker_tail_free(&t);
	return r;
}

Test(failalloc, bodies)
{
	run("create body", op_create, NULL, free_str, true);
	run("update body", op_update, NULL, free_str, true);
	run("libpod update body", op_libpod_update, NULL, free_str, true);
	run("exec body", op_exec, NULL, free_str, true);
}

Test(failalloc, replies)
{
	run("inspect", op_inspect, NULL, NULL, false);
	run("list", op_list, NULL, free_listing, false);
	run("event", op_event, NULL, NULL, false);
	run("version", op_version, NULL, NULL, false);
	run("id", op_id, NULL, free_str, false);
	run("exec inspect", op_exec_inspect, NULL, NULL, false);
	run("pull line", op_pull, NULL, NULL, false);
	run("tail", op_tail, NULL, NULL, false);
}
