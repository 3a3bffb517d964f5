"""`hoist rollback` of the static binary: each kind, --to, refusals."""

import json
import os

import pytest

from conftest import run_hoist, run_status, tree_manifest
from payloads import host_read, make_tree, read_tree, rollback, state_of, upgrade


def tree_args(source, version, *extra):
    return ["--component", "app", "--kind", "tree", "--source", source, "--destination", "/opt/app",
            "--version", version, *extra]


@pytest.fixture
def three_versions(host_root, tmp_path):
    trees = {}
    for i in range(1, 4):
        trees[f"1.{i}.0"] = make_tree(tmp_path / f"p{i}", {"bin/app": f"app {i}\n" * i, "same": "same\n"}, i)
        upgrade(host_root, *tree_args(trees[f"1.{i}.0"], f"1.{i}.0"), check=0)
    return trees


def test_rollback_goes_to_previous_and_swaps_the_links(host_root, three_versions):
    result = rollback(host_root, "--component", "app", check=0)
    assert "app: rolled back from 1.3.0 to 1.2.0" in result.stderr
    app = host_root / "opt/app"
    assert os.readlink(app / "current") == "1.2.0"
    assert os.readlink(app / "previous") == "1.3.0"
    assert read_tree(app / "current") == read_tree(three_versions["1.2.0"])
    state = state_of(host_root, "app")
    assert (state["current"], state["previous"]) == ("1.2.0", "1.3.0")
    assert state["last_result"]["command"] == "rollback" and state["last_result"]["outcome"] == "succeeded"


def test_a_second_rollback_walks_further_back_and_never_forward(host_root, three_versions):
    # The second rollback went to `previous`, the version the first had just left and quarantined.
    app = host_root / "opt/app"
    rollback(host_root, "--component", "app", check=0)
    result = rollback(host_root, "--component", "app", check=0)
    assert "app: rolled back from 1.2.0 to 1.1.0" in result.stderr
    assert (os.readlink(app / "current"), os.readlink(app / "previous")) == ("1.1.0", "1.2.0")
    assert read_tree(app / "current") == read_tree(three_versions["1.1.0"])
    state = state_of(host_root, "app")
    assert [q["version"] for q in state["quarantined"]] == ["1.3.0", "1.2.0"]
    assert [q["reason"] for q in state["quarantined"]] == ["rolled back to 1.2.0", "rolled back to 1.1.0"]
    assert {k: state["last_rollback"][k] for k in ("from", "to", "plan", "plan_hash")} == {
        "from": "1.2.0", "to": "1.1.0", "plan": "", "plan_hash": ""}
    # Nothing older is left that is not quarantined: refused, and the host stays on 1.1.0.
    result = rollback(host_root, "--component", "app", check=2)
    assert ("component 'app' has no kept version older than 1.1.0 that is not quarantined to roll back to (kept: "
            "1.1.0, 1.2.0 (quarantined), 1.3.0 (quarantined)); --to VERSION names one") in result.stderr
    assert os.readlink(app / "current") == "1.1.0"
    assert state_of(host_root, "app")["last_result"]["outcome"] == "refused"


def test_older_is_by_the_version_scheme_not_by_install_order(host_root, tmp_path):
    # 1.10.0 was installed before 1.9.0 (a downgrade): walking back from 1.9.0 goes to 1.2.0, the newest older one,
    # not to 1.10.0 (newer) nor to what was installed last.
    args = ["--component", "app", "--kind", "tree", "--destination", "/opt/app"]
    for i, version in enumerate(["1.2.0", "1.10.0", "1.9.0"]):
        upgrade(host_root, *args, "--source", make_tree(tmp_path / version, {"v": version}, i), "--version", version,
                "--allow-downgrade", "--keep", "5", check=0)
    result = rollback(host_root, "--component", "app", check=0)
    assert "app: rolled back from 1.9.0 to 1.2.0" in result.stderr


PLAN = {"SYSTEM_UPGRADE_PLAN_NAME": "app-rollback", "SYSTEM_UPGRADE_NODE_NAME": "n1"}


