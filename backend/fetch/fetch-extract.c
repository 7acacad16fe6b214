/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fetch-extract: an archive (tar, tar.gz, tar.xz, zip) unpacked into a
 * sandbox through libarchive, with its secure flags (no '..', no absolute
 * path, no extraction through a symlink) and, beyond them, no symlink or
 * hard link whose target leads out: what GNU tar and libarchive refuse,
 * and what they let through. Everything lands in a temporary directory
 * first; only a whole archive is moved into place. Must not know:
 * containers, the cache's layout.
 */
#include "fetch.h"
#include "fetch-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <dirent.h>

#include "fstree.h"
#include "lazyarchive.h"	/* libarchive, loaded on first need */
#include "nerr.h"

int fetch_copy_file(const char *src, const char *dst)
{
	int in = open(src, O_RDONLY | O_CLOEXEC), out, r = 0;
	struct stat st;

	if (in < 0)
		return -errno;
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0) {
		r = -errno;
		close(in);
		return r;
	}
	if (ioctl(out, FICLONE, in) < 0 && fstat(in, &st) == 0) {
		off_t left = st.st_size;

		while (left > 0) {
			ssize_t k = copy_file_range(in, NULL, out, NULL, (size_t)left, 0);

			if (k <= 0) {
				r = k < 0 ? -errno : -EIO;
				break;
			}
			left -= k;
		}
	}
	close(in);
	if (close(out) < 0 && !r)
		r = -errno;
	if (r < 0)
		unlink(dst);
	return r;
}

static int chown_tree(const char *dir, uid_t uid, gid_t gid, int depth)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char p[PATH_MAX];

	if (!d || depth > 256)
		return d ? closedir(d), -ELOOP : -errno;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		(void)lchown(p, uid, gid);
		if (de->d_type == DT_DIR)
			chown_tree(p, uid, gid, depth + 1);
	}
	closedir(d);
	return 0;
}

