#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# setup.sh: from a clean clone to a mounted /run/nodefs, as root.
#   1. installs missing Debian packages (scripts/deps.sh),
#   2. builds build/ (debugoptimized, no test hooks) and installs the binary
#      and man pages under PREFIX (default /usr/local),
#   3. installs examples/nodefs.conf as /etc/nodefs/nodefs.conf when no
#      config exists there, or when the one there is an unmodified copy of an
#      earlier examples/nodefs.conf (kept as nodefs.conf.old); a config that
#      was edited is never touched,
#   4. stops a nodefs already serving the mountpoint and clears a stale or
#      dead ("Transport endpoint is not connected") mount there,
#   5. mounts nodefs at the mountpoint (daemonized) and checks that
#      `cat MOUNTPOINT/status` answers READY,
#   6. prints what works: each plugin's health (the example config starts the
#      built-in plugin, nodefs-csi-local), each runtime's status, and for a
#      runtime that is down the one command that brings it up here.
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

((EUID == 0)) || die "run as root (as root: $0; or with sudo: sudo $0)"

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

# 3. Config: the example where none exists, or over an unmodified copy of
# an earlier example (its blob is in the history of examples/nodefs.conf).
shipped_before() {
	local blob
	command -v git >/dev/null && git -C "$src" rev-parse --git-dir >/dev/null 2>&1 || return 1
	blob=$(git -C "$src" hash-object "$conf") || return 1
	git -C "$src" log --format=%H -- examples/nodefs.conf 2>/dev/null | while read -r c; do
		[[ $(git -C "$src" rev-parse "$c:examples/nodefs.conf" 2>/dev/null) == "$blob" ]] && echo yes && break
	done | grep -q yes
}
if [[ -e $conf ]] && cmp -s "$conf" examples/nodefs.conf; then
	say "keeping $conf (the current example)"
elif [[ -e $conf ]] && shipped_before; then
	cp -p "$conf" "$conf.old"
	install -m 0644 examples/nodefs.conf "$conf"
	say "replaced $conf, an unmodified earlier example, with examples/nodefs.conf (old one: $conf.old)"
elif [[ -e $conf ]]; then
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
say "nodefs is mounted at $mnt"

# 6. What works. Plugins nodefs starts need a moment to listen and answer
# Probe: wait (at most 15 s) until none is still starting.
plugins=()
for d in "$mnt"/plugins/*/; do
	[[ -d $d ]] && plugins+=("$(basename "$d")")
done
starting() {
	local p h
	for p in "${plugins[@]}"; do
		h=$(cat "$mnt/plugins/$p/health" 2>/dev/null) || continue
		[[ $h == READY* ]] && continue
		grep -q '^pid: [0-9]' "$mnt/plugins/$p/process" 2>/dev/null && return 0
		[[ $h == *"not started yet"* ]] && return 0
	done
	return 1
}
for _ in $(seq 150); do
	starting || break
	sleep 0.1
done
for p in "${plugins[@]}"; do
	h=$(cat "$mnt/plugins/$p/health" 2>/dev/null || echo "unreadable")
	say "plugin $p: $h"
	if [[ $h != READY* ]] && grep -q '^external:' "$mnt/plugins/$p/process" 2>/dev/null; then
		say "  (an external plugin: start it listening on $(cat "$mnt/plugins/$p/endpoint"))"
	elif [[ $h != READY* ]]; then
		say "  (its output: cat $mnt/plugins/$p/log)"
	fi
done

# The one command that brings a runtime up on this machine.
has_init() { [[ -d /run/systemd/system ]]; }
runtime_fix() {
	case $1 in
	docker)
		if ! command -v dockerd >/dev/null; then
			echo "apt-get install -y docker.io"
		elif has_init; then
			echo "systemctl start docker"
		elif [[ -x /etc/init.d/docker ]] && command -v service >/dev/null; then
			echo "service docker start"
		else
			# no init system to start it: run it in the background
			local flags=""
			command -v iptables >/dev/null || flags=" --iptables=false --ip-masq=false --bridge=none"
			echo "setsid dockerd$flags >/var/log/dockerd.log 2>&1 < /dev/null &"
		fi ;;
	lxc)
		# liblxc is linked in; what can be missing is the lxcpath
		local path
		path=$(awk -F' *= *' '/^\[runtime lxc\]/ { s = 1; next } /^\[/ { s = 0 }
			s && $1 == "lxcpath" { print $2 }' "$conf")
		echo "mkdir -p ${path:-/var/lib/lxc}" ;;
	*) echo "" ;;
	esac
}
for d in "$mnt"/runtimes/*/; do
	[[ -d $d ]] || continue
	rt=$(basename "$d")
	st=$(head -n 1 "$d/status" 2>/dev/null || echo "unreadable")
	say "runtime $rt: $st"
	if [[ $st != healthy* ]]; then
		fix=$(runtime_fix "$rt")
		[[ -n $fix ]] && say "  to bring it up: $fix   (nodefs sees it within 5 s)"
	fi
done
say "try: ls $mnt; cat $mnt/status; the README's tour (echo 'create db size=1G profile=fast' > $mnt/volumes/ctl)"
