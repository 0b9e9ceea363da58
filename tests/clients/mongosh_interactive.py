"""Drives an interactive mongosh session through a pseudo-terminal, as a person would.

    python mongosh_interactive.py /path/to/mongosh mongodb://127.0.0.1:PORT/

Waits for the prompt, types `db.version()` and expects 7.0.0; then `use cairn_pty`, inserts a
document, finds it by `_id`, checks `show dbs` / `show collections`, drops the database; types
`exit` and expects mongosh to end with status 0. Every answer must be followed by a new prompt.
The prompt must show that mongosh sees a mongos (`[direct: mongos] test>`). Exits 1 with the
transcript on any mismatch or timeout.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import sys
import termios
import time

MONGOSH, URI = sys.argv[1], sys.argv[2]
STEP_TIMEOUT = float(os.environ.get("CAIRN_MONGOSH_TIMEOUT", "60"))
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[=>]")
PROMPT = re.compile(r"(\[direct: (\w+)\] )?(\w+)> $")

pid, fd = pty.fork()
if pid == 0:
    os.execvp(MONGOSH, [MONGOSH, URI])

# A wide terminal so nothing wraps.
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))
transcript = ""


def clean(text: str) -> str:
    return ANSI.sub("", text).replace("\r", "")


def fail(msg: str) -> None:
    print(f"FAIL: {msg}")
    print("---- transcript (ANSI stripped) ----")
    print(clean(transcript))
    print("------------------------------------")
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    sys.exit(1)


def read_until(pattern: re.Pattern, since: int, what: str) -> re.Match:
    """Reads until `pattern` matches the cleaned output after offset `since`."""
    global transcript
    deadline = time.monotonic() + STEP_TIMEOUT
    while True:
        m = pattern.search(clean(transcript)[since:])
        if m:
            return m
        left = deadline - time.monotonic()
        if left <= 0:
            fail(f"timed out after {STEP_TIMEOUT:.0f}s waiting for {what}")
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            data = b""
        if not data:
            fail(f"mongosh ended while waiting for {what}")
        transcript += data.decode("utf-8", "replace")


def type_line(line: str) -> None:
    os.write(fd, line.encode() + b"\r")


m = read_until(PROMPT, 0, "the first prompt")
if m.group(2) != "mongos":
    fail(f"prompt {m.group(0)!r} does not say mongos")
prompt = m.group(0).strip()
mark = len(clean(transcript))

def step(line: str, answer: str, what: str) -> None:
    """Types `line`; expects a line starting with `answer` (a regex) after the echo, then a prompt.

    The echo itself is not matched: mongosh redraws the input line as it highlights and
    autocompletes, so the cleaned echo can hold repeated fragments. The answer must start on a
    line of its own after the echo line."""
    global mark
    type_line(line)
    read_until(re.compile(r"\n(.*\n)*?" + answer + r"\n(.*\n)*?.*> $"), mark, f"{what} and the next prompt")
    mark = len(clean(transcript))


step("db.version()", r"7\.0\.0", "7.0.0")
step("use cairn_pty", r"switched to db cairn_pty", "'switched to db cairn_pty'")
step("db.things.insertOne({_id: 42, word: 'hello pty', n: NumberLong('7')})",
     r"\{ acknowledged: true, insertedId: 42 \}", "an insertOne result with insertedId: 42")
step("db.things.findOne({_id: 42})", r"\{ _id: 42, word: 'hello pty', n: Long\('7'\) \}",
     "the inserted document")
step("show collections", r"things\s*", "the collection in 'show collections'")
step("show dbs", r"cairn_pty\s.*", "the database in 'show dbs'")
step("db.dropDatabase()", r"\{ ok: 1, dropped: 'cairn_pty' \}", "dropDatabase's reply")

type_line("exit")
deadline = time.monotonic() + STEP_TIMEOUT
status = None
while status is None:
    ready, _, _ = select.select([fd], [], [], 0.2)
    if ready:
        try:
            data = os.read(fd, 65536)
            transcript += data.decode("utf-8", "replace")
        except OSError:
            pass
    done, st = os.waitpid(pid, os.WNOHANG)
    if done:
        status = st
    elif time.monotonic() > deadline:
        fail("mongosh did not exit after `exit`")
code = os.waitstatus_to_exitcode(status)
if code != 0:
    fail(f"mongosh exited with status {code}")
print(f"prompt {prompt!r}; db.version() printed 7.0.0; inserted and found a document; "
      "show collections/dbs; dropDatabase; exit status 0")
