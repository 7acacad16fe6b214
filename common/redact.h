/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * redact: hide the values of chosen options in a ctl command line, for the
 * files any user may read (an operation's command, an error line). A name
 * list is NULL-terminated; an entry ending in '.' names every key with that
 * prefix ("env."), any other one key exactly ("param.password"). The line's
 * quoting is ctl's (common/ctl.c); a value becomes `<redacted>` whole, its
 * quotes with it. It knows no option's meaning.
 */
#ifndef NODEFS_REDACT_H
#define NODEFS_REDACT_H

#include <stdbool.h>
#include <stddef.h>

#include "sbuf.h"

#define REDACTED "<redacted>"

/* Whether key[0..len) is named by names (NULL: none is). */
bool redact_key(const char *key, size_t len, const char *const *names);
/* Append s[0..len) to out with the value of each option named by names
 * replaced by REDACTED. -ENOMEM. */
int redact_line(const char *s, size_t len, const char *const *names, struct sbuf *out);

/* A copy of a name list (NULL for NULL), freed with redact_names_free. */
char **redact_names_dup(const char *const *names);
void redact_names_free(char **names);

#endif
