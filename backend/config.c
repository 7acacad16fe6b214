/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * config: reading the INI configuration; see config.h.
 *
 * Two passes: the text is first read into sections of key/value lines
 * (syntax, duplicates, line numbers), then each known section is turned into
 * typed fields and the cross-references are checked (profiles name defined
 * plugins, one default plugin). Knows nothing of fs/, CSI or runtimes.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctl.h"
#include "log.h"
#include "macro.h"
#include "nerr.h"
#include "units.h"
#include "valid.h"

const char *const config_access_modes[] = {
	"single-node-writer",
	"single-node-reader-only",
	"multi-node-reader-only",
	"multi-node-single-writer",
	"multi-node-multi-writer",
	"single-node-single-writer",
	"single-node-multi-writer",
	NULL,
};

struct parser {
	const char *file;
	struct config *c;
	struct nerr *err;
};

/* Every message is "FILE:LINE: reason". */
__attribute__((format(printf, 4, 5)))
static int perr(struct parser *p, int line, int code, const char *fmt, ...)
{
	char reason[NERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	return nerr_set(p->err, code, "%s:%d: %s", p->file, line, reason);
}

static int oom(struct parser *p)
{
	return nerr_set(p->err, ENOMEM, "%s: out of memory", p->file);
}

/* Add context from a lower layer's message: "FILE:LINE: key: message". */
static int perr_from(struct parser *p, int line, const char *key, const struct nerr *e)
{
	if (e->code == ENOMEM)
		return oom(p);
	return perr(p, line, EINVAL, "%s: %s", key, e->msg);
}

static char *mem_dup(const char *s, size_t n)
{
	char *d = malloc(n + 1);

	if (!d)
		return NULL;
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

static char *str_dup(const char *s)
{
	return mem_dup(s, strlen(s));
}

static void strv_free(char **v)
{
	ctl_strv_free(v);
}

static char **strv_new_empty(void)
{
	return calloc(1, sizeof(char *));
}

static void section_free(struct config_section *s)
{
	free(s->type);
	free(s->name);
	for (size_t i = 0; i < s->nkv; i++) {
		free(s->kv[i].key);
		free(s->kv[i].val);
	}
	free(s->kv);
}

static void profile_free(struct config_profile *pr)
{
	free(pr->name);
	free(pr->plugin);
	free(pr->access_mode);
	free(pr->fs_type);
	strv_free(pr->mount_flags);
	strv_free(pr->params);
}

void config_free(struct config *c)
{
	if (!c)
		return;
	free(c->path);
	free(c->state_dir);
	strv_free(c->allowed_targets);
	free(c->ctl_group);
	free(c->name_prefix);
	free(c->read_group);
	strv_free(c->redact);
	strv_free(c->redact_keys);
	for (size_t i = 0; i < c->nplugins; i++) {
		free(c->plugins[i].name);
		free(c->plugins[i].endpoint);
		strv_free(c->plugins[i].command);
	}
	free(c->plugins);
	for (size_t i = 0; i < c->nprofiles; i++)
		profile_free(&c->profiles[i]);
	free(c->profiles);
	for (size_t i = 0; i < c->nsections; i++)
		section_free(&c->sections[i]);
	free(c->sections);
	free(c);
}

/* c->redact = v (taken; NULL for none) and the keys it implies. */
static int set_redact(struct config *c, char **v)
{
	size_t n = 0;
	char **k;

	while (v && v[n])
		n++;
	k = calloc(n + 2, sizeof(*k));
	if (!k)
		goto fail;
	k[0] = str_dup("env.");
	if (!k[0])
		goto fail;
	for (size_t i = 0; i < n; i++) {
		k[i + 1] = malloc(strlen(v[i]) + 7);
		if (!k[i + 1])
			goto fail;
		strcpy(k[i + 1], "param.");
		strcat(k[i + 1], v[i]);
	}
	strv_free(c->redact);
	strv_free(c->redact_keys);
	c->redact = v;
	c->redact_keys = k;
	return 0;
fail:
	strv_free(k);
	strv_free(v);
	return -ENOMEM;
}

int config_defaults(struct config **ret)
{
	struct config *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->csi_timeout_ms = 120 * 1000;
	c->retry_backoff_ms = 1000;
	c->retry_max_ms = 2 * 60 * 1000;
	c->operations_keep = 1000;
	c->reconcile_interval_ms = 60 * 1000;
	c->uncertain_timeout_ms = 5 * 60 * 1000;
	c->log_level = -1;
	c->state_dir = str_dup(CONFIG_DEFAULT_STATE_DIR);
	c->allowed_targets = calloc(3, sizeof(char *));
	if (!c->state_dir || !c->allowed_targets)
		goto fail;
	c->allowed_targets[0] = str_dup("/mnt");
	if (!c->allowed_targets[0])
		goto fail;
	c->allowed_targets[1] = str_dup("/srv");
	if (!c->allowed_targets[1])
		goto fail;
	c->nallowed_targets = 2;
	if (set_redact(c, NULL) < 0)
		goto fail;
	*ret = c;
	return 0;
fail:
	config_free(c);
	return -ENOMEM;
}

/* ---- pass 1: lines into sections ---- */

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static bool key_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

/* Bytes allowed in a line: no NUL, no control character but tab, UTF-8. */
static int check_line_bytes(struct parser *p, int lineno, const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t i = 0; i < len;) {
		size_t n;

		if (u[i] == 0)
			return perr(p, lineno, EINVAL, "NUL byte at column %zu", i + 1);
		if ((u[i] < 0x20 && u[i] != '\t') || u[i] == 0x7f)
			return perr(p, lineno, EINVAL, "control character 0x%02x at column %zu",
				    u[i], i + 1);
		if (u[i] < 0x80) {
			i++;
			continue;
		}
		n = valid_utf8_seq(u + i, len - i);
		if (n == 0)
			return perr(p, lineno, EINVAL, "invalid UTF-8 at column %zu", i + 1);
		i += n;
	}
	return 0;
}

/* Length of s[0..len) once a comment is cut off: '#' or ';' at the start or
 * after a blank, outside quotes. */
static size_t strip_comment(const char *s, size_t len)
{
	char q = 0;

	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (q) {
			if (q == '"' && c == '\\' && i + 1 < len)
				i++;
			else if (c == q)
				q = 0;
		} else if (c == '\'' || c == '"')
			q = c;
		else if (c == '\\' && i + 1 < len)
			i++;
		else if ((c == '#' || c == ';') && (i == 0 || is_blank(s[i - 1])))
			return i;
	}
	return len;
}

