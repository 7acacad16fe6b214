/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_config: the INI config parser. Aborts when an invariant of config.h
 * breaks (errors read "FILE:LINE: reason", at most one default plugin,
 * NULL-terminated lists); sanitizers catch the rest.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "nerr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config *c = NULL;
	struct nerr e = { 0 };
	size_t ndefault = 0;
	int r;

	r = config_parse((const char *)data, size, "fuzz.conf", &c, &e);
	if (r < 0) {
		if (r != -EINVAL || e.code != EINVAL || strncmp(e.msg, "fuzz.conf:", 10) != 0)
			abort();
		return 0;
	}
	if (!c->state_dir || !c->allowed_targets || c->allowed_targets[c->nallowed_targets])
		abort();
	for (size_t i = 0; i < c->nplugins; i++) {
		if (strncmp(c->plugins[i].endpoint, "unix:///", 8) != 0)
			abort();
		if (config_plugin_find(c, c->plugins[i].name) != &c->plugins[i])
			abort();
		if (!config_section_find(c, "plugin", c->plugins[i].name))
			abort();
		ndefault += c->plugins[i].is_default;
	}
	if (ndefault > 1 || (c->nplugins == 1 && ndefault != 1))
		abort();
	for (size_t i = 0; i < c->nprofiles; i++) {
		const struct config_profile *pr = &c->profiles[i];

		if (!pr->mount_flags || !pr->params)
			abort();
		if (pr->plugin && !config_plugin_find(c, pr->plugin))
			abort();
	}
	for (size_t i = 0; i < c->nsections; i++) {
		const struct config_section *s = &c->sections[i];

		if (config_section_find(c, s->type, s->name) != s)
			abort();
		for (size_t j = 0; j < s->nkv; j++)
			if (!config_section_get(s, s->kv[j].key))
				abort();
	}
	config_free(c);
	return 0;
}
