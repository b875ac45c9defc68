#!/usr/bin/env bash
# Every driver binary answers --help with its usage (exit 0) and refuses an
# unknown option with a message (exit 2, or 1 for Google Benchmark's drivers).
#   test_drivers.sh BINARY...
set -uo pipefail
fails=0
for bin in "$@"; do
  name=$(basename "$bin")
  out=$("$bin" --help 2>&1); rc=$?
  if [[ $rc -ne 0 ]] || ! grep -qiE 'usage|benchmark_filter' <<<"$out"; then
    echo "FAIL: $name --help -> rc $rc: $(head -3 <<<"$out")"; fails=$((fails + 1))
  else
    echo "ok:   $name --help"
  fi
  out=$("$bin" --no-such-option 2>&1); rc=$?
  if [[ $rc -eq 0 ]] || ! grep -qiE 'no-such-option|usage|must be' <<<"$out"; then
    echo "FAIL: $name --no-such-option -> rc $rc: $(head -3 <<<"$out")"; fails=$((fails + 1))
  else
    echo "ok:   $name --no-such-option -> rc $rc"
  fi
done
echo "$((fails == 0 ? 1 : 0)) passed, $fails failed"
exit $((fails > 0))
