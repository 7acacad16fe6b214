/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Unit tests of fs/inode.c, the inode table: lookup counts (FORGET drops
 * an entry and its node reference at zero, never before, never the root),
 * a number standing for one file for the table's life (the same file gets
 * it back after a forget, no other ever gets it), the generation every
 * inode carries, a recreated name getting a new inode while the old one is
 * still held, the ext made once however many threads ask, threads
 * looking up and forgetting at once, and -ENOMEM without leaks. Built
 * without FUSE: the table knows nothing of it. No root, no mount.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "failalloc.h"
#include "inode.h"
#include "tree.h"

static const struct battr files[] = {
	{ .name = "ctl", .flags = BATTR_CTL },
	{ .name = "state" },
};
static const struct btype dir_type = { .name = "dir", .attrs = files, .nattrs = 2 };

#define GEN 0x1234abcdull

static unsigned refs(struct bnode *n)
{
	return atomic_load(&n->ref);
}

struct fixture {
	struct bnode *root;
	struct inode_table *t;
};

static struct fixture setup(uint64_t gen)
{
	struct fixture fx = { .root = bnode_new_root(&dir_type, "", NULL) };

	cr_assert(fx.root);
	cr_assert_eq(inode_table_new(fx.root, gen, &fx.t), 0);
	return fx;
}

static struct bnode *add(struct fixture *fx, const char *name)
{
	struct bnode *n = bnode_new(&dir_type, name, NULL);

	cr_assert(n);
	cr_assert_eq(bnode_add(fx->root, n), 0);
	return n;	/* the test's reference; the tree holds another */
}

static void teardown(struct fixture *fx)
{
	unsigned before = refs(fx->root);

	inode_table_free(fx->t);
	cr_assert_eq(refs(fx->root), before - 1, "the table's root reference");
	bnode_remove(fx->root);
	bnode_unref(fx->root);
}

Test(inode, root_is_one_and_never_forgotten)
{
	struct fixture fx = setup(GEN);
	struct fs_inode *i = inode_get(fx.t, INODE_ROOT);

	cr_assert(i);
	cr_assert_eq(i->node, fx.root);
	cr_assert_eq(i->attr, -1);
	cr_assert_eq(inode_generation(fx.t), GEN);
	cr_assert_eq(inode_of_dir(fx.t, fx.root->serial), INODE_ROOT);
	inode_forget(fx.t, INODE_ROOT, 1000);
	cr_assert_eq(inode_get(fx.t, INODE_ROOT), i);
	cr_assert_eq(inode_count(fx.t), 1);
	cr_assert_null(inode_get(fx.t, 0));
	cr_assert_null(inode_get(fx.t, 2));
	teardown(&fx);
}

Test(inode, lookups_counted_forget_drops_at_zero)
{
	struct fixture fx = setup(GEN);
	struct bnode *db = add(&fx, "db");
	struct fs_inode *i, *j;
	uint64_t ino;

	cr_assert_eq(refs(db), 2);
	cr_assert_eq(inode_lookup(fx.t, db, -1, &i), 0);
	ino = i->ino;
	cr_assert_neq(ino, INODE_ROOT);
	cr_assert_eq(refs(db), 3, "a new entry takes one reference");
	for (int k = 0; k < 2; k++) {
		cr_assert_eq(inode_lookup(fx.t, db, -1, &j), 0);
		cr_assert_eq(j, i, "the same (node, attr) is the same inode");
	}
	cr_assert_eq(i->nlookup, 3);
	cr_assert_eq(refs(db), 3, "one reference however many lookups");
	cr_assert_eq(inode_of_dir(fx.t, db->serial), ino);

	inode_forget(fx.t, ino, 2);
	cr_assert_eq(inode_get(fx.t, ino), i);
	cr_assert_eq(i->nlookup, 1);
	inode_forget(fx.t, ino + 100, 1);	/* unknown: nothing */
	cr_assert_eq(inode_count(fx.t), 2);
	inode_forget(fx.t, ino, 1);
	cr_assert_null(inode_get(fx.t, ino));
	cr_assert_eq(inode_of_dir(fx.t, db->serial), 0);
	cr_assert_eq(refs(db), 2, "the entry's reference went with it");
	cr_assert_eq(inode_count(fx.t), 1);

	/* forgetting more than was looked up drops it, no underflow */
	cr_assert_eq(inode_lookup(fx.t, db, -1, &i), 0);
	ino = i->ino;
	inode_forget(fx.t, ino, 5);
	cr_assert_null(inode_get(fx.t, ino));
	inode_forget(fx.t, ino, 1);
	cr_assert_eq(refs(db), 2);

	bnode_unref(db);
	teardown(&fx);
}

