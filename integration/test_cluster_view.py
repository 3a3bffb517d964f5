"""What the cluster can see of a run after SUC has collected its Job, pod and logs: the pod's termination
message (the file the kubelet mounts at /dev/termination-log; HOIST_TERMINATION_MESSAGE_PATH names another)."""

import json
import os

from conftest import parse_termination, run_hoist, termination
from payloads import make_tree, rollback, upgrade


def tree_args(source, version, *extra):
    return ["--component", "app", "--kind", "tree", "--source", source, "--destination", "/opt/app",
            "--version", version, *extra]


def test_the_termination_message_says_the_outcome_and_each_component_s_decision(host_root, tmp_path):
    v1 = make_tree(tmp_path / "v1", {"a": "one\n"}, 1)
    v2 = make_tree(tmp_path / "v2", {"a": "two\n"}, 2)
    message = tmp_path / "termination-log"
    message.write_text("")  # the kubelet makes the file; hoist only writes it
    env = {"HOIST_TERMINATION_MESSAGE_PATH": str(message)}
    upgrade(host_root, *tree_args(v1, "1.0.0"), env=env, check=0)
    assert parse_termination(message.read_text()) == termination(
        "upgrade", 0, components=["app: nothing installed -> 1.0.0 (first install)"])
    # Machines read it: one line of JSON, as `kubectl get pod -o jsonpath` gives it.
    assert message.read_text() == ('{"schema_version":1,"command":"upgrade","outcome":"ok","exit_code":0,'
                                   '"error":null,"components":["app: nothing installed -> 1.0.0 (first install)"]}\n')
    upgrade(host_root, *tree_args(v2, "2.0.0"), env=env, check=0)
    assert parse_termination(message.read_text()) == termination("upgrade", 0,
                                                                 components=["app: 1.0.0 -> 2.0.0 (upgrade)"])
    upgrade(host_root, *tree_args(v1, "1.0.0"), env=env, check=3)
    refusal = "app: refusing to downgrade from 2.0.0 to 1.0.0 (--allow-downgrade allows it)"
    # The refusal is the error: said once, not again as the component's line.
    assert parse_termination(message.read_text()) == termination("upgrade", 3, refusal)
    rollback(host_root, "--component", "app", env=env, check=0)
    assert parse_termination(message.read_text()) == termination("rollback", 0, components=["app: back one version"])
    # A dry run changes nothing, the message included (2.0.0, rolled back from, is quarantined: let it in).
    upgrade(host_root, *tree_args(v2, "2.0.0", "--dry-run", "--allow-quarantined"), env=env, check=0)
    assert parse_termination(message.read_text()) == termination("rollback", 0, components=["app: back one version"])
    # Bad input is an outcome too.
    upgrade(host_root, *tree_args(v2, "2.0.0", "--keep", "0"), env=env, check=2)
    assert parse_termination(message.read_text()) == termination(
        "upgrade", 2, "--keep: expects a whole number of 1 or more, not '0'")
    # A command line that names no command.
    upgrade(host_root, "--kep", "3", env=env, check=2)
    assert parse_termination(message.read_text())["command"] == "upgrade"
    run_hoist("upgarde", env=env, check=2)
    assert parse_termination(message.read_text()) == termination(
        None, 2, "unknown command 'upgarde' (did you mean 'upgrade'?; commands: upgrade, stage, rollback, prepare, "
        "status, version, help)")


def test_a_termination_message_past_4_kib_keeps_its_outcome_and_stays_json(host_root, tmp_path):
    # 60 components whose lines pass the kubelet's 4096 bytes: the last ones go (counted), the outcome stays.
    message = tmp_path / "termination-log"
    message.write_text("")
    components = []
    for i in range(60):
        source = tmp_path / f"p{i}"
        (source / "bin").mkdir(parents=True)
        (source / "bin/a").write_text(f"{i}\n")
        components.append({"name": f"component-with-a-long-name-{i:02d}", "kind": "tree", "source": str(source),
                           "destination": f"/opt/c{i}"})
    manifest = tmp_path / "hoist.json"
    manifest.write_text(json.dumps({"schema": 1, "components": components}))
    upgrade(host_root, "--manifest", manifest, "--version", "1.0.0",
            env={"HOIST_TERMINATION_MESSAGE_PATH": str(message)}, check=0)
    parsed = parse_termination(message.read_text())
    assert (parsed["outcome"], parsed["exit_code"], parsed["error"]) == ("ok", 0, None)
    kept = parsed["components"]
    assert 0 < len(kept) < 60 and parsed["components_omitted"] == 60 - len(kept)
    assert kept[0] == "component-with-a-long-name-00: nothing installed -> 1.0.0 (first install)"


def test_no_termination_message_file_is_made_outside_a_pod(host_root, tmp_path):
    v1 = make_tree(tmp_path / "v1", {"a": "one\n"}, 1)
    message = tmp_path / "termination-log"
    upgrade(host_root, *tree_args(v1, "1.0.0"), env={"HOIST_TERMINATION_MESSAGE_PATH": str(message)}, check=0)
    assert not message.exists()
    assert not os.path.exists("/dev/termination-log")
