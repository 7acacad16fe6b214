/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lazycurl: the table behind lazycurl.h, filled from libcurl.so.4 by
 * dlopen and dlsym on first need; see the header.
 *
 * Must not know: what the calls are for.
 */
#define LAZYCURL_IMPL
#include "lazycurl.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>

#include "lazylib.h"
#include "nerr.h"

/* Debian's libcurl4 (the OpenSSL flavour the build is made against) */
#define LAZYCURL_SONAME "libcurl.so.4"

struct lazycurl lazycurl;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_result;
static atomic_bool loaded;
static char load_error[NERR_MSG_MAX];

static const struct lazysym syms[] = {
#define SYM(f) { "curl_" #f, offsetof(struct lazycurl, f) }
	SYM(global_init), SYM(easy_init), SYM(easy_setopt), SYM(easy_perform),
	SYM(easy_getinfo), SYM(easy_cleanup), SYM(easy_reset), SYM(easy_strerror),
	SYM(easy_escape), SYM(free), SYM(slist_append), SYM(slist_free_all),
	SYM(multi_init), SYM(multi_cleanup), SYM(multi_add_handle), SYM(multi_remove_handle),
	SYM(multi_perform), SYM(multi_poll), SYM(multi_wakeup), SYM(multi_info_read),
#undef SYM
};

static void load_once(void)
{
	struct lazycurl t = { 0 };
	/* kept for the life of the process, as libcurl's global state is */
	int r = lazylib_fill(LAZYCURL_SONAME, syms, sizeof(syms) / sizeof(syms[0]), &t, sizeof(t),
			     load_error, sizeof(load_error));

	if (r < 0) {
		load_result = r;
		return;
	}
	if (t.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(load_error, sizeof(load_error), "curl_global_init failed");
		load_result = -EIO;
		return;
	}
	lazycurl = t;
	atomic_store(&loaded, true);
}

bool lazycurl_loaded(void)
{
	return atomic_load(&loaded);
}

int lazycurl_load(struct nerr *err)
{
	pthread_once(&once, load_once);
	if (load_result < 0)
		return nerr_set(err, -load_result, "%s", load_error);
	return 0;
}
