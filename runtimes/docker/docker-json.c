/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * docker-json: the pure half of the Docker driver (see docker-internal.h):
 * the status and transport error tables, version negotiation, every JSON
 * reply the driver reads (parsed with jansson), timestamps. No I/O, no
 * curl, no threads: unit-tested and fuzzed as is. The bodies it sends are
 * docker-body.c; the decoders that are not JSON (streams, image
 * references, cgroup texts) are docker-decode.c.
 */
#include "docker-internal.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "macro.h"
#include "nerr.h"
#include "sbuf.h"

/* CURLcode values we map, copied so this file stays free of curl.h; the unit
 * test checks them against curl.h. */
#define DK_CURLE_OK 0
#define DK_CURLE_UNSUPPORTED_PROTOCOL 1
#define DK_CURLE_COULDNT_RESOLVE_HOST 6
#define DK_CURLE_COULDNT_CONNECT 7
#define DK_CURLE_WRITE_ERROR 23
#define DK_CURLE_OUT_OF_MEMORY 27
#define DK_CURLE_OPERATION_TIMEDOUT 28
#define DK_CURLE_ABORTED_BY_CALLBACK 42
#define DK_CURLE_GOT_NOTHING 52
#define DK_CURLE_SEND_ERROR 55
#define DK_CURLE_RECV_ERROR 56

bool docker_msg_not_running(const char *msg)
{
	return msg && (strstr(msg, "not running") || strstr(msg, "stopped container"));
}

bool docker_msg_freeze_failed(const char *msg)
{
	return msg && strstr(msg, "unable to freeze");
}

int docker_status_to_errno(long st, enum docker_call call)
{
	if (st >= 200 && st < 300)
		return 0;
	switch (st) {
	case 304:
		return call == DOCKER_CALL_STARTSTOP ? 0 : EBUSY;
	case 400:
		return EINVAL;
	case 401:
	case 403:
		return EACCES;
	case 404:
		return ENOENT;
	case 409:
		return call == DOCKER_CALL_CREATE ? EEXIST : EBUSY;
	case 501:
		return EOPNOTSUPP;
	default:
		return EIO;
	}
}

int docker_curl_to_errno(int c)
{
	switch (c) {
	case DK_CURLE_OK:
		return 0;
	case DK_CURLE_COULDNT_CONNECT:
	case DK_CURLE_COULDNT_RESOLVE_HOST:
	case DK_CURLE_GOT_NOTHING:
	case DK_CURLE_SEND_ERROR:
	case DK_CURLE_RECV_ERROR:
		return EHOSTDOWN;
	case DK_CURLE_OPERATION_TIMEDOUT:
		return ETIMEDOUT;
	case DK_CURLE_ABORTED_BY_CALLBACK:
		return ECANCELED;
	case DK_CURLE_WRITE_ERROR:
		return E2BIG;
	case DK_CURLE_OUT_OF_MEMORY:
		return ENOMEM;
	default:
		return EIO;
	}
}

int docker_version_parse(const char *s, unsigned *ret_major, unsigned *ret_minor)
{
	unsigned long ma, mi;
	char *end;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	ma = strtoul(s, &end, 10);
	if (errno || *end != '.' || end[1] < '0' || end[1] > '9' || ma > 1000)
		return -EINVAL;
	mi = strtoul(end + 1, &end, 10);
	if (errno || *end != '\0' || mi > 1000)
		return -EINVAL;
	*ret_major = ma;
	*ret_minor = mi;
	return 0;
}

static int vcmp(unsigned a1, unsigned a2, unsigned b1, unsigned b2)
{
	if (a1 != b1)
		return a1 < b1 ? -1 : 1;
	if (a2 != b2)
		return a2 < b2 ? -1 : 1;
	return 0;
}

int docker_version_negotiate(const char *server, const char *server_min, char *ret, size_t n)
{
	unsigned sma, smi, mma = 0, mmi = 0, ma, mi;
	int r;

	r = docker_version_parse(server, &sma, &smi);
	if (r < 0)
		return r;
	if (server_min && *server_min) {
		r = docker_version_parse(server_min, &mma, &mmi);
		if (r < 0)
			return r;
	}
	if (vcmp(sma, smi, DOCKER_API_OLDEST_MAJOR, DOCKER_API_OLDEST_MINOR) < 0)
		return -EPROTONOSUPPORT;
	ma = sma;
	mi = smi;
	if (vcmp(ma, mi, DOCKER_API_NEWEST_MAJOR, DOCKER_API_NEWEST_MINOR) > 0) {
		ma = DOCKER_API_NEWEST_MAJOR;
		mi = DOCKER_API_NEWEST_MINOR;
	}
	if (vcmp(ma, mi, mma, mmi) < 0) {
		ma = mma;
		mi = mmi;
	}
	if ((size_t)snprintf(ret, n, "%u.%u", ma, mi) >= n)
		return -EINVAL;
	return 0;
}

