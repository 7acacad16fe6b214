#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# test.sh: the whole test suite, as root, in two builds.
#   build/      debugoptimized
#   build-san/  -Db_sanitize=address,undefined: any ASan, LSan or UBSan
#               finding fails the test that caused it (by its exit status,
#               or by a sanitizer report in its output)
# Both with -Dtests=enabled -Dtest_hooks=true. Starts the run-wide fixtures
# (every executable tests/fixtures/*.sh: `start DIR` prints `export K=V`
# lines, evaluated here; `stop DIR` runs on every exit path), runs
# `meson test` in each build, stops the fixtures and ends with one line:
#   tests: N passed, M failed, K skipped
# counted over both builds from meson's testlog.json. Exits non-zero on any
# failure; with CI=true a skip is a failure too (and is listed).
#
# The stock-host lane (tests/host/run.sh: the .deb in a Debian 12 VM with
# systemd as PID 1 and cgroup v2) runs in the background beside the suite in
# a whole run; each of its checks counts as a test, host/NAME.
#
# Usage: scripts/test.sh [--quick] [MESON_TEST_ARGS...]
#   --quick   only build/ (no sanitizer build), and no stock-host lane
#   NODEFS_HOST_LANE=0 leaves the lane out of a whole run (a skip, counted
#   and named); NODEFS_HOST_LANE=1 runs it in a --quick run or a run of
#   chosen tests too.
#   MESON_TEST_ARGS go to `meson test`, e.g. test names or --suite.
# Environment: NODEFS_TEST_JOBS (tests at once; twice the cores by
# default), NODEFS_LOAD_SECONDS (reliability-load's length: 30 in build/,
# 15 in build-san by default). Exported to the tests: NODEFS_TIME_SCALE,
# the factor their wall-clock bounds scale by: 1, or 4 in build-san (as
# meson's --timeout-multiplier), times the tests run per core (rounded up).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
src=$PWD

builds=(build build-san)
while (($#)); do
	case $1 in
		-h|--help) awk 'NR > 3 && /^#/ { sub(/^# ?/, ""); print } /^set /{ exit }' "$0"; exit 0 ;;
		--quick) builds=(build); shift ;;
		*) break ;;
	esac
done
meson_test_args=("$@")
# Integration tests mostly wait (on daemons, containers, timers): run
# twice as many at once as there are cores (NODEFS_TEST_JOBS overrides).
jobs=${NODEFS_TEST_JOBS:-$(($(nproc) * 2))}

say() { printf 'test: [%4ds] %s\n' "$SECONDS" "$*"; }

if ((EUID != 0)); then
	say "WARNING: not root: integration tests will skip"
fi

# Any sanitizer finding ends the process with a non-zero status.
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=0:detect_leaks=1:exitcode=23:print_summary=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:print_summary=1
export LSAN_OPTIONS=exitcode=23:suppressions=$src/tests/lsan.supp:print_suppressions=0

extra_failed=0
failed_what=()

# A package that cannot be installed fails the run, but the rest still
# runs: the tests that need it skip (exit 77), the others tell what they can.
export NODEFS_DEPS_MISSING
NODEFS_DEPS_MISSING=$(mktemp /tmp/nodefs-deps-missing.XXXXXX)
if ! "$src/scripts/deps.sh"; then
	say "DEPENDENCIES FAILED: see above (scripts/packages.txt)"
	extra_failed=$((extra_failed + 1))
	failed_what+=("scripts/deps.sh")
fi

