/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * service-spec: network=, port=, ip=, gateway= and health= parsed and
 * checked; see service-spec.h. Pure functions of their arguments.
 */
#include "service-spec.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "nerr.h"
#include "runtime.h"
#include "units.h"

/* A decimal number of at most 5 digits, no sign, lo..hi. */
static int port_num(const char *s, size_t len, unsigned lo, unsigned hi, unsigned *ret)
{
	unsigned v = 0;

	if (len == 0 || len > 5)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v < lo || v > hi)
		return -ERANGE;
	*ret = v;
	return 0;
}

int svc_ip_parse(const char *s, bool *ret_v6, struct nerr *err)
{
	unsigned char buf[16];

	if (s && inet_pton(AF_INET, s, buf) == 1) {
		if (ret_v6)
			*ret_v6 = false;
		return 0;
	}
	if (s && inet_pton(AF_INET6, s, buf) == 1) {
		if (ret_v6)
			*ret_v6 = true;
		return 0;
	}
	return nerr_set(err, EINVAL, "'%.64s' is not an IPv4 or IPv6 address", s ? s : "");
}

int svc_cidr_parse(const char *s, bool *ret_v6, unsigned *ret_len, struct nerr *err)
{
	char addr[64];
	const char *slash = s ? strchr(s, '/') : NULL;
	unsigned len;
	bool v6;

	if (!slash || (size_t)(slash - s) >= sizeof(addr))
		return nerr_set(err, EINVAL, "ip=%.64s: expected ADDRESS/LEN (10.0.3.2/24)", s ? s : "");
	memcpy(addr, s, (size_t)(slash - s));
	addr[slash - s] = '\0';
	if (svc_ip_parse(addr, &v6, NULL) < 0)
		return nerr_set(err, EINVAL, "ip=%.64s: '%s' is not an IPv4 or IPv6 address", s, addr);
	if (port_num(slash + 1, strlen(slash + 1), 0, v6 ? 128 : 32, &len) < 0 ||
	    (slash[1] == '0' && slash[2]))
		return nerr_set(err, EINVAL, "ip=%.64s: the prefix length is not 0..%u", s, v6 ? 128 : 32);
	if (ret_v6)
		*ret_v6 = v6;
	if (ret_len)
		*ret_len = len;
	return 0;
}

int svc_port_parse(const char *s, struct rt_port *ret, struct nerr *err)
{
	struct rt_port p = { 0 };
	const char *end, *proto, *c1, *hp;
	char ip[64] = "";
	int r;

	if (!s || !*s)
		return nerr_set(err, EINVAL, "port=: empty (expected [IP:]HOSTPORT:PORT[/tcp|/udp])");
	proto = strchr(s, '/');
	end = proto ? proto : s + strlen(s);
	if (proto) {
		if (strcmp(proto, "/udp") == 0)
			p.udp = true;
		else if (strcmp(proto, "/tcp") != 0)
			return nerr_set(err, EINVAL, "port=%.80s: protocol is not tcp or udp", s);
	}
	if (s[0] == '[') {		/* [IPv6]:HOSTPORT:PORT */
		const char *rb = memchr(s, ']', (size_t)(end - s));

		if (!rb || rb[1] != ':' || (size_t)(rb - s - 1) >= sizeof(ip))
			return nerr_set(err, EINVAL, "port=%.80s: expected [IPv6]:HOSTPORT:PORT", s);
		memcpy(ip, s + 1, (size_t)(rb - s - 1));
		ip[rb - s - 1] = '\0';
		hp = rb + 2;
		if (inet_pton(AF_INET6, ip, (unsigned char[16]){ 0 }) != 1)
			return nerr_set(err, EINVAL, "port=%.80s: '%s' is not an IPv6 address", s, ip);
	} else {
		/* one colon: HOSTPORT:PORT; two: IP:HOSTPORT:PORT */
		const char *a = memchr(s, ':', (size_t)(end - s));
		const char *b2 = a ? memchr(a + 1, ':', (size_t)(end - a - 1)) : NULL;

		if (!a)
			return nerr_set(err, EINVAL, "port=%.80s: expected [IP:]HOSTPORT:PORT[/tcp|/udp]", s);
		if (b2) {
			if ((size_t)(a - s) >= sizeof(ip) || memchr(b2 + 1, ':', (size_t)(end - b2 - 1)))
				return nerr_set(err, EINVAL, "port=%.80s: expected [IP:]HOSTPORT:PORT", s);
			memcpy(ip, s, (size_t)(a - s));
			ip[a - s] = '\0';
			if (inet_pton(AF_INET, ip, (unsigned char[4]){ 0 }) != 1)
				return nerr_set(err, EINVAL, "port=%.80s: '%s' is not an IPv4 address "
						"(IPv6 in brackets)", s, ip);
			hp = a + 1;
		} else {
			hp = s;
		}
	}
	c1 = memchr(hp, ':', (size_t)(end - hp));
	if (!c1)
		return nerr_set(err, EINVAL, "port=%.80s: expected [IP:]HOSTPORT:PORT[/tcp|/udp]", s);
	r = port_num(hp, (size_t)(c1 - hp), 0, 65535, &p.host_port);
	if (r < 0)
		return nerr_set(err, EINVAL, "port=%.80s: HOSTPORT is not 0..65535", s);
	r = port_num(c1 + 1, (size_t)(end - c1 - 1), 1, 65535, &p.port);
	if (r < 0)
		return nerr_set(err, EINVAL, "port=%.80s: PORT is not 1..65535", s);
	snprintf(p.host_ip, sizeof(p.host_ip), "%s", ip);
	*ret = p;
	return 0;
}

