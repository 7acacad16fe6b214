/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lxc-meta: the owner mark of a container nodefs made, and the record of its
 * last run, kept beside lxc's own config in LXCPATH/NAME/:
 *
 *   nodefs.json      {"io.nodefs.managed":"true","io.nodefs.name":"box",
 *                     "created_at":T,"io.nodefs.instance":ID}
 *                    (ID: the nodefs instance that made it; absent in the
 *                    marks of an older nodefs; "io.nodefs.role": "plugin"
 *                    on a container nodefs runs for itself, which list()
 *                    leaves out)
 *   nodefs-run.json  {"started_at":T,"finished_at":T,"exit_code":N,
 *                     "oom_killed":false}   padded with blanks to 256 bytes
 *
 * A container without the mark (made by lxc-create, by hand, by another
 * tool) is never listed, inspected or touched. The mark is written once, to
 * a temp file renamed into place. The run record changes at every start and
 * exit, so it is rewritten in place with one pwrite() of a fixed size: a
 * crashed writer leaves the old or the new record, and no replace-by-rename
 * (which ext4 turns into a synchronous flush, 4 ms here, on every start and
 * stop). Both are written with common/jw and read with jansson. No liblxc
 * calls here.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "jw.h"
#include "lxc-internal.h"
#include "sbuf.h"

#define RUN_FILE "nodefs-run.json"
#define RUN_SIZE 256

int rt_lxc_dir(const struct rt_lxc *h, const char *name, const char *file,
	       char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/%s%s%s", h->lxcpath, name, file ? "/" : "",
			 file ? file : "");

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

void rt_lxc_create_log(const struct rt_lxc *h, const char *name, char *buf, size_t size)
{
	if (rt_lxc_create_file(h, name, "log", buf, size) < 0)
		buf[0] = '\0';
}

static json_t *load(const struct rt_lxc *h, const char *name, const char *file, int *ret_r)
{
	char path[PATH_MAX], buf[RT_LXC_META_CAP];
	json_error_t jerr;
	json_t *j;
	int r;

	*ret_r = 0;
	if (rt_lxc_dir(h, name, file, path, sizeof(path)) < 0) {
		*ret_r = -ENOENT;
		return NULL;
	}
	r = rt_lxc_read_file(path, buf, sizeof(buf));
	if (r < 0) {
		*ret_r = r == -ENOTDIR ? -ENOENT : r;
		return NULL;
	}
	if ((size_t)r >= sizeof(buf) - 1) {
		*ret_r = -EIO;
		return NULL;
	}
	j = json_loads(buf, 0, &jerr);
	if (!json_is_object(j)) {
		json_decref(j);
		*ret_r = -EIO;
		return NULL;
	}
	return j;
}

int rt_lxc_meta_read(const struct rt_lxc *h, const char *name, struct rt_lxc_meta *ret)
{
	struct rt_lxc_meta m = { .exit_code = -1 };
	const char *owner, *nm, *inst;
	json_t *j, *v;
	int r;

	j = load(h, name, RT_LXC_META_FILE, &r);
	if (!j)
		return r;
	owner = json_string_value(json_object_get(j, RT_OWNER_LABEL));
	nm = json_string_value(json_object_get(j, RT_NAME_LABEL));
	if (!owner || strcmp(owner, "true") != 0 || !nm || strlen(nm) > RT_LXC_NAME_MAX) {
		json_decref(j);
		return -ENOENT;
	}
	snprintf(m.name, sizeof(m.name), "%s", nm);
	inst = json_string_value(json_object_get(j, RT_INSTANCE_LABEL));
	snprintf(m.instance, sizeof(m.instance), "%s", inst ? inst : "");
	nm = json_string_value(json_object_get(j, RT_ROLE_LABEL));
	snprintf(m.role, sizeof(m.role), "%s", nm ? nm : "");
	m.created_at = (time_t)json_integer_value(json_object_get(j, "created_at"));
	json_decref(j);
	if (!ret)
		return 0;

	/* No run record yet (never started) reads as zeros. */
	j = load(h, name, RUN_FILE, &r);
	if (j) {
		m.started_at = (time_t)json_integer_value(json_object_get(j, "started_at"));
		m.finished_at = (time_t)json_integer_value(json_object_get(j, "finished_at"));
		v = json_object_get(j, "exit_code");
		m.exit_code = json_is_integer(v) ? (int)json_integer_value(v) : -1;
		m.oom_killed = json_is_true(json_object_get(j, "oom_killed"));
		json_decref(j);
	}
	*ret = m;
	return 0;
}

