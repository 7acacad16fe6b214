/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * docker-decode: the rest of the Docker driver's pure half (see
 * docker-internal.h), the decoders that are not JSON: the multiplexed
 * (non-TTY) exec and log stream, the tail of a log kept within its cap,
 * image references split into repository and tag, and the cgroup texts
 * stats read (/proc/PID/cgroup, cpu and memory files). No I/O, no curl, no
 * jansson, no threads: unit-tested and fuzzed as is.
 */
#include "docker-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "nerr.h"
#include "sbuf.h"
#include "valid.h"

void docker_mux_init(struct docker_mux *m)
{
	memset(m, 0, sizeof(*m));
}

int docker_mux_feed(struct docker_mux *m, const char *p, size_t n, docker_mux_sink sink,
		    void *ctx)
{
	int r;

	while (n > 0) {
		if (m->remaining == 0) {
			size_t k = sizeof(m->hdr) - m->hdr_len;

			if (k > n)
				k = n;
			memcpy(m->hdr + m->hdr_len, p, k);
			m->hdr_len += k;
			p += k;
			n -= k;
			if (m->hdr_len < sizeof(m->hdr))
				break;
			if (m->hdr[0] > 2 || m->hdr[1] || m->hdr[2] || m->hdr[3])
				return -EBADMSG;
			m->stream = m->hdr[0];
			m->remaining = (uint32_t)m->hdr[4] << 24 | (uint32_t)m->hdr[5] << 16 |
				       (uint32_t)m->hdr[6] << 8 | m->hdr[7];
			m->hdr_len = 0;
			continue;
		}
		size_t k = n < m->remaining ? n : m->remaining;

		r = sink(ctx, m->stream, p, k);
		if (r)
			return r;
		m->remaining -= k;
		p += k;
		n -= k;
	}
	return 0;
}

int docker_mux_finish(const struct docker_mux *m)
{
	return m->remaining == 0 && m->hdr_len == 0 ? 0 : -EBADMSG;
}

int docker_tail_init(struct docker_tail *t, size_t max)
{
	memset(t, 0, sizeof(*t));
	if (max == 0 || max > SIZE_MAX / 2)
		return -EINVAL;
	t->buf = malloc(2 * max);
	if (!t->buf)
		return -ENOMEM;
	t->max = max;
	return 0;
}

void docker_tail_free(struct docker_tail *t)
{
	free(t->buf);
	t->buf = NULL;
	t->len = 0;
}

int docker_tail_sink(void *ctx, int stream, const char *p, size_t n)
{
	struct docker_tail *t = ctx;

	if (n >= t->max) {
		memcpy(t->buf, p + n - t->max, t->max);
		t->len = t->max;
		return 0;
	}
	if (t->len + n > 2 * t->max) {
		/* here len > max: keep the last max bytes, then n (< max) fits */
		size_t keep = t->max;

		memmove(t->buf, t->buf + t->len - keep, keep);
		t->len = keep;
	}
	memcpy(t->buf + t->len, p, n);
	t->len += n;
	return 0;
}

const char *docker_tail_data(const struct docker_tail *t, size_t *ret_len)
{
	size_t k = t->len < t->max ? t->len : t->max;

	*ret_len = k;
	return t->buf + t->len - k;
}

int docker_image_split(const char *ref, char *ret_repo, size_t nrepo, char *ret_tag, size_t ntag)
{
	const char *slash, *colon;
	size_t rl;

	if (!ref || !*ref || strlen(ref) >= nrepo)
		return -EINVAL;
	if (strchr(ref, '@')) {
		/* repo@digest: fromImage takes it whole */
		strcpy(ret_repo, ref);
		if (ntag)
			ret_tag[0] = '\0';
		return 0;
	}
	slash = strrchr(ref, '/');
	colon = strrchr(ref, ':');
	if (colon && (!slash || colon > slash)) {
		rl = (size_t)(colon - ref);
		if (rl == 0 || !colon[1] || strlen(colon + 1) >= ntag)
			return -EINVAL;
		memcpy(ret_repo, ref, rl);
		ret_repo[rl] = '\0';
		strcpy(ret_tag, colon + 1);
	} else {
		if (ntag < sizeof("latest"))
			return -EINVAL;
		strcpy(ret_repo, ref);
		strcpy(ret_tag, "latest");
	}
	return 0;
}

