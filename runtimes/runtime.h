/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * runtime: the driver interface every container runtime implements
 * (runtimes/docker, runtimes/lxc). The backend owns container objects, their
 * state machine and checkpoints; a driver only talks to its engine.
 *
 * Threads: every call below except watch(), stats() and logs() may block
 * (HTTP, liblxc locks) and is made from the backend's worker pool (or the
 * monitor, or recovery), never from a FUSE thread or the event loop. stats()
 * and logs() serve reads on FUSE threads: they take no engine lock (LXC reads
 * cgroup files and the console log; Docker's stats() reads cgroup files
 * only, never the Engine API, and its logs() makes one bounded call). Calls on different containers may run
 * concurrently; the backend serialises actions on one container. Events are
 * delivered from a thread the driver owns.
 *
 * Errors: -errno plus a message in err (see common/nerr.h). Each driver maps
 * its engine's failures through one table: ENOENT no such container or image,
 * EEXIST name taken, EINVAL bad spec, ENOTSUP unsupported by this runtime,
 * EBUSY conflicting state, ETIMEDOUT, EHOSTDOWN engine unreachable, ECANCELED
 * create/pull cancelled, EIO anything else.
 */
#ifndef NODEFS_RUNTIME_H
#define NODEFS_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

struct nerr;
struct sbuf;

/* Label / config key marking what nodefs made, so it never touches the rest. */
#define RT_OWNER_LABEL "io.nodefs.managed"
#define RT_NAME_LABEL "io.nodefs.name"
/* The id of the nodefs instance that made it (STATE_DIR/instance-id): two
 * instances sharing one engine list, reconcile and take back only their
 * own. */
#define RT_INSTANCE_LABEL "io.nodefs.instance"
#define RT_INSTANCE_MAX 32	/* hex digits of an instance id */
/* What a container is for, when it is not a user's container (rt_spec.role;
 * "plugin": a CSI plugin nodefs runs). list() never reports a container
 * carrying it, so containers/, recovery and reconciliation never see it. */
#define RT_ROLE_LABEL "io.nodefs.role"

enum rt_state {
	RT_STATE_UNKNOWN = 0,
	RT_STATE_CREATED,
	RT_STATE_RUNNING,
	RT_STATE_PAUSED,
	RT_STATE_EXITED,	/* stopped, killed or exited by itself */
	RT_STATE_GONE,		/* the engine no longer has it */
};

struct rt_kv {
	char *key;
	char *val;
};

struct rt_mount {
	char *source;		/* absolute host path, already validated */
	char *target;		/* absolute path inside the container */
	bool ro;
	/* mounts made under it on either side appear on the other (docker:
	 * rshared; the host side must be a shared mount) */
	bool rshared;
};

/* A published port (port=[IP:]HOSTPORT:PORT[/tcp|/udp]). */
struct rt_port {
	char host_ip[46];	/* "" for every address */
	unsigned host_port;	/* 0: the engine chooses */
	unsigned port;		/* inside the container, 1..65535 */
	bool udp;
};

/* A check the engine runs itself (docker: Healthcheck; health=cmd). */
struct rt_health {
	char **test;		/* argv, NULL-terminated */
	uint64_t interval_ms, timeout_ms, start_period_ms;
	unsigned retries;
};

