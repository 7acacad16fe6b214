/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * instance: this nodefs instance's identity, an id made once and kept in
 * STATE_DIR/instance-id, and the prefix of the engine-side names it makes.
 * Two instances sharing one engine (one dockerd, one lxcpath) tell their
 * containers apart by it: it goes on every container as a label (docker)
 * or in the owner mark (lxc), and listings keep only this instance's.
 * Knows nothing of containers, engines or files.
 */
#ifndef NODEFS_INSTANCE_H
#define NODEFS_INSTANCE_H

#include <stddef.h>

struct nerr;

#define INSTANCE_ID_LEN 32		/* hex digits */
#define INSTANCE_PREFIX_MAX 32		/* name_prefix: bytes */

/* Read STATE_DIR/instance-id, or make a new random id and write it there
 * atomically (temp file, fsync, rename, fsync of the directory) when there
 * is none. ret gets INSTANCE_ID_LEN hex digits and a NUL. -errno with err:
 * a file that is there but not an id (-EINVAL), an I/O error. Called once,
 * at backend_new. */
int instance_load(const char *state_dir, char ret[INSTANCE_ID_LEN + 1], struct nerr *err);

/* The default name prefix for an id: "nodefs-" and its first 8 digits and
 * "-". */
void instance_default_prefix(const char *id, char *buf, size_t size);

#endif
