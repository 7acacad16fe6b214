/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * docker-internal: the pure half of the Docker driver, shared by docker.c,
 * the unit tests and the fuzz targets. Everything here is a function of its
 * arguments: the HTTP status table, API version negotiation, the one JSON
 * layer (request bodies written with common/jw, response bodies parsed with
 * jansson), Docker's
 * timestamps, and the decoder of multiplexed (non-TTY) log and exec streams.
 * It never opens a socket, never touches curl, never sees a FUSE or backend
 * type.
 *
 * Errors: -errno; the parsers that take a struct nerr fill it, -ENOMEM
 * included ("out of memory"), and tell a reply that does not parse
 * (-EBADMSG) from an allocation that failed (-ENOMEM). Thread-safe.
 */
#ifndef NODEFS_DOCKER_INTERNAL_H
#define NODEFS_DOCKER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "runtime.h"

struct nerr;
struct sbuf;

/* A Docker JSON body never exceeds this; past it a call fails -E2BIG. */
#define DOCKER_BODY_CAP (8u << 20)
/* One line of the /events or pull progress stream. */
#define DOCKER_LINE_CAP (64u << 10)

/* The newest API version whose semantics this driver was written against.
 * Everything we send exists unchanged from 1.41 (Debian 12) to 1.52. */
#define DOCKER_API_NEWEST_MAJOR 1
#define DOCKER_API_NEWEST_MINOR 47
/* The oldest engine we accept: PidsLimit as a nullable int64, NanoCpus. */
#define DOCKER_API_OLDEST_MAJOR 1
#define DOCKER_API_OLDEST_MINOR 40

/* What kind of call a status answers; it decides 409 and 304. */
enum docker_call {
	DOCKER_CALL_OTHER = 0,
	DOCKER_CALL_CREATE,	/* 409: the name is taken -> EEXIST */
	DOCKER_CALL_STARTSTOP,	/* 304: already started/stopped -> success */
};

/* The one table from an Engine API HTTP status to an errno: 0 for success
 * (2xx, and 304 for start/stop), else a positive errno: 400 EINVAL, 404
 * ENOENT, 409 EEXIST for create and EBUSY otherwise, 401/403 EACCES, 501
 * EOPNOTSUPP, 500 and anything else EIO. */
int docker_status_to_errno(long http_status, enum docker_call call);

/* Whether an engine's error text says the container is not running (or
 * stopped): Docker answers some commands on a container that has just
 * exited with a bare 500 in these words ("cannot update a stopped
 * container", runc's "container not running", "Container ... is not
 * running"), before its own state says exited. */
bool docker_msg_not_running(const char *msg);
/* Does an engine's error say its runtime could not freeze the container
 * (runc's "unable to freeze", a pause that may succeed if tried again)? */
bool docker_msg_freeze_failed(const char *msg);

/* The transport's failures (a CURLcode passed as int) to a positive errno:
 * could not connect / socket missing EHOSTDOWN, timeout ETIMEDOUT, aborted by
 * our progress callback ECANCELED, a cap hit in a write callback E2BIG,
 * out of memory ENOMEM, anything else EIO. */
int docker_curl_to_errno(int curl_code);

/* Parse "MAJOR.MINOR" (e.g. "1.41"). 0, or -EINVAL. */
int docker_version_parse(const char *s, unsigned *ret_major, unsigned *ret_minor);

/* Pick the API version to speak: min(server, ours), raised to the server's
 * minimum when that is newer than ours (min may be NULL: unknown). Writes
 * "1.41" style text into ret (size n). -EINVAL when a version does not parse,
 * -EPROTONOSUPPORT when the server is older than DOCKER_API_OLDEST. */
int docker_version_negotiate(const char *server, const char *server_min,
			     char *ret, size_t n);

/* Docker's RFC 3339 timestamps ("2026-11-29T17:44:36.556182322Z", offsets
 * allowed); Go's zero time "0001-01-01T00:00:00Z" gives 0. 0 or -EINVAL. */
int docker_time_parse(const char *s, time_t *ret);

/* Body of POST /containers/create for spec: Image, Cmd, Env, Labels (our
 * owner mark and name), HostConfig Memory/MemorySwap (equal: no swap beyond
 * the limit), NanoCpus, PidsLimit, Binds. *ret is malloc'd. -EINVAL (with a
 * message) for a spec Docker cannot express, checked before anything is
 * written; -ENOMEM; -E2BIG past DOCKER_BODY_CAP. */
int docker_json_create_body(const struct rt_spec *spec, char **ret, struct nerr *err);
/* The same for an engine that is Podman (podman true): its Healthcheck's
 * Test as one CMD-SHELL line (Podman 4 splits a CMD's words again at each
 * space). */
