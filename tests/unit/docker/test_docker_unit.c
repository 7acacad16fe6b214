/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of docker-internal.h: the HTTP status and curl tables, API
 * version negotiation, timestamps, every JSON body built or parsed, image
 * references, and the multiplexed log/exec stream decoder with its tail
 * sink. Bodies are shaped as Docker 20.10 (API 1.41) sends them; the
 * podman suite's as Podman 4.3's Engine API does.
 */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "docker-internal.h"
#include "nerr.h"
#include "sbuf.h"

Test(status, table)
{
	cr_assert_eq(docker_status_to_errno(200, DOCKER_CALL_OTHER), 0);
	cr_assert_eq(docker_status_to_errno(201, DOCKER_CALL_CREATE), 0);
	cr_assert_eq(docker_status_to_errno(204, DOCKER_CALL_STARTSTOP), 0);
	cr_assert_eq(docker_status_to_errno(304, DOCKER_CALL_STARTSTOP), 0);
	cr_assert_eq(docker_status_to_errno(304, DOCKER_CALL_OTHER), EBUSY);
	cr_assert_eq(docker_status_to_errno(400, DOCKER_CALL_CREATE), EINVAL);
	cr_assert_eq(docker_status_to_errno(401, DOCKER_CALL_OTHER), EACCES);
	cr_assert_eq(docker_status_to_errno(403, DOCKER_CALL_OTHER), EACCES);
	cr_assert_eq(docker_status_to_errno(404, DOCKER_CALL_OTHER), ENOENT);
	cr_assert_eq(docker_status_to_errno(404, DOCKER_CALL_CREATE), ENOENT);
	cr_assert_eq(docker_status_to_errno(409, DOCKER_CALL_CREATE), EEXIST);
	cr_assert_eq(docker_status_to_errno(409, DOCKER_CALL_OTHER), EBUSY);
	cr_assert_eq(docker_status_to_errno(409, DOCKER_CALL_STARTSTOP), EBUSY);
	cr_assert_eq(docker_status_to_errno(500, DOCKER_CALL_OTHER), EIO);
	cr_assert_eq(docker_status_to_errno(501, DOCKER_CALL_OTHER), EOPNOTSUPP);
	cr_assert_eq(docker_status_to_errno(503, DOCKER_CALL_OTHER), EIO);
	cr_assert_eq(docker_status_to_errno(0, DOCKER_CALL_OTHER), EIO);
	cr_assert_eq(docker_status_to_errno(101, DOCKER_CALL_OTHER), EIO);
}

Test(status, curl_codes)
{
	/* docker-json.c copies these values to stay free of curl.h */
	cr_assert_eq(docker_curl_to_errno(CURLE_OK), 0);
	cr_assert_eq(docker_curl_to_errno(CURLE_COULDNT_CONNECT), EHOSTDOWN);
	cr_assert_eq(docker_curl_to_errno(CURLE_COULDNT_RESOLVE_HOST), EHOSTDOWN);
	cr_assert_eq(docker_curl_to_errno(CURLE_GOT_NOTHING), EHOSTDOWN);
	cr_assert_eq(docker_curl_to_errno(CURLE_SEND_ERROR), EHOSTDOWN);
	cr_assert_eq(docker_curl_to_errno(CURLE_RECV_ERROR), EHOSTDOWN);
	cr_assert_eq(docker_curl_to_errno(CURLE_OPERATION_TIMEDOUT), ETIMEDOUT);
	cr_assert_eq(docker_curl_to_errno(CURLE_ABORTED_BY_CALLBACK), ECANCELED);
	cr_assert_eq(docker_curl_to_errno(CURLE_WRITE_ERROR), E2BIG);
	cr_assert_eq(docker_curl_to_errno(CURLE_OUT_OF_MEMORY), ENOMEM);
	cr_assert_eq(docker_curl_to_errno(CURLE_PARTIAL_FILE), EIO);
	cr_assert_eq(docker_curl_to_errno(CURLE_UNSUPPORTED_PROTOCOL), EIO);
}

Test(version, parse)
{
	unsigned ma, mi;

	cr_assert_eq(docker_version_parse("1.41", &ma, &mi), 0);
	cr_assert_eq(ma, 1);
	cr_assert_eq(mi, 41);
	cr_assert_eq(docker_version_parse("2.0", &ma, &mi), 0);
	cr_assert_eq(docker_version_parse("1", &ma, &mi), -EINVAL);
	cr_assert_eq(docker_version_parse("1.", &ma, &mi), -EINVAL);
	cr_assert_eq(docker_version_parse("v1.41", &ma, &mi), -EINVAL);
	cr_assert_eq(docker_version_parse("1.41.2", &ma, &mi), -EINVAL);
	cr_assert_eq(docker_version_parse("", &ma, &mi), -EINVAL);
	cr_assert_eq(docker_version_parse(NULL, &ma, &mi), -EINVAL);
	cr_assert_eq(docker_version_parse("1.99999999999999999999", &ma, &mi), -EINVAL);
}

Test(version, negotiate)
{
	char v[16];

	/* Debian 12's engine: speak its version */
	cr_assert_eq(docker_version_negotiate("1.41", "1.12", v, sizeof(v)), 0);
	cr_assert_str_eq(v, "1.41");
	/* a current engine (29: 1.52, minimum 1.44): our newest */
	cr_assert_eq(docker_version_negotiate("1.52", "1.44", v, sizeof(v)), 0);
	cr_assert_str_eq(v, "1.47");
	/* never below the server's minimum */
	cr_assert_eq(docker_version_negotiate("1.60", "1.50", v, sizeof(v)), 0);
	cr_assert_str_eq(v, "1.50");
	/* minimum unknown (from /_ping) */
	cr_assert_eq(docker_version_negotiate("1.43", NULL, v, sizeof(v)), 0);
	cr_assert_str_eq(v, "1.43");
	cr_assert_eq(docker_version_negotiate("1.43", "", v, sizeof(v)), 0);
	cr_assert_str_eq(v, "1.43");
	/* numeric, not lexical: 1.9 < 1.40 */
	cr_assert_eq(docker_version_negotiate("1.9", NULL, v, sizeof(v)), -EPROTONOSUPPORT);
	cr_assert_eq(docker_version_negotiate("1.39", "1.12", v, sizeof(v)), -EPROTONOSUPPORT);
	cr_assert_eq(docker_version_negotiate("junk", "1.12", v, sizeof(v)), -EINVAL);
	cr_assert_eq(docker_version_negotiate("1.41", "x", v, sizeof(v)), -EINVAL);
	cr_assert_eq(docker_version_negotiate("1.41", "1.12", v, 3), -EINVAL);
	cr_assert_eq(docker_version_negotiate("2.1", "1.24", v, sizeof(v)), 0);
	cr_assert_str_eq(v, "1.47");
}

Test(version, parse_reply)
{
	static const char body[] =
		"{\"Platform\":{\"Name\":\"\"},\"Version\":\"20.10.24+dfsg1\",\"ApiVersion\":\"1.41\","
		"\"MinAPIVersion\":\"1.12\",\"GitCommit\":\"5d6db84\",\"Os\":\"linux\"}";
	char api[16], min[16];
	struct nerr err = { 0 };

	cr_assert_eq(docker_json_parse_version(body, strlen(body), api, min, 16, &err), 0);
	cr_assert_str_eq(api, "1.41");
	cr_assert_str_eq(min, "1.12");
	cr_assert_eq(docker_json_parse_version("{}", 2, api, min, 16, &err), -EBADMSG);
	cr_assert_eq(err.code, EBADMSG);
}

