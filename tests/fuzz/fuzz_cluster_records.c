/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_cluster_records: the decoder of another node's summary record
 * (summary/NODE/info and alive in etcd: version, boot id, times, counts and
 * its resources as resources.json has them; cluster_info_parse in
 * backend/cluster/cluster-res.c) and the text it shows as
 * cluster/nodes/NODE/resources (cluster_res_text). Whatever a peer wrote:
 * no crash, no leak, and the text is `key value` lines whose keys are
 * names a reader can split on '.', values without spaces or control
 * bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster-internal.h"
#include "sbuf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cinfo *ci = malloc(sizeof(*ci));
	char why[200];
	struct sbuf out;

	if (!ci)
		return 0;
	if (cluster_info_parse((const char *)data, size, ci, why, sizeof(why)) < 0) {
		if (!why[0])
			abort();	/* a refusal says why */
		free(ci);
		return 0;
	}
	for (const char *p = ci->version; *p; p++)
		if ((unsigned char)*p < 0x20)
			abort();
	sbuf_init(&out, 1u << 20);
	if (cluster_res_text(&ci->res, &out) == 0 && out.len) {
		char *save = NULL, *text = strndup(out.buf, out.len);
		for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
			char *sp = strchr(l, ' ');
			if (!sp || sp == l || strchr(sp + 1, ' ') || !sp[1])
				abort();
			for (char *q = l; q < sp; q++)
				if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", *q))
					abort();
		}
		free(text);
	}
	sbuf_free(&out);
	free(ci);
	return 0;
}
