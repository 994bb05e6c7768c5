#!/usr/bin/env bash
# The whole `cargo wasmprof test` on real crates' test suites against a plain `cargo test`
# whose runner is `cargo wasmprof run --no-instrument`, side by side in one run:
#
#   benches/real-crates.sh CRATE_DIR...   (unpacked crates, e.g. from ~/.cargo/registry/src)
#
# Each suite is built first, plain and profiled in target dirs of their own (the profiler's
# build keeps DWARF, so the two would rebuild each other's), then timed RUNS times
# alternately, plain and profiled (`--metric ${METRIC:-time}`, its other flags in
# $WASMPROF_FLAGS), the median of each printed with their ratio. The profiler is
# target/release/cargo-wasmprof (run `cargo build --release` first).
set -euo pipefail
RUNS=${RUNS:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
prof="$here/target/release/cargo-wasmprof"
export CARGO_TARGET_WASM32_WASIP1_RUNNER="$prof wasmprof run --no-instrument"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
seconds() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
printf '%-24s %10s %10s %7s\n' crate plain profiled ratio
for dir in "$@"; do
  name=$(basename "$dir")
  # --tests: the test binaries `cargo wasmprof test` runs (lib, bins, tests), no doctests.
  plain_args=(--target wasm32-wasip1 --target-dir target/plain --tests --no-fail-fast -q)
  prof_args=(--target-dir target/profiled --no-fail-fast --metric "${METRIC:-time}" ${WASMPROF_FLAGS:-} -q)
  (cd "$dir" && cargo test "${plain_args[@]}" --no-run >/dev/null 2>&1)
  (cd "$dir" && "$prof" wasmprof test "${prof_args[@]}" --no-report >/dev/null 2>&1 || true)
  plain=() profiled=()
  for _ in $(seq "$RUNS"); do
    plain+=("$(cd "$dir" && seconds cargo test "${plain_args[@]}")")
    profiled+=("$(cd "$dir" && seconds "$prof" wasmprof test "${prof_args[@]}")")
  done
  p=$(printf '%s\n' "${plain[@]}" | median)
  q=$(printf '%s\n' "${profiled[@]}" | median)
  printf '%-24s %9.2fs %9.2fs %6.2fx\n' "$name" "$p" "$q" "$(echo "$q / $p" | bc -l)"
done