Test(time, parse)
{
	time_t t;

	cr_assert_eq(docker_time_parse("2026-11-29T17:44:36.556182322Z", &t), 0);
	cr_assert_eq(t, 1795974276);
	cr_assert_eq(docker_time_parse("2026-11-29T17:44:36Z", &t), 0);
	cr_assert_eq(t, 1795974276);
	cr_assert_eq(docker_time_parse("2026-11-29T18:44:36.1+01:00", &t), 0);
	cr_assert_eq(t, 1795974276);
	cr_assert_eq(docker_time_parse("0001-01-01T00:00:00Z", &t), 0);
	cr_assert_eq(t, 0);
	cr_assert_eq(docker_time_parse("1970-01-01T00:00:00Z", &t), 0);
	cr_assert_eq(t, 0);
	cr_assert_eq(docker_time_parse("2026-11-29", &t), -EINVAL);
	cr_assert_eq(docker_time_parse("2026-13-29T17:44:36Z", &t), -EINVAL);
	cr_assert_eq(docker_time_parse("2026-11-29T17:44:36.Z", &t), -EINVAL);
	cr_assert_eq(docker_time_parse("2026-11-29T17:44:36", &t), -EINVAL);
	cr_assert_eq(docker_time_parse("2026-11-29T17:44:36Zjunk", &t), -EINVAL);
	cr_assert_eq(docker_time_parse("", &t), -EINVAL);
	cr_assert_eq(docker_time_parse(NULL, &t), -EINVAL);
}

Test(json, create_body)
{
	char *argv[] = { "sleep", "1000", NULL };
	struct rt_kv env[] = { { "MODE", "test" }, { "EMPTY", "" } };
	struct rt_mount mounts[] = { { "/srv/data", "/data", true }, { "/mnt/x", "/x", false } };
	struct rt_spec spec = { .name = "web", .image = "nodefs-test/busybox", .argv = argv,
				.env = env, .nenv = 2, .cpus = 0.5, .memory = 64u << 20,
				.pids = 100, .mounts = mounts, .nmounts = 2 };
	struct nerr err = { 0 };
	char *body = NULL;
	json_error_t je;

	cr_assert_eq(docker_json_create_body(&spec, &body, &err), 0, "%s", err.msg);
	json_t *o = json_loads(body, 0, &je);
	cr_assert_not_null(o);
	json_t *hc = json_object_get(o, "HostConfig");
	cr_assert_str_eq(json_string_value(json_object_get(o, "Image")), "nodefs-test/busybox");
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(o, "Cmd"), 1)), "1000");
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(o, "Env"), 0)), "MODE=test");
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(o, "Env"), 1)), "EMPTY=");
	json_t *labels = json_object_get(o, "Labels");
	cr_assert_str_eq(json_string_value(json_object_get(labels, RT_OWNER_LABEL)), "1");
	cr_assert_str_eq(json_string_value(json_object_get(labels, RT_NAME_LABEL)), "web");
	cr_assert_eq(json_integer_value(json_object_get(hc, "Memory")), 64 << 20);
	cr_assert_eq(json_integer_value(json_object_get(hc, "MemorySwap")), 64 << 20);
	cr_assert_eq(json_integer_value(json_object_get(hc, "NanoCpus")), 500000000);
	cr_assert_eq(json_integer_value(json_object_get(hc, "PidsLimit")), 100);
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(hc, "Binds"), 0)),
			 "/srv/data:/data:ro");
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(hc, "Binds"), 1)),
			 "/mnt/x:/x");
	json_decref(o);
	free(body);

	/* unset values are not sent: the image's defaults apply */
	struct rt_spec bare = { .name = "b", .image = "img" };
	cr_assert_eq(docker_json_create_body(&bare, &body, &err), 0);
	o = json_loads(body, 0, &je);
	cr_assert_null(json_object_get(o, "Cmd"));
	cr_assert_null(json_object_get(o, "Env"));
	cr_assert_eq(json_object_size(json_object_get(o, "HostConfig")), 0);
	json_decref(o);
	free(body);
}

/* The body's exact text, as the engine has always been sent it (jansson's
 * compact dump before the bodies moved to common/jw): member order,
 * separators and every escape. */
Test(json, create_body_text)
{
	char *argv[] = { "sh", "-c", "echo \"q\\\\\" \t\x01 \xc3\xa9 \xe2\x82\xac", NULL };
	struct rt_kv env[] = { { "MODE", "test" }, { "EMPTY", "" }, { "U", "\xc3\xbcn\xc3\xaf\n" } };
	struct rt_mount mounts[] = { { "/srv/data", "/data", true }, { "/mnt/x", "/x", false },
				     { "/r", "/r", false, true }, { "/q", "/q", true, true } };
	struct rt_spec spec = { .name = "web", .image = "nodefs-test/busybox", .argv = argv,
				.env = env, .nenv = 3, .cpus = 0.5, .memory = 64u << 20,
				.pids = 100, .mounts = mounts, .nmounts = 4 };
	struct rt_spec plugin = { .name = "loc", .image = "img", .role = "plugin", .instance = "ab12",
				  .may_mount = true, .privileged = true, .mounts = mounts,
				  .nmounts = 2, .cpus = 1e6, .memory = 1 };
	struct nerr err = { 0 };
	char *body = NULL;

	cr_assert_eq(docker_json_create_body(&spec, &body, &err), 0, "%s", err.msg);
	cr_assert_str_eq(body,
		"{\"HostConfig\":{\"Memory\":67108864,\"MemorySwap\":67108864,\"NanoCpus\":500000000,"
		"\"PidsLimit\":100,\"Binds\":[\"/srv/data:/data:ro\",\"/mnt/x:/x\",\"/r:/r:rw,rshared\","
		"\"/q:/q:ro,rshared\"]},\"Labels\":{\"io.nodefs.managed\":\"1\",\"io.nodefs.name\":\"web\"},"
		"\"Image\":\"nodefs-test/busybox\",\"Cmd\":[\"sh\",\"-c\","
		"\"echo \\\"q\\\\\\\\\\\" \\t\\u0001 \xc3\xa9 \xe2\x82\xac\"],"
		"\"Env\":[\"MODE=test\",\"EMPTY=\",\"U=\xc3\xbcn\xc3\xaf\\n\"]}");
	free(body);
	cr_assert_eq(docker_json_create_body(&plugin, &body, &err), 0, "%s", err.msg);
	cr_assert_str_eq(body,
		"{\"HostConfig\":{\"Privileged\":true,\"CapAdd\":[\"SYS_ADMIN\"],"
		"\"SecurityOpt\":[\"seccomp=unconfined\",\"apparmor=unconfined\"],\"Memory\":1,"
		"\"MemorySwap\":1,\"NanoCpus\":1000000000000000,\"Binds\":[\"/srv/data:/data:ro\","
		"\"/mnt/x:/x\"]},\"Labels\":{\"io.nodefs.managed\":\"1\",\"io.nodefs.name\":\"loc\","
		"\"io.nodefs.instance\":\"ab12\",\"io.nodefs.role\":\"plugin\"},\"Image\":\"img\"}");
	free(body);
}

/* A body past DOCKER_BODY_CAP is refused whole, as too big, not as out of
 * memory. */
Test(json, create_body_over_the_cap)
{
	struct rt_kv env[] = { { "BIG", NULL } };
	struct rt_spec spec = { .name = "big", .image = "img", .env = env, .nenv = 1 };
	struct nerr err = { 0 };
	char *body = NULL, *big = malloc(DOCKER_BODY_CAP + 1);

	cr_assert_not_null(big);
	memset(big, 'x', DOCKER_BODY_CAP);
	big[DOCKER_BODY_CAP] = '\0';
	env[0].val = big;
	cr_assert_eq(docker_json_create_body(&spec, &body, &err), -E2BIG);
	cr_assert_eq(err.code, E2BIG);
	cr_assert(strstr(err.msg, "over"), "%s", err.msg);
	cr_assert_null(body);
	free(big);
}

