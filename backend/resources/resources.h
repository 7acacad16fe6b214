/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * resources: what the registry (backend/registry.c) takes of resources/:
 * its kind (the gauges) and the function it links into core/links.h.
 * Nothing else includes this header.
 * Must not know: containers, plugins, volumes, cluster.
 */
#ifndef NODEFS_RESOURCES_H
#define NODEFS_RESOURCES_H

struct backend;
struct kind_ops;
struct sbuf;

/* Its kind: no directory, no state; its gauges (render_metrics). */
extern const struct kind_ops resources_kind;

/* How resources_show renders (links.h's resources_show). */
enum { RESOURCES_TEXT = 0, RESOURCES_JSON = 1, RESOURCES_JSON_COMPACT = 2 };

/* The node's resources as the `resources` file (RESOURCES_TEXT), as
 * resources.json (RESOURCES_JSON, indented, a newline after) or compact
 * (RESOURCES_JSON_COMPACT: cluster/'s record) appended to out. Any thread;
 * reads a few files of /proc and /sys. 0, or -E2BIG/-ENOMEM from out. */
int resources_show(struct backend *b, struct sbuf *out, int how);
/* The nodefs_node_* gauges of metrics/nodefs.prom. */
int resources_render_metrics(struct backend *b, struct sbuf *out);

#endif
