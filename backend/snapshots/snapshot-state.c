/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * snapshot-state: a snapshot's states and the events that move it, as a
 * pure function (unit-tested: tests/unit/backend/test_snapshot_state.c).
 *
 *   CREATING --created--> READY --delete--> DELETING --deleted--> (gone)
 *   CREATING --create failed--> FAILED --delete--> DELETING
 *   CREATING --delete--> DELETING (what the repeated create made is deleted)
 *   DELETING --delete failed--> READY
 *   CREATING, DELETING --uncertain--> the same (the call is repeated)
 *
 * Must not know: plugins, records, the tree.
 */
#include "snapshot-internal.h"

#include <errno.h>
#include <string.h>

static const char *const names[] = {
	[S_CREATING] = "CREATING", [S_READY] = "READY", [S_DELETING] = "DELETING",
	[S_FAILED] = "FAILED", [S_GONE] = "DELETED",
};

const char *sstate_to_string(enum sstate s)
{
	return (unsigned)s <= S_GONE ? names[s] : "UNKNOWN";
}

int sstate_from_string(const char *s)
{
	for (int i = 0; s && i < S_GONE; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

int snapshot_next(enum sstate s, enum sevent e, enum sstate *ret)
{
	enum sstate n;

	switch (e) {
	case SE_CREATED:
		if (s != S_CREATING)
			return -EINVAL;
		n = S_READY;
		break;
	case SE_CREATE_FAILED:
		if (s != S_CREATING)
			return -EINVAL;
		n = S_FAILED;
		break;
	case SE_UNCERTAIN:
		if (s != S_CREATING && s != S_DELETING)
			return -EINVAL;
		n = s;
		break;
	case SE_DELETE:
		if (s == S_GONE)
			return -EINVAL;
		n = S_DELETING;
		break;
	case SE_DELETED:
		if (s != S_DELETING)
			return -EINVAL;
		n = S_GONE;
		break;
	case SE_DELETE_FAILED:
		if (s != S_DELETING)
			return -EINVAL;
		n = S_READY;
		break;
	default:
		return -EINVAL;
	}
	*ret = n;
	return 0;
}
