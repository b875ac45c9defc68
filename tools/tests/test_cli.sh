#!/usr/bin/env bash
# The command line on bad input: one clear message naming the field, exit
# code 2, no crash, and no output file left half-written.
set -uo pipefail
kgate="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh"

expect 2 'g: must divide the input channels' -- "$kgate" desc "conv3d.fwd bf16 n1 c64 k6 g4 d8 kd3 p1"
expect 2 "descriptor: token 'zz9'" -- "$kgate" desc "conv3d.fwd bf16 n1 c4 k4 d8 kd3 zz9"
expect 2 'd: output extent along d must be >= 1' -- "$kgate" desc "conv3d.fwd bf16 n1 c4 k4 d2 kd5"
expect 2 'opd: must be in \[0, max\(stride, dilation\)' -- "$kgate" desc "conv_transpose3d.fwd bf16 n1 c4 k4 d8 kd2 s2 op2"
expect 0 '^conv3d.fwd bf16:bf16 n1 c4 k4 d8 kd3 p1$' -- "$kgate" desc "conv3d.fwd bf16 n1 c4 k4 d8 kd3 s1 p1"
expect 2 'fill: unknown generator' -- "$kgate" gen "conv3d.fwd bf16 n1 c4 k4 d8 kd3" --fill gauss --out "$tmp/g"
expect 2 'fill.run: must be an integer >= 1' -- "$kgate" check "conv3d.bwd_weight fp32 n1 c4 k4 d5 kd1" --fill combine:run=0
expect 2 "fill: combine probes a convolution's split" -- "$kgate" check "groupnorm.fwd fp32 n1 c4 g2 d2" --fill combine
# A problem too big for memory: named, exit 2, nothing written.
expect 2 'needs .* MiB but this machine has' -- "$kgate" gen "conv3d.fwd fp64 n64 c4096 k4 d1024 kd1" --out "$tmp/big"
if [[ -n "$(ls -A "$tmp/big" 2>/dev/null)" ]]; then echo "FAIL: files left in $tmp/big"; fails=$((fails + 1)); fi
# Malformed and hand-edited corpus files.
echo '{"problems": [' > "$tmp/bad.json"
expect 2 'bad.json: .*malformed JSON' -- "$kgate" verify --corpus "$tmp/bad.json" --report "$tmp/r.json" --junit "$tmp/j.xml"
echo '{"problems": [{"config":"A","descriptor":"x","op":"conv3d.fwd","form":"logical","sites":[],"calls_per_step":1,"problem":{"op":"conv3d","dir":"fwd","n":1,"cin":4,"cout":4,"in":[8,8,8],"kernel":[3,3,3],"src":"bf17"}}]}' > "$tmp/bad2.json"
expect 2 'problems\[0\].problem.src: unknown dtype' -- "$kgate" verify --corpus "$tmp/bad2.json" --report "$tmp/r.json" --junit "$tmp/j.xml"
if [[ -e "$tmp/r.json" || -e "$tmp/j.xml" ]]; then echo "FAIL: a report was written for bad input"; fails=$((fails + 1)); fi
expect 2 'filter: unknown key' -- "$kgate" verify --filter colour=red --report "$tmp/r.json"
expect 2 "--jobs: '0' is not an integer in \\[1, 256\\]" -- "$kgate" verify --jobs 0
# --check never modifies the committed file and fails on a one-byte change.
"$kgate" corpus make --out "$tmp/shapes.json" >/dev/null
sed -i '0,/"calls_per_step": 1/s//"calls_per_step": 2/' "$tmp/shapes.json"
before=$(md5sum "$tmp/shapes.json")
expect 1 'differs from the regenerated file' -- "$kgate" corpus make --check --out "$tmp/shapes.json"
[[ "$(md5sum "$tmp/shapes.json")" == "$before" ]] || { echo "FAIL: --check modified the file"; fails=$((fails + 1)); }
# A wrong expected digest is a failure with evidence, and fails the gate.
python3 - "$(dirname "$0")/../../corpus/bitwise.json" "$tmp/bw.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
e = next(e for e in d["entries"] if e["descriptor"].startswith("groupnorm.fwd"))
e["digests"]["y"] = "0" * 32
json.dump(d, open(sys.argv[2], "w"), indent=2)
PY
expect 1 'repro: .*kgate check .groupnorm.fwd' -- "$kgate" bitwise run --corpus "$tmp/bw.json"
nbitwise=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["entries"]))' "$(dirname "$0")/../../corpus/bitwise.json")
expect 1 'FAILED: 1 of' -- "$kgate" verify --filter op=groupnorm --filter config=A --flop-budget 100000 --bitwise "$tmp/bw.json" --report "$tmp/r2.json" --junit "$tmp/j2.xml"
grep -q '"failures": 1' "$tmp/r2.json" || { echo "FAIL: report does not count the failure"; fails=$((fails + 1)); }
# Generated inputs and their manifest.
expect 0 'x.npy' -- "$kgate" gen "conv3d.fwd bf16 n1 c4 k4 d8 kd3 p1" --fill lattice --seed 3 --out "$tmp/in"
[[ -f "$tmp/in/x.npy" && -f "$tmp/in/w.npy" && -f "$tmp/in/manifest.json" ]] || { echo "FAIL: gen outputs missing"; fails=$((fails + 1)); }
ls "$tmp/in" | grep -q '\.tmp\.' && { echo "FAIL: temporary files left"; fails=$((fails + 1)); }

