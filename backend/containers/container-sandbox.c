/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * container-sandbox: a container's sandbox, the host directory made for it
 * before its create under [nodefs] sandbox_dir (default
 * STATE_DIR/sandboxes), mode 0750 and its user's, bind-mounted inside at
 * sandbox_path (default /sandbox) on every runtime; it outlives the
 * container's exit and goes with its destroy unless keep_sandboxes.
 *
 * It must not know the engines (the mount is one more rt_mount of the
 * spec) or what fetches put in it (backend/fetch/).
 */
#include "container-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fstree.h"
#include "log.h"
#include "valid.h"

/* The directory sandboxes are made in. */
static void sandbox_base(const struct backend *b, char *buf, size_t size)
{
	if (b->cfg->sandbox_dir)
		snprintf(buf, size, "%s", b->cfg->sandbox_dir);
	else
		snprintf(buf, size, "%s/sandboxes", b->cfg->state_dir);
}

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[4096];
	size_t n = strlen(path);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			if (mkdir(buf, mode) < 0 && errno != EEXIST)
				return -errno;
			*p = '/';
		}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int container_sandbox_make(struct container *c, struct nerr *err)
{
	char base[4096], path[4200];
	unsigned char rnd[4];
	long uid = -1, gid = -1;
	int r;

	if (c->spec.no_sandbox)
		return 0;
	sandbox_base(c->b, base, sizeof(base));
	r = mkdir_p(base, 0711);
	if (r < 0)
		return nerr_set(err, -r, "sandbox_dir %s: %s", base, strerror(-r));
	/* a name of its own: a kept sandbox of an earlier container of the
	 * same name stays as it was */
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		return nerr_set(err, EIO, "getrandom: %s", strerror(errno));
	snprintf(path, sizeof(path), "%s/%s-%02x%02x%02x%02x", base, c->name, rnd[0], rnd[1], rnd[2],
		 rnd[3]);
	if (mkdir(path, 0750) < 0)
		return nerr_set(err, errno, "sandbox %s: %s", path, strerror(errno));
	/* a number is known now; a name once the engine has the image's
	 * files (container_sandbox_own after the create) */
	if (c->spec.user && rt_user_resolve(c->spec.user, NULL, 0, NULL, 0, &uid, &gid, NULL) == 0 &&
	    chown(path, (uid_t)uid, (gid_t)gid) < 0)
		log_warn("container %s: chown %s: %s", c->name, path, strerror(errno));
	pthread_mutex_lock(&c->lock);
	free(c->sandbox);
	c->sandbox = strdup(path);
	pthread_mutex_unlock(&c->lock);
	if (!c->sandbox) {
		rmdir(path);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	return 0;
}

void container_sandbox_own(struct container *c, long uid, long gid)
{
	if (c->sandbox && uid >= 0 && chown(c->sandbox, (uid_t)uid, (gid_t)gid) < 0)
		log_warn("container %s: chown %s: %s", c->name, c->sandbox, strerror(errno));
}

void container_sandbox_drop(struct container *c, bool destroyed)
{
	char *path;
	int r;

	pthread_mutex_lock(&c->lock);
	path = c->sandbox;
	if (!destroyed || !c->b->cfg->keep_sandboxes)
		c->sandbox = NULL;
	else
		path = NULL;
	pthread_mutex_unlock(&c->lock);
	if (!path)
		return;
	container_fetch_release(c, path);
	r = fstree_remove(path);
	if (r < 0)
		log_warn("container %s: cannot remove its sandbox %s: %s", c->name, path, strerror(-r));
	free(path);
}

int container_sandbox_mounts(struct container *c, struct rt_mount **ret, size_t *ret_n)
{
	size_t n = c->spec.mounts.n;
	struct rt_mount *m = calloc(n + 1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	if (n)
		memcpy(m, c->spec.mounts.v, n * sizeof(*m));
	if (c->sandbox) {
		m[n].source = c->sandbox;
		m[n].target = c->spec.sandbox_path ? c->spec.sandbox_path : (char *)"/sandbox";
		n++;
	}
	*ret = m;
	*ret_n = n;
	return 0;
}

/* A sandbox's name: a container name, '-', 8 hex digits. */
static bool sandbox_name(const char *s)
{
	size_t n = strlen(s);
	char name[80];

	if (n < 10 || n - 9 >= sizeof(name) || s[n - 9] != '-')
		return false;
	for (size_t i = n - 8; i < n; i++)
		if (!strchr("0123456789abcdef", s[i]))
			return false;
	snprintf(name, sizeof(name), "%.*s", (int)(n - 9), s);
	return valid_name(name, NULL) == 0;
}

int containers_sandbox_reclaim(struct backend *b)
{
	char base[4096], path[4400];
	struct bnode **v = NULL;
	size_t n = 0;
	int gone = 0;
	DIR *d;

	struct timespec now_w, now_m;
	int64_t since_ns;

	if (b->cfg->keep_sandboxes)
		return 0;
	/* the daemon's start on the wall clock, to the nanosecond (a sandbox
	 * a crashed daemon made in the same second as this one started is
	 * still an orphan) */
	clock_gettime(CLOCK_REALTIME, &now_w);
	clock_gettime(CLOCK_MONOTONIC, &now_m);
	since_ns = ((int64_t)now_w.tv_sec * 1000000000 + now_w.tv_nsec) -
		   (((int64_t)now_m.tv_sec - b->started_mono.tv_sec) * 1000000000 +
		    (now_m.tv_nsec - b->started_mono.tv_nsec));
	sandbox_base(b, base, sizeof(base));
	d = opendir(base);
	if (!d)
		return 0;
	/* the directory is read before the containers are listed: a sandbox
	 * made meanwhile is then one of theirs (or newer than the daemon) */
	if (bnode_list(containers_dir(b), &v, &n) < 0) {
		closedir(d);
		return 0;
	}
	for (struct dirent *de; (de = readdir(d));) {
		struct statx sx;
		bool owned = false;

		if (de->d_name[0] == '.' || !sandbox_name(de->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", base, de->d_name);
		for (size_t i = 0; i < n && !owned; i++) {
			struct container *c = v[i]->priv;

			pthread_mutex_lock(&c->lock);
			owned = c->sandbox && strcmp(c->sandbox, path) == 0;
			pthread_mutex_unlock(&c->lock);
		}
		if (owned)
			continue;
		if (statx(dirfd(d), de->d_name, AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_BTIME, &sx) < 0 ||
		    !S_ISDIR(sx.stx_mode))
			continue;
		/* this daemon's own (commands wait for recovery, so none can
		 * be: kept should one be all the same) */
		if ((sx.stx_mask & STATX_BTIME) &&
		    (int64_t)sx.stx_btime.tv_sec * 1000000000 + sx.stx_btime.tv_nsec >= since_ns)
			continue;
		int r = fstree_remove(path);

		if (r < 0) {
			log_warn("sandbox %s belongs to no container; cannot remove it: %s", path,
				 strerror(-r));
			continue;
		}
		log_info("sandbox %s belonged to no container (a create a crash cut short): removed",
			 path);
		gone++;
	}
	closedir(d);
	bnode_list_free(v, n);
	return gone;
}
