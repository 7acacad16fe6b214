/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of what makes a container a service: the restart policy and
 * its state machine (backend/supervise/restart.c, shared with the plugin
 * supervisor) and the network=, port=, ip=, gateway=, health= parsers
 * (backend/containers/service-spec.c). Pure functions: no daemon.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "nerr.h"
#include "restart.h"
#include "runtime.h"
#include "service-spec.h"

Test(restart, parse)
{
	struct restart_policy p;
	struct nerr e = { 0 };
	char buf[32];

	cr_assert_eq(restart_policy_parse("no", &p, &e), 0);
	cr_assert_eq(p.mode, RESTART_NO);
	cr_assert_eq(restart_policy_parse("on-failure", &p, &e), 0);
	cr_assert_eq(p.mode, RESTART_ON_FAILURE);
	cr_assert_eq(p.max, 0);
	cr_assert_eq(restart_policy_parse("on-failure:3", &p, &e), 0);
	cr_assert_eq(p.max, 3);
	restart_policy_format(&p, buf, sizeof(buf));
	cr_assert_str_eq(buf, "on-failure:3");
	cr_assert_eq(restart_policy_parse("always", &p, &e), 0);
	cr_assert_eq(p.mode, RESTART_ALWAYS);
	cr_assert_eq(restart_policy_parse("unless-stopped", &p, &e), 0);
	cr_assert_eq(p.mode, RESTART_UNLESS_STOPPED);
	p.mode = RESTART_ALWAYS;
	p.max = 0;
	/* a MAX that is not a number, and junk: EINVAL, *ret untouched */
	const char *bad[] = { "on-failure:", "on-failure:x", "on-failure:-1", "on-failure:+2",
			      "on-failure:0", "on-failure:3x", "on-failurex", "On-failure", "yes",
			      "", "always:2", "on-failure:99999999999" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(restart_policy_parse(bad[i], &p, &e), -EINVAL, "'%s'", bad[i]);
		cr_assert_eq(p.mode, RESTART_ALWAYS);
	}
	restart_policy_parse("on-failure:x", &p, &e);
	cr_assert(strstr(e.msg, "MAX is not a number"), "%s", e.msg);
}

Test(restart, backoff_doubles_within_bounds)
{
	struct backoff bo;
	uint64_t prev_hi = 0;

	backoff_init(&bo, 100, 1000, 42);
	for (unsigned i = 1; i <= 8; i++) {
		uint64_t hi = 100u << (i - 1) > 1000 ? 1000 : 100u << (i - 1);
		uint64_t d = backoff_next(&bo);

		cr_assert(d >= hi / 2 && d <= hi, "attempt %u: %llu not in [%llu, %llu]", i,
			  (unsigned long long)d, (unsigned long long)hi / 2, (unsigned long long)hi);
		cr_assert(hi >= prev_hi);
		prev_hi = hi;
	}
	cr_assert_not(backoff_ran(&bo, 999));
	cr_assert(backoff_ran(&bo, 1000));
	cr_assert_eq(bo.attempt, 0);
	cr_assert_leq(backoff_next(&bo), 100);
}

static struct restart_exit ex_code(int code)
{
	return (struct restart_exit){ .code = code };
}

Test(restart, on_failure_max_then_final)
{
	struct restart_policy p = { RESTART_ON_FAILURE, 3 };
	struct restart_state st = { 0 };
	struct restart_exit one = ex_code(1);
	struct backoff bo;
	uint64_t d = 0, last = 0;

	backoff_init(&bo, 100, 100000, 7);
	for (unsigned i = 1; i <= 3; i++) {
		cr_assert_eq(restart_decide(&p, &st, &bo, &one, 5000, &d), RESTART_AGAIN);
		cr_assert_eq(st.count, i);
		cr_assert_eq(st.due_ms, 5000 + d);
		cr_assert_not(st.final);
		/* the windows of the jitter do not overlap: each wait is longer */
		cr_assert(d > last || i == 1, "restart %u waits %llu after %llu", i,
			  (unsigned long long)d, (unsigned long long)last);
		last = d;
	}
	cr_assert_eq(restart_decide(&p, &st, &bo, &one, 9000, &d), RESTART_FINAL);
	cr_assert(st.final);
	cr_assert_eq(st.due_ms, 0);
	cr_assert_eq(st.count, 3);
	/* a user's start: MAX counts again, the total goes on */
	restart_on_user_start(&st);
	cr_assert_eq(st.count, 0);
	cr_assert_eq(restart_decide(&p, &st, &bo, &one, 9000, &d), RESTART_AGAIN);
	cr_assert_eq(st.count, 1);
	cr_assert_eq(st.total, 4);
}

