/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * jw: a JSON writer straight into an sbuf, for all the JSON nodefs writes:
 * every checkpoint record (volumes, operations, containers), the info.json
 * files that show the same fields, the runtimes' records and request bodies
 * (Docker Engine API, LXC marks) and etcd's gateway requests. jansson stays
 * for parsing what a peer sends.
 *
 * Building a jansson tree and dumping it cost 13 us for a volume's record;
 * this writes the same text in about 1 us. The output is what jansson's
 * json_dumpb gives for the same members in the same order: compact
 * (JSON_COMPACT) with indent 0, JSON_INDENT(n) otherwise, strings escaped as
 * jansson escapes them. Bytes that are not UTF-8 (jansson refuses such a
 * string) are written as U+FFFD, so a record is always valid JSON.
 *
 * Errors stick: the first failure of the sbuf (-E2BIG, -ENOMEM) is kept in
 * err and later calls do nothing; jw_end returns it. Knows nothing of
 * nodefs's objects.
 */
#ifndef NODEFS_JW_H
#define NODEFS_JW_H

#include <stdbool.h>
#include <stddef.h>

struct sbuf;

#define JW_DEPTH 8

struct jw {
	struct sbuf *out;
	int indent;
	int depth;
	bool first[JW_DEPTH];	/* no member written yet at this depth */
	bool after_key;
	int err;
};

void jw_init(struct jw *w, struct sbuf *out, int indent);
void jw_obj(struct jw *w);
void jw_obj_end(struct jw *w);
void jw_arr(struct jw *w);
void jw_arr_end(struct jw *w);
void jw_key(struct jw *w, const char *key);
/* A string (null when s is NULL), an integer, a boolean. */
void jw_str(struct jw *w, const char *s);
void jw_int(struct jw *w, long long v);
/* A value already rendered as JSON (len bytes, the caller's to vouch
 * for), written as it is. */
void jw_raw(struct jw *w, const char *json, size_t len);
void jw_bool(struct jw *w, bool v);
/* A finite double as jansson writes a real (-EINVAL sticks otherwise). */
void jw_real(struct jw *w, double v);
/* An array of the strings of a NULL-terminated vector (empty when v is NULL). */
void jw_strv(struct jw *w, char *const *v);
/* len bytes as a string in standard base64 with padding (RFC 4648), as
 * protobuf's JSON mapping writes a bytes field; no allocation of its own. */
void jw_b64(struct jw *w, const void *data, size_t len);
/* Stick err (negative errno) as if the writer had failed, unless an error
 * already stuck: for the caller's own failures while making a value. */
void jw_fail(struct jw *w, int err);
/* 0, or the first error. */
int jw_end(struct jw *w);

static inline void jw_kstr(struct jw *w, const char *k, const char *s)
{
	jw_key(w, k);
	jw_str(w, s);
}

static inline void jw_kint(struct jw *w, const char *k, long long v)
{
	jw_key(w, k);
	jw_int(w, v);
}

static inline void jw_kreal(struct jw *w, const char *k, double v)
{
	jw_key(w, k);
	jw_real(w, v);
}

static inline void jw_kbool(struct jw *w, const char *k, bool v)
{
	jw_key(w, k);
	jw_bool(w, v);
}

static inline void jw_kb64(struct jw *w, const char *k, const void *data, size_t len)
{
	jw_key(w, k);
	jw_b64(w, data, len);
}

static inline void jw_kstrv(struct jw *w, const char *k, char *const *v)
{
	jw_key(w, k);
	jw_strv(w, v);
}

#endif
