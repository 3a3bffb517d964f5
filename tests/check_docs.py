#!/usr/bin/env python3
"""The repository's Markdown links resolve (ctest "docs: links resolve"): every relative link of every tracked .md
file names a file or directory that exists, and a link to a heading of a .md file (`file.md#anchor`, or `#anchor`
within the page) names a heading it has, by GitHub's anchors (lowercased, punctuation but '-' and '_' dropped,
spaces as '-', a repeated heading numbered). Links to the web are not followed."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```")


def anchors_of(path):
    seen, anchors, in_fence = {}, set(), False
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        slug = re.sub(r"[^\w\- ]", "", title).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def links_of(path):
    in_fence = False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for match in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            yield number, match.group(1)


def main():
    files = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    problems = []
    for name in files:
        path = ROOT / name
        if not path.is_file():
            continue
        for number, target in links_of(path):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.exists():
                problems.append(f"{name}:{number}: '{target}': {file_part} does not exist")
                continue
            if anchor and linked.suffix == ".md" and anchor not in anchors_of(linked):
                problems.append(f"{name}:{number}: '{target}': {linked.relative_to(ROOT)} has no heading #{anchor}")
    for problem in problems:
        print(problem)
    print(f"check_docs: {len(files)} Markdown files, {len(problems)} broken links", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
