"""Input files and option values read strictly: a FIFO, a directory or a symlink
where a file belongs never hangs hoist and never passes for "nothing there"; an
empty option value never swallows the next flag; a parse error never quotes the
file it read (it may be a secret given by mistake)."""

import json
import os

import pytest

from conftest import run_hoist, tree_manifest
from payloads import make_tree, manifest_without, rollback, upgrade

# Long enough for a slow CI machine, far shorter than "forever" (the old hang).
QUICK = 20


def tree_component(tmp_path, version="1.0.0"):
    source = tmp_path / f"src-{version}"
    make_tree(source, {"a": f"{version}\n"})
    return ["--component", "app", "--kind", "tree", "--source", source, "--destination", "/opt/app",
            "--version", version]


def manifest_for(tmp_path):
    source = tmp_path / "s"
    make_tree(source, {"a": "one\n"})
    path = tmp_path / "hoist.json"
    path.write_text(json.dumps({"schema": 1, "version": "1.0.0", "components": [
        {"name": "app", "kind": "tree", "source": "s", "destination": "/opt/app"}]}))
    return path


# ---- input files that are not regular files ----

def test_a_manifest_that_is_a_fifo_is_refused_at_once(host_root, tmp_path):
    fifo = tmp_path / "hoist.json"
    os.mkfifo(fifo)
    before = tree_manifest(host_root)
    result = upgrade(host_root, "--manifest", fifo, timeout=QUICK, check=2)  # the old binary blocked in open(2)
    assert f"failed to read '{fifo}': it is a FIFO, not a regular file (--manifest)" in result.stderr
    assert tree_manifest(host_root) == before


def test_a_manifest_that_is_a_directory_is_refused(host_root, tmp_path):
    directory = tmp_path / "hoist.json"
    directory.mkdir()
    before = tree_manifest(host_root)
    result = upgrade(host_root, "--manifest", directory, timeout=QUICK, check=2)
    assert f"failed to read '{directory}': it is a directory, not a regular file (--manifest)" in result.stderr
    assert tree_manifest(host_root) == before


@pytest.mark.parametrize("option", ["--sha256sums", "--signature", "--public-key"])
def test_a_verification_input_that_is_a_fifo_is_refused(host_root, tmp_path, option):
    fifo = tmp_path / "input"
    os.mkfifo(fifo)
    extra = {"--sha256sums": [option, fifo],
             "--signature": ["--sha256sums", tmp_path / "SHA256SUMS", option, fifo, "--public-key", fifo],
             "--public-key": ["--sha256sums", tmp_path / "SHA256SUMS", "--signature", tmp_path / "sig", option, fifo]}
    (tmp_path / "SHA256SUMS").write_text("0" * 64 + "  a\n")
    (tmp_path / "sig").write_bytes(b"sig")
    before = tree_manifest(host_root)
    result = upgrade(host_root, *tree_component(tmp_path), *extra[option], timeout=QUICK, check=2)
    assert f"failed to read '{fifo}': it is a FIFO, not a regular file" in result.stderr
    assert manifest_without(host_root, "run/hoist", "var/lib/hoist") == before  # verified under the lock


def installed_state(host_root, tmp_path):
    upgrade(host_root, *tree_component(tmp_path), check=0)
    return host_root / "var/lib/hoist/app/state.json"


def test_a_state_file_that_is_a_fifo_is_corruption_named(host_root, tmp_path):
    state = installed_state(host_root, tmp_path)
    state.unlink()
    os.mkfifo(state)
    shown = f"{host_root}/var/lib/hoist/app/state.json"
    result = run_hoist("status", "--host-root", host_root, timeout=QUICK, check=1)
    assert f"failed to read '{shown}': it is a FIFO, not a regular file" in result.stderr
    before = manifest_without(host_root, "run/hoist")
    # The old binary hung here holding the lock.
    result = upgrade(host_root, *tree_component(tmp_path, "2.0.0"), timeout=QUICK, check=1)
    assert f"failed to read '{shown}': it is a FIFO, not a regular file" in result.stderr
    result = rollback(host_root, "--component", "app", check=1)
    assert f"failed to read '{shown}': it is a FIFO, not a regular file" in result.stderr
    assert manifest_without(host_root, "run/hoist") == before


def test_a_state_file_that_is_a_symlink_is_corruption_not_nothing_installed(host_root, tmp_path):
    state = installed_state(host_root, tmp_path)
    saved = state.with_name("saved.json")
    state.rename(saved)
    state.symlink_to("saved.json")
    shown = f"{host_root}/var/lib/hoist/app/state.json"
    # The old binary skipped the component: "no components installed", exit 0.
    result = run_hoist("status", "--host-root", host_root, check=1)
    assert f"failed to read '{shown}': it is a symbolic link, not a regular file" in result.stderr
    assert "no components" not in result.stdout + result.stderr
    result = run_hoist("status", "--host-root", host_root, "--json", check=1)
    assert f"failed to read '{shown}': it is a symbolic link, not a regular file" in result.stderr


def test_a_state_file_that_is_a_directory_is_corruption_named(host_root, tmp_path):
    state = installed_state(host_root, tmp_path)
    state.unlink()
    state.mkdir()
    result = run_hoist("status", "--host-root", host_root, check=1)
    assert f"failed to read '{host_root}/var/lib/hoist/app/state.json': it is a directory, not a regular file" \
        in result.stderr


