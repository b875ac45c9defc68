#!/usr/bin/env bash
# The gate never says "passed" for what it did not verify, and never blames
# the kernel for the environment: hostile inputs, one row each, with the exit
# code and the line they must produce.
#   test_truthful_gate.sh KGATE [KGATE_CUDA]
# KGATE_CUDA (optional): the CUDA build, run on a machine without a usable
# NVIDIA driver; its rows are skipped where a device answers.
set -uo pipefail
kgate="$1"
kcuda="${2:-}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh"

D="conv3d.fwd bf16 n1 c4 k4 d8 kd3 p1"
G="groupnorm.fwd bf16 n1 c8 g2 d4"
fast=(--filter op=groupnorm.fwd --filter config=A --flop-budget 100000)

# A corpus of one problem, so that `verify` meets what `check` meets.
one_problem_corpus() {  # DESCRIPTOR FILE
  "$kgate" desc "$1" --json > "$tmp/p.json" || return 1
  python3 - "$1" "$tmp/p.json" "$2" <<'PY'
import json, sys
p = json.load(open(sys.argv[2]))
op = p["op"] + "." + p["dir"]
form = p.get("form", "logical")
json.dump({"problems": [{"config": "A", "descriptor": sys.argv[1], "op": op, "form": form, "sites": ["t"],
                         "calls_per_step": 1, "problem": p}]}, open(sys.argv[3], "w"))
PY
}

# --- Verdicts ----------------------------------------------------------------
# Inputs beyond their dtype's range, or sums beyond the accumulator's: refused
# as bad input, naming the fill, before any kernel runs.
expect 2 "^kgate: error: --fill: signed:scale=1e\+300 .*beyond the dtype's range\); no kernel was run" -- \
  "$kgate" check "$D" --fill signed:scale=1e300
expect 2 "^kgate: error: --fill: signed:scale=1e\+20 .*beyond fp32's largest finite value.*no kernel was run" -- \
  "$kgate" check "$D" --fill signed:scale=1e20
expect 2 "^kgate: error: --fill: signed:scale=1e\+20 .*M \* max \(x - mean\)\^2 reaches" -- \
  "$kgate" check "groupnorm.fwd fp32 n1 c8 g2 d4" --fill signed:scale=1e20
expect 2 "^kgate: error: eps: must be at least 2\^-126" -- "$kgate" check "groupnorm.fwd fp32 n1 c8 g2 d4 eps5e-324"
# Fills and problems that leave every output unproven: untrusted, a failure.
for f in lattice:density=1e-9 positive:scale=1e-45; do
  expect 1 "^untrusted: y: no fill verified it" -- "$kgate" check "$D" --fill "$f" --progress 0
done
expect 1 "^untrusted: y: no fill verified it" -- "$kgate" check "conv3d.fwd bf16 n1 c4 k4 d2 kd3 p20" --progress 0
# The same through verify on a one-problem corpus.
one_problem_corpus "conv3d.fwd bf16 n1 c4 k4 d2 kd3 p20" "$tmp/p20.json"
expect 1 "untrusted .*conv3d.fwd bf16:bf16 n1 c4 k4 d2 kd3 p20" -- \
  "$kgate" verify --corpus "$tmp/p20.json" --config A --bitwise '' --report "$tmp/r.json" --junit ''
grep -q '"failures": 1' "$tmp/r.json" || { echo "FAIL: verify's report does not count the untrusted problem"; fails=$((fails + 1)); }
# The trust line counts an all-zero candidate's zeros.
expect 1 "trust  : untrusted  zeros ref 1 cand 1 " -- "$kgate" check "$D" --fill positive:scale=1e-45 --progress 0
# An output that is zero for every input (groups of one element) is checked
# to be zero and says so; it is not left untrusted.
expect 0 "^passed: dx is zero for every input \(groups of one element" -- \
  "$kgate" check "groupnorm.bwd fp32 n2 c4 g4 d1" --progress 0