static bool any_addr(const char *ip)
{
	return !ip[0] || strcmp(ip, "0.0.0.0") == 0 || strcmp(ip, "::") == 0;
}

int svc_ports_check(const struct rt_port *v, size_t n, struct nerr *err)
{
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < i; k++) {
			if (!v[i].host_port || v[i].host_port != v[k].host_port || v[i].udp != v[k].udp)
				continue;
			if (any_addr(v[i].host_ip) || any_addr(v[k].host_ip) ||
			    strcmp(v[i].host_ip, v[k].host_ip) == 0)
				return nerr_set(err, EINVAL, "port=: host port %u/%s is bound twice",
						v[i].host_port, v[i].udp ? "udp" : "tcp");
		}
	return 0;
}

void svc_port_format(const struct rt_port *p, char *buf, size_t len)
{
	bool v6 = strchr(p->host_ip, ':') != NULL;

	snprintf(buf, len, "%u/%s %s%s%s:%u", p->port, p->udp ? "udp" : "tcp", v6 ? "[" : "",
		 p->host_ip[0] ? p->host_ip : "0.0.0.0", v6 ? "]" : "", p->host_port);
}

/* A Docker network name: [A-Za-z0-9][A-Za-z0-9_.-]*, at most 64. */
static bool docker_net_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 64)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');

		if (!alnum && (i == 0 || (c != '_' && c != '.' && c != '-')))
			return false;
	}
	return true;
}

/* A Linux interface name: 1..15 bytes, no '/', ':', space, not . or .. */
static bool ifname_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 15 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] == '/' || s[i] == ':' || (unsigned char)s[i] <= ' ' || s[i] == 0x7f)
			return false;
	return true;
}

int svc_network_parse(const char *s, bool lxc, const char **ret_veth, struct nerr *err)
{
	const char *veth = NULL;

	if (!s || !*s)
		return nerr_set(err, EINVAL, "network=: empty");
	if (strcmp(s, "none") == 0 || strcmp(s, "host") == 0) {
		;
	} else if (lxc) {
		if (strncmp(s, "veth:", 5) != 0)
			return nerr_set(err, EINVAL, "network=%.64s: expected none, host or veth:BRIDGE "
					"for runtime=lxc", s);
		if (!ifname_ok(s + 5))
			return nerr_set(err, EINVAL, "network=%.64s: '%s' is not an interface name "
					"(1 to 15 bytes, no '/', ':' or space)", s, s + 5);
		veth = s + 5;
	} else if (!docker_net_name(s)) {
		return nerr_set(err, EINVAL, "network=%.64s: expected none, host, bridge or a network's "
				"name ([A-Za-z0-9][A-Za-z0-9_.-]*)", s);
	}
	if (ret_veth)
		*ret_veth = veth;
	return 0;
}

void svc_health_free(struct svc_health *h)
{
	ctl_strv_free(h->argv);
	h->argv = NULL;
}

