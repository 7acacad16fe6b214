/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lazylib: a library's functions loaded into a table by dlopen and dlsym,
 * the step lazycurl and lazyarchive share. Each keeps its own once, its
 * own table type and error text; this only fills.
 */
#ifndef NODEFS_LAZYLIB_H
#define NODEFS_LAZYLIB_H

#include <stddef.h>

/* One function: its name in the library, its slot's offset in the table. */
struct lazysym {
	const char *name;
	size_t off;
};

/* dlopen soname (kept for the life of the process) and fill table with
 * the n functions of syms. 0, or -ENOENT with why in err (errsz bytes),
 * table then partly filled: fill a local and keep it on 0. */
int lazylib_fill(const char *soname, const struct lazysym *syms, size_t n, void *table,
		 size_t table_size, char *err, size_t errsz);

#endif