/* A plugin nodefs runs: its role label, the right to mount, rshared binds. */
Test(json, create_body_plugin)
{
	struct rt_mount mounts[] = { { "/run/csi", "/run/csi", false, false },
				     { "/srv", "/srv", false, true }, { "/ro", "/ro", true, true } };
	struct rt_spec spec = { .name = "loc", .image = "img", .role = "plugin", .instance = "ab12",
				.may_mount = true, .mounts = mounts, .nmounts = 3 };
	struct nerr err = { 0 };
	char *body = NULL;
	json_error_t je;

	cr_assert_eq(docker_json_create_body(&spec, &body, &err), 0, "%s", err.msg);
	json_t *o = json_loads(body, 0, &je), *hc = json_object_get(o, "HostConfig");
	json_t *labels = json_object_get(o, "Labels"), *binds = json_object_get(hc, "Binds");
	cr_assert_str_eq(json_string_value(json_object_get(labels, RT_ROLE_LABEL)), "plugin");
	cr_assert_str_eq(json_string_value(json_object_get(labels, RT_INSTANCE_LABEL)), "ab12");
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(hc, "CapAdd"), 0)),
			 "SYS_ADMIN");
	cr_assert_eq(json_array_size(json_object_get(hc, "SecurityOpt")), 2);
	cr_assert_null(json_object_get(hc, "Privileged"), "only when asked");
	cr_assert_str_eq(json_string_value(json_array_get(binds, 0)), "/run/csi:/run/csi");
	cr_assert_str_eq(json_string_value(json_array_get(binds, 1)), "/srv:/srv:rw,rshared");
	cr_assert_str_eq(json_string_value(json_array_get(binds, 2)), "/ro:/ro:ro,rshared");
	json_decref(o);
	free(body);
	spec.privileged = true;
	cr_assert_eq(docker_json_create_body(&spec, &body, &err), 0, "%s", err.msg);
	o = json_loads(body, 0, &je);
	cr_assert(json_is_true(json_object_get(json_object_get(o, "HostConfig"), "Privileged")));
	json_decref(o);
	free(body);
}

Test(json, create_body_rejects)
{
	struct rt_kv badenv[] = { { "A=B", "x" } };
	struct rt_mount colon[] = { { "/a:b", "/x", false } };
	struct rt_mount rel[] = { { "a", "/x", false } };
	struct rt_spec specs[] = {
		{ .name = "x" },					/* no image */
		{ .name = "x", .image = "" },
		{ .image = "img" },					/* no name */
		{ .name = "x", .image = "img", .env = badenv, .nenv = 1 },
		{ .name = "x", .image = "img", .mounts = colon, .nmounts = 1 },
		{ .name = "x", .image = "img", .mounts = rel, .nmounts = 1 },
		{ .name = "x", .image = "img", .cpus = -1 },
		{ .name = "x", .image = "img", .cpus = 0.0 / 0.0 },
		{ .name = "x", .image = "img", .pids = -5 },
		{ .name = "x", .image = "img", .memory = UINT64_MAX },
		{ .name = "x", .image = "\xff\xfe" },			/* not UTF-8 */
	};
	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		struct nerr err = { 0 };
		char *body = NULL;

		cr_assert_eq(docker_json_create_body(&specs[i], &body, &err), -EINVAL, "spec %zu", i);
		cr_assert_eq(err.code, EINVAL, "spec %zu", i);
		cr_assert(err.msg[0], "spec %zu has no message", i);
		cr_assert_null(body);
	}
}

Test(json, update_and_exec_bodies)
{
	struct rt_limits lim = { .memory = 128u << 20, .cpus = 1, .set = RT_LIMIT_MEMORY | RT_LIMIT_CPUS };
	struct nerr err = { 0 };
	char *body = NULL;

	cr_assert_eq(docker_json_update_body(&lim, &body, &err), 0);
	cr_assert_str_eq(body, "{\"Memory\":134217728,\"MemorySwap\":134217728,\"NanoCpus\":1000000000}");
	free(body);
	lim = (struct rt_limits){ .pids = 0, .set = RT_LIMIT_PIDS };
	cr_assert_eq(docker_json_update_body(&lim, &body, &err), 0);
	cr_assert_str_eq(body, "{\"PidsLimit\":-1}");
	free(body);
	lim = (struct rt_limits){ .memory = 0, .set = RT_LIMIT_MEMORY };
	cr_assert_eq(docker_json_update_body(&lim, &body, &err), 0);
	cr_assert_str_eq(body, "{\"Memory\":0,\"MemorySwap\":-1}");
	free(body);
	lim = (struct rt_limits){ .set = 0 };
	cr_assert_eq(docker_json_update_body(&lim, &body, &err), -EINVAL);
	lim = (struct rt_limits){ .cpus = -2, .set = RT_LIMIT_CPUS };
	cr_assert_eq(docker_json_update_body(&lim, &body, &err), -EINVAL);

	char *argv[] = { "printenv", "MODE", NULL };
	cr_assert_eq(docker_json_exec_body(argv, &body, &err), 0);
	cr_assert_str_eq(body, "{\"Cmd\":[\"printenv\",\"MODE\"],\"AttachStdout\":true,"
			       "\"AttachStderr\":true,\"AttachStdin\":false,\"Tty\":false}");
	free(body);
	char *empty[] = { NULL };
	cr_assert_eq(docker_json_exec_body(empty, &body, &err), -EINVAL);
	cr_assert_eq(docker_json_exec_body(NULL, &body, &err), -EINVAL);
}

/* Podman 4.3's own update (its Engine API has none): an OCI
 * LinuxResources object, -1 for unlimited */
Test(podman, libpod_update_body)
{
	struct rt_limits lim = { .memory = 128u << 20, .cpus = 1, .pids = 7,
				 .set = RT_LIMIT_MEMORY | RT_LIMIT_CPUS | RT_LIMIT_PIDS };
	struct nerr err = { 0 };
	char *body = NULL;

	cr_assert_eq(docker_json_libpod_update_body(&lim, &body, &err), 0);
	cr_assert_str_eq(body, "{\"memory\":{\"limit\":134217728,\"swap\":134217728},"
			       "\"cpu\":{\"quota\":100000,\"period\":100000},\"pids\":{\"limit\":7}}");
	free(body);
	lim = (struct rt_limits){ .cpus = 0.5, .set = RT_LIMIT_CPUS };
	cr_assert_eq(docker_json_libpod_update_body(&lim, &body, &err), 0);
	cr_assert_str_eq(body, "{\"cpu\":{\"quota\":50000,\"period\":100000}}");
	free(body);
	lim = (struct rt_limits){ .set = RT_LIMIT_MEMORY | RT_LIMIT_CPUS | RT_LIMIT_PIDS };
	cr_assert_eq(docker_json_libpod_update_body(&lim, &body, &err), 0);
	cr_assert_str_eq(body, "{\"memory\":{\"limit\":-1,\"swap\":-1},"
			       "\"cpu\":{\"quota\":-1,\"period\":100000},\"pids\":{\"limit\":-1}}");
	free(body);
	lim = (struct rt_limits){ .set = 0 };
	cr_assert_eq(docker_json_libpod_update_body(&lim, &body, &err), -EINVAL);
	lim = (struct rt_limits){ .cpus = -2, .set = RT_LIMIT_CPUS };
	cr_assert_eq(docker_json_libpod_update_body(&lim, &body, &err), -EINVAL);
	lim = (struct rt_limits){ .pids = -3, .set = RT_LIMIT_PIDS };
	cr_assert_eq(docker_json_libpod_update_body(&lim, &body, &err), -EINVAL);
	lim = (struct rt_limits){ .memory = UINT64_MAX, .set = RT_LIMIT_MEMORY };
	cr_assert_eq(docker_json_libpod_update_body(&lim, &body, &err), -EINVAL);
}

/* GET /_ping's headers, as curl hands them: Podman says it is by its
 * Libpod-Api-Version, and both engines give their API version */
