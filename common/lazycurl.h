/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lazycurl: libcurl, loaded the first time something needs it.
 *
 * libcurl and the thirty libraries it pulls in (TLS, Kerberos, LDAP, SSH)
 * cost an idle daemon 8.5 MB of its 13 MB once mapped and initialised
 * (docs/design.md, What an object costs), yet only the Docker driver and
 * the etcd client use it. So nodefs does not link it: a file of those two
 * includes this header instead of <curl/curl.h>, and the curl_* calls it
 * makes go through a table that lazycurl_load() fills with dlopen and
 * dlsym, once, before their first use. A node that runs no Docker runtime
 * and no [cluster] never maps libcurl.
 *
 * The table is process-wide, as libcurl's own global state is: filled once
 * under a pthread_once, read-only afterwards.
 *
 * Must not know: what the calls are for.
 */
#ifndef NODEFS_LAZYCURL_H
#define NODEFS_LAZYCURL_H

#include <curl/curl.h>
#include <stdbool.h>

struct nerr;

struct lazycurl {
	CURLcode (*global_init)(long flags);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *h, CURLoption opt, ...);
	CURLcode (*easy_perform)(CURL *h);
	CURLcode (*easy_getinfo)(CURL *h, CURLINFO info, ...);
	void (*easy_cleanup)(CURL *h);
	void (*easy_reset)(CURL *h);
	const char *(*easy_strerror)(CURLcode c);
	char *(*easy_escape)(CURL *h, const char *s, int len);
	void (*free)(void *p);
	struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
	void (*slist_free_all)(struct curl_slist *l);
	CURLM *(*multi_init)(void);
	CURLMcode (*multi_cleanup)(CURLM *m);
	CURLMcode (*multi_add_handle)(CURLM *m, CURL *h);
	CURLMcode (*multi_remove_handle)(CURLM *m, CURL *h);
	CURLMcode (*multi_perform)(CURLM *m, int *running);
	CURLMcode (*multi_poll)(CURLM *m, struct curl_waitfd extra[], unsigned n, int ms, int *ret);
	CURLMcode (*multi_wakeup)(CURLM *m);
	CURLMsg *(*multi_info_read)(CURLM *m, int *left);
};

extern struct lazycurl lazycurl;

/* Load libcurl and initialise it (curl_global_init, CURL_GLOBAL_DEFAULT),
 * once per process; any thread. 0, or -ENOENT (the library or one of its
 * functions is missing) or -EIO (its initialisation failed), with the
 * reason in err. Every later call returns the first one's result. */
int lazycurl_load(struct nerr *err);
/* Whether lazycurl_load has succeeded (any thread; no loading). */
bool lazycurl_loaded(void);

#ifndef LAZYCURL_IMPL
/* curl.h's type-checking macros for setopt and getinfo go first */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#define curl_global_init lazycurl.global_init
#define curl_easy_init lazycurl.easy_init
#define curl_easy_setopt lazycurl.easy_setopt
#define curl_easy_perform lazycurl.easy_perform
#define curl_easy_getinfo lazycurl.easy_getinfo
#define curl_easy_cleanup lazycurl.easy_cleanup
#define curl_easy_reset lazycurl.easy_reset
#define curl_easy_strerror lazycurl.easy_strerror
#define curl_easy_escape lazycurl.easy_escape
#define curl_free lazycurl.free
#define curl_slist_append lazycurl.slist_append
#define curl_slist_free_all lazycurl.slist_free_all
#define curl_multi_init lazycurl.multi_init
#define curl_multi_cleanup lazycurl.multi_cleanup
#define curl_multi_add_handle lazycurl.multi_add_handle
#define curl_multi_remove_handle lazycurl.multi_remove_handle
#define curl_multi_perform lazycurl.multi_perform
#define curl_multi_poll lazycurl.multi_poll
#define curl_multi_wakeup lazycurl.multi_wakeup
#define curl_multi_info_read lazycurl.multi_info_read
#endif

#endif
