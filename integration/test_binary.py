"""The binary itself: fully static, its CLI, its exit codes, `version` and `status`."""

import datetime
import json
import os
import platform
import re
import subprocess
from pathlib import Path

import pytest

from conftest import HOIST_BIN, run_hoist


@pytest.mark.skipif(os.environ.get("HOIST_STATIC") == "OFF",
                    reason="a build configured with HOIST_STATIC=OFF (the sanitizer build) links dynamically")
def test_the_binary_is_fully_static():
    # A static-pie: no interpreter and no library to load, only its own relocations to apply.
    ldd = subprocess.run(["ldd", HOIST_BIN], capture_output=True, text=True)
    assert ldd.stdout.strip() == "statically linked", ldd.stdout + ldd.stderr
    file = subprocess.run(["file", "-b", HOIST_BIN], capture_output=True, text=True).stdout
    assert "static-pie linked" in file


# Every library the static binary links (the -l of its link line, and the C and C++ runtimes), and the
# header-only ones compiled in (CLI11, nlohmann-json). The compression libraries follow libarchive, which names them.
LINKED = ["glibc", "libstdc++", "libarchive", "zlib", "liblzma", "libbz2", "liblz4", "libzstd", "openssl", "libmount",
          "libblkid", "libyaml", "libacl", "libcap", "libsystemd (sd-bus)", "sdbus-c++", "spdlog", "fmt", "CLI11",
          "nlohmann-json"]


def test_version_names_hoist_its_build_and_every_linked_library():
    out = run_hoist("version", check=0).stdout
    first = out.splitlines()[0]
    match = re.fullmatch(r"hoist (0\.\d+\.\d+) \(commit ([0-9a-f]{12}(?:-dirty)?|unknown), built "
                         r"(\d{4}-\d\d-\d\d), (\S+)\)", first)
    assert match, first
    assert [line.split("  ")[1] for line in out.splitlines()[1:]] == LINKED
    data = json.loads(run_hoist("version", "--json", check=0).stdout)
    assert (data["hoist"], data["commit"], data["build_date"], data["architecture"]) == match.groups()
    assert data["architecture"] == platform.machine()
    assert data["build_date"] <= datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    assert sorted(data["libraries"]) == sorted(LINKED)
    libraries = data["libraries"]
    # Each entry is one library's version alone: no library packed into another's, no release date.
    for name, version in libraries.items():
        assert re.fullmatch(r"\d+(\.\d+)*", version), (name, version)
    assert libraries["libarchive"].startswith("3.")
    assert libraries["openssl"].startswith("3.")
    assert libraries["libmount"].startswith("2.38") and libraries["libblkid"] == libraries["libmount"]
    assert re.fullmatch(r"2\.\d+", libraries["glibc"])
    assert re.fullmatch(r"0\.\d+\.\d+", libraries["libyaml"])
    assert "unknown" not in libraries.values() and "" not in libraries.values()
    # The commit is one of the repository's, when the tests run from a checkout.
    source = os.environ.get("HOIST_SOURCE_DIR", "")
    if data["commit"] != "unknown" and source and (Path(source) / ".git").exists():
        commit = data["commit"].removesuffix("-dirty")
        assert subprocess.run(["git", "-C", source, "cat-file", "-e", commit + "^{commit}"]).returncode == 0


def test_dash_dash_version_and_dash_v_answer_as_other_tools_do():
    first_line = run_hoist("version", check=0).stdout.splitlines()[0]
    for flag in ("--version", "-V"):
        assert run_hoist(flag, check=0).stdout.strip() == first_line.split(" (")[0].strip()
    # upgrade's own --version (the version to install) keeps its meaning.
    assert "--version VERSION " in run_hoist("upgrade", "--help", check=0).stdout


def test_help_shows_choices_as_words():
    out = run_hoist("--help", check=0).stdout
    assert "--log-format text|json (default: text)" in out
    assert "->" not in out
    upgrade_help = run_hoist("upgrade", "--help", check=0).stdout
    assert "--kind tree|file|sysext|sync" in upgrade_help
    assert "--version-scheme semver|k3s|systemd (default: semver)" in upgrade_help


def test_help_lists_only_commands_that_exist():
    out = run_hoist("--help", check=0).stdout
    assert "status" in out and "version" in out


def test_bad_usage_exits_2_with_a_message():
    result = run_hoist("no-such-command", check=2)
    assert "no-such-command" in result.stderr
    result = run_hoist(check=2)
    assert "subcommand" in result.stderr.lower()
    result = run_hoist("--log-format", "xml", "status", check=2)
    assert "xml" in result.stderr