# --- reference hardening (descriptor, counts, .npy, JSON) ------------------
# Per-axis keys set one axis: sd2 halves D only.
expect 0 'out y bf16 1x4x8x8x1' -- "$kgate" desc "conv3d.fwd bf16 n1 c1 k1 d8 kd1 sd2"
expect 0 '^conv3d.fwd bf16:bf16 n1 c1 k1 d8 kd2 dild2 dilh1 dilw1$' -- "$kgate" desc "conv3d.fwd bf16 n1 c1 k1 d8 kd2 dild2"
# Errors name descriptor tokens; kd is required.
expect 2 '^kgate: error: kw: must be in \[1, 1024\], got 0' -- "$kgate" desc "conv3d.fwd bf16 n1 c4 k4 d8 kd3 kw0"
expect 2 'missing kd' -- "$kgate" desc "conv3d.fwd bf16 n1 c4 k4 d8"
# Byte counts past 2^63 are refused, naming the tensor or the sum; just below is exact.
expect 2 '^kgate: error: x: shape .* needs more than 2\^63 bytes' -- "$kgate" desc "conv3d.fwd fp64 n16777216 c4194304 k1 d32 kd1"
expect 2 '^kgate: error: bytes: ' -- "$kgate" desc "conv3d.fwd fp32 n16777216 c2097152 k2097152 d32 kd1"
expect 0 'min bytes  4611690416482287616$' -- "$kgate" desc "conv3d.fwd fp64 n16777216 c1048576 k1 d32 kd1"
# ---------------------------------------------------------------------------
# Paths, numeric flags, reports, memory, exit codes, progress, version
# (issue 12, the command line's part).
D="conv3d.fwd bf16 n1 c4 k4 d8 kd3 p1"
G="groupnorm.fwd bf16 n1 c8 g2 d4"
S="groupnorm.fwd fp32 n1 c4099 g1 d1"  # declined by is_supported
fast=(--filter op=groupnorm.fwd --filter config=A --flop-budget 100000)
: > "$tmp/afile"
ln -s loop "$tmp/loop"
# One output-folder routine for gen and ref; one input-folder routine for ref.
expect 2 "--out: '.*afile' exists and is not a folder" -- "$kgate" gen "$D" --out "$tmp/afile"
expect 2 '--out: cannot use .*loop.: Too many levels of symbolic links' -- "$kgate" gen "$D" --out "$tmp/loop"
expect 2 '--out: the path is empty' -- "$kgate" gen "$D" --out ""
expect 2 "--out: the name 'x+\.\.\.' is 300 characters, over the system's limit of 255" -- "$kgate" gen "$D" --out "$tmp/$(printf 'x%.0s' {1..300})"
expect 2 "--out: '.*afile' exists and is not a folder" -- "$kgate" ref "$D" --inputs "$tmp/in" --out "$tmp/afile"
expect 2 '--inputs: cannot use .*loop.: Too many levels of symbolic links' -- "$kgate" ref "$D" --inputs "$tmp/loop" --out "$tmp/o"
expect 2 "--inputs: the folder '.*nothere' does not exist" -- "$kgate" ref "$D" --inputs "$tmp/nothere" --out "$tmp/o"
mkdir "$tmp/in2" && ln -s x.npy "$tmp/in2/x.npy"
expect 2 'Too many levels of symbolic links.*in2/x.npy' -- "$kgate" ref "$D" --inputs "$tmp/in2" --out "$tmp/o2"
if unshare -rm true 2>/dev/null; then  # a read-only file system, in a private mount namespace
  mkdir "$tmp/ro"
  expect 2 '--out: cannot create the folder .*: Read-only file system' -- unshare -rm sh -c \
    "mount -t tmpfs -o ro none '$tmp/ro' && exec '$kgate' gen '$D' --out '$tmp/ro/x'"
