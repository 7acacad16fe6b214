/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_time.h: the time scale of the integration tests written in C, the
 * same factor as nodefs_test.scaled() in the Python harness.
 * scripts/test.sh exports NODEFS_TIME_SCALE (4 for the sanitizer build,
 * as meson's --timeout-multiplier; 1 otherwise): every upper bound a test
 * asserts on elapsed time, and every deadline it polls against, is
 * SCALED(x) of what the debugoptimized build needs. Knows nothing else.
 */
#ifndef NODEFS_TEST_TIME_H
#define NODEFS_TEST_TIME_H

#include <stdlib.h>

static inline double test_time_scale(void)
{
	const char *s = getenv("NODEFS_TIME_SCALE");
	double v = s && *s ? strtod(s, NULL) : 1.0;

	return v >= 1.0 ? v : 1.0;
}

/* x (any unit) scaled for this build, in x's type's arithmetic as a double */
#define SCALED(x) ((x) * test_time_scale())

#endif