int fetch_extract(const struct fetch_env *env, const char *path, const char *dest,
		  const char *uri, uint64_t base, struct nerr *err)
{
	char root[PATH_MAX], tmp[PATH_MAX + 32], from[PATH_MAX * 2], to[PATH_MAX * 2];
	struct archive *a = NULL, *w = NULL;
	struct archive_entry *e;
	unsigned char rnd[4] = { 0 };
	uint64_t wrote = 0;
	DIR *d = NULL;
	int r = lazyarchive_load(err), ar;

	if (r < 0)
		return r;
	a = archive_read_new();
	w = archive_write_disk_new();
	if (!a || !w) {
		r = nerr_set(err, ENOMEM, "out of memory");
		goto out;
	}
	snprintf(root, sizeof(root), "%s/%s", env->sandbox, dest);
	/* no symlink on the way from the sandbox to dest (what libarchive's
	 * secure flag refused when it walked the whole path of every entry) */
	for (char *p = root + strlen(env->sandbox); p && *p; p = strchr(p + 1, '/')) {
		struct stat ls;
		char c = *p;

		*p = '\0';
		int bad = lstat(root, &ls) == 0 && S_ISLNK(ls.st_mode);

		*p = c;
		if (bad) {
			r = nerr_set(err, EIO, "fetch %.200s: dest '%.200s' passes through a symlink; refused",
				     uri, dest);
			goto out;
		}
	}
	{
		struct stat ls;

		if (lstat(root, &ls) == 0 && S_ISLNK(ls.st_mode)) {
			r = nerr_set(err, EIO, "fetch %.200s: dest '%.200s' is a symlink; refused", uri,
				     dest);
			goto out;
		}
	}
	if (mkdir(root, 0755) < 0 && errno != EEXIST) {
		r = nerr_set(err, errno, "fetch %.200s: %s: %s", uri, root, strerror(errno));
		goto out;
	}
	(void)getrandom(rnd, sizeof(rnd), 0);
	snprintf(tmp, sizeof(tmp), "%s/.nodefs-extract-%02x%02x%02x%02x", root, rnd[0], rnd[1],
		 rnd[2], rnd[3]);
	if (mkdir(tmp, 0700) < 0) {
		r = nerr_set(err, errno, "fetch %.200s: %s: %s", uri, tmp, strerror(errno));
		goto out;
	}
	archive_read_support_format_tar(a);
	archive_read_support_format_gnutar(a);
	archive_read_support_format_zip(a);
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_xz(a);
	/* SECURE_NOABSOLUTEPATHS is ours (fetch_path_inside refuses an
	 * absolute name before it is rewritten under tmp, which is absolute).
	 * SECURE_SYMLINKS from the archive's first symlink or hard link on:
	 * tmp is new and ours (0700, nothing else writes there), so before
	 * one of them no path under it can pass through a symlink, and the
	 * flag's check, which opens every directory of the absolute path of
	 * every entry (8 openat, 7 fstatat, 8 close an entry here, against
	 * tar's one openat), would find nothing */
	const int opts = ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_NODOTDOT;
	bool links = false;

	archive_write_disk_set_options(w, opts);
	if (archive_read_open_filename(a, path, 1 << 16) != ARCHIVE_OK) {
		r = nerr_set(err, EIO, "fetch %.200s: not an archive: %s", uri, archive_error_string(a));
		goto undo;
	}
	while ((ar = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		/* copied: archive_entry_set_pathname below replaces the
		 * entry's own (the error lines name the archive's name) */
		char name_buf[PATH_MAX];
		const char *name = archive_entry_pathname(e);

		if (name) {
			snprintf(name_buf, sizeof(name_buf), "%s", name);
			name = name_buf;
		}
		const char *hl = archive_entry_hardlink(e);
		const char *sl = archive_entry_symlink(e);
		char full[PATH_MAX * 2];

		if (!name || !fetch_path_inside(name, NULL, false) ||
		    (hl && !fetch_path_inside(name, hl, false)) ||
		    (sl && !fetch_path_inside(name, sl, true))) {
			r = nerr_set(err, EIO, "fetch %.200s: the archive entry '%.200s'%s%.200s would "
				     "land outside the sandbox; refused", uri, name ? name : "",
				     hl ? " -> " : sl ? " -> " : "", hl ? hl : sl ? sl : "");
			goto undo;
		}
		if (archive_entry_filetype(e) == AE_IFREG)
			wrote += (uint64_t)archive_entry_size(e);
		if (env->sandbox_limit && base + wrote > env->sandbox_limit) {
			r = nerr_set(err, EFBIG, "fetch %.200s: unpacking passes sandbox_size (%" PRIu64
				     " bytes)", uri, env->sandbox_limit);
			goto undo;
		}
		if (!links && (hl || sl || archive_entry_filetype(e) == AE_IFLNK)) {
			links = true;
			archive_write_disk_set_options(w, opts | ARCHIVE_EXTRACT_SECURE_SYMLINKS);
		}
		if (snprintf(full, sizeof(full), "%s/%s", tmp, name) >= (int)sizeof(full)) {
			r = nerr_set(err, EIO, "fetch %.200s: the archive entry '%.200s': name too long",
				     uri, name);
			goto undo;
		}
		archive_entry_set_pathname(e, full);
		if (hl) {
			snprintf(to, sizeof(to), "%s/%s", tmp, hl);
			archive_entry_set_hardlink(e, to);
		}
		if (archive_write_header(w, e) != ARCHIVE_OK) {
			r = nerr_set(err, EIO, "fetch %.200s: entry '%.200s': %s", uri, name,
				     archive_error_string(w));
			goto undo;
		}
		if (archive_entry_size(e) > 0) {
			const void *buf;
			size_t len;
			la_int64_t off;

			while ((ar = archive_read_data_block(a, &buf, &len, &off)) == ARCHIVE_OK)
				if (archive_write_data_block(w, buf, len, off) != ARCHIVE_OK) {
					r = nerr_set(err, EIO, "fetch %.200s: entry '%.200s': %s", uri,
						     name, archive_error_string(w));
					goto undo;
				}
			if (ar != ARCHIVE_EOF) {
				r = nerr_set(err, EIO, "fetch %.200s: entry '%.200s': %s", uri, name,
					     archive_error_string(a));
				goto undo;
			}
		}
		if (archive_write_finish_entry(w) != ARCHIVE_OK) {
			r = nerr_set(err, EIO, "fetch %.200s: entry '%.200s': %s", uri, name,
				     archive_error_string(w));
			goto undo;
		}
	}
	if (ar != ARCHIVE_EOF) {
		r = nerr_set(err, EIO, "fetch %.200s: reading the archive: %s", uri,
			     archive_error_string(a));
		goto undo;
	}
	if (env->uid != (uid_t)-1)
		chown_tree(tmp, env->uid, env->gid, 0);
	/* whole: each top entry into place */
	d = opendir(tmp);
	for (struct dirent *de; d && (de = readdir(d));) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(from, sizeof(from), "%s/%s", tmp, de->d_name);
		snprintf(to, sizeof(to), "%s/%s", root, de->d_name);
		if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_EXCHANGE) == 0) {
			/* what was there before goes (its copy now in tmp) */
			continue;
		}
		if (rename(from, to) < 0) {
			r = nerr_set(err, errno, "fetch %.200s: %s: %s", uri, to, strerror(errno));
			goto undo;
		}
	}
undo:
	if (d)
		closedir(d);
	fstree_remove(tmp);
out:
	if (a)
		archive_read_free(a);
	if (w)
		archive_write_free(w);
	return r;
}
