/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * container-options: the options of `containers/ctl` create and run, as one
 * declarative table (container-options.c holds the table and nothing else)
 * and the spec they fill (struct cspec). From the table come the parser and
 * the check-before-any-line-runs pass, the usage text of containers/ctl, the
 * record and info.json members, and the nodefs(5) coverage test
 * (unit-backend-container-options).
 *
 * Adding an option is: a field in struct cspec, a row in container-options.c
 * (name, syntax, kind, field, runtimes, flags, help), and, for a value none
 * of the kinds below parses, a kind in container-optparse.c. Then a line in
 * docs/nodefs.5's options table (the coverage test fails until it is there),
 * and, for the runtime to act on it, the field into struct rt_spec
 * (container-run.c's do_create).
 *
 * Must not know: engines, the tree, files; the kinds that need the backend
 * (volume=) reach it through struct copt_ctx.
 */
#ifndef NODEFS_CONTAINER_OPTIONS_H
#define NODEFS_CONTAINER_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "restart.h"
#include "fetch.h"
#include "runtime.h"
#include "service-spec.h"

struct backend;
struct ctl_cmd;
struct jw;
struct nerr;
struct sbuf;
typedef struct json_t json_t;

/* The mounts volume= and bind= make, in the order written, and the
 * VOLNAME of each volume= (NULL-terminated) */
struct cmounts {
	struct rt_mount *v;
	size_t n;
	char **volumes;
};

/* fetch= values, in the order written */
struct cfetches {
	struct fetch_spec *v;
	size_t n;
};

/* KEY=VALUE pairs of a prefixed option (env.K=V), in the order written */
struct ckv {
	struct rt_kv *v;
	size_t n;
};

/* The port= bindings, in the order written */
struct cports {
	struct rt_port *v;
	size_t n;
};

/* What a container was created with: every field an option fills. The
 * limits change with `update` (under the container's lock); the rest is
 * immutable after create. */
struct cspec {
	char *image;
	char **argv;			/* cmd= */
	struct ckv env;
	double cpus;			/* 0: unset */
	uint64_t memory;		/* bytes; 0: unset */
	int64_t pids;			/* 0: unset */
	struct cmounts mounts;
	char *template_name, *distro, *release, *arch, *image_variant, *image_server;
	char **template_args;
	bool flush_cache, force_cache, disable_gpg;
	char *user;			/* USER[:GROUP] as given */
	char *workdir;
	char **entrypoint;
	char *hostname;
	struct ckv labels;
	bool force_pull;
	/* the service (container-svcopts.c's kinds, service-spec.c's syntax) */
	char *network;			/* NULL: the runtime's default */
	char *ip, *gateway;		/* lxc veth */
	struct cports ports;
	struct restart_policy restart;
	struct svc_health health;	/* health= and the health_* options */
	bool no_sandbox;		/* sandbox=no */
	char *sandbox_path;		/* NULL: /sandbox */
	uint64_t sandbox_size;		/* what fetches may write; 0: no bound */
	struct cfetches fetches;
};

/* Runtimes, as bits of struct copt's runtimes */
#define COPT_DOCKER 1u
#define COPT_LXC 2u
#define COPT_ALL (COPT_DOCKER | COPT_LXC)

/* struct copt's flags */
#define COPT_REPEAT 1u		/* may be given more than once (each adds) */
#define COPT_SECRET 2u		/* values shown as <redacted> in info.json */
#define COPT_NOFIELD 4u		/* fills no field of the spec (runtime=) */

struct copt;

/* What a parse may need beyond the value. */
struct copt_ctx {
	unsigned runtime;		/* COPT_DOCKER or COPT_LXC */
	const char *runtime_name;
	/* only the values (the check before a write's lines run): nothing
	 * outside the line is looked at (volume= is looked up when it runs) */
	bool dry_run;
	/* [nodefs] allowed_targets (bind= sources), NULL-terminated */
	const char *const *allowed_targets;
	/* volume=: where VOLNAME is published (the backend's links) */
	struct backend *b;
};

/* A kind of value: how it is parsed into its field, written to and read
 * back from a record, and freed. field points into struct cspec at the
 * row's offset. */
struct copt_kind {
	int (*parse)(const struct copt *o, const char *key, const char *val, void *field,
		     const struct copt_ctx *x, struct nerr *err);
	void (*write)(const struct copt *o, const void *field, struct jw *w, bool redact);
	void (*read)(const struct copt *o, json_t *rec, void *field);
	void (*free)(void *field);
};

struct copt {
	const char *name;	/* "image"; ending in '.' a prefix: "env." takes env.K=V */
	const char *syntax;	/* the value as usage and nodefs(5) show it: "SIZE" */
	const struct copt_kind *kind;
	size_t off;		/* offsetof(struct cspec, the field it fills) */
	unsigned runtimes;	/* COPT_DOCKER | COPT_LXC: the others get ENOTSUP */
	unsigned required;	/* runtimes that need it given */
	unsigned flags;		/* COPT_REPEAT, COPT_SECRET, COPT_NOFIELD */
	long long min, max;	/* bounds of a number or size (0, 0: none); words: min
				 * words */
	/* checks the value before its kind parses it (NULL: the kind's
	 * checks only); -EINVAL naming key */
	int (*check)(const char *key, const char *val, struct nerr *err);
	const char *json;	/* its member in the record and info.json (NULL: name) */
	const char *help;	/* one line of the usage text */
};

/* The table (container-options.c). */
extern const struct copt container_options[];
extern const size_t container_noptions;

/* The kinds (container-optparse.c). */
extern const struct copt_kind copt_none, copt_string, copt_words, copt_bool, copt_size,
	copt_cpus, copt_int, copt_kv, copt_mount;
/* a yes/no option that is yes unless given: the field holds its negation
 * (sandbox=no sets no_sandbox); the record's member says the option's value */
extern const struct copt_kind copt_nbool;
/* fetch='URI [sha256=HEX] [extract] [executable] [dest=RELPATH]' (fetch.h);
 * a file:// path must lie under allowed_targets (EPERM) */
extern const struct copt_kind copt_fetch;

/* The service's kinds (container-svcopts.c): network=, port=, restart=,
 * health= (which owns the whole struct svc_health in the record) and the
 * health_* options that set one of its members. */
extern const struct copt_kind copt_network, copt_port, copt_restart, copt_health,
	copt_health_opt;
int copt_check_cidr(const char *key, const char *val, struct nerr *err);
int copt_check_ip(const char *key, const char *val, struct nerr *err);
/* What the service's options ask together, after copts_parse: ip= and
 * gateway= only on a veth, no host port bound twice, an http or tcp
 * check's port published (or the host's network), health_* only with a
 * check. -EINVAL with err. */
int copts_check_service(const struct cspec *s, unsigned runtime, struct nerr *err);

/* Value checks rows name (container-optparse.c). */
int copt_check_user(const char *key, const char *val, struct nerr *err);
int copt_check_abspath(const char *key, const char *val, struct nerr *err);
int copt_check_hostname(const char *key, const char *val, struct nerr *err);
int copt_check_label(const char *key, const char *val, struct nerr *err);

/* The row that takes key (exact, or a prefix row's KEY.), or NULL. */
const struct copt *copt_find(const char *key);
/* Whether key is an option of the table (ctl_spec.opt_known). */
bool copt_known(const char *key);

/* Every option of cmd into *s, in the order written: each one's runtime,
 * repeat and value checked, then the required ones. -EINVAL (the error
 * names the option), -ENOTSUP (an option runtime x->runtime does not take:
 * the error names both), -EPERM/-ENOENT for a bind= or volume= source, or
 * -ENOMEM. On failure *s holds what was parsed so far: free it with
 * cspec_free. */
int copts_parse(const struct ctl_cmd *cmd, const struct copt_ctx *x, struct cspec *s,
		struct nerr *err);
/* The spec's members into an open JSON object (the record, info.json;
 * redact: COPT_SECRET values as <redacted>). */
void copts_write(const struct cspec *s, struct jw *w, bool redact);
/* The spec back from a record written by copts_write. */
void copts_read(json_t *rec, struct cspec *s);
void cspec_free(struct cspec *s);
/* One line per option: "  name=SYNTAX  runtimes  help". -errno of sbuf. */
int copts_usage(struct sbuf *out);
/* The runtime bit of a driver name (0: none). */
unsigned copt_runtime_bit(const char *name);

#endif
