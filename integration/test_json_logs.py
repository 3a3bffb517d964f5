"""--log-format json: every line of stderr is one JSON object, with the run's structured fields (command,
component, version, phase, file and byte counts) beside `msg`, and a command line that does not parse is one of them
too (test_json_schemas validates the lines against docs/schemas/log-line.schema.json)."""

import json
import re

from conftest import run_hoist
from payloads import make_tree, rollback, upgrade

COUNTS = ["files_added", "files_changed", "files_removed", "files_unchanged", "bytes_added", "bytes_changed",
          "bytes_removed", "bytes_written"]


def json_lines(stderr):
    lines = [json.loads(line) for line in stderr.splitlines()]
    assert lines, stderr
    return lines


def line_with(lines, text):
    found = [line for line in lines if text in line["msg"]]
    assert len(found) == 1, (text, lines)
    return found[0]


def tree_args(source, version, kind="tree"):
    return ["--log-format", "json", "--component", "app", "--kind", kind, "--source", source,
            "--destination", "/opt/app", "--version", version]


def test_upgrade_lines_carry_component_version_phase_and_counts(host_root, tmp_path):
    v1 = make_tree(tmp_path / "v1", {"a": "one\n", "b/c": "three\n"}, 1)
    lines = json_lines(upgrade(host_root, *tree_args(v1, "1.0.0"), check=0).stderr)
    for line in lines:
        assert set(line) >= {"time", "level", "msg"}
    # The lock is the run's, no phase's: it carries the run's fields alone.
    lock = line_with(lines, "lock taken")
    assert set(lock) == {"schema_version", "time", "level", "msg", "command", "component", "version"}
    gate = line_with(lines, "gate: app: nothing installed -> 1.0.0")
    assert (gate["component"], gate["version"], gate["phase"]) == ("app", "1.0.0", "gate")
    staged = line_with(lines, "app: staged 1.0.0")
    assert (staged["component"], staged["version"], staged["phase"]) == ("app", "1.0.0", "stage")
    # a, b and b/c are new; 4 + 6 bytes of file data, all written.
    assert {name: staged[name] for name in COUNTS} == {
        "files_added": 3, "files_changed": 0, "files_removed": 0, "files_unchanged": 0,
        "bytes_added": 10, "bytes_changed": 0, "bytes_removed": 0, "bytes_written": 10}
    switched = line_with(lines, "app: switched")
    assert (switched["phase"], switched["component"]) == ("switch", "app")
    assert not set(COUNTS) & set(switched)
    kept = line_with(lines, "app: kept versions: 1.0.0")
    assert kept["phase"] == "record"


def test_a_sync_reports_its_counts_on_the_sync_line(host_root, tmp_path):
    v1 = make_tree(tmp_path / "v1", {"a": "one\n", "b": "two\n"}, 1)
    v2 = make_tree(tmp_path / "v2", {"a": "uno\n", "c": "three\n"}, 2)
    upgrade(host_root, *tree_args(v1, "1.0.0", kind="sync"), check=0)
    lines = json_lines(upgrade(host_root, *tree_args(v2, "2.0.0", kind="sync"), check=0).stderr)
    synced = line_with(lines, "app: synced 2.0.0")
    assert (synced["component"], synced["version"], synced["phase"]) == ("app", "2.0.0", "switch")
    assert (synced["files_added"], synced["files_changed"], synced["files_removed"]) == (1, 1, 1)
    assert (synced["bytes_added"], synced["bytes_changed"], synced["bytes_removed"]) == (6, 4, 4)


def test_rollback_lines_carry_the_component_and_the_target(host_root, tmp_path):
    upgrade(host_root, *tree_args(make_tree(tmp_path / "v1", {"a": "1\n"}, 1), "1.0.0"), check=0)
    upgrade(host_root, *tree_args(make_tree(tmp_path / "v2", {"a": "2\n"}, 2), "2.0.0"), check=0)
    lines = json_lines(rollback(host_root, "--log-format", "json", "--component", "app", check=0).stderr)
    done = line_with(lines, "app: rolled back from 2.0.0 to 1.0.0")
    assert (done["component"], done["version"], done["phase"]) == ("app", "1.0.0", "rollback")


def test_the_text_format_is_unchanged(host_root, tmp_path):
    v1 = make_tree(tmp_path / "v1", {"a": "one\n"}, 1)
    args = tree_args(v1, "1.0.0")[2:]
    stderr = upgrade(host_root, *args, check=0).stderr
    assert " info: app: staged 1.0.0 in " in stderr
    assert "files_added" not in stderr and "{" not in stderr


def test_a_command_line_that_does_not_parse_is_a_json_line_too(tmp_path):
    from test_json_schemas import validate

    result = run_hoist("--log-format", "json", "upgarde", check=2)
    # The error, then the exit line; no command was named, and the field says so (null).
    [line, last] = json_lines(result.stderr)
    assert (line["level"], line["command"]) == ("error", None)
    assert line["msg"] == ("unknown command 'upgarde' (did you mean 'upgrade'?; commands: upgrade, stage, rollback, "
                           "prepare, status, version, help); usage: hoist COMMAND [OPTIONS]; 'hoist help' shows the "
                           "options")
    assert (last["exit_code"], last["outcome"], last["command"]) == (2, "usage", None)
    result = run_hoist("upgrade", "--keep", "0", "--log-format=JSON", check=2)
    [line, last] = json_lines(result.stderr)
    assert (line["level"], line["command"]) == ("error", "upgrade")
    assert line["msg"].startswith("--keep: expects a whole number of 1 or more, not '0'; ")
    assert (last["exit_code"], last["outcome"], last["command"]) == (2, "usage", "upgrade")
    help_line, help_last = json_lines(run_hoist("--log-format", "json", "help", "upgarde", check=2).stderr)
    assert help_line["msg"].startswith("help: unknown command 'upgarde' (did you mean 'upgrade'?; ")
    assert (help_last["exit_code"], help_last["command"]) == (2, None)
    for output in (run_hoist("--log-format", "json", "upgarde", check=2).stderr, result.stderr,
                   run_hoist("--log-format", "json", "help", "upgarde", check=2).stderr):
        for text in output.splitlines():
            validate(text, "log-line.schema.json")
    # The last --log-format given counts, as for a command line that parses.
    result = run_hoist("--log-format", "json", "--log-format", "text", "upgarde", check=2)
    assert " error: unknown command 'upgarde'" in result.stderr and not result.stderr.startswith("{")
    # Without it, the line for people, in the format of every other line hoist logs: one line.
    result = run_hoist("upgarde", check=2)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z error: unknown command 'upgarde' "
                        r"\(did you mean 'upgrade'\?; commands: upgrade, stage, rollback, prepare, status, version, "
                        r"help\); usage: hoist COMMAND \[OPTIONS\]; 'hoist help' shows the options\n", result.stderr), \
        result.stderr
