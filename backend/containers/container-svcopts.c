/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * container-svcopts: the kinds of value the service's rows of the option
 * table name (network=, port=, restart=, health= and health_*), and the
 * check of what they ask together once a line is parsed. The syntax
 * itself is service-spec.c's and restart.c's; this file only puts it in
 * the table's shape (parse, write, read, free of a struct cspec field).
 *
 * Must not know engines, files or the container object.
 */
#include "container-options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ctl.h"
#include "jw.h"
#include "nerr.h"
#include "units.h"

#define FIELD(T, f) ((T *)(f))

static const char *json_key(const struct copt *o)
{
	return o->json ? o->json : o->name;
}

static void none_free(void *f)
{
}

static void nothing_write(const struct copt *o, const void *f, struct jw *w, bool redact)
{
}

static void nothing_read(const struct copt *o, json_t *rec, void *f)
{
}

/* ---- network= (its syntax depends on the runtime) ---- */

static int network_parse(const struct copt *o, const char *key, const char *val, void *f,
			 const struct copt_ctx *x, struct nerr *err)
{
	char **p = f;
	int r = svc_network_parse(val, x->runtime == COPT_LXC, NULL, err);

	if (r < 0)
		return r;
	free(*p);
	*p = strdup(val);
	return *p ? 0 : nerr_set(err, ENOMEM, "out of memory");
}

static void network_write(const struct copt *o, const void *f, struct jw *w, bool redact)
{
	if (*FIELD(char *const, f))
		jw_kstr(w, json_key(o), *FIELD(char *const, f));
}

static void network_read(const struct copt *o, json_t *rec, void *f)
{
	const char *s = json_string_value(json_object_get(rec, json_key(o)));

	if (s && s[0])
		*FIELD(char *, f) = strdup(s);
}

static void network_free(void *f)
{
	free(*FIELD(char *, f));
}

const struct copt_kind copt_network = { network_parse, network_write, network_read, network_free };

int copt_check_cidr(const char *key, const char *val, struct nerr *err)
{
	return svc_cidr_parse(val, NULL, NULL, err);
}

int copt_check_ip(const char *key, const char *val, struct nerr *err)
{
	int r = svc_ip_parse(val, NULL, err);

	if (r < 0)
		nerr_prefix(err, "%s", key);
	return r;
}

/* ---- port= ---- */

static int port_parse(const struct copt *o, const char *key, const char *val, void *f,
		      const struct copt_ctx *x, struct nerr *err)
{
	struct cports *ps = f;
	struct rt_port p, *nv;
	int r = svc_port_parse(val, &p, err);

	if (r < 0)
		return r;
	nv = realloc(ps->v, (ps->n + 1) * sizeof(*nv));
	if (!nv)
		return nerr_set(err, ENOMEM, "out of memory");
	ps->v = nv;
	nv[ps->n++] = p;
	return 0;
}

