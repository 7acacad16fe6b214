/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * nodefs-csi-local: a CSI v1 plugin for one node (volumes as directories
 * or image files under a base directory), served on nodefs's own sans-IO
 * gRPC server core (csi/grpcsrv.c, csi/h2server.c) and protobuf-c.
 *
 * This file owns the process: options, the event loop and the gRPC
 * server, the table that maps a :path to a request type and a handler, and
 * the worker pool. Quick answers (Identity, capabilities, NodeGetInfo) are
 * made on the loop thread; everything that touches disks, mounts or
 * records runs on a worker and its answer goes back to the loop, so a slow
 * mkfs never delays a Probe. It knows nothing of what the handlers do.
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "grpc.h"
#include "grpcsrv.h"
#include "h2server.h"
#include "loop.h"
#include "nerr.h"
#include "nodefs-config.h"
#include "plugin.h"
#include "secrets.h"

#define WORKERS 4

/* ---- small shared helpers ---- */

int rfail(struct rstat *st, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(st->msg, sizeof(st->msg), fmt, ap);
	va_end(ap);
	st->code = code;
	return code;
}

struct arena_chunk {
	struct arena_chunk *next;
	size_t used, size;
	max_align_t data[];
};

void *arena_alloc(struct arena *a, size_t n)
{
	struct arena_chunk *c = a->head;

	n = (n + sizeof(max_align_t) - 1) & ~(sizeof(max_align_t) - 1);
	if (!c || c->size - c->used < n) {
		size_t size = n > 3000 ? n : 3000;

		c = calloc(1, sizeof(*c) + size);
		if (!c)
			return NULL;
		c->size = size;
		c->next = a->head;
		a->head = c;
	}
	void *p = (char *)c->data + c->used;
	c->used += n;
	return p;
}

char *arena_strdup(struct arena *a, const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = arena_alloc(a, n);

	if (d)
		memcpy(d, s, n);
	return d;
}

void arena_free(struct arena *a)
{
	while (a->head) {
		struct arena_chunk *c = a->head;

		a->head = c->next;
		free(c);
	}
}

const char *backing_to_string(enum backing b)
{
	return b == BACKING_IMAGE ? "image" : "dir";
}

/* ---- the RPC table ---- */

struct rpc {
	const char *path;
	const ProtobufCMessageDescriptor *req;
	rpc_fn fn;
	bool inline_;	/* answered on the loop thread: no disk, no lock */
};

#define RPC(svc, name, msg, fn, inl) { "/csi.v1." svc "/" name, &csi__v1__##msg##_request__descriptor, fn, inl }
static const struct rpc rpcs[] = {
	RPC("Identity", "GetPluginInfo", get_plugin_info, rpc_get_plugin_info, true),
	RPC("Identity", "GetPluginCapabilities", get_plugin_capabilities, rpc_get_plugin_capabilities, true),
	RPC("Identity", "Probe", probe, rpc_probe, true),
	RPC("Controller", "CreateVolume", create_volume, rpc_create_volume, false),
	RPC("Controller", "DeleteVolume", delete_volume, rpc_delete_volume, false),
	RPC("Controller", "ValidateVolumeCapabilities", validate_volume_capabilities, rpc_validate_volume_capabilities, false),
	RPC("Controller", "ListVolumes", list_volumes, rpc_list_volumes, false),
	RPC("Controller", "GetCapacity", get_capacity, rpc_get_capacity, false),
	RPC("Controller", "ControllerGetCapabilities", controller_get_capabilities, rpc_controller_get_capabilities, true),
	RPC("Controller", "ControllerExpandVolume", controller_expand_volume, rpc_controller_expand_volume, false),
	RPC("Controller", "CreateSnapshot", create_snapshot, rpc_create_snapshot, false),
	RPC("Controller", "DeleteSnapshot", delete_snapshot, rpc_delete_snapshot, false),
	RPC("Controller", "ListSnapshots", list_snapshots, rpc_list_snapshots, false),
	RPC("Controller", "ControllerGetVolume", controller_get_volume, rpc_controller_get_volume, false),
	RPC("Controller", "ControllerModifyVolume", controller_modify_volume, rpc_controller_modify_volume, false),
	RPC("Node", "NodeStageVolume", node_stage_volume, rpc_node_stage_volume, false),
	RPC("Node", "NodeUnstageVolume", node_unstage_volume, rpc_node_unstage_volume, false),
	RPC("Node", "NodePublishVolume", node_publish_volume, rpc_node_publish_volume, false),
	RPC("Node", "NodeUnpublishVolume", node_unpublish_volume, rpc_node_unpublish_volume, false),
	RPC("Node", "NodeGetVolumeStats", node_get_volume_stats, rpc_node_get_volume_stats, false),
	RPC("Node", "NodeExpandVolume", node_expand_volume, rpc_node_expand_volume, false),
	RPC("Node", "NodeGetCapabilities", node_get_capabilities, rpc_node_get_capabilities, true),
	RPC("Node", "NodeGetInfo", node_get_info, rpc_node_get_info, true),
};
#undef RPC

