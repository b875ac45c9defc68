#!/usr/bin/env bash
# kgate digests: a file it wrote matches a rerun; the emulated sm90 target's
# matrix-core numerics differ from gfx942's and are reported per output; a
# changed digest, a problem missing from the file, a malformed file and a
# foreign seed each give their exit code; a failed run leaves --out as it was.
#   test_digests.sh KGATE
set -uo pipefail
kgate="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh"

# A matrix-core convolution (bf16 in, fp32 out: no output rounding to hide
# the atoms' own) and a GroupNorm: the first differs between the two
# emulated targets.
mma="conv3d.fwd bf16:fp32 n1 c16 k16 d8 kd3 p1"
gn="groupnorm.fwd bf16:fp32 n1 c16 g4 d4"
other="conv3d.fwd bf16 n1 c8 k8 d6 kd3 p1"
export KGATE_HOST_TARGET=gfx942
expect 0 "OK: 2 of 2 problem\(s\) ran" -- "$kgate" digests "$mma" "$gn" --out "$tmp/gfx942.json"
expect 0 "^OK: 2 of 2 problem\(s\) identical to the --expect file \(4 outputs\)" -- \
  "$kgate" digests --expect "$tmp/gfx942.json"
expect 1 "$mma: DIFFERENT: y: [0-9a-f]+ here, [0-9a-f]+ expected" -- \
  env KGATE_HOST_TARGET=sm90 "$kgate" digests --expect "$tmp/gfx942.json"
# One digest changed by hand: that output is named.
sed 's/"y": "\([0-9a-f]\)/"y": "0\1/' "$tmp/gfx942.json" > "$tmp/edited.json"
expect 1 "$gn: DIFFERENT: y: " -- "$kgate" digests "$gn" --expect "$tmp/edited.json"
# A problem the file does not have: not compared, incomplete (exit 3).
expect 3 "^INCOMPLETE: 1 of 2 problem\(s\) identical" -- "$kgate" digests "$gn" "$other" --expect "$tmp/gfx942.json"
# Bad input: named, exit 2, the --out file untouched.
cp "$tmp/gfx942.json" "$tmp/keep.json"
echo '{}' > "$tmp/empty.json"
expect 2 "--expect \(kgate_digests\): expected 1" -- "$kgate" digests --expect "$tmp/empty.json" --out "$tmp/keep.json"
echo '{"kgate_digests": 1, "backend": "host", "seed": 1, "problems": {"conv3d.fwd bf16 n1 c4": {}}}' > "$tmp/badproblem.json"
expect 2 "--expect \(problems.conv3d.fwd bf16 n1 c4\)" -- "$kgate" digests --expect "$tmp/badproblem.json"
echo '{"kgate_digests": 1,' > "$tmp/trunc.json"
expect 2 "--expect: not JSON" -- "$kgate" digests --expect "$tmp/trunc.json" --out "$tmp/keep.json"
expect 2 "--seed: 7 differs from the --expect file's seed 1" -- "$kgate" digests --expect "$tmp/gfx942.json" --seed 7
expect 2 "--expect: .*does not exist" -- "$kgate" digests --expect "$tmp/none.json"
expect 2 "--out" -- "$kgate" digests "$gn" --out "$tmp"
cmp -s "$tmp/gfx942.json" "$tmp/keep.json" || { echo "FAIL: --out was changed by a failed run"; fails=$((fails + 1)); }
finish
