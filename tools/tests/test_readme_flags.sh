#!/usr/bin/env bash
# The README's command-line section names every flag that `--help` lists, for
# every subcommand: the synopsis cannot fall behind the CLI11 definitions.
#   test_readme_flags.sh KGATE README.md
set -uo pipefail
kgate="$1" readme="$2"
section=$(awk '/^## The command line/{on=1; next} /^## /{on=0} on' "$readme")
fails=0 checked=0
for sub in "" desc gen check ref judge problems verify "corpus make" "census make" "bitwise make" "bitwise run" digests; do
  # Flags are the option names CLI11 prints at the start of each option line.
  # shellcheck disable=SC2086
  flags=$("$kgate" $sub --help | grep -oE '^ +(-[a-z], ?)?--[a-z][a-z-]*' | grep -oE -- '--[a-z][a-z-]*' | sort -u)
  [[ -n "$flags" ]] || { echo "FAIL: kgate $sub --help lists no flag"; fails=$((fails + 1)); }
  for f in $flags; do
    checked=$((checked + 1))
    grep -qE -- "(^|[^a-z-])$f([^a-z-]|$)" <<<"$section" || { echo "FAIL: kgate $sub: $f is not in the README's command-line section"; fails=$((fails + 1)); }
  done
done
echo "$checked flags checked; $((fails == 0 ? 1 : 0)) passed, $fails failed"
exit $((fails > 0))
