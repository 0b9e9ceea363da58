"""The check harness the PyMongo client scripts share.

    from checks import check, expect, failures, finish

`check(name, fn)` runs one check and prints `ok   - name` or `FAIL - name: why` (the lines
tests/clients/run.sh counts); an AssertionError (from `expect`) or any other exception fails
the check, never the run. `finish(label)` prints `label: N passed, N failed` and exits 1 when
a check failed.
"""

from __future__ import annotations

import sys
import traceback

_passed = 0
_failed = 0


def check(name, fn):
    """Runs one check; an AssertionError or any exception fails it."""
    global _passed, _failed
    try:
        detail = fn()
    except AssertionError as e:
        _failed += 1
        print(f"FAIL - {name}: {e}", flush=True)
    except Exception:  # noqa: BLE001 - a crash is a failure of this check, not of the run
        _failed += 1
        print(f"FAIL - {name}: exception\n" + traceback.format_exc().rstrip(), flush=True)
    else:
        _passed += 1
        print(f"ok   - {name}" + (f" ({detail})" if detail else ""), flush=True)


def expect(cond, msg):
    """Fails the running check with `msg` unless `cond`."""
    if not cond:
        raise AssertionError(msg)


def failures():
    """How many checks failed so far."""
    return _failed


def finish(label):
    """Prints the closing count line and exits 1 when a check failed."""
    print(f"{label}: {_passed} passed, {_failed} failed", flush=True)
    sys.exit(1 if _failed else 0)
