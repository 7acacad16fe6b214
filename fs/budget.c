/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * budget: per-uid accounting of the memory open files hold (budget.h). A
 * list of the uids charged now or ever refused (their refusal counts are
 * metrics, so those entries stay; one charged to 0 and never refused is
 * dropped), under one lock taken for a few instructions per open, read and
 * release.
 *
 * Must not know: FUSE, CSI, Docker, LXC, the config.
 */
#include <errno.h>
#include <stdlib.h>

#include "budget.h"
#include "sbuf.h"

struct budget_uid {
	uid_t uid;
	uint64_t bytes;
	uint64_t refused;
	struct budget_uid *next;
};

void budget_init(struct budget *b, uint64_t limit)
{
	pthread_mutex_init(&b->lock, NULL);
	b->limit = limit;
	b->uids = NULL;
}

void budget_destroy(struct budget *b)
{
	while (b->uids) {
		struct budget_uid *u = b->uids;

		b->uids = u->next;
		free(u);
	}
	pthread_mutex_destroy(&b->lock);
}

static struct budget_uid *find_locked(struct budget *b, uid_t uid, struct budget_uid ***pp)
{
	struct budget_uid **p = &b->uids;

	for (; *p; p = &(*p)->next)
		if ((*p)->uid == uid)
			break;
	if (pp)
		*pp = p;
	return *p;
}

int budget_take(struct budget *b, uid_t uid, size_t want)
{
	struct budget_uid *u;
	int r = 0;

	if (uid == 0)
		return 0;
	pthread_mutex_lock(&b->lock);
	u = find_locked(b, uid, NULL);
	if (!u) {
		u = calloc(1, sizeof(*u));
		if (!u) {
			pthread_mutex_unlock(&b->lock);
			return -ENOMEM;
		}
		u->uid = uid;
		u->next = b->uids;
		b->uids = u;
	}
	if (b->limit && (u->bytes + want > b->limit || u->bytes + want < u->bytes)) {
		u->refused++;
		r = -EMFILE;
	} else {
		u->bytes += want;
	}
	pthread_mutex_unlock(&b->lock);
	return r;
}

void budget_adjust(struct budget *b, uid_t uid, size_t old, size_t now)
{
	struct budget_uid *u, **p;

	if (uid == 0 || old == now)
		return;
	pthread_mutex_lock(&b->lock);
	u = find_locked(b, uid, &p);
	if (u) {
		u->bytes -= old < u->bytes ? old : u->bytes;
		u->bytes += now;
		if (!u->bytes && !u->refused) {
			*p = u->next;
			free(u);
		}
	}
	pthread_mutex_unlock(&b->lock);
}

int budget_render(struct budget *b, struct sbuf *out)
{
	int r;

	r = sbuf_printf(out, "# HELP nodefs_reader_memory_bytes Memory held by the open files of a uid (reader_memory bounds it).\n"
			     "# TYPE nodefs_reader_memory_bytes gauge\n");
	pthread_mutex_lock(&b->lock);
	for (struct budget_uid *u = b->uids; r >= 0 && u; u = u->next)
		r = sbuf_printf(out, "nodefs_reader_memory_bytes{uid=\"%u\"} %llu\n", (unsigned)u->uid,
				(unsigned long long)u->bytes);
	if (r >= 0)
		r = sbuf_printf(out, "# HELP nodefs_reader_limit_refused_total Opens refused (EMFILE) because the uid's open files held reader_memory.\n"
				     "# TYPE nodefs_reader_limit_refused_total counter\n");
	for (struct budget_uid *u = b->uids; r >= 0 && u; u = u->next)
		r = sbuf_printf(out, "nodefs_reader_limit_refused_total{uid=\"%u\"} %llu\n",
				(unsigned)u->uid, (unsigned long long)u->refused);
	pthread_mutex_unlock(&b->lock);
	return r;
}