# A run that checked nothing is incomplete, never passed.
echo '{"entries": []}' > "$tmp/empty.json"
expect 3 "^INCOMPLETE: nothing was checked" -- "$kgate" bitwise run --corpus "$tmp/empty.json"
expect 1 "^FAILED: nothing was checked" -- "$kgate" bitwise run --corpus "$tmp/empty.json" --require-all
expect 3 "^INCOMPLETE: nothing failed, but only 5 of 6 checks were verified" -- \
  "$kgate" verify "${fast[@]}" --bitwise "$tmp/empty.json" --report '' --junit ''

# --- Exit codes and errors of the run -----------------------------------------
# Every failed write is exit 2 (/dev/full: writes fail with ENOSPC).
if [[ -c /dev/full ]]; then
  expect 2 "/dev/full: write failed: No space left on device" -- "$kgate" corpus make --out /dev/full
  expect 2 "^kgate: error: --report: /dev/full: write failed" -- "$kgate" verify "${fast[@]}" --bitwise '' --report /dev/full --junit ''
  expect 2 "^kgate: error: --junit: /dev/full: write failed" -- "$kgate" verify "${fast[@]}" --bitwise '' --report '' --junit /dev/full
  expect 2 "^kgate: error: --out: /dev/full: write failed" -- "$kgate" digests "$G" --out /dev/full
  expect 2 "--report: /dev/full: write failed" -- "$kgate" audit "$G" -R 1 -P 0 --control-runs 25 --no-noise --report /dev/full
  expect 2 "--json: /dev/full: write failed" -- "$kgate" bench "$G" --arm kgate --budget 0.01 --min-rounds 2 --max-rounds 2 --json /dev/full
  expect 2 "--svg: /dev/full: write failed" -- "$kgate" bench "$G" --arm kgate --budget 0.01 --min-rounds 2 --max-rounds 2 --json '' --svg /dev/full
  out=$("$kgate" verify "${fast[@]}" --bitwise '' --report - --junit '' 2>&1 > /dev/full); rc=$?
  if [[ $rc -ne 2 ]] || ! grep -q "writing to standard output failed" <<<"$out"; then
    echo "FAIL: verify --report - > /dev/full -> rc $rc: $out"; fails=$((fails + 1))
  else echo "ok:   verify --report - > /dev/full -> rc 2"; fi
fi
# --report - is pure JSON on standard output; the progress goes to stderr.
"$kgate" verify "${fast[@]}" --bitwise '' --report - --junit '' 2>/dev/null > "$tmp/stdout.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["verdict"] == "passed"' "$tmp/stdout.json" \
  && echo "ok:   verify --report - is JSON" || { echo "FAIL: verify --report - is not pure JSON"; fails=$((fails + 1)); }
# Report paths refused before the run.
expect 2 "^kgate: error: --junit: names the same file as --report" -- "$kgate" verify "${fast[@]}" --report "$tmp/x" --junit "$tmp/x"
expect 2 "^kgate: error: --junit: names the same file as --report" -- "$kgate" verify "${fast[@]}" --report - --junit -
expect 2 "^kgate: error: --report: cannot write '/proc/version': its folder '/proc' does not take a new file" -- \
  "$kgate" verify "${fast[@]}" --report /proc/version
mkfifo "$tmp/noreader"
expect 2 "^kgate: error: --report: .*noreader: the FIFO has no reader" -- timeout 60 "$kgate" verify "${fast[@]}" --report "$tmp/noreader"
# A bad --bitwise file is refused before any work.
echo '{"entries": [{"colour": 1}]}' > "$tmp/badbw.json"
expect 2 "^kgate: error: --bitwise: .*badbw.json: entries\[0\]" -- "$kgate" verify "${fast[@]}" --bitwise "$tmp/badbw.json"
grep -q 'kgate verify:' <<<"$("$kgate" verify "${fast[@]}" --bitwise "$tmp/badbw.json" 2>&1)" \
  && { echo "FAIL: verify ran before refusing --bitwise"; fails=$((fails + 1)); }
# SIGINT: exit 130, and the report holds the problems that finished, marked incomplete.
"$kgate" verify --filter op=conv3d.fwd --config A --jobs 1 --bitwise '' --report "$tmp/int.json" --junit '' > "$tmp/int.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do grep -q '^\[1/' "$tmp/int.log" && break; sleep 0.1; done
kill -INT "$pid"; wait "$pid"; rc=$?
if [[ $rc -eq 130 ]] && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["incomplete"] and d["verdict"] == "interrupted" and len(d["problems"]) == d["problems_finished"] >= 1' "$tmp/int.json"; then
  echo "ok:   SIGINT -> rc 130, partial report marked incomplete"