def test_status_on_a_host_without_state(tmp_path):
    result = run_hoist("status", "--host-root", tmp_path, check=0)
    assert result.stdout == f"no components installed (no state under {tmp_path}/var/lib/hoist)\n"
    data = json.loads(run_hoist("status", "--json", "--host-root", tmp_path, check=0).stdout)
    assert data == {"schema_version": 1, "host_root": str(tmp_path), "state_dir": "/var/lib/hoist", "components": []}


def test_status_of_an_unknown_component_exits_2_listing_the_known_ones(tmp_path):
    result = run_hoist("status", "--component", "k3s", "--host-root", tmp_path, check=2)
    assert result.stderr.endswith(f" error: --component: no component 'k3s' in hoist's state (none has a state yet; "
                                  f"/var/lib/hoist on the host root {tmp_path})\n"), result.stderr
    for name in ("app", "tool"):
        (tmp_path / "payload" / name).mkdir(parents=True)
        (tmp_path / "payload" / name / "f").write_text(name)
        run_hoist("upgrade", "--host-root", tmp_path, "--component", name, "--kind", "tree", "--source",
                  tmp_path / "payload" / name, "--destination", f"/opt/{name}", "--version", "1.0.0", check=0)
    result = run_hoist("status", "--component", "k3s", "--host-root", tmp_path, check=2)
    assert result.stderr.endswith(f" error: --component: no component 'k3s' in hoist's state (components: app, tool; "
                                  f"/var/lib/hoist on the host root {tmp_path})\n"), result.stderr


def test_status_shows_when_each_version_came_and_exits_1_while_a_component_needs_attention(tmp_path):
    def upgrade(version, check):
        payload = tmp_path / "payload" / version
        payload.mkdir(parents=True, exist_ok=True)
        (payload / "f").write_text(version)
        return run_hoist("upgrade", "--host-root", tmp_path, "--component", "app", "--kind", "tree", "--source",
                         payload, "--destination", "/opt/app", "--version", version, check=check)

    upgrade("1.0.0", 0)
    upgrade("1.1.0", 0)
    upgrade("1.1.0", 0)  # changes nothing: the last run, not the last change
    state = json.loads((tmp_path / "var/lib/hoist/app/state.json").read_text())
    installed = [record["installed_at"] for record in state["versions"]]
    change, last = state["last_change"], state["last_result"]
    text = run_hoist("status", "--host-root", tmp_path, check=0).stdout
    assert text == ("app (tree at /opt/app)\n"
                    "  current:  1.1.0\n"
                    "  previous: 1.0.0\n"
                    f"  kept:     1.0.0, installed {installed[0]}\n"
                    f"            1.1.0, installed {installed[1]}\n"
                    f"  changed:  upgrade 1.1.0 succeeded at {change['time']}\n"
                    f"  last:     upgrade 1.1.0 unchanged at {last['time']}\n"), text
    # A refused downgrade leaves the host as it was, and status says the run needs an operator: a check reads exit 1.
    upgrade("1.0.0", 3)
    result = run_hoist("status", "--host-root", tmp_path, check=1)
    assert result.stdout.endswith("  needs attention: its last run was refused\n"), result.stdout
    assert json.loads(run_hoist("status", "--json", "--host-root", tmp_path, check=1).stdout)["components"][0][
        "attention"] == ["its last run was refused"]
    upgrade("1.2.0", 0)
    assert "needs attention" not in run_hoist("status", "--host-root", tmp_path, check=0).stdout


def test_a_missing_host_root_exits_2_naming_it(tmp_path):
    result = run_hoist("--host-root", tmp_path / "nope", "status", check=2)
    assert f"failed to open host root '{tmp_path}/nope': No such file or directory (--host-root)" in result.stderr


def test_status_reads_state_through_host_symlinks(host_root):
    (host_root / "data/hoist/k3s").mkdir(parents=True)
    (host_root / "var/lib").mkdir(parents=True)
    (host_root / "var/lib/hoist").symlink_to("/data/hoist")
    state = {"schema": 1, "component": "k3s", "kind": "file", "destination": "/usr/local/bin/k3s",
             "version_scheme": "k3s", "current": "v1.30.1+k3s1", "previous": "", "boot_id": "",
             "versions": [{"version": "v1.30.1+k3s1", "installed_at": "2026-11-21T10:00:00Z"}],
             "last_result": None, "pending_reboot": None}
    (host_root / "data/hoist/k3s/state.json").write_text(json.dumps(state))
    data = json.loads(run_hoist("status", "--json", "--host-root", host_root, check=0).stdout)
    assert [c["current"] for c in data["components"]] == ["v1.30.1+k3s1"]
    text = run_hoist("status", "--host-root", host_root, check=0).stdout
    assert "k3s (file at /usr/local/bin/k3s)" in text and "current:  v1.30.1+k3s1" in text