static void trim(const char **s, size_t *len)
{
	while (*len > 0 && is_blank(**s)) {
		(*s)++;
		(*len)--;
	}
	while (*len > 0 && is_blank((*s)[*len - 1]))
		(*len)--;
}

static const char *const section_types[] = { "nodefs", "plugin", "profile", "runtime",
						"cluster" };

static struct config_section *section_find_mut(struct config *c, const char *type,
					       const char *name)
{
	for (size_t i = 0; i < c->nsections; i++) {
		struct config_section *s = &c->sections[i];

		if (strcmp(s->type, type) != 0)
			continue;
		if ((!name && !s->name) || (name && s->name && strcmp(name, s->name) == 0))
			return s;
	}
	return NULL;
}

static int parse_header(struct parser *p, int lineno, const char *s, size_t len)
{
	struct config *c = p->c;
	struct config_section *sec, *ns;
	const char *w[3] = { 0 };
	size_t wl[3] = { 0 }, nw = 0, i = 1;
	char esc[80];
	_cleanup_free_ char *type = NULL;
	_cleanup_free_ char *name = NULL;
	bool known = false;

	if (len < 2 || s[len - 1] != ']')
		return perr(p, lineno, EINVAL, "expected ']' at the end of the section header");
	len--;
	while (i < len) {
		while (i < len && is_blank(s[i]))
			i++;
		if (i >= len)
			break;
		if (nw == 3)
			break;
		w[nw] = s + i;
		while (i < len && !is_blank(s[i]))
			i++;
		wl[nw] = (size_t)(s + i - w[nw]);
		nw++;
	}
	if (nw == 0)
		return perr(p, lineno, EINVAL, "empty section header");
	if (nw > 2)
		return perr(p, lineno, EINVAL, "section header has too many words (expected [TYPE NAME])");
	type = mem_dup(w[0], wl[0]);
	if (!type)
		return oom(p);
	for (size_t k = 0; k < ARRAY_SIZE(section_types); k++)
		if (strcmp(type, section_types[k]) == 0)
			known = true;
	if (!known)
		return perr(p, lineno, EINVAL,
			    "unknown section type '%s' (expected nodefs, plugin, profile, runtime or cluster)",
			    valid_escape(type, wl[0], 40, esc, sizeof(esc)));
	if (nw == 2) {
		name = mem_dup(w[1], wl[1]);
		if (!name)
			return oom(p);
	}
	if (strcmp(type, "nodefs") == 0 || strcmp(type, "cluster") == 0) {
		if (name)
			return perr(p, lineno, EINVAL, "[%s] takes no name", type);
	} else {
		struct nerr e = { 0 };

		if (!name)
			return perr(p, lineno, EINVAL, "[%s] needs a name: [%s NAME]", type, type);
		if (valid_name(name, &e) < 0)
			return perr(p, lineno, EINVAL, "[%s]: %s", type, e.msg);
		if (strcmp(type, "runtime") == 0 && strcmp(name, "docker") != 0 &&
		    strcmp(name, "lxc") != 0)
			return perr(p, lineno, EINVAL, "unknown runtime '%s' (expected docker or lxc)",
				    name);
	}
	sec = section_find_mut(c, type, name);
	if (sec)
		return perr(p, lineno, EINVAL, "duplicate section [%s%s%s] (first at line %d)",
			    type, name ? " " : "", name ? name : "", sec->line);
	ns = realloc(c->sections, (c->nsections + 1) * sizeof(*ns));
	if (!ns)
		return oom(p);
	c->sections = ns;
	c->sections[c->nsections++] = (struct config_section){
		.type = TAKE_PTR(type), .name = TAKE_PTR(name), .line = lineno,
	};
	return 0;
}