Test(podman, ping_headers)
{
	char api[16] = "";
	bool podman = false;

	cr_assert_eq(docker_ping_header("HTTP/1.1 200 OK\r\n", 17, api, sizeof(api), &podman), 0);
	cr_assert_eq(docker_ping_header("Api-Version: 1.41\r\n", 19, api, sizeof(api), &podman), 1);
	cr_assert_str_eq(api, "1.41");
	cr_assert_not(podman);
	cr_assert_eq(docker_ping_header("Libpod-Api-Version: 4.3.1\r\n", 27, api, sizeof(api),
					&podman), 0);
	cr_assert(podman);
	cr_assert_str_eq(api, "1.41");
	cr_assert_eq(docker_ping_header("API-VERSION:1.52\n", 17, api, sizeof(api), &podman), 1);
	cr_assert_str_eq(api, "1.52");
	cr_assert_eq(docker_ping_header("Server: Libpod/4.3.1 (linux)\r\n", 30, api, sizeof(api),
					&podman), 0);
	cr_assert_eq(docker_ping_header("Api-Version: \r\n", 15, api, sizeof(api), &podman),
		     -EBADMSG);
	cr_assert_eq(docker_ping_header("Api-Version: 1.41; x\r\n", 22, api, sizeof(api), &podman),
		     -EBADMSG);
	cr_assert_eq(docker_ping_header("Api-Version: 1.4111111111111111\r\n", 33, api,
					sizeof(api), &podman), -EBADMSG);
	cr_assert_str_eq(api, "1.52");
	cr_assert_eq(docker_ping_header("Api-Version", 11, api, sizeof(api), &podman), 0);
	cr_assert_eq(docker_ping_header("", 0, api, sizeof(api), &podman), 0);
}

/* Podman's 500s where Docker has a status of its own, told by their
 * cause, as Podman 4.3 sends them */
Test(podman, causes)
{
	static const char paused[] =
		"{\"cause\":\"container state improper\",\"message\":\"\\\"6097697fe25b\\\" is "
		"already paused: container state improper\",\"response\":500}";
	static const char kill[] =
		"{\"cause\":\"container state improper\",\"message\":\"can only kill running "
		"containers. 6097697fe25b is in state exited: container state improper\","
		"\"response\":500}";
	static const char taken[] =
		"{\"cause\":\"that name is already in use\",\"message\":\"container create: "
		"creating container storage: the container name \\\"tn\\\" is already in use by "
		"6e2ed46cf33f. You have to remove that container to be able to reuse that name: "
		"that name is already in use\",\"response\":500}";
	static const char runc[] =
		"{\"cause\":\"`/usr/bin/runc update --resources=/tmp/p 6097697fe25b` failed: exit "
		"status 1\",\"message\":\"`/usr/bin/runc update` failed\",\"response\":500}";
	static const char docker[] = "{\"message\":\"Container 6097697fe25b is not paused\"}";
	char msg[256];

	cr_assert_eq(docker_json_podman_cause(paused, strlen(paused), DOCKER_CALL_OTHER), EBUSY);
	cr_assert_eq(docker_json_podman_cause(kill, strlen(kill), DOCKER_CALL_OTHER), EBUSY);
	cr_assert_eq(docker_json_podman_cause(kill, strlen(kill), DOCKER_CALL_STARTSTOP), EBUSY);
	docker_json_error_message(kill, strlen(kill), msg, sizeof(msg));
	cr_assert(strstr(msg, "can only kill running containers") == msg, "%s", msg);
	cr_assert_eq(docker_json_podman_cause(taken, strlen(taken), DOCKER_CALL_CREATE), EEXIST);
	cr_assert_eq(docker_json_podman_cause(taken, strlen(taken), DOCKER_CALL_OTHER), EBUSY);
	cr_assert_eq(docker_json_podman_cause(runc, strlen(runc), DOCKER_CALL_OTHER), 0);
	cr_assert_eq(docker_json_podman_cause(docker, strlen(docker), DOCKER_CALL_OTHER), 0);
	cr_assert_eq(docker_json_podman_cause("container state improper", 24, DOCKER_CALL_OTHER), 0);
	cr_assert_eq(docker_json_podman_cause("", 0, DOCKER_CALL_CREATE), 0);
}

/* A pull error: the engine's message ends with its cause, kept when the
 * whole is too long (Podman 4.3's for an unreachable registry, 182 bytes
 * after nodefs's 89, was cut at "connect: connectio") */
Test(podman, pull_error_keeps_its_end)
{
	static const char head[] =
		"image 127.0.0.1:1/nodefs/missing:latest not found locally and cannot be pulled: ";
	static const char podman[] =
		"initializing source docker://127.0.0.1:1/nodefs/missing:latest: pinging container "
		"registry 127.0.0.1:1: Get \"https://127.0.0.1:1/v2/\": dial tcp 127.0.0.1:1: connect: "
		"connection refused";
	char buf[256], small[16];

	docker_msg_join_tail(buf, sizeof(buf), head, podman);
	cr_assert_eq(strlen(buf), sizeof(buf) - 1);
	cr_assert(strncmp(buf, head, strlen(head)) == 0, "%s", buf);
	cr_assert(strstr(buf, "...") == buf + strlen(head), "%s", buf);
	cr_assert(strstr(buf, "dial tcp 127.0.0.1:1: connect: connection refused") != NULL, "%s", buf);
	docker_msg_join_tail(buf, sizeof(buf), head, "manifest unknown");
	cr_assert_eq(strlen(buf), strlen(head) + strlen("manifest unknown"));
	cr_assert(strstr(buf, "...") == NULL);
	docker_msg_join_tail(small, sizeof(small), "a long head beyond", "tail");
	cr_assert_str_eq(small, "a long head bey");
	docker_msg_join_tail(small, sizeof(small), "0123456789", "abcdefghij");
	cr_assert_str_eq(small, "0123456789...ij");
	docker_msg_join_tail(small, sizeof(small), "", "");
	cr_assert_str_eq(small, "");
}

/* Podman's State.Status words: "stopped" (exited, before its cleanup) was
 * UNKNOWN, so a container that ended stayed STARTING or RUNNING */
Test(podman, states)
{
	cr_assert_eq(docker_state_from_string("stopped"), RT_STATE_EXITED);
	cr_assert_eq(docker_state_from_string("stopping"), RT_STATE_RUNNING);
	cr_assert_eq(docker_state_from_string("configured"), RT_STATE_CREATED);
	cr_assert_eq(docker_state_from_string("initialized"), RT_STATE_CREATED);
}

/* Podman's events, as its Engine API sends them: "remove" where Docker
 * says "destroy"; its own actions (init, cleanup, kill) ignored */
Test(podman, events)
{
	static const char die[] =
		"{\"status\":\"die\",\"id\":\"506f3b9055d0\",\"from\":\"localhost/nodefs-test/"
		"busybox:latest\",\"Type\":\"container\",\"Action\":\"die\",\"Actor\":{\"ID\":"
		"\"506f3b9055d0\",\"Attributes\":{\"containerExitCode\":\"137\",\"exitCode\":"
		"\"137\",\"image\":\"localhost/nodefs-test/busybox:latest\",\"io.nodefs.managed\":"
		"\"1\",\"name\":\"tl\",\"podId\":\"\"}},\"scope\":\"local\",\"time\":1796618319,"
		"\"timeNano\":1796618319879156612}";
	static const char remove[] =
		"{\"status\":\"remove\",\"id\":\"506f3b9055d0\",\"Type\":\"container\",\"Action\":"
		"\"remove\",\"Actor\":{\"ID\":\"506f3b9055d0\",\"Attributes\":{\"containerExitCode\":"
		"\"0\",\"io.nodefs.managed\":\"1\",\"name\":\"tl\",\"podId\":\"\"}},\"scope\":"
		"\"local\",\"time\":1796618323,\"timeNano\":1796618323637357700}";
	struct rt_event ev;
	char id[80];

	cr_assert_eq(docker_json_parse_event(die, strlen(die), &ev, id, sizeof(id)), 1);
	cr_assert_eq(ev.kind, RT_EV_DIE);
	cr_assert_eq(ev.exit_code, 137);
	cr_assert_str_eq(ev.id, "506f3b9055d0");
	cr_assert_eq(docker_json_parse_event(remove, strlen(remove), &ev, id, sizeof(id)), 1);
	cr_assert_eq(ev.kind, RT_EV_DESTROY);
	cr_assert_eq(ev.time, 1796618323);
	cr_assert_eq(ev.time_ns, 1796618323637357700LL);	/* orders it against state changes */
	const char *ignored[] = { "init", "cleanup", "kill", "create", "attach" };
	for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++) {
		char line[200];

		snprintf(line, sizeof(line), "{\"Type\":\"container\",\"Action\":\"%s\","
			 "\"Actor\":{\"ID\":\"x\",\"Attributes\":{}}}", ignored[i]);
		cr_assert_eq(docker_json_parse_event(line, strlen(line), &ev, id, sizeof(id)), 0);
	}
}

