/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lxc-meta: the owner mark of a container nodefs made, and the record of its
 * last run, kept in LXCPATH/NAME/nodefs.json beside lxc's own config:
 *
 *   {"io.nodefs.managed": "true", "io.nodefs.name": "box",
 *    "created_at": T, "started_at": T, "finished_at": T,
 *    "exit_code": N, "oom_killed": false}
 *
 * A container without this file (made by lxc-create, by hand, by another
 * tool) is never listed, inspected or touched. Writes go to a temp file
 * renamed into place, so a crash leaves the old or the new record, never a
 * torn one. No liblxc calls here.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lxc-internal.h"
#include "macro.h"

int rt_lxc_dir(const struct rt_lxc *h, const char *name, const char *file,
	       char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/%s%s%s", h->lxcpath, name, file ? "/" : "",
			 file ? file : "");

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int rt_lxc_meta_read(const struct rt_lxc *h, const char *name, struct rt_lxc_meta *ret)
{
	char path[PATH_MAX], buf[RT_LXC_META_CAP];
	struct rt_lxc_meta m = { .exit_code = -1 };
	json_t *j, *v;
	json_error_t jerr;
	const char *owner, *nm;
	int r;

	if (rt_lxc_dir(h, name, RT_LXC_META_FILE, path, sizeof(path)) < 0)
		return -ENOENT;
	r = rt_lxc_read_file(path, buf, sizeof(buf));
	if (r < 0)
		return r == -ENOENT || r == -ENOTDIR ? -ENOENT : r;
	if ((size_t)r >= sizeof(buf) - 1)
		return -EIO;
	j = json_loads(buf, 0, &jerr);
	if (!j)
		return -EIO;
	owner = json_string_value(json_object_get(j, RT_OWNER_LABEL));
	nm = json_string_value(json_object_get(j, RT_NAME_LABEL));
	if (!owner || strcmp(owner, "true") != 0 || !nm || strlen(nm) > RT_LXC_NAME_MAX) {
		json_decref(j);
		return -ENOENT;
	}
	snprintf(m.name, sizeof(m.name), "%s", nm);
	m.created_at = (time_t)json_integer_value(json_object_get(j, "created_at"));
	m.started_at = (time_t)json_integer_value(json_object_get(j, "started_at"));
	m.finished_at = (time_t)json_integer_value(json_object_get(j, "finished_at"));
	v = json_object_get(j, "exit_code");
	m.exit_code = json_is_integer(v) ? (int)json_integer_value(v) : -1;
	m.oom_killed = json_is_true(json_object_get(j, "oom_killed"));
	json_decref(j);
	if (ret)
		*ret = m;
	return 0;
}

static int meta_write_locked(struct rt_lxc *h, const char *name, const struct rt_lxc_meta *m)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	_cleanup_free_ char *s = NULL;
	json_t *j;
	int fd, r = 0;
	size_t len, off = 0;

	if (rt_lxc_dir(h, name, RT_LXC_META_FILE, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	j = json_pack("{s:s, s:s, s:I, s:I, s:I, s:i, s:b}",
		      RT_OWNER_LABEL, "true", RT_NAME_LABEL, m->name,
		      "created_at", (json_int_t)m->created_at,
		      "started_at", (json_int_t)m->started_at,
		      "finished_at", (json_int_t)m->finished_at,
		      "exit_code", m->exit_code, "oom_killed", (int)m->oom_killed);
	if (!j)
		return -ENOMEM;
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (!s)
		return -ENOMEM;
	len = strlen(s);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	while (off < len) {
		ssize_t w = write(fd, s + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			r = -errno;
			break;
		}
		off += (size_t)w;
	}
	/* No fsync: the backend's checkpoints are the durable record; this
	 * file only has to be whole (rename), and start/stop stay cheap. */
	if (r == 0 && write(fd, "\n", 1) != 1)
		r = -EIO;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	return r;
}

int rt_lxc_meta_write(struct rt_lxc *h, const char *name, const struct rt_lxc_meta *m)
{
	int r;

	pthread_mutex_lock(&h->meta_lock);
	r = meta_write_locked(h, name, m);
	pthread_mutex_unlock(&h->meta_lock);
	return r;
}

int rt_lxc_meta_started(struct rt_lxc *h, const char *name, time_t t)
{
	struct rt_lxc_meta m;
	int r;

	pthread_mutex_lock(&h->meta_lock);
	r = rt_lxc_meta_read(h, name, &m);
	if (r == 0) {
		m.started_at = t;
		m.finished_at = 0;
		m.exit_code = -1;
		m.oom_killed = false;
		r = meta_write_locked(h, name, &m);
	}
	pthread_mutex_unlock(&h->meta_lock);
	return r;
}

int rt_lxc_meta_finished(struct rt_lxc *h, const char *name, time_t t, int exit_code,
			 bool oom)
{
	struct rt_lxc_meta m;
	int r;

	pthread_mutex_lock(&h->meta_lock);
	r = rt_lxc_meta_read(h, name, &m);
	if (r == 0) {
		m.finished_at = t;
		m.exit_code = exit_code;
		m.oom_killed = oom;
		r = meta_write_locked(h, name, &m);
	}
	pthread_mutex_unlock(&h->meta_lock);
	return r;
}

