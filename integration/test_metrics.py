"""--metrics-file: the node's metrics for node-exporter's textfile collector, written atomically after upgrade
and rollback in Prometheus' text format, checked with promtool (Debian's prometheus package)."""

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import tree_manifest
from payloads import make_tree, manifest_without, rollback, upgrade

METRICS = "/var/lib/node_exporter/textfile_collector/hoist.prom"


def tree_args(source, version, *extra, component="app", scheme="semver"):
    return ["--component", component, "--kind", "tree", "--source", source, "--destination", f"/opt/{component}",
            "--version", version, "--version-scheme", scheme, "--metrics-file", METRICS, *extra]


def read_metrics(host_root):
    """The file's lines but the timestamp's, and the timestamp."""
    text = (host_root / METRICS.lstrip("/")).read_text()
    stamp = [line for line in text.splitlines() if line.startswith("hoist_last_run_timestamp_seconds{")]
    assert len(stamp) == 1, text
    return [line for line in text.splitlines() if not line.startswith("hoist_last_run_timestamp_seconds{")], \
        int(stamp[0].split()[1]), text


def promtool_check(text):
    if shutil.which("promtool") is None:
        pytest.skip("promtool is missing (Debian package prometheus)")
    result = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout == "" and result.stderr == "", result


HELP_AND_TYPES = {
    "info": ["# HELP hoist_component_info The version of each component hoist manages that is current on this node.",
             "# TYPE hoist_component_info gauge"],
    "last": ["# HELP hoist_last_run_timestamp_seconds When hoist's last upgrade or rollback on this node ended, in "
             "Unix time.", "# TYPE hoist_last_run_timestamp_seconds gauge",
             "# HELP hoist_last_run_success Whether that run succeeded (1) or failed (0).",
             "# TYPE hoist_last_run_success gauge"],
    "rollbacks": ["# HELP hoist_rollbacks_total Rollbacks that switched a component back, per component.",
                  "# TYPE hoist_rollbacks_total counter"],
}


def expected(info, success, rollbacks, command="upgrade"):
    """The file as it must read up to the rollbacks, but the timestamp's line (each component's standing follows:
    test_each_component_s_standing_is_a_gauge)."""
    return [*HELP_AND_TYPES["info"], *info, *HELP_AND_TYPES["last"],
            f'hoist_last_run_success{{command="{command}"}} {success}', *HELP_AND_TYPES["rollbacks"], *rollbacks]


def head(lines, length):
    return lines[:length]


def test_upgrade_rollback_and_a_refusal_each_rewrite_the_metrics(host_root, tmp_path):
    v1 = make_tree(tmp_path / "v1", {"a": "one\n"}, 1)
    v2 = make_tree(tmp_path / "v2", {"a": "two\n"}, 2)
    before = int(time.time())
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    lines, stamp, text = read_metrics(host_root)
    assert before <= stamp <= time.time()
    want = expected(['hoist_component_info{component="app",kind="tree",version="1.0.0"} 1'], 1,
                    ['hoist_rollbacks_total{component="app"} 0'])
    assert head(lines, len(want)) == want
    promtool_check(text)

    upgrade(host_root, *tree_args(v2, "2.0.0"), check=0)
    upgrade(host_root, *tree_args(v2, "2.0.0", component="tools"), check=0)
    rollback(host_root, "--component", "app", "--metrics-file", METRICS, check=0)
    lines, _, text = read_metrics(host_root)
    want = expected(['hoist_component_info{component="app",kind="tree",version="1.0.0"} 1',
                     'hoist_component_info{component="tools",kind="tree",version="2.0.0"} 1'], 1,
                    ['hoist_rollbacks_total{component="app"} 1', 'hoist_rollbacks_total{component="tools"} 0'],
                    command="rollback")
    assert head(lines, len(want)) == want
    promtool_check(text)
    # The counter lives in the component's state, so it survives runs that do not pass the flag. (A rollback walks
    # back, never forward to the version it left: --to goes there.)
    rollback(host_root, "--component", "app", "--to", "2.0.0", "--allow-quarantined", check=0)
    rollback(host_root, "--component", "app", "--to", "1.0.0", "--allow-quarantined", "--metrics-file", METRICS,
             check=0)
    assert 'hoist_rollbacks_total{component="app"} 3' in read_metrics(host_root)[0]

    # A refused downgrade: the run failed, the components stay as they were.
    upgrade(host_root, *tree_args(v1, "1.0.0", component="tools"), check=3)
    lines, _, text = read_metrics(host_root)
    assert 'hoist_last_run_success{command="upgrade"} 0' in lines
    assert 'hoist_component_info{component="tools",kind="tree",version="2.0.0"} 1' in lines
    promtool_check(text)
    # Written atomically: no temporary left beside it.
    assert sorted(p.name for p in (host_root / METRICS.lstrip("/")).parent.iterdir()) == ["hoist.prom"]


def test_label_values_are_escaped_as_the_format_requires(host_root, tmp_path):
    # No version scheme lets a quote, a backslash or a newline in, but the states on the host are read as they
    # are: one edited by hand (or by another tool) must not break the file node-exporter reads.
    source = make_tree(tmp_path / "v1", {"a": "one\n"}, 1)
    upgrade(host_root, *tree_args(source, "1.0.0", component="odd"), check=0)
    state_file = host_root / "var/lib/hoist/odd/state.json"
    state = json.loads(state_file.read_text())
    state["current"] = 'v1"quoted\\back\nline'
    state_file.write_text(json.dumps(state))
    upgrade(host_root, *tree_args(source, "1.0.0"), check=0)
    lines, _, text = read_metrics(host_root)
    assert 'hoist_component_info{component="odd",kind="tree",version="v1\\"quoted\\\\back\\nline"} 1' in lines
    promtool_check(text)