Test(json, error_message)
{
	char buf[64], small[20];
	static const char body[] = "{\"message\":\"Conflict. The container name \\\"/nodefs-web\\\" is\\nalready in use\"}";

	docker_json_error_message(body, strlen(body), buf, sizeof(buf));
	cr_assert_str_eq(buf, "Conflict. The container name \"/nodefs-web\" is already in use");
	docker_json_error_message(body, strlen(body), small, sizeof(small));
	cr_assert_str_eq(small, "Conflict. The conta");
	docker_json_error_message("page not found\n", 15, buf, sizeof(buf));
	cr_assert_str_eq(buf, "page not found");
	docker_json_error_message(NULL, 0, buf, sizeof(buf));
	cr_assert_str_eq(buf, "");
}

/* The engine's words for a container that has just exited (Docker 20.10's
 * bare 500s, runc's through dockerd): EBUSY, not EIO (docker.c wrong_state). */
Test(json, not_running_messages)
{
	cr_assert(docker_msg_not_running("Cannot update container 5eefe6ec: runc did not terminate "
					 "successfully: exit status 1: container not running : unknown"));
	cr_assert(docker_msg_not_running("cannot update a stopped container"));
	cr_assert(docker_msg_not_running("cannot pause a stopped container"));
	cr_assert(docker_msg_not_running("Container 5eefe6ec is not running"));
	cr_assert_not(docker_msg_not_running("Container 5eefe6ec is not paused"));
	cr_assert_not(docker_msg_not_running("No such container: 5eefe6ec"));
	cr_assert_not(docker_msg_not_running(""));
	cr_assert_not(docker_msg_not_running(NULL));
}

/* runc's failure to freeze (cgroup v1, a task forked or exiting during
 * the freeze; the pause's whole 500 as dockerd 20.10 gave it in a load
 * run): a pause tried again (docker.c dk_pause), not a container gone. */
Test(json, freeze_failed_messages)
{
	static const char seen[] =
		"Cannot pause container f63cd324a4c2f7186f42c0b6a79ff9c9b56c489e8240a554a5f1826a82974529: "
		"OCI runtime pause failed: unable to freeze: unknown";

	cr_assert(docker_msg_freeze_failed(seen));
	cr_assert_not(docker_msg_not_running(seen));
	cr_assert_not(docker_msg_freeze_failed("cannot pause a stopped container"));
	cr_assert_not(docker_msg_freeze_failed("Container 5eefe6ec is already paused"));
	cr_assert_not(docker_msg_freeze_failed(""));
	cr_assert_not(docker_msg_freeze_failed(NULL));
}

Test(json, inspect)
{
	static const char running[] =
		"{\"Id\":\"abc\",\"State\":{\"Status\":\"running\",\"Running\":true,\"Paused\":false,"
		"\"Restarting\":false,\"OOMKilled\":false,\"Dead\":false,\"Pid\":4242,\"ExitCode\":0,"
		"\"Error\":\"\",\"StartedAt\":\"2026-11-29T17:44:36.556182322Z\","
		"\"FinishedAt\":\"0001-01-01T00:00:00Z\"},\"Name\":\"/nodefs-web\"}";
	static const char oom[] =
		"{\"State\":{\"Status\":\"exited\",\"OOMKilled\":true,\"Pid\":0,\"ExitCode\":137,"
		"\"StartedAt\":\"2026-11-29T17:44:36Z\",\"FinishedAt\":\"2026-11-29T17:44:40.5Z\"},"
		"\"HostConfig\":{\"Memory\":8388608}}";
	struct rt_status st;
	struct nerr err = { 0 };

	cr_assert_eq(docker_json_parse_inspect(running, strlen(running), &st, &err), 0, "%s", err.msg);
	cr_assert_eq(st.state, RT_STATE_RUNNING);
	cr_assert_eq(st.pid, 4242);
	cr_assert_eq(st.started_at, 1795974276);
	cr_assert_eq(st.finished_at, 0);
	cr_assert_not(st.oom_killed);
	cr_assert_not(st.memory_limited);
	cr_assert_eq(docker_json_parse_inspect(oom, strlen(oom), &st, &err), 0);
	cr_assert_eq(st.state, RT_STATE_EXITED);
	cr_assert_eq(st.exit_code, 137);
	cr_assert(st.oom_killed);
	cr_assert(st.memory_limited);
	cr_assert_eq(st.finished_at, 1795974280);
	cr_assert_eq(docker_json_parse_inspect("{}", 2, &st, &err), -EBADMSG);
	cr_assert_eq(docker_json_parse_inspect("[", 1, &st, &err), -EBADMSG);
	static const char badpid[] = "{\"State\":{\"Status\":\"running\",\"Pid\":-1}}";
	cr_assert_eq(docker_json_parse_inspect(badpid, strlen(badpid), &st, &err), -EBADMSG);
	static const char badtime[] = "{\"State\":{\"Status\":\"running\",\"StartedAt\":\"soon\"}}";
	cr_assert_eq(docker_json_parse_inspect(badtime, strlen(badtime), &st, &err), -EBADMSG);
	cr_assert_eq(docker_state_from_string("paused"), RT_STATE_PAUSED);
	cr_assert_eq(docker_state_from_string("created"), RT_STATE_CREATED);
	cr_assert_eq(docker_state_from_string("dead"), RT_STATE_EXITED);
	cr_assert_eq(docker_state_from_string("weird"), RT_STATE_UNKNOWN);
	cr_assert_eq(docker_state_from_string(NULL), RT_STATE_UNKNOWN);
}

Test(json, exec_inspect_and_id)
{
	int code;
	bool running;
	char *id = NULL;
	struct nerr err = { 0 };
	static const char ei[] = "{\"ID\":\"e1\",\"Running\":false,\"ExitCode\":3,\"Pid\":77}";

	cr_assert_eq(docker_json_parse_exec_inspect(ei, strlen(ei), &code, &running, &err), 0);
	cr_assert_eq(code, 3);
	cr_assert_not(running);
	static const char ei2[] = "{\"Running\":true,\"ExitCode\":null}";
	cr_assert_eq(docker_json_parse_exec_inspect(ei2, strlen(ei2), &code, &running, &err), 0);
	cr_assert(running);
	cr_assert_eq(code, -1);
	cr_assert_eq(docker_json_parse_id("{\"Id\":\"deadbeef\",\"Warnings\":[]}", 31, &id, &err), 0);
	cr_assert_str_eq(id, "deadbeef");
	free(id);
	cr_assert_eq(docker_json_parse_id("{\"Id\":\"\"}", 9, &id, &err), -EBADMSG);
}

Test(json, list)
{
	static const char body[] =
		"[{\"Id\":\"aaa\",\"Names\":[\"/nodefs-web\"],\"State\":\"running\",\"Status\":\"Up 2 minutes\","
		"\"Labels\":{\"io.nodefs.managed\":\"1\",\"io.nodefs.name\":\"web\"}},"
		"{\"Id\":\"bbb\",\"State\":\"exited\",\"Status\":\"Exited (137) 5 seconds ago\","
		"\"Labels\":{\"io.nodefs.managed\":\"1\",\"io.nodefs.name\":\"db\"}},"
		"{\"Id\":\"ccc\",\"State\":\"running\",\"Labels\":{\"other\":\"1\"}},"
		"{\"Id\":\"ddd\",\"State\":\"running\",\"Labels\":{\"io.nodefs.managed\":\"0\",\"io.nodefs.name\":\"x\"}},"
		/* nodefs's own (a plugin it runs): never a user's container */
		"{\"Id\":\"eee\",\"State\":\"running\",\"Labels\":{\"io.nodefs.managed\":\"1\",\"io.nodefs.name\":\"p\","
		"\"io.nodefs.role\":\"plugin\"}}]";
	struct rt_listing *l = NULL;
	struct nerr err = { 0 };
	size_t n = 0;

	cr_assert_eq(docker_json_parse_list(body, strlen(body), &l, &n, &err), 0);
	cr_assert_eq(n, 2);
	cr_assert_str_eq(l[0].id, "aaa");
	cr_assert_str_eq(l[0].name, "web");
	cr_assert_eq(l[0].status.state, RT_STATE_RUNNING);
	cr_assert_str_eq(l[1].name, "db");
	cr_assert_eq(l[1].status.state, RT_STATE_EXITED);
	cr_assert_eq(l[1].status.exit_code, 137);
	rt_listing_free(l, n);
	cr_assert_eq(docker_json_parse_list("[]", 2, &l, &n, &err), 0);
	cr_assert_eq(n, 0);
	rt_listing_free(l, n);
	cr_assert_eq(docker_json_parse_list("{}", 2, &l, &n, &err), -EBADMSG);
}