struct server {
	struct plugin p;
	struct loop *loop;
	struct h2_server *srv;
	/* the worker pool: a FIFO of jobs */
	pthread_mutex_t qmu;
	pthread_cond_t qcond;
	struct job *qhead, *qtail;
	bool stopping;
	pthread_t workers[WORKERS];
	unsigned nworkers;
	int sfd;	/* signalfd */
};

struct job {
	struct job *next;
	const struct rpc *rpc;
	struct grpc_srv_call *call;
	size_t len;
	uint8_t msg[];
};

/* Decode, run, encode; *ret_buf/ret_len the packed reply on OK. */
static int run_rpc(struct plugin *p, const struct rpc *r, const uint8_t *msg, size_t len,
		   uint8_t **ret_buf, size_t *ret_len, struct rstat *st)
{
	struct arena a = { 0 };
	ProtobufCMessage *resp = NULL;
	ProtobufCMessage *req = protobuf_c_message_unpack(r->req, NULL, len, msg);
	int code;

	if (!req)
		return rfail(st, GRPC_INVALID_ARGUMENT, "request does not decode as %s", r->req->name);
	code = auth_check(p, req, st);
	if (code == GRPC_OK && !r->inline_)
		code = ids_known(p, req, st);
	if (code == GRPC_OK)
		code = r->fn(p, req, &a, &resp, st);
	/* The reply may borrow from the request: pack before freeing it. */
	if (code == GRPC_OK) {
		size_t n = protobuf_c_message_get_packed_size(resp);
		uint8_t *buf = malloc(n ? n : 1);

		if (!buf)
			code = rfail(st, GRPC_RESOURCE_EXHAUSTED, "out of memory encoding the reply");
		else {
			protobuf_c_message_pack(resp, buf);
			*ret_buf = buf;
			*ret_len = n;
		}
	}
	auth_wipe(req);
	protobuf_c_message_free_unpacked(req, NULL);
	arena_free(&a);
	return code;
}

static void *worker(void *ud)
{
	struct server *s = ud;

	for (;;) {
		pthread_mutex_lock(&s->qmu);
		while (!s->qhead && !s->stopping)
			pthread_cond_wait(&s->qcond, &s->qmu);
		struct job *j = s->qhead;
		if (!j) {
			pthread_mutex_unlock(&s->qmu);
			return NULL;
		}
		s->qhead = j->next;
		if (!s->qhead)
			s->qtail = NULL;
		pthread_mutex_unlock(&s->qmu);

		struct rstat st = { 0 };
		uint8_t *buf = NULL;
		size_t n = 0;
		int code = run_rpc(&s->p, j->rpc, j->msg, j->len, &buf, &n, &st);
		if (code != GRPC_OK)
			fprintf(stderr, "%s: %s: %s\n", j->rpc->path + 8, grpc_code_to_string(code), st.msg);
		while (h2_server_reply_async(s->srv, j->call, code, st.msg, buf, n) < 0)
			usleep(1000);	/* out of memory: the answer must go out */
		free(buf);
		free(j);
	}
}