static int digits(const char **p, int n, int *ret)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if ((*p)[i] < '0' || (*p)[i] > '9')
			return -EINVAL;
		v = v * 10 + ((*p)[i] - '0');
	}
	*p += n;
	*ret = v;
	return 0;
}

int docker_time_parse(const char *s, time_t *ret)
{
	int y, mo, d, h, mi, se, oh = 0, om = 0, sign = 0;
	struct tm tm = { 0 };
	const char *p = s;
	time_t t;

	if (!s)
		return -EINVAL;
	if (digits(&p, 4, &y) < 0 || *p++ != '-' || digits(&p, 2, &mo) < 0 || *p++ != '-' ||
	    digits(&p, 2, &d) < 0 || (*p != 'T' && *p != 't' && *p != ' '))
		return -EINVAL;
	p++;
	if (digits(&p, 2, &h) < 0 || *p++ != ':' || digits(&p, 2, &mi) < 0 || *p++ != ':' ||
	    digits(&p, 2, &se) < 0)
		return -EINVAL;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		sign = *p++ == '-' ? -1 : 1;
		if (digits(&p, 2, &oh) < 0 || *p++ != ':' || digits(&p, 2, &om) < 0)
			return -EINVAL;
	} else {
		return -EINVAL;
	}
	if (*p != '\0' || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 ||
	    se > 60 || oh > 23 || om > 59)
		return -EINVAL;
	if (y <= 1) {		/* Go's zero time: never */
		*ret = 0;
		return 0;
	}
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = se;
	t = timegm(&tm);
	if (t == (time_t)-1)
		return -EINVAL;
	t -= sign * (oh * 3600 + om * 60);
	*ret = t;
	return 0;
}

/* s, malloc'd (NULL on OOM); plain malloc so failing-allocation tests see
 * every allocation of this file */
static char *dup_str(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = malloc(n);

	return d ? memcpy(d, s, n) : NULL;
}

/* Parse a reply: 0, -ENOMEM, or -EBADMSG (*ret NULL on failure). */
static int load(const char *body, size_t len, json_t **ret)
{
	json_error_t e;

	*ret = NULL;
	if (!body || len > DOCKER_BODY_CAP)
		return -EBADMSG;
	*ret = json_loadb(body, len, JSON_REJECT_DUPLICATES, &e);
	if (*ret)
		return 0;
	/* jansson fails its lexer's first allocation without a word; every
	 * parse error has one */
	return json_error_code(&e) == json_error_out_of_memory || !e.text[0] ? -ENOMEM : -EBADMSG;
}

#define LOAD_OR_ENOMEM(o, body, len, err)						\
	do {										\
		if (load(body, len, &(o)) == -ENOMEM)					\
			return nerr_set(err, ENOMEM, "out of memory");			\
	} while (0)

