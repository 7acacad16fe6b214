/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * work: a small pool of worker threads for blocking calls (CSI calls made
 * synchronously, libcurl easy calls, liblxc). FUSE threads and the event
 * loop hand work here and never block themselves.
 */
#ifndef NODEFS_WORK_H
#define NODEFS_WORK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct work_pool;

typedef void (*work_fn)(void *arg);

/* Threads start lazily up to max. NULL on OOM. */
struct work_pool *work_pool_new(size_t max_threads);
/* Queue fn(arg). -ENOMEM, -ESHUTDOWN after work_pool_free began. */
int work_submit(struct work_pool *p, work_fn fn, void *arg);
/* Stop taking work (work_submit returns -ESHUTDOWN from now on) and wait
 * up to timeout_ms for the items queued and running to finish. Returns how
 * many threads are still busy then (0: work_pool_free will not wait). The
 * owner's thread, before work_pool_free. */
size_t work_pool_stop(struct work_pool *p, unsigned timeout_ms);
/* Whether the pool makes progress: nothing waits in the queue, or a
 * worker took an item since the last look (*seen, updated; start at 0).
 * A pool whose queue stands still for a whole look is wedged. Any thread. */
bool work_pool_moving(struct work_pool *p, uint64_t *seen);
/* Finish queued work and join the threads; the pool stays, answering
 * work_submit -ESHUTDOWN, for threads that are not its own (an engine's
 * event stream) and may still submit until their owner stops them.
 * Once; NULL-safe. The owner's thread. */
void work_pool_join(struct work_pool *p);
/* work_pool_join if not done, then free. NULL-safe. */
void work_pool_free(struct work_pool *p);

#endif
