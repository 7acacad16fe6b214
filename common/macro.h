/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Small helpers shared by every layer: cleanup attributes, TAKE_PTR, ARRAY_SIZE. */
#ifndef NODEFS_MACRO_H
#define NODEFS_MACRO_H

#include <stdlib.h>

static inline void freep(void *p)
{
	free(*(void **)p);
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(freep)

#define TAKE_PTR(p) ({ __typeof__(p) _p_ = (p); (p) = NULL; _p_; })
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

#endif
