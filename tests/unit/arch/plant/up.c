/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * up: half of a circle planted on purpose between two rooms (up/, down/)
 * for unit-arch-circles-planted, which must see circles.py fail on it.
 * Never linked into anything.
 */
int plant_down(int n);

int plant_up(int n)
{
	return n > 0 ? plant_down(n - 1) : 0;
}