# The stock-host lane: started in the background once the packages are
# there (it builds its own .deb and, when not cached, its VM image), waited
# for before the counting. Its log goes to host-lane.log; its results
# (one per check) to host-lane.json.
host_lane=0
if ((${#meson_test_args[@]} == 0)) && [[ ${builds[*]} == "build build-san" ]]; then
	host_lane=1
fi
case ${NODEFS_HOST_LANE:-} in
	0) host_lane=skip ;;
	1) host_lane=1 ;;
esac
host_pid=
host_json=$src/host-lane.json
host_log=$src/host-lane.log
if [[ $host_lane == 1 ]]; then
	rm -f "$host_json"
	say "starting the stock-host lane in the background (tests/host/run.sh, log in host-lane.log)"
	# its own process group, so an interrupted run stops its VM too
	setsid "$src/tests/host/run.sh" --results "$host_json" >"$host_log" 2>&1 &
	host_pid=$!
elif [[ $host_lane == 0 ]]; then
	say "the stock-host lane does not run in a partial run (NODEFS_HOST_LANE=1 runs it)"
fi

# Compiles go through ccache (meson uses it when it is on PATH), with one
# cache for the machine: a run on a fresh clone compiles again only what
# changed since the last run here. The clone's path differs each time, so
# paths are hashed relative to it (the compile commands already are).
export CCACHE_DIR=${CCACHE_DIR:-/var/cache/nodefs-ccache}
export CCACHE_BASEDIR=$src CCACHE_NOHASHDIR=1
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}

setup_build() {
	local dir=$1; shift
	local opts=(--buildtype debugoptimized -Dtests=enabled -Dtest_hooks=true "$@")
	if [[ -f $dir/build.ninja ]]; then
		meson setup --reconfigure "$dir" "${opts[@]}" >"$dir.setup.log" 2>&1
	else
		meson setup "$dir" "${opts[@]}" >"$dir.setup.log" 2>&1
	fi || { cat "$dir.setup.log" >&2; return 1; }
	rm -f "$dir.setup.log"
}

