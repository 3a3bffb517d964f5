"""Fixtures and helpers for the `hoist prepare` tests: a fake API server with a
test CA, a cluster of nodes, and the real static binary run against it, either
with a kubeconfig or in-cluster (service account files bind-mounted at the real
path in a private mount namespace, so no test-only flag exists in hoist)."""

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import SANITIZER_ENV, record_output
from fake_apiserver import Cluster, FakeApiServer, make_pki, write_kubeconfig
from suc_emulator import SucEmulator

HOIST_BIN = os.environ.get("HOIST_BIN", "")
NAMESPACE = "system-upgrade"
SERVER_PLAN = "k3s-server"
SERVER_SPEC = {
    "version": "v1.30.1+k3s1",
    "concurrency": 1,
    "serviceAccountName": "hoist",
    "upgrade": {"image": "localhost/hoist:latest"},
    "nodeSelector": {"matchExpressions": [
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"},
        {"key": "k3s-upgrade", "operator": "NotIn", "values": ["false"]}]},
}


@pytest.fixture(scope="session")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def cluster():
    cluster = Cluster(tokens=("token-1",))
    cluster.bookmark_interval = 1.0
    for name in ("s1", "s2", "s3"):
        cluster.add_node(name, {"node-role.kubernetes.io/control-plane": "true"})
    for name in ("a1", "a2"):
        cluster.add_node(name)
    return cluster


@pytest.fixture
def server(cluster, pki):
    with FakeApiServer(cluster, pki) as server:
        yield server


@pytest.fixture
def kubeconfig(tmp_path, server, pki):
    return write_kubeconfig(tmp_path / "kubeconfig", server.url, pki["ca"], token="token-1", namespace=NAMESPACE)


class Prepare:
    """`hoist prepare` running in the background; records when it exited."""

    def __init__(self, argv, env):
        self.started = time.monotonic()
        self.proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.exited_at = None
        self.stdout = self.stderr = ""
        self._reader = threading.Thread(target=self._collect, daemon=True)
        self._reader.start()

    def _collect(self):
        self.stdout, self.stderr = self.proc.communicate()
        self.exited_at = time.monotonic()
        record_output(self.proc.args, self.stdout, self.stderr)

    def running(self):
        return self.proc.poll() is None

    def wait(self, timeout=30):
        self._reader.join(timeout)
        if self._reader.is_alive():
            self.proc.kill()
            self._reader.join()
            raise AssertionError(f"hoist prepare did not exit within {timeout} s; stderr:\n{self.stderr}")
        return self.proc.returncode

    def kill(self):
        if self.running():
            self.proc.kill()
        self._reader.join(10)

    @property
    def elapsed(self):
        return self.exited_at - self.started


def start_prepare(*args, kubeconfig=None, env=None):
    argv = [HOIST_BIN, "prepare", *map(str, args)]
    if kubeconfig:
        argv += ["--kubeconfig", str(kubeconfig)]
    full_env = {"PATH": "/usr/bin:/bin", **SANITIZER_ENV}
    full_env.update(env or {})
    return Prepare(argv, full_env)


def can_fake_service_account():
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True)
    return probe.returncode == 0


def make_service_account(directory, ca_path, token, namespace=NAMESPACE):
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(ca_path, directory / "ca.crt")
    (directory / "token").write_text(token)
    (directory / "namespace").write_text(namespace)
    return directory


def rotate_token_file(directory, token):
    """Replaces the token the way kubelet does: a new file renamed over the old."""
    tmp = Path(directory) / ".token.new"
    tmp.write_text(token)
    os.rename(tmp, Path(directory) / "token")


def start_prepare_in_cluster(sa_dir, server, *args, host=None):
    """Runs prepare as in a pod: the service account at its real path
    (/var/run/secrets/kubernetes.io/serviceaccount, through a bind mount in a
    private mount namespace) and KUBERNETES_SERVICE_HOST/PORT set."""
    script = ('mount -t tmpfs tmpfs /run && mkdir -p /run/secrets/kubernetes.io/serviceaccount && '
              'mount --bind "$0" /run/secrets/kubernetes.io/serviceaccount && exec "$@"')
    argv = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, str(sa_dir),
            HOIST_BIN, "prepare", *map(str, args)]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **SANITIZER_ENV,
           "KUBERNETES_SERVICE_HOST": host or server.host,
           "KUBERNETES_SERVICE_PORT": str(server.port)}
    return Prepare(argv, env)


def wait_for_watches(cluster, count=1, resource="plans", timeout=10):
    cluster.wait_for(lambda c: len([r for r in c.requests if r.get("verb") == "watch"
                                    and r.get("resource") == resource and r.get("status") == 200]) >= count,
                     timeout)


def put_server_plan(cluster, spec=None):
    return cluster.put_plan(SERVER_PLAN, NAMESPACE, spec or SERVER_SPEC)


def suc(cluster, **kwargs):
    return SucEmulator(cluster, SERVER_PLAN, NAMESPACE, **kwargs)
