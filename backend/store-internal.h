/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* store-internal: what store.c and store-journal.c share (see store.h). */
#ifndef NODEFS_STORE_INTERNAL_H
#define NODEFS_STORE_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

#define STORE_JHDR 24
/* A record is at most STORE_RECORD_MAX bytes; its entry adds the names. */
#define STORE_RECORD_MAX (4u << 20)
#define STORE_JENTRY_MAX (STORE_RECORD_MAX + 600u)

uint32_t store_crc32c(const void *p, size_t n);
/* Write seq into an encoded entry's header and seal the header's CRC. */
void store_jentry_seal(unsigned char *hdr, unsigned long long seq);

#endif
