/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * auth: the secrets nodefs-csi-local requires (--secrets FILE). The file
 * (key=value lines, root's and no one else's: common/secrets.c reads and
 * checks it) is read once at start; every request whose message has a
 * `secrets` field must then carry each of its keys with the same value,
 * or the call ends UNAUTHENTICATED (the CSI spec's code for "the invoked
 * RPC does not carry secrets that are valid for authentication") before
 * any other check. A message names the key that is missing or wrong,
 * never a value; the values received are wiped before the request is
 * freed.
 *
 * It finds the field through the message's descriptor, so it needs no
 * list of the RPCs that carry secrets. Must not know: records, backings.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "grpc.h"
#include "nerr.h"
#include "plugin.h"
#include "secrets.h"

int auth_load(struct plugin *p, const char *path, char *err, size_t errsz)
{
	struct nerr e = { 0 };
	char **v = NULL;

	if (secrets_read(path, &v, &e) < 0) {
		snprintf(err, errsz, "--secrets: %s", e.msg);
		return -e.code;
	}
	if (!v[0]) {
		secrets_free(v);
		snprintf(err, errsz, "--secrets: %s holds no key=value line", path);
		return -EINVAL;
	}
	for (size_t i = 0; v[i]; i++) {
		size_t klen = strcspn(v[i], "=");

		for (size_t j = 0; j < klen; j++) {
			char c = v[i][j];

			if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			      c == '.' || c == '_' || c == '-')) {
				snprintf(err, errsz, "--secrets: %s: key %.*s: a key is "
					 "[A-Za-z0-9._-] (the CSI spec's)", path, (int)klen, v[i]);
				secrets_free(v);
				return -EINVAL;
			}
		}
	}
	p->secrets = v;
	return 0;
}

/* The map entries of req's secrets field: *ret_n of them, or 0 when the
 * message has no such field (returns false). */
static bool secrets_field(const ProtobufCMessage *req, ProtobufCMessage ***ret_e, size_t *ret_n)
{
	const ProtobufCFieldDescriptor *f =
		protobuf_c_message_descriptor_get_field_by_name(req->descriptor, "secrets");

	if (!f || f->label != PROTOBUF_C_LABEL_REPEATED || f->type != PROTOBUF_C_TYPE_MESSAGE)
		return false;
	*ret_n = *(const size_t *)((const char *)req + f->quantifier_offset);
	*ret_e = *(ProtobufCMessage ***)((const char *)req + f->offset);
	return true;
}

/* An entry's key or value string (a map entry: fields 1 and 2). */
static char **entry_str(ProtobufCMessage *e, unsigned id)
{
	const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(e->descriptor, id);

	if (!f || f->type != PROTOBUF_C_TYPE_STRING)
		return NULL;
	return (char **)((char *)e + f->offset);
}

/* Equal strings, in a time that depends on the lengths only. */
static bool same(const char *a, size_t alen, const char *b, size_t blen)
{
	unsigned char d = alen != blen;

	for (size_t i = 0; i < alen && i < blen; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

int auth_check(const struct plugin *p, const ProtobufCMessage *req, struct rstat *st)
{
	ProtobufCMessage **e;
	size_t n;

	if (!p->secrets || !secrets_field(req, &e, &n))
		return GRPC_OK;
	for (size_t i = 0; p->secrets[i]; i++) {
		const char *want = p->secrets[i], *eq = strchr(want, '=');
		size_t klen = (size_t)(eq - want);
		bool found = false, ok = false;

		for (size_t j = 0; j < n && !found; j++) {
			char **k = entry_str(e[j], 1), **v = entry_str(e[j], 2);

			if (!k || !v || !*k || strlen(*k) != klen || memcmp(*k, want, klen) != 0)
				continue;
			found = true;
			ok = *v && same(*v, strlen(*v), eq + 1, strlen(eq + 1));
		}
		if (!found)
			return rfail(st, GRPC_UNAUTHENTICATED, "secret '%.*s' is required and missing",
				     (int)klen, want);
		if (!ok)
			return rfail(st, GRPC_UNAUTHENTICATED, "secret '%.*s' does not match", (int)klen,
				     want);
	}
	return GRPC_OK;
}

void auth_wipe(ProtobufCMessage *req)
{
	ProtobufCMessage **e;
	size_t n;

	if (!secrets_field(req, &e, &n))
		return;
	for (size_t j = 0; j < n; j++) {
		char **v = entry_str(e[j], 2);

		if (v && *v)
			explicit_bzero(*v, strlen(*v));
	}
}