int docker_json_create_body_for(const struct rt_spec *spec, bool podman, char **ret,
				struct nerr *err);

/* Body of POST /containers/{id}/update for the fields set in lim. */
int docker_json_update_body(const struct rt_limits *lim, char **ret, struct nerr *err);

/* Body of Podman's POST /libpod/containers/{id}/update (its Engine API has
 * no /containers/{id}/update before Podman 5): an OCI LinuxResources object,
 * {"memory": {"limit", "swap"}, "cpu": {"quota", "period"}, "pids":
 * {"limit"}}, each for a field set in lim, -1 for unlimited (0 in lim).
 * *ret is malloc'd. -EINVAL (with a message), -ENOMEM. */
int docker_json_libpod_update_body(const struct rt_limits *lim, char **ret, struct nerr *err);

/* Body of POST /containers/{id}/exec for argv (stdout and stderr attached). */
int docker_json_exec_body(char *const argv[], char **ret, struct nerr *err);

/* The "message" of an engine error body, copied into buf (size n; always
 * NUL-terminated). Falls back to the raw body text. */
void docker_json_error_message(const char *body, size_t len, char *buf, size_t n);

/* {"Id": "..."} of create / exec create: *ret malloc'd. -EBADMSG. */
int docker_json_parse_id(const char *body, size_t len, char **ret, struct nerr *err);

/* GET /version: ApiVersion and MinAPIVersion (empty when absent), each
 * copied into a buffer of n bytes. -EBADMSG. */
int docker_json_parse_version(const char *body, size_t len, char *ret_api,
			      char *ret_min, size_t n, struct nerr *err);

/* GET /containers/{id}/json -> status; -EBADMSG on a malformed body. */
int docker_json_parse_inspect(const char *body, size_t len, struct rt_status *ret,
			      struct nerr *err);

/* GET /containers/{id}/json -> the host sources of HostConfig.Binds
 * ("SRC:DST[:ro]") that are host paths, a NULL-terminated vector (NULL when
 * none) whose strings and itself are the caller's; -EBADMSG, -ENOMEM. */
/* NetworkSettings.Ports of an inspect reply: one "80/tcp 127.0.0.1:49153"
 * line per binding the engine made, into out. -EBADMSG, -ENOMEM. */
int docker_json_parse_ports(const char *body, size_t len, struct sbuf *out, struct nerr *err);
int docker_json_parse_bind_sources(const char *body, size_t len, char ***ret, struct nerr *err);

/* GET /exec/{id}/json -> exit code and whether it still runs. */
int docker_json_parse_exec_inspect(const char *body, size_t len, int *ret_exit_code,
				   bool *ret_running, struct nerr *err);

/* GET /containers/json -> listings (only those with our owner label; the
 * name comes from RT_NAME_LABEL). *ret malloc'd, free with rt_listing_free. */
int docker_json_parse_list(const char *body, size_t len, struct rt_listing **ret,
			   size_t *ret_n, struct nerr *err);
/* The same, keeping only those whose RT_INSTANCE_LABEL is instance (NULL:
 * any). */
int docker_json_parse_list_of(const char *body, size_t len, const char *instance,
			      struct rt_listing **ret, size_t *ret_n, struct nerr *err);

/* head then tail into buf (n bytes, always NUL-terminated); when both do
 * not fit, head whole (cut at n - 1) and the end of tail after "...": an
 * engine's message chains its causes with the most telling last (Podman:
 * "initializing source ...: pinging container registry ...: Get ...: dial
 * tcp ...: connect: connection refused"). */
void docker_msg_join_tail(char *buf, size_t n, const char *head, const char *tail);

/* Podman answers 500 where Docker has a status of its own, and names the
 * condition in the body's "cause": "container state improper" (pause of a
 * paused or stopped container, unpause of a running one, kill or exec of
 * a stopped one; Docker 409 or 304) is EBUSY; "that name is already in
 * use" (Docker 409) is EEXIST for a create, else EBUSY. The errno Docker's
 * status would give, or 0 for any other body. */
int docker_json_podman_cause(const char *body, size_t len, enum docker_call call);

/* One header line of a GET /_ping reply (as curl hands it: "Name: value"
 * and its CRLF). "Api-Version: 1.41" (any case) copies the version into
 * ret_api (n bytes) and returns 1; "Libpod-Api-Version: ..." sets
 * *ret_podman (Podman's Engine API) and returns 0; any other line 0; an
 * Api-Version that is empty, not digits and dots, or does not fit
 * -EBADMSG. */
