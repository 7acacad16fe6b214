#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# vm-run.sh: run by nodefs-lane.service inside the lane's VM at every boot
# (the unit is in the image, image-setup.sh; this script comes on the lane
# disk). Runs the check set for the phase it is in, then reboots the VM
# (the check set exits 10 after phase 1) or powers it off (done, or any
# failure of the check set itself: the host reads what was recorded).
cd /lane || exit 1
# its output to the console (the serial log), not through the journal: a
# wedged daemon must not be able to stall the check set by way of journald
python3 -u /lane/checks.py >/dev/console 2>&1
rc=$?
sync
if [ "$rc" = 10 ]; then
	echo "nodefs-lane: rebooting for the second phase"
	systemctl reboot --no-block
else
	echo "nodefs-lane: check set ended ($rc): powering off"
	systemctl poweroff --no-block
fi
exit 0
