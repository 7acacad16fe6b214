/* SPDX-License-Identifier: LGPL-2.1-or-later */ /* placeholder, being written */
#include "runtime.h"
const struct runtime_ops rt_docker_ops = { .name = "docker" };
