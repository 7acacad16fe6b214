/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * config-apply: the config reader's second pass: each known section's
 * key/value lines ([nodefs], [plugin], [profile]) turned into typed fields,
 * and the cross-references checked (profiles name defined plugins, one
 * default plugin, retry_backoff within retry_max). [runtime] and [cluster]
 * sections are left as read: their modules check the keys.
 *
 * Must not know: the text's syntax (config.c read it into sections), nor
 * fs/, CSI or runtimes.
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
#include "secrets.h"
#include "units.h"
#include "valid.h"

/* ---- pass 2: typed fields ---- */

/* The words of a value; "want_one" requires exactly one. */
static int value_words(struct config_parser *p, const struct config_kv *kv, bool want_one,
		       char ***ret)
{
	struct nerr e = { 0 };
	char **v = NULL;
	int n;

	n = ctl_split_words(kv->val, &v, &e);
	if (n < 0)
		return config_perr_from(p, kv->line, kv->key, &e);
	if (n == 0 || (want_one && n != 1)) {
		ctl_strv_free(v);
		return config_perr(p, kv->line, EINVAL, "%s: expects %s, got %d", kv->key,
			    want_one ? "one value" : "at least one value", n);
	}
	*ret = v;
	return n;
}

/* One word, handed over as a string. */
static int value_one(struct config_parser *p, const struct config_kv *kv, char **ret)
{
	char **v = NULL;
	int r = value_words(p, kv, true, &v);

	if (r < 0)
		return r;
	*ret = TAKE_PTR(v[0]);
	free(v);
	return 0;
}

/* One decimal integer in [lo, hi]. */
static int value_uint(struct config_parser *p, const struct config_kv *kv, long long lo,
		      long long hi, unsigned *ret)
{
	_cleanup_free_ char *s = NULL;
	struct nerr e = { 0 };
	long long v;
	int r = value_one(p, kv, &s);

	if (r < 0)
		return r;
	if (parse_int(s, lo, hi, &v, &e) < 0)
		return config_perr_from(p, kv->line, kv->key, &e);
	*ret = (unsigned)v;
	return 0;
}

static int value_duration(struct config_parser *p, const struct config_kv *kv, bool allow_zero,
			  uint64_t *ret)
{
	_cleanup_free_ char *s = NULL;
	struct nerr e = { 0 };
	uint64_t ms;
	int r = value_one(p, kv, &s);

	if (r < 0)
		return r;
	if (parse_duration_ms(s, &ms, &e) < 0)
		return config_perr_from(p, kv->line, kv->key, &e);
	if (ms == 0 && !allow_zero)
		return config_perr(p, kv->line, EINVAL, "%s: must be more than 0", kv->key);
	*ret = ms;
	return 0;
}

static int value_path(struct config_parser *p, const struct config_kv *kv, const char *s)
{
	struct nerr e = { 0 };

	if (valid_path(s, NULL, 0, &e) < 0)
		return config_perr_from(p, kv->line, kv->key, &e);
	return 0;
}

static int lookup_group(struct config_parser *p, const struct config_kv *kv, const char *name,
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
			return config_oom(p);
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
			return config_perr(p, kv->line, EINVAL, "%s: no such group '%s'", kv->key, esc);
		return config_perr(p, kv->line, EINVAL, "%s: cannot look up group '%s': %s", kv->key, esc,
			    strerror(r));
	}
}

/* A group key's value (ctl_group, read_group): its name and gid, set only
 * when the group exists. */
