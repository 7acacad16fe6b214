#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# deps.sh: install the Debian packages listed in scripts/packages.txt that
# are missing. Checks with dpkg-query first, so a machine that has them all
# needs no network and changes nothing; otherwise one apt-get update and one
# non-interactive apt-get install of just the missing ones. Root only when
# something is missing.
#
# Usage: scripts/deps.sh [--check]   (--check: list the missing, exit 1 if any)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
list=$here/packages.txt
check_only=0
case ${1:-} in
	--check) check_only=1 ;;
	-h|--help) awk 'NR > 3 && /^#/ { sub(/^# ?/, ""); print } /^set /{ exit }' "$0"; exit 0 ;;
	'') ;;
	*) echo "deps.sh: unknown argument: $1" >&2; exit 2 ;;
esac

[[ -r $list ]] || { echo "deps.sh: cannot read $list" >&2; exit 1; }

# One package name per line; '#' starts a comment; blanks ignored.
mapfile -t wanted < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$list" | awk 'NF' | sort -u)

missing=()
for pkg in "${wanted[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
	[[ $status == installed ]] || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
	echo "deps: all ${#wanted[@]} packages installed"
	exit 0
fi

echo "deps: missing: ${missing[*]}"
((check_only)) && exit 1

if ((EUID != 0)); then
	echo "deps.sh: must run as root to install: ${missing[*]}" >&2
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive
# A registry that does not answer for a moment (a name that does not
# resolve) is retried; a real "no" ends at once.
for attempt in 1 2 3 4; do
	if apt-get update -q &&
	   apt-get install -q -y --no-install-recommends \
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
		"${missing[@]}"; then
		break
	fi
	if ((attempt == 4)); then
		echo "deps.sh: could not install: ${missing[*]}" >&2
		exit 1
	fi
	echo "deps: attempt $attempt failed; retrying in $((attempt * 10)) s" >&2
	sleep $((attempt * 10))
done
echo "deps: installed ${#missing[@]} packages"
