#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# image-setup.sh ROOTFS: the stock-host lane's changes to a freshly
# bootstrapped Debian 12 root filesystem (mmdebstrap's customize hook, run
# on the build machine with ROOTFS as argument). Kept as small as a fresh
# install's own first-boot choices: the root and lane disks in fstab, a
# hostname, the unit that runs the check set from the lane disk, and no apt
# timers (nothing is installed inside the VM). It knows nothing of nodefs:
# the check set and the .deb come on the lane disk at each run (run.sh).
# Part of the image's cache key, with image-packages.txt.
set -eu
root=${1:?usage: image-setup.sh ROOTFS}

cat >"$root/etc/fstab" <<'FSTAB'
# the VM's disks: the image (an overlay per run) and the lane disk, which
# brings the .deb and the check set in and takes the results out; under TCG
# on a loaded host udev may take minutes to show it (seen: over 60 s)
/dev/vda	/	ext4	rw,errors=remount-ro	0 1
/dev/vdb	/lane	ext4	rw,nofail,x-systemd.device-timeout=900s	0 0
FSTAB
mkdir -p "$root/lane"
echo nodefs-host >"$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tnodefs-host\n::1\tlocalhost\n' >"$root/etc/hosts"

# The check set's unit: runs /lane/vm-run.sh at every boot where the lane
# disk brings one (the script keeps its phase on that disk, so the same
# unit runs the second phase after the reboot). Its output goes to the
# serial console too, which the host keeps as the run's log.
cat >"$root/etc/systemd/system/nodefs-lane.service" <<'UNIT'
[Unit]
Description=nodefs stock-host lane: the check set on the lane disk
RequiresMountsFor=/lane
ConditionPathExists=/lane/vm-run.sh
After=local-fs.target network.target docker.service lxc.service

[Service]
Type=oneshot
ExecStart=/bin/sh /lane/vm-run.sh
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
UNIT
mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
ln -sf /etc/systemd/system/nodefs-lane.service \
	"$root/etc/systemd/system/multi-user.target.wants/nodefs-lane.service"

# No package work inside the VM, and no periodic jobs in the middle of a
# measurement.
for t in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer; do
	ln -sf /dev/null "$root/etc/systemd/system/$t"
done
