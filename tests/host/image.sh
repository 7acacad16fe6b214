#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# image.sh: the stock-host lane's Debian 12 VM image, built once and cached.
# Prints the cache directory holding it (its last line of output; progress
# goes to stderr):
#   root.img     ext4 image of the root filesystem (raw, sparse), the base
#                of a qcow2 overlay per run: never written by a run
#   vmlinuz, initrd.img   Debian's kernel and initrd, from the image's /boot
#   packages.lst what is installed (dpkg-query), for the record
# Built by mmdebstrap (minbase, the packages of image-packages.txt, then
# image-setup.sh as customize hook) from the package registry the machine's
# apt already uses: the enabled files of /etc/apt/sources.list(.d) are
# handed to mmdebstrap as they are, so no mirror is named here. The ext4
# image is made by `mke2fs -d` (no loop mount), then booted once under QEMU
# (qemu.sh) and powered off: what a fresh system does at its first boot
# (machine id, AppArmor's compiled profile cache: a minute under TCG,
# docker's and lxc's first start) is then done once in the image, not at
# every run.
#
# The cache: $NODEFS_HOST_CACHE (default /var/cache/nodefs-host)/KEY, KEY
# a hash of image-packages.txt and image-setup.sh. A build goes to a
# temporary directory renamed into place when whole, under a lock, so
# concurrent runs build once. Images of other keys unused for 7 days are
# removed. Knows nothing of nodefs or the checks (run.sh, checks/).
#
# Usage: image.sh [--key]   (--key: print the key only)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${NODEFS_HOST_CACHE:-/var/cache/nodefs-host}
suite=bookworm	# Debian 12, the stock host the lane stands for

# the recipe's version: raise it when this script changes the image
recipe=2
key=$( (echo "recipe $recipe"; cat "$here/image-packages.txt" "$here/image-setup.sh") |
	sha256sum | cut -c1-16)
if [[ ${1:-} == --key ]]; then
	echo "$key"
	exit 0
fi

say() { printf 'image: %s\n' "$*" >&2; }
dir=$cache/$key
mkdir -p "$cache"
exec 9>"$cache/lock"
flock 9

if [[ -f $dir/root.img && -f $dir/vmlinuz && -f $dir/initrd.img ]]; then
	touch "$dir"
	say "cached: $dir"
	echo "$dir"
	exit 0
fi

for p in mmdebstrap mke2fs; do
	command -v "$p" >/dev/null || { say "$p is missing (scripts/packages.txt)"; exit 1; }
done

# The registry apt uses: every enabled sources file, as it is.
sources=()
if [[ -f /etc/apt/sources.list ]] && grep -qE '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list; then
	sources+=(/etc/apt/sources.list)
fi
shopt -s nullglob
for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
	sources+=("$f")
done
shopt -u nullglob
((${#sources[@]})) || { say "no apt sources in /etc/apt"; exit 1; }

pkgs=$(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$here/image-packages.txt" | awk 'NF' | paste -sd, -)
tmp=$(mktemp -d "$cache/build.XXXXXX")
trap 'rm -rf --one-file-system "$tmp"' EXIT
t0=$SECONDS
say "building $key with mmdebstrap from ${sources[*]} (a few minutes)"
mmdebstrap --variant=minbase --include="$pkgs" \
	--customize-hook="\"$here/image-setup.sh\" \"\$1\"" \
	--customize-hook='chroot "$1" dpkg-query -W -f "\${Package} \${Version}\n" > "$1/packages.lst"' \
	"$suite" "$tmp/rootfs" "${sources[@]}" >&2
t1=$SECONDS

cp "$tmp"/rootfs/boot/vmlinuz-* "$tmp/vmlinuz"
cp "$tmp"/rootfs/boot/initrd.img-* "$tmp/initrd.img"
mv "$tmp/rootfs/packages.lst" "$tmp/packages.lst"
# room for the run: docker images, containers, volumes (sparse: costs only
# what is written)
used_mb=$(du -sm "$tmp/rootfs" | cut -f1)
size_mb=$((used_mb + 3072))
mke2fs -q -t ext4 -L nodefs-root -d "$tmp/rootfs" -F "$tmp/root.img" "${size_mb}M" >&2
rm -rf --one-file-system "$tmp/rootfs"
t2=$SECONDS
say "first boot of the image (powers itself off)"
# systemd-run-generator: the command runs once the boot is done, then the
# VM powers off
if ! "$here/qemu.sh" --root "$tmp/root.img" --kernel "$tmp/vmlinuz" --initrd "$tmp/initrd.img" \
	--serial "$tmp/first-boot.log" --timeout 900 \
	--append "systemd.run=/bin/sync systemd.run_success_action=poweroff systemd.run_failure_action=poweroff" >&2; then
	tail -30 "$tmp/first-boot.log" >&2
	say "the first boot did not power off"
	exit 1
fi
echo "mmdebstrap $((t1 - t0)) s, image $((t2 - t1)) s, first boot $((SECONDS - t2)) s, root $used_mb MB" >"$tmp/built"
mv "$tmp" "$dir"
trap - EXIT
say "built $dir: $(cat "$dir/built")"

# Other keys' images unused for a week go.
find "$cache" -mindepth 1 -maxdepth 1 -type d -name '????????????????' \
	! -name "$key" -mtime +7 -exec rm -rf --one-file-system {} + 2>/dev/null || true
echo "$dir"
