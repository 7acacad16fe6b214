/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lazyarchive: libarchive, loaded the first time an archive is unpacked.
 *
 * libarchive maps its compressors and, through libxml2, ICU and the C++
 * runtime: 2.4 MB of an idle daemon's resident memory (bench/cluster-scale,
 * docs/design.md) for what only a fetch with `extract` uses. So nodefs does
 * not link it: the one file that unpacks includes this header instead of
 * <archive.h>, and the archive_* calls it makes go through a table that
 * lazyarchive_load() fills with dlopen and dlsym, once, before their first
 * use, as common/lazycurl does for libcurl.
 *
 * Must not know: what the archives are for.
 */
#ifndef NODEFS_LAZYARCHIVE_H
#define NODEFS_LAZYARCHIVE_H

#include <archive.h>
#include <archive_entry.h>
#include <stdbool.h>

struct nerr;

struct lazyarchive {
	struct archive *(*read_new)(void);
	int (*read_support_format_tar)(struct archive *a);
	int (*read_support_format_gnutar)(struct archive *a);
	int (*read_support_format_zip)(struct archive *a);
	int (*read_support_filter_gzip)(struct archive *a);
	int (*read_support_filter_xz)(struct archive *a);
	int (*read_open_filename)(struct archive *a, const char *name, size_t block);
	int (*read_next_header)(struct archive *a, struct archive_entry **e);
	int (*read_data_block)(struct archive *a, const void **buf, size_t *len, la_int64_t *off);
	int (*read_free)(struct archive *a);
	struct archive *(*write_disk_new)(void);
	int (*write_disk_set_options)(struct archive *a, int flags);
	int (*write_header)(struct archive *a, struct archive_entry *e);
	la_ssize_t (*write_data_block)(struct archive *a, const void *buf, size_t len, la_int64_t off);
	int (*write_finish_entry)(struct archive *a);
	int (*write_free)(struct archive *a);
	const char *(*error_string)(struct archive *a);
	const char *(*entry_pathname)(struct archive_entry *e);
	const char *(*entry_hardlink)(struct archive_entry *e);
	const char *(*entry_symlink)(struct archive_entry *e);
	__LA_MODE_T (*entry_filetype)(struct archive_entry *e);
	la_int64_t (*entry_size)(struct archive_entry *e);
	void (*entry_set_pathname)(struct archive_entry *e, const char *name);
	void (*entry_set_hardlink)(struct archive_entry *e, const char *name);
};

extern struct lazyarchive lazyarchive;

/* Load libarchive, once per process; any thread. 0, or -ENOENT (the
 * library or one of its functions is missing) with the reason in err.
 * Every later call returns the first one's result. */
int lazyarchive_load(struct nerr *err);

#ifndef LAZYARCHIVE_IMPL
#define archive_read_new lazyarchive.read_new
#define archive_read_support_format_tar lazyarchive.read_support_format_tar
#define archive_read_support_format_gnutar lazyarchive.read_support_format_gnutar
#define archive_read_support_format_zip lazyarchive.read_support_format_zip
#define archive_read_support_filter_gzip lazyarchive.read_support_filter_gzip
#define archive_read_support_filter_xz lazyarchive.read_support_filter_xz
#define archive_read_open_filename lazyarchive.read_open_filename
#define archive_read_next_header lazyarchive.read_next_header
#define archive_read_data_block lazyarchive.read_data_block
#define archive_read_free lazyarchive.read_free
#define archive_write_disk_new lazyarchive.write_disk_new
#define archive_write_disk_set_options lazyarchive.write_disk_set_options
#define archive_write_header lazyarchive.write_header
#define archive_write_data_block lazyarchive.write_data_block
#define archive_write_finish_entry lazyarchive.write_finish_entry
#define archive_write_free lazyarchive.write_free
#define archive_error_string lazyarchive.error_string
#define archive_entry_pathname lazyarchive.entry_pathname
#define archive_entry_hardlink lazyarchive.entry_hardlink
#define archive_entry_symlink lazyarchive.entry_symlink
#define archive_entry_filetype lazyarchive.entry_filetype
#define archive_entry_size lazyarchive.entry_size
#define archive_entry_set_pathname lazyarchive.entry_set_pathname
#define archive_entry_set_hardlink lazyarchive.entry_set_hardlink
#endif

#endif