static void copy_line(char *buf, size_t n, const char *s, size_t len)
{
	size_t k;

	if (!n)
		return;
	k = len < n - 1 ? len : n - 1;
	memcpy(buf, s, k);
	buf[k] = '\0';
	/* one line, printable: it ends up in an error file */
	for (size_t i = 0; i < k; i++)
		if (buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\0')
			buf[i] = ' ';
	while (k > 0 && buf[k - 1] == ' ')
		buf[--k] = '\0';
}

void docker_json_error_message(const char *body, size_t len, char *buf, size_t n)
{
	json_auto_t *o = NULL;
	const char *m;

	load(body, len, &o);	/* out of memory: the raw text below */
	m = json_string_value(json_object_get(o, "message"));
	if (m)
		copy_line(buf, n, m, strlen(m));
	else
		copy_line(buf, n, body ? body : "", body ? strnlen(body, len) : 0);
}

int docker_json_parse_id(const char *body, size_t len, char **ret, struct nerr *err)
{
	json_auto_t *o = NULL;
	const char *id;
	char *s;

	LOAD_OR_ENOMEM(o, body, len, err);
	id = json_string_value(json_object_get(o, "Id"));
	if (!id || !*id)
		return nerr_set(err, EBADMSG, "engine reply without an Id");
	s = dup_str(id);
	if (!s)
		return nerr_set(err, ENOMEM, "out of memory");
	*ret = s;
	return 0;
}

int docker_json_parse_version(const char *body, size_t len, char *ret_api, char *ret_min,
			      size_t n, struct nerr *err)
{
	json_auto_t *o = NULL;
	const char *api, *min;

	LOAD_OR_ENOMEM(o, body, len, err);
	api = json_string_value(json_object_get(o, "ApiVersion"));
	min = json_string_value(json_object_get(o, "MinAPIVersion"));
	if (!api || strlen(api) >= n || (min && strlen(min) >= n))
		return nerr_set(err, EBADMSG, "engine /version reply without ApiVersion");
	strcpy(ret_api, api);
	strcpy(ret_min, min ? min : "");
	return 0;
}

void docker_msg_join_tail(char *buf, size_t n, const char *head, const char *tail)
{
	size_t hl, tl, room;

	if (n == 0)
		return;
	hl = strnlen(head, n - 1);
	memcpy(buf, head, hl);
	tl = strlen(tail);
	room = n - 1 - hl;
	if (tl <= room) {
		memcpy(buf + hl, tail, tl);
		buf[hl + tl] = '\0';
	} else if (room > 3) {
		/* the end of an engine's chain of causes says the most */
		memcpy(buf + hl, "...", 3);
		memcpy(buf + hl + 3, tail + tl - (room - 3), room - 3);
		buf[n - 1] = '\0';
	} else {
		buf[hl] = '\0';
	}
}

int docker_json_podman_cause(const char *body, size_t len, enum docker_call call)
{
	static const struct {
		const char *cause;
		int create, other;	/* Docker's status for it, as an errno */
	} tab[] = {
		{ "container state improper", EBUSY, EBUSY },		/* 409, 304 */
		{ "that name is already in use", EEXIST, EBUSY },	/* 409 */
	};
	json_auto_t *o = NULL;
	const char *cause;

	if (load(body, len, &o) < 0)
		return 0;
	cause = json_string_value(json_object_get(o, "cause"));
	for (size_t i = 0; cause && i < ARRAY_SIZE(tab); i++)
		if (strcmp(cause, tab[i].cause) == 0)
			return call == DOCKER_CALL_CREATE ? tab[i].create : tab[i].other;
	return 0;
}

int docker_ping_header(const char *line, size_t len, char *ret_api, size_t n, bool *ret_podman)
{
	static const char api[] = "api-version:", libpod[] = "libpod-api-version:";
	const char *v, *end = line + len;
	size_t k;

	if (len > sizeof(libpod) - 1 && strncasecmp(line, libpod, sizeof(libpod) - 1) == 0) {
		*ret_podman = true;
		return 0;
	}
	if (len <= sizeof(api) - 1 || strncasecmp(line, api, sizeof(api) - 1) != 0)
		return 0;
	v = line + sizeof(api) - 1;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
		end--;
	k = (size_t)(end - v);
	if (k == 0 || k >= n)
		return -EBADMSG;
	for (size_t i = 0; i < k; i++)
		if (!isdigit((unsigned char)v[i]) && v[i] != '.')
			return -EBADMSG;
	memcpy(ret_api, v, k);
	ret_api[k] = '\0';
	return 1;
}

enum rt_state docker_state_from_string(const char *s)
{
	static const struct {
		const char *word;
		enum rt_state state;
	} tab[] = {
		{ "created", RT_STATE_CREATED },
		{ "running", RT_STATE_RUNNING },
		{ "restarting", RT_STATE_RUNNING },
		{ "paused", RT_STATE_PAUSED },
		{ "exited", RT_STATE_EXITED },
		{ "dead", RT_STATE_EXITED },
		{ "removing", RT_STATE_EXITED },
		/* Podman's own words, which its Engine API passes on:
		 * "stopped" is exited and not yet cleaned up (the state until
		 * its conmon's exit command has run), "stopping" still has its
		 * processes, "configured" and "initialized" are a create that
		 * has not run yet */
		{ "stopped", RT_STATE_EXITED },
		{ "stopping", RT_STATE_RUNNING },
		{ "configured", RT_STATE_CREATED },
		{ "initialized", RT_STATE_CREATED },
	};

	if (s)
		for (size_t i = 0; i < ARRAY_SIZE(tab); i++)
			if (strcmp(s, tab[i].word) == 0)
				return tab[i].state;
	return RT_STATE_UNKNOWN;
}

int docker_json_parse_inspect(const char *body, size_t len, struct rt_status *ret,
			      struct nerr *err)
{
	json_auto_t *o = NULL;
	struct rt_status s = { 0 };
	json_int_t pid, code;
	const char *t;
	json_t *st;

	LOAD_OR_ENOMEM(o, body, len, err);
	st = json_object_get(o, "State");
	if (!json_is_object(st))
		return nerr_set(err, EBADMSG, "inspect reply without State");
	s.state = docker_state_from_string(json_string_value(json_object_get(st, "Status")));
	pid = json_integer_value(json_object_get(st, "Pid"));
	code = json_integer_value(json_object_get(st, "ExitCode"));
	if (pid < 0 || pid > INT_MAX || code < INT_MIN || code > INT_MAX)
		return nerr_set(err, EBADMSG, "inspect reply with a bad Pid or ExitCode");
	s.pid = (pid_t)pid;
	s.exit_code = (int)code;
	s.oom_killed = json_is_true(json_object_get(st, "OOMKilled"));
	s.memory_limited = json_integer_value(json_object_get(json_object_get(o, "HostConfig"),
							      "Memory")) > 0;
	t = json_string_value(json_object_get(st, "StartedAt"));
	if (t && docker_time_parse(t, &s.started_at) < 0)
		return nerr_set(err, EBADMSG, "inspect reply with a bad StartedAt");
	t = json_string_value(json_object_get(st, "FinishedAt"));
	if (t && docker_time_parse(t, &s.finished_at) < 0)
		return nerr_set(err, EBADMSG, "inspect reply with a bad FinishedAt");
	if (s.state != RT_STATE_RUNNING && s.state != RT_STATE_PAUSED)
		s.pid = 0;
	{
		/* the Healthcheck's: its streak and the newest probe's output */
		json_t *h = json_object_get(st, "Health"), *log;
		json_int_t fs;

		if (json_is_object(h)) {
			s.has_health = true;
			t = json_string_value(json_object_get(h, "Status"));
			if (t && (strcmp(t, "starting") == 0 || strcmp(t, "healthy") == 0 ||
				  strcmp(t, "unhealthy") == 0))
				snprintf(s.health_status, sizeof(s.health_status), "%s", t);
			fs = json_integer_value(json_object_get(h, "FailingStreak"));
			s.health_streak = fs > 0 && fs < 1000000 ? (unsigned)fs : 0;
			log = json_object_get(h, "Log");
			t = json_string_value(json_object_get(json_array_get(log,
					json_array_size(log) ? json_array_size(log) - 1 : 0), "Output"));
			if (t)
				copy_line(s.health_output, sizeof(s.health_output), t, strlen(t));
		}
	}
	*ret = s;
	return 0;
}

int docker_json_parse_ports(const char *body, size_t len, struct sbuf *out, struct nerr *err)
{
	json_auto_t *o = NULL;
	const char *key;
	json_t *ports, *v;

	LOAD_OR_ENOMEM(o, body, len, err);
	ports = json_object_get(json_object_get(o, "NetworkSettings"), "Ports");
	if (!json_is_object(ports))
		return 0;
	json_object_foreach(ports, key, v) {
		size_t i;
		json_t *b;

		if (!json_is_array(v))
			continue;	/* exposed, not published */
		json_array_foreach(v, i, b) {
			const char *ip = json_string_value(json_object_get(b, "HostIp"));
			const char *port = json_string_value(json_object_get(b, "HostPort"));
			bool v6 = ip && strchr(ip, ':');
			int r;

			if (!ip || !port || strlen(key) > 16 || strlen(ip) > 45 || strlen(port) > 5)
				return nerr_set(err, EBADMSG, "inspect reply with a bad NetworkSettings.Ports");
			r = sbuf_printf(out, "%s %s%s%s:%s\n", key, v6 ? "[" : "", ip[0] ? ip : "0.0.0.0",
					v6 ? "]" : "", port);
			if (r < 0)
				return nerr_set(err, -r, "out of memory");
		}
	}
	return 0;
}

int docker_json_parse_bind_sources(const char *body, size_t len, char ***ret, struct nerr *err)
{
	json_auto_t *o = NULL;
	json_t *binds, *b;
	char **v = NULL;
	size_t i, n = 0;

	LOAD_OR_ENOMEM(o, body, len, err);
	binds = json_object_get(json_object_get(o, "HostConfig"), "Binds");
	if (binds && !json_is_null(binds) && !json_is_array(binds))
		return nerr_set(err, EBADMSG, "inspect reply with a bad HostConfig.Binds");
	if (json_array_size(binds) == 0) {
		*ret = NULL;
		return 0;
	}
	v = calloc(json_array_size(binds) + 1, sizeof(*v));
	if (!v)
		return nerr_set(err, ENOMEM, "out of memory");
	json_array_foreach(binds, i, b) {
		const char *s = json_string_value(b), *colon = s ? strchr(s, ':') : NULL;

		if (!colon || colon == s) {
			for (size_t k = 0; k < n; k++)
				free(v[k]);
			free(v);
			return nerr_set(err, EBADMSG, "inspect reply with a bad bind");
		}
		if (s[0] != '/')
			continue;	/* a named volume, not a host path */
		v[n] = strndup(s, (size_t)(colon - s));
		if (!v[n]) {
			for (size_t k = 0; k < n; k++)
				free(v[k]);
			free(v);
			return nerr_set(err, ENOMEM, "out of memory");
		}
		n++;
	}
	*ret = v;
	return 0;
}

int docker_json_parse_exec_inspect(const char *body, size_t len, int *ret_exit_code,
				   bool *ret_running, struct nerr *err)
{
	json_auto_t *o = NULL;
	json_int_t c;
	json_t *code;

	LOAD_OR_ENOMEM(o, body, len, err);
	code = json_object_get(o, "ExitCode");
	if (!json_is_object(o))
		return nerr_set(err, EBADMSG, "malformed exec inspect reply");
	c = json_integer_value(code);
	if (c < INT_MIN || c > INT_MAX)
		return nerr_set(err, EBADMSG, "exec inspect reply with a bad ExitCode");
	*ret_running = json_is_true(json_object_get(o, "Running"));
	*ret_exit_code = json_is_integer(code) ? (int)c : -1;
	return 0;
}

/* rt_listing_free() without runtime.c, so fuzz targets link this file alone */
static void listing_free(struct rt_listing *l, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(l[i].id);
		free(l[i].name);
	}
	free(l);
}

