#!/usr/bin/env bash
# ci/device-gate without a GPU: its arguments, and its identity step's exit
# code carried through, on a pack whose kgate_cuda is this build's kgate (the
# host backend) and whose sm90-digests.json this test writes.
#   test_device_gate.sh KGATE SOURCE_DIR
set -uo pipefail
kgate="$1" gate="$2/ci/device-gate"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=expect.sh
source "$(dirname "$0")/expect.sh"

pack="$tmp/pack"
mkdir -p "$pack/share/kgate"
printf '#!/bin/sh\nexec %q "$@"\n' "$kgate" > "$pack/kgate_cuda"
chmod +x "$pack/kgate_cuda"
problem="conv3d.fwd bf16:fp32 n1 c16 k16 d8 kd3 p1"  # matrix cores: the two targets differ
KGATE_HOST_TARGET=gfx942 "$kgate" digests "$problem" --out "$pack/share/kgate/sm90-digests.json" >/dev/null

expect 2 "usage: ci/device-gate" -- "$gate"
expect 2 "PACK: .*is missing" -- "$gate" "$tmp/none" "$tmp/out" verify
expect 2 "STEP: unknown step 'verfy'" -- "$gate" "$pack" "$tmp/out" identity verfy
expect 0 "ci/device-gate: exit 0" -- env KGATE_HOST_TARGET=gfx942 "$gate" "$pack" "$tmp/out" identity
grep -q "^OK: 1 of 1 problem(s) identical" "$tmp/out/identity.log" && [[ -s "$tmp/out/cuda-digests.json" ]] ||
  { echo "FAIL: identity wrote no log or digests"; fails=$((fails + 1)); }
expect 1 "ci/device-gate: exit 1" -- env KGATE_HOST_TARGET=sm90 "$gate" "$pack" "$tmp/out" identity
grep -q "DIFFERENT: y:" "$tmp/out/identity.log" || { echo "FAIL: the difference is not in identity.log"; fails=$((fails + 1)); }
finish
