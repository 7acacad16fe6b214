#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# run-with-fetch.sh: launch a workload the way a scheduler would: a release
# tarball downloaded and checked (sha256), unpacked into the container's
# sandbox, run as an unprivileged user from its directory (nodefs(5),
# containers/: fetch=, user=, workdir=). Waits for the launch, shows the
# fetch file, and prints the container's state.
#
# Usage: run-with-fetch.sh NAME URL SHA256 [IMAGE]
#   e.g. run-with-fetch.sh web https://example.org/app-1.2.tar.gz 3f7a...e1 debian:12
set -eu
usage() {
	echo "usage: run-with-fetch.sh NAME URL SHA256 [IMAGE]   (NODEFS_MNT: the mount, default /run/nodefs)"
}
case "${1:-}" in
-h|--help) usage; exit 0 ;;
esac
[ $# -ge 3 ] && [ $# -le 4 ] || { usage >&2; exit 2; }
mnt=${NODEFS_MNT:-/run/nodefs}
name=$1 url=$2 digest=$3 image=${4:-debian:12}

# One line, one write: the run returns once the container runs (or fails,
# with the reason in containers/error).
if ! printf "%s\n" "run $name runtime=docker image=$image user=nobody workdir=/sandbox/app \
fetch='$url sha256=$digest extract dest=app' label.app=$name \
cmd='./bin/start'" >"$mnt/containers/ctl"; then
	echo "run-with-fetch: $(cat "$mnt/containers/error")" >&2
	exit 1
fi
cat "$mnt/containers/$name/fetch"
cat "$mnt/containers/$name/state"