Test(json, events)
{
	static const char die[] =
		"{\"status\":\"die\",\"id\":\"c0ffee\",\"from\":\"nodefs-test/busybox\",\"Type\":\"container\","
		"\"Action\":\"die\",\"Actor\":{\"ID\":\"c0ffee\",\"Attributes\":{\"exitCode\":\"137\","
		"\"io.nodefs.managed\":\"1\",\"name\":\"nodefs-web\"}},\"scope\":\"local\","
		"\"time\":1795974276,\"timeNano\":1795974276556182322}";
	static const char oom[] = "{\"Type\":\"container\",\"Action\":\"oom\",\"Actor\":{\"ID\":\"c1\"},\"time\":5}";
	static const char exec[] = "{\"Type\":\"container\",\"Action\":\"exec_start: sh\",\"Actor\":{\"ID\":\"c1\"}}";
	static const char net[] = "{\"Type\":\"network\",\"Action\":\"connect\",\"Actor\":{\"ID\":\"n1\"}}";
	static const char old[] = "{\"status\":\"start\",\"id\":\"c2\",\"time\":7}";
	static const char nocode[] = "{\"Type\":\"container\",\"Action\":\"die\",\"Actor\":{\"ID\":\"c1\"}}";
	struct rt_event ev;
	char id[80];

	cr_assert_eq(docker_json_parse_event(die, strlen(die), &ev, id, sizeof(id)), 1);
	cr_assert_eq(ev.kind, RT_EV_DIE);
	cr_assert_str_eq(ev.id, "c0ffee");
	cr_assert_eq(ev.exit_code, 137);
	cr_assert_eq(ev.time, 1795974276);
	cr_assert_eq(docker_json_parse_event(oom, strlen(oom), &ev, id, sizeof(id)), 1);
	cr_assert_eq(ev.kind, RT_EV_OOM);
	cr_assert_eq(docker_json_parse_event(exec, strlen(exec), &ev, id, sizeof(id)), 0);
	cr_assert_eq(docker_json_parse_event(net, strlen(net), &ev, id, sizeof(id)), 0);
	cr_assert_eq(docker_json_parse_event(old, strlen(old), &ev, id, sizeof(id)), 1);
	cr_assert_eq(ev.kind, RT_EV_START);
	cr_assert_str_eq(ev.id, "c2");
	cr_assert_eq(docker_json_parse_event(nocode, strlen(nocode), &ev, id, sizeof(id)), -EBADMSG);
	cr_assert_eq(docker_json_parse_event("{", 1, &ev, id, sizeof(id)), -EBADMSG);
	cr_assert_eq(docker_json_parse_event(die, strlen(die), &ev, id, 4), -EBADMSG);
	const char *kinds[] = { "pause", "unpause", "destroy" };
	enum rt_event_kind want[] = { RT_EV_PAUSE, RT_EV_UNPAUSE, RT_EV_DESTROY };
	for (int i = 0; i < 3; i++) {
		char line[200];

		snprintf(line, sizeof(line), "{\"Type\":\"container\",\"Action\":\"%s\",\"Actor\":{\"ID\":\"x\"}}", kinds[i]);
		cr_assert_eq(docker_json_parse_event(line, strlen(line), &ev, id, sizeof(id)), 1);
		cr_assert_eq(ev.kind, want[i]);
	}
}

Test(json, pull_lines)
{
	char buf[128];
	static const char prog[] = "{\"status\":\"Downloading\",\"progressDetail\":{\"current\":1,\"total\":5},"
				   "\"progress\":\"[=>   ] 1B/5B\",\"id\":\"abc123\"}";
	static const char err[] = "{\"errorDetail\":{\"message\":\"manifest unknown\"},\"error\":\"manifest unknown\"}";

	cr_assert_eq(docker_json_parse_pull_line(prog, strlen(prog), buf, sizeof(buf)), 0);
	cr_assert_str_eq(buf, "abc123: Downloading [=>   ] 1B/5B");
	cr_assert_eq(docker_json_parse_pull_line(err, strlen(err), buf, sizeof(buf)), -ENOENT);
	cr_assert_str_eq(buf, "manifest unknown");
	cr_assert_eq(docker_json_parse_pull_line("nope", 4, buf, sizeof(buf)), -EBADMSG);
	static const char reply[] = "{\"message\":\"Get \\\"https://127.0.0.1:1/v2/\\\": connection refused\"}";
	cr_assert_eq(docker_json_parse_pull_line(reply, strlen(reply), buf, sizeof(buf)), -ENOENT);
	cr_assert_str_eq(buf, "Get \"https://127.0.0.1:1/v2/\": connection refused");
}

Test(image, split)
{
	char repo[64], tag[32];

	cr_assert_eq(docker_image_split("busybox", repo, 64, tag, 32), 0);
	cr_assert_str_eq(repo, "busybox");
	cr_assert_str_eq(tag, "latest");
	cr_assert_eq(docker_image_split("nodefs-test/busybox:1.36", repo, 64, tag, 32), 0);
	cr_assert_str_eq(repo, "nodefs-test/busybox");
	cr_assert_str_eq(tag, "1.36");
	cr_assert_eq(docker_image_split("127.0.0.1:5000/a/b", repo, 64, tag, 32), 0);
	cr_assert_str_eq(repo, "127.0.0.1:5000/a/b");
	cr_assert_str_eq(tag, "latest");
	cr_assert_eq(docker_image_split("127.0.0.1:5000/a/b:v2", repo, 64, tag, 32), 0);
	cr_assert_str_eq(repo, "127.0.0.1:5000/a/b");
	cr_assert_str_eq(tag, "v2");
	cr_assert_eq(docker_image_split("a@sha256:abcd", repo, 64, tag, 32), 0);
	cr_assert_str_eq(repo, "a@sha256:abcd");
	cr_assert_str_eq(tag, "");
	cr_assert_eq(docker_image_split("", repo, 64, tag, 32), -EINVAL);
	cr_assert_eq(docker_image_split("a:", repo, 64, tag, 32), -EINVAL);
	cr_assert_eq(docker_image_split(":x", repo, 64, tag, 32), -EINVAL);
	cr_assert_eq(docker_image_split("aaaaaaaaaa", repo, 8, tag, 32), -EINVAL);
}

/* --- the multiplexed stream ---------------------------------------------- */

struct collect {
	struct sbuf out[3];
	int calls;
	int fail_at;
};

static int collect_sink(void *ctx, int stream, const char *p, size_t n)
{
	struct collect *c = ctx;

	if (++c->calls == c->fail_at)
		return -E2BIG;
	return sbuf_add(&c->out[stream], p, n);
}

static size_t frame(char *dst, int stream, const char *payload)
{
	size_t n = strlen(payload);

	dst[0] = (char)stream;
	dst[1] = dst[2] = dst[3] = 0;
	dst[4] = (char)(n >> 24);
	dst[5] = (char)(n >> 16);
	dst[6] = (char)(n >> 8);
	dst[7] = (char)n;
	memcpy(dst + 8, payload, n);
	return n + 8;
}