/* What a user asked for at create. Strings are owned by the caller. */
struct rt_spec {
	const char *name;	/* nodefs name, [A-Za-z0-9._-]{1,64} */
	/* The name the engine knows it by (the backend makes it, name_prefix
	 * + name, for a driver with engine_names); NULL: the driver's own
	 * (docker "nodefs-" + name, lxc name). */
	const char *engine_name;
	/* This instance's id (rt_config.instance), put on what is made;
	 * NULL: none (what an older nodefs made). */
	const char *instance;
	/* NULL: a user's container; else RT_ROLE_LABEL's value (docker: a
	 * label; lxc: a field of the owner mark) */
	const char *role;
	/* may mount (CAP_SYS_ADMIN, no seccomp or AppArmor confinement), as
	 * a CSI node plugin must; privileged: every capability and device
	 * (loop devices, block volumes): docker only, lxc refuses it.
	 * may_mount on lxc: unconfined (the template keeps CAP_SYS_ADMIN). */
	bool may_mount, privileged;
	const char *image;	/* docker: required; lxc: ignored */
	char **argv;		/* NULL-terminated, may be NULL (image default) */
	struct rt_kv *env;
	size_t nenv;
	double cpus;		/* 0: unset */
	uint64_t memory;	/* bytes; 0: unset */
	int64_t pids;		/* 0: unset */
	struct rt_mount *mounts;
	size_t nmounts;
	/* network=: docker NetworkMode (none, host, bridge, NAME); lxc none,
	 * host or veth:BRIDGE with ip (CIDR) and gateway. NULL: the runtime's
	 * default. */
	const char *network, *ip, *gateway;
	const struct rt_port *ports;	/* docker only (lxc: ENOTSUP) */
	size_t nports;
	const struct rt_health *health;	/* docker only; NULL: none */
	/* USER[:GROUP], names or numbers; NULL: the image's (docker: User;
	 * lxc: lxc.init.uid/gid, names resolved from the container's own
	 * /etc/passwd and /etc/group). A name it lacks: -EINVAL, and the
	 * create leaves nothing behind. */
	const char *user;
	const char *workdir;	/* absolute; NULL: the image's */
	/* NULL-terminated; NULL: the image's (lxc: the init command is
	 * entrypoint then argv) */
	char **entrypoint;
	const char *hostname;	/* NULL: the engine's default */
	/* the user's labels (never io.nodefs.*): docker labels; lxc: kept in
	 * the owner mark */
	struct rt_kv *labels;
	size_t nlabels;
	bool force_pull;	/* docker: pull even when the engine has it */
	/* set by create when user is given: what it resolved to (the
	 * backend makes the sandbox the user's); NULL: not wanted */
	long *ret_uid, *ret_gid;
	/* lxc */
	const char *template_name;	/* "busybox", "download", ... */
	const char *distro, *release, *arch;
	const char *image_variant, *image_server;
	char **template_args;	/* NULL-terminated extra template args */
	bool flush_cache, force_cache, disable_gpg;
};

struct rt_limits {
	double cpus;		/* valid when set & RT_LIMIT_CPUS */
	uint64_t memory;	/* RT_LIMIT_MEMORY */
	int64_t pids;		/* RT_LIMIT_PIDS */
	unsigned set;
};
#define RT_LIMIT_CPUS 1u
#define RT_LIMIT_MEMORY 2u
#define RT_LIMIT_PIDS 4u

/* What the engine reports about one container. */
struct rt_status {
	enum rt_state state;
	pid_t pid;		/* init pid on the host, 0 when not running */
	int exit_code;		/* valid in EXITED */
	bool oom_killed;
	bool memory_limited;	/* a memory limit is set: a SIGKILL may be the OOM killer's */
	time_t started_at;	/* 0: never */
	time_t finished_at;	/* 0: not finished */
	/* the engine's own health check (docker State.Health), when it has
	 * one: its failing streak and its last probe's output, capped */
	bool has_health;
	unsigned health_streak;
	char health_output[256];
	char health_status[12];	/* "starting", "healthy", "unhealthy"; "": not said */
};

struct rt_stats {
	double cpu_user_seconds;
	double cpu_system_seconds;
	uint64_t memory_bytes;
	uint64_t memory_limit_bytes;	/* 0: unlimited */
	uint64_t pids;
};

/* One container the engine has that carries our owner mark (for recovery
 * and reconciliation). */
struct rt_listing {
	char *id;		/* engine id (docker id; lxc name) */
	char *name;		/* nodefs name from the mark */
	struct rt_status status;
	/* A create is under way, or was cut short by a crash: the container
	 * may be incomplete (lxc: its in-progress mark is still there).
	 * destroy() removes it whole. */
	bool half_made;
};