else
  echo "FAIL: SIGINT -> rc $rc, report: $(head -c 300 "$tmp/int.json" 2>/dev/null)"; fails=$((fails + 1))
fi

# --- One grammar for every subcommand ------------------------------------------
# --seed: every subcommand that takes it reads it the same way.
for sub in "verify" "audit" "digests" "bench $G" "check $D" "gen $D --out $tmp/g"; do
  # shellcheck disable=SC2086
  expect 2 "--seed: '-1' is not an integer in \[0, 18446744073709551615\]" -- "$kgate" $sub --seed -1
done
# --flop-budget: finite, at least 1, everywhere.
for sub in verify audit digests "bench --corpus"; do
  for v in nan -5 0; do
    # shellcheck disable=SC2086
    expect 2 "--flop-budget: '$v' is not a finite number in \[1, 1e\+30\]" -- "$kgate" $sub --flop-budget "$v"
  done
done
# --memory-limit: the same validator on verify and check.
for sub in verify "check $D"; do
  # shellcheck disable=SC2086
  expect 2 "--memory-limit: '-1' is not a finite number" -- "$kgate" $sub --memory-limit -1
done
# Integers beyond 64 bits are out of range, not "not an integer".
expect 2 "token 'd99999999999999999999': integer out of range" -- "$kgate" desc "conv3d.fwd bf16 n1 c4 k4 d99999999999999999999 kd3"
one_problem_corpus "$D" "$tmp/c.json"
sed 's/"cin": 4/"cin": 1180591620717411303424/' "$tmp/c.json" > "$tmp/big.json"
expect 2 "problems\[0\].problem.cin: integer out of range" -- "$kgate" verify --corpus "$tmp/big.json" --config A --bitwise ''
# Fill parameters: a missing or a duplicate key is named.
expect 2 "^kgate: error: fill.hi: missing: uniform takes lo and hi together" -- "$kgate" check "$D" --fill uniform:lo=1
expect 2 "^kgate: error: fill.lo: given twice" -- "$kgate" check "$D" --fill uniform:lo=1,lo=2,hi=3
# Corpus validation: the entry's index and field.
python3 - "$tmp/c.json" "$tmp" <<'PY'
import copy, json, sys
d = json.load(open(sys.argv[1])); t = sys.argv[2]
e = d["problems"][0]
bad = copy.deepcopy(d); bad["problems"][0]["form"] = "halo"; json.dump(bad, open(t + "/form.json", "w"))
bad = copy.deepcopy(d); bad["configurations"] = [{"name": "B"}]; json.dump(bad, open(t + "/config.json", "w"))
bad = copy.deepcopy(d); bad["problems"].append(copy.deepcopy(e)); json.dump(bad, open(t + "/dup.json", "w"))
PY
expect 2 "problems\[0\].form: 'halo' disagrees with the problem's form 'logical'" -- "$kgate" verify --corpus "$tmp/form.json" --config A
expect 2 "problems\[0\].config: 'A' is not one of the file's configurations" -- "$kgate" verify --corpus "$tmp/config.json" --config A
expect 2 "problems\[1\]: duplicates problems\[0\]" -- "$kgate" verify --corpus "$tmp/dup.json" --config A
# bwd_data has no bias tensor: one problem, one name.
expect 2 "^kgate: error: bias: bwd_data has no bias tensor" -- "$kgate" check "conv3d.bwd_data bf16 n1 c4 k4 d8 kd3 p1 bias"
# Repro lines name the binary that ran and the environment that changed it.
expect 1 "repro: KGATE_HOST_TARGET=sm90 $(readlink -f "$kgate") check 'conv3d.fwd bf16:bf16 n1 c4 k4 d8 kd3 p1' --fill lattice:density=1e-09" -- \
  env KGATE_HOST_TARGET=sm90 "$kgate" check "$D" --fill lattice:density=1e-9 --progress 0

