/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* runtime: the table of drivers this build has; see runtime.h. */
#include "runtime.h"

#include <stdlib.h>
#include <string.h>

static const struct runtime_ops *const drivers[] = {
	&rt_docker_ops,
	&rt_lxc_ops,
};

const struct runtime_ops *runtime_find(const char *name)
{
	for (size_t i = 0; i < sizeof(drivers) / sizeof(drivers[0]); i++)
		if (strcmp(drivers[i]->name, name) == 0)
			return drivers[i];
	return NULL;
}

const char *rt_state_to_string(enum rt_state s)
{
	switch (s) {
	case RT_STATE_CREATED: return "created";
	case RT_STATE_RUNNING: return "running";
	case RT_STATE_PAUSED: return "paused";
	case RT_STATE_EXITED: return "exited";
	case RT_STATE_GONE: return "gone";
	default: return "unknown";
	}
}

void rt_listing_free(struct rt_listing *l, size_t n)
{
	if (!l)
		return;
	for (size_t i = 0; i < n; i++) {
		free(l[i].id);
		free(l[i].name);
	}
	free(l);
}

static const char *helper_path;

void runtime_set_helper(const char *path)
{
	helper_path = path;
}

const char *runtime_helper(void)
{
	return helper_path;
}

int runtime_helper_main(int argc, char **argv)
{
	const char *p = argc > 0 && argv[0] ? strrchr(argv[0], '/') : NULL;
	const char *base = p ? p + 1 : argc > 0 && argv[0] ? argv[0] : "";

	return rt_lxc_helper_main(base, argc, argv);
}
