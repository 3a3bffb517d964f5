"""Runs after every other integration test (CMake makes it depend on them all):
greps every stdout and stderr of hoist that the suite recorded (conftest's
record_output, under HOIST_BUILD_DIR/integration-logs) for the credentials the
tests handed to hoist."""

from pathlib import Path

import pytest

from conftest import LOG_ROOT
from known_secrets import ALL


def recorded_logs():
    # This file's own directory is empty (it runs no hoist); the others are what the suite produced.
    return sorted(p for p in LOG_ROOT.glob("*/*.log") if p.parent.name != Path(__file__).stem)


def test_no_recorded_hoist_output_contains_a_test_credential():
    logs = recorded_logs()
    if not logs:
        pytest.skip(f"no hoist output was recorded under {LOG_ROOT}: run the whole suite (ctest) first")
    leaks = []
    for log in logs:
        text = log.read_bytes()
        header, _, output = text.partition(b"# stdout:\n")
        for secret in ALL:
            if secret.encode() in output:
                leaks.append(f"{log}: {secret}")
    assert not leaks, "\n".join(leaks)
    suites = {p.parent.name for p in logs}
    missing = {"test_secrets", "test_prepare"} - suites
    if missing:
        pytest.skip(f"no recorded output of {', '.join(sorted(missing))} under {LOG_ROOT}: run the whole suite")
