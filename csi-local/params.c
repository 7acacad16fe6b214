/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * params: a map of parameters in its canonical form ("k=v," pairs sorted
 * by key, each side percent-encoded), what a record keeps and compares for
 * CreateVolume's idempotency and what ControllerModifyVolume merges into;
 * and the percent-encoding of every record value. Pure: fuzzed by
 * tests/fuzz/fuzz_csilocal_params.c.
 *
 * Must not know: records' files, locks, the wire.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc.h"
#include "macro.h"
#include "plugin.h"
#include "sbuf.h"

#define PARAMS_CAP (32u << 10)

char *params_dec(const char *v)
{
	size_t n = strlen(v);
	char *o = malloc(n + 1);

	if (o)
		grpc_percent_decode(v, n, o, n + 1);
	return o;
}

/* A pair's side in the merged form: ',' and '=' encoded too, so a value
 * holding them splits back whole. */
static int penc(struct sbuf *sb, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		int r = c == ',' || c == '=' ? sbuf_printf(sb, "%%%02X", c) : 0;

		if (r < 0)
			return r;
		if (c != ',' && c != '=') {
			char one[2] = { (char)c, 0 };

			if ((r = params_enc(sb, one)) < 0)
				return r;
		}
	}
	return 0;
}

/* Encode anything but [A-Za-z0-9._/:,+@-] as %XX. */
int params_enc(struct sbuf *sb, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		int r;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		    || strchr("._/:,+@-", c))
			r = sbuf_addc(sb, (char)c);
		else
			r = sbuf_printf(sb, "%%%02X", c);
		if (r < 0)
			return r;
	}
	return 0;
}

static int cmp_entry(const void *a, const void *b)
{
	const Csi__V1__CreateVolumeRequest__ParametersEntry *x = *(void *const *)a, *y = *(void *const *)b;
	int c = strcmp(x->key, y->key);

	return c ? c : strcmp(x->value, y->value);
}

char *store_params(size_t n, Csi__V1__CreateVolumeRequest__ParametersEntry **e)
{
	struct sbuf sb = SBUF_INIT(PARAMS_CAP);
	void **sorted = calloc(n ? n : 1, sizeof(*sorted));

	if (!sorted)
		return NULL;
	if (n)
		memcpy(sorted, e, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), cmp_entry);
	sbuf_adds(&sb, "");
	for (size_t i = 0; i < n; i++) {
		const Csi__V1__CreateVolumeRequest__ParametersEntry *p = sorted[i];

		if (params_enc(&sb, p->key) < 0 || sbuf_addc(&sb, '=') < 0 || params_enc(&sb, p->value) < 0
		    || sbuf_addc(&sb, ',') < 0) {
			free(sorted);
			sbuf_free(&sb);
			return NULL;
		}
	}
	free(sorted);
	return sbuf_steal(&sb);
}


struct kv {
	char *k, *v;
};

static int cmp_kv(const void *a, const void *b)
{
	return strcmp(((const struct kv *)a)->k, ((const struct kv *)b)->k);
}

/* Canonical params into pairs (decoded, malloc'd); -ENOMEM. */
static int split_params(const char *canon, struct kv **ret, size_t *ret_n)
{
	struct kv *kv = NULL;
	size_t n = 0;
	_cleanup_free_ char *copy = strdup(canon ? canon : "");
	char *save = NULL;

	if (!copy)
		return -ENOMEM;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		struct kv *nkv = realloc(kv, (n + 1) * sizeof(*kv));

		if (!nkv)
			goto oom;
		kv = nkv;
		if (eq)
			*eq = '\0';
		kv[n].k = params_dec(tok);
		kv[n].v = params_dec(eq ? eq + 1 : "");
		n++;
		if (!kv[n - 1].k || !kv[n - 1].v)
			goto oom;
	}
	*ret = kv;
	*ret_n = n;
	return 0;
oom:
	for (size_t i = 0; i < n; i++)
		free(kv[i].k), free(kv[i].v);
	free(kv);
	return -ENOMEM;
}

int store_params_each(const char *canon, int (*fn)(void *ud, const char *k, const char *v), void *ud)
{
	struct kv *kv;
	size_t n;
	int r = split_params(canon, &kv, &n);

	if (r < 0)
		return r;
	for (size_t i = 0; i < n && r == 0; i++)
		r = fn(ud, kv[i].k, kv[i].v);
	for (size_t i = 0; i < n; i++)
		free(kv[i].k), free(kv[i].v);
	free(kv);
	return r;
}

char *store_params_merge(const char *old, size_t n, Csi__V1__CreateVolumeRequest__ParametersEntry **e)
{
	struct kv *kv;
	size_t nkv;
	char *out = NULL;

	if (split_params(old, &kv, &nkv) < 0)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		size_t j;

		for (j = 0; j < nkv && strcmp(kv[j].k, e[i]->key) != 0; j++)
			;
		char *v = strdup(e[i]->value);
		if (!v)
			goto out;
		if (j < nkv) {
			free(kv[j].v);
			kv[j].v = v;
			continue;
		}
		struct kv *nk = realloc(kv, (nkv + 1) * sizeof(*kv));
		if (!nk || !(nk[nkv].k = strdup(e[i]->key))) {
			free(v);
			if (nk)
				kv = nk;
			goto out;
		}
		kv = nk;
		kv[nkv++].v = v;
	}
	if (nkv)
		qsort(kv, nkv, sizeof(*kv), cmp_kv);	/* a NULL base is UB even for 0 */
	struct sbuf sb = SBUF_INIT(PARAMS_CAP);
	sbuf_adds(&sb, "");
	for (size_t i = 0; i < nkv; i++)
		if (penc(&sb, kv[i].k) < 0 || sbuf_addc(&sb, '=') < 0 || penc(&sb, kv[i].v) < 0
		    || sbuf_addc(&sb, ',') < 0) {
			sbuf_free(&sb);
			goto out;
		}
	out = sbuf_steal(&sb);
out:
	for (size_t i = 0; i < nkv; i++)
		free(kv[i].k), free(kv[i].v);
	free(kv);
	return out;
}
