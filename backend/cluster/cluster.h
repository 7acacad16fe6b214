/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * cluster: what the registry (backend/registry.c) takes of cluster/: the
 * kind's table. Nothing else includes this header.
 * Must not know: volumes, containers, plugins.
 */
#ifndef NODEFS_CLUSTER_H
#define NODEFS_CLUSTER_H

struct kind_ops;

extern const struct kind_ops cluster_kind;	/* cluster.c */

#endif
