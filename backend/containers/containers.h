/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * containers: what the registry (backend/registry.c, and its reload) takes
 * of containers/: the kind's table, whether a runtime has containers, and
 * what containers offer other rooms through links.h.
 * Must not know: volumes (a container's volume= mount comes through links.h).
 */
#ifndef NODEFS_CONTAINERS_H
#define NODEFS_CONTAINERS_H

#include "kind.h"

#include <stdbool.h>
#include <stddef.h>

struct backend;
struct bnode;
struct container;
struct engine;
struct kind_ops;

extern const struct kind_ops containers_kind;	/* container-kind.c */
/* containers/: the kind's directory, which the hub keeps (kind_dir_named). */
static inline struct bnode *containers_dir(struct backend *b)
{
	return kind_dir_named(b, "containers");
}

/* Whether any container of b's runs on e (container-sync.c). */
bool containers_on(struct backend *b, struct engine *e);

/* The links (links.h) containers offer. */
/* How many containers (any state, until destroyed) mount volume vol with
 * volume=, their names comma-separated in buf (container.c). */
size_t containers_using_volume(struct backend *b, const char *vol, char *buf, size_t len);
/* fn once per running or paused container: its runtime's name, its limits
 * (0: none) (container.c). */
void containers_limits(struct backend *b,
		       void (*fn)(void *ctx, const char *runtime, double cpus, uint64_t memory),
		       void *ctx);
bool container_creating_now(struct backend *b, struct engine *e, const char *name);
struct container *container_find_by_id(struct backend *b, struct engine *e, const char *id,
				       struct bnode **ret_node);

#endif