enum rt_event_kind {
	RT_EV_START,
	RT_EV_DIE,		/* exit_code valid */
	RT_EV_OOM,
	RT_EV_PAUSE,
	RT_EV_UNPAUSE,
	RT_EV_DESTROY,
	RT_EV_HEALTH,		/* the engine's own check: health valid */
	RT_EV_ENGINE_UP,	/* engine reachable again: resynchronise */
	RT_EV_ENGINE_DOWN,
};

struct rt_event {
	enum rt_event_kind kind;
	const char *id;		/* engine id; NULL for ENGINE_* */
	int exit_code;
	time_t time;
	/* RT_EV_HEALTH: "healthy", "unhealthy", "starting"; NULL: the
	 * engine's check ran, look (inspect) for where it stands */
	const char *health;
	/* when it happened, in CLOCK_REALTIME nanoseconds (Docker's timeNano;
	 * the LXC driver's post); 0: not known */
	int64_t time_ns;
};

/* Now, as rt_event's time_ns counts it. */
static inline int64_t rt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef void (*rt_event_fn)(void *ctx, const struct rt_event *ev);

/* Progress of a create (docker pull): the driver writes, the backend reads. */
struct rt_progress {
	void (*update)(void *ctx, const char *line);	/* one status line */
	/* what a create does: fetching an image (true), or making the
	 * container (false: from the start, and once a fetch is done) */
	void (*pulling)(void *ctx, bool on);
	void *ctx;
	volatile int cancel;	/* set by the backend: abort the pull/create */
};

/* A runtime section of the config: "[runtime docker]" keys, as read. */
struct rt_config {
	const struct rt_kv *kv;
	size_t nkv;
	/* This nodefs instance's id: put on what create makes (docker label,
	 * lxc mark), and list() reports only what carries it. */
	const char *instance;
};

struct runtime_ops {
	const char *name;	/* "docker", "lxc" */
	/* create names the container rt_spec.engine_name on the engine, whose
	 * namespace others may share (docker: one per engine; lxc: the
	 * directories of an lxcpath); false: by rt_spec.name */
	bool engine_names;
	/* a create can still complete on the engine after its caller died
	 * (dockerd goes on with a create its client left), so one whose
	 * answer a crash lost is watched for; false: what a create cut short
	 * made is found at once (lxc: list() reports it half_made) */
	bool late_creates;
	/* the config keys that say where the engine keeps the containers
	 * (docker endpoint, lxc lxcpath), NULL-terminated: a reload of the
	 * section that changes one is refused while the runtime has any */
	const char *const *home_keys;

	/* Make a handle. Never fails because the engine is absent: that is
	 * reported by health(). -EINVAL for a bad config key/value. */
	int (*open)(const struct rt_config *cfg, void **ret_h, struct nerr *err);
	/* Stop the watcher thread and free the handle. */
	void (*close)(void *h);

	/* Probe the engine: 0 healthy, <0 unhealthy with the reason in err.
	 * version gets the negotiated API / library version. */
	int (*health)(void *h, struct sbuf *version, struct nerr *err);