def test_a_rollback_rerun_by_the_same_plan_does_nothing_and_another_plan_walks_back(host_root, tmp_path):
    trees = {v: make_tree(tmp_path / v, {"bin/app": f"app {v}\n"}, i)
             for i, v in enumerate(["1.0.0", "1.1.0", "1.2.0"])}
    args = ["--component", "app", "--kind", "tree", "--destination", "/opt/app"]
    for version, tree in trees.items():
        upgrade(host_root, *args, "--source", tree, "--version", version, check=0)
    app = host_root / "opt/app"
    first = {**PLAN, "SYSTEM_UPGRADE_PLAN_LATEST_HASH": "h1"}
    rollback(host_root, "--component", "app", env=first, check=0)
    assert os.readlink(app / "current") == "1.1.0"
    state = state_of(host_root, "app")
    assert [q["version"] for q in state["quarantined"]] == ["1.2.0"]
    assert (state["last_rollback"]["plan"], state["last_rollback"]["plan_hash"]) == ("app-rollback", "h1")

    # The same Plan's Job again (a retried pod, a re-run after a reboot): nothing changes, exit 0.
    before = tree_manifest(app)
    again = rollback(host_root, "--component", "app", env=first, check=0)
    assert ("app: Plan app-rollback (hash h1) already rolled back from 1.2.0 to 1.1.0 at "
            f"{state['last_rollback']['time']}; nothing to do") in again.stderr
    assert tree_manifest(app) == before
    state = state_of(host_root, "app")
    assert (state["current"], state["rollbacks"]) == ("1.1.0", 1)
    assert (state["last_result"]["command"], state["last_result"]["outcome"]) == ("rollback", "unchanged")

    # Another Plan, or the same one edited (a new hash), walks back once more: to 1.0.0, quarantining 1.1.0.
    rollback(host_root, "--component", "app", env={**PLAN, "SYSTEM_UPGRADE_PLAN_LATEST_HASH": "h2"}, check=0)
    assert (os.readlink(app / "current"), os.readlink(app / "previous")) == ("1.0.0", "1.1.0")
    assert [q["version"] for q in state_of(host_root, "app")["quarantined"]] == ["1.2.0", "1.1.0"]
    # And never back to 1.2.0: by hand there is nothing older left.
    rollback(host_root, "--component", "app", check=2)
    assert os.readlink(app / "current") == "1.0.0"


def test_a_rollback_to_a_quarantined_version_needs_allow_quarantined(host_root, three_versions):
    # The version landed on is never quarantined: --to a quarantined one is refused (exit 3, as upgrade's gate),
    # or with --allow-quarantined it leaves the quarantine.
    app = host_root / "opt/app"
    rollback(host_root, "--component", "app", check=0)
    since = state_of(host_root, "app")["quarantined"][0]["since"]
    result = rollback(host_root, "--component", "app", "--to", "1.3.0", check=3)
    assert (f"app: refusing to roll back to 1.3.0: it is quarantined since {since} (rolled back to 1.2.0); pass "
            "--allow-quarantined to go back to it") in result.stderr
    assert os.readlink(app / "current") == "1.2.0"
    assert state_of(host_root, "app")["last_result"]["outcome"] == "refused"
    result = rollback(host_root, "--component", "app", "--to", "1.3.0", "--allow-quarantined", check=0)
    assert "app: 1.3.0 leaves the quarantine (--allow-quarantined)" in result.stderr
    assert os.readlink(app / "current") == "1.3.0"
    assert [q["version"] for q in state_of(host_root, "app")["quarantined"]] == ["1.2.0"]