else
  echo "note: unshare unavailable, read-only file system case not run"
fi
# A directory where a file is expected; unknown subcommands.
expect 2 "--corpus: '.*' is a folder; a file is expected" -- "$kgate" verify --corpus "$tmp" --report "$tmp/r.json"
expect 2 "--bitwise: '.*' is a folder; a file is expected" -- "$kgate" verify --bitwise "$tmp" --report "$tmp/r.json"
expect 2 "--corpus: '.*' is a folder; a file is expected" -- "$kgate" bitwise run --corpus "$tmp"
expect 2 "unknown subcommand 'frobnicate' \(one of: desc, problems, judge, gen" -- "$kgate" frobnicate
expect 2 "kgate bitwise: unknown subcommand 'walk' \(one of: make, run\)" -- "$kgate" bitwise walk
# Every numeric flag is read exactly: the flag, the value and the allowed range.
for v in nan inf -1 1e400 12abc; do
  expect 2 "--flop-budget: '$v' is not a finite number in \[1, 1e\+30\]" -- "$kgate" verify --flop-budget "$v"
done
expect 2 "--seed: '-1' is not an integer in \[0, 18446744073709551615\]" -- "$kgate" verify --seed -1
expect 2 "--seed: '-1' is not an integer" -- "$kgate" gen "$D" --seed -1 --out "$tmp/s"
expect 2 "--seed: '18446744073709551616' is not an integer" -- "$kgate" check "$D" --seed 18446744073709551616
expect 2 "--repeats: '-5' is not an integer in \[0, 1000\]" -- "$kgate" check "$D" --repeats -5
expect 2 "--repeats: '-5' is not an integer in \[0, 1000\]" -- "$kgate" verify --repeats -5
expect 2 "--jobs: '1.5' is not an integer in \[1, 256\]" -- "$kgate" verify --jobs 1.5
expect 2 "--progress: '-1' is not a finite number" -- "$kgate" check "$D" --progress -1
expect 2 "--memory-limit: 'lots' is not a finite number" -- "$kgate" verify --memory-limit lots
# Report paths are checked before the run (no run output), and only regular
# files are replaced by a rename: a symbolic link, a FIFO and a device stay.
expect 2 "--report: cannot create '.*nodir/r.json': the folder '.*nodir' does not exist" -- "$kgate" verify --report "$tmp/nodir/r.json"
grep -q 'kgate verify:' <<<"$("$kgate" verify --report "$tmp/nodir/r.json" 2>&1)" && { echo "FAIL: ran before refusing the report path"; fails=$((fails + 1)); }
expect 2 "--junit: '.*' is a folder; a file is expected" -- "$kgate" verify --junit "$tmp"
ln -s dangling-target "$tmp/dangling.json"
expect 2 "--report: the symbolic link '.*dangling.json' cannot be resolved" -- "$kgate" verify --report "$tmp/dangling.json"
echo old > "$tmp/real.json"; ln -s real.json "$tmp/link.json"
# The FIFO's reader is this shell, opened read-write before kgate starts (a
# background `cat` may not have opened it yet when kgate checks, and would
# then block forever on an unopened FIFO); the report is small enough for
# the pipe's buffer, and is read back after kgate closes its end.
mkfifo "$tmp/fifo"
exec 7<>"$tmp/fifo"
expect 0 'OK: all 5 checks passed' -- "$kgate" verify "${fast[@]}" --bitwise '' --report "$tmp/link.json" --junit "$tmp/fifo"
[[ -L "$tmp/link.json" ]] && grep -q '"verdict": "passed"' "$tmp/real.json" || { echo "FAIL: --report replaced the symbolic link or did not write its target"; fails=$((fails + 1)); }
timeout 2 cat <&7 > "$tmp/fifo.out"
exec 7<&-
[[ -p "$tmp/fifo" ]] && grep -q '<testsuites' "$tmp/fifo.out" || { echo "FAIL: --junit replaced the FIFO or wrote nothing through it"; fails=$((fails + 1)); }
if mknod "$tmp/null" c 1 3 2>/dev/null; then  # a private /dev/null: the real one is never put at risk
  expect 0 'OK: all 5 checks passed' -- "$kgate" verify "${fast[@]}" --bitwise '' --report "$tmp/null" --junit "$tmp/null"
  [[ -c "$tmp/null" ]] || { echo "FAIL: --report replaced a device node with a regular file"; fails=$((fails + 1)); }