static void collect_init(struct collect *c)
{
	memset(c, 0, sizeof(*c));
	for (int i = 0; i < 3; i++)
		sbuf_init(&c->out[i], 1 << 20);
}

static void collect_free(struct collect *c)
{
	for (int i = 0; i < 3; i++)
		sbuf_free(&c->out[i]);
}

Test(mux, whole_and_split)
{
	char stream[256];
	size_t n = 0;

	n += frame(stream + n, 1, "hello ");
	n += frame(stream + n, 2, "oops\n");
	n += frame(stream + n, 1, "");
	n += frame(stream + n, 1, "world\n");
	/* every way of cutting the stream gives the same result */
	for (size_t step = 1; step <= n; step++) {
		struct docker_mux m;
		struct collect c;

		collect_init(&c);
		docker_mux_init(&m);
		for (size_t off = 0; off < n; off += step) {
			size_t k = n - off < step ? n - off : step;

			cr_assert_eq(docker_mux_feed(&m, stream + off, k, collect_sink, &c), 0);
		}
		cr_assert_eq(docker_mux_finish(&m), 0);
		cr_assert_str_eq(c.out[1].buf, "hello world\n", "step %zu", step);
		cr_assert_str_eq(c.out[2].buf, "oops\n");
		collect_free(&c);
	}
}

Test(mux, errors)
{
	char stream[64];
	struct docker_mux m;
	struct collect c;
	size_t n;

	collect_init(&c);
	docker_mux_init(&m);
	n = frame(stream, 3, "x");
	cr_assert_eq(docker_mux_feed(&m, stream, n, collect_sink, &c), -EBADMSG);
	docker_mux_init(&m);
	n = frame(stream, 1, "x");
	stream[2] = 1;
	cr_assert_eq(docker_mux_feed(&m, stream, n, collect_sink, &c), -EBADMSG);
	/* a stream cut inside a header or a payload */
	docker_mux_init(&m);
	n = frame(stream, 1, "abc");
	cr_assert_eq(docker_mux_feed(&m, stream, 5, collect_sink, &c), 0);
	cr_assert_eq(docker_mux_finish(&m), -EBADMSG);
	docker_mux_init(&m);
	cr_assert_eq(docker_mux_feed(&m, stream, n - 1, collect_sink, &c), 0);
	cr_assert_eq(docker_mux_finish(&m), -EBADMSG);
	/* a sink's error stops the decoder and comes back */
	docker_mux_init(&m);
	c.calls = 0;
	c.fail_at = 1;
	cr_assert_eq(docker_mux_feed(&m, stream, n, collect_sink, &c), -E2BIG);
	/* a TTY stream (raw text) is not multiplexed: rejected, not misread */
	docker_mux_init(&m);
	cr_assert_eq(docker_mux_feed(&m, "hello world\n", 12, collect_sink, &c), -EBADMSG);
	collect_free(&c);
}

Test(mux, tail)
{
	struct docker_tail t;
	const char *p;
	size_t len;
	char expect[16];

	cr_assert_eq(docker_tail_init(&t, 8), 0);
	p = docker_tail_data(&t, &len);
	cr_assert_eq(len, 0);
	cr_assert_eq(docker_tail_sink(&t, 1, "abc", 3), 0);
	p = docker_tail_data(&t, &len);
	cr_assert_eq(len, 3);
	cr_assert_eq(memcmp(p, "abc", 3), 0);
	/* many small writes, then one bigger than the window */
	for (int i = 0; i < 1000; i++) {
		char ch = (char)('a' + i % 26);

		cr_assert_eq(docker_tail_sink(&t, 1, &ch, 1), 0);
	}
	for (int i = 0; i < 8; i++)
		expect[i] = (char)('a' + (992 + i) % 26);
	p = docker_tail_data(&t, &len);
	cr_assert_eq(len, 8);
	cr_assert_eq(memcmp(p, expect, 8), 0);
	cr_assert_eq(docker_tail_sink(&t, 2, "0123456789", 10), 0);
	p = docker_tail_data(&t, &len);
	cr_assert_eq(len, 8);
	cr_assert_eq(memcmp(p, "23456789", 8), 0);
	cr_assert_eq(docker_tail_sink(&t, 2, "xyz", 3), 0);
	p = docker_tail_data(&t, &len);
	cr_assert_eq(len, 8);
	cr_assert_eq(memcmp(p, "56789xyz", 8), 0);
	docker_tail_free(&t);
	cr_assert_eq(docker_tail_init(&t, 0), -EINVAL);
}

/* --- cgroup files ------------------------------------------------------- */

Test(cgroup, proc_v1)
{
	static const char text[] =
		"12:pids:/docker/abc\n11:cpu,cpuacct:/docker/abc\n10:memory:/docker/abc\n"
		"9:name=systemd:/docker/abc\n0::/docker/abc\n";
	char cpu[128], mem[128], pids[128];

	cr_assert_eq(docker_cg_dirs_from_proc(text, false, "/sys/fs/cgroup", cpu, mem, pids, 128), 0);
	cr_assert_str_eq(cpu, "/sys/fs/cgroup/cpu,cpuacct/docker/abc");
	cr_assert_str_eq(mem, "/sys/fs/cgroup/memory/docker/abc");
	cr_assert_str_eq(pids, "/sys/fs/cgroup/pids/docker/abc");
	/* this machine's layout: separate hierarchies */
	static const char sep[] = "8:pids:/docker/x\n4:memory:/docker/x\n2:cpuacct:/docker/x\n1:cpu:/docker/x";
	cr_assert_eq(docker_cg_dirs_from_proc(sep, false, "/sys/fs/cgroup", cpu, mem, pids, 128), 0);
	cr_assert_str_eq(cpu, "/sys/fs/cgroup/cpuacct/docker/x");
	/* a hierarchy missing, or a path that does not fit */
	cr_assert_eq(docker_cg_dirs_from_proc("4:memory:/a\n2:cpuacct:/a\n", false, "/r", cpu, mem, pids, 128), -ENOENT);
	cr_assert_eq(docker_cg_dirs_from_proc(text, false, "/sys/fs/cgroup", cpu, mem, pids, 16), -ENOENT);
	cr_assert_eq(docker_cg_dirs_from_proc("", false, "/r", cpu, mem, pids, 128), -ENOENT);
	cr_assert_eq(docker_cg_dirs_from_proc("garbage\n::\n1:x\n", false, "/r", cpu, mem, pids, 128), -ENOENT);
}

Test(cgroup, proc_v2)
{
	static const char text[] = "0::/system.slice/docker-abc.scope\n";
	char cpu[128], mem[128], pids[128];

	cr_assert_eq(docker_cg_dirs_from_proc(text, true, "/sys/fs/cgroup", cpu, mem, pids, 128), 0);
	cr_assert_str_eq(cpu, "/sys/fs/cgroup/system.slice/docker-abc.scope");
	cr_assert_str_eq(mem, cpu);
	cr_assert_str_eq(pids, cpu);
	/* a v1 line is not a v2 answer */
	cr_assert_eq(docker_cg_dirs_from_proc("4:memory:/a\n", true, "/r", cpu, mem, pids, 128), -ENOENT);
}

Test(cgroup, values)
{
	double u, s;
	uint64_t v;

	docker_cg_parse_cpu("user 250\nsystem 100\n", false, 100, &u, &s);
	cr_assert_float_eq(u, 2.5, 1e-9);
	cr_assert_float_eq(s, 1.0, 1e-9);
	docker_cg_parse_cpu("usage_usec 3500000\nuser_usec 2500000\nsystem_usec 1000000\n"
			    "nr_periods 0\n", true, 100, &u, &s);
	cr_assert_float_eq(u, 2.5, 1e-9);
	cr_assert_float_eq(s, 1.0, 1e-9);
	/* "user_usec" must not be read as v1's "user" */
	docker_cg_parse_cpu("user_usec 5\n", false, 100, &u, &s);
	cr_assert_float_eq(u, 0, 1e-9);
	docker_cg_parse_cpu("", true, 100, &u, &s);
	cr_assert_float_eq(u + s, 0, 1e-9);

	cr_assert_eq(docker_cg_parse_u64("67108864\n", &v), 0);
	cr_assert_eq(v, 67108864);
	cr_assert_eq(docker_cg_parse_u64("max\n", &v), 0);
	cr_assert_eq(v, 0);
	cr_assert_eq(docker_cg_parse_u64("9223372036854771712\n", &v), 0);
	cr_assert_eq(v, 9223372036854771712ull);
	cr_assert_eq(docker_cg_parse_u64("", &v), -EIO);
	cr_assert_eq(docker_cg_parse_u64("12abc", &v), -EIO);
	cr_assert_eq(docker_cg_parse_u64("-1", &v), -EIO);
	cr_assert_eq(docker_cg_parse_u64("maximum", &v), -EIO);
}

