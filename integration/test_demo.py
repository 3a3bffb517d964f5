"""scripts/demo, the README's first command, runs start to end on the built binary."""

import os
import shutil
from pathlib import Path

from conftest import HOIST_BIN, run_recorded

SOURCE_DIR = Path(os.environ.get("HOIST_SOURCE_DIR", Path(__file__).resolve().parent.parent))


def test_the_demo_upgrades_and_rolls_back(tmp_path):
    # The demo's build directory holds the binary under test (so the demo never
    # builds) and its demo host root.
    build_dir = tmp_path / "build"
    build_dir.mkdir()
    shutil.copy2(HOIST_BIN, build_dir / "hoist")
    demo = run_recorded([SOURCE_DIR / "scripts/demo"], env={**os.environ, "HOIST_BUILD_DIR": str(build_dir)},
                        capture_output=True, text=True, timeout=300)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    out = demo.stdout
    assert "hello from demo-app 1.0.0" in out
    assert "hello from demo-app 1.1.0, now with more greeting" in out
    assert "dry run: nothing was changed" in out
    status_again = out[out.index("status again"):]
    assert "demo-app (tree at /opt/demo-app)\n  current:  1.0.0\n  previous: 1.1.0" in status_again
    assert "rollback 1.0.0 succeeded" in status_again
    host = build_dir / "demo-host"
    assert os.readlink(host / "opt/demo-app/current") == "1.0.0"
    assert os.readlink(host / "usr/local/bin/demo-cli") == "/var/lib/hoist/demo-cli/1.0.0/demo-cli"
