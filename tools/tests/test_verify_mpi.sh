#!/usr/bin/env bash
# test_verify_mpi.sh KGATE KGATE_MPI OUT_DIR MPIRUN ARGS...: `kgate verify`
# in one process and `kgate_mpi verify` under MPIRUN ARGS on the same
# problems (configuration C's stem, inc, at a 1e6-FLOP budget per problem,
# cheap on the emulator's conv kernels too) write the same JSON report apart
# from timings, and exit alike; the comparison itself notices a changed
# verdict.
set -euo pipefail
kgate=$1 kgate_mpi=$2 out=$3
shift 3
mkdir -p "$out"
sel=(--config C --filter site=inc --flop-budget 1e6 --bitwise '')
set +e
"$kgate" verify "${sel[@]}" --report "$out/one.json" --junit "$out/one.xml" >"$out/one.txt"
rc1=$?
"$@" "$kgate_mpi" verify "${sel[@]}" --report "$out/mpi.json" --junit "$out/mpi.xml" >"$out/mpi.txt"
rc2=$?
set -e
cat "$out/mpi.txt"
strip='del(.seconds) | .problems |= map(del(.seconds) | .fills |= map(del(.phase_seconds)))'
if [ "$rc1" != "$rc2" ]; then echo "exit codes differ: one process $rc1, MPI $rc2"; exit 1; fi
if ! diff <(jq -S "$strip" "$out/one.json") <(jq -S "$strip" "$out/mpi.json") >"$out/diff.txt"; then
  echo "reports differ:"; head -40 "$out/diff.txt"; exit 1
fi
n=$(jq '.problems | length' "$out/one.json")
[ "$n" -gt 0 ] || { echo "no problems in the report"; exit 1; }
# The comparison is not vacuous: one changed verdict is seen.
if diff -q <(jq -S "$strip" "$out/one.json") <(jq -S "$strip | .problems[0].state = \"failed\"" "$out/mpi.json") >/dev/null; then
  echo "the comparison does not notice a changed verdict"; exit 1
fi
echo "same report from one process and from MPI ($n problems, exit code $rc1)"
