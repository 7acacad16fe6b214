/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * instance: the id of this nodefs instance (instance.h). It is made once
 * from the kernel's random source when the state dir has none and kept in
 * STATE_DIR/instance-id, one line of 32 hex digits, written as every
 * record is (temp file, fsync, rename, fsync of the directory), so a crash
 * leaves the old file or the new one and the id never changes under
 * containers that carry it. It must not know what carries it.
 */
#include "instance.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "nerr.h"

#define INSTANCE_FILE "instance-id"

static bool id_valid(const char *s, size_t n)
{
	if (n != INSTANCE_ID_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return false;
	return true;
}

static int write_new(const char *state_dir, const char *path, const char *id, struct nerr *err)
{
	char tmp[4200], line[INSTANCE_ID_LEN + 2];
	int fd, r = 0, dfd;

	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", state_dir, INSTANCE_FILE);
	snprintf(line, sizeof(line), "%s\n", id);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return nerr_set(err, errno, "cannot write %s: %s", tmp, strerror(errno));
	if (write(fd, line, strlen(line)) != (ssize_t)strlen(line) || fsync(fd) < 0)
		r = errno ? -errno : -EIO;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return nerr_set(err, -r, "cannot write %s: %s", path, strerror(-r));
	}
	dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		(void)fsync(dfd);
		close(dfd);
	}
	return 0;
}

int instance_load(const char *state_dir, char ret[INSTANCE_ID_LEN + 1], struct nerr *err)
{
	char path[4200], buf[128], id[INSTANCE_ID_LEN + 1];
	unsigned char raw[INSTANCE_ID_LEN / 2];
	ssize_t n;
	int fd, r;

	snprintf(path, sizeof(path), "%s/%s", state_dir, INSTANCE_FILE);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		r = n < 0 ? -errno : 0;
		close(fd);
		if (r < 0)
			return nerr_set(err, -r, "cannot read %s: %s", path, strerror(-r));
		while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
			n--;
		if (!id_valid(buf, (size_t)n))
			return nerr_set(err, EINVAL, "%s: not an instance id (want %d lowercase hex "
					"digits); remove it to make a new one", path, INSTANCE_ID_LEN);
		memcpy(ret, buf, INSTANCE_ID_LEN);
		ret[INSTANCE_ID_LEN] = '\0';
		return 0;
	}
	if (errno != ENOENT)
		return nerr_set(err, errno, "cannot read %s: %s", path, strerror(errno));
	for (size_t got = 0; got < sizeof(raw);) {
		n = getrandom(raw + got, sizeof(raw) - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return nerr_set(err, errno ? errno : EIO, "getrandom: %s", strerror(errno));
		got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(id + 2 * i, 3, "%02x", raw[i]);
	r = write_new(state_dir, path, id, err);
	if (r < 0)
		return r;
	memcpy(ret, id, sizeof(id));
	return 0;
}

void instance_default_prefix(const char *id, char *buf, size_t size)
{
	snprintf(buf, size, "nodefs-%.8s-", id);
}
