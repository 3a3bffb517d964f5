"""Progress, as users see it: on a terminal a live bar (percent, files, bytes, rate, time left) redrawn in place;
in a Job's log (stderr not a terminal) one log line every 5 s. The run is made slow on purpose with strace's
fault injection (a delay on each file's open), so that the 5 s interval passes during the staging."""

import fcntl
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import termios
from datetime import datetime

import pytest

from conftest import HOIST_BIN, SANITIZER_ENV, record_output
from payloads import make_tree

STRACE = shutil.which("strace")


def tree_args(host_root, source, version="1.0.0"):
    return ["--host-root", str(host_root), "upgrade", "--component", "app", "--kind", "tree", "--source",
            str(source), "--destination", "/opt/app", "--version", version]


def slowed(argv, microseconds=30000):
    """argv under strace with 30 ms (or `microseconds`) on each openat."""
    return [STRACE, "-f", "-qq", "-o", "/dev/null", "-e", "trace=openat", "-e",
            f"inject=openat:delay_enter={microseconds}", *argv]


@pytest.mark.skipif(STRACE is None, reason="strace is not installed: no way to slow the run down here")
def test_a_terminal_gets_a_live_bar_redrawn_in_place(host_root, tmp_path):
    source = make_tree(tmp_path / "v1", {f"d{i % 8}/f{i}": os.urandom(4096 + i) for i in range(400)}, 1)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    # 10 ms on each openat: the bar is redrawn for 2 s or more, long after the count of its total has ended.
    proc = subprocess.Popen(slowed([HOIST_BIN, *tree_args(host_root, source)], 10000), stdin=slave, stdout=slave,
                            stderr=slave, env={"PATH": "/usr/bin:/bin", "TERM": "xterm", **SANITIZER_ENV})
    os.close(slave)
    output = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
    os.close(master)
    text = output.decode(errors="replace")
    assert proc.wait(timeout=60) == 0, text
    record_output(proc.args, "", text)
    # A bar is drawn at the start of the line and erased to its end: "\rapp [####....]  42% 170 files ...\033[K",
    # redrawn in place at most ten times a second; once staged, it is erased and the summary is logged. The total
    # is counted beside the copy: until the count has it, a bar shows files and bytes without a percentage.
    bars = list(re.finditer(
        r"\rapp \[([#.]+)\] +(?:(\d+)% )?(\d+) files ([\d.]+ \w+)(?:/([\d.]+ \w+))?[^\r\n]*\033\[K", text))
    assert bars, text
    totalled = [bar.group(2) is not None for bar in bars]
    assert any(totalled), text
    assert totalled == sorted(totalled), text  # once known, the total stays
    for bar in bars:
        cells, files = bar.group(1), int(bar.group(3))
        # Up to 40 cells, fewer when the rate and the time left need the room: the line fits the terminal.
        assert 10 <= len(cells) <= 40 and files <= 408, bar.group(0)
        assert len(bar.group(0)) - len("\r") - len("\033[K") < 100, bar.group(0)
        if bar.group(2) is not None:
            assert 0 <= int(bar.group(2)) <= 100, bar.group(0)
            assert bar.group(5) == "1.6 MiB", bar.group(0)  # the total: the tree's bytes
        else:
            assert bar.group(5) is None and set(cells) == {"."}, bar.group(0)
    rest = text[bars[-1].end():]
    assert rest.startswith("\r\033[K"), rest[:200]  # the bar erased
    # 400 files and their 8 directories
    assert re.search(r"info: app: staged 1\.0\.0 in [\d.]+ s: 408 added \(1\.6 MiB\)", rest), rest


@pytest.mark.skipif(STRACE is None, reason="strace is not installed: no way to slow the run down here")
def test_a_log_gets_a_progress_line_every_5_seconds(host_root, tmp_path):
    source = make_tree(tmp_path / "v1", {f"d{i % 8}/f{i}": f"file {i}\n" for i in range(240)}, 1)
    # 30 ms on each openat: 240 files and their directories take 7 s or more, on one thread.
    argv = slowed([HOIST_BIN, *tree_args(host_root, source), "--threads", "1"])
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    record_output(argv, proc.stdout, proc.stderr)
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr and "\033[" not in proc.stderr  # no bar in a log
    lines = re.findall(r"^(\S+) info: app: (\d+) files, ([\d.]+ \w+) of ([\d.]+ \w+) \((\d+)%\)(.*)$",
                       proc.stderr, re.MULTILINE)
    assert lines, proc.stderr
    for _, files, _, _, percent, rest in lines:
        assert 0 < int(files) <= 248 and 0 <= int(percent) <= 100  # 240 files and 8 directories
        assert re.match(r"^(, [\d.]+ \w+/s(, .+ left)?)?$", rest), rest  # no rate before the first byte
    staged = re.search(r"staged 1\.0\.0 in ([\d.]+) s", proc.stderr)
    assert staged, proc.stderr
    # One line each 5 s of staging, give or take the first and the last, and never two closer than that.
    assert len(lines) >= int(float(staged.group(1)) // 5) - 1 >= 0, (staged.group(1), lines)
    times = [datetime.fromisoformat(line[0].replace("Z", "+00:00")) for line in lines]
    assert all((later - earlier).total_seconds() >= 4.9 for earlier, later in zip(times, times[1:])), times


@pytest.mark.skipif(STRACE is None, reason="strace is not installed: no way to slow the run down here")
def test_the_next_version_is_measured_against_the_installed_ones_size(host_root, tmp_path):
    """Beside an installed version whose content index hoist wrote, the total is that version's size, said to be
    an estimate ('of about'): counting the payload's own bytes would take a walk of its inodes first."""
    v1 = make_tree(tmp_path / "v1", {f"d{i % 8}/f{i}": f"file {i}\n" * 40 for i in range(100)}, 1)
    proc = subprocess.run([HOIST_BIN, *tree_args(host_root, v1)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    installed = sum(p.stat().st_size for p in v1.rglob("*") if p.is_file())
    # Every file changed, one more byte each: what is staged is 100 bytes more than the estimate. Three slowed
    # opens a file (the old one read, the new one read and written): 9 s or more on one thread.
    v2 = make_tree(tmp_path / "v2", {f"d{i % 8}/f{i}": f"file {i}\n" * 40 + "+" for i in range(100)}, 1)
    argv = slowed([HOIST_BIN, *tree_args(host_root, v2, "1.1.0"), "--threads", "1"])
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    record_output(argv, proc.stdout, proc.stderr)
    assert proc.returncode == 0, proc.stderr
    lines = re.findall(r"^\S+ info: app: (\d+) files, ([\d.]+ \w+) of about ([\d.]+ \w+) \((\d+)%\)",
                       proc.stderr, re.MULTILINE)
    assert lines, proc.stderr
    shown = f"{installed / 1024:.1f} KiB"
    assert all(total == shown for _, _, total, _ in lines), (shown, lines)
    assert all(0 <= int(percent) <= 100 for _, _, _, percent in lines), lines
    # 100 files and their 8 directories (their mtimes moved)
    assert re.search(r"staged 1\.1\.0 in [\d.]+ s: 0 added \(0 B\), 108 changed", proc.stderr), proc.stderr
