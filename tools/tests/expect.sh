# Sourced by the command-line test scripts: expect CODE PATTERN -- command...
# runs the command and counts a failure unless it exits with CODE and its
# output (stdout and stderr) has a line matching the extended regex PATTERN;
# finish prints the count and exits 1 on any failure.
fails=0

expect() {
  local code=$1 pattern=$2; shift 3
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [[ $rc -ne $code ]] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: $* -> rc $rc (want $code), output: $out"; fails=$((fails + 1))
  else
    echo "ok:   $* -> rc $rc"
  fi
}

finish() {
  echo "$((fails == 0 ? 1 : 0)) passed, $fails failed"
  exit $((fails > 0))
}
