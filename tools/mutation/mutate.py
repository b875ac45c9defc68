#!/usr/bin/env python3
"""Mutation testing of the production kernels against kgate's default gate.

Copies the source tree to WORK/src, configures WORK/build once (ccache when
found), then for each sampled mutant: applies one source mutation, rebuilds
kgate and the property tests incrementally, and runs the default gate in
stages that stop at the first failure (a killed mutant):
  1. kgate verify --config plan --repeats 0   (the boundary problems of the
     mutated file's operator; for the conv kernels also on the host's sm90
     target, whose matrix-core paths the default target does not take)
  2. the property tests of the mutated file's operator at their CI size
     (GroupNorm: RC_PARAMS max_success=500; conv: max_success=1000)
  3. kgate verify                 (the whole default gate, bitwise corpus included)
Each stage stops at its first failure line.
A mutant that does not compile is stillborn and not counted. A stage that
runs past --timeout seconds kills the mutant (a hang is caught by CI's
timeout). Prints each verdict as it goes, then the score
killed / (killed + survived) and every survivor with its diff.

Operators (applied to code lines only, never to comments):
  rel      relational swap: < <=, > >=, == !=
  arith    arithmetic swap: + -, * /
  const    off-by-one integer literal: k -> k + 1, k -> k - 1
  index    index-term deletion: `a * b + ` or ` + a * b` dropped
  narrow   dtype narrowing: a float intermediate rounded to bf16,
           std::int64_t -> std::int32_t
Exit status: 0 when every counted mutant was killed, 1 when some survived
(or the score is below --min-score), 2 on bad arguments.
"""
import argparse
import difflib
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_FILES = ["kernels/groupnorm/gn_kernels.hpp", "kernels/groupnorm/groupnorm.cpp"]
# The property tests (and their CI size) and the verify filters of the
# boundary problems that gate a file, by folder. Another operator's problems
# never run the mutated code.
PROPS = {"kernels/groupnorm/": ("test_groupnorm_props", "max_success=500"),
         "kernels/conv3d/": ("test_conv_props", "max_success=1000")}
PLAN_FILTERS = {"kernels/groupnorm/": [["op=groupnorm"]],
                "kernels/conv3d/": [["op=conv3d"], ["op=conv_transpose3d"]]}
# `verify --config plan` runs the boundary problems on both emulated
# targets (gfx942, then sm90: the paths only the sm90 matrix-core model
# takes, its atoms and W-halo tiles), as plain `kgate verify` does.
# groupnorm.cpp below this line is the gate's boundary-problem generator, not kernel code.
STOP_MARK = "// The gate's boundary problems (below this line: not kernel code)."


def code_part(line):
    """The line without a trailing // comment, or None for comment/preprocessor lines."""
    s = line.strip()
    if not s or s.startswith("//") or s.startswith("#") or s.startswith("static_assert") or s.startswith("*"):
        return None
    i = line.find("//")
    return line if i < 0 else line[:i]


# Lines of the optional kernel timing (RunOptions::kernel_ms): no output depends on them.
SKIP_WORDS = ("timing_iters", "step_ms", "kernel_ms", "Event", "elapsed_ms", "ev.", "ev[")

SWAPS = {
    "rel": [(" < ", " <= "), (" <= ", " < "), (" > ", " >= "), (" >= ", " > "), (" == ", " != "), (" != ", " == ")],
    "arith": [(" + ", " - "), (" - ", " + "), (" * ", " / "), (" / ", " * ")],
}


def candidates(path, text):
    out = []
    lines = text.split("\n")
    stop = len(lines)
    for i, l in enumerate(lines):
        if STOP_MARK in l:
            stop = i
            break
    for i in range(stop):
        code = code_part(lines[i])
        if code is None or any(w in code for w in SKIP_WORDS):
            continue
        for op, pairs in SWAPS.items():
            for a, b in pairs:
                for m in re.finditer(re.escape(a), code):
                    out.append((path, i, m.start(), a, b, op))
        for m in re.finditer(r"(?<![\w.])(\d+)(?![\w.])", code):
            k = int(m.group(1))
            if code[max(0, m.start() - 2):m.start()] in ("<<", ">>"):
                continue
            for r in (k + 1, k - 1):
                if r >= 0:
                    out.append((path, i, m.start(), m.group(1), str(r), "const"))
        # A whole product term (factors are names or member accesses).
        for m in re.finditer(r"(?<![\w.\]])(?<!\* )(?:[\w.]+ \* )+[\w.]+ \+ ", code):
            out.append((path, i, m.start(), m.group(0), "", "index"))
        for m in re.finditer(r" \+ (?:[\w.]+ \* )+[\w.]+(?![\w.\[(])", code):
            out.append((path, i, m.start(), m.group(0), "", "index"))
        m = re.search(r"\b(const )?float (\w+) = (.+);\s*$", code)
        if m and "{" not in m.group(3):
            expr = m.group(3)
            j = code.index(expr, m.start(3))
            out.append((path, i, j, expr, "kgate::bf16::from_float(" + expr + ").to_float()", "narrow"))
        for m in re.finditer(r"std::int64_t", code):
            out.append((path, i, m.start(), "std::int64_t", "std::int32_t", "narrow"))
    return out


