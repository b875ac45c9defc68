# Sourced by the command-line test scripts: expect CODE PATTERN -- command...
# runs the command and counts a failure unless it exits with CODE and its
# output (stdout and stderr) has a line matching the extended regex PATTERN;
# finish prints the counts and exits 1 on any failure (a script's own checks
# add to `fails` and `oks` the same way).
fails=0
oks=0

expect() {
  local code=$1 pattern=$2; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [[ $rc -ne $code ]] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: $* -> rc $rc (want $code), output: $out"; fails=$((fails + 1))
  else
    echo "ok:   $* -> rc $rc"; oks=$((oks + 1))
  fi
}

finish() {
  echo "$oks of $((oks + fails)) checks passed, $fails failed"
  ((oks + fails > 0)) || { echo "FAIL: no check ran"; exit 1; }
  exit $((fails > 0))
}