else
  echo "note: mknod not permitted, device-node case not run"
fi
expect 0 '"verdict": "passed"' -- "$kgate" verify "${fast[@]}" --bitwise '' --report - --junit "$tmp/j.xml"
# The report records the emulator settings the run used.
KGATE_HOST_ORDER=reversed "$kgate" verify "${fast[@]}" --bitwise '' --report "$tmp/env.json" --junit '' >/dev/null
python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["settings"]; assert s["backend"]=="host" and s["host"]["order"]=="reversed", s' "$tmp/env.json" \
  || { echo "FAIL: the report does not record the emulator settings"; fails=$((fails + 1)); }
# A bad emulator setting is one message naming the variable, exit 2 (the
# runtime's validation, kernels/runtime; kgate maps its error).
expect 2 "kgate: error: environment: .*KGATE_HOST_THREADS='abc' is not valid" -- env KGATE_HOST_THREADS=abc "$kgate" check "$G"
expect 2 "KGATE_ELEMENT_THREADS: must be an integer in \[1, 1024\], got '0'" -- env KGATE_ELEMENT_THREADS=0 "$kgate" check "$G"
# Memory: a problem that does not fit is refused before it runs, with the
# numbers; a real allocation failure is an error of the run, never "failed".
expect 2 "memory: the run needs about [0-9]+ MiB \(largest problem 'groupnorm.fwd bf16:fp32 n1 c64 g8 d128 relu': [0-9]+ MiB\) but 0 MiB is allowed \(--memory-limit\)" -- \
  "$kgate" check "groupnorm.fwd bf16 n1 c64 g8 d128 relu" --memory-limit 1000000
