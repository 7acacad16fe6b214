/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * backing: what a volume is on disk. A `dir` volume is a directory
 * BASE/data/ID (size not enforced), an `image` volume a sparse file
 * BASE/data/ID.img formatted by mkfs, attached to a loop device at stage
 * time and mounted. A directory is removed in-process (nftw), never
 * across a mount. Copies (snapshots, clones) are reflinks (FICLONE) where
 * the filesystem offers them, sparse copies otherwise; a directory is
 * copied by cp -a --reflink=auto. Bind mounts, unmounts, mount flags and
 * growing a filesystem online live here too. It runs on worker threads
 * with no lock held and knows nothing of CSI messages or records' files.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin.h"

extern char **environ;

void backing_path(const struct plugin *p, const char *id, enum backing b, char *out, size_t outsz)
{
	snprintf(out, outsz, "%s/%s%s", p->data_dir, id, b == BACKING_IMAGE ? ".img" : "");
}

/* Run argv[0] (a full path or a name looked up on PATH), wait for it; its
 * stderr's last line goes to err. 0, or -EIO with the words. */
static int run(char *const argv[], char *err, size_t errsz)
{
	int pfd[2];
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int status, r;
	char out[512];
	size_t n = 0;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return snprintf(err, errsz, "pipe: %s", strerror(errno)), -errno;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
	r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	if (r != 0) {
		close(pfd[0]);
		snprintf(err, errsz, "%s: %s", argv[0], strerror(r));
		return -r;
	}
	for (;;) {
		ssize_t k = read(pfd[0], out + n, sizeof(out) - 1 - n);

		if (k <= 0) {
			if (k < 0 && errno == EINTR)
				continue;
			break;
		}
		n += (size_t)k;
		if (n == sizeof(out) - 1) {	/* keep the tail */
			memmove(out, out + 256, n - 256);
			n -= 256;
		}
	}
	close(pfd[0]);
	out[n] = '\0';
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
		out[--n] = '\0';
	for (char *q = out; *q; q++)
		if (*q == '\n' || *q == '\t')
			*q = ' ';
	snprintf(err, errsz, "%s failed (%s %d): %s", argv[0],
		 WIFEXITED(status) ? "exit" : "signal",
		 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), out);
	return -EIO;
}

int backing_min_size(enum backing b, const char *fs_type, int64_t *ret)
{
	if (b == BACKING_DIR)
		*ret = 0;
	else if (strcmp(fs_type, "xfs") == 0)
		*ret = 300ll << 20;	/* mkfs.xfs refuses smaller */
	else
		*ret = 8ll << 20;
	return 0;
}

/* Copy a file keeping holes: FICLONE first, then data extents only. */
static int copy_image(const char *from, const char *to, char *err, size_t errsz)
{
	int in = open(from, O_RDONLY | O_CLOEXEC), out = -1, r = 0;
	struct stat st;

	if (in < 0 || fstat(in, &st) < 0) {
		r = -errno;
		snprintf(err, errsz, "open %s: %s", from, strerror(errno));
		goto done;
	}
	out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0) {
		r = -errno;
		snprintf(err, errsz, "create %s: %s", to, strerror(errno));
		goto done;
	}
	if (ioctl(out, FICLONE, in) == 0)
		goto sync;
	if (ftruncate(out, st.st_size) < 0) {
		r = -errno;
		snprintf(err, errsz, "size %s: %s", to, strerror(errno));
		goto done;
	}
	off_t pos = 0;
	while (pos < st.st_size) {
		off_t data = lseek(in, pos, SEEK_DATA);

		if (data < 0)
			break;	/* ENXIO: only a hole is left */
		off_t hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0)
			hole = st.st_size;
		off_t o = data;
		while (o < hole) {
			ssize_t n = copy_file_range(in, &o, out, &(off_t){ o }, (size_t)(hole - o), 0);

			if (n <= 0) {
				r = n < 0 ? -errno : -EIO;
				snprintf(err, errsz, "copy %s: %s", from, n < 0 ? strerror(errno) : "short copy");
				goto done;
			}
		}
		pos = hole;
	}
