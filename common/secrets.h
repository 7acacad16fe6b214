/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * secrets: the CSI secrets a profile or a plugin names with `secrets =
 * FILE`. The file holds key=value lines and must be a regular file owned
 * by root that no one else may read or write (mode 0600 or 0400; group
 * read for a root group is allowed, never others); it is read at each
 * call that takes secrets, so a changed file is used by the next call, and
 * its map goes nowhere but into the request's secrets field (csi/).
 *
 * What is read is never written anywhere: no message here quotes a line
 * of the file (only its path and line number), and the vector is wiped
 * before it is freed. Must not know: CSI, volumes, the config's syntax.
 */
#ifndef NODEFS_SECRETS_H
#define NODEFS_SECRETS_H

struct nerr;

#define SECRETS_FILE_MAX (64u << 10)

/* Check path and, with ret non-NULL, read it into a NULL-terminated vector
 * of "key=value" strings (malloc'd, free with secrets_free). Blank lines
 * and lines starting with '#' are skipped; blanks around the key and the
 * value are kept as written but the line's end. -errno with err: ENOENT,
 * EACCES (not root's, or readable or writable by others, or writable by
 * the group), EINVAL (not absolute, not a regular file, a line without
 * '=' or with an empty key), EFBIG (over SECRETS_FILE_MAX), ENOMEM, or
 * what open(2) gives. Any thread. */
int secrets_read(const char *path, char ***ret, struct nerr *err);
/* Wipe and free a vector of secrets_read. NULL-safe. */
void secrets_free(char **v);

#endif
