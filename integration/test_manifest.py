"""`hoist upgrade --manifest`: several components in one run, one lock, one
gate; the manifest read strictly."""

import json
import os
import shutil
import subprocess

import pytest

from conftest import run_hoist, run_status, tree_manifest
from payloads import (host_read, make_keys, make_tree, manifest_without, rollback, state_of, upgrade,
                      write_sha256sums)


def write_payload(tmp_path, version, index, tree_content, binary):
    """A payload image's content: a tree, a binary, SHA256SUMS and the manifest."""
    root = tmp_path / f"payload-{version}"
    make_tree(root / "opt-app", tree_content, index)
    (root / "bin").mkdir(parents=True)
    (root / "bin/tool").write_bytes(binary)
    write_sha256sums(root / "bin/SHA256SUMS", {"tool": root / "bin/tool"})
    manifest = {
        "schema": 1,
        "version": version,
        "components": [
            {"name": "app", "kind": "tree", "source": "opt-app", "destination": "/opt/app"},
            {"name": "tool", "kind": "file", "source": "bin/tool", "destination": "/usr/local/bin/tool",
             "sha256sums": "bin/SHA256SUMS", "keep": 2},
        ],
    }
    (root / "hoist.json").write_text(json.dumps(manifest))
    return root / "hoist.json"


@pytest.fixture
def manifests(tmp_path):
    return (write_payload(tmp_path, "1.0.0", 1, {"a": "one\n"}, b"tool one\n"),
            write_payload(tmp_path, "1.1.0", 2, {"a": "two, longer\n", "b": "b\n"}, b"tool two\n"))


def test_a_manifest_upgrades_every_component_in_one_run(host_root, manifests):
    m1, m2 = manifests
    result = upgrade(host_root, "--manifest", m1, check=0)
    assert result.stderr.count("lock taken") == 1
    upgrade(host_root, "--manifest", m2, check=0)
    assert os.readlink(host_root / "opt/app/current") == "1.1.0"
    assert host_read(host_root, "/usr/local/bin/tool") == b"tool two\n"
    assert state_of(host_root, "app")["current"] == "1.1.0"
    assert state_of(host_root, "tool")["previous"] == "1.0.0"
    result = upgrade(host_root, "--manifest", m2, check=0)
    assert "nothing to do" in result.stderr


def test_the_manifest_version_must_agree_with_the_plan(host_root, manifests):
    _, m2 = manifests
    before = tree_manifest(host_root)
    result = upgrade(host_root, "--manifest", m2, env={"SYSTEM_UPGRADE_PLAN_LATEST_VERSION": "1.2.0"}, check=2)
    assert "versions disagree for component 'app': '1.1.0' from the payload's manifest but '1.2.0' from " \
           "SYSTEM_UPGRADE_PLAN_LATEST_VERSION" in result.stderr
    upgrade(host_root, "--manifest", m2, "--version", "1.0.0", check=2)
    assert tree_manifest(host_root) == before
    upgrade(host_root, "--manifest", m2, "--version", "1.1.0", env={"SYSTEM_UPGRADE_PLAN_LATEST_VERSION": "1.1.0"},
            check=0)


def test_one_downgrade_refuses_the_whole_run(host_root, manifests, tmp_path):
    m1, m2 = manifests
    upgrade(host_root, "--manifest", m2, check=0)
    # A manifest that upgrades `tool` but downgrades `app`.
    doc = json.loads(m1.read_text())
    doc["components"][1]["version"] = "9.0.0"
    doc["components"][1]["source"] = str(m2.parent / "bin/tool")
    doc["components"][1]["sha256sums"] = str(m2.parent / "bin/SHA256SUMS")
    mixed = m1.parent / "mixed.json"
    mixed.write_text(json.dumps(doc))
    before = manifest_without(host_root, "run/hoist", "var/lib/hoist/app/state.json", "var/lib/hoist/tool/state.json")
    result = upgrade(host_root, "--manifest", mixed, check=3)
    assert "app: refusing to downgrade from 1.1.0 to 1.0.0" in result.stderr
    assert manifest_without(host_root, "run/hoist", "var/lib/hoist/app/state.json",
                            "var/lib/hoist/tool/state.json") == before
    assert state_of(host_root, "tool")["current"] == "1.1.0"


def test_a_failing_component_leaves_every_component_on_its_old_version(host_root, manifests):
    m1, m2 = manifests
    upgrade(host_root, "--manifest", m1, check=0)
    # The file component cannot be installed: its destination is a directory.
    (host_root / "usr/local/bin/tool").unlink()
    (host_root / "usr/local/bin/tool").mkdir()
    result = upgrade(host_root, "--manifest", m2, check=1)
    assert "it is a directory" in result.stderr
    assert os.readlink(host_root / "opt/app/current") == "1.0.0"
    assert sorted(p.name for p in (host_root / "opt/app").iterdir()) == ["1.0.0", "current"]
    assert state_of(host_root, "app")["last_result"]["outcome"] == "failed"