static int parse_kv(struct parser *p, int lineno, const char *s, size_t len)
{
	struct config *c = p->c;
	struct config_section *sec;
	struct config_kv *nkv;
	const char *eq = memchr(s, '=', len), *k, *v;
	size_t kl, vl;
	char esc[80];
	_cleanup_free_ char *key = NULL;
	_cleanup_free_ char *val = NULL;

	if (!eq)
		return perr(p, lineno, EINVAL, "expected 'key = value', '[section]' or a comment");
	k = s;
	kl = (size_t)(eq - s);
	trim(&k, &kl);
	v = eq + 1;
	vl = (size_t)(s + len - v);
	trim(&v, &vl);
	if (kl == 0)
		return perr(p, lineno, EINVAL, "missing key before '='");
	for (size_t i = 0; i < kl; i++)
		if (!key_char(k[i]))
			return perr(p, lineno, EINVAL,
				    "invalid key '%s' (allowed: A-Z a-z 0-9 _ . -)",
				    valid_escape(k, kl, 40, esc, sizeof(esc)));
	if (c->nsections == 0)
		return perr(p, lineno, EINVAL, "key '%s' outside a section (add [nodefs] above it)",
			    valid_escape(k, kl, 40, esc, sizeof(esc)));
	sec = &c->sections[c->nsections - 1];
	key = mem_dup(k, kl);
	if (!key)
		return oom(p);
	for (size_t i = 0; i < sec->nkv; i++)
		if (strcmp(sec->kv[i].key, key) == 0)
			return perr(p, lineno, EINVAL, "duplicate key '%s' (first at line %d)",
				    key, sec->kv[i].line);
	val = mem_dup(v, vl);
	if (!val)
		return oom(p);
	nkv = realloc(sec->kv, (sec->nkv + 1) * sizeof(*nkv));
	if (!nkv)
		return oom(p);
	sec->kv = nkv;
	sec->kv[sec->nkv++] = (struct config_kv){
		.key = TAKE_PTR(key), .val = TAKE_PTR(val), .line = lineno,
	};
	return 0;
}

