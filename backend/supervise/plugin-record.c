/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * plugin-record: the checkpoint records of plugins (STATE_DIR/plugins/
 * NAME.json), and what a record's process is checked against (/proc, the
 * boot id); see plugin-record.h. Knows processes only by /proc; nothing of
 * the supervisor, fs or CSI.
 */
#include "plugin-record.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "backend-internal.h"
#include "jw.h"
#include "log.h"
#include "plugin-proc.h"
#include "sbuf.h"
#include "store.h"

void plugin_boot_id(char *buf, size_t len)
{
	FILE *fp = fopen("/proc/sys/kernel/random/boot_id", "re");

	buf[0] = '\0';
	if (fp) {
		if (!fgets(buf, (int)len, fp))
			buf[0] = '\0';
		fclose(fp);
	}
	buf[strcspn(buf, "\n")] = '\0';
}

/* The start time (clock ticks since boot) and process group of pid. */
int plugin_proc_stat(pid_t pid, unsigned long long *ret_start, pid_t *ret_pgid)
{
	char path[64], buf[1024], *p;
	unsigned long long start = 0;
	int pgid = 0, n;
	ssize_t k;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	k = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (k <= 0)
		return -EIO;
	buf[k] = '\0';
	p = strrchr(buf, ')');		/* comm may hold anything */
	if (!p)
		return -EIO;
	/* after ") ": state(3) ppid(4) pgrp(5) ... starttime(22) */
	char state;
	n = sscanf(p + 2, "%c %*d %d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
		   &state, &pgid, &start);
	if (n != 3)
		return -EIO;
	if (state == 'Z' || state == 'X')
		return -ESRCH;
	*ret_start = start;
	if (ret_pgid)
		*ret_pgid = pgid;
	return 0;
}

/* The wall clock time a process started, from its start time in ticks. */
time_t plugin_start_time(unsigned long long ticks)
{
	char line[256];
	long long btime = 0;
	long hz = sysconf(_SC_CLK_TCK);
	FILE *fp = fopen("/proc/stat", "re");

	if (!fp)
		return time(NULL);
	while (fgets(line, sizeof(line), fp))
		if (sscanf(line, "btime %lld", &btime) == 1)
			break;
	fclose(fp);
	if (!btime || hz <= 0)
		return time(NULL);
	return (time_t)(btime + (long long)(ticks / (unsigned long long)hz));
}

void plugin_record_write(struct jw *w, const struct plugin_def *def)
{
	jw_kstr(w, "name", def->name);
	jw_kstr(w, "endpoint", def->endpoint);
	if (def->command)
		jw_kstrv(w, "command", def->command);
	jw_kbool(w, "keep_running", def->keep_running);
	jw_kbool(w, "from_config", def->from_config);
	if (def->secrets)
		jw_kstr(w, "secrets", def->secrets);
	if (def->runtime) {
		jw_kstr(w, "runtime", def->runtime);
		jw_kstr(w, "image", def->image);
		jw_kbool(w, "node", def->node);
		jw_kbool(w, "privileged", def->privileged);
		jw_kstrv(w, "mounts", def->mounts);
	}
}

int plugin_record_put(struct backend *b, const struct plugin_def *def, struct nerr *err)
{
	struct sbuf sb = SBUF_INIT(0);
	struct jw w;
	int r;

	store_record_begin(&w, &sb);
	plugin_record_write(&w, def);
	r = store_put_record(b->store, "plugins", def->name, &w, STORE_DURABLE, err);
	sbuf_free(&sb);
	return r;
}

int plugin_record_del(struct backend *b, const char *name, struct nerr *err)
{
	return store_del(b->store, "plugins", name, STORE_DURABLE, err);
}

static char **strv_from_json(json_t *a)
{
	size_t n = json_array_size(a);
	char **v;

	if (!json_is_array(a) || n == 0 || n > 256)
		return NULL;
	v = calloc(n + 1, sizeof(*v));
	if (!v)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const char *s = json_string_value(json_array_get(a, i));

		if (!s || !(v[i] = strdup(s))) {
			ctl_strv_free(v);
			return NULL;
		}
	}
	return v;
}

struct load_ctx {
	plugin_record_fn fn;
	void *ctx;
};