/* The service: the engine's own health check's events, the bindings it
 * made, and what a create asks for (NetworkMode, PortBindings,
 * ExposedPorts, Healthcheck). */
Test(docker_service, health_events_ports_and_body)
{
	const char *ev1 = "{\"Type\":\"container\",\"Action\":\"health_status: unhealthy\","
			  "\"Actor\":{\"ID\":\"abc\",\"Attributes\":{}},\"time\":5}";
	const char *ev2 = "{\"Type\":\"container\",\"Action\":\"health_status: sleepy\","
			  "\"Actor\":{\"ID\":\"abc\"}}";
	const char *ins = "{\"State\":{\"Status\":\"running\",\"Pid\":7,\"ExitCode\":0,"
			  "\"Health\":{\"Status\":\"unhealthy\",\"FailingStreak\":3,\"Log\":["
			  "{\"Output\":\"old\"},{\"Output\":\"wget: can't connect\\n\"}]}},"
			  "\"NetworkSettings\":{\"Ports\":{\"80/tcp\":[{\"HostIp\":\"127.0.0.1\","
			  "\"HostPort\":\"49153\"}],\"81/tcp\":null}}}";
	struct rt_port ports[2] = { { "127.0.0.1", 0, 80, false }, { "", 8080, 80, false } };
	char *test[] = { "true", NULL };
	struct rt_health h = { .test = test, .interval_ms = 300, .timeout_ms = 1000,
			       .retries = 2 };
	struct rt_spec spec = { .name = "x", .image = "busybox", .network = "mynet",
				.ports = ports, .nports = 2, .health = &h };
	struct sbuf out = SBUF_INIT(4096);
	struct rt_status st;
	struct rt_event ev;
	struct nerr err = { 0 };
	char id[80], *body = NULL;
	json_error_t je;
	json_t *o;

	cr_assert_eq(docker_json_parse_event(ev1, strlen(ev1), &ev, id, sizeof(id)), 1);
	cr_assert_eq(ev.kind, RT_EV_HEALTH);
	cr_assert_str_eq(ev.health, "unhealthy");
	cr_assert_str_eq(ev.id, "abc");
	cr_assert_eq(docker_json_parse_event(ev2, strlen(ev2), &ev, id, sizeof(id)), 0);

	cr_assert_eq(docker_json_parse_inspect(ins, strlen(ins), &st, &err), 0, "%s", err.msg);
	cr_assert(st.has_health);
	cr_assert_eq(st.health_streak, 3);
	cr_assert_str_eq(st.health_output, "wget: can't connect");
	cr_assert_eq(docker_json_parse_ports(ins, strlen(ins), &out, &err), 0);
	cr_assert_str_eq(out.buf, "80/tcp 127.0.0.1:49153\n");
	sbuf_free(&out);

	cr_assert_eq(docker_json_create_body(&spec, &body, &err), 0, "%s", err.msg);
	o = json_loads(body, 0, &je);
	cr_assert_not_null(o);
	json_t *hc = json_object_get(o, "HostConfig");
	cr_assert_str_eq(json_string_value(json_object_get(hc, "NetworkMode")), "mynet");
	json_t *pb = json_object_get(json_object_get(hc, "PortBindings"), "80/tcp");
	cr_assert_eq(json_array_size(pb), 2, "one member a port, its bindings together");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(pb, 0), "HostPort")), "");
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(pb, 1), "HostPort")),
			 "8080");
	cr_assert_null(json_object_get(hc, "RestartPolicy"), "the engine's own policy stays off");
	cr_assert_not_null(json_object_get(json_object_get(o, "ExposedPorts"), "80/tcp"));
	json_t *hk = json_object_get(o, "Healthcheck");
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(hk, "Test"), 0)), "CMD");
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(hk, "Test"), 1)), "true");
	cr_assert_eq(json_integer_value(json_object_get(hk, "Interval")), 300000000);
	cr_assert_eq(json_integer_value(json_object_get(hk, "Retries")), 2);
	json_decref(o);
	free(body);
}

/* Podman 4: its health_status event carries no word (HealthStatus lags a
 * check: it is not taken), the inspect says where the check stands, and a
 * create sends the check as one quoted shell line (its Engine API splits a
 * CMD's words again at each space). */
Test(docker_service, podman_health)
{
	const char *ev = "{\"status\":\"health_status\",\"id\":\"abc\",\"Type\":\"container\","
			 "\"Action\":\"health_status\",\"Actor\":{\"ID\":\"abc\",\"Attributes\":"
			 "{\"containerExitCode\":\"0\"}},\"time\":5,\"timeNano\":5000000001,"
			 "\"HealthStatus\":\"starting\"}";
	const char *ins = "{\"State\":{\"Status\":\"running\",\"Pid\":7,\"ExitCode\":0,"
			  "\"Health\":{\"Status\":\"healthy\",\"FailingStreak\":0,\"Log\":null}}}";
	const char *odd = "{\"State\":{\"Status\":\"running\",\"Pid\":7,\"ExitCode\":0,"
			  "\"Health\":{\"Status\":\"sleepy-and-much-too-long\"}}}";
	char *test[] = { "sh", "-c", "test -e '/tmp/ok'", NULL };
	struct rt_health h = { .test = test, .interval_ms = 300, .timeout_ms = 1000,
			       .retries = 2 };
	struct rt_spec spec = { .name = "x", .image = "busybox", .health = &h };
	struct rt_status st;
	struct rt_event e;
	struct nerr err = { 0 };
	char id[80], *body = NULL;
	json_error_t je;
	json_t *o, *t;

	cr_assert_eq(docker_json_parse_event(ev, strlen(ev), &e, id, sizeof(id)), 1);
	cr_assert_eq(e.kind, RT_EV_HEALTH);
	cr_assert_null(e.health, "Podman's word is a check behind: not taken");
	cr_assert_str_eq(e.id, "abc");
	cr_assert_eq(docker_json_parse_inspect(ins, strlen(ins), &st, &err), 0, "%s", err.msg);
	cr_assert(st.has_health);
	cr_assert_str_eq(st.health_status, "healthy");
	cr_assert_eq(docker_json_parse_inspect(odd, strlen(odd), &st, &err), 0, "%s", err.msg);
	cr_assert_str_eq(st.health_status, "");

	cr_assert_eq(docker_json_create_body_for(&spec, true, &body, &err), 0, "%s", err.msg);
	o = json_loads(body, 0, &je);
	cr_assert_not_null(o);
	t = json_object_get(json_object_get(o, "Healthcheck"), "Test");
	cr_assert_eq(json_array_size(t), 2);
	cr_assert_str_eq(json_string_value(json_array_get(t, 0)), "CMD-SHELL");
	cr_assert_str_eq(json_string_value(json_array_get(t, 1)),
			 "'sh' '-c' 'test -e '\\''/tmp/ok'\\'''");
	json_decref(o);
	free(body);
	/* dockerd: the argv as it is */
	cr_assert_eq(docker_json_create_body_for(&spec, false, &body, &err), 0, "%s", err.msg);
	o = json_loads(body, 0, &je);
	t = json_object_get(json_object_get(o, "Healthcheck"), "Test");
	cr_assert_eq(json_array_size(t), 4);
	cr_assert_str_eq(json_string_value(json_array_get(t, 3)), "test -e '/tmp/ok'");
	json_decref(o);
	free(body);
}
