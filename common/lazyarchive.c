/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lazyarchive: the table behind lazyarchive.h, filled from libarchive.so.13
 * by dlopen and dlsym on first need; see the header.
 *
 * Must not know: what the archives are for.
 */
#define LAZYARCHIVE_IMPL
#include "lazyarchive.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

#include "lazylib.h"
#include "nerr.h"

/* Debian 12's libarchive13, the one the build is made against */
#define LAZYARCHIVE_SONAME "libarchive.so.13"

struct lazyarchive lazyarchive;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_result;
static char load_error[NERR_MSG_MAX];

static const struct lazysym syms[] = {
#define SYM(f) { "archive_" #f, offsetof(struct lazyarchive, f) }
	SYM(read_new), SYM(read_support_format_tar), SYM(read_support_format_gnutar),
	SYM(read_support_format_zip), SYM(read_support_filter_gzip), SYM(read_support_filter_xz),
	SYM(read_open_filename), SYM(read_next_header), SYM(read_data_block), SYM(read_free),
	SYM(write_disk_new), SYM(write_disk_set_options), SYM(write_header),
	SYM(write_data_block), SYM(write_finish_entry), SYM(write_free), SYM(error_string),
	SYM(entry_pathname), SYM(entry_hardlink), SYM(entry_symlink), SYM(entry_filetype),
	SYM(entry_size), SYM(entry_set_pathname), SYM(entry_set_hardlink),
#undef SYM
};

static void load_once(void)
{
	struct lazyarchive t = { 0 };
	/* kept for the life of the process */
	int r = lazylib_fill(LAZYARCHIVE_SONAME, syms, sizeof(syms) / sizeof(syms[0]), &t, sizeof(t),
			     load_error, sizeof(load_error));

	if (r < 0) {
		load_result = r;
		return;
	}
	lazyarchive = t;
}

int lazyarchive_load(struct nerr *err)
{
	pthread_once(&once, load_once);
	if (load_result < 0)
		return nerr_set(err, -load_result, "%s", load_error);
	return 0;
}