@pytest.mark.skipif(not shutil.which("strace"), reason="strace is not installed (it injects the disk's errors)")
def test_a_switch_that_cannot_be_undone_is_named_and_the_next_run_records_it(host_root, manifests, tmp_path):
    # The disk fails (EIO) for three renames: the tool's switch, then what undoing the run renames (the tool's
    # staged copy, then app's link back to 1.0.0). app, already switched, stays on 1.1.0.
    m1, m2 = manifests
    upgrade(host_root, "--manifest", m1, check=0)
    copy = tmp_path / "copy"
    shutil.copytree(host_root, copy, symlinks=True)
    trace = tmp_path / "trace.log"
    strace = ["strace", "-f", "-qq", "-o", trace, "-e", "trace=renameat"]
    upgrade(copy, "--manifest", m2, check=0, wrapper=strace)
    calls = [line for line in trace.read_text().splitlines() if "renameat(" in line]
    n = next(i for i, line in enumerate(calls, 1) if '".hoist-tmp.tool.' in line)
    result = upgrade(host_root, "--manifest", m2, check=1,
                     wrapper=[*strace, "-e", f"inject=renameat:error=EIO:when={n}..{n + 2}"])
    injected = [line for line in trace.read_text().splitlines() if "INJECTED" in line]
    assert len(injected) == 3 and '"current"' in injected[2], injected
    assert "error: app: could not undo: failed to rename a symlink to '1.0.0' over" in result.stderr
    # The run's error and both states name what stays switched.
    stuck = "app: could not switch back to 1.0.0 (failed to rename a symlink to '1.0.0' over"
    assert stuck in result.stderr.splitlines()[-1]
    assert "it stays on 1.1.0 until the next run records it" in result.stderr.splitlines()[-1]
    assert os.readlink(host_root / "opt/app/current") == "1.1.0"
    assert os.readlink(host_root / "usr/local/bin/tool") == "/var/lib/hoist/tool/1.0.0/tool"
    for component in ("app", "tool"):
        state = state_of(host_root, component)
        assert state["current"] == "1.0.0" and state["switching"]["to"] == "1.1.0", state
        assert stuck in state["last_result"]["message"]
    # What the host has is what status shows, and SUC's next pod finishes the run.
    status = run_status(host_root)
    assert "app: the state said 1.0.0, the host has 1.1.0: a run stopped after its switch" in status.stderr
    rerun = upgrade(host_root, "--manifest", m2, check=0)
    assert "gate: app: already at 1.1.0, nothing to do" in rerun.stderr
    assert host_read(host_root, "/usr/local/bin/tool") == b"tool two\n"
    assert state_of(host_root, "app")["current"] == "1.1.0" and state_of(host_root, "tool")["current"] == "1.1.0"
    assert state_of(host_root, "app")["switching"] is None


def test_component_flags_cannot_be_combined_with_a_manifest(host_root, manifests):
    m1, _ = manifests
    result = upgrade(host_root, "--manifest", m1, "--kind", "tree", check=2)
    assert "--kind cannot be combined with --manifest" in result.stderr


@pytest.mark.parametrize("document, error", [
    ({"schema": 1, "components": [{"name": "a", "kind": "tree", "source": "s", "destination": "/d", "x": 1}]},
     "$.components[0].x: unknown key"),
    ({"schema": 1, "components": [{"name": "a", "kind": "tree", "source": "s", "destination": "/d", "keep": "2"}]},
     "$.components[0].keep: expected an integer from 1 to 1000"),
    ({"schema": 1, "components": [{"name": "a", "kind": "tree", "source": "s", "destination": "/d1"},
                                  {"name": "a", "kind": "tree", "source": "s", "destination": "/d2"}]},
     "$.components[1].name: component 'a' is listed twice (first at $.components[0].name)"),
    ({"schema": 1, "components": [{"name": "a", "kind": "tree", "source": "s", "destination": "/d"},
                                  {"name": "b", "kind": "tree", "source": "s", "destination": "/d"}]},
     "components 'a' and 'b' have the same destination '/d'"),
    ({"schema": 1, "components": [{"name": "a", "kind": "tree", "source": "s", "destination": "/opt//d/"},
                                  {"name": "b", "kind": "tree", "source": "s", "destination": "/opt/d"}]},
     "components 'a' and 'b' have the same destination '/opt/d'"),
    ({"schema": 1, "components": [{"name": "bin", "kind": "sync", "source": "s", "destination": "/usr/local/bin"},
                                  {"name": "k3s", "kind": "tree", "source": "s", "destination": "/usr/local/bin/k3s"}]},
     "components 'k3s' and 'bin' overlap: '/usr/local/bin/k3s' is inside '/usr/local/bin'"),
    ({"schema": 1, "components": [{"name": "conf", "kind": "sync", "source": "s", "destination": "/opt/app/conf"},
                                  {"name": "app", "kind": "tree", "source": "s", "destination": "/opt/app/"}]},
     "components 'conf' and 'app' overlap: '/opt/app/conf' is inside '/opt/app/'"),
])
def test_a_bad_manifest_exits_2_naming_the_key(host_root, tmp_path, document, error):
    (tmp_path / "s").mkdir()
    path = tmp_path / "m.json"
    path.write_text(json.dumps(document))
    result = upgrade(host_root, "--manifest", path, "--version", "1.0.0", check=2)
    assert error in result.stderr
    assert not (host_root / "run/hoist").exists()


