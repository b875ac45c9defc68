#!/usr/bin/env bash
# expect_failure.sh REGEX COMMAND...: passes when COMMAND exits non-zero and
# its output (stdout and stderr) matches the extended regular expression.
set -u
re=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -eq 0 ]; then echo "expect_failure: exit code 0, expected a failure"; exit 1; fi
if ! printf '%s\n' "$out" | grep -Eq -- "$re"; then echo "expect_failure: output does not match: $re"; exit 1; fi
echo "expect_failure: exit code $rc and the expected report"
