/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_docker_json: every parser of engine replies in the Docker driver
 * (runtimes/docker/docker-json.c): container inspect, exec inspect, /events
 * objects, container lists, /version, pull progress lines, error bodies, ids,
 * timestamps, version negotiation, and the cgroup texts stats reads
 * (/proc/PID/cgroup, cpu accounting, number files). The first byte picks the parser, the
 * rest is the body. Aborts when an output contract breaks (a parsed id that
 * does not fit, a message with a newline, a listing without its mark);
 * sanitizers catch the rest.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "docker-internal.h"
#include "nerr.h"

static void one_line(const char *s)
{
	if (strchr(s, '\n') || strchr(s, '\r'))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nerr err = { 0 };
	const char *body;
	char *copy;
	size_t len;

	if (size < 1)
		return 0;
	len = size - 1;
	/* the parsers take (pointer, length); a NUL-terminated copy serves the
	 * string ones */
	copy = malloc(len + 1);
	if (!copy)
		return 0;
	memcpy(copy, data + 1, len);
	copy[len] = '\0';
	body = copy;

	switch (data[0] % 13) {
	case 0: {
		struct rt_status st;

		if (docker_json_parse_inspect(body, len, &st, &err) == 0) {
			if (st.pid < 0 || st.state > RT_STATE_GONE)
				abort();
			if (st.pid && st.state != RT_STATE_RUNNING && st.state != RT_STATE_PAUSED)
				abort();
			/* the engine's check: one of its three words, or none */
			if (st.health_status[0] && strcmp(st.health_status, "starting") != 0 &&
			    strcmp(st.health_status, "healthy") != 0 &&
			    strcmp(st.health_status, "unhealthy") != 0)
				abort();
		} else if (err.code != EBADMSG) {
			abort();
		}
		break;
	}
	case 1: {
		struct rt_event ev;
		char id[80];
		int r = docker_json_parse_event(body, len, &ev, id, sizeof(id));

		if (r == 1 && (ev.id != id || strlen(id) >= sizeof(id) || !id[0] ||
			       ev.kind > RT_EV_HEALTH))
			abort();
		/* a health event: Docker's word, or none (Podman's: look again) */
		if (r == 1 && ev.health && (ev.kind != RT_EV_HEALTH ||
					    (strcmp(ev.health, "starting") != 0 &&
					     strcmp(ev.health, "healthy") != 0 &&
					     strcmp(ev.health, "unhealthy") != 0)))
			abort();
		if (r != 1 && r != 0 && r != -EBADMSG)
			abort();
		break;
	}
	case 2: {
		struct rt_listing *l = NULL;
		size_t n = 0;

		if (docker_json_parse_list(body, len, &l, &n, &err) == 0) {
			for (size_t i = 0; i < n; i++)
				if (!l[i].id || !l[i].name)
					abort();
			for (size_t i = 0; i < n; i++) {
				free(l[i].id);
				free(l[i].name);
			}
			free(l);
		}
		break;
	}
	case 3: {
		char api[16], min[16], neg[16];

		/* Podman's marks, read from the same replies (any answer) */
		{
			char papi[16];
			bool podman = false;
			int pr = docker_ping_header(body, len, papi, sizeof(papi), &podman);

			if (pr < -EBADMSG || pr > 1 || (pr == 1 && strlen(papi) >= sizeof(papi)))
				abort();
		}
		if (docker_json_podman_cause(body, len, DOCKER_CALL_CREATE) < 0)
			abort();
		if (docker_json_parse_version(body, len, api, min, sizeof(api), &err) == 0 &&
		    docker_version_negotiate(api, min, neg, sizeof(neg)) == 0) {
			unsigned ma, mi;

			if (docker_version_parse(neg, &ma, &mi) < 0)
				abort();
		}
		break;
	}
	case 4: {
		int code;
		bool running;

		docker_json_parse_exec_inspect(body, len, &code, &running, &err);
		break;
	}
	case 5: {
		char buf[128] = "";	/* untouched on -EBADMSG */

		docker_json_parse_pull_line(body, len, buf, sizeof(buf));
		if (strlen(buf) >= sizeof(buf))
			abort();
		one_line(buf);
		break;
	}
	case 6: {
		char buf[64];

		docker_json_error_message(body, len, buf, sizeof(buf));
		one_line(buf);
		break;
	}
	case 7: {
		char *id = NULL;

		if (docker_json_parse_id(body, len, &id, &err) == 0) {
			if (!id || !id[0])
				abort();
			free(id);
		}
		break;
	}
	case 8: {
		time_t t;

		docker_time_parse(body, &t);
		break;
	}
	case 9: {
		char repo[256], tag[128];

		if (docker_image_split(body, repo, sizeof(repo), tag, sizeof(tag)) == 0 &&
		    (!repo[0] || strlen(repo) > strlen(body)))
			abort();
		break;
	}
	case 10: {
		char cpu[64], mem[64], pids[64];
		bool v2 = len && body[0] == '0';

		if (docker_cg_dirs_from_proc(body, v2, "/sys/fs/cgroup", cpu, mem, pids, sizeof(cpu)) == 0 &&
		    (strncmp(cpu, "/sys/fs/cgroup", 14) != 0 || strlen(mem) >= sizeof(mem) ||
		     strlen(pids) >= sizeof(pids)))
			abort();
		break;
	}
	case 11: {
		double u, s;
		uint64_t v;

		docker_cg_parse_cpu(body, len & 1, 100, &u, &s);
		if (u < 0 || s < 0)
			abort();
		docker_cg_parse_u64(body, &v);
		break;
	}
	case 12: {
		char **src = NULL;

		if (docker_json_parse_bind_sources(body, len, &src, &err) == 0) {
			for (size_t i = 0; src && src[i]; i++) {
				if (src[i][0] != '/' || strchr(src[i], ':'))
					abort();
				free(src[i]);
			}
			free(src);
		} else if (err.code != EBADMSG && err.code != ENOMEM) {
			abort();
		}
		break;
	}
	}
	if (err.code)
		one_line(err.msg);
	free(copy);
	return 0;
}
