"""The JSON that hoist prints validates against the schemas in docs/schemas/ (python3-jsonschema), on real runs:
`status --json` on an empty host, after installs of each kind, a staged version, a failed health check that
quarantined a version and a rollback; `version --json`."""

import json
from pathlib import Path

import jsonschema
import pytest

from conftest import run_hoist
from payloads import make_tree, rollback, upgrade

SCHEMAS = Path(__file__).resolve().parent.parent / "docs/schemas"


def validate(output, schema):
    document = json.loads(output)
    jsonschema.validate(document, json.loads((SCHEMAS / schema).read_text()), cls=jsonschema.Draft7Validator)
    return document


def no_empty_strings(value, where="$"):
    """Empty means null in hoist's JSON: no "" anywhere."""
    if isinstance(value, dict):
        for key, item in value.items():
            no_empty_strings(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            no_empty_strings(item, f"{where}[{i}]")
    else:
        assert value != "", where


def status(host_root, check=0):
    """`status --json`, validated; its exit status 1 (a component needs attention) when `check` says so."""
    document = validate(run_hoist("status", "--host-root", host_root, "--json", check=check).stdout,
                        "status.schema.json")
    no_empty_strings(document)
    assert any(c["attention"] for c in document["components"]) == (check == 1)
    return document


def test_version_json_validates():
    data = validate(run_hoist("version", "--json", check=0).stdout, "version.schema.json")
    assert data["schema_version"] == 1
    no_empty_strings(data)


def test_status_json_validates_through_a_components_life(host_root, tmp_path):
    assert status(host_root)["components"] == []
    v1 = make_tree(tmp_path / "v1", {"bin/app": "one\n"}, 1)
    v2 = make_tree(tmp_path / "v2", {"bin/app": "two\n"}, 2)
    v3 = make_tree(tmp_path / "v3", {"bin/app": "three\n"}, 3)
    tree = ["--component", "app", "--kind", "tree", "--destination", "/opt/app"]
    upgrade(host_root, *tree, "--source", v1, "--version", "1.0.0", check=0)
    (tmp_path / "tool").write_text("tool\n")
    upgrade(host_root, "--component", "tool", "--kind", "file", "--source", tmp_path / "tool", "--destination",
            "/usr/local/bin/tool", "--version", "1.0.0", check=0)
    upgrade(host_root, "--component", "conf", "--kind", "sync", "--source", v1, "--destination", "/etc/conf",
            "--version", "1.0.0", check=0)
    data = status(host_root)
    assert data["schema_version"] == 1 and [c["component"] for c in data["components"]] == ["app", "conf", "tool"]
    assert all("schema" not in c for c in data["components"])
    app = data["components"][0]
    assert app["previous"] is None and app["last_result"]["message"] is None
    assert app["last_change"] == app["last_result"] and app["attention"] == []
    # A re-run that changes nothing is the last run, not the last change.
    upgrade(host_root, *tree, "--source", v1, "--version", "1.0.0", check=0)
    app = status(host_root)["components"][0]
    assert app["last_result"]["outcome"] == "unchanged"
    assert (app["last_change"]["outcome"], app["last_change"]["version"]) == ("succeeded", "1.0.0")
    # A staged version, then one that fails its check: switched back and quarantined.
    run_hoist("stage", "--host-root", host_root, "--lock-timeout", "5", *tree, "--source", v2, "--version", "2.0.0",
              check=0)
    assert status(host_root)["components"][0]["staged"]["complete"] is True
    upgrade(host_root, *tree, "--source", v3, "--version", "3.0.0", "--health-check", "http:http://127.0.0.1:1/",
            "--health-timeout", "1", check=1)
    app = status(host_root, check=1)["components"][0]
    assert app["last_result"]["outcome"] == "rolled-back" and app["quarantined"][0]["version"] == "3.0.0"
    assert app["last_change"] == app["last_result"] and app["attention"] == ["its last run failed"]
    rollback(host_root, "--component", "app", "--to", "1.0.0", check=0)
    app = status(host_root)["components"][0]
    assert app["last_result"]["command"] == "rollback"


def test_the_schemas_refuse_what_they_must(host_root):
    schema = json.loads((SCHEMAS / "status.schema.json").read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"host_root": "/", "state_dir": "/var/lib/hoist", "components": []}, schema)
    with pytest.raises(jsonschema.ValidationError, match="schema"):
        jsonschema.validate({"schema_version": 1, "host_root": "/", "state_dir": "/x", "components": [
            {"schema": 1}]}, schema)


def log_lines(result, **run_fields):
    """The JSON log lines of a run, each validated: each carries the run's fields, and the last the exit code."""
    schema = json.loads((SCHEMAS / "log-line.schema.json").read_text())
    lines = [json.loads(line) for line in result.stderr.splitlines()]
    assert lines, result.stderr
    for line in lines:
        jsonschema.validate(line, schema, cls=jsonschema.Draft7Validator)
        assert {name: line.get(name) for name in run_fields} == run_fields, line
    assert [line for line in lines if "exit_code" in line] == [lines[-1]]
    assert lines[-1]["exit_code"] == result.returncode
    return lines


def test_every_json_log_line_carries_the_run_and_the_last_its_exit_code(host_root, tmp_path):
    v1 = make_tree(tmp_path / "v1", {"bin/app": "one\n"}, 1)
    tree = ["--log-format", "json", "--component", "app", "--kind", "tree", "--destination", "/opt/app",
            "--source", v1]
    env = {"SYSTEM_UPGRADE_PLAN_NAME": "app-plan", "SYSTEM_UPGRADE_NODE_NAME": "node-1"}
    done = log_lines(upgrade(host_root, *tree, "--version", "1.0.0", check=0, env=env), command="upgrade",
                     component="app", version="1.0.0", plan="app-plan", node="node-1")
    assert (done[-1]["outcome"], done[-1]["msg"]) == ("ok", "exit 0 (ok)")
    # The error line keeps the run's fields: which component, which version, which Plan.
    refused = log_lines(upgrade(host_root, *tree, "--version", "0.9.0", check=3, env=env), command="upgrade",
                        component="app", version="0.9.0", plan="app-plan")
    assert refused[-2]["level"] == "error" and "refusing to downgrade" in refused[-2]["msg"]
    assert refused[-1]["outcome"] == "refused"
    gone = log_lines(rollback(host_root, "--log-format", "json", "--component", "nope", check=2), command="rollback",
                     component="nope")
    assert gone[-1]["outcome"] == "usage"
    # status after the refusal: the component needs attention, exit 1.
    status_lines = log_lines(run_hoist("--log-format", "json", "status", "--host-root", host_root, check=1),
                             command="status")
    assert status_lines[-1]["exit_code"] == 1
