#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# deps.sh: install the Debian packages listed in scripts/packages.txt (and,
# best effort, scripts/packages-optional.txt) that are missing. Checks with
# dpkg-query first, so a machine that has them all needs no network and
# changes nothing; otherwise apt-get update and a non-interactive
# apt-get install of just the missing ones, retried while the registry does
# not answer. Root only when something is missing.
#
# packages.txt: what nodefs needs to build, run and test: a package that
# cannot be installed fails.
# packages-optional.txt: outside programs a few tests use as consumers
# (promtool, node_exporter): one that cannot be installed is reported, its
# name written to $NODEFS_DEPS_MISSING (when set), and the tests that need
# it skip, saying which package they lack.
#
# Usage: scripts/deps.sh [--check]   (--check: list the missing, exit 1 if any)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
check_only=0
case ${1:-} in
	--check) check_only=1 ;;
	-h|--help) awk 'NR > 3 && /^#/ { sub(/^# ?/, ""); print } /^set /{ exit }' "$0"; exit 0 ;;
	'') ;;
	*) echo "deps.sh: unknown argument: $1" >&2; exit 2 ;;
esac

# The packages of list (one name per line; '#' comments) not installed.
missing_of() {
	local list=$1 pkg status
	[[ -r $list ]] || return 0
	while read -r pkg; do
		status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
		[[ $status == installed ]] || echo "$pkg"
	done < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$list" | awk 'NF' | sort -u)
}

# Install the given packages; retry a registry that does not answer for a
# moment (a name that does not resolve); a real "no" ends at once.
install() {
	local attempt
	export DEBIAN_FRONTEND=noninteractive
	for attempt in 1 2 3 4; do
		if apt-get update -q &&
		   apt-get install -q -y --no-install-recommends \
			-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
			"$@"; then
			return 0
		fi
		((attempt == 4)) && return 1
		echo "deps: attempt $attempt failed; retrying in $((attempt * 10)) s" >&2
		sleep $((attempt * 10))
	done
}

mapfile -t missing < <(missing_of "$here/packages.txt")
mapfile -t optional < <(missing_of "$here/packages-optional.txt")

if ((${#missing[@]} == 0 && ${#optional[@]} == 0)); then
	echo "deps: all packages installed"
	exit 0
fi
echo "deps: missing: ${missing[*]} ${optional[*]}"
((check_only)) && exit 1
if ((EUID != 0)); then
	echo "deps.sh: must run as root to install: ${missing[*]} ${optional[*]}" >&2
	exit 1
fi

if ((${#missing[@]})); then
	install "${missing[@]}" || { echo "deps.sh: could not install: ${missing[*]}" >&2; exit 1; }
	echo "deps: installed ${missing[*]}"
fi
if ((${#optional[@]})); then
	if install "${optional[@]}"; then
		echo "deps: installed ${optional[*]}"
	else
		mapfile -t optional < <(missing_of "$here/packages-optional.txt")
		echo "deps: WARNING: could not install ${optional[*]}: the package registry did not answer;" \
			"the tests that use them will skip" >&2
		if [[ -n ${NODEFS_DEPS_MISSING:-} ]]; then
			printf '%s\n' "${optional[@]}" >"$NODEFS_DEPS_MISSING"
		fi
	fi
fi
