/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * config: the INI configuration file of nodefs (see INTERFACE.md).
 *
 * config/ is the room below core: it uses common/ only and must not know
 * the backend's objects (the tree, kinds, stores); what a section means to
 * them is theirs.
 *
 *     [nodefs]              state_dir, allowed_targets, ctl_group, csi_timeout,
 *                           retry_backoff, retry_max, operations_keep,
 *                           reconcile_interval, log_level, name_prefix,
 *                           uncertain_timeout, reader_memory, events_keep,
 *                           cache_max_age
 *     [plugin NAME]         endpoint = unix:///abs/path.sock, default = yes|no,
 *                           command = PROGRAM ARGS..., keep_running = yes|no,
 *                           secrets = FILE,
 *                           runtime = docker, image = IMAGE, mounts = PATH...,
 *                           node = yes|no, privileged = yes|no
 *     [profile NAME]        plugin, access_mode, fs_type, mount_flags,
 *                           parameters, size, secrets
 *     [runtime docker]      keys kept as written; the driver checks them
 *     [runtime lxc]         same
 *
 * '#' and ';' start a comment at the start of a line or after a blank
 * (outside quotes). Values are words with the quoting rules of ctl lines
 * (ctl_split_words): list values (allowed_targets, mount_flags, parameters)
 * take several words, the others exactly one. Runtime sections keep the
 * value exactly as written (comment and surrounding blanks removed).
 *
 * Parsing is strict: every error is -EINVAL with a message "FILE:LINE: reason"
 * and no config is returned. The config is immutable once built; it knows
 * nothing of fs/, CSI or runtimes beyond the names of their sections.
 */
#ifndef NODEFS_CONFIG_H
#define NODEFS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* events_keep's bound: the most lines the events ring keeps (events.h). */
#define CONFIG_EVENTS_KEEP_MAX 65536

struct nerr;

#define CONFIG_LINE_MAX 4096
#define CONFIG_FILE_MAX (1u << 20)
#define CONFIG_DEFAULT_PATH "/etc/nodefs/nodefs.conf"
#define CONFIG_DEFAULT_STATE_DIR "/var/lib/nodefs"

struct config_kv {
	char *key;
	char *val;
	int line;
};

struct config_section {
	char *type;		/* "nodefs", "plugin", "profile", "runtime" */
	char *name;		/* NULL for [nodefs] */
	int line;		/* of the [header] */
	struct config_kv *kv;
	size_t nkv;
};

struct config_plugin {
	char *name;
	char *endpoint;		/* "unix:///absolute/path" as written */
	bool is_default;
	char **command;		/* PROGRAM ARGS..., NULL-terminated; NULL: an external plugin */
	bool keep_running;	/* a started plugin outlives the daemon's stop */
	char *secrets;		/* NULL, or the secrets file of its volumes without a profile's */
	/* run as a container of this runtime ("docker"; NULL: a process),
	 * from image; command is then the argv inside it (NULL: the image's) */
	char *runtime, *image;
	char **mounts;		/* host paths bind-mounted at the same place; never NULL */
	bool node;		/* a node plugin: may mount, target roots rshared (default yes) */
	bool privileged;	/* every capability and device (default no) */
};

struct config_profile {
	char *name;
	char *plugin;		/* NULL: the default plugin */
	char *access_mode;	/* NULL unless set; one of config_access_modes */
	char *fs_type;		/* NULL unless set */
	char **mount_flags;	/* NULL-terminated, never NULL */
	char **params;		/* "k=v" strings, NULL-terminated, never NULL */
	uint64_t size;		/* key size: default capacity in bytes, 0 = unset */
	char *secrets;		/* NULL, or the file of key=value CSI secrets (secrets.h) */
};

