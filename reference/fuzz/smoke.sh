#!/usr/bin/env bash
# smoke.sh CLANGXX SOURCE_DIR BUILD_DIR SECONDS TARGET...
# Configures SOURCE_DIR with -DKGATE_FUZZ=ON and CLANGXX in BUILD_DIR, builds
# the fuzz targets, and runs each on a scratch copy of its seed corpus for
# SECONDS (every seed is replayed first). Fails on any crash, leak, timeout or
# property violation; libFuzzer writes the input to BUILD_DIR/findings/.
set -euo pipefail
clangxx=$1 src=$2 bin=$3 seconds=$4
shift 4
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -G Ninja -S "$src" -B "$bin" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$clangxx" \
  -DKGATE_FUZZ=ON "${launcher[@]}" >/dev/null
ninja -C "$bin" kgate_fuzz
fuzz="$src/reference/fuzz"
mkdir -p "$bin/findings"
for t in "$@"; do
  work="$bin/corpus/$t"
  rm -rf "$work" && mkdir -p "$work"
  case $t in
    fuzz_problem_json | fuzz_corpus) dict=(-dict="$fuzz/dict/fuzz_json.dict") ;;
    *) dict=(); [[ -f "$fuzz/dict/$t.dict" ]] && dict=(-dict="$fuzz/dict/$t.dict") ;;
  esac
  log="$bin/$t.log"
  if ! "$bin/reference/fuzz/$t" "${dict[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -print_final_stats=1 -artifact_prefix="$bin/findings/$t-" "$work" "$fuzz/seeds/$t" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "$t: FAILED (the input is in $bin/findings/)"
    exit 1
  fi
  echo "$t: $(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}') runs," \
    "$(grep -E '^stat::average_exec_per_sec' "$log" | awk '{print $2}') exec/s, no findings"
done
echo "fuzz smoke: ${#@} targets, ${seconds}s each, no findings"
