/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test_plugin_scope: the command line a plugin nodefs starts runs under
 * (plugin-launch.c's pp_scope_argv): a kept plugin (keep_running = yes) on
 * a systemd host goes through systemd-run --scope into a scope unit of its
 * own, nodefs-plugin-NAME.scope, outside nodefs.service's control group;
 * every other plugin, and every plugin without systemd, runs its command
 * as written. No root, no systemd: the real scope is the stock-host lane's.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin-proc-internal.h"

static char *cmd[] = { (char *)"/usr/bin/nodefs-csi-local", (char *)"--dir", (char *)"/srv", NULL };

static size_t len(char **v)
{
	size_t n = 0;

	while (v[n])
		n++;
	return n;
}

Test(plugin_scope, kept_under_systemd_gets_a_scope)
{
	char **v = NULL;

	cr_assert_eq(pp_scope_argv("local", cmd, true, true, &v), 0);
	cr_assert_eq(len(v), 9);
	cr_assert_str_eq(v[0], "systemd-run");
	cr_assert_str_eq(v[1], "--scope");
	cr_assert_str_eq(v[2], "--unit=nodefs-plugin-local.scope");
	cr_assert_str_eq(v[3], "--collect");
	cr_assert_str_eq(v[4], "--quiet");
	cr_assert_str_eq(v[5], "--");
	/* the command itself, borrowed */
	cr_assert_eq(v[6], cmd[0]);
	cr_assert_eq(v[7], cmd[1]);
	cr_assert_eq(v[8], cmd[2]);
	free(v);
}

Test(plugin_scope, not_kept_or_no_systemd_runs_as_written)
{
	const bool cases[][2] = { { false, true }, { true, false }, { false, false } };

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char **v = NULL;

		cr_assert_eq(pp_scope_argv("local", cmd, cases[i][0], cases[i][1], &v), 0);
		cr_assert_eq(len(v), 3, "keep %d systemd %d", cases[i][0], cases[i][1]);
		for (size_t k = 0; k < 3; k++)
			cr_assert_eq(v[k], cmd[k]);
		free(v);
	}
}

Test(plugin_scope, systemd_detected_by_its_runtime_dir)
{
	cr_assert_eq(pp_systemd_booted(), access("/run/systemd/system", F_OK) == 0);
}