declare -A built=()
for b in "${builds[@]}"; do
	case $b in
		build) san=() ;;
		build-san) san=(-Db_sanitize=address,undefined -Db_lundef=false) ;;
	esac
	say "configuring and building $b/"
	if ! setup_build "$b" "${san[@]}"; then
		say "CONFIGURE FAILED: $b/"
		extra_failed=$((extra_failed + 1))
		failed_what+=("meson setup of $b/")
		continue
	fi
	# Keep going past a broken target: the tests of what did build still
	# run (a test whose program is missing fails), and the build failure
	# counts once more.
	# build-san skips bench/ (not run here; build/ still compiles it): its
	# C++ gRPC baselines would double the slowest part of the build.
	targets=()
	if [[ $b == build-san ]]; then
		mapfile -t targets < <(meson introspect "$b" --targets | /usr/bin/python3 -c '
import json, os, sys
root = os.path.realpath(sys.argv[1])
for t in json.load(sys.stdin):
    if not t["build_by_default"] or "/bench/" in t["defined_in"]:
        continue
    for f in t["filename"]:
        print(os.path.relpath(f, root))' "$b")
	fi
	if ! ninja -C "$b" -k 0 "${targets[@]}"; then
		say "BUILD FAILED: $b/ (running the tests of what built)"
		extra_failed=$((extra_failed + 1))
		failed_what+=("build of $b/")
	fi
	built[$b]=1
done

# Every test of this run makes its temp dirs under run_tmp (TMPDIR), so
# what they leave behind (mounts, files) is told apart from other runs.
run_tmp=$(mktemp -d /tmp/nodefs-run.XXXXXX)
chmod 0755 "$run_tmp"	# tests run some programs as nobody
mounts_under() {	# deepest first
	awk -v d="$1/" 'index($2, d) == 1 { print length($2), $2 }' /proc/mounts |
		sort -rn | cut -d' ' -f2-
}
unmount_under() {
	local m
	while read -r m; do
		[[ -n $m ]] || continue
		umount -l "$m" 2>/dev/null || fusermount3 -u -z "$m" 2>/dev/null || true
	done < <(mounts_under "$1")
}
clear_run_tmp() {
	[[ -d $run_tmp ]] || return 0
	unmount_under "$run_tmp"
	if [[ -z $(mounts_under "$run_tmp") ]]; then
		rm -rf --one-file-system "$run_tmp"
	fi
}

# Run-wide fixtures. Stopped in reverse order on every exit path.
fixture_root=$(mktemp -d /tmp/nodefs-fixtures.XXXXXX)
started=()
stop_fixtures() {
	local i f
	for ((i = ${#started[@]} - 1; i >= 0; i--)); do
		f=${started[i]}
		"$f" stop "$fixture_root/$(basename "$f" .sh)" >/dev/null 2>&1 ||
			say "WARNING: $f stop failed"
	done
	started=()
	unmount_under "$fixture_root"
	rm -rf --one-file-system "$fixture_root"
}
trap 'stop_fixtures; clear_run_tmp; [[ -n $host_pid ]] && kill -- -$host_pid 2>/dev/null' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

shopt -s nullglob
for f in "$src"/tests/fixtures/*.sh; do
	[[ -x $f ]] || continue
	name=$(basename "$f" .sh)
	# rootfs-*.sh build test root filesystems for the fixtures; they are
	# not services and take other arguments
	[[ $name == rootfs-* ]] && continue
	say "starting fixture $name"
	started+=("$f")
	if out=$("$f" start "$fixture_root/$name"); then
		while IFS= read -r line; do
			if [[ $line =~ ^export\ [A-Za-z_][A-Za-z0-9_]*= ]]; then
				eval "$line"
			elif [[ -n $line ]]; then
				say "fixture $name: ignoring line: $line"
			fi
		done <<<"$out"
	else
		say "FIXTURE FAILED: $name (its tests will fail or skip)"
		extra_failed=$((extra_failed + 1))
		failed_what+=("fixture $name")
	fi
done
shopt -u nullglob


for b in "${builds[@]}"; do
	[[ -n ${built[$b]:-} ]] || continue
	mult=1
	[[ $b == build-san ]] && mult=4
	# the tests' own wall-clock bounds scale by the build's factor times
	# their share of a core (more tests at once than cores: each is slower)
	ncpu=$(nproc)
	time_scale=$((mult * ((jobs + ncpu - 1) / ncpu)))
	# the fixed-length load test runs at full length once per run (build/);
	# the sanitizer build runs it short: every command still goes through
	# ASan and UBSan, against the same checks
	load_s=${NODEFS_LOAD_SECONDS:-30}
	[[ $b == build-san ]] && load_s=${NODEFS_LOAD_SECONDS:-15}
	rm -f "$b/meson-logs/testlog.json"
	# meson test refuses to run anything when one test program is missing
	# (a target that failed to build): then name the runnable ones, and
	# count each missing one as failed.
	run_args=("${meson_test_args[@]}")
	if ((${#run_args[@]} == 0)); then
		sel=$(meson introspect "$b" --tests | /usr/bin/python3 -c '
import json, os, sys
for t in json.load(sys.stdin):
    prog = t["cmd"][0] if t["cmd"] else ""
    print(("run " if os.path.exists(prog) else "missing ") + t["name"])')
		if grep -q '^missing ' <<<"$sel"; then
			while read -r kind name; do
				if [[ $kind == run ]]; then
					run_args+=("$name")
				else
					say "not built, counted as failed: $b/$name"
					extra_failed=$((extra_failed + 1))
					failed_what+=("$b/$name (not built)")
				fi
			done <<<"$sel"
		fi
	fi
	say "running the tests of $b/"
	# (nodefs_test.scaled, tests/integration/test_time.h)
	TMPDIR=$run_tmp NODEFS_TIME_SCALE=$time_scale NODEFS_LOAD_SECONDS=$load_s \
		meson test -C "$b" --no-rebuild --print-errorlogs \
		--num-processes "$jobs" --timeout-multiplier "$mult" "${run_args[@]}" || true
	say "tests of $b/ done"
done

stop_fixtures
trap - EXIT

# Tests clean up after themselves, even on failure: anything left under
# run_tmp is a bug (a failure in CI), reported, then cleared here.
left=$(mounts_under "$run_tmp")
if [[ -n $left ]]; then
	say "mounts left behind by the tests: $(echo $left)"
	extra_failed=$((extra_failed + 1))
	failed_what+=("mounts left behind")
fi
leftfiles=$(find "$run_tmp" -mindepth 1 -maxdepth 1 2>/dev/null | head -20)
if [[ -n $leftfiles ]]; then
	say "temp files left behind by the tests: $(echo $leftfiles)"
	if [[ ${CI:-} == true ]]; then
		extra_failed=$((extra_failed + 1))
		failed_what+=("temp files left behind")
	fi
fi
clear_run_tmp

# The stock-host lane's end: each check is a test (host/NAME).
host_rc=
if [[ -n $host_pid ]]; then
	say "waiting for the stock-host lane"
	host_rc=0
	wait "$host_pid" || host_rc=$?
	host_pid=
	grep -E '^host: (ok|FAIL|SKIP|\[)' "$host_log" | sed 's/^/  /' || true
	say "stock-host lane done (exit $host_rc; log host-lane.log)"
fi
export NODEFS_HOST_RC=$host_rc NODEFS_HOST_JSON=$host_json NODEFS_HOST_LANE_MODE=$host_lane

# Count over both builds. A build whose tests did not run has no testlog.
counts=$(/usr/bin/python3 - "${builds[@]}" <<'PY'
import json, os, re, sys
p = f = s = excused = 0
# optional packages deps.sh could not install (the registry did not answer)
try:
    with open(os.environ.get("NODEFS_DEPS_MISSING", "")) as fh:
        unavailable = set(fh.read().split())
except OSError:
    unavailable = set()
for b in sys.argv[1:]:
    log = os.path.join(b, "meson-logs", "testlog.json")
    if not os.path.exists(log):
        continue
    with open(log) as fh:
        for line in fh:
            if not line.strip():
                continue
            t = json.loads(line)
            r = t.get("result")
            out = (t.get("stdout") or "") + (t.get("stderr") or "")
            # criterion 2.4 reports a crash after a test's body (teardown,
            # exit: where LeakSanitizer runs) as a warning and still passes:
            # a sanitizer report in the output fails the test here.
            if r == "OK" and any(m in out for m in (
                    "ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                    ": runtime error: ")):
                r = "SANITIZER"
            if r in ("OK", "EXPECTEDFAIL"):
                p += 1
            elif r == "SKIP":
                s += 1
                lacks = set(re.findall(r"Debian package ([a-z0-9.+-]+)", out)) & unavailable
                if lacks:
                    excused += 1
                    print("unavailable %s/%s lacks %s" % (b, t.get("name"), " ".join(sorted(lacks))))
                else:
                    print("skipped %s/%s" % (b, t.get("name")))
            else:
                f += 1
                print("failed %s/%s (%s)" % (b, t.get("name"), r))
# the stock-host lane: one test per check; a lane that did not run its
# checks (a missing prerequisite: exit 77) is one skipped test, one that
# ended without results one failed test
mode = os.environ.get("NODEFS_HOST_LANE_MODE")
if mode == "skip":
    s += 1
    print("skipped host-lane (NODEFS_HOST_LANE=0)")
elif mode == "1":
    rc = os.environ.get("NODEFS_HOST_RC", "")
    try:
        with open(os.environ["NODEFS_HOST_JSON"]) as fh:
            checks = json.load(fh).get("checks", [])
    except (OSError, ValueError, KeyError):
        checks = []
    if rc == "77":
        s += 1
        print("skipped host-lane (a prerequisite is missing: see host-lane.log)")
    elif not checks:
        f += 1
        print("failed host-lane (exit %s, no results: see host-lane.log)" % rc)
    for c in checks:
        if c.get("ok"):
            p += 1
        else:
            f += 1
            print("failed host/%s (%s)" % (c.get("name"), (c.get("detail") or "")[:300]))
print("counts %d %d %d %d" % (p, f, s, excused))
PY
)
passed=0 failed=0 skipped=0 excused=0
while read -r kind rest; do
	case $kind in
		counts) read -r passed failed skipped excused <<<"$rest" ;;
		failed|skipped) say "$kind: $rest" ;;
		unavailable) say "SKIPPED FOR WANT OF A PACKAGE THE REGISTRY DID NOT SERVE: $rest" ;;
	esac
done <<<"$counts"
for w in "${failed_what[@]}"; do
	say "failed: $w"
done
failed=$((failed + extra_failed))

status=0
((failed == 0)) || status=1
rm -f "$NODEFS_DEPS_MISSING"
if [[ ${CI:-} == true ]] && ((skipped > excused)); then
	say "CI=true: a skip is a bug here (see the skipped tests above)"
	status=1
fi
echo "tests: $passed passed, $failed failed, $skipped skipped"
exit $status
