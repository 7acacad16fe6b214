/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * secrets: reading a `secrets = FILE` (secrets.h). The checks are made on
 * the descriptor opened with O_NOFOLLOW, so a link swapped in after a
 * check cannot point the read elsewhere.
 *
 * Must not know: CSI, volumes, the config's syntax.
 */
#include "secrets.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nerr.h"

void secrets_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++) {
		explicit_bzero(v[i], strlen(v[i]));
		free(v[i]);
	}
	free(v);
}

static int push(char ***v, size_t *n, const char *s, size_t len)
{
	char **nv = realloc(*v, (*n + 2) * sizeof(*nv));

	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[*n] = strndup(s, len);
	if (!nv[*n])
		return -ENOMEM;
	nv[++*n] = NULL;
	return 0;
}

int secrets_read(const char *path, char ***ret, struct nerr *err)
{
	char *buf = NULL, **v = NULL;
	size_t len = 0, n = 0;
	struct stat st;
	int fd, r = 0, line = 0;

	if (!path || path[0] != '/')
		return nerr_set(err, EINVAL, "secrets file '%s' must be an absolute path",
				path ? path : "");
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	if (fd < 0)
		return nerr_set(err, errno, "secrets file %s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0) {
		r = nerr_set(err, errno, "secrets file %s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = nerr_set(err, EINVAL, "secrets file %s is not a regular file", path);
		goto out;
	}
	if (st.st_uid != 0 || (st.st_mode & (S_IRWXO | S_IWGRP))) {
		r = nerr_set(err, EACCES, "secrets file %s must be owned by root and neither "
			     "readable nor writable by others (it is uid %u, mode %04o)", path,
			     (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
		goto out;
	}
	if ((uint64_t)st.st_size > SECRETS_FILE_MAX) {
		r = nerr_set(err, EFBIG, "secrets file %s is over %u bytes", path, SECRETS_FILE_MAX);
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		r = nerr_set(err, ENOMEM, "out of memory");
		goto out;
	}
	while (len < (size_t)st.st_size) {
		ssize_t k = read(fd, buf + len, (size_t)st.st_size - len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			r = nerr_set(err, errno, "secrets file %s: %s", path, strerror(errno));
			goto out;
		}
		if (k == 0)
			break;
		len += (size_t)k;
	}
	buf[len] = '\0';
	for (char *p = buf; *p;) {
		char *end = strchr(p, '\n'), *eq;
		size_t l = end ? (size_t)(end - p) : strlen(p);

		line++;
		if (l && p[l - 1] == '\r')
			l--;
		eq = memchr(p, '=', l);
		if (l == 0 || p[0] == '#') {
			/* blank or a comment */
		} else if (!eq || eq == p) {
			r = nerr_set(err, EINVAL, "secrets file %s:%d: expected key=value", path, line);
			goto out;
		} else if (ret && push(&v, &n, p, l) < 0) {
			r = nerr_set(err, ENOMEM, "out of memory");
			goto out;
		}
		if (!end)
			break;
		p = end + 1;
	}
	if (ret) {
		if (!v && !(v = calloc(1, sizeof(*v)))) {
			r = nerr_set(err, ENOMEM, "out of memory");
			goto out;
		}
		*ret = v;
		v = NULL;
	}
out:
	if (buf) {
		explicit_bzero(buf, len);
		free(buf);
	}
	secrets_free(v);
	close(fd);
	return r;
}