expect 2 'memory: the run needs about .*\(--memory-limit\)' -- "$kgate" verify --full --filter op=groupnorm --memory-limit 1000 --report "$tmp/m.json"
[[ -e "$tmp/m.json" ]] && { echo "FAIL: a report was written for a refused run"; fails=$((fails + 1)); }
# (Not under AddressSanitizer: it reserves terabytes of address space, so
# no ulimit -v, and its operator new aborts where the real one throws.)
if ldd "$kgate" 2>/dev/null | grep -q libasan; then
  echo "note: sanitized build, the ulimit -v case is not run"
else
  out=$(ulimit -v 250000; "$kgate" check "groupnorm.fwd bf16 n1 c64 g8 d64 relu" --memory-limit 1e12 --progress 0 2>&1); rc=$?
  if [[ $rc -ne 2 ]] || ! grep -q 'kgate: error: groupnorm.fwd .*an error of the run' <<<"$out" || grep -q 'failed' <<<"$out"; then
    echo "FAIL: an allocation failure under ulimit -v -> rc $rc: $out"; fails=$((fails + 1))
  else
    echo "ok:   allocation failure under ulimit -v -> rc 2: $out"
  fi
fi
# Exit codes: 0 everything verified, 3 incomplete (distinct summary line),
# 1 with --require-all when something was not verified.
# Every operator has a kernel: a corpus with one problem is_supported declines
# (4099 columns of one channel each) is what makes a run incomplete.
python3 - "$(dirname "$0")/../../corpus/shapes.json" "$tmp/skip.json" "$("$kgate" desc "$S" --json)" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
keep = [e for e in d["problems"] if e["op"] == "groupnorm.fwd" and e["config"] == "A"]
declined = dict(keep[0], descriptor="groupnorm.fwd fp32 n1 c4099 g1 d1", problem=json.loads(sys.argv[3]))
d["problems"] = keep + [declined]
json.dump(d, open(sys.argv[2], "w"), indent=2)
PY
expect 3 '^INCOMPLETE: nothing failed, but only [0-9]+ of [0-9]+ checks were verified; 1 not verified \(0 unimplemented, 1 skipped' -- \
  "$kgate" verify --corpus "$tmp/skip.json" --config A --flop-budget 100000 --bitwise '' --report "$tmp/inc.json" --junit "$tmp/inc.xml"
grep -q '"verdict": "incomplete"' "$tmp/inc.json" || { echo "FAIL: report verdict is not incomplete"; fails=$((fails + 1)); }
expect 1 '^FAILED: 1 not verified .* and --require-all is set' -- "$kgate" verify --corpus "$tmp/skip.json" --config A --flop-budget 100000 --bitwise '' --require-all --report '' --junit ''
expect 3 '^INCOMPLETE: .*1 skipped' -- "$kgate" check "$S"
expect 1 '^FAILED: .*--require-all' -- "$kgate" check "$S" --require-all
expect 0 '^OK: all 1 checks passed' -- "$kgate" check "$G"
expect 0 '^OK: all [0-9]+ checks passed' -- "$kgate" bitwise run --require-all
# Every bitwise entry is a JUnit testcase and a JSON record; a failed one counts.
grep -q 'failures="1"' "$tmp/j2.xml" && grep -q '<testcase classname="bitwise.groupnorm.fwd".*' "$tmp/j2.xml" \
  && [[ $(grep -c '<testcase classname="bitwise' "$tmp/j2.xml") -eq $nbitwise ]] \
  || { echo "FAIL: JUnit does not count the bitwise failure or lacks bitwise testcases"; fails=$((fails + 1)); }
python3 -c 'import json,sys; b=json.load(open(sys.argv[1]))["bitwise"]["entries"]; f=[e for e in b if e["state"]=="failed"]; assert len(b)==int(sys.argv[2]) and len(f)==1 and f[0]["descriptor"].startswith("groupnorm.fwd"), f' "$tmp/r2.json" "$nbitwise" \
  || { echo "FAIL: the JSON report does not name the failed bitwise entry"; fails=$((fails + 1)); }