def test_no_metrics_file_by_default_nor_for_a_dry_run(host_root, tmp_path):
    v1 = make_tree(tmp_path / "v1", {"a": "one\n"}, 1)
    upgrade(host_root, "--component", "app", "--kind", "tree", "--source", v1, "--destination", "/opt/app",
            "--version", "1.0.0", check=0)
    upgrade(host_root, *tree_args(v1, "1.0.0", "--dry-run"), check=0)
    assert not (host_root / "var/lib/node_exporter").exists()
    assert not list(host_root.rglob("*.prom"))


def test_a_relative_metrics_path_is_refused_before_anything_changes(host_root, tmp_path):
    v1 = make_tree(tmp_path / "v1", {"a": "one\n"}, 1)
    before = tree_manifest(host_root)
    args = tree_args(v1, "1.0.0")
    args[args.index(METRICS)] = "hoist.prom"
    result = upgrade(host_root, *args, check=2)
    assert "--metrics-file: 'hoist.prom' is not an absolute path to a file on the host" in result.stderr
    assert tree_manifest(host_root) == before


def test_a_metrics_file_that_cannot_be_written_is_a_warning_not_a_failure(host_root, tmp_path):
    v1 = make_tree(tmp_path / "v1", {"a": "one\n"}, 1)
    (host_root / "var/lib").mkdir(parents=True)
    (host_root / "var/lib/node_exporter").write_text("a file where the directory should be\n")
    result = upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    assert "warning: no metrics (the run's outcome stands): failed to write the metrics file: " in result.stderr
    assert "var/lib/node_exporter" in result.stderr
    assert (host_root / "opt/app/current").readlink().name == "1.0.0"


def test_bad_input_leaves_the_host_as_it_was_metrics_included(host_root, tmp_path):
    # exit 2 writes no state; it writes no metrics either (a Plan's mistagged image, a typo in its args)
    before = tree_manifest(host_root)
    result = upgrade(host_root, *tree_args(tmp_path / "no-such-payload", "1.0.0"), check=2)
    assert "no-such-payload" in result.stderr
    assert tree_manifest(host_root) == before


def test_a_payload_that_does_not_verify_leaves_no_metrics(host_root, tmp_path):
    v1 = make_tree(tmp_path / "v1", {"a": "one\n"}, 1)
    sums = tmp_path / "SHA256SUMS"
    sums.write_text("0" * 64 + "  a\n")
    before = manifest_without(host_root, "run/hoist")  # the lock is taken before verification
    upgrade(host_root, *tree_args(v1, "1.0.0", "--sha256sums", sums), check=5)
    assert manifest_without(host_root, "run/hoist") == before


def test_each_component_s_standing_is_a_gauge(host_root, tmp_path):
    v1 = make_tree(tmp_path / "v1", {"a": "one\n"}, 1)
    v2 = make_tree(tmp_path / "v2", {"a": "two\n"}, 2)
    upgrade(host_root, *tree_args(v1, "1.0.0"), check=0)
    # 2.0.0 fails its check (nothing listens there): switched back, quarantined, the last upgrade not a success.
    upgrade(host_root, *tree_args(v2, "2.0.0", "--health-check", "http:http://127.0.0.1:1/", "--health-timeout",
                                  "1"), check=1)
    lines, _, text = read_metrics(host_root)
    assert 'hoist_last_run_success{command="upgrade"} 0' in lines
    for line in ('hoist_component_last_success{component="app",command="upgrade"} 0',
                 'hoist_component_quarantined_versions{component="app"} 1',
                 'hoist_component_pending_reboot{component="app"} 0',
                 'hoist_component_owed_restarts{component="app"} 0',
                 'hoist_component_owed_health_checks{component="app"} 0'):
        assert line in lines, (line, text)
    promtool_check(text)
    # The operator keeps 1.0.0: its own command succeeds, and says so under its name.
    rollback(host_root, "--component", "app", "--to", "1.0.0", "--metrics-file", METRICS, check=0)
    lines, _, _ = read_metrics(host_root)
    assert 'hoist_component_last_success{component="app",command="rollback"} 1' in lines


RULES = Path(__file__).resolve().parent.parent / "deploy/monitoring"


def test_the_shipped_alert_rules_check_fire_as_their_tests_say_and_name_only_metrics_hoist_writes(host_root,
                                                                                                  tmp_path):
    if shutil.which("promtool") is None:
        pytest.skip("promtool is missing (Debian package prometheus)")
    for argv in (["check", "rules", "hoist-rules.yaml"], ["test", "rules", "hoist-rules.test.yaml"]):
        result = subprocess.run(["promtool", *argv], cwd=RULES, capture_output=True, text=True)
        assert result.returncode == 0 and "SUCCESS" in result.stdout, result
    upgrade(host_root, *tree_args(make_tree(tmp_path / "v1", {"a": "one\n"}, 1), "1.0.0"), check=0)
    written = {line.split("{")[0].split()[0] for line in read_metrics(host_root)[0] if not line.startswith("#")}
    used = set(re.findall(r"\bhoist_\w+", (RULES / "hoist-rules.yaml").read_text()))
    assert used and used <= written, used - written
