/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * config: reading the INI configuration; see config.h.
 *
 * Two passes: the text is first read into sections of key/value lines
 * (syntax, duplicates, line numbers), here; then each known section is
 * turned into typed fields and the cross-references are checked
 * (config-apply.c). This file also owns the config's life (defaults, free,
 * load from a file) and its lookups. Knows nothing of fs/, CSI or runtimes.
 */
#include "config.h"
#include "config-internal.h"

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

int config_perr(struct config_parser *p, int line, int code, const char *fmt, ...)
{
	char reason[NERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	return nerr_set(p->err, code, "%s:%d: %s", p->file, line, reason);
}

int config_oom(struct config_parser *p)
{
	return nerr_set(p->err, ENOMEM, "%s: out of memory", p->file);
}

/* Add context from a lower layer's message: "FILE:LINE: key: message". */
int config_perr_from(struct config_parser *p, int line, const char *key, const struct nerr *e)
{
	if (e->code == ENOMEM)
		return config_oom(p);
	return config_perr(p, line, EINVAL, "%s: %s", key, e->msg);
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

char *config_strdup(const char *s)
{
	return mem_dup(s, strlen(s));
}

void config_strv_free(char **v)
{
	ctl_strv_free(v);
}

char **config_strv_new_empty(void)
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

void config_profile_free(struct config_profile *pr)
{
	free(pr->name);
	free(pr->plugin);
	free(pr->access_mode);
	free(pr->fs_type);
	config_strv_free(pr->mount_flags);
	config_strv_free(pr->params);
	config_strv_free(pr->mutable_params);
	free(pr->secrets);
}

void config_free(struct config *c)
{
	if (!c)
		return;
	free(c->path);
	free(c->state_dir);
	free(c->sandbox_dir);
	free(c->fetch_cache);
	config_strv_free(c->allowed_targets);
	free(c->ctl_group);
	free(c->name_prefix);
	free(c->read_group);
	config_strv_free(c->redact);
	config_strv_free(c->redact_keys);
	for (size_t i = 0; i < c->nplugins; i++) {
		free(c->plugins[i].name);
		free(c->plugins[i].endpoint);
		config_strv_free(c->plugins[i].command);
		free(c->plugins[i].secrets);
		free(c->plugins[i].runtime);
		free(c->plugins[i].image);
		config_strv_free(c->plugins[i].mounts);
	}
	free(c->plugins);
	for (size_t i = 0; i < c->nprofiles; i++)
		config_profile_free(&c->profiles[i]);
	free(c->profiles);
	for (size_t i = 0; i < c->nsections; i++)
		section_free(&c->sections[i]);
	free(c->sections);
	free(c);
}

/* c->redact = v (taken; NULL for none) and the keys it implies. */
int config_set_redact(struct config *c, char **v)
{
	size_t n = 0;
	char **k;

	while (v && v[n])
		n++;
	k = calloc(n + 2, sizeof(*k));
	if (!k)
		goto fail;
	k[0] = config_strdup("env.");
	if (!k[0])
		goto fail;
	for (size_t i = 0; i < n; i++) {
		k[i + 1] = malloc(strlen(v[i]) + 7);
		if (!k[i + 1])
			goto fail;
		strcpy(k[i + 1], "param.");
		strcat(k[i + 1], v[i]);
	}
	config_strv_free(c->redact);
	config_strv_free(c->redact_keys);
	c->redact = v;
	c->redact_keys = k;
	return 0;
fail:
	config_strv_free(k);
	config_strv_free(v);
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
	c->events_keep = 4096;
	c->reader_memory = 4u << 20;
	c->cache_max_age_ms = 1000;
	c->reconcile_interval_ms = 60 * 1000;
	c->uncertain_timeout_ms = 5 * 60 * 1000;
	c->log_level = -1;
	c->state_dir = config_strdup(CONFIG_DEFAULT_STATE_DIR);
	c->fetch_cache_size = 1ull << 30;
	c->allowed_targets = calloc(3, sizeof(char *));
	if (!c->state_dir || !c->allowed_targets)
		goto fail;
	c->allowed_targets[0] = config_strdup("/mnt");
	if (!c->allowed_targets[0])
		goto fail;
	c->allowed_targets[1] = config_strdup("/srv");
	if (!c->allowed_targets[1])
		goto fail;
	c->nallowed_targets = 2;
	if (config_set_redact(c, NULL) < 0)
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
static int check_line_bytes(struct config_parser *p, int lineno, const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t i = 0; i < len;) {
		size_t n;

		if (u[i] == 0)
			return config_perr(p, lineno, EINVAL, "NUL byte at column %zu", i + 1);
		if ((u[i] < 0x20 && u[i] != '\t') || u[i] == 0x7f)
			return config_perr(p, lineno, EINVAL, "control character 0x%02x at column %zu",
				    u[i], i + 1);
		if (u[i] < 0x80) {
			i++;
			continue;
		}
		n = valid_utf8_seq(u + i, len - i);
		if (n == 0)
			return config_perr(p, lineno, EINVAL, "invalid UTF-8 at column %zu", i + 1);
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

static int parse_header(struct config_parser *p, int lineno, const char *s, size_t len)
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
		return config_perr(p, lineno, EINVAL, "expected ']' at the end of the section header");
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
		return config_perr(p, lineno, EINVAL, "empty section header");
	if (nw > 2)
		return config_perr(p, lineno, EINVAL, "section header has too many words (expected [TYPE NAME])");
	type = mem_dup(w[0], wl[0]);
	if (!type)
		return config_oom(p);
	for (size_t k = 0; k < ARRAY_SIZE(section_types); k++)
		if (strcmp(type, section_types[k]) == 0)
			known = true;
	if (!known)
		return config_perr(p, lineno, EINVAL,
			    "unknown section type '%s' (expected nodefs, plugin, profile, runtime or cluster)",
			    valid_escape(type, wl[0], 40, esc, sizeof(esc)));
	if (nw == 2) {
		name = mem_dup(w[1], wl[1]);
		if (!name)
			return config_oom(p);
	}
	if (strcmp(type, "nodefs") == 0 || strcmp(type, "cluster") == 0) {
		if (name)
			return config_perr(p, lineno, EINVAL, "[%s] takes no name", type);
	} else {
		struct nerr e = { 0 };

		if (!name)
			return config_perr(p, lineno, EINVAL, "[%s] needs a name: [%s NAME]", type, type);
		if (valid_name(name, &e) < 0)
			return config_perr(p, lineno, EINVAL, "[%s]: %s", type, e.msg);
		if (strcmp(type, "runtime") == 0 && strcmp(name, "docker") != 0 &&
		    strcmp(name, "lxc") != 0)
			return config_perr(p, lineno, EINVAL, "unknown runtime '%s' (expected docker or lxc)",
				    name);
	}
	sec = section_find_mut(c, type, name);
	if (sec)
		return config_perr(p, lineno, EINVAL, "duplicate section [%s%s%s] (first at line %d)",
			    type, name ? " " : "", name ? name : "", sec->line);
	ns = realloc(c->sections, (c->nsections + 1) * sizeof(*ns));
	if (!ns)
		return config_oom(p);
	c->sections = ns;
	c->sections[c->nsections++] = (struct config_section){
		.type = TAKE_PTR(type), .name = TAKE_PTR(name), .line = lineno,
	};
	return 0;
}

static int parse_kv(struct config_parser *p, int lineno, const char *s, size_t len)
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
		return config_perr(p, lineno, EINVAL, "expected 'key = value', '[section]' or a comment");
	k = s;
	kl = (size_t)(eq - s);
	trim(&k, &kl);
	v = eq + 1;
	vl = (size_t)(s + len - v);
	trim(&v, &vl);
	if (kl == 0)
		return config_perr(p, lineno, EINVAL, "missing key before '='");
	for (size_t i = 0; i < kl; i++)
		if (!key_char(k[i]))
			return config_perr(p, lineno, EINVAL,
				    "invalid key '%s' (allowed: A-Z a-z 0-9 _ . -)",
				    valid_escape(k, kl, 40, esc, sizeof(esc)));
	if (c->nsections == 0)
		return config_perr(p, lineno, EINVAL, "key '%s' outside a section (add [nodefs] above it)",
			    valid_escape(k, kl, 40, esc, sizeof(esc)));
	sec = &c->sections[c->nsections - 1];
	key = mem_dup(k, kl);
	if (!key)
		return config_oom(p);
	for (size_t i = 0; i < sec->nkv; i++)
		if (strcmp(sec->kv[i].key, key) == 0)
			return config_perr(p, lineno, EINVAL, "duplicate key '%s' (first at line %d)",
				    key, sec->kv[i].line);
	val = mem_dup(v, vl);
	if (!val)
		return config_oom(p);
	nkv = realloc(sec->kv, (sec->nkv + 1) * sizeof(*nkv));
	if (!nkv)
		return config_oom(p);
	sec->kv = nkv;
	sec->kv[sec->nkv++] = (struct config_kv){
		.key = TAKE_PTR(key), .val = TAKE_PTR(val), .line = lineno,
	};
	return 0;
}

static int read_sections(struct config_parser *p, const char *text, size_t len)
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
			return config_perr(p, lineno, EINVAL, "line too long (%zu bytes, at most %d)",
				    n, CONFIG_LINE_MAX);
		if (lineno == INT_MAX)
			return config_perr(p, lineno, EINVAL, "too many lines");
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


int config_parse(const char *text, size_t len, const char *filename,
		 struct config **ret, struct nerr *err)
{
	struct config_parser p = { .file = filename ? filename : "config", .err = err };
	int r;

	r = config_defaults(&p.c);
	if (r < 0)
		return config_oom(&p);
	if (filename) {
		p.c->path = config_strdup(filename);
		if (!p.c->path) {
			r = config_oom(&p);
			goto fail;
		}
	}
	r = read_sections(&p, text, len);
	if (r < 0)
		goto fail;
	r = config_apply_sections(&p);
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
