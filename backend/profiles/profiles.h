/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * profiles: what the rooms above (plugins/, volumes/, the registry) may
 * ask of profiles/: a profile node added, a config access mode as a
 * storage capability, and the config whose profiles are current
 * (profiles_config; a reload's, profile-reload.c, once one was taken).
 * Must not know: plugins, volumes, containers.
 */
#ifndef NODEFS_PROFILES_H
#define NODEFS_PROFILES_H

#include "kind.h"

#include "backend-internal.h"

struct kind_ops;

/* profiles/: the kind's table (profile-kind.c) and its type (profile.c). */
extern const struct kind_ops profiles_kind;
/* profiles/: the kind's directory, which the hub keeps (kind_dir_named). */
static inline struct bnode *profiles_dir(struct backend *b)
{
	return kind_dir_named(b, "profiles");
}
extern const struct btype profiles_type;

/* profiles/NAME/ for p (which must outlive the node). -errno with err. */
int profile_add(struct backend *b, struct config_profile *p, struct nerr *err);
/* A storage capability from a config access mode name (NULL or unknown:
 * single-node-writer), an fs type and mount flags (borrowed). */
struct storage_cap storage_cap_of(const char *access_mode, const char *fs_type,
				  char *const *mount_flags);
int profiles_init(struct backend *b, struct nerr *err);
/* The config whose [profile] sections are current: b->cfg, or the last
 * reload's. Borrowed; valid until backend_free. Any thread. */
const struct config *profiles_config(struct backend *b);
/* The profiles' reload hook (profile-reload.c, kind.h) and their state
 * (kind_state): the config profiles_config gives, NULL for b->cfg. */
int profiles_reload(struct backend *b, struct config *nc, struct reload_tally *t,
		    struct nerr *err);
struct profiles_state {
	_Atomic(struct config *) cfg;
};

#endif