int svc_health_parse(const char *s, struct svc_health *h, struct nerr *err)
{
	struct svc_health n = { .interval_ms = SVC_HEALTH_INTERVAL_MS,
				.timeout_ms = SVC_HEALTH_TIMEOUT_MS, .retries = SVC_HEALTH_RETRIES,
				.restart = h->restart };
	char **w = NULL;
	size_t nw = 0;
	int r;

	r = ctl_split_words(s ? s : "", &w, err);
	if (r < 0) {
		nerr_prefix(err, "health");
		return -EINVAL;
	}
	while (w[nw])
		nw++;
	if (nw == 0) {
		r = nerr_set(err, EINVAL, "health=: empty (expected 'cmd ARGV ...', 'http PORT PATH' or 'tcp PORT')");
	} else if (strcmp(w[0], "cmd") == 0) {
		if (nw < 2) {
			r = nerr_set(err, EINVAL, "health='cmd': no command");
		} else {
			n.kind = SVC_HEALTH_CMD;
			free(w[0]);
			memmove(w, w + 1, nw * sizeof(*w));	/* the NULL too */
			n.argv = w;
			w = NULL;
		}
	} else if (strcmp(w[0], "http") == 0 || strcmp(w[0], "tcp") == 0) {
		bool http = w[0][0] == 'h';

		n.kind = http ? SVC_HEALTH_HTTP : SVC_HEALTH_TCP;
		if (nw != (http ? 3u : 2u))
			r = nerr_set(err, EINVAL, "health='%s': expected '%s'", w[0],
				     http ? "http PORT PATH" : "tcp PORT");
		else if (port_num(w[1], strlen(w[1]), 1, 65535, &n.port) < 0)
			r = nerr_set(err, EINVAL, "health='%s %.16s': PORT is not 1..65535", w[0], w[1]);
		else if (http && (w[2][0] != '/' || strlen(w[2]) >= sizeof(n.path) ||
				  strpbrk(w[2], " \t\r\n") != NULL))
			r = nerr_set(err, EINVAL, "health='http': PATH must start with '/', without "
				     "spaces, under %zu bytes", sizeof(n.path));
		else if (http)
			snprintf(n.path, sizeof(n.path), "%s", w[2]);
	} else {
		r = nerr_set(err, EINVAL, "health='%.32s ...': expected cmd, http or tcp", w[0]);
	}
	ctl_strv_free(w);
	if (r < 0) {
		svc_health_free(&n);
		return r;
	}
	n.interval_ms = h->interval_ms ? h->interval_ms : n.interval_ms;
	n.timeout_ms = h->timeout_ms ? h->timeout_ms : n.timeout_ms;
	n.retries = h->retries ? h->retries : n.retries;
	n.start_period_ms = h->start_period_ms;
	svc_health_free(h);
	*h = n;
	return 0;
}

int svc_health_set(struct svc_health *h, const char *key, const char *val, struct nerr *err)
{
	uint64_t ms;
	long long v;

	if (strcmp(key, "health_retries") == 0) {
		if (parse_int(val, 1, 100, &v, NULL) < 0 || val[0] == '+' || val[0] == '-')
			return nerr_set(err, EINVAL, "health_retries=%.32s: not a number from 1 to 100", val);
		h->retries = (unsigned)v;
		return 0;
	}
	if (parse_duration_ms(val, &ms, NULL) < 0)
		return nerr_set(err, EINVAL, "%s=%.32s: not a duration (500ms, 5s, 1m)", key, val);
	if (strcmp(key, "health_start_period") == 0) {
		if (ms > 86400000ull)
			return nerr_set(err, EINVAL, "%s=%.32s: at most a day", key, val);
		h->start_period_ms = ms;
		return 0;
	}
	if (ms < 10 || ms > 86400000ull)
		return nerr_set(err, EINVAL, "%s=%.32s: from 10ms to a day", key, val);
	if (strcmp(key, "health_interval") == 0)
		h->interval_ms = ms;
	else if (strcmp(key, "health_timeout") == 0)
		h->timeout_ms = ms;
	else
		return nerr_set(err, EINVAL, "%s: not a health option", key);
	return 0;
}

int svc_health_check_port(const struct svc_health *h, const struct rt_port *v, size_t n,
			  bool host_network, struct nerr *err)
{
	if (h->kind != SVC_HEALTH_HTTP && h->kind != SVC_HEALTH_TCP)
		return 0;
	if (host_network)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!v[i].udp && v[i].port == h->port)
			return 0;
	return nerr_set(err, EINVAL, "health: port %u is not published or exposed (give port=...:%u)",
			h->port, h->port);
}

int svc_health_format(const struct svc_health *h, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	switch (h->kind) {
	case SVC_HEALTH_HTTP:
		return snprintf(buf, len, "http %u %s", h->port, h->path) < (int)len ? 0 : -E2BIG;
	case SVC_HEALTH_TCP:
		return snprintf(buf, len, "tcp %u", h->port) < (int)len ? 0 : -E2BIG;
	case SVC_HEALTH_CMD:
		off = (size_t)snprintf(buf, len, "cmd");
		for (size_t i = 0; h->argv && h->argv[i] && off < len; i++)
			off += (size_t)snprintf(buf + off, len - off, " %s", h->argv[i]);
		return off < len ? 0 : -E2BIG;
	default:
		return 0;
	}
}
