#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# qemu.sh: boot the stock-host lane's VM once and wait until it powers
# itself off. Debian's kernel and initrd (-kernel, -initrd), root on the
# first virtio disk, systemd as PID 1 (cgroup v2, Debian 12's default), the
# serial console to a file, no network (-nic none), no other device.
# A guest reboot restarts the same kernel: the VM ends only at power-off.
#
# Usage: qemu.sh --root IMG [--root-format raw|qcow2] [--disk RAW]
#                --kernel F --initrd F --serial LOG [--timeout S]
#                [--append 'KERNEL ARGS']
# Exits 0 when the VM powered off, 124 when it still ran after S seconds
# (default 1200; it is then killed), 1 when QEMU failed.
#
# Acceleration: KVM where /dev/kvm is hardware virtualization (a vmx or svm
# CPU flag, and not KVM-PVM, which boots no stock kernel), TCG otherwise
# (-accel tcg,thread=multi). NODEFS_HOST_ACCEL=kvm|tcg overrides. Prints
# the one it chose. Knows nothing of what the VM does.
set -euo pipefail

root= fmt=raw disk= kernel= initrd= serial= timeout_s=1200 append=
while (($#)); do
	case $1 in
		--root) root=$2 ;;
		--root-format) fmt=$2 ;;
		--disk) disk=$2 ;;
		--kernel) kernel=$2 ;;
		--initrd) initrd=$2 ;;
		--serial) serial=$2 ;;
		--timeout) timeout_s=$2 ;;
		--append) append=$2 ;;
		*) echo "qemu.sh: unknown argument: $1" >&2; exit 2 ;;
	esac
	shift 2
done
[[ -n $root && -n $kernel && -n $initrd && -n $serial ]] ||
	{ echo "qemu.sh: --root, --kernel, --initrd and --serial are required" >&2; exit 2; }

accel=${NODEFS_HOST_ACCEL:-}
if [[ -z $accel ]]; then
	accel=tcg
	if [[ -r /dev/kvm && -w /dev/kvm && ! -d /sys/module/kvm_pvm ]] &&
	   grep -qE '^flags.*\b(vmx|svm)\b' /proc/cpuinfo; then
		accel=kvm
	fi
fi
case $accel in
	kvm) accel_args=(-accel kvm -cpu host) ;;
	# (-cpu max with svm=off breaks the guest's glibc: /proc/self/exe
	# asserts in the initrd)
	tcg) accel_args=(-accel tcg,thread=multi -cpu max) ;;
	*) echo "qemu.sh: NODEFS_HOST_ACCEL is kvm or tcg, not $accel" >&2; exit 2 ;;
esac
echo "qemu: $accel, $(nproc) CPUs, at most $timeout_s s"

drives=(-drive "file=$root,format=$fmt,if=virtio,cache=unsafe")
[[ -n $disk ]] && drives+=(-drive "file=$disk,format=raw,if=virtio,cache=writeback")

qemu_pid=
trap '[[ -n $qemu_pid ]] && kill $qemu_pid 2>/dev/null' EXIT
# -nodefaults: no CD-ROM, floppy, parallel port or VGA to probe at boot.
# No kvm modules in the guest (TCG's max CPU offers SVM): with kvm_amd
# loaded, udev spun on both CPUs after a guest reboot.
qemu-system-x86_64 "${accel_args[@]}" -smp "$(nproc)" -m 3072 -nodefaults \
	-display none -monitor none -serial "file:$serial" -nic none \
	-kernel "$kernel" -initrd "$initrd" \
	-append "root=/dev/vda rw console=ttyS0 panic=-1 quiet systemd.show_status=error modprobe.blacklist=kvm_amd,kvm_intel $append" \
	"${drives[@]}" -device virtio-rng-pci &
qemu_pid=$!
t0=$SECONDS
while kill -0 "$qemu_pid" 2>/dev/null; do
	if ((SECONDS - t0 > timeout_s)); then
		echo "qemu: the VM still runs after $timeout_s s: killing it" >&2
		kill "$qemu_pid"
		wait "$qemu_pid" 2>/dev/null || true
		qemu_pid=
		exit 124
	fi
	sleep 1
done
rc=0
wait "$qemu_pid" || rc=$?
qemu_pid=
((rc == 0)) || { echo "qemu: exit $rc" >&2; exit 1; }
