"""Shared fixtures of the integration suite: it drives the real static binary.

HOIST_BIN names the binary (ctest sets it). Every test gets its own scratch
host root; `tree_manifest` records a tree byte for byte and metadata for
metadata so that a test can prove a refused run left the host exactly as it was.
"""

import hashlib
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

HOIST_BIN = os.environ.get("HOIST_BIN", "")
# Every hoist output the suite sees is kept here, one directory per test file, for
# test_zz_log_audit.py (which greps it all for the test credentials).
LOG_ROOT = Path(os.environ.get("HOIST_LOG_DIR")
                or Path(os.environ.get("HOIST_BUILD_DIR") or "/tmp") / "integration-logs")
_log_dir = None
_log_count = 0


def pytest_configure(config):
    global _log_dir
    if not HOIST_BIN or not os.access(HOIST_BIN, os.X_OK):
        raise pytest.UsageError("HOIST_BIN must name the built hoist binary (ctest sets it)")
    files = [arg for arg in config.args if arg.endswith(".py")]
    name = Path(files[0]).stem if len(files) == 1 else "pytest-" + str(os.getpid())
    _log_dir = LOG_ROOT / name
    shutil.rmtree(_log_dir, ignore_errors=True)


def record_output(argv, stdout, stderr):
    """Keeps one run's output (stdout and stderr) under LOG_ROOT for the log audit."""
    global _log_count
    if _log_dir is None:
        return
    _log_count += 1
    _log_dir.mkdir(parents=True, exist_ok=True)
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
    text = "\n".join([f"# test: {test}", "# argv: " + " ".join(map(str, argv)), "# stdout:", stdout or "",
                      "# stderr:", stderr or ""])
    (_log_dir / f"{os.getpid()}-{_log_count:05d}.log").write_text(text, errors="surrogateescape")


def pytest_sessionfinish(session, exitstatus):
    # ctest reports SKIP_RETURN_CODE (77) as "skipped": a file whose every test
    # skipped must not read as passed.
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or exitstatus != 0:
        return
    stats = reporter.stats
    if stats.get("skipped") and not stats.get("passed") and not stats.get("failed"):
        session.exitstatus = 77


class Result:
    def __init__(self, proc):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr

    def __repr__(self):
        return f"Result(rc={self.returncode}, stdout={self.stdout!r}, stderr={self.stderr!r})"


TERMINATION_SCHEMA = Path(__file__).resolve().parent.parent / "docs/schemas/termination-message.schema.json"
EXIT_NAMES = ["ok", "failed", "usage", "refused", "lock-timeout", "verification"]


def parse_termination(text):
    """hoist's termination message: one JSON object on one line, within the kubelet's 4 KiB, valid against
    docs/schemas/termination-message.schema.json. Returns it parsed."""
    import jsonschema

    assert text.endswith("\n") and text.count("\n") == 1 and len(text.encode()) <= 4096, text
    message = json.loads(text)
    jsonschema.validate(message, json.loads(TERMINATION_SCHEMA.read_text()), cls=jsonschema.Draft7Validator)
    return message


def termination(command, exit_code, error=None, components=()):
    """The termination message a run of `command` that exits `exit_code` writes, parsed."""
    return {"schema_version": 1, "command": command, "outcome": EXIT_NAMES[exit_code], "exit_code": exit_code,
            "error": error, "components": list(components)}


# A sanitizer build's settings (scripts/test-asan) reach every hoist the suite runs.
SANITIZER_ENV = {k: v for k, v in os.environ.items() if k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS")}


class RecordedPopen(subprocess.Popen):
    """A command line that runs hoist in the background (to be signalled or
    raced); communicate() keeps its output for the log audit, as run_hoist does."""

    def communicate(self, *args, **kwargs):
        out, err = super().communicate(*args, **kwargs)
        record_output(self.args, _text(out), _text(err))
        return out, err


def run_recorded(argv, **kwargs):
    """subprocess.run of a command line that runs hoist (under strace, unshare, …),
    its captured output kept for the log audit."""
    result = subprocess.run(argv, **kwargs)
    record_output(argv, _text(result.stdout), _text(result.stderr))
    return result


def _text(output):
    if isinstance(output, bytes):
        return output.decode(errors="surrogateescape")
    return output


def run_hoist(*args, env=None, timeout=120, check=None, input=None, wrapper=()):
    """Runs the binary (under `wrapper`, a command that runs its arguments); returns a Result. `check` asserts
    the exit code."""
    full_env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **SANITIZER_ENV}
    if env:
        full_env.update(env)
    proc = subprocess.run([*map(str, wrapper), HOIST_BIN, *map(str, args)], env=full_env, capture_output=True,
                          text=True, timeout=timeout, input=input)
    result = Result(proc)
    record_output(proc.args, proc.stdout, proc.stderr)
    if check is not None:
        assert result.returncode == check, result
    return result


def run_status(host_root, *args, env=None):
    """`hoist status ARGS` on host_root, whatever it finds: it exits 0, or 1 exactly when a component it shows needs
    attention ("needs attention:" in its text, a non-empty "attention" in its JSON)."""
    result = run_hoist("status", "--host-root", host_root, *args, env=env)
    assert result.returncode in (0, 1), result
    if "--json" in args:
        flagged = any(c["attention"] for c in json.loads(result.stdout)["components"])
    else:
        flagged = "\n  needs attention: " in result.stdout
    assert flagged == (result.returncode == 1), result
    return result


@pytest.fixture
def hoist():
    return run_hoist


@pytest.fixture
def host_root(tmp_path):
    """A scratch host root with the usual shape: /run, /var/run -> /run, /etc/os-release."""
    root = tmp_path / "host"
    (root / "run").mkdir(parents=True)
    (root / "var").mkdir()
    (root / "var/run").symlink_to("/run")
    (root / "etc").mkdir()
    (root / "etc/os-release").write_text("ID=debian\nVERSION_ID=12\n")
    (root / "proc/sys/kernel/random").mkdir(parents=True)
    (root / "proc/sys/kernel/random/boot_id").write_text("11111111-2222-4333-8444-555555555555\n")
    return root


def tree_manifest(root):
    """Every entry under `root`: type, mode, owner, size, mtime (ns), content
    hash, link target and xattrs. Two equal manifests mean an untouched tree."""
    root = Path(root)
    entries = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            st = os.lstat(path)
            item = {
                "mode": stat.filemode(st.st_mode),
                "uid": st.st_uid,
                "gid": st.st_gid,
                "mtime_ns": st.st_mtime_ns if not stat.S_ISDIR(st.st_mode) else None,
            }
            if stat.S_ISREG(st.st_mode):
                item["size"] = st.st_size
                item["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
                item["nlink"] = st.st_nlink
            elif stat.S_ISLNK(st.st_mode):
                item["target"] = os.readlink(path)
            elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                item["rdev"] = st.st_rdev
            try:
                item["xattrs"] = {k: os.getxattr(path, k, follow_symlinks=False)
                                  for k in sorted(os.listxattr(path, follow_symlinks=False))}
            except OSError:
                item["xattrs"] = None
            entries[rel] = item
    entries["."] = {"mode": stat.filemode(os.lstat(root).st_mode)}
    return entries