int docker_ping_header(const char *line, size_t len, char *ret_api, size_t n, bool *ret_podman);

/* Docker's State.Status words ("running", "exited", ...), and Podman's
 * ("stopped", "stopping", "configured", "initialized"), to rt_state. */
enum rt_state docker_state_from_string(const char *s);

/* One /events object. Returns 1 and fills ret (ret->id points into ret_id,
 * of size n) when it maps to an rt_event (start, die with exitCode, oom,
 * pause, unpause, destroy of a container; Podman's remove is a destroy), 0 for events we ignore,
 * -EBADMSG for malformed JSON, -ENOMEM. */
int docker_json_parse_event(const char *line, size_t len, struct rt_event *ret,
			    char *ret_id, size_t n);

/* One line of the pull progress stream. Returns 0 and a one-line summary in
 * buf ("abc123: Downloading [=>  ] 1MB/5MB"), or -ENOENT with the engine's
 * error text in buf when the line reports an error (an "error" line, or the
 * {"message": ...} of an error reply); -EBADMSG or -ENOMEM, buf untouched. */
int docker_json_parse_pull_line(const char *line, size_t len, char *buf, size_t n);

/*
 * Decoder of Docker's multiplexed stream: frames of an 8-byte header
 * (stream 0 stdin / 1 stdout / 2 stderr, three zero bytes, big-endian 32-bit
 * length) followed by that many payload bytes. Incremental: bytes may arrive
 * split anywhere. sink gets every payload piece in order (possibly a frame in
 * several pieces); a nonzero return from sink stops decoding and is returned.
 */
typedef int (*docker_mux_sink)(void *ctx, int stream, const char *p, size_t n);

struct docker_mux {
	unsigned char hdr[8];
	size_t hdr_len;		/* header bytes gathered so far */
	uint32_t remaining;	/* payload bytes left in the current frame */
	int stream;
};

void docker_mux_init(struct docker_mux *m);
/* Feed n bytes. 0, a sink's nonzero return, or -EBADMSG for a header whose
 * stream byte is not 0-2 or whose padding is not zero. */
int docker_mux_feed(struct docker_mux *m, const char *p, size_t n,
		    docker_mux_sink sink, void *ctx);
/* At end of stream: 0 when it ended on a frame boundary, else -EBADMSG. */
int docker_mux_finish(const struct docker_mux *m);

/* A sink keeping only the last `max` bytes of everything fed to it. */
struct docker_tail {
	char *buf;		/* 2 * max bytes */
	size_t max;
	size_t len;
};
int docker_tail_init(struct docker_tail *t, size_t max);
void docker_tail_free(struct docker_tail *t);
int docker_tail_sink(void *ctx, int stream, const char *p, size_t n);
/* The kept bytes (the last min(max, total) bytes). */
const char *docker_tail_data(const struct docker_tail *t, size_t *ret_len);

/* Split an image reference into what POST /images/create wants: fromImage
 * (repository, with registry) and tag (or "@digest" kept in fromImage, tag
 * empty). "busybox" -> "busybox", "latest"; "host:5000/a/b:1" -> ("host:5000/a/b",
 * "1"). -EINVAL for an empty or over-long reference. */
int docker_image_split(const char *ref, char *ret_repo, size_t nrepo,
		       char *ret_tag, size_t ntag);

/* --- cgroup files (stats) ---------------------------------------------- */

/* From the text of /proc/PID/cgroup, the directories under root (normally
 * "/sys/fs/cgroup") holding the cpu accounting, memory and pids files: v2
 * takes the "0::PATH" line, v1 the cpuacct, memory and pids hierarchies
 * (co-mounted ones such as "cpu,cpuacct" included). Each ret_* has n bytes.
 * 0, or -ENOENT when one is missing or does not fit. Thread-safe. */
int docker_cg_dirs_from_proc(const char *text, bool v2, const char *root, char *ret_cpu,
			     char *ret_mem, char *ret_pids, size_t n);

/* CPU time from v1 cpuacct.stat ("user T\nsystem T", ticks of hz) or v2
 * cpu.stat ("user_usec U\nsystem_usec U"): seconds; a missing key gives 0. */
void docker_cg_parse_cpu(const char *text, bool v2, long hz, double *ret_user,
			 double *ret_system);

/* A cgroup number file: a decimal, or v2's "max" (unlimited) as 0. v1 says
 * unlimited with a huge page-rounded number: callers treat >= 2^62 as 0.
 * 0 or -EIO. */
int docker_cg_parse_u64(const char *text, uint64_t *ret);

#endif
