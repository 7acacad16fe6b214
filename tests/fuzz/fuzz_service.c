/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_service: the port, CIDR, address, network, health and restart
 * specs (backend/containers/service-spec.c, backend/supervise/restart.c)
 * on arbitrary text. Aborts when an invariant breaks: an accepted port is
 * in range and formats to a line that parses back to itself; an accepted
 * restart policy formats back to the same policy; every failure carries
 * EINVAL and one line of text; sanitizers catch the rest.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nerr.h"
#include "restart.h"
#include "runtime.h"
#include "service-spec.h"

static void check_err(const struct nerr *e, int r)
{
	if (r != -EINVAL && r != -ENOMEM)
		abort();
	if (e->code != -r || !e->msg[0] || strchr(e->msg, '\n'))
		abort();
}

static void one(const char *s)
{
	struct nerr e = { 0 };
	struct rt_port p, q, v[2];
	struct restart_policy rp, rq;
	struct svc_health h = { 0 };
	const char *veth;
	char buf[600];
	unsigned len;
	bool v6;
	int r;

	if ((r = svc_port_parse(s, &p, &e)) < 0) {
		check_err(&e, r);
	} else {
		if (p.port < 1 || p.port > 65535 || p.host_port > 65535)
			abort();
		/* "PORT/PROTO IP:HOSTPORT" back into the spec syntax */
		char spec[128];
		bool six = strchr(p.host_ip, ':') != NULL;

		snprintf(spec, sizeof(spec), "%s%s%s%s%u:%u/%s", six ? "[" : "", p.host_ip,
			 six ? "]" : "", p.host_ip[0] ? ":" : "", p.host_port, p.port,
			 p.udp ? "udp" : "tcp");
		if (svc_port_parse(spec, &q, NULL) < 0 || memcmp(&p, &q, sizeof(p)) != 0)
			abort();
		svc_port_format(&p, buf, sizeof(buf));
		v[0] = p;
		v[1] = p;
		if (p.host_port && svc_ports_check(v, 2, &e) != -EINVAL)
			abort();
	}
	e = (struct nerr){ 0 };
	if ((r = svc_cidr_parse(s, &v6, &len, &e)) < 0)
		check_err(&e, r);
	else if (len > (v6 ? 128u : 32u))
		abort();
	e = (struct nerr){ 0 };
	if ((r = svc_ip_parse(s, &v6, &e)) < 0)
		check_err(&e, r);
	for (int lxc = 0; lxc < 2; lxc++) {
		e = (struct nerr){ 0 };
		veth = NULL;
		if ((r = svc_network_parse(s, lxc, &veth, &e)) < 0)
			check_err(&e, r);
		else if (veth && (!lxc || strlen(veth) > 15))
			abort();
	}
	e = (struct nerr){ 0 };
	if ((r = restart_policy_parse(s, &rp, &e)) < 0) {
		check_err(&e, r);
	} else {
		restart_policy_format(&rp, buf, sizeof(buf));
		if (restart_policy_parse(buf, &rq, NULL) < 0 || rq.mode != rp.mode || rq.max != rp.max)
			abort();
	}
	e = (struct nerr){ 0 };
	if ((r = svc_health_parse(s, &h, &e)) < 0) {
		check_err(&e, r);
	} else {
		if ((h.kind == SVC_HEALTH_CMD) != (h.argv != NULL))
			abort();
		svc_health_format(&h, buf, sizeof(buf));
	}
	e = (struct nerr){ 0 };
	if ((r = svc_health_set(&h, "health_interval", s, &e)) < 0)
		check_err(&e, r);
	else if (h.interval_ms < 10)
		abort();
	svc_health_free(&h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	one(s);
	free(s);
	return 0;
}