static int group_value(struct config_parser *p, const struct config_kv *kv, char **name, gid_t *gid,
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

static int apply_nodefs(struct config_parser *p, const struct config_section *sec)
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
			r = config_set_redact(c, v);
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
		} else if (strcmp(k, "cache_max_age") == 0) {
			r = value_duration(p, kv, true, &c->cache_max_age_ms);
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
				return config_perr(p, kv->line, EINVAL, "name_prefix: want 1 to 32 of "
					    "[A-Za-z0-9._-], starting with a letter or digit");
			}
			free(c->name_prefix);
			c->name_prefix = s;
		} else if (strcmp(k, "reader_memory") == 0) {
			_cleanup_free_ char *s = NULL;

			r = value_one(p, kv, &s);
			if (r < 0)
				return r;
			if (parse_size(s, &c->reader_memory, &e) < 0)
				return config_perr_from(p, kv->line, k, &e);
		} else if (strcmp(k, "operations_keep") == 0) {
			r = value_uint(p, kv, 0, 10000000, &c->operations_keep);
			if (r < 0)
				return r;
		} else if (strcmp(k, "events_keep") == 0) {
			r = value_uint(p, kv, 16, CONFIG_EVENTS_KEEP_MAX, &c->events_keep);
			if (r < 0)
				return r;
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
				return config_perr(p, kv->line, EINVAL, "log_level: '%s' is not one of error, "
					    "warning, info, debug", s);
		} else if (strcmp(k, "sandbox_dir") == 0 || strcmp(k, "fetch_cache") == 0) {
			char *s = NULL, **dst = k[0] == 's' ? &c->sandbox_dir : &c->fetch_cache;

			r = value_one(p, kv, &s);
			if (r >= 0 && (r = value_path(p, kv, s)) < 0)
				free(s);
			if (r < 0)
				return r;
			free(*dst);
			*dst = s;
		} else if (strcmp(k, "keep_sandboxes") == 0) {
			_cleanup_free_ char *s = NULL;

			r = value_one(p, kv, &s);
			if (r < 0)
				return r;
			if (parse_bool(s, &c->keep_sandboxes, &e) < 0)
				return config_perr_from(p, kv->line, k, &e);
		} else if (strcmp(k, "fetch_cache_size") == 0) {
			_cleanup_free_ char *s = NULL;

			r = value_one(p, kv, &s);
			if (r < 0)
				return r;
			if (parse_size(s, &c->fetch_cache_size, &e) < 0)
				return config_perr_from(p, kv->line, k, &e);
		} else
			return config_perr(p, kv->line, EINVAL, "unknown key '%s' in [nodefs]", k);
	}
	return 0;
}

/* secrets = FILE: checked now (root's, no one else's; secrets.h), read at
 * each call that takes secrets. */
static int value_secrets(struct config_parser *p, const struct config_kv *kv, char **dst)
{
	struct nerr e = { 0 };
	char *s = NULL;
	int r = value_one(p, kv, &s);

	if (r < 0)
		return r;
	if (secrets_read(s, NULL, &e) < 0) {
		free(s);
		if (e.code == ENOMEM)
			return config_oom(p);
		return config_perr(p, kv->line, EINVAL, "%s", e.msg);
	}
	free(*dst);
	*dst = s;
	return 0;
}

