"""A real system bus for the integration tests: a dbus-daemon with its own
config and socket, and python-dbusmock services with hoist's test doubles of
systemd's and logind's managers (dbus_mocks/). The socket is the host root's
/run/dbus/system_bus_socket, where hoist looks by itself, so the tests also
prove that hoist finds the bus inside the host root. The daemon binds it at a
short path in its own /tmp directory and the host root's name is a hard link
to that socket: a pytest directory (pytest-1022/test_the_agent_plans_prepare_w0/
host-vm-2/...) can be longer than the 107 bytes a socket's path may have.
hoist itself connects through /proc/self/fd, whatever the host root's length.

Debian's /usr/bin/python3 runs the services (it has dbus-python, GLib and
python3-dbusmock); the tests read the calls from the services' logs.
"""

import json
import os
import signal
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

MOCKS = Path(__file__).resolve().parent / "dbus_mocks"
PYTHON = "/usr/bin/python3"

CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <auth>EXTERNAL</auth>
  <listen>unix:path={socket}</listen>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"""


def available():
    return os.access("/usr/bin/dbus-daemon", os.X_OK) and subprocess.run(
        [PYTHON, "-c", "import dbusmock, dbus, gi"], capture_output=True).returncode == 0


class Service:
    """One mock service process and its call log."""

    def __init__(self, name, process, log):
        self.name = name
        self.process = process
        self.log = log

    def calls(self):
        """The logged calls: ["RestartUnit \\"k3s.service\\" \\"replace\\"", ...]."""
        if not self.log.exists():
            return []
        return [line.split(" ", 1)[1] for line in self.log.read_text().splitlines() if " " in line]

    def called(self, method):
        return [c for c in self.calls() if c == method or c.startswith(method + " ")]

    def wait_for_call(self, method, timeout=20, count=1):
        """The calls of `method` once there are at least `count` of them; AssertionError after `timeout` s."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.called(method)) >= count:
                return self.called(method)
            time.sleep(0.05)
        raise AssertionError(f"{self.name}: not {count} {method} call(s) within {timeout} s; calls: {self.calls()}")


class SystemBus:
    """dbus-daemon listening on <host_root>/run/dbus/system_bus_socket."""

    def __init__(self, host_root, work_dir):
        self.host_root = Path(host_root)
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.socket = self.host_root / "run/dbus/system_bus_socket"
        self.socket.parent.mkdir(parents=True, exist_ok=True)
        self.bind_dir = Path(tempfile.mkdtemp(prefix="hoist-bus-"))
        bound = self.bind_dir / "s"
        self.address = f"unix:path={bound}"
        self.services = []
        config = self.work_dir / "bus.conf"
        config.write_text(CONFIG.format(socket=bound))
        self.daemon = subprocess.Popen(["/usr/bin/dbus-daemon", f"--config-file={config}", "--nofork",
                                        "--nopidfile", "--nosyslog"],
                                       stdout=subprocess.DEVNULL, stderr=open(self.work_dir / "bus.log", "wb"))
        deadline = time.monotonic() + 10
        while not bound.exists():
            if self.daemon.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("dbus-daemon did not start: " + (self.work_dir / "bus.log").read_text())
            time.sleep(0.02)
        os.link(bound, self.socket)

    def env(self):
        return {"DBUS_SYSTEM_BUS_ADDRESS": self.address}

    def start(self, template, **parameters):
        """Starts dbusmock with one of dbus_mocks/<template>.py; returns its Service
        once its name is on the bus."""
        log = self.work_dir / f"{template}.calls"
        if template == "systemd_manager":
            # Its refresh of systemd-sysext.service shows what it merged in the host root's /usr.
            parameters.setdefault("sysext_root", str(self.host_root))
        name = {"systemd_manager": "org.freedesktop.systemd1", "logind_manager": "org.freedesktop.login1"}[template]
        env = dict(os.environ, **self.env())
        env.pop("PYTHONPATH", None)
        process = subprocess.Popen([PYTHON, "-m", "dbusmock", "--system", "-l", str(log), "-t",
                                    str(MOCKS / f"{template}.py"), "-p", json.dumps(parameters)],
                                   env=env, stdout=subprocess.DEVNULL,
                                   stderr=open(self.work_dir / f"{template}.stderr", "wb"))
        service = Service(name, process, log)
        self.services.append(service)
        deadline = time.monotonic() + 20
        while not self._has_owner(name):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{template} did not start: " +
                                   (self.work_dir / f"{template}.stderr").read_text())
            time.sleep(0.05)
        return service

    def _has_owner(self, name):
        result = subprocess.run(["dbus-send", f"--bus={self.address}", "--print-reply", "--dest=org.freedesktop.DBus",
                                 "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner", f"string:{name}"],
                                capture_output=True, text=True)
        return "boolean true" in result.stdout

    def stop(self):
        for service in self.services:
            service.process.send_signal(signal.SIGTERM)
        for service in self.services:
            try:
                service.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                service.process.kill()
        self.daemon.terminate()
        try:
            self.daemon.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
        self.socket.unlink(missing_ok=True)
        shutil.rmtree(self.bind_dir, ignore_errors=True)


@pytest.fixture
def system_bus(host_root, tmp_path):
    if not available():
        pytest.skip("dbus-daemon or python3-dbusmock (Debian's /usr/bin/python3) is missing")
    bus = SystemBus(host_root, tmp_path / "bus")
    yield bus
    bus.stop()


if __name__ == "__main__":
    sys.exit("a helper module of the integration tests")
