/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lxc-halfmade: a create cut short, found and removed whole. Before liblxc
 * makes anything, rt_lxc_create writes the in-progress mark
 * LXCPATH/.nodefs-creating-NAME (synced with its directory: the nodefs
 * name, the instance, the role, the pid); it goes only once the owner mark
 * is in place. The template runs in its own session, whose id is kept in
 * .nodefs-create-NAME.pgid. A daemon killed mid-create thus leaves a
 * container list() reports as half_made, and destroy() removes it whole:
 * the template's process group is killed if it still runs (checked to be
 * that template's first), then liblxc's destroy and whatever files are
 * left, the mark last.
 *
 * Must not know: how a create runs its template or writes the config
 * (lxc-create.c), nor anything of backend/ or fs/.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <lxc/lxccontainer.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jw.h"
#include "lxc-internal.h"
#include "macro.h"
#include "nerr.h"
#include "sbuf.h"

/* Remove a half-made container: liblxc's destroy, then whatever is left. */
void rt_lxc_create_undo(struct rt_lxc *h, struct lxc_container *c, const char *name)
{
	char dir[PATH_MAX];

	if (c && c->is_defined(c))
		c->destroy(c);
	if (rt_lxc_dir(h, name, NULL, dir, sizeof(dir)) == 0 && access(dir, F_OK) == 0) {
		/* liblxc left files behind (a config it never saved whole):
		 * the directory is ours, we made it in this call. */
		pid_t pid = fork();

		if (pid == 0) {
			execl("/bin/rm", "rm", "-rf", "--one-file-system", "--", dir, (char *)NULL);
			_exit(127);
		}
		if (pid > 0)
			waitpid(pid, NULL, 0);
	}
}

/* LXCPATH/.nodefs-create-NAME.EXT (ext NULL: the mark .nodefs-creating-NAME). */
int rt_lxc_create_file(const struct rt_lxc *h, const char *name, const char *ext, char *buf,
		       size_t size)
{
	int n = ext ? snprintf(buf, size, "%s/.nodefs-create-%s.%s", h->lxcpath, name, ext)
		    : snprintf(buf, size, "%s/" RT_LXC_CREATING_PREFIX "%s", h->lxcpath, name);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static void fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		(void)fsync(fd);
		close(fd);
	}
}

/* Write the in-progress mark, synced with its directory, so a crash at any
 * later point leaves something recovery recognises. */
int rt_lxc_creating_mark(struct rt_lxc *h, const char *name, const char *nodefs_name,
			 const char *role, struct nerr *err)
{
	char path[PATH_MAX];
	struct sbuf rec = SBUF_INIT(512);
	struct jw w;
	int fd, r = 0;

	if (mkdir(h->lxcpath, 0755) < 0 && errno != EEXIST)
		return nerr_set(err, errno, "lxc: cannot make lxcpath %s: %s", h->lxcpath, strerror(errno));
	if (rt_lxc_create_file(h, name, NULL, path, sizeof(path)) < 0)
		return nerr_set(err, ENAMETOOLONG, "lxc: path too long");
	jw_init(&w, &rec, 0);
	jw_obj(&w);
	jw_kstr(&w, RT_OWNER_LABEL, "true");
	jw_kstr(&w, RT_NAME_LABEL, nodefs_name);
	jw_kstr(&w, RT_INSTANCE_LABEL, h->instance);
	jw_kstr(&w, RT_ROLE_LABEL, role ? role : "");
	jw_kint(&w, "started_at", (long long)time(NULL));
	jw_kint(&w, "pid", (long long)getpid());
	jw_obj_end(&w);
	r = jw_end(&w);
	if (r == 0)
		r = sbuf_addc(&rec, '\n');
	if (r < 0) {
		sbuf_free(&rec);
		return nerr_set(err, -r, "lxc %s: cannot make its in-progress mark: %s", name,
				strerror(-r));
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		sbuf_free(&rec);
		return nerr_set(err, errno, "lxc %s: cannot write %s: %s", name, path, strerror(errno));
	}
	if (write(fd, rec.buf, rec.len) != (ssize_t)rec.len || fsync(fd) < 0)
		r = errno ? -errno : -EIO;
	sbuf_free(&rec);
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r < 0) {
		unlink(path);
		return nerr_set(err, -r, "lxc %s: cannot write %s: %s", name, path, strerror(-r));
	}
	fsync_dir(h->lxcpath);
	return 0;
}

bool rt_lxc_creating_marked(const struct rt_lxc *h, const char *name)
{
	char path[PATH_MAX];

	return rt_lxc_create_file(h, name, NULL, path, sizeof(path)) == 0 && access(path, F_OK) == 0;
}