def test_keep_counts_versions_not_quarantined_and_keeps_the_last_rollbacks_landing(host_root, tmp_path):
    # 1.0.0 -> 1.1.0, rollback (on 1.0.0, 1.1.0 quarantined), then 1.2.0 and 1.3.0 with --keep 3: 1.0.0 was removed
    # and the quarantined 1.1.0 kept.
    trees = {v: make_tree(tmp_path / v, {"bin/app": f"app {v}\n"}, i)
             for i, v in enumerate(["1.0.0", "1.1.0", "1.2.0", "1.3.0"])}
    args = ["--component", "app", "--kind", "tree", "--destination", "/opt/app", "--keep", "3"]
    app = host_root / "opt/app"
    for version in ["1.0.0", "1.1.0"]:
        upgrade(host_root, *args, "--source", trees[version], "--version", version, check=0)
    rollback(host_root, "--component", "app", check=0)
    upgrade(host_root, *args, "--source", trees["1.2.0"], "--version", "1.2.0", check=0)
    result = upgrade(host_root, *args, "--source", trees["1.3.0"], "--version", "1.3.0", check=0)
    assert "app: removed version 1.1.0 (--keep 3)" in result.stderr
    assert [v["version"] for v in state_of(host_root, "app")["versions"]] == ["1.0.0", "1.2.0", "1.3.0"]
    assert sorted(p.name for p in app.iterdir()) == ["1.0.0", "1.2.0", "1.3.0", "current", "previous"]
    # The last good version is still there to walk back to, past 1.2.0.
    rollback(host_root, "--component", "app", check=0)
    rollback(host_root, "--component", "app", check=0)
    assert os.readlink(app / "current") == "1.0.0"
    assert read_tree(app / "current") == read_tree(trees["1.0.0"])
    # Quarantined versions go first: with --keep 2, both (1.2.0, 1.3.0); and the version the last rollback landed on
    # (1.0.0) stays even when it is the oldest and the versions not quarantined are more than --keep.
    keep2 = [*args[:-1], "2"]
    upgrade(host_root, *keep2, "--source", make_tree(tmp_path / "1.4.0", {"v": "4"}, 4), "--version", "1.4.0", check=0)
    assert [v["version"] for v in state_of(host_root, "app")["versions"]] == ["1.0.0", "1.4.0"]
    upgrade(host_root, *keep2, "--source", make_tree(tmp_path / "1.5.0", {"v": "5"}, 5), "--version", "1.5.0", check=0)
    assert [v["version"] for v in state_of(host_root, "app")["versions"]] == ["1.0.0", "1.4.0", "1.5.0"]
    assert sorted(p.name for p in app.iterdir()) == ["1.0.0", "1.4.0", "1.5.0", "current", "previous"]


def test_rollback_to_a_named_kept_version(host_root, three_versions):
    rollback(host_root, "--component", "app", "--to", "1.1.0", check=0)
    assert os.readlink(host_root / "opt/app/current") == "1.1.0"
    assert os.readlink(host_root / "opt/app/previous") == "1.3.0"
    # Rolling back to the current version does nothing.
    result = rollback(host_root, "--component", "app", "--to", "1.1.0", check=0)
    assert "already at 1.1.0" in result.stderr


def test_rollback_refuses_a_missing_or_incomplete_version(host_root, three_versions):
    before = tree_manifest(host_root / "opt")
    result = rollback(host_root, "--component", "app", "--to", "0.9.0", check=2)
    assert "cannot roll back app to 0.9.0: it is not kept on the host (kept: 1.1.0, 1.2.0, 1.3.0)" in result.stderr
    os.rename(host_root / "opt/app/1.1.0", host_root / "opt/app/.1.1.0.partial")
    result = rollback(host_root, "--component", "app", "--to", "1.1.0", check=2)
    assert "cannot roll back app to 1.1.0: '" in result.stderr and "does not exist" in result.stderr
    assert state_of(host_root, "app")["last_result"]["outcome"] == "refused"
    assert os.readlink(host_root / "opt/app/current") == "1.3.0"
    assert before != tree_manifest(host_root / "opt")  # only the partial we made


def test_rollback_of_an_unknown_component_exits_2(host_root):
    result = rollback(host_root, "--component", "nope", check=2)
    assert "component 'nope' has no state" in result.stderr


def test_file_kind_rolls_back_to_the_file_from_before_hoist(host_root, tmp_path):
    bin_dir = host_root / "usr/local/bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "k3s").write_text("original\n")
    new = tmp_path / "k3s"
    new.write_text("new\n")
    upgrade(host_root, "--component", "k3s", "--kind", "file", "--source", new, "--destination", "/usr/local/bin/k3s",
            "--version", "1.0.0", check=0)
    rollback(host_root, "--component", "k3s", check=0)
    assert os.readlink(bin_dir / "k3s") == "/var/lib/hoist/k3s/pre-hoist/k3s"
    assert host_read(host_root, "/usr/local/bin/k3s") == b"original\n"
    state = state_of(host_root, "k3s")
    assert (state["current"], state["previous"]) == ("pre-hoist", "1.0.0")
    # 1.0.0 is quarantined now; the operator can still ask for it.
    upgrade(host_root, "--component", "k3s", "--kind", "file", "--source", new, "--destination", "/usr/local/bin/k3s",
            "--version", "1.0.0", check=3)
    upgrade(host_root, "--component", "k3s", "--kind", "file", "--source", new, "--destination", "/usr/local/bin/k3s",
            "--version", "1.0.0", "--allow-quarantined", check=0)
    assert host_read(host_root, "/usr/local/bin/k3s") == b"new\n"


