#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# setup.sh: from a clean clone to a mounted /run/nodefs, as root.
#   1. installs missing Debian packages (scripts/deps.sh),
#   2. builds build/ (debugoptimized, no test hooks) and installs the binary
#      and man pages under PREFIX (default /usr/local),
#   3. installs examples/nodefs.conf as /etc/nodefs/nodefs.conf only when no
#      config exists there (an existing one is never touched),
#   4. stops a nodefs already serving the mountpoint and clears a stale or
#      dead ("Transport endpoint is not connected") mount there,
#   5. mounts nodefs at the mountpoint (daemonized) and checks that
#      `cat MOUNTPOINT/status` answers READY.
# Re-runnable: a second run rebuilds, reinstalls and remounts.
#
# Environment: PREFIX (/usr/local), NODEFS_MOUNTPOINT (/run/nodefs),
# NODEFS_CONFIG (/etc/nodefs/nodefs.conf), BUILD_DIR (build).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
src=$PWD
prefix=${PREFIX:-/usr/local}
mnt=${NODEFS_MOUNTPOINT:-/run/nodefs}
conf=${NODEFS_CONFIG:-/etc/nodefs/nodefs.conf}
build=${BUILD_DIR:-build}

case ${1:-} in
	-h|--help) awk 'NR > 3 && /^#/ { sub(/^# ?/, ""); print } /^set /{ exit }' "$0"; exit 0 ;;
	'') ;;
	*) echo "setup.sh: unknown argument: $1" >&2; exit 2 ;;
esac

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup.sh: %s\n' "$*" >&2; exit 1; }

((EUID == 0)) || die "run as root (sudo $0)"

# 1. Packages. Some are only for tests: go on when they cannot be had, and
# let the build say whether what it needs is there.
"$src/scripts/deps.sh" || say "WARNING: scripts/deps.sh failed; trying to build anyway"

# 2. Build and install.
if [[ -f $build/build.ninja ]]; then
	meson setup --reconfigure "$build" --prefix "$prefix" \
		--buildtype debugoptimized -Dtest_hooks=false >/dev/null
else
	meson setup "$build" --prefix "$prefix" --buildtype debugoptimized \
		-Dtest_hooks=false >/dev/null
fi
say "building $build/"
ninja -C "$build"
meson install -C "$build" --no-rebuild --quiet
bin=$prefix/bin/nodefs
[[ -x $bin ]] || die "$bin not installed"
say "installed $("$bin" --version | head -n 1) as $bin (man pages: nodefs(8), nodefs(5))"

# 3. Config: the example only where none exists.
if [[ -e $conf ]]; then
	say "keeping existing $conf"
else
	install -d -m 0755 "$(dirname "$conf")"
	install -m 0644 examples/nodefs.conf "$conf"
	say "installed examples/nodefs.conf as $conf"
fi

# 4. Whatever is on the mountpoint now: a running nodefs, or a dead mount.
mounted() { awk -v m="$mnt" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; }

# PIDs of nodefs processes whose last argument is the mountpoint.
serving_pids() {
	local d argv
	for d in /proc/[0-9]*; do
		[[ -r $d/cmdline ]] || continue
		mapfile -d '' -t argv <"$d/cmdline" 2>/dev/null || continue
		((${#argv[@]} > 1)) || continue
		[[ ${argv[0]##*/} == nodefs && ${argv[-1]} == "$mnt" ]] || continue
		echo "${d#/proc/}"
	done
}

pids=$(serving_pids)
if [[ -n $pids ]]; then
	say "stopping the nodefs serving $mnt (pid $(echo $pids))"
	kill -TERM $pids 2>/dev/null || true
	for _ in $(seq 100); do
		[[ -z $(serving_pids) ]] && break
		sleep 0.1
	done
	[[ -z $(serving_pids) ]] || die "nodefs (pid $(echo $(serving_pids))) did not exit on SIGTERM"
fi
if mounted; then
	if ! stat -t "$mnt" >/dev/null 2>&1; then
		say "clearing dead mount on $mnt"
	else
		say "clearing stale mount on $mnt"
	fi
	fusermount3 -u -z "$mnt" 2>/dev/null || umount -l "$mnt"
	! mounted || die "$mnt still mounted"
fi
install -d -m 0755 "$mnt"

# 5. Mount (the daemon returns once mounted) and check.
"$bin" --config "$conf" "$mnt" || die "nodefs failed to start (see above)"
status=
for _ in $(seq 50); do
	status=$(cat "$mnt/status" 2>/dev/null) && [[ -n $status ]] && break
	sleep 0.1
done
[[ -n $status ]] || die "$mnt/status does not answer"
printf '%s\n' "$status"
grep -q '^state: ' <<<"$status" || die "$mnt/status has no state line"
say "nodefs is mounted at $mnt; try: ls $mnt; cat $mnt/status"
