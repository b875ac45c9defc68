#!/usr/bin/env bash
# The convolution measurements on an NVIDIA GPU machine, from the repository
# root, with the CUDA binaries (kgate_cuda, gn_bench_cuda, the shared
# libraries `ldd` lists beyond glibc, torch_conv.py, the bit-identity list)
# in BIN and results written to OUT:
#   1. bit-identity: gn_bench_cuda's digests of the problems in
#      BIN/bitid.txt (compare with gn_bench_host under KGATE_HOST_TARGET=sm90);
#   2. speed against PyTorch (torch_conv.py) on configuration A;
#   3. kgate_cuda verify --full --config A, one report per operator group, so
#      that a deadline (DEADLINE_S, default 560 s from the start) leaves the
#      finished groups' reports.
set -u
BIN=${1:?BIN} OUT=${2:?OUT}
END=$(( $(date +%s) + ${DEADLINE_S:-560} ))
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi -L > "$OUT/bitid.txt" 2>&1
start=$(date +%s)
xargs -d '\n' "$BIN/gn_bench_cuda" --iters 1 < "$BIN/bitid.txt" >> "$OUT/bitid.txt" 2>&1
echo "bit-identity run: $(( $(date +%s) - start )) s" >> "$OUT/bitid.txt"
start=$(date +%s)
python3 -c "import json; [print(p['descriptor']) for p in json.load(open('corpus/shapes.json'))['problems'] if p['config'] == 'A' and p['op'].startswith('conv')]" |
  timeout "${KGATE_SPEED_S:-120}" xargs -d '\n' "$BIN/gn_bench_cuda" --iters 5 > "$OUT/kgate_speed.txt" 2>&1
echo "kgate speed run: rc $? in $(( $(date +%s) - start )) s" >> "$OUT/kgate_speed.txt"
start=$(date +%s)
timeout "${SPEED_S:-150}" python3 "$BIN/torch_conv.py" --corpus corpus/shapes.json --config A \
  --kgate-output "$OUT/kgate_speed.txt" --iters 5 --json "$OUT/speed.json" > "$OUT/speed.txt" 2> "$OUT/torch_log.txt"
echo "speed run: rc $? in $(( $(date +%s) - start )) s" >> "$OUT/speed.txt"
mkdir -p "$OUT/verify"
for f in conv3d.fwd conv3d.bwd_data conv3d.bwd_weight conv_transpose3d groupnorm; do
  left=$(( END - $(date +%s) ))
  [ "$left" -gt 20 ] || { echo "$f: not run (deadline)" >> "$OUT/verify.txt"; continue; }
  start=$(date +%s)
  timeout "$left" "$BIN/kgate_cuda" verify --backend cuda --full --config A --filter "op=$f" --jobs 2 \
    --corpus corpus/shapes.json --bitwise '' --report "$OUT/verify/$f.json" --junit "$OUT/verify/$f.xml" \
    >> "$OUT/verify.txt" 2>&1
  echo "== $f: rc $? in $(( $(date +%s) - start )) s" >> "$OUT/verify.txt"
done
tar -czf "$OUT/verify_reports.tgz" -C "$OUT" verify && rm -rf "$OUT/verify"