/* "Exited (137) 5 seconds ago" -> 137 */
static int exit_code_from_status_text(const char *s)
{
	const char *p = s ? strstr(s, "Exited (") : NULL;

	return p ? atoi(p + 8) : 0;
}

int docker_json_parse_list(const char *body, size_t len, struct rt_listing **ret,
			   size_t *ret_n, struct nerr *err)
{
	return docker_json_parse_list_of(body, len, NULL, ret, ret_n, err);
}

int docker_json_parse_list_of(const char *body, size_t len, const char *instance,
			      struct rt_listing **ret, size_t *ret_n, struct nerr *err)
{
	json_auto_t *o = NULL;
	struct rt_listing *l;
	size_t n = 0, i;
	json_t *c;

	LOAD_OR_ENOMEM(o, body, len, err);
	if (!json_is_array(o))
		return nerr_set(err, EBADMSG, "container list reply is not an array");
	l = calloc(json_array_size(o) + 1, sizeof(*l));
	if (!l)
		return nerr_set(err, ENOMEM, "out of memory");
	json_array_foreach(o, i, c) {
		json_t *labels = json_object_get(c, "Labels");
		const char *id = json_string_value(json_object_get(c, "Id"));
		const char *owner = json_string_value(json_object_get(labels, RT_OWNER_LABEL));
		const char *name = json_string_value(json_object_get(labels, RT_NAME_LABEL));
		const char *inst = json_string_value(json_object_get(labels, RT_INSTANCE_LABEL));

		/* the filter asked the engine for ours; check again anyway (and
		 * leave out what nodefs runs for itself: plugins) */
		if (!id || !owner || strcmp(owner, "1") != 0 || !name ||
		    json_object_get(labels, RT_ROLE_LABEL) ||
		    (instance && (!inst || strcmp(inst, instance) != 0)))
			continue;
		l[n].id = dup_str(id);
		l[n].name = dup_str(name);
		if (!l[n].id || !l[n].name) {
			listing_free(l, n + 1);
			return nerr_set(err, ENOMEM, "out of memory");
		}
		l[n].status.state = docker_state_from_string(
			json_string_value(json_object_get(c, "State")));
		if (l[n].status.state == RT_STATE_EXITED)
			l[n].status.exit_code = exit_code_from_status_text(
				json_string_value(json_object_get(c, "Status")));
		n++;
	}
	*ret = l;
	*ret_n = n;
	return 0;
}