# Progress with standard output not a terminal: a flushed line per problem,
# and check's heartbeat with the elapsed time and the phase.
"$kgate" verify "${fast[@]}" --bitwise '' --report '' --junit '' > "$tmp/log.txt"
[[ $(grep -cE '^\[[0-9]+/5\] passed +[0-9.]+ s  groupnorm.fwd' "$tmp/log.txt") -eq 5 ]] || { echo "FAIL: no progress lines in a log"; cat "$tmp/log.txt"; fails=$((fails + 1)); }
expect 0 '^  \.\.\. [0-9.]+ s, (inputs|kernel|rerun|reference|oracle) \(fill ' -- "$kgate" check "groupnorm.fwd bf16 n1 c64 g8 d32" --progress 0.05
# Version: the git revision and the backends.
expect 0 '^kgate [0-9]+\.[0-9]+\.[0-9]+ \(git ([0-9a-f]+(-dirty)?|unknown)\) backend: host; also built: ' -- "$kgate" --version
# ---------------------------------------------------------------------------
# .npy inputs of `kgate ref`: a 30 KB header (std::regex overflowed the stack),
# a 144-byte file claiming 1.5 GB (allocated before), a folder as a file.
d="conv3d.fwd fp32 n1 c1 k1 d8 kd1"
"$kgate" gen "$d" --out "$tmp/npy" >/dev/null
python3 - "$tmp/npy" <<'PY'
import struct, sys
def npy(header, data=b""):
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data
h = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 8, 8, 8, 1), }"
open(sys.argv[1] + "/x30k.npy", "wb").write(npy(h + "x" * 30000 + "\n", bytes(2048)))
hb = "{'descr': '<f4', 'fortran_order': False, 'shape': (375000000,), }"
big = npy(hb + " " * (117 - len(hb)) + "\n", bytes(16))
assert len(big) == 144
open(sys.argv[1] + "/big.npy", "wb").write(big)
PY
cp -r "$tmp/npy" "$tmp/npy30k" && mv "$tmp/npy30k/x30k.npy" "$tmp/npy30k/x.npy"
expect 2 'x.npy: bad .npy header at byte' -- "$kgate" ref "$d" --inputs "$tmp/npy30k" --out "$tmp/o1"
cp -r "$tmp/npy" "$tmp/npybig" && mv "$tmp/npybig/big.npy" "$tmp/npybig/x.npy"
expect 2 'x.npy: truncated data: shape 375000000 of fp32 needs 1500000000 bytes, the file holds 16' -- \
  "$kgate" ref "$d" --inputs "$tmp/npybig" --out "$tmp/o2"
cp -r "$tmp/npy" "$tmp/npydir" && rm "$tmp/npydir/x.npy" && mkdir "$tmp/npydir/x.npy"
expect 2 'x.npy: is a directory, expected a file' -- "$kgate" ref "$d" --inputs "$tmp/npydir" --out "$tmp/o3"
# A corpus number no double holds names file and field; a duplicate key is refused.
sed '0,/"eps": 1e-05/s//"eps": 1e400/' "$(dirname "$0")/../../corpus/shapes.json" > "$tmp/eps.json"
expect 2 'eps.json: problems\[[0-9]+\]\.problem\.eps: malformed JSON: number overflow' -- \
  "$kgate" verify --corpus "$tmp/eps.json" --report "$tmp/r3.json"
echo '{"problems": [], "problems": []}' > "$tmp/dup.json"
expect 2 'dup.json: problems: key given twice' -- "$kgate" verify --corpus "$tmp/dup.json" --report "$tmp/r4.json"
# Report paths of the timing and audit commands are checked before their
# runs (a result is never lost after a long run); bench's round limits agree.
expect 2 "--json: cannot create '.*nothere/b.json': the folder '.*nothere' does not exist" -- \
  "$kgate" bench --arm ref --json "$tmp/nothere/b.json" "$D"
