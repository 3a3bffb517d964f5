"""The man pages and the shell completion that the build writes from hoist's own help (scripts/man-pages): each
page renders without a warning, says every option its command's --help lists, and its examples, exit status,
environment and files; bash completes commands and each command's options. man-db and groff are Debian's."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import HOIST_BIN, run_hoist

BUILD = Path(os.environ.get("HOIST_BUILD_DIR", Path(HOIST_BIN).parent))
COMMANDS = ["upgrade", "stage", "rollback", "prepare", "status", "version"]


def page(name):
    path = BUILD / "man8" / f"{name}.8"
    if not path.exists():
        pytest.skip(f"{path} not built (a cross build does not run the binary to write it)")
    return path


def rendered(path):
    if shutil.which("groff") is None:
        pytest.skip("groff is not installed (groff-base)")
    # -P-cbou: plain text, neither SGR escapes nor overstrike
    result = subprocess.run(["groff", "-man", "-Tutf8", "-P-cbou", "-ww", "-rLL=200n", str(path)], capture_output=True,
                            text=True, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"})
    assert result.returncode == 0 and result.stderr == "", result.stderr
    return result.stdout


def help_options(*command):
    out = run_hoist(*command, "--help", env={"COLUMNS": "80"}, check=0).stdout
    return [line.split()[0] for line in out.split("Options:")[1].splitlines() if line.startswith("  -")]


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_each_page_renders_cleanly_and_says_every_option_its_help_lists(command):
    name = "hoist" if command is None else f"hoist-{command}"
    text = rendered(page(name))
    assert text.splitlines()[0].split()[0] == name.upper() + "(8)"
    for option in help_options(*([command] if command else [])):
        assert option in text, (name, option)
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "SEE ALSO"):
        assert re.search(rf"^{section}$", text, re.M), (name, section)
    if command in (None, "upgrade", "stage", "rollback"):
        for section in ("EXAMPLES", "EXIT STATUS", "ENVIRONMENT", "FILES"):
            assert re.search(rf"^{section}$", text, re.M), (name, section)
        assert f"hoist {command or 'upgrade'} " in text.split("EXAMPLES")[1]
        assert "the payload did not verify" in text.split("EXIT STATUS")[1]


def help_entries(*command):
    """The "KEY  TEXT" entries of the Exit status, Environment and Files sections of `--help` (wide enough that no
    entry wraps), as {section: [(key, text)]}."""
    out = run_hoist(*command, "--help", env={"COLUMNS": "200"}, check=0).stdout
    entries, section = {}, None
    for line in out.splitlines():
        if line in ("Exit status:", "Environment:", "Files:"):
            section = {"Exit status:": "EXIT STATUS", "Environment:": "ENVIRONMENT", "Files:": "FILES"}[line]
            entries[section] = []
        elif not line.startswith("  "):
            section = None
        elif section:
            key, _, text = line.strip().partition("  ")
            entries[section].append((key, " ".join(text.split())))
    return entries


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_each_page_says_every_exit_status_environment_and_file_entry_its_help_says(command):
    text = rendered(page("hoist" if command is None else f"hoist-{command}"))
    entries = help_entries(*([command] if command else []))
    # Every page has its exit status (DESIGN's codes on hoist(8) and the commands that change the host).
    assert "EXIT STATUS" in entries, command
    for section, items in entries.items():
        body = re.split(r"\n[A-Z][A-Z ]+\n", text.split(f"\n{section}\n")[1])[0]
        # One tagged paragraph an entry (tags at the section's indent, texts deeper): an entry that the help
        # wrapped onto two lines is one entry of the page, not a second, garbled one.
        tags = [line.split()[0] for line in body.splitlines() if re.match(r"^ {7}\S", line)]
        assert tags == [key for key, _ in items], (command, section, body)
        lines = [line.strip() for line in body.splitlines()]
        for key, words in items:
            start = next(i for i, line in enumerate(lines) if line == key or line.startswith(key + " "))
            after = " ".join((lines[start][len(key):] + " " + " ".join(lines[start + 1:])).split())
            assert after.startswith(words), (command, section, key, words, after[:200])


def test_the_main_page_lists_every_command_with_its_page():
    text = rendered(page("hoist"))
    for command in COMMANDS:
        assert f"hoist-{command}(8)" in text, command


def test_man_reads_a_page_as_an_operator_would():
    if shutil.which("man") is None:
        pytest.skip("man is not installed (man-db)")
    result = subprocess.run(["man", "-l", str(page("hoist-upgrade"))], capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin", "MANWIDTH": "80", "MANPAGER": "cat", "LC_ALL": "C.UTF-8"})
    assert result.returncode == 0, result.stderr
    assert "--health-check" in result.stdout and "EXIT STATUS" in result.stdout


def complete(*words):
    script = BUILD / "completion/hoist.bash"
    if not script.exists():
        pytest.skip(f"{script} not built")
    line = " ".join(words)
    result = subprocess.run(["bash", "-c", f'source "{script}"; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; '
                             '_hoist; printf "%s\\n" "${COMPREPLY[@]}"'], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_bash_completes_commands_and_each_commands_options():
    assert complete("hoist", "") == [*COMMANDS, "help"]
    assert complete("hoist", "ro") == ["rollback"]
    assert complete("hoist", "help", "st") == ["stage", "status"]
    assert complete("hoist", "upgrade", "--dest") == ["--destination"]
    assert "--restore-snapshot" in complete("hoist", "rollback", "--re")
    assert "--restore-snapshot" not in complete("hoist", "upgrade", "--re")
    # the global options come with every command
    assert complete("hoist", "status", "--host") == ["--host-root"]


def test_zsh_completion_is_zsh():
    script = BUILD / "completion/_hoist"
    if not script.exists():
        pytest.skip(f"{script} not built")
    assert script.read_text().startswith("#compdef hoist\n")
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed: only its first line is checked")
    assert subprocess.run(["zsh", "-n", str(script)]).returncode == 0


def test_the_manifest_page_renders_cleanly_and_names_every_key_the_parser_takes():
    path = BUILD / "man5" / "hoist.json.5"
    if not path.exists():
        pytest.skip(f"{path} not built (a cross build does not run the binary to write it)")
    text = rendered(path)
    assert text.splitlines()[0].split()[0] == "HOIST.JSON(5)"
    for section in ("NAME", "SYNOPSIS", "DESCRIPTION", "KEYS", "SEE ALSO"):
        assert re.search(rf"^{section}$", text, re.M), section
    keys = text.split("\nKEYS\n")[1].split("\nDETAILS\n")[0]
    # Each key the manifest's parser accepts (src/model/manifest.cpp's lists) heads an entry of the page's KEYS.
    source = (Path(__file__).resolve().parent.parent / "src/model/manifest.cpp").read_text()
    accepted = set()
    for listed in re.findall(r'\{("schema"[^}]*|"name", "kind"[^}]*)\}', source):
        accepted |= set(re.findall(r'"([a-z0-9_]+)"', listed))
    assert {"schema", "components", "name", "health_checks", "allow_minor_skip"} <= accepted, accepted
    headed = set(re.findall(r"^ {7}(\S[^(]*?) \(", keys, re.M))
    named = {key.strip() for heading in headed for key in heading.split(",")}
    assert named == accepted, (named ^ accepted)
    # The main page points at it.
    assert "hoist.json(5)" in rendered(page("hoist")).split("SEE ALSO")[1]