	/* Create (pulling or building the rootfs as needed) but do not start.
	 * *ret_id is malloc'd, owned by the caller. prog may be NULL. */
	int (*create)(void *h, const struct rt_spec *spec, struct rt_progress *prog,
		      char **ret_id, struct nerr *err);
	int (*start)(void *h, const char *id, struct nerr *err);
	/* Graceful stop, SIGKILL after timeout_s seconds; a negative timeout_s
	 * means the runtime's configured stop_timeout. */
	int (*stop)(void *h, const char *id, int timeout_s, struct nerr *err);
	int (*kill)(void *h, const char *id, int sig, struct nerr *err);
	int (*pause)(void *h, const char *id, struct nerr *err);
	int (*resume)(void *h, const char *id, struct nerr *err);
	int (*update)(void *h, const char *id, const struct rt_limits *lim, struct nerr *err);
	/* Run argv inside; combined stdout+stderr (capped at 1 MiB) into out. */
	int (*exec)(void *h, const char *id, char *const argv[], struct sbuf *out,
		    int *ret_exit_code, struct nerr *err);
	int (*inspect)(void *h, const char *id, struct rt_status *ret, struct nerr *err);
	/* Read from the container's cgroup files (v1 or v2), not a slow API. */
	int (*stats)(void *h, const char *id, struct rt_stats *ret, struct nerr *err);
	/* Append the container's logs (stdout+stderr, last max bytes) to out. */
	int (*logs)(void *h, const char *id, size_t max, struct sbuf *out, struct nerr *err);
	/* Remove the container (killing it if needed). ENOENT-safe: 0 if gone. */
	int (*destroy)(void *h, const char *id, struct nerr *err);
	/* Containers carrying our owner mark and this instance's id and no
	 * RT_ROLE_LABEL, and
	 * half-made ones of this instance (half_made set). *ret is malloc'd; free with rt_listing_free(). May block on
	 * the engine; called from the worker pool, recovery and the monitor
	 * thread (reconciliation), concurrently with other calls. */
	int (*list)(void *h, struct rt_listing **ret, size_t *ret_n, struct nerr *err);
	/* The published ports as the engine reports them, one line each,
	 * "80/tcp 127.0.0.1:49153", into out. NULL: the runtime has none.
	 * An engine call like the others (workers only): the backend asks
	 * once a run and serves the ports file from what it kept. */
	int (*ports)(void *h, const char *id, struct sbuf *out, struct nerr *err);
	/* Run the engine's own check (rt_spec.health) once now, then inspect:
	 * ret as inspect() fills it, health_status saying where the check
	 * stands. For an engine that times its checks (dockerd) -ENOTSUP:
	 * the backend asks no more that run. NULL: none. Workers only. */
	int (*health_run)(void *h, const char *id, struct rt_status *ret, struct nerr *err);
	/* Deliver events for our containers to fn until close(). Returns at once. */
	int (*watch)(void *h, rt_event_fn fn, void *ctx, struct nerr *err);
};

extern const struct runtime_ops rt_docker_ops;
extern const struct runtime_ops rt_lxc_ops;
/* The LXC driver's helper processes (lxc-helper.c): plays the one argv0
 * (a base name) names and returns its exit status; -1 when it names none. */
int rt_lxc_helper_main(const char *argv0, int argc, char **argv);

/* The drivers this build has, by name; NULL if none. */
const struct runtime_ops *runtime_find(const char *name);

const char *rt_state_to_string(enum rt_state s);

/* rt-user.c: USER[:GROUP] (names of [A-Za-z0-9._-] up to 32, numbers up
 * to 2^31-1): 0 or -EINVAL naming it. */
int rt_user_valid(const char *user, struct nerr *err);
/* user to numbers, names looked up in the container's passwd and group
 * files (given as bytes, NULL for none): the user's primary group when
 * no GROUP is given (0 for a number passwd lacks). -EINVAL naming a
 * name the files lack. */
int rt_user_resolve(const char *user, const char *passwd, size_t plen, const char *group,
		    size_t glen, long *ret_uid, long *ret_gid, struct nerr *err);
void rt_listing_free(struct rt_listing *l, size_t n);

/*
 * Engine calls that fork without an exec (liblxc's daemonized start) run
 * in a helper process: path names a program whose main calls
 * runtime_helper_main first (nodefs sets /proc/self/exe, itself). Never
 * set (test programs): they run in the calling process. Set before a
 * driver opens; the string is kept, not copied.
 */
void runtime_set_helper(const char *path);
const char *runtime_helper(void);
/* If argv[0] names a helper's part, play it and return its exit status;
 * -1 when it names none (the program goes on as itself). */
int runtime_helper_main(int argc, char **argv);

#endif