static int write_all_at(int fd, const char *s, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t w = pwrite(fd, s + off, len - off, (off_t)off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		off += (size_t)w;
	}
	return 0;
}

static int run_write_locked(struct rt_lxc *h, const char *name, const struct rt_lxc_meta *m)
{
	char path[PATH_MAX];
	struct sbuf rec = SBUF_INIT(RUN_SIZE);
	struct jw w;
	int fd, r;

	if (rt_lxc_dir(h, name, RUN_FILE, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	jw_init(&w, &rec, 0);
	jw_obj(&w);
	jw_kint(&w, "started_at", (long long)m->started_at);
	jw_kint(&w, "finished_at", (long long)m->finished_at);
	jw_kint(&w, "exit_code", m->exit_code);
	jw_kbool(&w, "oom_killed", m->oom_killed);
	jw_obj_end(&w);
	r = jw_end(&w);
	/* blanks to a fixed size, and a newline (the size caps the JSON) */
	while (r == 0 && rec.len < RUN_SIZE - 1)
		r = sbuf_addc(&rec, ' ');
	if (r == 0)
		r = sbuf_addc(&rec, '\n');
	if (r < 0) {
		sbuf_free(&rec);
		return r;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		r = -errno;
		sbuf_free(&rec);
		return r;
	}
	/* One write of the whole fixed-size record over the old one. */
	r = write_all_at(fd, rec.buf, RUN_SIZE);
	if (close(fd) < 0 && r == 0)
		r = -errno;
	sbuf_free(&rec);
	return r;
}

static int mark_write(struct rt_lxc *h, const char *name, const struct rt_lxc_meta *m)
{
	char path[PATH_MAX], tmp[PATH_MAX + 8];
	struct sbuf s = SBUF_INIT(RT_LXC_META_CAP);
	struct jw w;
	int fd, r;

	if (rt_lxc_dir(h, name, RT_LXC_META_FILE, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	jw_init(&w, &s, 0);
	jw_obj(&w);
	jw_kstr(&w, RT_OWNER_LABEL, "true");
	jw_kstr(&w, RT_NAME_LABEL, m->name);
	jw_kint(&w, "created_at", (long long)m->created_at);
	if (m->instance[0])
		jw_kstr(&w, RT_INSTANCE_LABEL, m->instance);
	if (m->role[0])
		jw_kstr(&w, RT_ROLE_LABEL, m->role);
	if (m->nlabels) {
		jw_key(&w, "labels");
		jw_obj(&w);
		for (size_t i = 0; i < m->nlabels; i++)
			jw_kstr(&w, m->labels[i].key, m->labels[i].val);
		jw_obj_end(&w);
	}
	jw_obj_end(&w);
	r = jw_end(&w);
	if (r < 0) {
		sbuf_free(&s);
		return r;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		r = -errno;
		sbuf_free(&s);
		return r;
	}
	r = write_all_at(fd, s.buf, s.len);
	sbuf_free(&s);
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
	/* The run record first: a mark never points at a missing record. */
	r = run_write_locked(h, name, m);
	if (r == 0)
		r = mark_write(h, name, m);
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
		r = run_write_locked(h, name, &m);
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
		r = run_write_locked(h, name, &m);
	}
	pthread_mutex_unlock(&h->meta_lock);
	return r;
}
