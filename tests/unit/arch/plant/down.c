/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * down: the other half of the planted circle (see up.c): a room below
 * that calls back up. Never linked into anything.
 */
int plant_up(int n);

int plant_down(int n)
{
	return n > 0 ? plant_up(n - 1) : 0;
}
