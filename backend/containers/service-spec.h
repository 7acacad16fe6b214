/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * service-spec: the syntax of what makes a container a service: network=,
 * port=, ip=, gateway=, health= and its timings, parsed and checked as pure
 * functions (unit-tested in unit-backend-service, fuzzed by
 * fuzz-replay-service). restart= is supervise/restart.h's.
 *
 * Must not know containers, engines or the ctl line: it is handed strings
 * and hands back values (struct rt_port is runtime.h's, what a driver takes).
 */
#ifndef NODEFS_SERVICE_SPEC_H
#define NODEFS_SERVICE_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nerr;
struct rt_port;

/* [IP:]HOSTPORT:PORT[/tcp|/udp]: IP an IPv4 address or [IPv6], HOSTPORT
 * 0..65535 (0: the engine chooses), PORT 1..65535. -EINVAL with err. */
int svc_port_parse(const char *s, struct rt_port *ret, struct nerr *err);
/* No two bindings of one host port (same protocol, a non-zero host port,
 * addresses that overlap: equal, or either one every address). -EINVAL. */
int svc_ports_check(const struct rt_port *v, size_t n, struct nerr *err);
/* "80/tcp 127.0.0.1:49153" as the ports file writes a binding. */
void svc_port_format(const struct rt_port *p, char *buf, size_t len);

/* An IPv4 or IPv6 address (gateway=). -EINVAL. */
int svc_ip_parse(const char *s, bool *ret_v6, struct nerr *err);
/* ADDRESS/LEN (ip=): LEN 0..32 for IPv4, 0..128 for IPv6. -EINVAL. */
int svc_cidr_parse(const char *s, bool *ret_v6, unsigned *ret_len, struct nerr *err);

/* network= for runtime lxc (none, host, veth:BRIDGE) or not (none, host,
 * bridge, NAME: a Docker network's name). -EINVAL. *ret_veth: the
 * BRIDGE of veth:BRIDGE (borrowed from s), NULL otherwise. */
int svc_network_parse(const char *s, bool lxc, const char **ret_veth, struct nerr *err);

enum svc_health_kind { SVC_HEALTH_NONE, SVC_HEALTH_CMD, SVC_HEALTH_HTTP, SVC_HEALTH_TCP };

struct svc_health {
	enum svc_health_kind kind;
	char **argv;		/* cmd: NULL-terminated, malloc'd (svc_health_free) */
	unsigned port;		/* http, tcp */
	char path[256];		/* http: starts with '/' */
	uint64_t interval_ms, timeout_ms, start_period_ms;
	unsigned retries;
	bool restart;		/* health_restart=yes */
};

#define SVC_HEALTH_INTERVAL_MS 30000	/* Docker's defaults */
#define SVC_HEALTH_TIMEOUT_MS 30000
#define SVC_HEALTH_RETRIES 3

/* 'cmd ARGV ...', 'http PORT PATH' or 'tcp PORT' into h (kind, argv,
 * port, path; the timings set to the defaults). -EINVAL, -ENOMEM. */
int svc_health_parse(const char *s, struct svc_health *h, struct nerr *err);
/* health_interval=, health_timeout=, health_start_period= (durations:
 * "500ms", "5s"; interval and timeout at least 10 ms, at most a day) and
 * health_retries= (1..100). key is the option's name. -EINVAL. */
int svc_health_set(struct svc_health *h, const char *key, const char *val, struct nerr *err);
/* An http or tcp check's port must be one the container publishes or
 * exposes (a port= of its, tcp), unless it shares the host's network.
 * -EINVAL. */
int svc_health_check_port(const struct svc_health *h, const struct rt_port *v, size_t n,
			  bool host_network, struct nerr *err);
void svc_health_free(struct svc_health *h);
/* The spec as health= reads it back ("http 80 /"), for records. */
int svc_health_format(const struct svc_health *h, char *buf, size_t len);

#endif