def test_a_duplicate_key_in_the_manifest_is_refused(host_root, tmp_path):
    path = tmp_path / "m.json"
    path.write_text('{"schema": 1, "schema": 1, "components": []}')
    result = upgrade(host_root, "--manifest", path, check=2)
    assert f"invalid manifest '{path}': $.schema: duplicate key" in result.stderr


def nul_manifest(tmp_path, key, value, kind="sync"):
    """A manifest whose one component syncs a payload to /opt/app, with `key` set to `value`."""
    (tmp_path / "s").mkdir(exist_ok=True)
    (tmp_path / "s/app.conf").write_text("payload\n")
    component = {"name": "app", "kind": kind, "source": "s", "destination": "/opt/app"}
    document = {"schema": 1, "version": "1.0.0", "components": [component]}
    if key.startswith("$."):
        document[key[2:]] = value
    else:
        component[key] = value
    path = tmp_path / "m.json"
    path.write_text(json.dumps(document))  # json.dumps writes a NUL as \u0000
    return path


def test_a_nul_in_a_manifest_destination_never_reaches_the_host(host_root, tmp_path):
    # "/etc\0/app" as a C string is "/etc": before this was refused, the sync deleted the host's /etc.
    (host_root / "etc/app").mkdir(parents=True, exist_ok=True)
    (host_root / "etc/hostname").write_text("node-1\n")
    (host_root / "etc/app/keep.conf").write_text("keep\n")
    before = tree_manifest(host_root)
    path = nul_manifest(tmp_path, "destination", "/etc\u0000/app")
    result = upgrade(host_root, "--manifest", path, check=2)
    assert f"invalid manifest '{path}': $.components[0].destination: must not contain a NUL character" \
        in result.stderr
    assert "\0" not in result.stderr
    assert tree_manifest(host_root) == before
    assert not (host_root / "run/hoist").exists(), "refused before the lock"


@pytest.mark.parametrize("key, value", [
    ("source", "s\u0000/../../etc"),
    ("name", "app\u0000x"),
    ("version", "1.0.0\u0000"),
    ("$.version", "1.0.0\u0000"),
    ("sha256sums", "SHA256SUMS\u0000"),
    ("version_scheme", "semver\u0000"),
])
def test_a_nul_in_any_manifest_string_is_refused(host_root, tmp_path, key, value):
    before = tree_manifest(host_root)
    path = nul_manifest(tmp_path, key, value)
    result = upgrade(host_root, "--manifest", path, check=2)
    where = key if key.startswith("$.") else "$.components[0]." + key
    assert f"{where}: must not contain a NUL character" in result.stderr
    assert tree_manifest(host_root) == before


@pytest.mark.parametrize("destination, shown", [
    ("/opt/app\n", "/opt/app\\n"),
    ("/opt/\x1b[31mapp", "/opt/\\x1b[31mapp"),
    ("/opt/a\rpp", "/opt/a\\rpp"),
])
def test_a_control_character_in_a_destination_is_refused(host_root, tmp_path, destination, shown):
    (tmp_path / "s").mkdir()
    before = tree_manifest(host_root)
    result = upgrade(host_root, "--component", "app", "--kind", "sync", "--source", tmp_path / "s",
                     "--destination", destination, "--version", "1.0.0", check=2)
    assert f"destination '{shown}' of component 'app' must not contain control characters" in result.stderr
    assert destination not in result.stderr
    assert tree_manifest(host_root) == before


