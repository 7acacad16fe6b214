/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * rt-oomlog: whether the kernel OOM-killed a container's task, from the
 * oom-kill summary records in /dev/kmsg (see rt-oomlog.h for why). The
 * parser is pure and fuzzed (tests/fuzz/fuzz_oomlog.c); the finders are
 * the only I/O: one reader from the oldest record to the newest.
 * Must not know: engines, the backend.
 */
#include "rt-oomlog.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define OOMLOG_MIN_ID 12
#define OOMLOG_FULL_ID 64
#define OOMLOG_REC_CAP 8192	/* a record is at most 1 KiB of text plus its dictionary */

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* The header's third field, the time in µs; -EBADMSG unless the header is
 * "DIGITS,DIGITS,DIGITS,..." ending at ';' within the first 128 bytes. */
static int header_usec(const char *rec, size_t n, size_t *msg, uint64_t *usec)
{
	size_t i = 0;

	for (int field = 0; field < 3; field++) {
		uint64_t v = 0;
		size_t start = i;

		while (i < n && rec[i] >= '0' && rec[i] <= '9') {
			if (v > (UINT64_MAX - 9) / 10)
				return -EBADMSG;
			v = v * 10 + (uint64_t)(rec[i] - '0');
			i++;
		}
		if (i == start || i >= n || (rec[i] != ',' && !(field == 2 && rec[i] == ';')))
			return -EBADMSG;
		*usec = v;
		if (field < 2)
			i++;
	}
	while (i < n && i < 128 && rec[i] != ';' && rec[i] != '\n')
		i++;
	if (i >= n || rec[i] != ';')
		return -EBADMSG;
	*msg = i + 1;
	return 0;
}

int rt_oomlog_parse(const char *rec, size_t n, struct rt_oomkill *out)
{
	static const char tag[] = "oom-kill:";
	size_t i, end;
	uint64_t usec;

	if (header_usec(rec, n, &i, &usec) < 0)
		return -EBADMSG;
	for (end = i; end < n && rec[end] != '\n'; end++)
		;
	if (end - i < sizeof(tag) - 1 || memcmp(rec + i, tag, sizeof(tag) - 1) != 0)
		return 0;
	*out = (struct rt_oomkill){ .usec = usec };
	for (i += sizeof(tag) - 1; i < end;) {
		size_t j = i;

		while (j < end && rec[j] != ',')
			j++;
		if (j - i > 10 && memcmp(rec + i, "oom_memcg=", 10) == 0) {
			out->oom_memcg = rec + i + 10;
			out->oom_len = j - i - 10;
		} else if (j - i > 11 && memcmp(rec + i, "task_memcg=", 11) == 0) {
			out->task_memcg = rec + i + 11;
			out->task_len = j - i - 11;
		}
		i = j + 1;
	}
	return out->oom_memcg || out->task_memcg ? 1 : 0;
}

bool rt_oomlog_names(const char *path, size_t n, const char *id)
{
	size_t k = strlen(id);

	if (!path || k < OOMLOG_MIN_ID || k > OOMLOG_FULL_ID || k > n)
		return false;
	for (size_t i = 0; i < k; i++)
		if (!is_hex(id[i]))
			return false;
	for (size_t at = 0; at + k <= n; at++) {
		if (memcmp(path + at, id, k) != 0)
			continue;
		if (at > 0 && is_hex(path[at - 1]))
			continue;
		if (k == OOMLOG_FULL_ID && at + k < n && is_hex(path[at + k]))
			continue;
		return true;
	}
	return false;
}

/* since (wall clock) on the kernel's clock, less a second of slack for
 * since's rounding; 0 when that is before boot or since is unknown. */
static uint64_t since_usec(time_t since)
{
	struct timespec mono, real;
	int64_t from;

	if (since <= 0 || clock_gettime(CLOCK_MONOTONIC, &mono) < 0 ||
	    clock_gettime(CLOCK_REALTIME, &real) < 0)
		return 0;
	from = (int64_t)mono.tv_sec * 1000000 + mono.tv_nsec / 1000 -
	       ((int64_t)real.tv_sec - (int64_t)since + 1) * 1000000;
	return from < 0 ? 0 : (uint64_t)from;
}

bool rt_oomlog_under(const char *path, size_t n, const char *dir)
{
	size_t dl = strlen(dir);

	if (!path)
		return false;
	for (size_t k = 2; k <= n; k++) {
		if (k < n && path[k] != '/')
			continue;
		if (path[0] == '/' && k <= dl && memcmp(dir + dl - k, path, k) == 0)
			return true;
	}
	return false;
}

struct match {
	const char *key;
	bool (*fn)(const char *path, size_t n, const char *key);
};

/* Read /dev/kmsg from its oldest record: 1 at the first oom-kill record
 * from at or after since that m matches, 0 at the end, -errno. */
static int scan(const struct match *m, time_t since)
{
	char rec[OOMLOG_REC_CAP];
	uint64_t from = since_usec(since);
	int fd, found = 0;

	fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (!found) {
		struct rt_oomkill o;
		ssize_t k = read(fd, rec, sizeof(rec));

		if (k < 0 && (errno == EINTR || errno == EPIPE))
			continue;	/* EPIPE: overwritten while we read; go on */
		if (k < 0) {
			found = errno == EAGAIN ? 0 : -errno;
			break;
		}
		if (k == 0)
			break;
		if (rt_oomlog_parse(rec, (size_t)k, &o) == 1 && o.usec >= from &&
		    (m->fn(o.task_memcg, o.task_len, m->key) ||
		     m->fn(o.oom_memcg, o.oom_len, m->key)))
			found = 1;
	}
	close(fd);
	return found;
}

int rt_oomlog_find(const char *id, time_t since)
{
	struct match m = { id, rt_oomlog_names };

	if (!rt_oomlog_names(id, strlen(id), id))
		return 0;	/* not an engine's id: nothing can name it */
	return scan(&m, since);
}

int rt_oomlog_find_cgroup(const char *dir, time_t since)
{
	struct match m = { dir, rt_oomlog_under };

	if (!dir || dir[0] != '/' || strlen(dir) < 2)
		return 0;
	return scan(&m, since);
}