sync:
	if (fsync(out) < 0) {
		r = -errno;
		snprintf(err, errsz, "fsync %s: %s", to, strerror(errno));
	}
done:
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	if (r < 0)
		unlink(to);
	return r;
}

int backing_copy(const char *from, const char *to, enum backing b, char *err, size_t errsz)
{
	if (b == BACKING_IMAGE)
		return copy_image(from, to, err, errsz);
	if (mkdir(to, 0755) < 0 && errno != EEXIST)
		return snprintf(err, errsz, "mkdir %s: %s", to, strerror(errno)), -errno;
	char src[PATH_CAP + 3];
	snprintf(src, sizeof(src), "%s/.", from);
	char *argv[] = { "cp", "-a", "--reflink=auto", src, (char *)to, NULL };
	return run(argv, err, errsz);
}

static int mkfs(const char *fs_type, const char *file, char *err, size_t errsz)
{
	char prog[32];

	snprintf(prog, sizeof(prog), "mkfs.%s", fs_type);
	if (strcmp(fs_type, "xfs") == 0) {
		char *argv[] = { prog, "-q", "-f", "-K", (char *)file, NULL };
		return run(argv, err, errsz);
	}
	if (strncmp(fs_type, "ext", 3) == 0) {
		char *argv[] = { prog, "-q", "-F", "-E", "nodiscard,lazy_itable_init=1,lazy_journal_init=1",
				 (char *)file, NULL };
		return run(argv, err, errsz);
	}
	char *argv[] = { prog, (char *)file, NULL };
	return run(argv, err, errsz);
}

int backing_create(struct plugin *p, const struct vol *v, const char *src_path,
		   enum backing src_backing, char *err, size_t errsz)
{
	char path[PATH_CAP + 1];
	int r;

	backing_path(p, v->id, v->backing, path, sizeof(path));
	if (src_path) {
		r = backing_copy(src_path, path, v->backing, err, errsz);
		if (r < 0)
			return r;
		if (v->backing == BACKING_IMAGE) {
			/* A bigger clone: the file grows now, its filesystem
			 * at the next stage (fs_size < size). */
			if (truncate(path, v->size) < 0)
				return snprintf(err, errsz, "grow %s: %s", path, strerror(errno)), -errno;
		}
		return 0;
	}
	if (v->backing == BACKING_DIR) {
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return snprintf(err, errsz, "mkdir %s: %s", path, strerror(errno)), -errno;
		return 0;
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return snprintf(err, errsz, "create %s: %s", path, strerror(errno)), -errno;
	r = ftruncate(fd, v->size) < 0 ? -errno : 0;
	close(fd);
	if (r < 0)
		return snprintf(err, errsz, "size %s: %s", path, strerror(-r)), r;
	if (v->fs_type[0])
		return mkfs(v->fs_type, path, err, errsz);
	return 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	if (remove(path) < 0 && errno != ENOENT)
		return -1;
	return 0;
}

int backing_remove(struct plugin *p, const char *id, enum backing b)
{
	char path[PATH_CAP + 1];

	backing_path(p, id, b, path, sizeof(path));
	if (b == BACKING_IMAGE)
		return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	/* Depth first, never following a symlink nor crossing a mount. */
	if (nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) != 0)
		return errno ? -errno : -EIO;
	return lstat(path, &st) == 0 ? -EBUSY : 0;
}

int backing_grow(struct plugin *p, const struct vol *v, int64_t size, char *err, size_t errsz)
{
	char path[PATH_CAP + 1];

	if (v->backing == BACKING_DIR)
		return 0;
	backing_path(p, v->id, v->backing, path, sizeof(path));
	if (truncate(path, size) < 0)
		return snprintf(err, errsz, "grow %s: %s", path, strerror(errno)), -errno;
	return 0;
}

/* ---- loop devices ---- */

