#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# bench/grpc/run.sh BUILD_DIR [CALLS]: unary Probe round-trip latency on one
# connection to the same libgrpc++ Identity server, 1 caller and 8 concurrent
# callers: nodefs's client (bench_grpc) against the libgrpc++ client
# (ref_client), interleaved in one run. Prints both medians and the ratio
# ours/reference (target: <= 0.8; exits 1 when a ratio misses it). Cleans
# up its socket dir and server.
set -eu
build=${1:?usage: run.sh BUILD_DIR [CALLS]}
calls=${2:-10000}
bin=$build/bench/grpc
for b in bench_grpc identity_server ref_client; do
	[ -x "$bin/$b" ] || { echo "missing $bin/$b (libgrpc++-dev?)" >&2; exit 77; }
done
dir=$(mktemp -d /tmp/nodefs-bench-grpc-XXXXXX)
server=
cleanup() {
	[ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
"$bin/identity_server" "$dir/id.sock" &
server=$!
for _ in $(seq 100); do [ -S "$dir/id.sock" ] && break; sleep 0.05; done
[ -S "$dir/id.sock" ] || { echo "server did not start" >&2; exit 1; }

status=0
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-8s %-10s %12s %12s\n' callers client median_us p99_us
for t in 1 8; do
	ours=() ref=()
	# Three interleaved rounds each; report the median of the medians.
	for round in 1 2 3; do
		read -r m p n < <("$bin/ref_client" "$dir/id.sock" "$calls" "$t")
		ref+=("$m"); refp=$p
		read -r m p n < <("$bin/bench_grpc" "$dir/id.sock" "$calls" "$t")
		ours+=("$m"); oursp=$p
	done
	r=$(printf '%s\n' "${ref[@]}" | median)
	o=$(printf '%s\n' "${ours[@]}" | median)
	printf '%-8s %-10s %12s %12s\n' "$t" libgrpc++ "$r" "$refp"
	printf '%-8s %-10s %12s %12s\n' "$t" nodefs "$o" "$oursp"
	ratio=$(awk -v o="$o" -v r="$r" 'BEGIN {printf "%.2f", o / r}')
	printf '%-8s ratio nodefs/libgrpc++ = %s\n' "$t" "$ratio"
	awk -v x="$ratio" 'BEGIN {exit !(x > 0.8)}' && status=1
done
exit $status
