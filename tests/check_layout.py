#!/usr/bin/env python3
"""The rooms' direction, checked (ctest: "layout: includes point down").

Every quoted #include in src/ and include/ must stay in its own room or point down
ROOMS below, and must not reach into another room's private header (src/<room>/*.hpp:
only its own room includes it, as "name.hpp"). CMakeLists.txt must declare the same
graph: one hoist_room(<room> <rooms it builds on>...) call a room, so that the link
graph of the libraries agrees with the include graph. Prints each offending line
as FILE:LINE: and exits 1.

    tests/check_layout.py [SOURCE_DIR]
"""

import re
import sys
from pathlib import Path

# Each room and the rooms it builds on directly (docs/dev/layout.md, "Layout of the repository").
# A room may include its own headers and the public headers (include/hoist/<room>/) of
# every room reachable from it here; nothing else.
ROOMS = {
    "util": [],
    "sys": ["util"],
    "transfer": ["sys"],
    "model": ["transfer"],
    "verify": ["model"],
    "install": ["verify"],
    "host": ["model"],
    "run": ["install", "host"],
    "kube": ["model"],
    "cli": ["run", "kube"],
}
# src/main.cpp is no room: it only starts the cli.
MAIN_USES = ["cli"]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
HOIST_ROOM_CALL = re.compile(r"^\s*hoist_room\(([^)]*)\)", re.MULTILINE)


def below(rooms):
    """The rooms reachable from `rooms` (themselves included)."""
    seen, todo = set(), list(rooms)
    while todo:
        room = todo.pop()
        if room not in seen:
            seen.add(room)
            todo.extend(ROOMS[room])
    return seen


def order(rooms):
    return ", ".join(room for room in ROOMS if room in rooms)


def check_includes(root):
    errors = []
    files = sorted(p for p in (root / "src").rglob("*") if p.suffix in (".cpp", ".hpp"))
    files += sorted((root / "include").rglob("*.hpp"))
    for path in files:
        rel = path.relative_to(root)
        parts = rel.parts
        if rel == Path("src/main.cpp"):
            room, allowed = "main", below(MAIN_USES)
        elif parts[0] == "src" and len(parts) == 3 and parts[1] in ROOMS:
            room = parts[1]
            allowed = below([room])
        elif parts[:2] == ("include", "hoist") and len(parts) == 4 and parts[2] in ROOMS:
            room = parts[2]
            allowed = below([room])
        else:
            errors.append(f"{rel}: not in a room (src/<room>/, include/hoist/<room>/; rooms: {order(ROOMS)})")
            continue
        what = "src/main.cpp" if room == "main" else room
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            match = INCLUDE.match(line)
            if not match:
                continue
            name = match.group(1)
            where = f'{rel}:{number}: #include "{name}"'
            target = name.split("/")
            if target[0] == "hoist":
                if len(target) != 3 or target[1] not in ROOMS:
                    errors.append(f"{where} names no room's header (include/hoist/<room>/name.hpp)")
                elif not (root / "include" / name).is_file():
                    private = root / "src" / target[1] / target[2]
                    hint = f" ({private.relative_to(root)} is private to {target[1]})" if private.is_file() else ""
                    errors.append(f"{where}: no such public header{hint}")
                elif target[1] not in allowed:
                    errors.append(f"{where} climbs upward: {what} may include only {order(allowed)}")
                continue
            # A header beside the includer: private to the room of the folder it sits in.
            if (path.parent / name).is_file() and path.parent.parent == root / "src" and room != "main":
                continue
            owners = sorted(p.parent.name for p in (root / "src").glob(f"*/{name}"))
            if owners:
                errors.append(f"{where} reaches into {order(owners)}'s private header src/{owners[0]}/{name}"
                              f" (only its own room includes it; a public header lives in include/hoist/<room>/)")
            else:
                errors.append(f"{where}: no such header beside it (a room's public header is included as \"hoist/<room>/name.hpp\")")
    folders = {p.name for p in (root / "src").iterdir() if p.is_dir()}
    folders |= {p.name for p in (root / "include" / "hoist").iterdir() if p.is_dir()}
    for folder in sorted(folders - ROOMS.keys()):
        errors.append(f"src/ or include/hoist/ has a folder '{folder}' that is no room of tests/check_layout.py")
    return errors


def check_cmake(root):
    text = (root / "CMakeLists.txt").read_text(encoding="utf-8")
    declared = {}
    for match in HOIST_ROOM_CALL.finditer(text):
        room, *uses = match.group(1).split()
        declared[room] = uses
    errors = []
    for room in ROOMS.keys() | declared.keys():
        if room not in declared:
            errors.append(f"CMakeLists.txt: no hoist_room({room} {' '.join(ROOMS[room])})")
        elif room not in ROOMS:
            errors.append(f"CMakeLists.txt: hoist_room({room} ...) declares a room tests/check_layout.py does not know")
        elif sorted(declared[room]) != sorted(ROOMS[room]):
            errors.append(f"CMakeLists.txt: hoist_room({room} {' '.join(declared[room])}) links other rooms than"
                          f" tests/check_layout.py's graph: {room} builds on {order(ROOMS[room]) or 'nothing'}")
    if not re.search(r"target_link_libraries\(hoist PRIVATE hoist_cli\)", text):
        errors.append("CMakeLists.txt: the hoist executable should link hoist_cli only (src/main.cpp starts the cli)")
    return errors


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
    errors = check_includes(root) + check_cmake(root)
    for error in errors:
        print(error)
    if errors:
        print(f"layout: {len(errors)} problem(s); the rooms and what each may include: tests/check_layout.py, ROOMS")
        return 1
    print(f"layout: every include in src/ and include/ points down ({order(ROOMS)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
