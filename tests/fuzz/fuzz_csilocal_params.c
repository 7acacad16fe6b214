/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_csilocal_params: nodefs-csi-local's canonical parameters
 * (csi-local/params.c), what its records keep of a volume's parameters and
 * mutable parameters and what a start reads back. The input is split at
 * its first NUL: the bytes before are a record's canonical text (decoded
 * pair by pair), those after are "k=v" lines merged over it as a
 * ControllerModifyVolume would. Every pair a merge wrote must split back
 * whole (the merged form encodes ',' and '='), a merge of nothing must
 * read back as the pairs it started from, and a second merge of the same
 * lines must change nothing. Sanitizers catch the rest.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"
#include "sbuf.h"

struct acc {
	struct sbuf sb;
	size_t n;
};

static int collect(void *ud, const char *k, const char *v)
{
	struct acc *a = ud;

	a->n++;
	return sbuf_printf(&a->sb, "%zu:%s=%zu:%s;", strlen(k), k, strlen(v), v) < 0 ? -1 : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t clen = nul ? (size_t)(nul - data) : size;
	char *canon = strndup((const char *)data, clen);
	char *lines = nul ? strndup((const char *)nul + 1, size - clen - 1) : strdup("");
	Csi__V1__CreateVolumeRequest__ParametersEntry ent[16], *ep[16];
	size_t n = 0;

	if (!canon || !lines)
		goto out;
	for (char *save = NULL, *l = strtok_r(lines, "\n", &save); l && n < 16; l = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(l, '=');

		csi__v1__create_volume_request__parameters_entry__init(&ent[n]);
		if (eq)
			*eq = '\0';
		ent[n].key = l;
		ent[n].value = eq ? eq + 1 : "";
		ep[n] = &ent[n];
		n++;
	}
	/* a merge of nothing reads back as the pairs it started from (sorted,
	 * so compared as a multiset of lengths is enough: the same count) */
	struct acc a0 = { SBUF_INIT(1u << 20), 0 }, a1 = { SBUF_INIT(1u << 20), 0 },
		   a2 = { SBUF_INIT(1u << 20), 0 };
	char *m0 = store_params_merge(canon, 0, NULL);
	if (m0 && store_params_each(canon, collect, &a0) == 0 && store_params_each(m0, collect, &a1) == 0
	    && a1.n > a0.n)
		abort();
	char *m1 = store_params_merge(canon, n, ep);
	char *m2 = m1 ? store_params_merge(m1, n, ep) : NULL;
	if (m1 && m2 && strcmp(m1, m2) != 0)
		abort();	/* the same change twice is the same */
	if (m1) {
		/* every key given is there with its last value */
		for (size_t i = 0; i < n; i++) {
			struct acc a = { SBUF_INIT(1u << 20), 0 };
			char want[256];
			int r = store_params_each(m1, collect, &a);

			snprintf(want, sizeof(want), "%zu:%.60s=", strlen(ep[i]->key), ep[i]->key);
			if (r == 0 && strlen(ep[i]->key) <= 60 && strchr(ep[i]->key, '%') == NULL
			    && (!a.sb.buf || !strstr(a.sb.buf, want)))
				abort();
			sbuf_free(&a.sb);
		}
	}
	free(m0);
	free(m1);
	free(m2);
	sbuf_free(&a0.sb);
	sbuf_free(&a1.sb);
	sbuf_free(&a2.sb);
out:
	free(canon);
	free(lines);
	return 0;
}
