/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * fuzz_checkpoint: the checkpoint decoders, through the path a start takes.
 * The input's first byte picks the kind (operations, volumes, containers);
 * the rest is written as that kind's record "fz.json" in a private state
 * dir and the kind's recovery runs over it: store_load, store_decode, the
 * kind's record decoder and, for containers, the check against its engine
 * (never started here: unhealthy, so nothing leaves the process). Then the
 * objects are dropped and the dir emptied for the next input.
 *
 * Aborts when a record that store_decode refuses still makes an object, or
 * when an object's name is not the record's; sanitizers catch the rest.
 * An object that comes back is also written back: its info.json (the
 * record's members: jw for volumes and operations, jansson for containers)
 * becomes the record, is recovered again and must show the same info.json,
 * so what the writers write is what the decoders read.
 */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend-internal.h"
#include "backend.h"
#include "config.h"
#include "containers.h"
#include "kind.h"
#include "log.h"
#include "nerr.h"
#include "operation.h"
#include "sbuf.h"
#include "store.h"
#include "tree.h"
#include "volumes.h"

static struct backend *b;
static char dir[256];

static const char *const kinds[] = { "operations", "volumes", "containers" };

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	return remove(p) < 0 ? 0 : 0;
}

/* The private dir goes when the process ends (replay and libFuzzer both
 * exit through exit()). */
static void cleanup(void)
{
	backend_free(b);
	b = NULL;
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void setup(void)
{
	char text[2048];
	struct config *cfg = NULL;
	struct nerr err = { 0 };

	log_setup(LOG_LVL_ERR, false);
	snprintf(dir, sizeof(dir), "/dev/shm/nodefs-fuzz-ckpt.XXXXXX");
	if (!mkdtemp(dir)) {
		snprintf(dir, sizeof(dir), "/tmp/nodefs-fuzz-ckpt.XXXXXX");
		if (!mkdtemp(dir))
			abort();
	}
	snprintf(text, sizeof(text),
		 "[nodefs]\nstate_dir = %s/state\nallowed_targets = %s/pub\n"
		 "[plugin p]\nendpoint = unix://%s/none.sock\n"
		 "[runtime docker]\nendpoint = unix://%s/none-docker.sock\n"
		 "[runtime lxc]\nlxcpath = %s/lxc\n", dir, dir, dir, dir, dir);
	if (config_parse(text, strlen(text), "fuzz.conf", &cfg, &err) < 0 ||
	    backend_new(cfg, &b, &err) < 0) {
		fprintf(stderr, "fuzz_checkpoint: %s\n", err.msg);
		abort();
	}
	atexit(cleanup);
}

static void empty_dir(const char *kind)
{
	char p[512];
	struct dirent *de;
	DIR *d;

	snprintf(p, sizeof(p), "%s/state/%s", dir, kind);
	d = opendir(p);
	if (!d)
		return;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
}

static void forget(struct bnode *parent)
{
	struct bnode **v;
	size_t n;

	if (bnode_list(parent, &v, &n) < 0)
		abort();
	for (size_t i = 0; i < n; i++)
		bnode_remove(v[i]);
	bnode_list_free(v, n);
}

/* The info.json of parent's only object "fz". */
static char *info_of(struct bnode *parent)
{
	struct bnode *x = bnode_lookup(parent, "fz");
	const struct battr *a;
	struct sbuf out = SBUF_INIT(0);

	if (!x)
		abort();
	a = bnode_attr(x, "info.json", NULL);
	if (!a || a->show(x, &out) < 0) {
		fprintf(stderr, "fuzz_checkpoint: no info.json\n");
		abort();
	}
	bnode_unref(x);
	return sbuf_steal(&out);
}

static void recover(int k, struct nerr *err)
{
	if (k == 0)
		ops_recover(b, err);
	else if (k == 1)
		volumes_kind.recover(b, err);
	else
		containers_kind.recover(b, err);
}

/* info.json -> record -> recovery -> the same info.json. */
static void round_trip(int k, struct bnode *parent)
{
	char *one = info_of(parent), *two, *text, path[512];
	json_t *j = json_loads(one, 0, NULL);
	struct nerr err = { 0 };
	int fd;

	if (!json_is_object(j)) {
		fprintf(stderr, "fuzz_checkpoint: info.json is not a JSON object:\n%s\n", one);
		abort();
	}
	json_object_set_new(j, "version", json_integer(STORE_VERSION));
	text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	forget(parent);
	ops_ended_free(b);
	snprintf(path, sizeof(path), "%s/state/%s/fz.json", dir, kinds[k]);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (!text || fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		abort();
	close(fd);
	free(text);
	recover(k, &err);
	if (bnode_count(parent) != 1) {
		fprintf(stderr, "fuzz_checkpoint: a written-back record was refused:\n%s\n", one);
		abort();
	}
	two = info_of(parent);
	if (strcmp(one, two) != 0) {
		fprintf(stderr, "fuzz_checkpoint: info.json changed on a round trip:\n%s\n%s\n", one, two);
		abort();
	}
	free(one);
	free(two);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nerr err = { 0 };
	struct bnode *parent;
	const char *kind;
	char path[512];
	size_t n = 0;
	int fd, k;

	if (!b)
		setup();
	if (size < 1)
		return 0;
	k = data[0] % 3;
	kind = kinds[k];
	snprintf(path, sizeof(path), "%s/state/%s/fz.json", dir, kind);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, data + 1, size - 1) != (ssize_t)(size - 1))
		abort();
	close(fd);

	switch (k) {
	case 0:
		ops_recover(b, &err);
		parent = operations_dir(b);
		break;
	case 1:
		volumes_kind.recover(b, &err);
		parent = volumes_dir(b);
		break;
	default:
		containers_kind.recover(b, &err);
		parent = containers_dir(b);
		break;
	}
	/* at most one object, named after its record; none when the record
	 * was refused */
	n = bnode_count(parent);
	if (n > 1)
		abort();
	if (n == 1) {
		struct bnode *x = bnode_lookup(parent, "fz");

		if (!x)
			abort();
		bnode_unref(x);
	}
	{
		char why[256];
		json_t *j = store_decode((const char *)data + 1, size - 1, why, sizeof(why));

		if (!j && n)
			abort();
		json_decref(j);
	}
	if (n == 1)
		round_trip(k, parent);
	forget(parent);
	ops_ended_free(b);
	empty_dir(kind);
	return 0;
}