def test_sync_kind_rolls_back_once(host_root, tmp_path):
    v1 = make_tree(tmp_path / "v1", {"a": "a1\n", "gone": "g\n"}, 1)
    v2 = make_tree(tmp_path / "v2", {"a": "a2 longer\n", "added": "n\n"}, 2)
    args = ["--component", "conf", "--kind", "sync", "--destination", "/etc/app"]
    upgrade(host_root, *args, "--source", v1, "--version", "1.0.0", check=0)
    upgrade(host_root, *args, "--source", v2, "--version", "2.0.0", check=0)
    rollback(host_root, "--component", "conf", check=0)
    assert read_tree(host_root / "etc/app") == read_tree(v1)
    state = state_of(host_root, "conf")
    assert (state["current"], state["previous"]) == ("1.0.0", "")
    result = rollback(host_root, "--component", "conf", check=2)
    assert "has no previous version to roll back to" in result.stderr
    assert list((host_root / "etc/.app.hoist-sync").iterdir()) == []


def test_a_version_rolled_back_from_is_quarantined_until_the_operator_asks_for_it(host_root, tmp_path):
    # The same upgrade re-applied (SUC re-runs a Plan whenever its hash changes) installed 1.1.0 again.
    trees = {v: make_tree(tmp_path / v, {"bin/app": f"app {v}\n"}, i) for i, v in enumerate(["1.0.0", "1.1.0", "1.2.0"])}
    args = ["--component", "app", "--kind", "tree", "--destination", "/opt/app"]
    upgrade(host_root, *args, "--source", trees["1.0.0"], "--version", "1.0.0", check=0)
    upgrade(host_root, *args, "--source", trees["1.1.0"], "--version", "1.1.0", check=0)
    rollback(host_root, "--component", "app", check=0)
    since = state_of(host_root, "app")["quarantined"][0]["since"]
    assert state_of(host_root, "app")["quarantined"] == [
        {"version": "1.1.0", "since": since, "reason": "rolled back to 1.0.0"}]

    before = tree_manifest(host_root / "opt/app")
    refused = upgrade(host_root, *args, "--source", trees["1.1.0"], "--version", "1.1.0", check=3)
    assert (f"app: refusing 1.1.0: it is quarantined since {since} (rolled back to 1.0.0); pass --allow-quarantined "
            "to install it again") in refused.stderr
    assert tree_manifest(host_root / "opt/app") == before
    assert os.readlink(host_root / "opt/app/current") == "1.0.0"

    text = run_status(host_root).stdout
    assert f"  quarantined: 1.1.0 since {since} (rolled back to 1.0.0)\n" in text
    status = json.loads(run_status(host_root, "--json").stdout)
    assert status["components"][0]["quarantined"][0]["version"] == "1.1.0"

    # A newer version is accepted, and the quarantine of 1.1.0 stays.
    upgrade(host_root, *args, "--source", trees["1.2.0"], "--version", "1.2.0", check=0)
    assert os.readlink(host_root / "opt/app/current") == "1.2.0"
    assert [q["version"] for q in state_of(host_root, "app")["quarantined"]] == ["1.1.0"]
    # The operator's word lifts it.
    upgrade(host_root, *args, "--source", trees["1.1.0"], "--version", "1.1.0", "--allow-downgrade", check=3)
    upgrade(host_root, *args, "--source", trees["1.1.0"], "--version", "1.1.0", "--allow-downgrade",
            "--allow-quarantined", check=0)
    assert os.readlink(host_root / "opt/app/current") == "1.1.0"
    assert state_of(host_root, "app")["quarantined"] == []