static int loop_attach(const char *file, char ret[24], char *err, size_t errsz)
{
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);

	if (ctl < 0)
		return snprintf(err, errsz, "open /dev/loop-control: %s", strerror(errno)), -errno;
	int ffd = open(file, O_RDWR | O_CLOEXEC);
	if (ffd < 0) {
		int e = errno;

		close(ctl);
		return snprintf(err, errsz, "open %s: %s", file, strerror(e)), -e;
	}
	for (int tries = 0; tries < 16; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);

		if (n < 0)
			break;
		char dev[24];
		snprintf(dev, sizeof(dev), "/dev/loop%d", n);
		int lfd = open(dev, O_RDWR | O_CLOEXEC);
		if (lfd < 0)
			continue;
		struct loop_config cfg = { .fd = (unsigned)ffd };
		size_t fl = strlen(file) < LO_NAME_SIZE - 1 ? strlen(file) : LO_NAME_SIZE - 1;
		memcpy(cfg.info.lo_file_name, file, fl);
		if (ioctl(lfd, LOOP_CONFIGURE, &cfg) == 0) {
			close(lfd);
			close(ffd);
			close(ctl);
			memcpy(ret, dev, 24);
			return 0;
		}
		close(lfd);
		if (errno != EBUSY)
			break;	/* someone took it meanwhile: EBUSY, try another */
	}
	int e = errno;
	close(ffd);
	close(ctl);
	snprintf(err, errsz, "attach %s to a loop device: %s", file, strerror(e));
	return -e;
}

