"""What the cluster can see of a run after SUC has collected its Job, pod and logs: the pod's termination
message (the file the kubelet mounts at /dev/termination-log; HOIST_TERMINATION_MESSAGE_PATH names another)."""

import os

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
    assert message.read_text() == "hoist upgrade: succeeded\napp: nothing installed -> 1.0.0 (first install)\n"
    upgrade(host_root, *tree_args(v2, "2.0.0"), env=env, check=0)
    assert message.read_text() == "hoist upgrade: succeeded\napp: 1.0.0 -> 2.0.0 (upgrade)\n"
    upgrade(host_root, *tree_args(v1, "1.0.0"), env=env, check=3)
    refusal = "app: refusing to downgrade from 2.0.0 to 1.0.0 (--allow-downgrade allows it)"
    # The refusal is the error: said once, not again as the component's line.
    assert message.read_text() == f"hoist upgrade: failed (exit 3): {refusal}\n"
    rollback(host_root, "--component", "app", env=env, check=0)
    assert message.read_text() == "hoist rollback: succeeded\napp: back one version\n"
    # A dry run changes nothing, the message included (2.0.0, rolled back from, is quarantined: let it in).
    upgrade(host_root, *tree_args(v2, "2.0.0", "--dry-run", "--allow-quarantined"), env=env, check=0)
    assert message.read_text() == "hoist rollback: succeeded\napp: back one version\n"
    # Bad input is an outcome too.
    upgrade(host_root, *tree_args(v2, "2.0.0", "--keep", "0"), env=env, check=2)
    assert message.read_text() == "hoist upgrade: failed (exit 2): --keep: expects a whole number of 1 or more, not '0'\n"


def test_no_termination_message_file_is_made_outside_a_pod(host_root, tmp_path):
    v1 = make_tree(tmp_path / "v1", {"a": "one\n"}, 1)
    message = tmp_path / "termination-log"
    upgrade(host_root, *tree_args(v1, "1.0.0"), env={"HOIST_TERMINATION_MESSAGE_PATH": str(message)}, check=0)
    assert not message.exists()
    assert not os.path.exists("/dev/termination-log")