/* The notifier pins an entry while it invalidates it: a FORGET meanwhile
 * takes it out of the table at once, and the last unpin frees it. */
Test(inode, pinned_entry_outlives_its_forget)
{
	struct fixture fx = setup(GEN);
	struct bnode *db = add(&fx, "db");
	struct fs_inode *i, *p;
	uint64_t ino;

	cr_assert_eq(inode_lookup(fx.t, db, 1, &i), 0);
	ino = i->ino;
	cr_assert_null(inode_pin(fx.t, db->serial, 0), "not looked up: nothing to pin");
	p = inode_pin(fx.t, db->serial, 1);
	cr_assert_eq(p, i);
	cr_assert(inode_ext(i));
	inode_ext(i)->told = malloc(8);	/* freed with the entry */
	inode_forget(fx.t, ino, 1);
	cr_assert_null(inode_get(fx.t, ino), "forgotten: out of the table");
	cr_assert_eq(inode_of(fx.t, db->serial, 1), 0);
	cr_assert_eq(refs(db), 3, "the entry still holds its node");
	cr_assert_eq(p->ino, ino);
	inode_unpin(fx.t, p);
	cr_assert_eq(refs(db), 2, "the last unpin freed it");

	/* pinned and unpinned while still looked up: nothing goes */
	cr_assert_eq(inode_lookup(fx.t, db, 1, &i), 0);
	p = inode_pin(fx.t, db->serial, 1);
	inode_unpin(fx.t, p);
	cr_assert_eq(inode_get(fx.t, i->ino), i);
	inode_forget(fx.t, i->ino, 1);
	cr_assert_eq(refs(db), 2);
	bnode_unref(db);
	teardown(&fx);
}

Test(inode, files_and_dirs_distinct)
{
	struct fixture fx = setup(GEN);
	struct bnode *db = add(&fx, "db");
	struct fs_inode *d, *ctl, *state;

	cr_assert_eq(inode_lookup(fx.t, db, -1, &d), 0);
	cr_assert_eq(inode_lookup(fx.t, db, 0, &ctl), 0);
	cr_assert_eq(inode_lookup(fx.t, db, 1, &state), 0);
	cr_assert_neq(d->ino, ctl->ino);
	cr_assert_neq(ctl->ino, state->ino);
	cr_assert_neq(d->ino, state->ino);
	cr_assert_eq(ctl->attr, 0);
	cr_assert_eq(state->attr, 1);
	cr_assert_eq(inode_of_dir(fx.t, db->serial), d->ino, "a file is not the directory");
	cr_assert_eq(refs(db), 5);
	inode_forget(fx.t, ctl->ino, 1);
	inode_forget(fx.t, state->ino, 1);
	inode_forget(fx.t, d->ino, 1);
	cr_assert_eq(refs(db), 2);
	bnode_unref(db);
	teardown(&fx);
}

/* A number stands for one (node, attr): the same file gets it back after
 * the kernel forgot it, and no other file, of this node or a newer one,
 * ever has it. */
Test(inode, a_number_is_one_file_for_good)
{
	struct fixture fx = setup(GEN);
	struct bnode *db = add(&fx, "db"), *db2 = add(&fx, "db2");
	uint64_t first[3] = { 0 }, all[6];
	int n = 0;

	for (int k = 0; k < 30; k++) {
		struct fs_inode *i;
		int attr = k % 3 - 1;

		cr_assert_eq(inode_lookup(fx.t, db, attr, &i), 0);
		if (!first[attr + 1])
			first[attr + 1] = i->ino;
		cr_assert_eq(i->ino, first[attr + 1], "the same file, the same number");
		inode_forget(fx.t, i->ino, 1);
	}
	for (int attr = -1; attr < 2; attr++) {
		struct fs_inode *i, *j;

		cr_assert_eq(inode_lookup(fx.t, db, attr, &i), 0);
		cr_assert_eq(inode_lookup(fx.t, db2, attr, &j), 0);
		all[n++] = i->ino;
		all[n++] = j->ino;
	}
	for (int a = 0; a < n; a++) {
		cr_assert_neq(all[a], INODE_ROOT);
		for (int b = a + 1; b < n; b++)
			cr_assert_neq(all[a], all[b], "two files, one number");
		inode_forget(fx.t, all[a], 1);
	}
	cr_assert_eq(inode_count(fx.t), 1);
	bnode_unref(db);
	bnode_unref(db2);
	teardown(&fx);
}

