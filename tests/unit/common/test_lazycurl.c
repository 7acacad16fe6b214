/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lazycurl: libcurl is not mapped until lazycurl_load(), which loads it
 * once, fills the table the curl_* names go through, and says the same
 * thing to every later caller, from any thread.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "lazycurl.h"
#include "nerr.h"

static bool mapped(void)
{
	char line[512];
	bool found = false;
	FILE *f = fopen("/proc/self/maps", "r");

	cr_assert(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "/libcurl.so"))
			found = true;
	fclose(f);
	return found;
}

Test(lazycurl, not_mapped_until_loaded_then_callable)
{
	struct nerr err = { 0 };
	CURL *h;
	char *esc;

	cr_assert(!lazycurl_loaded());
	cr_assert(!mapped(), "libcurl is mapped before anything asked for it");
	cr_assert_eq(lazycurl_load(&err), 0, "%s", err.msg);
	cr_assert(lazycurl_loaded());
	cr_assert(mapped());
	h = curl_easy_init();
	cr_assert(h);
	cr_assert_eq(curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L), CURLE_OK);
	esc = curl_easy_escape(h, "a b/c", 0);
	cr_assert_str_eq(esc, "a%20b%2Fc");
	curl_free(esc);
	cr_assert_str_eq(curl_easy_strerror(CURLE_OK), "No error");
	curl_easy_cleanup(h);
	/* the second call answers as the first did */
	cr_assert_eq(lazycurl_load(&err), 0);
}

static void *load_thread(void *arg)
{
	(void)arg;
	return (void *)(long)lazycurl_load(&(struct nerr){ 0 });
}

Test(lazycurl, loaded_once_from_many_threads)
{
	pthread_t t[8];
	void *r;

	for (int i = 0; i < 8; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, load_thread, NULL), 0);
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], &r);
		cr_assert_eq((long)r, 0);
	}
	cr_assert(lazycurl_loaded());
}