static void load_one(void *ctx, const char *name, json_t *o)
{
	struct load_ctx *lc = ctx;
	const char *ep = json_string_value(json_object_get(o, "endpoint"));
	json_t *cmd = json_object_get(o, "command"), *mnt = json_object_get(o, "mounts");
	char **argv = cmd ? strv_from_json(cmd) : NULL;
	char **mounts = json_array_size(mnt) ? strv_from_json(mnt) : NULL;
	struct plugin_def def = {
		.name = name,
		.endpoint = ep,
		.command = argv,
		.runtime = json_string_value(json_object_get(o, "runtime")),
		.image = json_string_value(json_object_get(o, "image")),
		.mounts = mounts,
		.node = json_is_true(json_object_get(o, "node")),
		.privileged = json_is_true(json_object_get(o, "privileged")),
		.keep_running = json_is_true(json_object_get(o, "keep_running")),
		.secrets = json_string_value(json_object_get(o, "secrets")),
		.from_config = json_is_true(json_object_get(o, "from_config")),
	};

	if (!ep || (cmd && !argv) || (json_array_size(mnt) && !mounts) || !def.runtime != !def.image)
		log_warn("plugin record %s: no endpoint, a bad command or a bad container: ignored",
			 name);
	else
		lc->fn(lc->ctx, &def);
	ctl_strv_free(argv);
	ctl_strv_free(mounts);
}

static void load_bad(void *ctx, const char *name, const char *reason)
{
	log_warn("plugin record %s: %s", name, reason);
}

int plugin_records_load(struct backend *b, plugin_record_fn fn, void *ctx)
{
	struct load_ctx lc = { fn, ctx };

	return store_load(b->store, "plugins", load_one, load_bad, &lc);
}

/* The process a record names, when that very process still runs. */
bool plugin_record_alive(pid_t pid, unsigned long long start, const char *boot)
{
	unsigned long long now_start;
	char now_boot[64];

	if (pid <= 0)
		return false;
	plugin_boot_id(now_boot, sizeof(now_boot));
	if (!boot[0] || strcmp(boot, now_boot) != 0)
		return false;
	return plugin_proc_stat(pid, &now_start, NULL) == 0 && now_start == start;
}

void plugin_record_read(struct backend *b, const char *name, pid_t *pid, pid_t *pgid,
		     unsigned long long *start, char *boot, size_t blen, unsigned *restarts,
		     char *cid, size_t clen)
{
	char path[4400];
	json_t *o;

	snprintf(path, sizeof(path), "%s/plugins/%s.json", b->cfg->state_dir, name);
	o = json_load_file(path, 0, NULL);
	*pid = *pgid = 0;
	*start = 0;
	boot[0] = '\0';
	if (cid && clen)
		cid[0] = '\0';
	if (!o)
		return;
	*pid = (pid_t)json_integer_value(json_object_get(o, "pid"));
	*pgid = (pid_t)json_integer_value(json_object_get(o, "pgid"));
	*start = (unsigned long long)json_integer_value(json_object_get(o, "starttime"));
	snprintf(boot, blen, "%s", json_string_value(json_object_get(o, "boot_id")) ?: "");
	if (restarts)
		*restarts = (unsigned)json_integer_value(json_object_get(o, "restarts"));
	if (cid && clen)
		snprintf(cid, clen, "%s", json_string_value(json_object_get(o, "container")) ?: "");
	json_decref(o);
}

void plugin_record_retire(struct backend *b, const char *name)
{
	unsigned long long start;
	pid_t pid, pgid;
	char boot[64];
	struct nerr err = { 0 };

	char cid[80];

	plugin_record_read(b, name, &pid, &pgid, &start, boot, sizeof(boot), NULL, cid, sizeof(cid));
	if (plugin_record_alive(pid, start, boot)) {
		log_warn("plugin %s: ending %s %d, started by an earlier run for a plugin "
			 "this configuration no longer starts", name,
			 cid[0] ? "the container whose init is pid" : "process", (int)pid);
		/* a container's init is killed from the host (the engine may not
		 * be open yet); its engine keeps it, exited, until a plugin of
		 * that name starts again (which removes it first) */
		kill(pgid > 0 && !cid[0] ? -pgid : pid, SIGKILL);
	}
	if (plugin_record_del(b, name, &err) < 0)
		log_warn("plugin %s: %s", name, err.msg);
}

char **plugin_strv_dup(char *const *v)
{
	size_t n = 0;
	char **c;

	while (v[n])
		n++;
	c = calloc(n + 1, sizeof(*c));
	if (!c)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!(c[i] = strdup(v[i]))) {
			ctl_strv_free(c);
			return NULL;
		}
	return c;
}
