#!/usr/bin/env bash
# Instructions per message of one fake-driver run, counted by valgrind's callgrind: a count of the
# work done, which the machine's load does not change (CPU time does, by several times on a shared
# machine). The harness calls os.loadavg() just before and just after its measured window;
# callgrind dumps its counters at each call, so the second dump is the window alone. Node runs
# --single-threaded (V8 compiles and collects garbage on the main thread, where it is counted)
# with --no-memory-reducer (no collection started by a timer), so that a run
# repeats its count to about 0.1 %.
# Usage: bench/profile/instructions.sh <harness.mjs> <variant> [n=3000] [warm=3000] [build]
#   e.g. bench/profile/instructions.sh fake-rabbitmq.mjs once-msg 3000 3000
# Prints: variant n instructions-per-message. INSTRUCTIONS_OUT=<file>: the harness's own output
# (its JSON line) is appended there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
script=$1 variant=$2 n=${3:-3000} warm=${4:-3000} build=${5:-}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
env ${build:+PROFILE_BUILD=$build} PROFILE_VARIANT="$variant" PROFILE_N="$n" PROFILE_WARM="$warm" \
  valgrind --tool=callgrind --dump-before=uv_loadavg --callgrind-out-file="$out/cg" \
  node --single-threaded --no-memory-reducer "$here/$script" >>"${INSTRUCTIONS_OUT:-/dev/null}" 2>"$out/log" || { cat "$out/log" >&2; exit 1; }
ir=$(callgrind_annotate "$out/cg.2" | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
echo "$variant $n $((ir / n))"
