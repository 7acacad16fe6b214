/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * profile-kind: the profiles' table of hooks for the hub (kind.h). It only
 * names what the profile module already exports; it must not know how a
 * profile works.
 */
#include "profiles.h"

#include <stddef.h>

#include "kind.h"

const struct kind_ops profiles_kind = {
	.name = "profiles",
	.type = &profiles_type,
	.state_size = sizeof(struct profiles_state),
	.ready_count = true,
	.init = profiles_init,
	.reload = profiles_reload,
	.reload_noun = "profile",
};