Test(inode, attrs_beyond_the_number_refused)
{
	struct fixture fx = setup(GEN);
	struct fs_inode *i = NULL;

	cr_assert_eq(inode_lookup(fx.t, fx.root, INODE_MAX_ATTRS, &i), -EOVERFLOW);
	cr_assert_null(i);
	cr_assert_eq(inode_count(fx.t), 1);
	cr_assert_eq(inode_lookup(fx.t, fx.root, INODE_MAX_ATTRS - 1, &i), 0);
	cr_assert_neq(i->ino, INODE_ROOT);
	inode_forget(fx.t, i->ino, 1);
	teardown(&fx);
}

static struct fs_inode *ext_target;
static struct fs_inode_ext *ext_got[8];

static void *ask_ext(void *arg)
{
	ext_got[(uintptr_t)arg] = inode_ext(ext_target);
	return NULL;
}

/* Threads asking for an entry's ext at once get one and the same. */
Test(inode, ext_made_once)
{
	struct fixture fx = setup(GEN);
	struct bnode *db = add(&fx, "db");
	pthread_t th[8];

	cr_assert_eq(inode_lookup(fx.t, db, 1, &ext_target), 0);
	cr_assert_null(atomic_load(&ext_target->ext), "a lookup makes no ext");
	for (uintptr_t k = 0; k < 8; k++)
		cr_assert_eq(pthread_create(&th[k], NULL, ask_ext, (void *)k), 0);
	for (int k = 0; k < 8; k++)
		pthread_join(th[k], NULL);
	for (int k = 0; k < 8; k++)
		cr_assert_eq(ext_got[k], atomic_load(&ext_target->ext));
	cr_assert(ext_got[0]);
	inode_forget(fx.t, ext_target->ino, 1);
	bnode_unref(db);
	teardown(&fx);
}

Test(inode, recreated_name_is_a_new_inode)
{
	struct fixture fx = setup(GEN);
	struct bnode *old = add(&fx, "db"), *new;
	struct fs_inode *i, *j;
	uint64_t old_ino;

	cr_assert_eq(inode_lookup(fx.t, old, -1, &i), 0);
	old_ino = i->ino;
	/* rmdir volumes/db; mkdir volumes/db: the kernel still holds the old
	 * inode (a shell's cwd, an open file) */
	bnode_remove(old);
	new = add(&fx, "db");
	cr_assert_neq(new->serial, old->serial);
	cr_assert_eq(inode_lookup(fx.t, new, -1, &j), 0);
	cr_assert_neq(j->ino, old_ino);
	cr_assert_eq(j->node, new);
	cr_assert_eq(inode_get(fx.t, old_ino), i, "the old inode lives while held");
	cr_assert_eq(i->node, old);
	cr_assert(atomic_load(&i->node->dead));
	cr_assert_eq(inode_of_dir(fx.t, new->serial), j->ino);
	cr_assert_eq(inode_of_dir(fx.t, old->serial), old_ino);
	inode_forget(fx.t, old_ino, 1);
	cr_assert_null(inode_get(fx.t, old_ino));
	cr_assert_eq(inode_get(fx.t, j->ino), j);
	cr_assert_eq(refs(old), 1, "only the test's reference is left");
	inode_forget(fx.t, j->ino, 1);
	bnode_unref(old);
	bnode_unref(new);
	teardown(&fx);
}

Test(inode, generation_on_every_inode)
{
	struct fixture a = setup(GEN), b = setup(GEN + 1);
	struct bnode *na = add(&a, "db"), *nb = add(&b, "db");
	struct fs_inode *ia, *ib;

	cr_assert_eq(inode_lookup(a.t, na, -1, &ia), 0);
	cr_assert_eq(inode_lookup(b.t, nb, -1, &ib), 0);
	cr_assert_eq(inode_generation(a.t), GEN);
	cr_assert_eq(inode_generation(b.t), GEN + 1);
	/* two mounts may hand out the same number: the generation tells
	 * them apart */
	cr_assert_eq(ia->ino, ib->ino);
	inode_forget(a.t, ia->ino, 1);
	inode_forget(b.t, ib->ino, 1);
	bnode_unref(na);
	bnode_unref(nb);
	teardown(&a);
	teardown(&b);
}

/* ---- threads ---- */

#define NTHREADS 8
#define NNODES 16
#define ROUNDS 20000
#define MAXINO (NTHREADS * ROUNDS + 2)

static struct bnode *nodes[NNODES];
static struct inode_table *shared;
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static int seen_key[MAXINO];	/* ino -> node index * 3 + attr + 2 (0: unseen) */

