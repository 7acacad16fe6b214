/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lazylib: dlopen and dlsym into a table; see lazylib.h.
 * Must not know: which library, or what its functions do.
 */
#include "lazylib.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

int lazylib_fill(const char *soname, const struct lazysym *syms, size_t n, void *table,
		 size_t table_size, char *err, size_t errsz)
{
	void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		const char *why = dlerror();

		snprintf(err, errsz, "cannot load %s: %s", soname, why ? why : "unknown error");
		return -ENOENT;
	}
	for (size_t i = 0; i < n; i++) {
		void *f = dlsym(h, syms[i].name);

		if (!f) {
			snprintf(err, errsz, "%s has no %s", soname, syms[i].name);
			return -ENOENT;
		}
		/* a function pointer's bytes, as dlsym gives them (POSIX) */
		if (syms[i].off + sizeof(f) > table_size)
			return -EINVAL;
		memcpy((char *)table + syms[i].off, &f, sizeof(f));
	}
	return 0;
}
