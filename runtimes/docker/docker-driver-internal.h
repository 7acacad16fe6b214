/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * docker-driver-internal: what the impure pieces of the Docker driver share
 * (docker.c the ops, docker-http.c the transport, docker-cgroup.c stats,
 * docker-watch.c the /events watcher): the handle and the request of one
 * exchange. Private to runtimes/docker; knows nothing of backend/ or fs/.
 * The pure half (JSON, tables, decoders) is docker-internal.h.
 */
#ifndef NODEFS_DOCKER_DRIVER_INTERNAL_H
#define NODEFS_DOCKER_DRIVER_INTERNAL_H

#include "lazycurl.h"	/* libcurl, loaded on first need */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "docker-internal.h"
#include "nerr.h"
#include "runtime.h"

#define DK_POOL_MAX 8
#define DK_CONNECT_TIMEOUT_MS 2000L
#define DK_CALL_TIMEOUT_MS 60000L
#define DK_CG_MAX 64
#define DK_CG_PATH 200
#define DK_CG_NFD 4
#define DK_OOM_MAX 32
/* how long an exit by SIGKILL of a container with a memory limit waits for
 * the engine's "oom" event, which may come after the exit (20.10) */
#define DK_OOM_GRACE_MS 1000
#define DK_EXEC_CAP (1u << 20)

/* Where a container's cgroup files are. */
struct dk_cgpath {
	char id[72];
	bool v2;
	char cpu[DK_CG_PATH];	/* v1 cpuacct dir, v2 the unified dir */
	char mem[DK_CG_PATH];
	char pids[DK_CG_PATH];
};

/* A cached container's stats files, open: cpu, memory, limit, pids. */
struct dk_cg {
	char id[72];		/* "" when the slot is free */
	bool v2;
	int fd[DK_CG_NFD];
};

struct docker {
	char sock[108];
	char instance[RT_INSTANCE_MAX + 1];	/* "" when the backend gave none */
	int stop_timeout;
	char network[65];	/* [runtime docker] network; "": the engine's default */
	bool cgroup_v2;		/* the host is unified-only */

	pthread_mutex_t lock;	/* api, negotiated, podman, pool */
	char api[16];
	bool negotiated;
	bool podman;		/* the engine is Podman (its /_ping says so) */
	CURL *idle[DK_POOL_MAX];
	size_t nidle;
	/* what is known of containers' last runs that the engine's OOMKilled
	 * flag may not say (it loses a race with the exit on 20.10) */
	struct dk_note {
		char id[72];	/* "" when the slot is free */
		bool oom;	/* the engine reported an "oom" event */
		bool asked;	/* nodefs stopped or killed it: a SIGKILL is ours */
		bool waited;	/* its exit by SIGKILL waited for an oom event once */
	} note[DK_OOM_MAX];
	size_t note_next;
	pthread_cond_t oomcond;	/* CLOCK_MONOTONIC, with lock: an oom event came */
	pthread_rwlock_t cglock;	/* cg: preads share it, changes exclude */
	struct dk_cg cg[DK_CG_MAX];
	size_t cg_next;

	/* the /events watcher */
	pthread_mutex_t wlock;
	pthread_cond_t wcond;	/* CLOCK_MONOTONIC: backoff sleeps */
	bool stopping;
	bool watching;
	pthread_t watcher;
	CURLM *wmulti;
	rt_event_fn fn;
	void *fn_ctx;
};

/* --- docker-http.c ---------------------------------------------------------- */

/* One exchange with the engine. */
struct dk_req {
	const char *method;
	const char *path;	/* after the /vX.Y prefix, starting with '/' */
	bool unversioned;
	const char *body;	/* JSON, or NULL */
	enum docker_call call;
	long timeout_ms;	/* 0: DK_CALL_TIMEOUT_MS; <0: none */
	/* streaming: when set, the body goes here instead of into resp */
	size_t (*write)(char *p, size_t sz, size_t nm, void *ctx);
	void *write_ctx;
	int (*xfer)(void *ctx, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un);
	void *xfer_ctx;
	size_t (*header)(char *p, size_t sz, size_t nm, void *ctx);
	void *header_ctx;
	int cb_err;		/* a callback's errno, preferred over curl's code */
	char cb_msg[NERR_MSG_MAX];
};

/* One HTTP exchange. *ret_status gets the HTTP status, body (if non-NULL,
 * cap DOCKER_BODY_CAP) the reply when not streamed. 0 when the exchange
 * happened and the status maps to success; else -errno with the engine's
 * message. Any thread. */
/* libcurl loaded (common/lazycurl.h), once the engine's socket takes a
 * connection: EHOSTDOWN with the reason while it does not, as an exchange
 * that cannot connect says. Every path to a curl call goes through it. */
int dk_curl_ready(struct docker *d, struct nerr *err);
int dk_call(struct docker *d, struct dk_req *rq, struct sbuf *body, long *ret_status,
	    struct nerr *err);
/* The negotiated API version into api (negotiating it first if needed). */
int dk_ensure_version(struct docker *d, char *api, size_t n, struct nerr *err);
/* Whether the engine is Podman (negotiating first if needed): 1 yes, 0
 * no, or -errno as dk_ensure_version. */
int dk_is_podman(struct docker *d, struct nerr *err);
/* The engine went away: negotiate again at the next call. */
void dk_forget_version(struct docker *d);
/* Engine ids and names in a URL path: nothing to escape, so refuse the
 * rest (-EINVAL). */
int dk_check_id(const char *id, struct nerr *err);
/* A POST with no body whose reply body we only need for errors. */
int dk_simple_post(struct docker *d, const char *path, enum docker_call call, long timeout_ms,
		   struct nerr *err);
/* GET or POST path whose 2xx reply is a multiplexed stream fed to sink. */
int dk_mux_call(struct docker *d, const char *method, const char *path, const char *body,
		long timeout_ms, docker_mux_sink sink, void *sink_ctx, struct nerr *err);

/* --- docker.c --------------------------------------------------------------- */
int dk_inspect(void *h, const char *id, struct rt_status *ret, struct nerr *err);

/* --- docker-cgroup.c -------------------------------------------------------- */
int dk_stats(void *h, const char *id, struct rt_stats *ret, struct nerr *err);
void dk_cg_close(struct dk_cg *cg);
/* id is gone or stopped: its open cgroup files go. */
void dk_cg_forget(struct docker *d, const char *id);
/* A worker saw id running with init pid: learn its cgroups if stats()
 * does not know them, so that stats() never needs to ask the engine. */
void dk_cg_note_running(struct docker *d, const char *id, pid_t pid);

/* --- docker-watch.c --------------------------------------------------------- */
int dk_watch(void *h, rt_event_fn fn, void *ctx, struct nerr *err);
/* Was the exit of id (status from an inspect, EXITED) the OOM killer's?
 * The engine's flag, or an "oom" event since its last start, or, for an
 * exit by SIGKILL of a container with a memory limit, the kernel's oom-kill
 * record naming it (rt-oomlog.h); failing those, when nodefs did not stop
 * or kill it, the event is waited for up to DK_OOM_GRACE_MS, once per run.
 * (id may be a prefix of the full id the events carry.) */
bool dk_oom_killed(struct docker *d, const char *id, const struct rt_status *st);
/* An oom, start or destroy event of the watcher. */
void dk_oom_note(struct docker *d, const struct rt_event *ev);
/* nodefs is about to stop or kill id. */
void dk_oom_asked(struct docker *d, const char *id);

#endif