def test_a_duplicate_key_in_the_state_file_is_corruption(host_root, tmp_path):
    state = installed_state(host_root, tmp_path)
    text = state.read_text()
    # Last wins in nlohmann: the old binary read current as 0.9.0 and said so.
    state.write_text(text.replace('"current": "1.0.0",', '"current": "1.0.0",\n  "current": "0.9.0",'))
    shown = f"{host_root}/var/lib/hoist/app/state.json"
    result = run_hoist("status", "--host-root", host_root, check=1)
    assert f"corrupt state file '{shown}': $.current: duplicate key" in result.stderr
    before = manifest_without(host_root, "run/hoist")
    result = rollback(host_root, "--component", "app", check=1)
    assert f"corrupt state file '{shown}': $.current: duplicate key" in result.stderr
    assert manifest_without(host_root, "run/hoist") == before


# ---- option values ----

@pytest.mark.parametrize("args, option, shown", [
    # An empty variable in a Plan's args: CLI11 took the next word as the value.
    (["--restart=", "--dry-run"], "--restart", "an empty value is not allowed"),
    (["--keep=", "--dry-run"], "--keep", "an empty value is not allowed"),
    (["--reboot=", "--dry-run"], "--reboot", "an empty value is not allowed"),
    (["--dry-run", "--restart="], "--restart", "an empty value is not allowed"),
    (["--restart", "--dry-run"], "--restart", "'--dry-run' looks like an option, not a value"),
    (["--destination", "-", "--dry-run"], "--destination", "'-' looks like an option, not a value"),
    (["--dry-run", "--restart", ""], "--restart", "an empty value is not allowed"),
    (["--dry-run", "--threads", "-1"], "--threads", "'-1' looks like an option, not a value"),
    (["--dry-run", "--sha256sums=-x"], "--sha256sums", "'-x' looks like an option, not a value"),
])
def test_an_empty_or_dash_value_is_refused_naming_the_option(host_root, tmp_path, args, option, shown):
    before = tree_manifest(host_root)
    # `--restart= --dry-run` installed for real with the old binary (and then failed on the restart).
    result = upgrade(host_root, *tree_component(tmp_path), *args, check=2)
    assert f" error: {option}: {shown}" in result.stderr
    assert tree_manifest(host_root) == before


@pytest.mark.parametrize("argv, option, shown", [
    (["--state-dir=", "status"], "--state-dir", "an empty value is not allowed"),
    (["--state-dir", "--lock-file=/x", "status"], "--state-dir", "'--lock-file=/x' looks like an option"),
    (["status", "--state-dir="], "--state-dir", "an empty value is not allowed"),
    (["--lock-timeout", "-5", "status"], "--lock-timeout", "'-5' looks like an option, not a value"),
    (["rollback", "--component=", "--to", "1.0.0"], "--component", "an empty value is not allowed"),
    (["rollback", "--component", "--to", "1.0.0"], "--component", "'--to' looks like an option, not a value"),
    (["prepare", "--", "-plan"], "PLAN", "'-plan' looks like an option, not a value"),
    (["prepare", ""], "PLAN", "an empty value is not allowed"),
])
def test_every_command_refuses_empty_and_dash_values(host_root, argv, option, shown):
    before = tree_manifest(host_root)
    result = run_hoist(*argv, "--host-root", host_root, check=2)
    assert f" error: {option}: " in result.stderr and shown in result.stderr
    assert tree_manifest(host_root) == before


def test_a_refused_log_format_value_is_named_not_taken_for_a_missing_command(host_root):
    result = run_hoist("--log-format=", "status", "--host-root", host_root, check=2)
    assert " error: --log-format: " in result.stderr
    assert "unknown command" not in result.stderr


# ---- parse errors never quote the file ----

SECRETS = {
    "jwt": "eyJhbGciOiJSUzI1NiIsImtpZCI6IjEyMyJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJl\n",
    "quoted": '"hunter2-secret-token\n',
    "literal": "truesecretvalue",
    "number": "12345secret",
    "json": '{"password": "hunter2", "x": tru}',
}


@pytest.mark.parametrize("kind", sorted(SECRETS))
def test_a_manifest_that_is_a_token_is_refused_without_quoting_it(host_root, tmp_path, kind):
    path = tmp_path / "token"
    path.write_text(SECRETS[kind])
    before = tree_manifest(host_root)
    result = upgrade(host_root, "--manifest", path, check=2)
    assert f"invalid manifest '{path}': parse error at line " in result.stderr
    for secret in ("eyJ", "hunter2", "secret", "trues", "12345"):
        assert secret not in result.stderr, result.stderr
    assert tree_manifest(host_root) == before


def test_a_state_file_that_is_not_json_is_named_without_quoting_it(host_root, tmp_path):
    state = installed_state(host_root, tmp_path)
    state.write_text('{"token": "hunter2", x}')
    result = run_hoist("status", "--host-root", host_root, check=1)
    assert f"corrupt state file '{host_root}/var/lib/hoist/app/state.json': parse error at line 1, column 22" \
        in result.stderr
    assert "hunter2" not in result.stderr


def test_a_number_out_of_range_is_named_without_quoting_it(host_root, tmp_path):
    path = manifest_for(tmp_path)
    path.write_text(path.read_text().replace('"schema": 1', '"schema": 1e987654'))
    result = upgrade(host_root, "--manifest", path, check=2)
    assert f"invalid manifest '{path}': a number is out of range" in result.stderr
    assert "987654" not in result.stderr