static int apply_plugin(struct config_parser *p, const struct config_section *sec,
			const struct config_kv **ret_default_kv)
{
	struct config *c = p->c;
	struct config_plugin *np, pl = { .node = true };
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

				r = config_perr(p, kv->line, EINVAL,
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
				r = config_perr_from(p, kv->line, k, &e);
				goto fail;
			}
			*ret_default_kv = pl.is_default ? kv : NULL;
		} else if (strcmp(k, "command") == 0) {
			char **v = NULL;

			r = value_words(p, kv, false, &v);
			if (r < 0)
				goto fail;
			config_strv_free(pl.command);
			pl.command = v;
		} else if (strcmp(k, "keep_running") == 0) {
			_cleanup_free_ char *s = NULL;

			r = value_one(p, kv, &s);
			if (r < 0)
				goto fail;
			if (parse_bool(s, &pl.keep_running, &e) < 0) {
				r = config_perr_from(p, kv->line, k, &e);
				goto fail;
			}
		} else if (strcmp(k, "secrets") == 0) {
			r = value_secrets(p, kv, &pl.secrets);
			if (r < 0)
				goto fail;
		} else if (strcmp(k, "node") == 0 || strcmp(k, "privileged") == 0) {
			_cleanup_free_ char *s = NULL;

			r = value_one(p, kv, &s);
			if (r < 0)
				goto fail;
			if (parse_bool(s, k[0] == 'n' ? &pl.node : &pl.privileged, &e) < 0) {
				r = config_perr_from(p, kv->line, k, &e);
				goto fail;
			}
		} else if (strcmp(k, "runtime") == 0 || strcmp(k, "image") == 0) {
			char *s = NULL, **dst = k[0] == 'r' ? &pl.runtime : &pl.image;

			r = value_one(p, kv, &s);
			if (r < 0)
				goto fail;
			if (dst == &pl.runtime && strcmp(s, "docker") != 0 && strcmp(s, "lxc") != 0) {
				r = config_perr(p, kv->line, EINVAL, "runtime '?': plugins run as "
						"containers of docker or lxc");
				free(s);
				goto fail;
			}
			free(*dst);
			*dst = s;
		} else if (strcmp(k, "mounts") == 0) {
			char **v = NULL;
			int n = value_words(p, kv, false, &v);

			if (n < 0) {
				r = n;
				goto fail;
			}
			for (int j = 0; j < n; j++)
				if ((r = value_path(p, kv, v[j])) < 0) {
					config_strv_free(v);
					goto fail;
				}
			config_strv_free(pl.mounts);
			pl.mounts = v;
		} else {
			r = config_perr(p, kv->line, EINVAL, "unknown key '%s' in [plugin %s]", k, sec->name);
			goto fail;
		}
	}
	if (!pl.endpoint) {
		r = config_perr(p, sec->line, EINVAL, "[plugin %s] has no endpoint", sec->name);
		goto fail;
	}
	if (pl.keep_running && !pl.command && !pl.runtime) {
		r = config_perr(p, sec->line, EINVAL, "[plugin %s] has keep_running but no command",
			 sec->name);
		goto fail;
	}
	if (!pl.runtime != !pl.image || ((pl.mounts || pl.privileged) && !pl.runtime)) {
		r = config_perr(p, sec->line, EINVAL, "[plugin %s]: %s", sec->name, pl.runtime ?
				"runtime needs image" : pl.image ? "image needs runtime" :
				"mounts and privileged need runtime");
		goto fail;
	}
	if (!pl.mounts && !(pl.mounts = calloc(1, sizeof(char *)))) {
		r = config_oom(p);
		goto fail;
	}
	pl.name = config_strdup(sec->name);
	if (!pl.name) {
		r = config_oom(p);
		goto fail;
	}
	np = realloc(c->plugins, (c->nplugins + 1) * sizeof(*np));
	if (!np) {
		r = config_oom(p);
		goto fail;
	}
	c->plugins = np;
	c->plugins[c->nplugins++] = pl;
	return 0;
fail:
	free(pl.name);
	free(pl.endpoint);
	config_strv_free(pl.command);
	free(pl.secrets);
	free(pl.runtime);
	free(pl.image);
	config_strv_free(pl.mounts);
	return r;
}

