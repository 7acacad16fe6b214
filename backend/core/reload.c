/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * reload: a new config read at SIGHUP, against the one the daemon runs,
 * applied kind by kind through their tables (kind.h), in the order of the
 * list the registry gave: each kind's reload hook adds and changes what
 * its sections say (a refusal ends the reload there), then, the new config
 * kept, each kind's reload_finish removes what it no longer names. The
 * [nodefs] keys need a restart (config_nodefs_diff logs each). One line
 * then gives the counts: the quiet kinds' changes when there are any, the
 * others', the parts refused, the changes that need a restart. The
 * configs a reload brought, taken or refused, stay alive until
 * backend_free: a kind's object or a reader that looked one up a moment
 * ago may still point into one.
 * Must not know: any kind, how the file was read, the log level (main
 * owns those).
 */
#include "backend-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "kind.h"
#include "log.h"

/* "N NOUN change(s)" */
static size_t counted(char *buf, size_t len, unsigned n, const char *noun)
{
	int k = snprintf(buf, len, "%u %s change%s", n, noun, n == 1 ? "" : "s");

	return k < 0 ? 0 : (size_t)k < len ? (size_t)k : len - 1;
}

static void summary(struct backend *b, const struct reload_tally *t, unsigned restart)
{
	char line[512];
	size_t len = 0, loud = 0, seen = 0;
	unsigned refused = 0;

	for (size_t i = 0; i < b->nkinds; i++) {
		refused += t[i].refused;
		restart += t[i].restart;
		loud += b->kinds[i]->reload_noun && !b->kinds[i]->reload_quiet;
	}
	line[0] = '\0';
	/* the quiet kinds first, and only when they changed something */
	for (size_t i = 0; i < b->nkinds; i++)
		if (b->kinds[i]->reload_noun && b->kinds[i]->reload_quiet && t[i].applied) {
			len += counted(line + len, sizeof(line) - len, t[i].applied,
				       b->kinds[i]->reload_noun);
			len += snprintf(line + len, sizeof(line) - len, ", ");
		}
	for (size_t i = 0; i < b->nkinds && len < sizeof(line); i++) {
		if (!b->kinds[i]->reload_noun || b->kinds[i]->reload_quiet)
			continue;
		if (seen++)
			len += snprintf(line + len, sizeof(line) - len, seen == loud ? " and " : ", ");
		if (len < sizeof(line))
			len += counted(line + len, sizeof(line) - len, t[i].applied,
				       b->kinds[i]->reload_noun);
	}
	log_info("reload: %s applied, %u refused, %u change%s need%s a restart", line, refused,
		 restart, restart == 1 ? "" : "s", restart == 1 ? "s" : "");
}

int backend_reload(struct backend *b, struct config *nc, struct nerr *err)
{
	struct reload_tally *t = calloc(b->nkinds ? b->nkinds : 1, sizeof(*t));
	struct config **keep = realloc(b->old_cfgs, (b->nold_cfgs + 1) * sizeof(*keep));
	unsigned restart;
	int r = 0;

	if (keep)
		b->old_cfgs = keep;
	if (!t || !keep) {
		free(t);
		config_free(nc);
		return nerr_set(err, ENOMEM, "out of memory");
	}
	/* kept from here on, refused or not: what a kind changed before a
	 * later one refused may point into it */
	b->old_cfgs[b->nold_cfgs++] = nc;
	restart = config_nodefs_diff(b->cfg, nc);
	for (size_t i = 0; i < b->nkinds && r >= 0; i++)
		if (b->kinds[i]->reload)
			r = b->kinds[i]->reload(b, nc, &t[i], err);
	if (r >= 0) {
		for (size_t i = 0; i < b->nkinds; i++)
			if (b->kinds[i]->reload_finish)
				b->kinds[i]->reload_finish(b, nc, &t[i]);
		summary(b, t, restart);
	}
	free(t);
	return r < 0 ? r : 0;
}
