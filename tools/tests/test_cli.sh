#!/usr/bin/env bash
# The command line on bad input: one clear message naming the field, exit
# code 2, no crash, and no output file left half-written.
set -uo pipefail
kgate="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

expect() {  # expect CODE PATTERN -- command...
  local code=$1 pattern=$2; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [[ $rc -ne $code ]] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: $* -> rc $rc (want $code), output: $out"; fails=$((fails + 1))
  else
    echo "ok:   $* -> rc $rc"
  fi
}

expect 2 'g: must divide the input channels' -- "$kgate" desc "conv3d.fwd bf16 n1 c64 k6 g4 d8 kd3 p1"
expect 2 "descriptor: token 'zz9'" -- "$kgate" desc "conv3d.fwd bf16 n1 c4 k4 d8 kd3 zz9"
expect 2 'd: output extent along d must be >= 1' -- "$kgate" desc "conv3d.fwd bf16 n1 c4 k4 d2 kd5"
expect 2 'opd: must be in \[0, max\(stride, dilation\)' -- "$kgate" desc "conv_transpose3d.fwd bf16 n1 c4 k4 d8 kd2 s2 op2"
expect 0 '^conv3d.fwd bf16 n1 c4 k4 d8 kd3 p1$' -- "$kgate" desc "conv3d.fwd bf16 n1 c4 k4 d8 kd3 s1 p1"
expect 2 'fill: unknown generator' -- "$kgate" gen "conv3d.fwd bf16 n1 c4 k4 d8 kd3" --fill gauss --out "$tmp/g"
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
expect 2 'Could not convert|must be|not in' -- "$kgate" verify --jobs 0
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
expect 1 'repro: kgate check .groupnorm.fwd' -- "$kgate" bitwise run --corpus "$tmp/bw.json"
expect 1 'FAILED: 1 of' -- "$kgate" verify --filter op=groupnorm --filter config=A --bitwise "$tmp/bw.json" --report "$tmp/r2.json" --junit "$tmp/j2.xml"
grep -q '"failures": 1' "$tmp/r2.json" || { echo "FAIL: report does not count the failure"; fails=$((fails + 1)); }
# Generated inputs and their manifest.
expect 0 'x.npy' -- "$kgate" gen "conv3d.fwd bf16 n1 c4 k4 d8 kd3 p1" --fill lattice --seed 3 --out "$tmp/in"
[[ -f "$tmp/in/x.npy" && -f "$tmp/in/w.npy" && -f "$tmp/in/manifest.json" ]] || { echo "FAIL: gen outputs missing"; fails=$((fails + 1)); }
ls "$tmp/in" | grep -q '\.tmp\.' && { echo "FAIL: temporary files left"; fails=$((fails + 1)); }

# --- reference hardening (descriptor, counts, .npy, JSON) ------------------
# Per-axis keys set one axis: sd2 halves D only.
expect 0 'out y bf16 1x4x8x8x1' -- "$kgate" desc "conv3d.fwd bf16 n1 c1 k1 d8 kd1 sd2"
expect 0 '^conv3d.fwd bf16 n1 c1 k1 d8 kd2 dild2 dilh1 dilw1$' -- "$kgate" desc "conv3d.fwd bf16 n1 c1 k1 d8 kd2 dild2"
# Errors name descriptor tokens; kd is required.
expect 2 '^kgate: error: kw: must be in \[1, 1024\], got 0' -- "$kgate" desc "conv3d.fwd bf16 n1 c4 k4 d8 kd3 kw0"
expect 2 'missing kd' -- "$kgate" desc "conv3d.fwd bf16 n1 c4 k4 d8"
# Byte counts past 2^63 are refused, naming the tensor or the sum; just below is exact.
expect 2 '^kgate: error: x: shape .* needs more than 2\^63 bytes' -- "$kgate" desc "conv3d.fwd fp64 n16777216 c4194304 k1 d32 kd1"
expect 2 '^kgate: error: bytes: ' -- "$kgate" desc "conv3d.fwd fp32 n16777216 c2097152 k2097152 d32 kd1"
expect 0 'min bytes  4611690416482287616$' -- "$kgate" desc "conv3d.fwd fp64 n16777216 c1048576 k1 d32 kd1"
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

echo "$((fails == 0 ? 1 : 0)) passed, $fails failed"
exit $((fails > 0))