def apply(text, cand):
    _, i, col, a, b, _ = cand
    lines = text.split("\n")
    l = lines[i]
    assert l[col:col + len(a)] == a, (l, col, a)
    lines[i] = l[:col] + b + l[col + len(a):]
    return "\n".join(lines)


# A line of kgate verify or GoogleTest that already decides the stage: stop there.
FIRST_FAILURE = re.compile(r"^\[\d+/\d+\] (failed|untrusted|invalid) |^\[  FAILED  \]|^bitwise mismatch")


def run(cmd, cwd, timeout, env=None):
    """(exit status, output, seconds); stops the command at its first failure line (status 1)."""
    t0 = time.time()
    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    # A hung mutant prints nothing: a timer kills it.
    timer = threading.Timer(timeout, p.kill) if timeout else None
    if timer:
        timer.start()
    out = []
    rc = None
    for line in p.stdout:
        out.append(line)
        if FIRST_FAILURE.search(line):
            p.kill()
            rc = 1
            break
    p.wait()
    if timer:
        timer.cancel()
        if rc is None and time.time() - t0 >= timeout:
            rc = 124
    return (p.returncode if rc is None else rc), "".join(out), time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", default=os.path.join(ROOT, "build-mutation"), help="work folder (source copy, build)")
    ap.add_argument("--files", nargs="+", default=DEFAULT_FILES, help="sources to mutate, relative to the root")
    ap.add_argument("--count", type=int, default=40, help="mutants sampled (stratified by operator)")
    ap.add_argument("--seed", type=int, default=15, help="sampling seed")
    ap.add_argument("--operators", nargs="+", default=["rel", "arith", "const", "index", "narrow"])
    ap.add_argument("--jobs", type=int, default=2, help="build jobs and kgate verify --jobs")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per gate stage")
    ap.add_argument("--min-score", type=float, default=1.0, help="exit 1 below this score")
    ap.add_argument("--list", action="store_true", help="print the sampled mutants and stop")
    ap.add_argument("--quick", action="store_true",
                    help="stop after stages 1-2 (a survivor then has not met the whole verify: a sample's shortcut)")
    ap.add_argument("--mutant", action="append", default=[], metavar="FILE:LINE:OLD=>NEW",
                    help="run this planted mutant (first OLD on LINE replaced) instead of sampling; repeatable")
    args = ap.parse_args()
    if args.count < 1:
        print("mutate: error: --count: must be >= 1", file=sys.stderr)
        return 2
    for op in args.operators:
        if op not in ("rel", "arith", "const", "index", "narrow"):
            print(f"mutate: error: --operators: unknown operator '{op}'", file=sys.stderr)
            return 2
    originals = {}
    for f in args.files:
        p = os.path.join(ROOT, f)
        if not os.path.isfile(p):
            print(f"mutate: error: --files: no file {f}", file=sys.stderr)
            return 2
        originals[f] = open(p).read()

    planted = []
    for spec in args.mutant:
        try:
            f, line, rest = spec.split(":", 2)
            old, new = rest.split("=>", 1)
            i = int(line) - 1
            col = originals[f].split("\n")[i].index(old)
        except (ValueError, KeyError, IndexError):
            print(f"mutate: error: --mutant: '{spec}' is not FILE:LINE:OLD=>NEW with OLD on LINE of a --files file",
                  file=sys.stderr)
            return 2
        planted.append((f, i, col, old, new, "planted"))

    # Stratified sample: the same share of each operator, a fixed seed.
    rng = random.Random(args.seed)
    pool = {op: [] for op in args.operators}
    for f, text in originals.items():
        for c in candidates(f, text):
            if c[5] in pool:
                pool[c[5]].append(c)
    for op in pool:
        rng.shuffle(pool[op])
    sample = []
    while len(sample) < args.count and any(pool.values()):
        for op in args.operators:
            if pool[op] and len(sample) < args.count:
                sample.append(pool[op].pop())
    if planted:
        sample = planted
    print(f"mutate: {sum(len(v) for v in pool.values()) + len(sample)} candidate mutants, {len(sample)} "
          f"{'planted' if planted else 'sampled'} (seed {args.seed})", flush=True)
    if args.list:
        for k, c in enumerate(sample):
            line = originals[c[0]].split("\n")[c[1]]
            print(f"#{k} {c[5]} {c[0]}:{c[1] + 1}: {line.strip()}  ==>  {apply(line, (c[0], 0, c[2], c[3], c[4], c[5])).strip()}")
        return 0

    src = os.path.join(args.work, "src")
    build = os.path.join(args.work, "build")
    os.makedirs(args.work, exist_ok=True)
    if os.path.isdir(src):
        shutil.rmtree(src)
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns("build", "build-*", ".git"))
    # CI's optimisation level (-O2) without debug information: GCC's -O2
    # analyses (array bounds, loops proven to invoke undefined behaviour)
    # reject some mutants under -Werror, as CI's build would; a lower level
    # would let them run and survive. Configured on every run (cheap when
    # nothing changed), so a work folder from an older setting follows.
    cfg = ["cmake", "-G", "Ninja", "-S", src, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
           "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG", "-DKGATE_COVERAGE=OFF"]
    if shutil.which("ccache"):
        cfg.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
    subprocess.run(cfg, check=True, stdout=subprocess.DEVNULL)
    targets = ["kgate", "test_groupnorm_props", "test_conv_props"]
    rc, out, _ = run(["ninja", "-C", build, f"-j{args.jobs}"] + targets, src, None)
    if rc != 0:
        print(out[-3000:])
        print("mutate: error: the unmutated tree does not build", file=sys.stderr)
        return 2
    kgate = os.path.join(build, "tools", "kgate")
    tmp = os.path.join(args.work, "reports")
    os.makedirs(tmp, exist_ok=True)
    rep = ["--report", os.path.join(tmp, "r.json"), "--junit", os.path.join(tmp, "j.xml")]

    def stages(f):
        props = [(os.path.join(build, "property_tests", t),
                  # The CI size, without shrinking (the first counterexample decides).
                  dict(os.environ, RC_PARAMS=size + " noshrink=1"))
                 for folder, (t, size) in PROPS.items() if f.startswith(folder)]
        filters = next((v for folder, v in PLAN_FILTERS.items() if f.startswith(folder)), [[]])
        plan = [("verify --config plan" + "".join(" --filter " + x for x in fl),
                 [kgate, "verify", "--jobs", str(args.jobs), "--config", "plan", "--bitwise", "", "--repeats", "0"]
                 + [a for x in fl for a in ("--filter", x)] + rep, None)
                for fl in filters]
        full = [] if args.quick else [("verify", [kgate, "verify", "--jobs", str(args.jobs)] + rep, None)]
        return plan + [("property tests", cmd, env) for cmd, env in props] + full

    killed, survived, stillborn = [], [], []
    try:
        for k, c in enumerate(sample):
            f = c[0]
            mutated = apply(originals[f], c)
            with open(os.path.join(src, f), "w") as fh:
                fh.write(mutated)
            diff = "".join(difflib.unified_diff(originals[f].splitlines(True), mutated.splitlines(True), f, f, n=0))
            label = f"#{k} {c[5]} {f}:{c[1] + 1}"
            rc, out, secs = run(["ninja", "-C", build, f"-j{args.jobs}"] + targets, src, None)
            if rc != 0:
                stillborn.append((label, diff))
                print(f"{label}: stillborn (does not compile)", flush=True)
            else:
                by = None
                for name, cmd, e in stages(f):
                    rc, out, secs = run(cmd, src, args.timeout, e)
                    if rc != 0:
                        by = f"{name} (exit {rc}, {secs:.0f} s)"
                        break
                if by:
                    killed.append((label, diff, by))
                    print(f"{label}: killed by {by}", flush=True)
                else:
                    survived.append((label, diff))
                    print(f"{label}: SURVIVED{' stages 1-2 (--quick)' if args.quick else ''}\n{diff}", flush=True)
            with open(os.path.join(src, f), "w") as fh:
                fh.write(originals[f])
    finally:
        for f, text in originals.items():
            with open(os.path.join(src, f), "w") as fh:
                fh.write(text)
    counted = len(killed) + len(survived)
    score = len(killed) / counted if counted else 0.0
    print(f"\nmutation score{' (--quick: stages 1-2 only)' if args.quick else ''}: {len(killed)}/{counted} = {score:.3f} killed "
          f"({len(stillborn)} stillborn, not counted)")
    for f in args.files:
        k = sum(1 for x in killed if x[0].split(" ")[2].startswith(f + ":"))
        n = k + sum(1 for x in survived if x[0].split(" ")[2].startswith(f + ":"))
        if n:
            print(f"  {f}: {k}/{n} = {k / n:.3f} killed")
    if survived:
        print("survivors:")
        for label, diff in survived:
            print(f"{label}\n{diff}")
    return 0 if counted and score >= args.min_score and (args.min_score < 1.0 or not survived) else 1


if __name__ == "__main__":
    sys.exit(main())
