/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * config-diff: what a reload (core/reload.c) compares of two configs that
 * is the config's own: equal strings and string lists, and the [nodefs]
 * keys, every one of which but log_level needs a restart.
 * Must not know: the backend, or any kind's sections (each kind compares
 * its own in its reload hook).
 */
#include "config.h"

#include <string.h>

#include "log.h"

bool config_str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

bool config_strv_eq(char *const *a, char *const *b)
{
	size_t i;

	for (i = 0; a && b && a[i] && b[i]; i++)
		if (strcmp(a[i], b[i]) != 0)
			return false;
	return (!a || !a[i]) && (!b || !b[i]);
}

void config_restart_needed(const char *what)
{
	log_warn("reload: %s changed: needs a restart (not applied)", what);
}

unsigned config_nodefs_diff(const struct config *o, const struct config *n)
{
	unsigned k = 0;

	if (!config_str_eq(o->state_dir, n->state_dir))
		config_restart_needed("[nodefs] state_dir"), k++;
	if (!config_strv_eq(o->allowed_targets, n->allowed_targets))
		config_restart_needed("[nodefs] allowed_targets"), k++;
	if (!config_str_eq(o->ctl_group, n->ctl_group))
		config_restart_needed("[nodefs] ctl_group"), k++;
	if (!config_str_eq(o->read_group, n->read_group))
		config_restart_needed("[nodefs] read_group"), k++;
	if (o->csi_timeout_ms != n->csi_timeout_ms)
		config_restart_needed("[nodefs] csi_timeout"), k++;
	if (o->retry_backoff_ms != n->retry_backoff_ms || o->retry_max_ms != n->retry_max_ms)
		config_restart_needed("[nodefs] retry_backoff/retry_max"), k++;
	if (o->operations_keep != n->operations_keep)
		config_restart_needed("[nodefs] operations_keep"), k++;
	if (o->events_keep != n->events_keep)
		config_restart_needed("[nodefs] events_keep"), k++;
	if (o->reader_memory != n->reader_memory)
		config_restart_needed("[nodefs] reader_memory"), k++;
	if (o->reconcile_interval_ms != n->reconcile_interval_ms)
		config_restart_needed("[nodefs] reconcile_interval"), k++;
	if (o->cache_max_age_ms != n->cache_max_age_ms)
		config_restart_needed("[nodefs] cache_max_age"), k++;
	if (!config_str_eq(o->name_prefix, n->name_prefix) ||
	    o->uncertain_timeout_ms != n->uncertain_timeout_ms)
		config_restart_needed("[nodefs] name_prefix/uncertain_timeout"), k++;
	return k;
}