static void on_request(void *ud, struct grpc_srv_call *call, const char *path,
		       const uint8_t *msg, size_t len, uint64_t timeout_ms)
{
	struct server *s = ud;
	const struct rpc *r = NULL;

	for (size_t i = 0; i < sizeof(rpcs) / sizeof(rpcs[0]); i++)
		if (strcmp(rpcs[i].path, path) == 0) {
			r = &rpcs[i];
			break;
		}
	if (!r) {
		h2_server_reply(call, GRPC_UNIMPLEMENTED, "unknown method", NULL, 0);
		return;
	}
	if (r->inline_) {
		struct rstat st = { 0 };
		uint8_t *buf = NULL;
		size_t n = 0;
		int code = run_rpc(&s->p, r, msg, len, &buf, &n, &st);

		h2_server_reply(call, code, st.msg, buf, n);
		free(buf);
		return;
	}
	struct job *j = malloc(sizeof(*j) + len);
	if (!j) {
		h2_server_reply(call, GRPC_RESOURCE_EXHAUSTED, "out of memory", NULL, 0);
		return;
	}
	j->next = NULL;
	j->rpc = r;
	j->call = call;
	j->len = len;
	if (len)
		memcpy(j->msg, msg, len);
	pthread_mutex_lock(&s->qmu);
	if (s->qtail)
		s->qtail->next = j;
	else
		s->qhead = j;
	s->qtail = j;
	pthread_cond_signal(&s->qcond);
	pthread_mutex_unlock(&s->qmu);
}