# The host backend judges the plan problems on both emulated targets: the
# sm90 stage is in the log, the report (target, repro line) and the table;
# with KGATE_HOST_TARGET=sm90 the whole run is sm90 and there is no stage.
plan_one=(--config plan --filter op=conv3d.fwd --filter dtype=fp16:fp16 --bitwise "" --junit "")
expect 0 "^kgate verify: [1-9][0-9]* problems \+ [1-9][0-9]* plan problems on the emulated sm90 target" -- \
  "$kgate" verify "${plan_one[@]}" --report "$tmp/sm90.json"
expect 0 "^\[[0-9]+/[0-9]+\] passed .* \[sm90\]$" -- "$kgate" verify "${plan_one[@]}" --report ""
expect 0 "^conv3d.fwd \[sm90\] " -- "$kgate" verify "${plan_one[@]}" --report ""
expect 0 "^sm90 KGATE_HOST_TARGET=sm90 .*check 'conv3d.fwd .*mma\\.sync" -- python3 -c '
import json, sys
for p in json.load(open(sys.argv[1]))["problems"]:
    if p["target"]: print(p["target"], p["repro"], p["plan"].split(chr(10))[0])' "$tmp/sm90.json"
expect 0 "^kgate verify: [1-9][0-9]* problems, backend host" -- \
  env KGATE_HOST_TARGET=sm90 "$kgate" verify "${plan_one[@]}" --report ""

# --- isa ----------------------------------------------------------------------
# A missing toolchain piece is the environment (exit 2, named), not a finding.
if "$kgate" isa --help >/dev/null 2>&1 && [[ -f "$(dirname "$kgate")/../kgate-isa-manifest.json" ]]; then
  python3 - "$(dirname "$kgate")/../kgate-isa-manifest.json" "$tmp/manifest.json" "$tmp/bc" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
if m.get("gfx942"):
    m["gfx942"]["bitcode_dir"] = sys.argv[3]
json.dump(m, open(sys.argv[2], "w"))
PY
  mkdir -p "$tmp/bc" && touch "$tmp/bc/ocml.bc"
  if python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1])).get("gfx942") else 1)' "$tmp/manifest.json"; then
    expect 2 "^kgate: error: toolchain: gfx942: .*oclc_isa_version_942.bc is missing" -- \
      "$kgate" isa --target gfx942 --manifest "$tmp/manifest.json" --json '' --out "$tmp/isa"
  fi
fi

# --- The CUDA build without a driver ---------------------------------------------
if [[ -n "$kcuda" && -x "$kcuda" ]]; then
  if nvidia-smi >/dev/null 2>&1; then
    echo "note: an NVIDIA device answers here; the no-driver rows are not run"
  else
    no_driver="^kgate: error: .*this machine cannot run the cuda kernels: .*not a verdict on the kernel"
    expect 2 "$no_driver" -- "$kcuda" check "$D" --progress 0
    expect 2 "$no_driver" -- "$kcuda" verify "${fast[@]}" --bitwise '' --report '' --junit ''
    expect 2 "$no_driver" -- "$kcuda" digests "$G"
    expect 2 "$no_driver" -- "$kcuda" audit "$G" -R 1 -P 0 --control-runs 25 --no-noise --report ''
    expect 2 "$no_driver" -- "$kcuda" bitwise run
  fi
fi

# The census's interpreter: a Python error or a missing module is the
# environment's (exit 2), never "the census differs" (1), and writes nothing.
printf '#!/bin/sh\nexit 1\n' > "$tmp/py_crash"
printf '#!/bin/sh\nexec python3 -S "$@"\n' > "$tmp/py_bare"
chmod +x "$tmp/py_crash" "$tmp/py_bare"
expect 2 "^kgate: error: environment: the census run by .*py_crash failed \(exit 1" -- \
  env KGATE_PYTHON="$tmp/py_crash" "$kgate" census make --out "$tmp/census.json"
expect 2 "^kgate: error: environment: the census needs PyTorch and numpy for .*py_bare" -- \
  env KGATE_PYTHON="$tmp/py_bare" "$kgate" census make --out "$tmp/census.json"
[[ ! -e "$tmp/census.json" ]] || { echo "FAIL: a census run that failed wrote --out"; fails=$((fails + 1)); }

finish
