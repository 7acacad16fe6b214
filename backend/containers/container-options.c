/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * container-options: the table of every option `containers/ctl` create and
 * run take, one row an option (struct copt, container-options.h). Nothing
 * else lives here: the kinds of value and the passes over the table are in
 * container-optparse.c. A new option is a row, a field of struct cspec and a
 * line in docs/nodefs.5's options table.
 */
#include "container-options.h"

#include <stddef.h>

#define F(field) offsetof(struct cspec, field)
#define D COPT_DOCKER
#define L COPT_LXC
#define ALL COPT_ALL

const struct copt container_options[] = {
	{ .name = "runtime", .syntax = "docker|lxc", .kind = &copt_none, .runtimes = ALL,
	  .required = ALL, .flags = COPT_NOFIELD, .help = "the runtime that runs it" },
	{ .name = "image", .syntax = "IMG", .kind = &copt_string, .off = F(image), .runtimes = D,
	  .required = D, .help = "the image (pulled when the engine lacks it)" },
	{ .name = "cmd", .syntax = "'ARGV ...'", .kind = &copt_words, .off = F(argv),
	  .runtimes = ALL, .help = "the command (LXC: run as init instead of the system's)" },
	{ .name = "env.", .syntax = "K=V", .kind = &copt_kv, .off = F(env), .runtimes = ALL,
	  .flags = COPT_REPEAT | COPT_SECRET, .json = "env", .help = "an environment variable" },
	{ .name = "cpus", .syntax = "N", .kind = &copt_cpus, .off = F(cpus), .runtimes = ALL,
	  .help = "CPUs, a fraction allowed (0.5)" },
	{ .name = "memory", .syntax = "SIZE", .kind = &copt_size, .off = F(memory),
	  .runtimes = ALL, .min = 4 << 20, .help = "memory limit, at least 4M" },
	{ .name = "pids", .syntax = "N", .kind = &copt_int, .off = F(pids), .runtimes = ALL,
	  .min = 1, .max = 4194304, .help = "process count limit" },
	{ .name = "volume", .syntax = "VOLNAME:/path[:ro]", .kind = &copt_mount, .off = F(mounts),
	  .runtimes = ALL, .flags = COPT_REPEAT, .json = "mounts",
	  .help = "a PUBLISHED nodefs volume, bind-mounted at /path" },
	{ .name = "bind", .syntax = "/host:/path[:ro]", .kind = &copt_mount, .off = F(mounts),
	  .runtimes = ALL, .flags = COPT_REPEAT, .json = "mounts",
	  .help = "a host path under allowed_targets, bind-mounted at /path" },
	{ .name = "template", .syntax = "T", .kind = &copt_string, .off = F(template_name),
	  .runtimes = L, .json = "template_name", .help = "LXC template (default busybox)" },
	{ .name = "distro", .syntax = "D", .kind = &copt_string, .off = F(distro), .runtimes = L,
	  .help = "template=download: -d" },
	{ .name = "release", .syntax = "R", .kind = &copt_string, .off = F(release),
	  .runtimes = L, .help = "template=download: -r" },
	{ .name = "arch", .syntax = "A", .kind = &copt_string, .off = F(arch), .runtimes = L,
	  .help = "template=download: -a" },
	{ .name = "image_variant", .syntax = "V", .kind = &copt_string, .off = F(image_variant),
	  .runtimes = L, .help = "template=download: --variant" },
	{ .name = "image_server", .syntax = "HOST", .kind = &copt_string, .off = F(image_server),
	  .runtimes = L, .help = "template=download: --server" },
	{ .name = "template_args", .syntax = "'ARG ...'", .kind = &copt_words,
	  .off = F(template_args), .runtimes = L, .help = "more template arguments" },
	{ .name = "flush_cache", .syntax = "BOOL", .kind = &copt_bool, .off = F(flush_cache),
	  .runtimes = L, .help = "template=download: --flush-cache" },
	{ .name = "force_cache", .syntax = "BOOL", .kind = &copt_bool, .off = F(force_cache),
	  .runtimes = L, .help = "template=download: --force-cache" },
	{ .name = "disable_gpg", .syntax = "BOOL", .kind = &copt_bool, .off = F(disable_gpg),
	  .runtimes = L, .help = "template=download: --no-validate" },
	{ .name = "user", .syntax = "USER[:GROUP]", .kind = &copt_string, .off = F(user),
	  .runtimes = ALL, .check = copt_check_user,
	  .help = "run as this user (names from the image's /etc/passwd, /etc/group)" },
	{ .name = "workdir", .syntax = "PATH", .kind = &copt_string, .off = F(workdir),
	  .runtimes = ALL, .check = copt_check_abspath, .help = "the command's directory" },
	{ .name = "entrypoint", .syntax = "'ARGV ...'", .kind = &copt_words, .off = F(entrypoint),
	  .runtimes = ALL, .min = 1, .help = "the entrypoint (LXC: put before cmd)" },
	{ .name = "hostname", .syntax = "NAME", .kind = &copt_string, .off = F(hostname),
	  .runtimes = ALL, .check = copt_check_hostname, .help = "the container's host name" },
	{ .name = "label.", .syntax = "K=V", .kind = &copt_kv, .off = F(labels), .runtimes = ALL,
	  .flags = COPT_REPEAT, .json = "labels", .check = copt_check_label,
	  .help = "a label (not under io.nodefs.); LXC: kept in the owner mark" },
	{ .name = "force_pull", .syntax = "BOOL", .kind = &copt_bool, .off = F(force_pull),
	  .runtimes = D, .help = "pull the image even when the engine has it (LXC: flush_cache)" },
	{ .name = "sandbox", .syntax = "BOOL", .kind = &copt_nbool, .off = F(no_sandbox),
	  .runtimes = ALL, .help = "no: no sandbox directory (default yes)" },
	{ .name = "sandbox_path", .syntax = "PATH", .kind = &copt_string, .off = F(sandbox_path),
	  .runtimes = ALL, .check = copt_check_abspath,
	  .help = "where the sandbox is mounted inside (default /sandbox)" },
	{ .name = "sandbox_size", .syntax = "SIZE", .kind = &copt_size, .off = F(sandbox_size),
	  .runtimes = ALL, .help = "what fetches may write into the sandbox (EFBIG past it)" },
	{ .name = "fetch", .syntax = "'URI [sha256=HEX] [extract] [executable] [dest=RELPATH]'",
	  .kind = &copt_fetch, .off = F(fetches), .runtimes = ALL, .flags = COPT_REPEAT,
	  .json = "fetches", .help = "download into the sandbox before the first start" },
};

const size_t container_noptions = sizeof(container_options) / sizeof(container_options[0]);