@pytest.mark.parametrize("option", ["--state-dir", "--lock-file", "--host-root"])
def test_a_control_character_in_a_global_path_is_refused(host_root, tmp_path, option):
    (tmp_path / "s").mkdir()
    before = tree_manifest(host_root)
    root = [] if option == "--host-root" else ["--host-root", host_root]
    result = run_hoist(option, "/var/lib/hoist\n", "upgrade", *root, "--component", "app", "--kind", "tree",
                       "--source", tmp_path / "s", "--destination", "/opt/app", "--version", "1.0.0", check=2)
    assert f"{option}: '/var/lib/hoist\\n' must not contain control characters" in result.stderr
    assert tree_manifest(host_root) == before


def test_a_nul_in_a_state_file_is_corruption_named(host_root, tmp_path, manifests):
    m1, _ = manifests
    upgrade(host_root, "--manifest", m1, check=0)
    state_file = host_root / "var/lib/hoist/app/state.json"
    state = json.loads(state_file.read_text())
    state["destination"] = "/etc\u0000/app"
    state_file.write_text(json.dumps(state))
    result = run_hoist("status", "--host-root", host_root, check=1)
    assert "field 'destination' contains a NUL character" in result.stderr
    before = manifest_without(host_root, "run/hoist")
    result = rollback(host_root, "--component", "app", check=1)
    assert "field 'destination' contains a NUL character" in result.stderr
    assert manifest_without(host_root, "run/hoist") == before


# ---- the trust policy: the command line decides whether signatures are checked, never the payload ----------

@pytest.fixture
def keys(tmp_path):
    return make_keys(tmp_path / "keys", ("operator", "attacker"))


def signed_payload(tmp_path, keys, signer, ship_key=True):
    """A payload image whose manifest ships SHA256SUMS signed by `signer`, and (ship_key) `signer`'s key."""
    root = tmp_path / f"signed-by-{signer}"
    (root / "bin").mkdir(parents=True)
    (root / "bin/tool").write_bytes(b"tool from " + signer.encode() + b"\n")
    write_sha256sums(root / "bin/SHA256SUMS", {"tool": root / "bin/tool"})
    subprocess.run(["openssl", "pkeyutl", "-sign", "-rawin", "-inkey", keys / f"{signer}.key", "-in",
                    root / "bin/SHA256SUMS", "-out", root / "bin/SHA256SUMS.sig"], check=True, capture_output=True)
    shutil.copy(keys / f"{signer}.pem", root / "bin/key.pem")
    component = {"name": "tool", "kind": "file", "source": "bin/tool", "destination": "/usr/local/bin/tool",
                 "sha256sums": "bin/SHA256SUMS", "signature": "bin/SHA256SUMS.sig"}
    if ship_key:
        component["public_key"] = "bin/key.pem"
    (root / "hoist.json").write_text(json.dumps({"schema": 1, "version": "1.0.0", "components": [component]}))
    return root / "hoist.json"


def test_the_operator_s_key_replaces_the_key_an_image_ships(host_root, tmp_path, keys):
    forged = signed_payload(tmp_path, keys, "attacker")
    before = manifest_without(host_root, "run/hoist")
    # Whoever can push an image can sign it with a key of their own and ship that key in hoist.json.
    result = upgrade(host_root, "--manifest", forged, "--public-key", keys / "operator.pem", check=5)
    assert "does not verify with public key" in result.stderr and "operator.pem" in result.stderr
    assert manifest_without(host_root, "run/hoist", "var/lib/hoist/tool/state.json") == before
    assert not (host_root / "usr/local/bin/tool").exists()
    genuine = signed_payload(tmp_path, keys, "operator", ship_key=False)
    upgrade(host_root, "--manifest", genuine, "--public-key", keys / "operator.pem", check=0)
    assert host_read(host_root, "/usr/local/bin/tool") == b"tool from operator\n"


def test_a_payload_cannot_turn_the_signature_check_off(host_root, tmp_path, keys, manifests):
    m1, _ = manifests  # checksums for one component, no signature at all
    before = manifest_without(host_root, "run/hoist")
    for policy in (["--public-key", keys / "operator.pem"], ["--require-signature"]):
        result = upgrade(host_root, "--manifest", m1, *policy, check=5)
        assert f"manifest '{m1}': $.components[0]: component 'app' has no signed SHA256SUMS, and " \
               f"{policy[0]} requires one: a payload cannot turn off the signature check" in result.stderr
        assert manifest_without(host_root, "run/hoist") == before
    # A signature with no key anywhere: --require-signature wants one.
    unkeyed = signed_payload(tmp_path, keys, "operator", ship_key=False)
    result = upgrade(host_root, "--manifest", unkeyed, "--require-signature", check=2)
    assert f"manifest '{unkeyed}': $.components[0]: a signature needs a public key to check it with " \
           "(--public-key)" in result.stderr
    # The image's own key suffices when the operator only requires a signature.
    shipped = signed_payload(tmp_path, keys, "attacker")
    upgrade(host_root, "--manifest", shipped, "--require-signature", check=0)