bool rt_lxc_creating_ours(const struct rt_lxc *h, const char *name, char *ret_name,
			  size_t size)
{
	char path[PATH_MAX], rec[512];
	const char *inst, *nm;
	json_error_t jerr;
	json_t *j;
	bool ours;
	int n;

	/* an unreadable mark (cut while written) names no one: the container's
	 * own name, and ours only when the driver has no instance */
	snprintf(ret_name, size, "%s", name);
	if (rt_lxc_create_file(h, name, NULL, path, sizeof(path)) < 0)
		return false;
	n = rt_lxc_read_file(path, rec, sizeof(rec));
	j = n > 0 ? json_loadb(rec, (size_t)n, 0, &jerr) : NULL;
	inst = json_string_value(json_object_get(j, RT_INSTANCE_LABEL));
	nm = json_string_value(json_object_get(j, RT_NAME_LABEL));
	ours = !h->instance[0] || (inst && strcmp(inst, h->instance) == 0);
	/* a container nodefs runs for itself is not a user's: never listed
	 * (destroy by its name removes it whole all the same) */
	if (json_string_value(json_object_get(j, RT_ROLE_LABEL)) &&
	    json_string_value(json_object_get(j, RT_ROLE_LABEL))[0])
		ours = false;
	if (ours && nm && rt_lxc_name_valid(nm) && strlen(nm) <= RT_LXC_NODEFS_NAME_MAX)
		snprintf(ret_name, size, "%s", nm);
	json_decref(j);
	return ours;
}

/* The create is over (made whole, or undone): its files go, the mark last. */
void rt_lxc_creating_clear(struct rt_lxc *h, const char *name)
{
	static const char *const exts[] = { "sh", "out", "log", "pgid" };
	char path[PATH_MAX];

	for (size_t i = 0; i < ARRAY_SIZE(exts); i++)
		if (rt_lxc_create_file(h, name, exts[i], path, sizeof(path)) == 0)
			unlink(path);
	if (rt_lxc_create_file(h, name, NULL, path, sizeof(path)) == 0)
		unlink(path);
	fsync_dir(h->lxcpath);
}

/* A template a crashed create left running: kill its session (the whole
 * process group, recorded by the wrapper) and wait, up to 5 s, until it is
 * gone, so nothing writes into what is about to be removed. The group is
 * checked to be that template's (a session leader whose argv names the
 * container's path) before it is killed: the id may have been reused. */
static void creating_kill_template(struct rt_lxc *h, const char *name)
{
	char path[PATH_MAX], want[PATH_MAX + 2], buf[32], cmd[8192];
	long pg;
	int n, wlen;

	if (rt_lxc_create_file(h, name, "pgid", path, sizeof(path)) < 0 ||
	    rt_lxc_read_file(path, buf, sizeof(buf)) <= 0)
		return;
	pg = strtol(buf, NULL, 10);
	if (pg <= 1 || pg == getpid() || getsid((pid_t)pg) != (pid_t)pg)
		return;
	snprintf(path, sizeof(path), "/proc/%ld/cmdline", pg);
	n = rt_lxc_read_file(path, cmd, sizeof(cmd));
	wlen = snprintf(want, sizeof(want), "%s/%s", h->lxcpath, name);
	if (n <= 0 || wlen <= 0 || !memmem(cmd, (size_t)n, want, (size_t)wlen + 1))
		return;
	kill(-(pid_t)pg, SIGKILL);
	for (int i = 0; i < 500 && kill(-(pid_t)pg, 0) == 0; i++)
		usleep(10000);
}

/* Remove what a create cut short made: the template if it still runs, the
 * container (liblxc's destroy, then whatever files are left), the create's
 * files, the mark last. */
int rt_lxc_remove_half_made(struct rt_lxc *h, const char *name, struct nerr *err)
{
	_cleanup_lxc_ struct lxc_container *c = NULL;
	char dir[PATH_MAX];

	creating_kill_template(h, name);
	c = lxc_container_new(name, h->lxcpath);
	if (c && c->is_defined(c) && c->is_running(c))
		(void)c->stop(c);
	rt_lxc_create_undo(h, c, name);
	if (rt_lxc_dir(h, name, NULL, dir, sizeof(dir)) == 0 && access(dir, F_OK) == 0)
		return nerr_set(err, EIO, "lxc %s: cannot remove the half-made container's directory %s",
				name, dir);
	rt_lxc_creating_clear(h, name);
	return 0;
}
