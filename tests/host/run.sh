#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# run.sh: the stock-host lane. Builds the Debian package from this checkout,
# takes the cached Debian 12 image (image.sh), boots it under QEMU with
# Debian's kernel and initrd (systemd as PID 1, cgroup v2, AppArmor on, no
# network: -nic none), and lets the check set (checks/) run inside as a
# systemd unit: it installs the .deb with dpkg -i and checks what a user of
# a stock host sees, reboots the VM once halfway, and powers it off at the
# end. The .deb and the check set go in on a second virtio disk (an ext4
# image made with mke2fs -d); the results come out on the same disk, read
# with debugfs: no loop mount on this side. The VM's root is a qcow2
# overlay per run over the cached image, which stays clean.
#
# Prints one line per check (`host: ok NAME` or `host: FAIL NAME: why`) and
# ends with `host: N passed, M failed`; exits 0 when every check passed,
# 1 otherwise, 77 when a prerequisite is missing (qemu-system-x86,
# mmdebstrap, dpkg-dev: scripts/packages.txt installs them).
# --results FILE writes {"checks": [{"name", "ok", "detail"}...], ...} for
# scripts/test.sh. Knows nothing of nodefs's files: that is checks/'s part.
#
# QEMU (qemu.sh): KVM where /dev/kvm is hardware virtualization, TCG
# otherwise (these machines' KVM-PVM boots no stock kernel);
# NODEFS_HOST_ACCEL=kvm|tcg overrides.
#
# Environment: NODEFS_HOST_DEB (use this .deb instead of building one),
# NODEFS_HOST_CACHE (image.sh), NODEFS_HOST_KEEP=1 (keep the run's
# directory: serial log, overlay, lane disk), NODEFS_HOST_TIMEOUT (seconds
# the VM may run, default 1800).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
results_out=
while (($#)); do
	case $1 in
		--results) results_out=$2; shift 2 ;;
		-h|--help) awk 'NR > 3 && /^#/ { sub(/^# ?/, ""); print } /^set /{ exit }' "$0"; exit 0 ;;
		*) echo "run.sh: unknown argument: $1" >&2; exit 2 ;;
	esac
done

say() { printf 'host: [%4ds] %s\n' "$SECONDS" "$*"; }

missing=()
for p in qemu-system-x86_64 qemu-img mmdebstrap mke2fs debugfs dpkg-buildpackage; do
	command -v "$p" >/dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
	say "SKIP: missing ${missing[*]} (scripts/packages.txt: qemu-system-x86, qemu-utils, mmdebstrap, e2fsprogs, dpkg-dev)"
	exit 77
fi
if ((EUID != 0)); then
	say "SKIP: not root (mmdebstrap and the image cache need root)"
	exit 77
fi

work=$(mktemp -d /var/tmp/nodefs-host-run.XXXXXX)
cleanup() {
	if [[ ${NODEFS_HOST_KEEP:-0} == 1 ]]; then
		say "kept $work"
	else
		rm -rf --one-file-system "$work"
	fi
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

# 1. The package, built from this checkout as test_package.py builds it
# (the files git tracks, or the tree without build directories).
lane=$work/lane
mkdir -p "$lane/results"
build_deb() {
	local s=$work/src
	mkdir -p "$s"
	if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
		git -C "$src" ls-files -co --exclude-standard -z |
			(cd "$src" && xargs -0 cp --parents -t "$s" 2>/dev/null) || true
	else
		tar -C "$src" --exclude='./build*' --exclude='./obj-*' --exclude='./.*' -cf - . |
			tar -C "$s" -xf -
	fi
	(cd "$s" && env -u MAKEFLAGS DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" \
		dpkg-buildpackage -us -uc -b) >"$work/deb-build.log" 2>&1
}
t0=$SECONDS
if [[ -n ${NODEFS_HOST_DEB:-} ]]; then
	cp "$NODEFS_HOST_DEB" "$lane/"
	say "package: $NODEFS_HOST_DEB"
else
	say "building the package (dpkg-buildpackage)"
	if ! build_deb; then
		tail -40 "$work/deb-build.log"
		say "FAIL: the package did not build"
		exit 1
	fi
	cp "$work"/nodefs_*.deb "$lane/"
	rm -rf --one-file-system "$work/src"
	say "package built in $((SECONDS - t0)) s: $(basename "$lane"/nodefs_*.deb)"
fi
t_deb=$((SECONDS - t0))

# 2. The image (cached).
t0=$SECONDS
img=$("$here/image.sh" | tail -1)
t_image=$((SECONDS - t0))
say "image: $img ($t_image s)"

# 3. The lane disk: the check set, the fixtures it uses, the .deb.
cp "$here"/checks/*.py "$here"/checks/*.sh "$lane/"
cp "$src/tests/fixtures/rootfs-busybox.sh" "$src/tests/fixtures/lxc-templates.sh" "$lane/"
cp "$src/README.md" "$lane/"
mke2fs -q -t ext4 -L nodefs-lane -d "$lane" -F "$work/lane.img" 512M >/dev/null
qemu-img create -q -f qcow2 -b "$img/root.img" -F raw "$work/root.qcow2"

# 4. Boot; the check set powers the VM off at its end.
timeout_s=${NODEFS_HOST_TIMEOUT:-1800}
serial=$work/serial.log
say "booting (serial console in $serial)"
t0=$SECONDS
status=0
"$here/qemu.sh" --root "$work/root.qcow2" --root-format qcow2 --disk "$work/lane.img" \
	--kernel "$img/vmlinuz" --initrd "$img/initrd.img" --serial "$serial" \
	--timeout "$timeout_s" >"$work/qemu.out" 2>&1 || status=1
sed 's/^/host: /' "$work/qemu.out"
accel=$(sed -n 's/^qemu: \(kvm\|tcg\),.*/\1/p' "$work/qemu.out")
t_vm=$((SECONDS - t0))
((status == 0)) || say "FAIL: the VM did not power off by itself"
say "VM ran $t_vm s"

# 5. The results, from the lane disk.
res=$work/results.json
e2fsck -p "$work/lane.img" >/dev/null 2>&1 || true
if ! debugfs -R "dump /results/results.json $res" "$work/lane.img" >/dev/null 2>&1 || [[ ! -s $res ]]; then
	echo '{"checks": [], "complete": false}' >"$res"
fi
debugfs -R "dump /results/vm.log $work/vm.log" "$work/lane.img" >/dev/null 2>&1 || true
python3 - "$res" "$t_deb" "$t_image" "$t_vm" "$accel" "$results_out" <<'PY' || status=1
import json, sys
res, t_deb, t_image, t_vm, accel, out = sys.argv[1:]
r = json.load(open(res))
checks = r.get("checks", [])
if not r.get("complete"):
    checks.append({"name": "lane-complete", "ok": False,
                   "detail": "the check set did not finish (see the serial log)"})
p = f = 0
for c in checks:
    if c["ok"]:
        p += 1
        print("host: ok   %s" % c["name"])
    else:
        f += 1
        print("host: FAIL %s: %s" % (c["name"], c.get("detail", "")))
r["checks"] = checks
r["seconds"] = {"deb": int(t_deb), "image": int(t_image), "vm": int(t_vm)}
r["accel"] = accel
if out:
    json.dump(r, open(out, "w"), indent=1)
print("host: %d passed, %d failed" % (p, f))
sys.exit(1 if f else 0)
PY
if ((status)); then
	say "serial console, last lines:"
	tail -60 "$serial" | sed 's/^/  | /'
fi
say "package $t_deb s, image $t_image s, VM $t_vm s, lane $SECONDS s"
exit $status
