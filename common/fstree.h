/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fstree: a directory tree's bytes, and its removal, without following a
 * symlink or crossing into another file system (a container's sandbox,
 * which its workload may fill with anything). Any thread; blocking I/O.
 */
#ifndef NODEFS_FSTREE_H
#define NODEFS_FSTREE_H

#include <stdint.h>

/* The sum of st_size of the regular files under path (each inode once
 * per directory; symlinks not followed; other file systems not entered).
 * 0 or -errno of opening path. */
int fstree_bytes(const char *path, uint64_t *ret);

/* Remove path and everything under it (symlinks removed, not followed;
 * a mount point under it left with what it holds). 0 (also when path is
 * gone) or the first -errno. */
int fstree_remove(const char *path);

#endif
