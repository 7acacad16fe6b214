/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * rt-user: USER[:GROUP] of a container (rt_spec.user) to numbers, with
 * names looked up in the container's own /etc/passwd and /etc/group, given
 * as bytes (each driver reads them its way: LXC from the rootfs, Docker
 * through the archive API). Pure: no I/O, callable from any thread.
 * Must not know: engines, the backend.
 */
#include "runtime.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nerr.h"

static bool all_digits(const char *s, size_t n)
{
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

static long long number(const char *s, size_t n)
{
	long long v = 0;

	for (size_t i = 0; i < n; i++)
		v = v * 10 + (s[i] - '0');
	return v;
}

/* Field k (0-based, ':'-separated) of the line at p (up to end), as
 * (start, length); false when the line is shorter. */
static bool field(const char *p, const char *end, int k, const char **ret, size_t *ret_len)
{
	for (int i = 0; i < k; i++) {
		const char *c = memchr(p, ':', (size_t)(end - p));

		if (!c)
			return false;
		p = c + 1;
	}
	const char *c = memchr(p, ':', (size_t)(end - p));

	*ret = p;
	*ret_len = (size_t)((c ? c : end) - p);
	return true;
}

/* In a passwd or group file: the line whose field 0 (by name) or field 2
 * (by number) is key; its fields 2 and 3 as numbers. 0 found, -ENOENT. */
static int lookup(const char *db, size_t len, const char *key, size_t klen, bool by_number,
		  long long *ret_id, long long *ret_gid)
{
	const char *p = db, *end = db + len;

	while (p && p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		const char *f, *f2, *f3;
		size_t fl, f2l, f3l;

		if (le > p && p[0] != '#' && field(p, le, by_number ? 2 : 0, &f, &fl) &&
		    fl == klen && memcmp(f, key, klen) == 0 && field(p, le, 2, &f2, &f2l) &&
		    all_digits(f2, f2l)) {
			*ret_id = number(f2, f2l);
			if (ret_gid)
				*ret_gid = field(p, le, 3, &f3, &f3l) && all_digits(f3, f3l) ?
					   number(f3, f3l) : -1;
			return 0;
		}
		p = nl ? nl + 1 : NULL;
	}
	return -ENOENT;
}

int rt_user_valid(const char *user, struct nerr *err)
{
	const char *colon = user ? strchr(user, ':') : NULL;
	size_t n = user ? strlen(user) : 0;

	if (!n || n > 65 || user[0] == ':' || (colon && (!colon[1] || strchr(colon + 1, ':'))))
		return nerr_set(err, EINVAL, "user='%.70s': expected USER[:GROUP]", user ? user : "");
	for (const char *p = user; *p; p++)
		if (p != colon && !((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
				    (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '.'))
			return nerr_set(err, EINVAL, "user='%.70s': a name or number of "
					"[A-Za-z0-9._-], then optionally :GROUP", user);
	{
		size_t ul = colon ? (size_t)(colon - user) : n;

		size_t gl = colon ? strlen(colon + 1) : 0;

		if ((all_digits(user, ul) && (ul > 10 || number(user, ul) > 0x7fffffff)) ||
		    (colon && all_digits(colon + 1, gl) && (gl > 10 || number(colon + 1, gl) > 0x7fffffff)))
			return nerr_set(err, EINVAL, "user='%.70s': id out of range", user);
		if (!all_digits(user, ul) && ul > 32)
			return nerr_set(err, EINVAL, "user='%.70s': name too long", user);
	}
	return 0;
}

int rt_user_resolve(const char *user, const char *passwd, size_t plen, const char *group,
		    size_t glen, long *ret_uid, long *ret_gid, struct nerr *err)
{
	const char *colon;
	size_t ul;
	long long uid, gid = -1, pg = -1;
	int r;

	r = rt_user_valid(user, err);
	if (r < 0)
		return r;
	colon = strchr(user, ':');
	ul = colon ? (size_t)(colon - user) : strlen(user);
	if (all_digits(user, ul)) {
		uid = number(user, ul);
		/* a number the image lacks is fine (as docker takes it); its
		 * primary group when it has it */
		if (lookup(passwd, passwd ? plen : 0, user, ul, true, &uid, &pg) < 0)
			pg = 0;
		uid = number(user, ul);
	} else if (lookup(passwd, passwd ? plen : 0, user, ul, false, &uid, &pg) < 0) {
		return nerr_set(err, EINVAL, "user=%s: the image has no user '%.*s' in its /etc/passwd",
				user, (int)ul, user);
	}
	if (colon) {
		const char *g = colon + 1;

		if (all_digits(g, strlen(g)))
			gid = number(g, strlen(g));
		else if (lookup(group, group ? glen : 0, g, strlen(g), false, &gid, NULL) < 0)
			return nerr_set(err, EINVAL, "user=%s: the image has no group '%s' in its "
					"/etc/group", user, g);
	} else {
		gid = pg < 0 ? 0 : pg;
	}
	*ret_uid = (long)uid;
	*ret_gid = (long)gid;
	return 0;
}
