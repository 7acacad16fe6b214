/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * config-internal: what the config reader's two passes share (config.c
 * reads the text into sections, config-apply.c turns them into fields).
 * Private to them; libc only.
 * Must not know: the backend (config/ sits below core: common only).
 */
#ifndef NODEFS_CONFIG_INTERNAL_H
#define NODEFS_CONFIG_INTERNAL_H

struct config;
struct config_profile;
struct nerr;

struct config_parser {
	const char *file;
	struct config *c;
	struct nerr *err;
};

/* Every message is "FILE:LINE: reason": the errno code, -code returned. */
__attribute__((format(printf, 4, 5)))
int config_perr(struct config_parser *p, int line, int code, const char *fmt, ...);
/* "FILE: out of memory", -ENOMEM. */
int config_oom(struct config_parser *p);
/* Context on a lower layer's message: "FILE:LINE: key: message". */
int config_perr_from(struct config_parser *p, int line, const char *key, const struct nerr *e);
char *config_strdup(const char *s);
void config_strv_free(char **v);
/* An empty NULL-terminated vector; NULL on OOM. */
char **config_strv_new_empty(void);
void config_profile_free(struct config_profile *pr);
/* c->redact = v (taken; NULL for none) and the keys it implies; -ENOMEM
 * (v freed). */
int config_set_redact(struct config *c, char **v);
/* Pass 2 over p->c's sections: typed fields and cross-references. */
int config_apply_sections(struct config_parser *p);

#endif
