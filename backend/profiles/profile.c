/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * profile: profiles/NAME/, the volume profiles of the config, read-only.
 * A profile names a plugin and the access mode, fs type, mount flags and
 * parameters that CreateVolume and the node calls get; storage_cap_of
 * turns those names into the storage interface's capability.
 * Must not know: plugins or volumes (they look profiles up here, not the
 * other way).
 */
#include "profiles.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>

static struct config_profile *prof(struct bnode *n)
{
	return n->priv;
}

static int show_strv(struct sbuf *out, char **v)
{
	int r = 0;

	for (size_t i = 0; r >= 0 && v && v[i]; i++)
		r = sbuf_printf(out, "%s%s", i ? " " : "", v[i]);
	if (r >= 0 && v && v[0])
		r = sbuf_addc(out, '\n');
	return r;
}

static int show_plugin(struct bnode *n, struct sbuf *out)
{
	const char *p = prof(n)->plugin;

	return p ? sbuf_printf(out, "%s\n", p) : 0;
}

static int show_access_mode(struct bnode *n, struct sbuf *out)
{
	const char *m = prof(n)->access_mode;

	return sbuf_printf(out, "%s\n", m ? m : "single-node-writer");
}

static int show_fs_type(struct bnode *n, struct sbuf *out)
{
	const char *f = prof(n)->fs_type;

	return f ? sbuf_printf(out, "%s\n", f) : 0;
}

static int show_mount_flags(struct bnode *n, struct sbuf *out)
{
	return show_strv(out, prof(n)->mount_flags);
}

static int show_parameters(struct bnode *n, struct sbuf *out)
{
	char **v = prof(n)->params;
	int r = 0;

	for (size_t i = 0; r >= 0 && v && v[i]; i++)
		r = sbuf_printf(out, "%s\n", v[i]);
	return r;
}

/* bytes; empty when the profile sets none (the plugin's default then) */
static int show_size(struct bnode *n, struct sbuf *out)
{
	uint64_t s = prof(n)->size;

	return s ? sbuf_printf(out, "%" PRIu64 "\n", s) : 0;
}

static const struct battr profile_attrs[] = {
	{ .name = "plugin", .show = show_plugin },
	{ .name = "size", .show = show_size },
	{ .name = "access_mode", .show = show_access_mode },
	{ .name = "fs_type", .show = show_fs_type },
	{ .name = "mount_flags", .show = show_mount_flags },
	{ .name = "parameters", .show = show_parameters },
};

static const struct btype profile_type = {
	.name = "profile",
	.attrs = profile_attrs,
	.nattrs = sizeof(profile_attrs) / sizeof(profile_attrs[0]),
};

const struct btype profiles_type = { .name = "profiles" };

int profile_add(struct backend *b, struct config_profile *p, struct nerr *err)
{
	struct bnode *n = bnode_new(&profile_type, p->name, p);
	int r;

	if (!n)
		return nerr_set(err, ENOMEM, "out of memory");
	r = bnode_add(profiles_dir(b), n);
	bnode_unref(n);
	if (r < 0)
		return nerr_set(err, -r, "profile %s: %s", p->name, strerror(-r));
	return 0;
}

int profiles_init(struct backend *b, struct nerr *err)
{
	for (size_t i = 0; i < b->cfg->nprofiles; i++) {
		int r = profile_add(b, &b->cfg->profiles[i], err);

		if (r < 0)
			return r;
	}
	return 0;
}

struct storage_cap storage_cap_of(const char *access_mode, const char *fs_type,
				  char *const *mount_flags)
{
	struct storage_cap c = {
		.mode = STORAGE_MODE_SINGLE_NODE_WRITER,
		.access = STORAGE_ACCESS_MOUNT,
		.fs_type = fs_type,
		.mount_flags = mount_flags,
	};

	/* the config lists the modes in the order of enum storage_mode */
	for (int i = 0; access_mode && config_access_modes[i]; i++)
		if (strcmp(access_mode, config_access_modes[i]) == 0)
			c.mode = (enum storage_mode)(i + 1);
	return c;
}
