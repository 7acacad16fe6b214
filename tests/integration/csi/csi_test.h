/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * csi_test: the fixture and helpers the CSI client's tests share (defined in
 * csi_test.c, which also holds the criterion suite `csi` and main). Every
 * test of suite csi runs with its own temporary directory dir and a running
 * client loop; it starts the test plugin and the client itself
 * (plugin_start, client_start), and the fixture stops both and removes what
 * they left. Knows no test.
 */
#ifndef NODEFS_CSI_TEST_H
#define NODEFS_CSI_TEST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../test_time.h"
#include "csi.h"
#include "loop.h"

/* The test's directory; the plugin's socket, its --base (where it keeps
 * volumes and state) and the endpoint the client dials. */
extern char dir[], sock[], base[], endpoint[];
/* The plugin's pid (-1 when none runs), the client's loop and the client
 * (NULL until client_start). */
extern pid_t plugin_pid;
extern struct loop *loop;
extern struct csi_plugin *plugin;

/* Start the plugin with extra flags (NULL-terminated); wait for its socket. */
void plugin_start(const char *const *flags);
/* Send sig and reap the plugin (SIGKILL after 2 s). */
void plugin_kill(int sig);
/* The client "hostpath" on endpoint, with its retry policy and timeout. */
void client_start(uint64_t backoff_ms, unsigned attempts, uint64_t timeout_ms);

/* Is path a mount point (this process's mountinfo)? */
bool is_mountpoint(const char *path);
/* A SINGLE_NODE_WRITER mount capability built in the caller's structs. */
Csi__V1__VolumeCapability *mount_cap(Csi__V1__VolumeCapability *cap,
				     Csi__V1__VolumeCapability__MountVolume *mnt,
				     Csi__V1__VolumeCapability__AccessMode *mode);
/* NodeGetInfo through plugin; *ret_node (when asked) the node id, malloc'd. */
int node_get_info(struct csi_result *res, struct nerr *err, char **ret_node);
/* Wait until the client's health is want (ms scaled); else fail the test. */
void wait_health(enum csi_health want, int ms);

/* A NodeGetInfo with max_attempts, made on a thread of its own
 * (bg_node_get_info is its thread function). */
struct bg_call {
	int r;
	struct csi_result res;
	struct nerr err;
	unsigned max_attempts;
};
void *bg_node_get_info(void *arg);

#endif