Test(restart, on_failure_success_is_final)
{
	struct restart_policy p = { RESTART_ON_FAILURE, 0 };
	struct restart_state st = { 0 };
	struct restart_exit ok = ex_code(0), oom = { .code = 0, .oom = true },
			    sick = { .code = 0, .unhealthy = true }, lost = ex_code(-1);
	struct backoff bo;
	uint64_t d;

	backoff_init(&bo, 10, 100, 1);
	cr_assert_eq(restart_decide(&p, &st, &bo, &ok, 0, &d), RESTART_FINAL);
	restart_on_user_start(&st);
	cr_assert_eq(restart_decide(&p, &st, &bo, &oom, 0, &d), RESTART_AGAIN);
	cr_assert_eq(restart_decide(&p, &st, &bo, &sick, 0, &d), RESTART_AGAIN);
	cr_assert_eq(restart_decide(&p, &st, &bo, &lost, 0, &d), RESTART_AGAIN);
	cr_assert_eq(st.count, 3);
}

Test(restart, always_and_user_stop)
{
	struct restart_policy p = { RESTART_ALWAYS, 0 };
	struct restart_state st = { 0 };
	struct restart_exit ok = ex_code(0);
	struct backoff bo;
	uint64_t d;

	backoff_init(&bo, 10, 100, 1);
	cr_assert_eq(restart_decide(&p, &st, &bo, &ok, 0, &d), RESTART_AGAIN);
	restart_on_user_stop(&st);
	cr_assert_eq(st.due_ms, 0);
	cr_assert_eq(restart_decide(&p, &st, &bo, &ok, 0, &d), RESTART_FINAL);
	restart_on_user_start(&st);
	cr_assert_not(st.held);
	p.mode = RESTART_UNLESS_STOPPED;
	cr_assert_eq(restart_decide(&p, &st, &bo, &ok, 0, &d), RESTART_AGAIN);
	p.mode = RESTART_NO;
	cr_assert_eq(restart_decide(&p, &st, &bo, &ok, 0, &d), RESTART_FINAL);
}

static struct rt_port port_ok(const char *s)
{
	struct rt_port p;
	struct nerr e = { 0 };

	cr_assert_eq(svc_port_parse(s, &p, &e), 0, "'%s': %s", s, e.msg);
	return p;
}