static void *hammer(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	uint64_t held[4] = { 0 };

	for (int k = 0; k < ROUNDS; k++) {
		int n = (int)(rand_r(&seed) % NNODES), attr = (int)(rand_r(&seed) % 3) - 1;
		int slot = k % 4, key = n * 3 + attr + 2;
		struct fs_inode *i;

		cr_assert_eq(inode_lookup(shared, nodes[n], attr, &i), 0);
		cr_assert_eq(i->node, nodes[n]);
		cr_assert_eq(i->attr, attr);
		cr_assert_lt(i->ino, MAXINO);
		pthread_mutex_lock(&seen_lock);
		/* a number, once given, stands for one (node, attr) for good */
		if (!seen_key[i->ino])
			seen_key[i->ino] = key;
		cr_assert_eq(seen_key[i->ino], key, "inode %llu reused",
			     (unsigned long long)i->ino);
		pthread_mutex_unlock(&seen_lock);
		/* keep a few lookups held for a while, as the kernel does */
		if (held[slot])
			inode_forget(shared, held[slot], 1);
		held[slot] = i->ino;
	}
	for (int s = 0; s < 4; s++)
		if (held[s])
			inode_forget(shared, held[s], 1);
	return NULL;
}

Test(inode, threads_share_the_table)
{
	struct fixture fx = setup(GEN);
	pthread_t th[NTHREADS];

	for (int k = 0; k < NNODES; k++) {
		char name[16];

		snprintf(name, sizeof(name), "n%d", k);
		nodes[k] = add(&fx, name);
	}
	shared = fx.t;
	for (int k = 0; k < NTHREADS; k++)
		cr_assert_eq(pthread_create(&th[k], NULL, hammer, (void *)(uintptr_t)(k + 1)), 0);
	for (int k = 0; k < NTHREADS; k++)
		pthread_join(th[k], NULL);
	/* every lookup was forgotten: only the root is left, and every node
	 * has its references back */
	cr_assert_eq(inode_count(fx.t), 1);
	for (int k = 0; k < NNODES; k++) {
		cr_assert_eq(refs(nodes[k]), 2, "node %d", k);
		cr_assert_eq(inode_of_dir(fx.t, nodes[k]->serial), 0);
		bnode_unref(nodes[k]);
	}
	teardown(&fx);
}

/* ---- out of memory ---- */

Test(inode, enomem_leaves_nothing)
{
	struct fixture fx = setup(GEN);
	struct bnode *v[40];
	uint64_t inos[40];
	unsigned long failed = 0, n;
	bool fired;

	/* each new entry, with every allocation of it failed in turn (the
	 * entry, and the maps' growth now and then) */
	for (int k = 0; k < 40; k++) {
		char name[16];

		snprintf(name, sizeof(name), "v%d", k);
		v[k] = add(&fx, name);
		for (n = 1, fired = true; fired; n++) {
			struct fs_inode *i = NULL;
			size_t count = inode_count(fx.t);
			int r;

			failalloc_arm(n);
			r = inode_lookup(fx.t, v[k], -1, &i);
			fired = failalloc_fired();
			failalloc_hold();
			if (fired) {
				failed++;
				cr_assert_eq(r, -ENOMEM, "entry %d, allocation %lu", k, n);
				cr_assert_eq(failalloc_live(), 0, "entry %d, allocation %lu: leaked", k, n);
				cr_assert_eq(refs(v[k]), 2, "entry %d, allocation %lu: a reference taken",
					     k, n);
				cr_assert_eq(inode_count(fx.t), count);
				cr_assert_eq(inode_of_dir(fx.t, v[k]->serial), 0);
			} else {
				cr_assert_eq(r, 0);
				inos[k] = i->ino;
			}
			failalloc_disarm();
		}
	}
	cr_assert_gt(failed, 40, "the maps never grew under a failing allocation");
	for (int k = 0; k < 40; k++) {
		cr_assert_eq(inode_get(fx.t, inos[k])->node, v[k]);
		inode_forget(fx.t, inos[k], 1);
		bnode_unref(v[k]);
	}

	/* and the table itself */
	for (n = 1, fired = true; fired; n++) {
		struct inode_table *t = NULL;
		int r;

		failalloc_arm(n);
		r = inode_table_new(fx.root, GEN, &t);
		fired = failalloc_fired();
		failalloc_hold();
		if (fired)
			cr_assert_eq(r, -ENOMEM);
		else
			inode_table_free(t);
		cr_assert_eq(failalloc_live(), 0, "allocation %lu", n);
		failalloc_disarm();
		cr_assert_eq(refs(fx.root), 2 + 40, "allocation %lu", n);
	}
	teardown(&fx);
}