static int read_sections(struct parser *p, const char *text, size_t len)
{
	size_t pos = 0;
	int lineno = 0, r;

	while (pos < len) {
		const char *s = text + pos, *nl;
		size_t n, consumed;

		lineno++;
		nl = memchr(s, '\n', len - pos);
		n = nl ? (size_t)(nl - s) : len - pos;
		consumed = nl ? n + 1 : n;
		if (n > 0 && s[n - 1] == '\r')
			n--;
		if (n > CONFIG_LINE_MAX)
			return perr(p, lineno, EINVAL, "line too long (%zu bytes, at most %d)",
				    n, CONFIG_LINE_MAX);
		if (lineno == INT_MAX)
			return perr(p, lineno, EINVAL, "too many lines");
		pos += consumed;
		r = check_line_bytes(p, lineno, s, n);
		if (r < 0)
			return r;
		n = strip_comment(s, n);
		trim(&s, &n);
		if (n == 0)
			continue;
		r = s[0] == '[' ? parse_header(p, lineno, s, n) : parse_kv(p, lineno, s, n);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- pass 2: typed fields ---- */

/* The words of a value; "want_one" requires exactly one. */
static int value_words(struct parser *p, const struct config_kv *kv, bool want_one,
		       char ***ret)
{
	struct nerr e = { 0 };
	char **v = NULL;
	int n;

	n = ctl_split_words(kv->val, &v, &e);
	if (n < 0)
		return perr_from(p, kv->line, kv->key, &e);
	if (n == 0 || (want_one && n != 1)) {
		ctl_strv_free(v);
		return perr(p, kv->line, EINVAL, "%s: expects %s, got %d", kv->key,
			    want_one ? "one value" : "at least one value", n);
	}
	*ret = v;
	return n;
}

/* One word, handed over as a string. */
static int value_one(struct parser *p, const struct config_kv *kv, char **ret)
{
	char **v = NULL;
	int r = value_words(p, kv, true, &v);

	if (r < 0)
		return r;
	*ret = TAKE_PTR(v[0]);
	free(v);
	return 0;
}

static int value_duration(struct parser *p, const struct config_kv *kv, bool allow_zero,
			  uint64_t *ret)
{
	_cleanup_free_ char *s = NULL;
	struct nerr e = { 0 };
	uint64_t ms;
	int r = value_one(p, kv, &s);

	if (r < 0)
		return r;
	if (parse_duration_ms(s, &ms, &e) < 0)
		return perr_from(p, kv->line, kv->key, &e);
	if (ms == 0 && !allow_zero)
		return perr(p, kv->line, EINVAL, "%s: must be more than 0", kv->key);
	*ret = ms;
	return 0;
}

static int value_path(struct parser *p, const struct config_kv *kv, const char *s)
{
	struct nerr e = { 0 };

	if (valid_path(s, NULL, 0, &e) < 0)
		return perr_from(p, kv->line, kv->key, &e);
	return 0;
}

static int lookup_group(struct parser *p, const struct config_kv *kv, const char *name,
			gid_t *ret)
{
	long sz = sysconf(_SC_GETGR_R_SIZE_MAX);
	size_t bufsz = sz > 0 ? (size_t)sz : 16384;
	char esc[80];

	for (;;) {
		_cleanup_free_ char *buf = malloc(bufsz);
		struct group gr, *res = NULL;
		int r;

		if (!buf)
			return oom(p);
		r = getgrnam_r(name, &gr, buf, bufsz, &res);
		if (r == ERANGE && bufsz < (1u << 20)) {
			bufsz *= 2;
			continue;
		}
		if (r == 0 && res) {
			*ret = gr.gr_gid;
			return 0;
		}
		valid_escape(name, strlen(name), 40, esc, sizeof(esc));
		if (r == 0 || r == ENOENT || r == ESRCH)
			return perr(p, kv->line, EINVAL, "%s: no such group '%s'", kv->key, esc);
		return perr(p, kv->line, EINVAL, "%s: cannot look up group '%s': %s", kv->key, esc,
			    strerror(r));
	}
}

/* A group key's value (ctl_group, read_group): its name and gid, set only
 * when the group exists. */
static int group_value(struct parser *p, const struct config_kv *kv, char **name, gid_t *gid,
		       bool *has)
{
	char *s = NULL;
	gid_t g = 0;
	int r = value_one(p, kv, &s);

	if (r < 0)
		return r;
	r = lookup_group(p, kv, s, &g);
	if (r < 0) {
		free(s);
		return r;
	}
	free(*name);
	*name = s;
	*gid = g;
	*has = true;
	return 0;
}

static int apply_nodefs(struct parser *p, const struct config_section *sec)
{
	struct config *c = p->c;
	struct nerr e = { 0 };
	int r;

	for (size_t i = 0; i < sec->nkv; i++) {
		const struct config_kv *kv = &sec->kv[i];
		const char *k = kv->key;

		if (strcmp(k, "state_dir") == 0) {
			char *s = NULL;

			r = value_one(p, kv, &s);
			if (r < 0)
				return r;
			r = value_path(p, kv, s);
			if (r < 0) {
				free(s);
				return r;
			}
			free(c->state_dir);
			c->state_dir = s;
		} else if (strcmp(k, "allowed_targets") == 0) {
			char **v = NULL;
			int n = value_words(p, kv, false, &v);

			if (n < 0)
				return n;
			for (int j = 0; j < n; j++) {
				r = value_path(p, kv, v[j]);
				if (r < 0) {
					ctl_strv_free(v);
					return r;
				}
			}
			ctl_strv_free(c->allowed_targets);
			c->allowed_targets = v;
			c->nallowed_targets = (size_t)n;
		} else if (strcmp(k, "ctl_group") == 0) {
			r = group_value(p, kv, &c->ctl_group, &c->ctl_gid, &c->has_ctl_gid);
			if (r < 0)
				return r;
		} else if (strcmp(k, "read_group") == 0) {
			r = group_value(p, kv, &c->read_group, &c->read_gid, &c->has_read_gid);
			if (r < 0)
				return r;
		} else if (strcmp(k, "redact") == 0) {
			char **v = NULL;
			int n = value_words(p, kv, false, &v);

			if (n < 0)
				return n;
			r = set_redact(c, v);
			if (r < 0)
				return r;
		} else if (strcmp(k, "csi_timeout") == 0) {
			r = value_duration(p, kv, false, &c->csi_timeout_ms);
			if (r < 0)
				return r;
		} else if (strcmp(k, "retry_backoff") == 0) {
			r = value_duration(p, kv, false, &c->retry_backoff_ms);
			if (r < 0)
				return r;
		} else if (strcmp(k, "retry_max") == 0) {
			r = value_duration(p, kv, false, &c->retry_max_ms);
			if (r < 0)
				return r;
		} else if (strcmp(k, "reconcile_interval") == 0) {
			r = value_duration(p, kv, true, &c->reconcile_interval_ms);
			if (r < 0)
				return r;
		} else if (strcmp(k, "uncertain_timeout") == 0) {
			r = value_duration(p, kv, false, &c->uncertain_timeout_ms);
			if (r < 0)
				return r;
		} else if (strcmp(k, "name_prefix") == 0) {
			char *s = NULL;
			size_t n;

			r = value_one(p, kv, &s);
			if (r < 0)
				return r;
			n = strlen(s);
			r = n >= 1 && n <= 32 && isalnum((unsigned char)s[0]) ? 0 : -1;
			for (size_t j = 0; r == 0 && j < n; j++)
				if (!isalnum((unsigned char)s[j]) && !strchr("._-", s[j]))
					r = -1;
			if (r < 0) {
				free(s);
				return perr(p, kv->line, EINVAL, "name_prefix: want 1 to 32 of "
					    "[A-Za-z0-9._-], starting with a letter or digit");
			}
			free(c->name_prefix);
			c->name_prefix = s;
		} else if (strcmp(k, "operations_keep") == 0) {
			_cleanup_free_ char *s = NULL;
			long long v;

			r = value_one(p, kv, &s);
			if (r < 0)
				return r;
			if (parse_int(s, 0, 10000000, &v, &e) < 0)
				return perr_from(p, kv->line, k, &e);
			c->operations_keep = (unsigned)v;
		} else if (strcmp(k, "log_level") == 0) {
			_cleanup_free_ char *s = NULL;

			r = value_one(p, kv, &s);
			if (r < 0)
				return r;
			static const char *const levels[] = {
				[LOG_LVL_ERR] = "error", [LOG_LVL_WARN] = "warning",
				[LOG_LVL_INFO] = "info", [LOG_LVL_DEBUG] = "debug",
			};

			c->log_level = -1;
			for (int j = 0; j <= LOG_LVL_DEBUG; j++)
				if (strcmp(s, levels[j]) == 0)
					c->log_level = j;
			if (c->log_level < 0)
				return perr(p, kv->line, EINVAL, "log_level: '%s' is not one of error, "
					    "warning, info, debug", s);
		} else
			return perr(p, kv->line, EINVAL, "unknown key '%s' in [nodefs]", k);
	}
	return 0;
}

static int apply_plugin(struct parser *p, const struct config_section *sec,
			const struct config_kv **ret_default_kv)
{
	struct config *c = p->c;
	struct config_plugin *np, pl = { 0 };
	struct nerr e = { 0 };
	int r;

	for (size_t i = 0; i < sec->nkv; i++) {
		const struct config_kv *kv = &sec->kv[i];
		const char *k = kv->key;

		if (strcmp(k, "endpoint") == 0) {
			char *s = NULL;

			r = value_one(p, kv, &s);
			if (r < 0)
				goto fail;
			if (strncmp(s, "unix://", 7) != 0 || valid_path(s + 7, NULL, 0, &e) < 0) {
				char esc[80];

				r = perr(p, kv->line, EINVAL,
					 "endpoint '%s' must be unix:///absolute/path%s%s",
					 valid_escape(s, strlen(s), 48, esc, sizeof(esc)),
					 e.code ? ": " : "", e.code ? e.msg : "");
				free(s);
				goto fail;
			}
			pl.endpoint = s;
		} else if (strcmp(k, "default") == 0) {
			_cleanup_free_ char *s = NULL;

			r = value_one(p, kv, &s);
			if (r < 0)
				goto fail;
			if (parse_bool(s, &pl.is_default, &e) < 0) {
				r = perr_from(p, kv->line, k, &e);
				goto fail;
			}
			*ret_default_kv = pl.is_default ? kv : NULL;
		} else if (strcmp(k, "command") == 0) {
			char **v = NULL;

			r = value_words(p, kv, false, &v);
			if (r < 0)
				goto fail;
			strv_free(pl.command);
			pl.command = v;
		} else if (strcmp(k, "keep_running") == 0) {
			_cleanup_free_ char *s = NULL;

			r = value_one(p, kv, &s);
			if (r < 0)
				goto fail;
			if (parse_bool(s, &pl.keep_running, &e) < 0) {
				r = perr_from(p, kv->line, k, &e);
				goto fail;
			}
		} else {
			r = perr(p, kv->line, EINVAL, "unknown key '%s' in [plugin %s]", k, sec->name);
			goto fail;
		}
	}
	if (!pl.endpoint) {
		r = perr(p, sec->line, EINVAL, "[plugin %s] has no endpoint", sec->name);
		goto fail;
	}
	if (pl.keep_running && !pl.command) {
		r = perr(p, sec->line, EINVAL, "[plugin %s] has keep_running but no command",
			 sec->name);
		goto fail;
	}
	pl.name = str_dup(sec->name);
	if (!pl.name) {
		r = oom(p);
		goto fail;
	}
	np = realloc(c->plugins, (c->nplugins + 1) * sizeof(*np));
	if (!np) {
		r = oom(p);
		goto fail;
	}
	c->plugins = np;
	c->plugins[c->nplugins++] = pl;
	return 0;
fail:
	free(pl.name);
	free(pl.endpoint);
	strv_free(pl.command);
	return r;
}

static int apply_profile(struct parser *p, const struct config_section *sec)
{
	struct config *c = p->c;
	struct config_profile *np, pr = { 0 };
	struct nerr e = { 0 };
	char esc[80];
	int r;

	for (size_t i = 0; i < sec->nkv; i++) {
		const struct config_kv *kv = &sec->kv[i];
		const char *k = kv->key;
		char *s = NULL;

		if (strcmp(k, "plugin") == 0) {
			r = value_one(p, kv, &s);
			if (r < 0)
				goto fail;
			free(pr.plugin);
			pr.plugin = s;
			if (valid_name(s, &e) < 0) {
				r = perr_from(p, kv->line, k, &e);
				goto fail;
			}
		} else if (strcmp(k, "access_mode") == 0) {
			bool ok = false;

			r = value_one(p, kv, &s);
			if (r < 0)
				goto fail;
			free(pr.access_mode);
			pr.access_mode = s;
			for (size_t j = 0; config_access_modes[j]; j++)
				if (strcmp(s, config_access_modes[j]) == 0)
					ok = true;
			if (!ok) {
				r = perr(p, kv->line, EINVAL,
					 "access_mode: unknown mode '%s'; one of: single-node-writer, "
					 "single-node-reader-only, multi-node-reader-only, "
					 "multi-node-single-writer, multi-node-multi-writer, "
					 "single-node-single-writer, single-node-multi-writer",
					 valid_escape(s, strlen(s), 20, esc, sizeof(esc)));
				goto fail;
			}
		} else if (strcmp(k, "fs_type") == 0) {
			r = value_one(p, kv, &s);
			if (r < 0)
				goto fail;
			free(pr.fs_type);
			pr.fs_type = s;
			if (valid_name(s, &e) < 0) {
				r = perr_from(p, kv->line, k, &e);
				goto fail;
			}
		} else if (strcmp(k, "mount_flags") == 0) {
			char **v = NULL;

			r = value_words(p, kv, false, &v);
			if (r < 0)
				goto fail;
			strv_free(pr.mount_flags);
			pr.mount_flags = v;
			for (size_t j = 0; v[j]; j++)
				if (!v[j][0]) {
					r = perr(p, kv->line, EINVAL, "mount_flags: empty flag");
					goto fail;
				}
		} else if (strcmp(k, "parameters") == 0) {
			char **v = NULL;

			r = value_words(p, kv, false, &v);
			if (r < 0)
				goto fail;
			strv_free(pr.params);
			pr.params = v;
			for (size_t j = 0; v[j]; j++)
				if (v[j][0] == '=' || !strchr(v[j], '=')) {
					r = perr(p, kv->line, EINVAL,
						 "parameters: '%s' is not KEY=VALUE",
						 valid_escape(v[j], strlen(v[j]), 48, esc, sizeof(esc)));
					goto fail;
				}
		} else if (strcmp(k, "size") == 0) {
			r = value_one(p, kv, &s);
			if (r < 0)
				goto fail;
			r = parse_size(s, &pr.size, &e);
			free(s);
			if (r < 0) {
				r = perr_from(p, kv->line, k, &e);
				goto fail;
			}
		} else {
			r = perr(p, kv->line, EINVAL, "unknown key '%s' in [profile %s]", k, sec->name);
			goto fail;
		}
	}
	if (!pr.mount_flags && !(pr.mount_flags = strv_new_empty()))
		goto nomem;
	if (!pr.params && !(pr.params = strv_new_empty()))
		goto nomem;
	pr.name = str_dup(sec->name);
	if (!pr.name)
		goto nomem;
	np = realloc(c->profiles, (c->nprofiles + 1) * sizeof(*np));
	if (!np)
		goto nomem;
	c->profiles = np;
	c->profiles[c->nprofiles++] = pr;
	return 0;
nomem:
	r = oom(p);
fail:
	profile_free(&pr);
	return r;
}

static int apply_sections(struct parser *p)
{
	struct config *c = p->c;
	const struct config_kv *default_kv = NULL;
	const char *default_name = NULL;
	int r;

	for (size_t i = 0; i < c->nsections; i++) {
		const struct config_section *sec = &c->sections[i];

		if (strcmp(sec->type, "nodefs") == 0)
			r = apply_nodefs(p, sec);
		else if (strcmp(sec->type, "plugin") == 0) {
			const struct config_kv *kv = NULL;

			r = apply_plugin(p, sec, &kv);
			if (r == 0 && kv) {
				if (default_kv)
					return perr(p, kv->line, EINVAL,
						    "more than one default plugin ('%s' at line %d, and '%s')",
						    default_name, default_kv->line, sec->name);
				default_kv = kv;
				default_name = sec->name;
			}
		} else if (strcmp(sec->type, "profile") == 0)
			r = apply_profile(p, sec);
		else
			r = 0;	/* runtime and cluster sections: their modules check the keys */
		if (r < 0)
			return r;
	}
	if (!default_kv && c->nplugins == 1)
		c->plugins[0].is_default = true;
	for (size_t i = 0; i < c->nprofiles; i++) {
		const struct config_profile *pr = &c->profiles[i];
		const struct config_section *sec;

		if (!pr->plugin || config_plugin_find(c, pr->plugin))
			continue;
		sec = config_section_find(c, "profile", pr->name);
		for (size_t j = 0; sec && j < sec->nkv; j++)
			if (strcmp(sec->kv[j].key, "plugin") == 0)
				return perr(p, sec->kv[j].line, EINVAL,
					    "profile '%s' names undefined plugin '%s'",
					    pr->name, pr->plugin);
	}
	if (c->retry_backoff_ms > c->retry_max_ms) {
		const struct config_section *sec = config_section_find(c, "nodefs", NULL);
		int line = sec ? sec->line : 0;

		for (size_t j = 0; sec && j < sec->nkv; j++)
			if (strcmp(sec->kv[j].key, "retry_backoff") == 0 ||
			    strcmp(sec->kv[j].key, "retry_max") == 0)
				line = sec->kv[j].line;
		return perr(p, line, EINVAL, "retry_backoff (%llu ms) is longer than retry_max (%llu ms)",
			    (unsigned long long)c->retry_backoff_ms,
			    (unsigned long long)c->retry_max_ms);
	}
	return 0;
}

int config_parse(const char *text, size_t len, const char *filename,
		 struct config **ret, struct nerr *err)
{
	struct parser p = { .file = filename ? filename : "config", .err = err };
	int r;

	r = config_defaults(&p.c);
	if (r < 0)
		return oom(&p);
	if (filename) {
		p.c->path = str_dup(filename);
		if (!p.c->path) {
			r = oom(&p);
			goto fail;
		}
	}
	r = read_sections(&p, text, len);
	if (r < 0)
		goto fail;
	r = apply_sections(&p);
	if (r < 0)
		goto fail;
	*ret = p.c;
	return 0;
fail:
	config_free(p.c);
	return r;
}

int config_load(const char *path, bool missing_ok, struct config **ret, struct nerr *err)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	struct stat st;
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		r = -errno;
		if (r == -ENOENT && missing_ok) {
			r = config_defaults(ret);
			if (r < 0)
				return nerr_set(err, ENOMEM, "%s: out of memory", path);
			return 0;
		}
		return nerr_set(err, -r, "%s: cannot open: %s", path, strerror(-r));
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		close(fd);
		return nerr_set(err, -r, "%s: cannot stat: %s", path, strerror(-r));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return nerr_set(err, EINVAL, "%s: not a regular file", path);
	}
	if (st.st_size > (off_t)CONFIG_FILE_MAX) {
		close(fd);
		return nerr_set(err, EFBIG, "%s: too large (more than %u bytes)", path,
				CONFIG_FILE_MAX);
	}
	buf = malloc(CONFIG_FILE_MAX + 1);
	if (!buf) {
		close(fd);
		return nerr_set(err, ENOMEM, "%s: out of memory", path);
	}
	/* read to EOF, not st_size: the file may change under us */
	for (;;) {
		ssize_t n = read(fd, buf + len, CONFIG_FILE_MAX + 1 - len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			close(fd);
			return nerr_set(err, -r, "%s: cannot read: %s", path, strerror(-r));
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > CONFIG_FILE_MAX) {
			close(fd);
			return nerr_set(err, EFBIG, "%s: too large (more than %u bytes)", path,
					CONFIG_FILE_MAX);
		}
	}
	close(fd);
	return config_parse(buf, len, path, ret, err);
}

const struct config_section *config_section_find(const struct config *c, const char *type,
						 const char *name)
{
	if (!c || !type)
		return NULL;
	return section_find_mut((struct config *)c, type, name);
}

const char *config_section_get(const struct config_section *s, const char *key)
{
	if (!s || !key)
		return NULL;
	for (size_t i = s->nkv; i > 0; i--)
		if (strcmp(s->kv[i - 1].key, key) == 0)
			return s->kv[i - 1].val;
	return NULL;
}

const struct config_plugin *config_default_plugin(const struct config *c)
{
	for (size_t i = 0; c && i < c->nplugins; i++)
		if (c->plugins[i].is_default)
			return &c->plugins[i];
	return NULL;
}

const struct config_plugin *config_plugin_find(const struct config *c, const char *name)
{
	for (size_t i = 0; c && name && i < c->nplugins; i++)
		if (strcmp(c->plugins[i].name, name) == 0)
			return &c->plugins[i];
	return NULL;
}

const struct config_profile *config_profile_find(const struct config *c, const char *name)
{
	for (size_t i = 0; c && name && i < c->nprofiles; i++)
		if (strcmp(c->profiles[i].name, name) == 0)
			return &c->profiles[i];
	return NULL;
}
