"""Finding and running the kgate binary; its errors as exceptions.

The binary is, in order: $KGATE_BIN (relative: to the working directory at
import); `kgate` on PATH; the build tree's
build/tools/kgate beside this source tree (tools/python/kgate -> ../../../).
kgate's exit codes: 0 passed, 1 failed, 2 bad input or run error (stderr
ends with one line `kgate: error: <field>: <message>`), 3 incomplete.
"""

import os
import shlex
import shutil
import subprocess
from pathlib import Path


class KgateError(Exception):
    """Base of every error this package raises."""


class InputError(KgateError, ValueError):
    """Bad input: a descriptor, a tensor (wrong role, dtype, shape) or an
    input file kgate refused (its exit 2). `field` names what was wrong (a
    descriptor token, a tensor role, a file name), `message` says how."""

    def __init__(self, field, message, command=None):
        self.field = field
        self.message = message
        self.command = command
        super().__init__(f"{field}: {message}" if field else message)


class RunError(KgateError, RuntimeError):
    """kgate did not run as its contract says (an unexpected exit status,
    unreadable output). Carries the command line, the exit status and stderr."""

    def __init__(self, message, command=None, returncode=None, stderr=""):
        self.command = command
        self.returncode = returncode
        self.stderr = stderr
        text = message
        if command is not None:
            text += f"\n  command: {shlex.join(str(c) for c in command)}"
        if returncode is not None:
            text += f"\n  exit status: {returncode}"
        if stderr.strip():
            text += "\n  stderr: " + stderr.strip().replace("\n", "\n          ")
        super().__init__(text)


class BinaryNotFoundError(KgateError, FileNotFoundError):
    """No kgate binary: KGATE_BIN unset (or not an executable file), none on
    PATH and none in the build tree."""


# A relative KGATE_BIN is relative to the working directory the package was
# imported in, so a later chdir (a test's tmp_path) does not lose it.
_IMPORT_CWD = os.getcwd()
_BUILD_TREE_BIN = Path(__file__).resolve().parent.parent.parent.parent / "build" / "tools" / "kgate"


def binary():
    """The kgate executable's path (see the module's docstring for the order)."""
    env = os.environ.get("KGATE_BIN")
    if env:
        p = Path(_IMPORT_CWD, env)  # an absolute env value stays as it is
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
        raise BinaryNotFoundError(f"KGATE_BIN={env!r} is not an executable file")
    on_path = shutil.which("kgate")
    if on_path:
        return on_path
    if _BUILD_TREE_BIN.is_file() and os.access(_BUILD_TREE_BIN, os.X_OK):
        return str(_BUILD_TREE_BIN)
    raise BinaryNotFoundError(
        "kgate binary not found: set KGATE_BIN to its path (e.g. KGATE_BIN=build/tools/kgate), "
        f"or put kgate on PATH, or build it at {_BUILD_TREE_BIN}")


def parse_error_line(stderr):
    """(field, message) of kgate's last `kgate: error: <field>: <message>`
    line, or (None, all of stderr on one line) when there is none."""
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    for ln in reversed(lines):
        prefix = "kgate: error: "
        if ln.startswith(prefix):
            rest = ln[len(prefix):]
            field, sep, message = rest.partition(": ")
            if sep and field and " " not in field.strip():
                return field, message
            return None, rest
    # An error from the argument parser, before kgate's own reporting.
    return None, " ".join(ln.strip() for ln in lines)


def run(args, ok=(0,), timeout=None):
    """Runs kgate with `args`. Returns the CompletedProcess when its exit
    status is in `ok`; raises InputError on exit 2 (the field and message of
    kgate's error line), RunError on anything else."""
    command = [binary(), *[str(a) for a in args]]
    try:
        proc = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise RunError(f"kgate ran past the timeout of {timeout} s", command,
                       stderr=(e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes)
                       else (e.stderr or "")) from None
    except OSError as e:
        raise RunError(f"kgate could not be started: {e}", command) from None
    if proc.returncode in ok:
        return proc
    if proc.returncode == 2:
        field, message = parse_error_line(proc.stderr)
        raise InputError(field, message, command)
    raise RunError(f"kgate {args[0] if args else ''} exited unexpectedly", command,
                   proc.returncode, proc.stderr)
