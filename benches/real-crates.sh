#!/usr/bin/env bash
# The whole `cargo wasmprof test` on real crates' test suites against a plain `cargo test`
# whose runner is `cargo wasmprof run --no-instrument`, side by side in one run:
#
#   benches/real-crates.sh CRATE_DIR...   (unpacked crates, e.g. from ~/.cargo/registry/src)
#
# Each suite is built first (both commands then find it built), then timed RUNS times
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
  (cd "$dir" && cargo test --target wasm32-wasip1 --no-run -q >/dev/null 2>&1)
  plain=() profiled=()
  for _ in $(seq "$RUNS"); do
    plain+=("$(cd "$dir" && seconds cargo test --target wasm32-wasip1 --no-fail-fast -q)")
    profiled+=("$(cd "$dir" && seconds "$prof" wasmprof test --no-fail-fast --metric "${METRIC:-time}" ${WASMPROF_FLAGS:-} -q)")
  done
  p=$(printf '%s\n' "${plain[@]}" | median)
  q=$(printf '%s\n' "${profiled[@]}" | median)
  printf '%-24s %9.2fs %9.2fs %6.2fx\n' "$name" "$p" "$q" "$(echo "$q / $p" | bc -l)"
done