struct config {
	char *path;			/* file it came from, or NULL for built-in defaults */
	char *state_dir;		/* default /var/lib/nodefs */
	char **allowed_targets;		/* NULL-terminated; default { "/mnt", "/srv", NULL } */
	size_t nallowed_targets;
	char *ctl_group;		/* NULL unless set; an existing group */
	gid_t ctl_gid;
	bool has_ctl_gid;
	char *read_group;		/* NULL unless set: may read the sensitive files */
	gid_t read_gid;
	bool has_read_gid;
	char **redact;			/* NULL-terminated parameter names; default none */
	/* what world-readable files hide of a command line: "env." and
	 * "param.NAME" for each of redact (common/redact.h) */
	char **redact_keys;
	uint64_t csi_timeout_ms;	/* key csi_timeout, default 120 s */
	uint64_t retry_backoff_ms;	/* key retry_backoff, default 1 s */
	uint64_t retry_max_ms;		/* key retry_max, default 2 min */
	unsigned operations_keep;	/* default 1000 */
	unsigned events_keep;		/* lines the events ring keeps; default 4096 */
	uint64_t reconcile_interval_ms;	/* key reconcile_interval, default 60 s, 0 = off */
	int log_level;			/* enum log_level; -1 unset (info, debug with -d) */
	char *name_prefix;		/* engine-side names: NULL = "nodefs-<8 of id>-" */
	uint64_t uncertain_timeout_ms;	/* key uncertain_timeout, default 5 min */
	uint64_t reader_memory;		/* bytes per uid's open files, default 4M, 0 = unbounded */
	uint64_t cache_max_age_ms;	/* how long readers of a time-varying file share a
					 * render; default 1 s, 0 = each read renders */
	struct config_plugin *plugins;
	size_t nplugins;
	struct config_profile *profiles;
	size_t nprofiles;
	struct config_section *sections;	/* every section as read, in file order */
	size_t nsections;
};

/* The CSI access modes as written in the config, NULL-terminated. */
extern const char *const config_access_modes[];

/* Built-in defaults (no file). 0 or -ENOMEM. */
int config_defaults(struct config **ret);

/* Parse text[0..len) (need not be NUL-terminated); filename is used in
 * messages and stored in ->path (NULL: messages say "config", path stays
 * NULL). Returns 0 and a new config, -EINVAL with "FILE:LINE: reason", or
 * -ENOMEM (nothing leaks). Looks ctl_group up with getgrnam_r(). Any thread. */
int config_parse(const char *text, size_t len, const char *filename,
		 struct config **ret, struct nerr *err);

/* Read and parse path (at most CONFIG_FILE_MAX bytes). When the file does
 * not exist and missing_ok is set, returns the built-in defaults (path NULL).
 * Errors: those of config_parse(), -errno of open/read ("PATH: reason"),
 * -EFBIG for a file over CONFIG_FILE_MAX. */
int config_load(const char *path, bool missing_ok, struct config **ret, struct nerr *err);

/* NULL-safe. */
void config_free(struct config *c);

/* The section [type name] (name NULL for [nodefs]), or NULL. Borrowed. */
const struct config_section *config_section_find(const struct config *c, const char *type,
						 const char *name);

/* The value of key in s, or NULL (also when s is NULL). Borrowed. */
const char *config_section_get(const struct config_section *s, const char *key);

/* The default plugin, or NULL when there is none. Borrowed. */
const struct config_plugin *config_default_plugin(const struct config *c);

/* The plugin or profile named name, or NULL. Borrowed. */
const struct config_plugin *config_plugin_find(const struct config *c, const char *name);
const struct config_profile *config_profile_find(const struct config *c, const char *name);

/* For a reload (config-diff.c): equal strings (both NULL, or the same);
 * equal NULL-terminated lists (NULL as empty); a log line that what
 * changed needs a restart; and the [nodefs] keys of o and n compared, each
 * difference logged as needing a restart, their number returned. */
bool config_str_eq(const char *a, const char *b);
bool config_strv_eq(char *const *a, char *const *b);
void config_restart_needed(const char *what);
unsigned config_nodefs_diff(const struct config *o, const struct config *n);

#endif