Test(service, ports)
{
	struct rt_port p, v[3];
	struct nerr e = { 0 };
	char buf[80];

	p = port_ok("127.0.0.1:0:80");
	cr_assert_str_eq(p.host_ip, "127.0.0.1");
	cr_assert_eq(p.host_port, 0);
	cr_assert_eq(p.port, 80);
	cr_assert_not(p.udp);
	p = port_ok("8080:80/udp");
	cr_assert_str_eq(p.host_ip, "");
	cr_assert_eq(p.host_port, 8080);
	cr_assert(p.udp);
	p = port_ok("[::1]:9000:90/tcp");
	cr_assert_str_eq(p.host_ip, "::1");
	svc_port_format(&p, buf, sizeof(buf));
	cr_assert_str_eq(buf, "90/tcp [::1]:9000");
	p = port_ok("127.0.0.1:49153:80");
	svc_port_format(&p, buf, sizeof(buf));
	cr_assert_str_eq(buf, "80/tcp 127.0.0.1:49153");
	const char *bad[] = { "", "80", "65536:80", "1:0", "1:65536", "a:1", "1:b", "1:2/sctp",
			      "1.2.3:1:2", "1.2.3.4:1:2:3", "[::1:1:2", "[zz]:1:2", "::1:1:2",
			      "-1:80", "+1:80", "1:80/", "1:80/tcpx", "000001:80", " 1:80",
			      "127.0.0.1::80" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(svc_port_parse(bad[i], &p, &e), -EINVAL, "'%s'", bad[i]);
	svc_port_parse("1:70000", &p, &e);
	cr_assert(strstr(e.msg, "PORT is not 1..65535"), "%s", e.msg);

	v[0] = port_ok("127.0.0.1:8080:80");
	v[1] = port_ok("127.0.0.2:8080:81");
	v[2] = port_ok("0:82");
	cr_assert_eq(svc_ports_check(v, 3, &e), 0, "%s", e.msg);
	v[2] = port_ok("0:82");
	v[1] = port_ok("8080:81");	/* every address overlaps 127.0.0.1 */
	cr_assert_eq(svc_ports_check(v, 3, &e), -EINVAL);
	cr_assert(strstr(e.msg, "bound twice"), "%s", e.msg);
	v[1] = port_ok("8080:81/udp");	/* another protocol */
	cr_assert_eq(svc_ports_check(v, 3, &e), 0);
	v[0] = port_ok("0:80");
	v[1] = port_ok("0:81");		/* the engine chooses: never a clash */
	cr_assert_eq(svc_ports_check(v, 2, &e), 0);
}

Test(service, cidr_ip_network)
{
	struct nerr e = { 0 };
	unsigned len;
	bool v6;
	const char *veth;

	cr_assert_eq(svc_cidr_parse("10.0.3.2/24", &v6, &len, &e), 0);
	cr_assert_not(v6);
	cr_assert_eq(len, 24);
	cr_assert_eq(svc_cidr_parse("fd00::2/64", &v6, &len, &e), 0);
	cr_assert(v6);
	const char *bad[] = { "10.0.3.2", "10.0.3.2/33", "10.0.3/24", "10.0.3.2/", "/24",
			      "10.0.3.2/2a", "fd00::2/129", "10.0.3.256/24", "10.0.3.2/024",
			      "10.0.3.2/-1", "" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(svc_cidr_parse(bad[i], &v6, &len, &e), -EINVAL, "'%s'", bad[i]);
	cr_assert_eq(svc_ip_parse("10.0.3.1", &v6, &e), 0);
	cr_assert_eq(svc_ip_parse("10.0.3.1/24", &v6, &e), -EINVAL);
	cr_assert_eq(svc_ip_parse("host", &v6, &e), -EINVAL);

	cr_assert_eq(svc_network_parse("bridge", false, &veth, &e), 0);
	cr_assert_null(veth);
	cr_assert_eq(svc_network_parse("my_net-1.x", false, &veth, &e), 0);
	cr_assert_eq(svc_network_parse("-bad", false, &veth, &e), -EINVAL);
	cr_assert_eq(svc_network_parse("a/b", false, &veth, &e), -EINVAL);
	cr_assert_eq(svc_network_parse("veth:br0", false, &veth, &e), -EINVAL);
	cr_assert_eq(svc_network_parse("veth:br0", true, &veth, &e), 0);
	cr_assert_str_eq(veth, "br0");
	cr_assert_eq(svc_network_parse("none", true, &veth, &e), 0);
	cr_assert_null(veth);
	cr_assert_eq(svc_network_parse("bridge", true, &veth, &e), -EINVAL);
	cr_assert_eq(svc_network_parse("veth:", true, &veth, &e), -EINVAL);
	cr_assert_eq(svc_network_parse("veth:abcdefghijklmnop", true, &veth, &e), -EINVAL);
	cr_assert_eq(svc_network_parse("veth:a b", true, &veth, &e), -EINVAL);
}

Test(service, health)
{
	struct svc_health h = { 0 };
	struct rt_port v[1];
	struct nerr e = { 0 };
	char buf[128];

	cr_assert_eq(svc_health_parse("http 80 /index.html", &h, &e), 0, "%s", e.msg);
	cr_assert_eq(h.kind, SVC_HEALTH_HTTP);
	cr_assert_eq(h.port, 80);
	cr_assert_str_eq(h.path, "/index.html");
	cr_assert_eq(h.retries, SVC_HEALTH_RETRIES);
	svc_health_format(&h, buf, sizeof(buf));
	cr_assert_str_eq(buf, "http 80 /index.html");
	cr_assert_eq(svc_health_check_port(&h, NULL, 0, false, &e), -EINVAL);
	cr_assert(strstr(e.msg, "not published or exposed"), "%s", e.msg);
	cr_assert_eq(svc_health_check_port(&h, NULL, 0, true, &e), 0);
	cr_assert_eq(svc_port_parse("127.0.0.1:0:80", &v[0], &e), 0);
	cr_assert_eq(svc_health_check_port(&h, v, 1, false, &e), 0);
	v[0].udp = true;
	cr_assert_eq(svc_health_check_port(&h, v, 1, false, &e), -EINVAL);

	cr_assert_eq(svc_health_set(&h, "health_interval", "300ms", &e), 0);
	cr_assert_eq(h.interval_ms, 300);
	cr_assert_eq(svc_health_set(&h, "health_retries", "2", &e), 0);
	cr_assert_eq(svc_health_set(&h, "health_start_period", "0", &e), 0);
	cr_assert_eq(svc_health_set(&h, "health_timeout", "1s", &e), 0);
	cr_assert_eq(h.timeout_ms, 1000);
	cr_assert_eq(svc_health_set(&h, "health_retries", "0", &e), -EINVAL);
	cr_assert_eq(svc_health_set(&h, "health_retries", "x", &e), -EINVAL);
	cr_assert_eq(svc_health_set(&h, "health_interval", "1ms", &e), -EINVAL);
	cr_assert_eq(svc_health_set(&h, "health_interval", "soon", &e), -EINVAL);
	cr_assert_eq(h.interval_ms, 300);

	/* the timings given before the check stay */
	cr_assert_eq(svc_health_parse("cmd 'wget -q -O- http://127.0.0.1/' x", &h, &e), 0);
	cr_assert_eq(h.kind, SVC_HEALTH_CMD);
	cr_assert_str_eq(h.argv[0], "wget -q -O- http://127.0.0.1/");
	cr_assert_str_eq(h.argv[1], "x");
	cr_assert_null(h.argv[2]);
	cr_assert_eq(h.interval_ms, 300);
	cr_assert_eq(h.retries, 2);
	cr_assert_eq(svc_health_check_port(&h, NULL, 0, false, &e), 0);
	cr_assert_eq(svc_health_parse("tcp 6379", &h, &e), 0);
	cr_assert_eq(h.kind, SVC_HEALTH_TCP);
	cr_assert_null(h.argv);
	const char *bad[] = { "", "cmd", "http 80", "http 80 nopath", "http 0 /", "tcp",
			      "tcp 65536", "tcp 80 x", "udp 53", "http 80 /a b", "'unclosed" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(svc_health_parse(bad[i], &h, &e), -EINVAL, "'%s'", bad[i]);
		cr_assert_eq(h.kind, SVC_HEALTH_TCP, "'%s' changed the check", bad[i]);
	}
	svc_health_free(&h);
}
