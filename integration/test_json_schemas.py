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


def status(host_root):
    return validate(run_hoist("status", "--host-root", host_root, "--json", check=0).stdout, "status.schema.json")


def test_version_json_validates():
    data = validate(run_hoist("version", "--json", check=0).stdout, "version.schema.json")
    assert data["schema_version"] == 1


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
    # A staged version, then one that fails its check: switched back and quarantined.
    run_hoist("stage", "--host-root", host_root, "--lock-timeout", "5", *tree, "--source", v2, "--version", "2.0.0",
              check=0)
    assert status(host_root)["components"][0]["staged"]["complete"] is True
    upgrade(host_root, *tree, "--source", v3, "--version", "3.0.0", "--health-check", "http:http://127.0.0.1:1/",
            "--health-timeout", "1", check=1)
    app = status(host_root)["components"][0]
    assert app["last_result"]["outcome"] == "rolled-back" and app["quarantined"][0]["version"] == "3.0.0"
    rollback(host_root, "--component", "app", "--to", "1.0.0", check=0)
    assert status(host_root)["components"][0]["last_result"]["command"] == "rollback"


def test_the_schemas_refuse_what_they_must(host_root):
    schema = json.loads((SCHEMAS / "status.schema.json").read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"host_root": "/", "state_dir": "/var/lib/hoist", "components": []}, schema)
    with pytest.raises(jsonschema.ValidationError, match="schema"):
        jsonschema.validate({"schema_version": 1, "host_root": "/", "state_dir": "/x", "components": [
            {"schema": 1}]}, schema)