static int apply_profile(struct config_parser *p, const struct config_section *sec)
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
				r = config_perr_from(p, kv->line, k, &e);
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
				r = config_perr(p, kv->line, EINVAL,
					 "access_mode: unknown mode '%s'; one of: single-node-writer, "
					 "single-node-reader-only, multi-node-reader-only, "
					 "multi-node-single-writer, multi-node-multi-writer, "
					 "single-node-single-writer, single-node-multi-writer",
					 valid_escape(s, strlen(s), 20, esc, sizeof(esc)));
				goto fail;
			}
		} else if (strcmp(k, "secrets") == 0) {
			r = value_secrets(p, kv, &pr.secrets);
			if (r < 0)
				goto fail;
		} else if (strcmp(k, "fs_type") == 0) {
			r = value_one(p, kv, &s);
			if (r < 0)
				goto fail;
			free(pr.fs_type);
			pr.fs_type = s;
			if (valid_name(s, &e) < 0) {
				r = config_perr_from(p, kv->line, k, &e);
				goto fail;
			}
		} else if (strcmp(k, "mount_flags") == 0) {
			char **v = NULL;

			r = value_words(p, kv, false, &v);
			if (r < 0)
				goto fail;
			config_strv_free(pr.mount_flags);
			pr.mount_flags = v;
			for (size_t j = 0; v[j]; j++)
				if (!v[j][0]) {
					r = config_perr(p, kv->line, EINVAL, "mount_flags: empty flag");
					goto fail;
				}
		} else if (strcmp(k, "parameters") == 0) {
			char **v = NULL;

			r = value_words(p, kv, false, &v);
			if (r < 0)
				goto fail;
			config_strv_free(pr.params);
			pr.params = v;
			for (size_t j = 0; v[j]; j++)
				if (v[j][0] == '=' || !strchr(v[j], '=')) {
					r = config_perr(p, kv->line, EINVAL,
						 "parameters: '%s' is not KEY=VALUE",
						 valid_escape(v[j], strlen(v[j]), 48, esc, sizeof(esc)));
					goto fail;
				}
		} else if (strcmp(k, "mutable_parameters") == 0) {
			char **words = NULL, **v = config_strv_new_empty();
			size_t nv = 0;

			/* K,K or K, K or K K: the keys a modify may change */
			r = value_words(p, kv, false, &words);
			if (r < 0) {
				config_strv_free(v);
				goto fail;
			}
			for (size_t w = 0; v && words[w]; w++) {
				char *save = NULL;

				for (char *t = strtok_r(words[w], ",", &save); t; t = strtok_r(NULL, ",", &save)) {
					char **nw = realloc(v, (nv + 2) * sizeof(*v));

					if (!nw) {
						config_strv_free(v);
						v = NULL;
						break;
					}
					v = nw;
					v[nv + 1] = NULL;
					if (!(v[nv] = config_strdup(t))) {
						config_strv_free(v);
						v = NULL;
						break;
					}
					nv++;
				}
			}
			config_strv_free(words);
			if (!v)
				goto nomem;
			config_strv_free(pr.mutable_params);
			pr.mutable_params = v;
		} else if (strcmp(k, "size") == 0) {
			r = value_one(p, kv, &s);
			if (r < 0)
				goto fail;
			r = parse_size(s, &pr.size, &e);
			free(s);
			if (r < 0) {
				r = config_perr_from(p, kv->line, k, &e);
				goto fail;
			}
		} else {
			r = config_perr(p, kv->line, EINVAL, "unknown key '%s' in [profile %s]", k, sec->name);
			goto fail;
		}
	}
	if (!pr.mount_flags && !(pr.mount_flags = config_strv_new_empty()))
		goto nomem;
	if (!pr.params && !(pr.params = config_strv_new_empty()))
		goto nomem;
	pr.name = config_strdup(sec->name);
	if (!pr.name)
		goto nomem;
	np = realloc(c->profiles, (c->nprofiles + 1) * sizeof(*np));
	if (!np)
		goto nomem;
	c->profiles = np;
	c->profiles[c->nprofiles++] = pr;
	return 0;
nomem:
	r = config_oom(p);
fail:
	config_profile_free(&pr);
	return r;
}

int config_apply_sections(struct config_parser *p)
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
					return config_perr(p, kv->line, EINVAL,
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
				return config_perr(p, sec->kv[j].line, EINVAL,
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
		return config_perr(p, line, EINVAL, "retry_backoff (%llu ms) is longer than retry_max (%llu ms)",
			    (unsigned long long)c->retry_backoff_ms,
			    (unsigned long long)c->retry_max_ms);
	}
	return 0;
}
