#!/usr/bin/env bash
# The installed kgate: `cmake --install` into a temporary prefix; the installed
# kgate prints its version and finds its corpora under the prefix from any
# folder (or in KGATE_DATA_DIR); a separate project builds against the CMake
# package (find_package(kgate)) and reproduces `kgate ref`'s digest.
set -uo pipefail
#   test_install.sh BUILD_DIR SOURCE_DIR [CXX [CXXFLAGS [LDFLAGS]]]   (the build's compiler and flags)
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd) cxx="${3:-c++}" cxxflags="${4:-}" ldflags="${5:-}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

cmake --install "$build" --prefix "$tmp/p" >/dev/null || { echo "FAIL: cmake --install"; exit 1; }
kgate="$tmp/p/bin/kgate"
cd "$tmp"
"$kgate" --version | grep -qE '^kgate [0-9.]+ \(git ' || fail "installed kgate --version"
[[ -f "$tmp/p/share/kgate/corpus/shapes.json" && -f "$tmp/p/include/reference/problem.hpp" && -f "$tmp/p/lib/cmake/kgate/kgateConfig.cmake" ]] \
  || fail "installed files missing"
# The corpora are the installed ones, not the source tree's.
"$kgate" verify --filter op=groupnorm.fwd --filter config=A --flop-budget 100000 --report r.json --junit '' >/dev/null
python3 -c 'import json,sys; r=json.load(open("r.json")); assert r["corpus"]==sys.argv[1] and r["bitwise"]["corpus"]==sys.argv[2], (r["corpus"], r["bitwise"]["corpus"])' \
  "$tmp/p/share/kgate/corpus/shapes.json" "$tmp/p/share/kgate/corpus/bitwise.json" || fail "installed kgate does not use its installed corpora"
# The driver protocol's Python end is the installed package: a bench arm's
# driver (a target that says where kgate.driver was loaded from) runs it.
pkg="$tmp/p/lib/python3/dist-packages/kgate"
[[ -f "$pkg/driver.py" && -f "$pkg/backends/torch.py" ]] || fail "the Python package is not installed under $pkg"
cat > probe_target.py <<'EOF'
import numpy as np
import kgate.driver
def describe():
    return "probe loaded " + kgate.driver.__file__
def run(problem, inputs):
    return {r: np.zeros(s["dims"], np.float32) for r, s in problem["outputs"].items()}
EOF
PYTHONPATH="$tmp" "$kgate" bench --arm python:probe_target --no-check --no-flush --budget 0.01 --min-rounds 2 --max-rounds 2 \
  --json b.json "groupnorm.fwd fp32 n1 c8 g2 d4" >bench.log 2>&1 || { cat bench.log; fail "installed kgate bench --arm python:..."; }
python3 -c 'import json,sys; t=json.load(open("b.json"))["problems"][0]["arms"][0]["timer"]; assert "probe loaded " + sys.argv[1] in t, t' \
  "$pkg/driver.py" || fail "installed kgate's driver does not load the installed package"
mkdir -p data/corpus && cp "$tmp/p/share/kgate/corpus/"*.json data/corpus/
KGATE_DATA_DIR="$tmp/data" "$kgate" verify --filter op=groupnorm.fwd --filter config=A --flop-budget 100000 --report r2.json --junit '' >/dev/null
python3 -c 'import json,sys; assert json.load(open("r2.json"))["corpus"]==sys.argv[1]' "$tmp/data/corpus/shapes.json" || fail "KGATE_DATA_DIR is not used"
# A consumer project.
cmake -S "$src/tools/tests/consumer" -B cb -G Ninja -DCMAKE_PREFIX_PATH="$tmp/p" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS="$cxxflags" -DCMAKE_EXE_LINKER_FLAGS="$ldflags" >cb.log 2>&1 \
  && cmake --build cb >>cb.log 2>&1 || { cat cb.log; fail "the consumer project does not configure or build"; }
if [[ -x cb/consumer ]]; then
  got=$(cb/consumer) || fail "consumer failed"
  "$kgate" gen "groupnorm.fwd fp32 n1 c8 g2 d4" --fill signed --seed 1 --out in >/dev/null
  "$kgate" ref "groupnorm.fwd fp32 n1 c8 g2 d4" --inputs in --impl fast --out out >/dev/null
  want=$(python3 -c 'import json; print(json.load(open("out/digests.json"))["outputs"]["y"])')
  [[ "$got" == "y $want passed" ]] || fail "consumer printed '$got', kgate ref's digest is $want"
fi
echo "$((fails == 0 ? 1 : 0)) passed, $fails failed"
exit $((fails > 0))