int docker_json_parse_event(const char *line, size_t len, struct rt_event *ret,
			    char *ret_id, size_t n)
{
	static const struct {
		const char *action;
		enum rt_event_kind kind;
	} tab[] = {
		{ "start", RT_EV_START },
		{ "die", RT_EV_DIE },
		{ "oom", RT_EV_OOM },
		{ "pause", RT_EV_PAUSE },
		{ "unpause", RT_EV_UNPAUSE },
		{ "destroy", RT_EV_DESTROY },
		{ "remove", RT_EV_DESTROY },	/* Podman's word for destroy */
	};
	json_auto_t *o = NULL;
	const char *type, *action, *id;
	json_t *actor, *attrs;
	struct rt_event ev = { 0 };
	size_t i;
	int r;

	r = load(line, len, &o);
	if (r < 0)
		return r;
	if (!json_is_object(o))
		return -EBADMSG;
	type = json_string_value(json_object_get(o, "Type"));
	action = json_string_value(json_object_get(o, "Action"));
	if (!action)	/* engines before 1.22 */
		action = json_string_value(json_object_get(o, "status"));
	if ((type && strcmp(type, "container") != 0) || !action)
		return 0;
	/* "health_status: healthy": the engine's own check (Healthcheck) */
	if (strncmp(action, "health_status: ", 15) == 0) {
		static const char *const states[] = { "healthy", "unhealthy", "starting" };

		for (i = 0; i < ARRAY_SIZE(states); i++)
			if (strcmp(action + 15, states[i]) == 0)
				ev.health = states[i];
		if (!ev.health)
			return 0;
		ev.kind = RT_EV_HEALTH;
	} else if (strcmp(action, "health_status") == 0) {
		/* Podman 4's: the state is in a member of its own,
		 * HealthStatus, and is the one from before the check that
		 * sent it (its first check's event says "starting" whatever
		 * the check found): no word is taken from it, the inspect its
		 * sync makes says where the check stands */
		ev.kind = RT_EV_HEALTH;
	} else {
		for (i = 0; i < ARRAY_SIZE(tab); i++)
			if (strcmp(action, tab[i].action) == 0)
				break;
		if (i == ARRAY_SIZE(tab))
			return 0;
		ev.kind = tab[i].kind;
	}
	actor = json_object_get(o, "Actor");
	attrs = json_object_get(actor, "Attributes");
	id = json_string_value(json_object_get(actor, "ID"));
	if (!id)
		id = json_string_value(json_object_get(o, "id"));
	if (!id || !*id || strlen(id) >= n)
		return -EBADMSG;
	strcpy(ret_id, id);
	ev.id = ret_id;
	ev.time = (time_t)json_integer_value(json_object_get(o, "time"));
	ev.time_ns = (int64_t)json_integer_value(json_object_get(o, "timeNano"));
	if (ev.kind == RT_EV_DIE) {
		const char *code = json_string_value(json_object_get(attrs, "exitCode"));
		char *end;
		long c;

		if (!code)
			return -EBADMSG;
		errno = 0;
		c = strtol(code, &end, 10);
		if (errno || end == code || *end || c < INT_MIN || c > INT_MAX)
			return -EBADMSG;
		ev.exit_code = (int)c;
	}
	*ret = ev;
	return 1;
}

int docker_json_parse_pull_line(const char *line, size_t len, char *buf, size_t n)
{
	json_auto_t *o = NULL;
	const char *e, *status, *id, *progress;
	int r;

	r = load(line, len, &o);
	if (r < 0)
		return r;
	if (!json_is_object(o))
		return -EBADMSG;
	e = json_string_value(json_object_get(o, "error"));
	if (!e)
		e = json_string_value(json_object_get(json_object_get(o, "errorDetail"), "message"));
	if (!e)	/* an error reply before the stream began: {"message": ...} */
		e = json_string_value(json_object_get(o, "message"));
	if (e) {
		copy_line(buf, n, e, strlen(e));
		return -ENOENT;
	}
	status = json_string_value(json_object_get(o, "status"));
	id = json_string_value(json_object_get(o, "id"));
	progress = json_string_value(json_object_get(o, "progress"));
	if (n) {
		char tmp[1024];

		snprintf(tmp, sizeof(tmp), "%s%s%s%s%s", id ? id : "", id ? ": " : "",
			 status ? status : "", progress ? " " : "", progress ? progress : "");
		copy_line(buf, n, tmp, strlen(tmp));
	}
	return 0;
}