static void port_write(const struct copt *o, const void *f, struct jw *w, bool redact)
{
	const struct cports *ps = f;

	if (!ps->n)
		return;
	jw_key(w, "ports");
	jw_arr(w);
	for (size_t i = 0; i < ps->n; i++) {
		jw_obj(w);
		jw_kstr(w, "host_ip", ps->v[i].host_ip);
		jw_kint(w, "host_port", ps->v[i].host_port);
		jw_kint(w, "port", ps->v[i].port);
		jw_kstr(w, "proto", ps->v[i].udp ? "udp" : "tcp");
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

static void port_read(const struct copt *o, json_t *rec, void *f)
{
	struct cports *ps = f;
	json_t *a = json_object_get(rec, "ports"), *v;
	const char *s;
	size_t i;

	if (!json_array_size(a) || !(ps->v = calloc(json_array_size(a), sizeof(*ps->v))))
		return;
	json_array_foreach(a, i, v) {
		struct rt_port *p = &ps->v[ps->n++];

		snprintf(p->host_ip, sizeof(p->host_ip), "%s",
			 json_string_value(json_object_get(v, "host_ip")) ?: "");
		p->host_port = (unsigned)json_integer_value(json_object_get(v, "host_port"));
		p->port = (unsigned)json_integer_value(json_object_get(v, "port"));
		p->udp = (s = json_string_value(json_object_get(v, "proto"))) && strcmp(s, "udp") == 0;
	}
}

static void port_free(void *f)
{
	free(FIELD(struct cports, f)->v);
}

const struct copt_kind copt_port = { port_parse, port_write, port_read, port_free };

/* ---- restart= ---- */

static int restart_parse(const struct copt *o, const char *key, const char *val, void *f,
			 const struct copt_ctx *x, struct nerr *err)
{
	return restart_policy_parse(val, f, err);
}

static void restart_write(const struct copt *o, const void *f, struct jw *w, bool redact)
{
	char buf[32];

	restart_policy_format(f, buf, sizeof(buf));
	jw_kstr(w, json_key(o), buf);
}

static void restart_read(const struct copt *o, json_t *rec, void *f)
{
	const char *s = json_string_value(json_object_get(rec, json_key(o)));

	if (s)
		restart_policy_parse(s, f, NULL);
}

const struct copt_kind copt_restart = { restart_parse, restart_write, restart_read, none_free };

/* ---- health= (the whole struct svc_health in the record) ---- */

static int health_parse(const struct copt *o, const char *key, const char *val, void *f,
			const struct copt_ctx *x, struct nerr *err)
{
	return svc_health_parse(val, f, err);
}

static const char *const hkinds[] = { "none", "cmd", "http", "tcp" };

static void health_write(const struct copt *o, const void *f, struct jw *w, bool redact)
{
	const struct svc_health *h = f;

	if (h->kind == SVC_HEALTH_NONE)
		return;
	jw_key(w, "health");
	jw_obj(w);
	jw_kstr(w, "kind", hkinds[h->kind]);
	if (h->argv)
		jw_kstrv(w, "cmd", h->argv);
	jw_kint(w, "port", h->port);
	jw_kstr(w, "path", h->path);
	jw_kint(w, "interval_ms", (long long)h->interval_ms);
	jw_kint(w, "timeout_ms", (long long)h->timeout_ms);
	jw_kint(w, "start_period_ms", (long long)h->start_period_ms);
	jw_kint(w, "retries", h->retries);
	jw_kbool(w, "restart", h->restart);
	jw_obj_end(w);
}

static void health_read(const struct copt *o, json_t *rec, void *f)
{
	struct svc_health *h = f;
	json_t *v = json_object_get(rec, "health"), *a, *e;
	const char *s = json_string_value(json_object_get(v, "kind"));
	size_t i;

	if (!s)
		return;
	for (int k = 1; k < 4; k++)
		if (strcmp(s, hkinds[k]) == 0)
			h->kind = k;
	a = json_object_get(v, "cmd");
	if (h->kind == SVC_HEALTH_CMD && (h->argv = calloc(json_array_size(a) + 1, sizeof(char *))))
		json_array_foreach(a, i, e)
			h->argv[i] = strdup(json_string_value(e) ?: "");
	h->port = (unsigned)json_integer_value(json_object_get(v, "port"));
	snprintf(h->path, sizeof(h->path), "%s", json_string_value(json_object_get(v, "path")) ?: "/");
	h->interval_ms = (uint64_t)json_integer_value(json_object_get(v, "interval_ms"));
	h->timeout_ms = (uint64_t)json_integer_value(json_object_get(v, "timeout_ms"));
	h->start_period_ms = (uint64_t)json_integer_value(json_object_get(v, "start_period_ms"));
	h->retries = (unsigned)json_integer_value(json_object_get(v, "retries"));
	h->restart = json_is_true(json_object_get(v, "restart"));
	if (!h->interval_ms)
		h->interval_ms = SVC_HEALTH_INTERVAL_MS;
	if (!h->timeout_ms)
		h->timeout_ms = SVC_HEALTH_TIMEOUT_MS;
	if (!h->retries)
		h->retries = SVC_HEALTH_RETRIES;
}

static void health_free(void *f)
{
	svc_health_free(f);
}

const struct copt_kind copt_health = { health_parse, health_write, health_read, health_free };

/* health_interval=, health_timeout=, health_retries=, health_start_period=,
 * health_restart=: one member of the struct health= owns */
static int health_opt_parse(const struct copt *o, const char *key, const char *val, void *f,
			    const struct copt_ctx *x, struct nerr *err)
{
	struct svc_health *h = f;

	if (strcmp(key, "health_restart") == 0) {
		if (parse_bool(val, &h->restart, err) < 0) {
			nerr_prefix(err, "%s", key);
			return -EINVAL;
		}
		return 0;
	}
	return svc_health_set(h, key, val, err);
}

const struct copt_kind copt_health_opt = { health_opt_parse, nothing_write, nothing_read, none_free };

/* ---- together ---- */

int copts_check_service(const struct cspec *s, unsigned runtime, struct nerr *err)
{
	bool lxc = runtime == COPT_LXC;
	bool veth = s->network && strncmp(s->network, "veth:", 5) == 0;
	bool host = s->network && strcmp(s->network, "host") == 0;
	const struct svc_health *h = &s->health;
	int r;

	if ((s->ip || s->gateway) && !veth)
		return nerr_set(err, EINVAL, "%s=: only with network=veth:BRIDGE",
				s->ip ? "ip" : "gateway");
	if ((r = svc_ports_check(s->ports.v, s->ports.n, err)) < 0)
		return r;
	if (h->kind == SVC_HEALTH_NONE) {
		if (h->interval_ms || h->timeout_ms || h->retries || h->start_period_ms || h->restart)
			return nerr_set(err, EINVAL, "health_*=: no health= check to set");
		return 0;
	}
	/* LXC's checks are made in the container's own network namespace:
	 * any port of its is reachable */
	return svc_health_check_port(h, s->ports.v, s->ports.n, host || lxc, err);
}