static int loop_detach(const char *dev)
{
	int fd = open(dev, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	int r = ioctl(fd, LOOP_CLR_FD) < 0 && errno != ENXIO ? -errno : 0;
	close(fd);
	return r;
}

static int loop_refresh(const char *dev)
{
	int fd = open(dev, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	int r = ioctl(fd, LOOP_SET_CAPACITY, 0) < 0 ? -errno : 0;
	close(fd);
	return r;
}

/* ---- mounts ---- */

int backing_mount_flags(size_t n, char **flags, unsigned long *ret_flags, char *data, size_t datasz,
			char *err, size_t errsz)
{
	static const struct { const char *name; unsigned long set; } known[] = {
		{ "ro", MS_RDONLY }, { "rw", 0 }, { "noatime", MS_NOATIME }, { "nodiratime", MS_NODIRATIME },
		{ "relatime", MS_RELATIME }, { "strictatime", MS_STRICTATIME }, { "nosuid", MS_NOSUID },
		{ "nodev", MS_NODEV }, { "noexec", MS_NOEXEC }, { "sync", MS_SYNCHRONOUS },
		{ "dirsync", MS_DIRSYNC }, { "defaults", 0 }, { "suid", 0 }, { "dev", 0 }, { "exec", 0 },
		{ "async", 0 }, { "atime", 0 }, { "diratime", 0 },
	};
	unsigned long f = 0;
	size_t dl = 0;

	data[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		size_t k;

		for (k = 0; k < sizeof(known) / sizeof(known[0]); k++)
			if (strcmp(flags[i], known[k].name) == 0)
				break;
		if (k < sizeof(known) / sizeof(known[0])) {
			f |= known[k].set;
			continue;
		}
		size_t l = strlen(flags[i]);
		if (!l || strpbrk(flags[i], ", \t\n") || dl + l + 2 > datasz)
			return snprintf(err, errsz, "mount flag '%.64s' is not valid", flags[i]), -EINVAL;
		if (dl)
			data[dl++] = ',';
		memcpy(data + dl, flags[i], l + 1);
		dl += l;
	}
	*ret_flags = f;
	return 0;
}

int backing_bind(const char *from, const char *to, bool block, bool readonly,
		 unsigned long msflags, char *err, size_t errsz)
{
	struct stat st;

	if (lstat(to, &st) < 0) {
		if (errno != ENOENT)
			return snprintf(err, errsz, "stat %s: %s", to, strerror(errno)), -errno;
		int r = block ? open(to, O_WRONLY | O_CREAT | O_CLOEXEC, 0600) : mkdir(to, 0750);
		if (r < 0)
			return snprintf(err, errsz, "create %s: %s", to, strerror(errno)), -errno;
		if (block)
			close(r);
	} else if (block ? !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode) : !S_ISDIR(st.st_mode)) {
		return snprintf(err, errsz, "%s is not a %s", to, block ? "file" : "directory"), -ENOTDIR;
	}
	if (mount(from, to, NULL, MS_BIND, NULL) < 0)
		return snprintf(err, errsz, "bind %s at %s: %s", from, to, strerror(errno)), -errno;
	unsigned long f = msflags | (readonly ? MS_RDONLY : 0);
	if (f && mount(NULL, to, NULL, MS_REMOUNT | MS_BIND | f, NULL) < 0) {
		int e = errno;

		umount2(to, MNT_DETACH);
		return snprintf(err, errsz, "remount %s with its flags: %s", to, strerror(e)), -e;
	}
	return 0;
}

int backing_freeze(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (ioctl(fd, FIFREEZE, 0) < 0) {
		syncfs(fd);	/* not freezable: at least what is written */
		close(fd);
		return -1;
	}
	return fd;
}

void backing_thaw(int fd)
{
	if (fd < 0)
		return;
	ioctl(fd, FITHAW, 0);
	close(fd);
}

int backing_is_mount(const char *path)
{
	struct statx sx;

	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx) < 0)
		return -errno;
	return (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

static bool same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/* Is the loop device dev attached to the file at path? */
static bool loop_holds(const char *dev, const char *path)
{
	struct loop_info64 li;
	struct stat st;
	int fd;
	bool r;

	if (!dev[0] || stat(path, &st) < 0)
		return false;
	fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	r = ioctl(fd, LOOP_GET_STATUS64, &li) == 0 && li.lo_device == st.st_dev &&
	    li.lo_inode == st.st_ino;
	close(fd);
	return r;
}

/* The device a block node names (its st_rdev), or 0. */
static dev_t rdev_of(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISBLK(st.st_mode) ? st.st_rdev : 0;
}

int backing_stage_check(struct plugin *p, const struct vol *v)
{
	char file[PATH_CAP + 1];
	struct stat st;

	if (!v->staged)
		return STAGE_GONE;
	backing_path(p, v->id, v->backing, file, sizeof(file));
	if (v->backing == BACKING_DIR)
		return backing_is_mount(v->staged) > 0 && same_file(v->staged, file) ? STAGE_PRESENT
										: STAGE_MOUNT_GONE;
	if (!loop_holds(v->loopdev, file))
		return STAGE_GONE;
	if (v->stage_block)
		return STAGE_PRESENT;	/* a block stage is the attached device alone */
	return backing_is_mount(v->staged) > 0 && stat(v->staged, &st) == 0 &&
	       st.st_dev == rdev_of(v->loopdev) ? STAGE_PRESENT : STAGE_MOUNT_GONE;
}

int backing_stage_remount(struct plugin *p, const struct vol *v, unsigned long msflags,
			  const char *data, char *err, size_t errsz)
{
	char file[PATH_CAP + 1];
	struct stat st;

	backing_path(p, v->id, v->backing, file, sizeof(file));
	if (v->backing == BACKING_DIR)
		return backing_bind(file, v->staged, false, false, msflags, err, errsz);
	if (lstat(v->staged, &st) < 0 && mkdir(v->staged, 0750) < 0)
		return snprintf(err, errsz, "create %s: %s", v->staged, strerror(errno)), -errno;
	/* the device already attached: a second loop device on the same
	 * image would mount its filesystem twice */
	if (mount(v->loopdev, v->staged, v->fs_type, msflags, data[0] ? data : NULL) < 0)
		return snprintf(err, errsz, "mount %s (%s) at %s: %s", v->loopdev, v->fs_type,
				v->staged, strerror(errno)), -errno;
	return 0;
}

bool backing_target_present(struct plugin *p, const struct vol *v, const struct target *t)
{
	char file[PATH_CAP + 1];
	struct stat st;

	if (backing_is_mount(t->path) <= 0 || stat(t->path, &st) < 0)
		return false;
	backing_path(p, v->id, v->backing, file, sizeof(file));
	if (v->backing == BACKING_DIR)
		return same_file(t->path, file);
	if (!loop_holds(v->loopdev, file) || !rdev_of(v->loopdev))
		return false;
	if (t->block)
		return S_ISBLK(st.st_mode) && st.st_rdev == rdev_of(v->loopdev);
	return st.st_dev == rdev_of(v->loopdev);
}

int backing_unmount(const char *path, bool remove, char *err, size_t errsz)
{
	int m = backing_is_mount(path);

	if (m == -ENOENT)
		return 0;
	/* Every mount stacked there, newest first. */
	while (m > 0) {
		if (umount2(path, UMOUNT_NOFOLLOW) < 0) {
			if (errno == EBUSY && umount2(path, UMOUNT_NOFOLLOW | MNT_DETACH) == 0)
				;
			else if (errno != EINVAL)
				return snprintf(err, errsz, "unmount %s: %s", path, strerror(errno)), -errno;
			else
				break;
		}
		m = backing_is_mount(path);
	}
	if (remove && rmdir(path) < 0 && errno == ENOTDIR)
		unlink(path);
	return 0;
}

int backing_stage(struct plugin *p, const struct vol *v, const char *path, bool block,
		  unsigned long msflags, const char *data, char ret_loop[24], bool *ret_grown,
		  char *err, size_t errsz)
{
	char file[PATH_CAP + 1];
	int r;

	*ret_grown = false;
	backing_path(p, v->id, v->backing, file, sizeof(file));
	ret_loop[0] = '\0';
	if (v->backing == BACKING_DIR)
		return backing_bind(file, path, false, false, msflags, err, errsz);
	r = loop_attach(file, ret_loop, err, errsz);
	if (r < 0)
		return r;
	if (block)
		return 0;
	if (v->fs_size < v->size && strncmp(v->fs_type, "ext", 3) == 0) {
		/* Grow offline while nothing mounts it: needs no
		 * CAP_SYS_RESOURCE, which ext4's online resize does. */
		char *argv[] = { "resize2fs", "-f", ret_loop, NULL };

		if ((r = run(argv, err, errsz)) < 0)
			goto fail;
		*ret_grown = true;
	}
	struct stat st;
	if (lstat(path, &st) < 0 && mkdir(path, 0750) < 0) {
		r = -errno;
		snprintf(err, errsz, "create %s: %s", path, strerror(errno));
		goto fail;
	}
	if (mount(ret_loop, path, v->fs_type, msflags, data[0] ? data : NULL) < 0) {
		r = -errno;
		snprintf(err, errsz, "mount %s (%s) at %s: %s", ret_loop, v->fs_type, path, strerror(errno));
		goto fail;
	}
	return 0;
fail:
	loop_detach(ret_loop);
	ret_loop[0] = '\0';
	return r;
}

int backing_unstage(const struct vol *v, char *err, size_t errsz)
{
	int r = 0;

	if (v->staged && !v->stage_block)
		r = backing_unmount(v->staged, false, err, errsz);
	if (r == 0 && v->loopdev[0] && (r = loop_detach(v->loopdev)) < 0)
		snprintf(err, errsz, "detach %s: %s", v->loopdev, strerror(-r));
	return r;
}

int backing_fs_grow(const struct vol *v, const char *mnt, char *err, size_t errsz)
{
	int r;

	if (v->backing != BACKING_IMAGE || !v->loopdev[0])
		return 0;
	r = loop_refresh(v->loopdev);
	if (r < 0)
		return snprintf(err, errsz, "refresh %s: %s", v->loopdev, strerror(-r)), r;
	if (v->stage_block || !v->fs_type[0])
		return 0;
	if (strcmp(v->fs_type, "xfs") == 0) {
		char *argv[] = { "xfs_growfs", (char *)mnt, NULL };
		return run(argv, err, errsz);
	}
	if (strncmp(v->fs_type, "ext", 3) == 0) {
		char *argv[] = { "resize2fs", (char *)v->loopdev, NULL };

		r = run(argv, err, errsz);
		if (r < 0 && strstr(err, "Permission denied")) {
			size_t n = strlen(err);

			snprintf(err + n, errsz - n, " (online ext4 resize needs CAP_SYS_RESOURCE; "
				 "unstage and stage again to grow it offline)");
		}
		return r;
	}
	return snprintf(err, errsz, "cannot grow a %s filesystem", v->fs_type), -EOPNOTSUPP;
}
