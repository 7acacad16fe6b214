/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_snapshot_state: the snapshot state machine (backend/snapshots/
 * snapshot-state.c), every state against every event, and the names the
 * records and the state file use.
 */
#include <criterion/criterion.h>
#include <errno.h>

#include "snapshot-internal.h"

/* The whole table: -1 where the event cannot happen in the state. */
static const int want[S_GONE + 1][SE_DELETE_FAILED + 1] = {
	/*               CREATED   CREATE_FAILED UNCERTAIN   DELETE      DELETED  DELETE_FAILED */
	[S_CREATING] = { S_READY,  S_FAILED,     S_CREATING, S_DELETING, -1,      -1 },
	[S_READY]    = { -1,       -1,           -1,         S_DELETING, -1,      -1 },
	[S_DELETING] = { -1,       -1,           S_DELETING, S_DELETING, S_GONE,  S_READY },
	[S_FAILED]   = { -1,       -1,           -1,         S_DELETING, -1,      -1 },
	[S_GONE]     = { -1,       -1,           -1,         -1,         -1,      -1 },
};

Test(snapshot_state, every_state_and_event)
{
	for (int s = 0; s <= S_GONE; s++)
		for (int e = 0; e <= SE_DELETE_FAILED; e++) {
			enum sstate n = (enum sstate)99;
			int r = snapshot_next((enum sstate)s, (enum sevent)e, &n);

			if (want[s][e] < 0) {
				cr_expect_eq(r, -EINVAL, "state %d event %d", s, e);
				cr_expect_eq(n, (enum sstate)99, "nothing written on refusal");
			} else {
				cr_expect_eq(r, 0, "state %d event %d", s, e);
				cr_expect_eq(n, (enum sstate)want[s][e], "state %d event %d", s, e);
			}
		}
	enum sstate n;
	cr_expect_eq(snapshot_next(S_READY, (enum sevent)42, &n), -EINVAL);
}

Test(snapshot_state, names_round_trip)
{
	for (int s = 0; s < S_GONE; s++)
		cr_expect_eq(sstate_from_string(sstate_to_string((enum sstate)s)), s);
	cr_expect_str_eq(sstate_to_string(S_READY), "READY");
	cr_expect_str_eq(sstate_to_string(S_GONE), "DELETED");
	cr_expect_str_eq(sstate_to_string((enum sstate)77), "UNKNOWN");
	cr_expect_eq(sstate_from_string("DELETED"), -1, "gone is no state a record holds");
	cr_expect_eq(sstate_from_string("ready"), -1);
	cr_expect_eq(sstate_from_string(NULL), -1);
}
