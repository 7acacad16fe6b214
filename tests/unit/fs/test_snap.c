/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of fs/snap.h, when a shared render serves a read: a
 * versioned file's while its node is at the render's version, whatever its
 * age; an aged file's (stats) only while also younger than cache_max_age,
 * never when the clock reads before the render began; and which of two
 * renders replaces the other.
 */
#include <criterion/criterion.h>
#include <stdint.h>

#include "snap.h"

#define MS 1000000ull

Test(snap, versioned_serves_while_unchanged)
{
	cr_assert(snap_serves(7, 0, 7, 3600000 * MS, 0));
	cr_assert_not(snap_serves(7, 0, 8, 1, 0));
}

Test(snap, aged_serves_only_within_the_age)
{
	uint64_t made = 5000 * MS;

	cr_assert(snap_serves(3, made, 3, made, 1000 * MS));
	cr_assert(snap_serves(3, made, 3, made + 999 * MS, 1000 * MS));
	cr_assert_not(snap_serves(3, made, 3, made + 1000 * MS, 1000 * MS));
	cr_assert_not(snap_serves(3, made, 3, made + 5000 * MS, 1000 * MS));
	/* a change of the object ends it early */
	cr_assert_not(snap_serves(3, made, 4, made + 1, 1000 * MS));
	/* a reader whose clock reading came before the render began */
	cr_assert_not(snap_serves(3, made, 3, made - 1, 1000 * MS));
}

Test(snap, newer_version_or_later_sample_replaces)
{
	cr_assert(snap_newer(4, 0, 3, 100));
	cr_assert(snap_newer(3, 101, 3, 100));
	cr_assert_not(snap_newer(3, 100, 3, 100));
	cr_assert_not(snap_newer(3, 99, 3, 100));
	cr_assert_not(snap_newer(2, 500, 3, 100));
}