static void on_signal(struct loop *l, int fd, unsigned events, void *ud)
{
	struct signalfd_siginfo si;

	if (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		loop_stop(l);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: nodefs-csi-local [--endpoint unix:///PATH] [--base-dir DIR]\n"
		"                         [--backing dir|image] [--node-id ID] [--max-volumes N]\n"
		"                         [--secrets FILE]\n"
		"CSI_ENDPOINT is used when --endpoint is not given.\n");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "endpoint", required_argument, NULL, 'e' },
		{ "base-dir", required_argument, NULL, 'b' },
		{ "backing", required_argument, NULL, 'k' },
		{ "node-id", required_argument, NULL, 'n' },
		{ "max-volumes", required_argument, NULL, 'm' },
		{ "secrets", required_argument, NULL, 's' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	static struct server s;
	const char *endpoint = getenv("CSI_ENDPOINT");
	const char *base = "/var/lib/nodefs-csi-local";
	const char *node_id = NULL, *secrets = NULL;
	struct nerr nerr = { 0 };
	char err[512];
	int c, r;

	/* One arena: threads here are few and short-lived in their work,
	 * and a second arena would double the resident heap. */
	mallopt(M_ARENA_MAX, 1);
	s.p.backing = BACKING_DIR;
	s.p.max_volumes = 10000;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'e': endpoint = optarg; break;
		case 'b': base = optarg; break;
		case 'n': node_id = optarg; break;
		case 's': secrets = optarg; break;
		case 'k':
			if (strcmp(optarg, "dir") == 0)
				s.p.backing = BACKING_DIR;
			else if (strcmp(optarg, "image") == 0)
				s.p.backing = BACKING_IMAGE;
			else {
				fprintf(stderr, "nodefs-csi-local: --backing must be dir or image, not '%s'\n", optarg);
				return 2;
			}
			break;
		case 'm': {
			char *end;
			unsigned long long v = strtoull(optarg, &end, 10);

			if (*end || !v) {
				fprintf(stderr, "nodefs-csi-local: bad --max-volumes '%s'\n", optarg);
				return 2;
			}
			s.p.max_volumes = v;
			break;
		}
		case 'V': printf("nodefs-csi-local %s\n", NODEFS_VERSION); return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc || !endpoint) {
		usage(stderr);
		return 2;
	}
	if (strncmp(endpoint, "unix://", 7) != 0 || endpoint[7] != '/') {
		fprintf(stderr, "nodefs-csi-local: endpoint must be unix:///PATH, not '%s'\n", endpoint);
		return 2;
	}
	if (base[0] != '/') {
		fprintf(stderr, "nodefs-csi-local: --base-dir must be absolute\n");
		return 2;
	}
	if (node_id)
		snprintf(s.p.node_id, sizeof(s.p.node_id), "%s", node_id);
	else if (gethostname(s.p.node_id, sizeof(s.p.node_id) - 1) < 0 || !s.p.node_id[0])
		snprintf(s.p.node_id, sizeof(s.p.node_id), "localhost");
	if (secrets && auth_load(&s.p, secrets, err, sizeof(err)) < 0) {
		fprintf(stderr, "nodefs-csi-local: %s\n", err);
		return 2;
	}
	pthread_mutex_init(&s.p.mu, NULL);
	s.p.base = strdup(base);
	if (asprintf(&s.p.state_dir, "%s/state", base) < 0 || asprintf(&s.p.data_dir, "%s/data", base) < 0)
		return 1;
	if (store_open(&s.p, err, sizeof(err)) < 0) {
		fprintf(stderr, "nodefs-csi-local: %s\n", err);
		return 1;
	}

	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	s.sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (s.sfd < 0 || loop_new(&s.loop) < 0) {
		fprintf(stderr, "nodefs-csi-local: cannot set up the event loop\n");
		return 1;
	}
	loop_add_fd(s.loop, s.sfd, LOOP_READ, on_signal, NULL);
	umask(022);
	r = h2_server_new(s.loop, endpoint + 7, on_request, &s, &s.srv, &nerr);
	if (r < 0) {
		fprintf(stderr, "nodefs-csi-local: %s\n", nerr.msg);
		return 1;
	}
	pthread_mutex_init(&s.qmu, NULL);
	pthread_cond_init(&s.qcond, NULL);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256u << 10);
	for (unsigned i = 0; i < WORKERS; i++)
		if (pthread_create(&s.workers[s.nworkers], &attr, worker, &s) == 0)
			s.nworkers++;
	pthread_attr_destroy(&attr);
	if (!s.nworkers) {
		fprintf(stderr, "nodefs-csi-local: cannot start workers\n");
		return 1;
	}
	fprintf(stderr, "nodefs-csi-local %s: serving %s, backing %s under %s, node %s%s\n",
		NODEFS_VERSION, endpoint, backing_to_string(s.p.backing), base, s.p.node_id,
		s.p.secrets ? ", secrets required" : "");
	r = loop_run(s.loop);

	/* Stop: finish the calls that run (their answers are dropped). */
	pthread_mutex_lock(&s.qmu);
	s.stopping = true;
	while (s.qhead) {
		struct job *j = s.qhead;

		s.qhead = j->next;
		free(j);
	}
	s.qtail = NULL;
	pthread_cond_broadcast(&s.qcond);
	pthread_mutex_unlock(&s.qmu);
	for (unsigned i = 0; i < s.nworkers; i++)
		pthread_join(s.workers[i], NULL);
	h2_server_free(s.srv);
	loop_free(s.loop);
	close(s.sfd);
	pthread_mutex_lock(&s.p.mu);
	for (size_t i = 0; i < s.p.nvols; i++)
		vol_free(s.p.vols[i]);
	for (size_t i = 0; i < s.p.nsnaps; i++)
		snap_free(s.p.snaps[i]);
	pthread_mutex_unlock(&s.p.mu);
	free(s.p.vols);
	free(s.p.snaps);
	free(s.p.base);
	free(s.p.state_dir);
	free(s.p.data_dir);
	secrets_free(s.p.secrets);
	return r < 0 ? 1 : 0;
}