/* "key value" lines: the value of key, or -ENOENT */
static int find_key(const char *text, const char *key, uint64_t *ret)
{
	size_t kl = strlen(key);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, key, kl) == 0 && p[kl] == ' ') {
			*ret = strtoull(p + kl + 1, NULL, 10);
			return 0;
		}
	return -ENOENT;
}

void docker_cg_parse_cpu(const char *text, bool v2, long hz, double *ret_user, double *ret_system)
{
	uint64_t v;

	*ret_user = *ret_system = 0;
	if (v2) {
		if (find_key(text, "user_usec", &v) == 0)
			*ret_user = (double)v / 1e6;
		if (find_key(text, "system_usec", &v) == 0)
			*ret_system = (double)v / 1e6;
	} else if (hz > 0) {
		if (find_key(text, "user", &v) == 0)
			*ret_user = (double)v / (double)hz;
		if (find_key(text, "system", &v) == 0)
			*ret_system = (double)v / (double)hz;
	}
}

int docker_cg_parse_u64(const char *text, uint64_t *ret)
{
	char *end;

	if (strncmp(text, "max", 3) == 0 && (text[3] == '\0' || text[3] == '\n')) {
		*ret = 0;
		return 0;
	}
	if (*text < '0' || *text > '9')
		return -EIO;
	errno = 0;
	*ret = strtoull(text, &end, 10);
	if (errno || (*end != '\0' && *end != '\n'))
		return -EIO;
	return 0;
}

static int put_dir(char *dst, size_t n, const char *root, const char *hier, const char *path)
{
	int k = hier ? snprintf(dst, n, "%s/%s%s", root, hier, path)
		     : snprintf(dst, n, "%s%s", root, path);

	return k < 0 || (size_t)k >= n ? -ENOENT : 0;
}

int docker_cg_dirs_from_proc(const char *text, bool v2, const char *root, char *ret_cpu,
			     char *ret_mem, char *ret_pids, size_t n)
{
	const char *line = text;
	bool cpu = false, mem = false, pids = false;

	while (line && *line) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		char buf[1024], *c1, *c2;

		if (len < sizeof(buf)) {
			memcpy(buf, line, len);
			buf[len] = '\0';
			c1 = strchr(buf, ':');
			c2 = c1 ? strchr(c1 + 1, ':') : NULL;
			if (c2 && c2[1] == '/') {
				const char *ctrls = c1 + 1, *path = c2 + 1;

				*c2 = '\0';
				if (v2 && !*ctrls && c1 == buf + 1 && buf[0] == '0') {
					if (put_dir(ret_cpu, n, root, NULL, path) < 0 ||
					    put_dir(ret_mem, n, root, NULL, path) < 0 ||
					    put_dir(ret_pids, n, root, NULL, path) < 0)
						return -ENOENT;
					cpu = mem = pids = true;
				} else if (!v2 && *ctrls) {
					char list[256], *save = NULL;

					snprintf(list, sizeof(list), "%s", ctrls);
					for (char *t = strtok_r(list, ",", &save); t;
					     t = strtok_r(NULL, ",", &save)) {
						if (strcmp(t, "cpuacct") == 0)
							cpu = put_dir(ret_cpu, n, root, ctrls, path) == 0;
						else if (strcmp(t, "memory") == 0)
							mem = put_dir(ret_mem, n, root, ctrls, path) == 0;
						else if (strcmp(t, "pids") == 0)
							pids = put_dir(ret_pids, n, root, ctrls, path) == 0;
					}
				}
			}
		}
		line = eol ? eol + 1 : NULL;
	}
	return cpu && mem && pids ? 0 : -ENOENT;
}
