#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# publish-volume.sh: make sure a volume exists, publish it at a target and
# wait until it is PUBLISHED, with nothing but files under /run/nodefs.
#
# Usage: publish-volume.sh [-m MOUNT] [-t TIMEOUT_S] [-r] NAME TARGET [CREATE_OPTION...]
#   -m MOUNT      where nodefs is mounted (default /run/nodefs)
#   -t TIMEOUT_S  give up waiting after this many seconds (default 300)
#   -r            publish read-only
#   CREATE_OPTION options of `create` used when NAME does not exist yet,
#                 e.g. size=1G profile=fast plugin=hostpath
# Example: publish-volume.sh db /srv/db size=10G profile=fast
#
# A ctl write returns when the action has finished, so the write itself is
# the wait; the state file is then checked, since a daemon that restarted
# meanwhile (RECOVERING) finishes the action itself. On failure the volume's
# error file says why and the script exits 1.
set -euo pipefail

mnt=/run/nodefs
timeout=300
ro=
usage() { awk 'NR > 3 && /^#/ { sub(/^# ?/, ""); print } /^set /{ exit }' "$0"; }
while getopts 'm:t:rh-:' opt; do
	case $opt in
		m) mnt=$OPTARG ;;
		t) timeout=$OPTARG ;;
		r) ro=" ro" ;;
		h) usage; exit 0 ;;
		-) [[ $OPTARG == help ]] && { usage; exit 0; }
		   echo "publish-volume.sh: unknown option --$OPTARG" >&2; exit 2 ;;
		*) usage >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
(($# >= 2)) || { usage >&2; exit 2; }
name=$1 target=$2
shift 2

vol=$mnt/volumes/$name
fail() {
	echo "publish-volume.sh: $1" >&2
	[[ -r $2 ]] && sed 's/^/  /' "$2" >&2
	exit 1
}

[[ -r $mnt/status ]] || { echo "publish-volume.sh: nodefs is not mounted at $mnt" >&2; exit 1; }

if [[ ! -d $vol ]]; then
	echo "creating volume $name${*:+ ($*)}"
	echo "create $name $*" >"$mnt/volumes/ctl" 2>/dev/null ||
		fail "create $name failed:" "$mnt/volumes/error"
fi

state=$(<"$vol/state")
if [[ $state == PUBLISHED ]]; then
	echo "$name is already published at $(<"$vol/target")"
	exit 0
fi

echo "publishing $name at $target${ro}"
timeout "$timeout" bash -c 'echo "publish $1$2" >"$3/ctl"' _ "$target" "$ro" "$vol" 2>/dev/null ||
	fail "publish $name failed (state $(<"$vol/state")):" "$vol/error"

deadline=$((SECONDS + timeout))
while state=$(<"$vol/state"); [[ $state != PUBLISHED ]]; do
	((SECONDS < deadline)) || fail "$name is $state after ${timeout}s" "$vol/error"
	sleep 1
done
echo "$name is PUBLISHED at $(<"$vol/target")"
