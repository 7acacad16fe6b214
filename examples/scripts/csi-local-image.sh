#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# csi-local-image.sh [BINARY [TAG]]: make a Docker image of the built-in CSI
# plugin, for a [plugin] section with `runtime = docker` (see the commented
# `local-docker` section of examples/nodefs.conf and nodefs(5)).
#
# The image holds BINARY (default: nodefs-csi-local from PATH) as
# /nodefs-csi-local, the shared libraries ldd names and the loader, and
# nothing else: enough for the `dir` backing (the `image` backing also needs
# mkfs, losetup's loop devices and a privileged container). It is imported
# with `docker import` (DOCKER_HOST is honoured) as TAG (default
# nodefs/csi-local:latest), and TAG is printed.
set -euo pipefail

case "${1:-}" in
-h|--help)
	echo "usage: csi-local-image.sh [BINARY [TAG]]"
	echo "Makes a Docker image of nodefs-csi-local (BINARY, default from PATH) tagged"
	echo "TAG (default nodefs/csi-local:latest) by docker import, and prints TAG."
	exit 0 ;;
esac
bin=${1:-$(command -v nodefs-csi-local || true)}
tag=${2:-nodefs/csi-local:latest}
[ -n "$bin" ] && [ -x "$bin" ] || { echo "csi-local-image.sh: no nodefs-csi-local binary" >&2; exit 1; }

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/proc" "$root/sys" "$root/dev" "$root/tmp" "$root/etc"
cp -L "$bin" "$root/nodefs-csi-local"
# each line of ldd names one library (or the loader) by its absolute path
ldd "$bin" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) { print $i; break } }' |
	while read -r lib; do
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
	done
tar -C "$root" -c . | docker import - "$tag" >/dev/null
echo "$tag"