def test_a_corrupt_state_file_exits_1_naming_it(host_root):
    (host_root / "var/lib/hoist/k3s").mkdir(parents=True)
    (host_root / "var/lib/hoist/k3s/state.json").write_text("{not json")
    result = run_hoist("status", "--host-root", host_root, check=1)
    assert f"corrupt state file '{host_root}/var/lib/hoist/k3s/state.json'" in result.stderr


def test_json_logs_are_one_object_a_line(tmp_path):
    result = run_hoist("--log-format", "json", "status", "--component", "x", "--host-root", tmp_path, check=2)
    lines = [json.loads(line) for line in result.stderr.splitlines()]
    assert lines[-2]["level"] == "error"
    assert "--component: no component 'x' in hoist's state" in lines[-2]["msg"]
    assert lines[-2]["time"].endswith("Z")
    assert (lines[-1]["exit_code"], lines[-1]["outcome"]) == (2, "usage")


LOG_LINE = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z error: "


@pytest.mark.parametrize("argv, message", [
    (["upgrade", "--destinaton", "/opt/demo"],
     "upgrade: unknown option '--destinaton' (did you mean '--destination'?); usage: hoist upgrade [OPTIONS]; "
     "'hoist help upgrade' shows the options"),
    (["status", "--jsn"],
     "status: unknown option '--jsn' (did you mean '--json'?); usage: hoist status [OPTIONS]; 'hoist help status' "
     "shows the options"),
    (["rollback", "--component", "app", "--dry"],
     "rollback: unknown option '--dry'; usage: hoist rollback [OPTIONS]; 'hoist help rollback' shows the options"),
    (["upgrade", "--lock-timout=5"],
     "upgrade: unknown option '--lock-timout' (did you mean '--lock-timeout'?); usage: hoist upgrade [OPTIONS]; "
     "'hoist help upgrade' shows the options"),
    (["upgrade", "--component", "app", "--kind", "tree", "one", "two"],
     "upgrade: unexpected argument(s) 'one', 'two'; usage: hoist upgrade [OPTIONS]; 'hoist help upgrade' shows the "
     "options"),
    (["upgrade", "--restart="],
     "--restart: an empty value is not allowed; usage: hoist upgrade [OPTIONS]; 'hoist help upgrade' shows the "
     "options"),
    # Values in hoist's words, not CLI11's (`Value 0 not in range 0.000000 to 1797...`, `1 required TEXT missing`,
    # `Could not convert: --health-settle = 1.5`).
    (["upgrade", "--keep", "0"],
     "--keep: expects a whole number of 1 or more, not '0'; usage: hoist upgrade [OPTIONS]; 'hoist help upgrade' "
     "shows the options"),
    (["upgrade", "--threads", "100"],
     "--threads: expects a whole number from 1 to 64, not '100'; usage: hoist upgrade [OPTIONS]; 'hoist help "
     "upgrade' shows the options"),
    (["upgrade", "--health-settle", "1.5"],
     "--health-settle: expects a whole number of 0 or more, not '1.5'; usage: hoist upgrade [OPTIONS]; 'hoist help "
     "upgrade' shows the options"),
    # The bound of the option's type, not CLI11's `Could not convert: --keep = 5000000000`.
    (["upgrade", "--keep", "5000000000"],
     "--keep: expects a whole number from 1 to 4294967295, not '5000000000'; usage: hoist upgrade [OPTIONS]; 'hoist "
     "help upgrade' shows the options"),
    (["rollback", "--datastore-timeout", "99999999999999999999999"],
     "--datastore-timeout: expects a whole number from 1 to 4294967295, not '99999999999999999999999'; usage: hoist "
     "rollback [OPTIONS]; 'hoist help rollback' shows the options"),
    # A word from a list, not CLI11's `sometimes not in {never,if-needed,always,delegate}` or
    # `Check xml value in {json->1,text->0} OR {1,0} FAILED`.
    (["upgrade", "--reboot", "sometimes"],
     "--reboot: expects never, if-needed, always or delegate, not 'sometimes'; usage: hoist upgrade [OPTIONS]; "
     "'hoist help upgrade' shows the options"),
    (["upgrade", "--datastore-snapshot", "tak"],
     "--datastore-snapshot: expects take or skip, not 'tak' (did you mean 'take'?); usage: hoist upgrade [OPTIONS]; "
     "'hoist help upgrade' shows the options"),
    (["--log-format", "xml", "status"],
     "--log-format: expects text or json, not 'xml'; usage: hoist status [OPTIONS]; 'hoist help status' shows the "
     "options"),
    # The case is not the format's (--log-format=JSON is json), but the refusal names the word as given.
    (["--log-format", "XML", "status"],
     "--log-format: expects text or json, not 'XML'; usage: hoist status [OPTIONS]; 'hoist help status' shows the "
     "options"),
    # Before the command's name only hoist's own options are taken.
    (["--bogus", "status"],
     "status: unknown option '--bogus' before the command; usage: hoist status [OPTIONS]; 'hoist help status' shows "
     "the options"),
    (["--keep", "3", "upgrade"],
     "upgrade: unknown option '--keep' before the command (an option of 'upgrade': give it after the command); "
     "usage: hoist upgrade [OPTIONS]; 'hoist help upgrade' shows the options"),
    (["--lgo-format", "json", "status"],
     "status: unknown option '--lgo-format' before the command (did you mean '--log-format'?); usage: hoist status "
     "[OPTIONS]; 'hoist help status' shows the options"),
    (["upgrade", "--component"],
     "--component: expects a value, and none was given; usage: hoist upgrade [OPTIONS]; 'hoist help upgrade' shows "
     "the options"),
    (["rollback", "--lock-timeout", "soon"],
     "--lock-timeout: expects a number of seconds of 0 or more, not 'soon'; usage: hoist rollback [OPTIONS]; 'hoist "
     "help rollback' shows the options"),
    (["prepare", "--timeout", "0"],
     "--timeout: expects a number of seconds above 0, not '0'; usage: hoist prepare [OPTIONS]; 'hoist help prepare' "
     "shows the options"),
])
def test_a_command_line_that_does_not_parse_names_the_word_the_option_meant_and_the_usage(argv, message):
    # In the words' order (CLI11 lists them backwards), in hoist's log format, exit 2.
    result = run_hoist(*argv, check=2)
    assert re.fullmatch(LOG_LINE + re.escape(message) + "\n", result.stderr), result.stderr