expect 2 "--svg: '.*' is a folder; a file is expected" -- "$kgate" bench --arm ref --json '' --svg "$tmp" "$D"
expect 2 '--max-rounds: 3 is below --min-rounds 5' -- "$kgate" bench --arm ref --min-rounds 5 --max-rounds 3 "$D"
# bench's arms: the built-in ones or python:MODULE[:ATTR], refused before any driver starts.
expect 2 "--arm: expected kgate, ref, torch, torch-det or python:MODULE\[:ATTR\], got 'pyth0n:x'" -- \
  "$kgate" bench --arm pyth0n:x --json '' "$D"
expect 2 "--arm: .*got 'python:'" -- "$kgate" bench --arm python: --json '' "$D"
expect 2 "--driver-timeout: .*not in range" -- "$kgate" bench --arm ref --driver-timeout 0 --json '' "$D"
expect 2 "--report: '.*' is a folder; a file is expected" -- "$kgate" audit --report "$tmp" "$D"
expect 2 "--json: '.*afile' exists and is not a folder" -- "$kgate" isa --json "$tmp/afile/isa.json"
# The references' worker count from the environment: a bad value is bad
# input naming the variable (it was silently the default).
expect 2 "environment: KGATE_REF_THREADS='two' is not valid: allowed values are an integer 1\.\.4096" -- \
  env KGATE_REF_THREADS=two "$kgate" check "$D"
expect 2 "environment: KGATE_REF_THREADS='0' is not valid" -- env KGATE_REF_THREADS=0 "$kgate" verify --filter op=groupnorm.fwd

# judge: the model, the folders and the manifest are checked before any
# comparison; every refusal names its flag or file.
J="conv3d.fwd bf16:fp32 n1 c4 k4 d4 kd3 p1"
"$kgate" gen "$J" --out "$tmp/jin" >/dev/null
mkdir -p "$tmp/jout"
expect 2 "--model: unknown model 'fp64'" -- "$kgate" judge "$J" --inputs "$tmp/jin" --outputs "$tmp/jout" --model fp64
expect 2 "--model: 'bf16-partials' needs its slice count" -- \
  "$kgate" judge "$J" --inputs "$tmp/jin" --outputs "$tmp/jout" --model bf16-partials
expect 2 "--inputs: .*nothere" -- "$kgate" judge "$J" --inputs "$tmp/nothere" --outputs "$tmp/jout"
expect 2 "jout/y.npy: missing: output y \(fp32 1x4x4x4x4\)" -- "$kgate" judge "$J" --inputs "$tmp/jin" --outputs "$tmp/jout"
expect 2 "--inputs: .* holds the inputs of 'conv3d.fwd bf16:fp32 n1 c4 k4 d4 kd3 p1'" -- \
  "$kgate" judge "conv3d.fwd bf16 n1 c4 k4 d4 kd3 p1" --inputs "$tmp/jin" --outputs "$tmp/jout"
expect 2 "--model: mma-sm90 models bf16 / fp16 matrix-core inputs" -- \
  "$kgate" judge "conv3d.fwd fp32 n1 c4 k4 d4 kd3 p1" --inputs "$tmp/jin" --outputs "$tmp/jout" --model mma-sm90
expect 2 "--junit: .*same file" -- "$kgate" judge "$J" --inputs "$tmp/jin" --outputs "$tmp/jout" --report - --junit -
# problems and desc --tensors: what drivers and the Python package read.
expect 0 '"calls_per_step": 2' -- "$kgate" problems --config A --filter op=groupnorm.fwd --json
expect 2 '--filter: selects no problem' -- "$kgate" problems --config A --filter op=nothing
expect 0 '"role": "rstd"' -- "$kgate" desc "groupnorm.bwd bf16 n1 c8 g2 d2" --tensors

finish