def test_hoist_help_command_prints_what_command_help_prints():
    for command in ("upgrade", "stage", "rollback", "prepare", "status", "version"):
        assert run_hoist("help", command, check=0).stdout == run_hoist(command, "--help", check=0).stdout
    assert run_hoist("help", check=0).stdout == run_hoist("--help", check=0).stdout
    result = run_hoist("help", "upgarde", check=2)
    assert re.fullmatch(LOG_LINE + re.escape("help: unknown command 'upgarde' (did you mean 'upgrade'?; commands: "
                                             "upgrade, stage, rollback, prepare, status, version, help)") + "\n",
                        result.stderr)


def test_help_is_wrapped_to_the_terminal_and_names_values_not_types():
    for columns in ("80", "100"):
        for command in ("upgrade", "stage", "rollback", "prepare", "status", "version", None):
            out = run_hoist(*([command] if command else []), "--help", env={"COLUMNS": columns}, check=0).stdout
            # Every line within the width: options, the exit status, environment and files entries (their text
            # wrapped in its own column), and the examples (written to fit, continued with a backslash).
            long = [line for line in out.splitlines() if len(line) > int(columns)]
            assert long == [], long
            # No CLI11 type tags.
            assert not re.search(r"\b(TEXT|UINT|INT|FLOAT)\b|:POSITIVE|:NONNEGATIVE|=\d", out), out
    upgrade_help = run_hoist("upgrade", "--help", env={"COLUMNS": "80"}, check=0).stdout
    assert "  --keep N (default: 3)" in upgrade_help
    assert "  --threads N (1-64)" in upgrade_help
    assert "  --reboot never|if-needed|always|delegate (default: never)" in upgrade_help
    # An entry's text wrapped under its own column.
    assert ("  1  a component needs attention: its last run failed or was refused, restarts\n"
            "     or health checks are owed, or a failed version is kept for its datastore\n"
            "     (each named under \"needs attention\")\n") in run_hoist("status", "--help", env={"COLUMNS": "80"},
                                                                     check=0).stdout


def test_each_command_s_help_has_examples_and_its_exit_status():
    for command in ("upgrade", "stage", "rollback"):
        out = run_hoist(command, "--help", check=0).stdout
        assert f"Examples:\n  hoist {command} " in out
        for line in ("Exit status:", "  0  done, or already at the target", "  3  refused by the version gate",
                     "  5  the payload did not verify", "Environment:", "  SYSTEM_UPGRADE_PLAN_LATEST_VERSION",
                     "Files:", "  /var/lib/hoist/COMPONENT/state.json"):
            assert line in out, (command, line)
    prepare = run_hoist("prepare", "--help", check=0).stdout
    assert "Examples:\n  hoist prepare k3s-server --timeout 1200\n" in prepare
    assert "  1  the Plan failed (SUC marked its Job failed), or --timeout passed first" in prepare
    assert "Examples:\n  hoist status\n" in run_hoist("status", "--help", check=0).stdout
