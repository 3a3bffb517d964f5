"""Fixtures of the real-cluster tests: a real Kubernetes started by scripts/kube
(etcd, kube-apiserver, controller-manager, scheduler, and two nodes of this
machine, each a containerd and a kubelet), hoist's images imported into its
containerd, the Plan CRD, and system-upgrade-controller's part played by
suc_controller.py on scratch host roots.

A test file uses them with `pytest_plugins = ["real_cluster"]`:

  real_cluster   (session) the running cluster: .api (admin), .kubectl(...), .nodes, .server_node, .agent_node
  hoist_images   (session) hoist's image and the payload images, built as test_image.py builds them, imported
  suc            (test)    the controller, running; .host_root(node) is the scratch directory mounted at /host
                           in that node's Jobs. At the end every Plan, Job and pod of the test is gone and the
                           nodes are as they were.

and the helpers apply_overlay() (deploy/ through kustomize with an overlay for image names only),
wait_for_job() and pods_of().
"""

import os
import shutil
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from conftest import record_output
from kube_api import EVENTS, JOBS, NODES, PLANS, PODS, Api, ApiError
from suc_controller import SucController

REPO = Path(os.environ.get("HOIST_SOURCE_DIR") or Path(__file__).resolve().parent.parent)
KUBE = REPO / "scripts/kube"
PODMAN = REPO / "scripts/podman/podman"
# shared/ beside the repository, as CI lays it (HOIST_SHARED_DIR elsewhere, a worktree's say).
REFERENCE = Path(os.environ.get("HOIST_SHARED_DIR") or REPO.parent / "shared") / "reference/system-upgrade-controller"
# The Plan CRD that system-upgrade-controller v0.15.3 installs, the version suc_controller.py plays. 1.20 refuses
# it as it is, as it refuses the newer one beside it (test_real_cluster.py): see plan_crd().
PLAN_CRD = REFERENCE / "upgrade.cattle.io_plans-v0.15.3.yaml"
NAMESPACE = "system-upgrade"
# The labels the tests put on nodes, removed after each test.
TEST_LABEL_PREFIXES = ("plan.upgrade.cattle.io/", "k3s-upgrade", "hoist-os", "node-role.kubernetes.io/")


class RealCluster:
    def __init__(self, directory):
        self.dir = Path(directory)
        self.kubeconfig = self.dir / "admin.kubeconfig"
        self.bin = Path((self.dir / "bin").read_text().strip())
        self.nodes = (self.dir / "nodes.txt").read_text().split()
        self.api = Api.from_kubeconfig(self.kubeconfig)
        self.kubectl_image = (self.dir / "kubectl-image").read_text().strip()

    @property
    def server_node(self):
        return self.nodes[0]

    @property
    def agent_node(self):
        return self.nodes[1]

    def kubectl(self, *args, input=None, check=True, timeout=120):
        argv = [str(self.bin / "kubectl"), "--kubeconfig", str(self.kubeconfig), *map(str, args)]
        result = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(map(str, args))} exited {result.returncode}:\n{result.stderr}")
        return result

    def apply(self, documents, check=True):
        text = documents if isinstance(documents, str) else yaml.safe_dump_all(documents)
        return self.kubectl("apply", "-f", "-", input=text, check=check)

    def containerd(self, node):
        return f"/run/hoist-kube/{node}/containerd.sock"

    def import_image(self, image, work_dir):
        """podman's image into every node's containerd, as an OCI archive."""
        archive = Path(work_dir) / (image.replace("/", "_").replace(":", "_") + ".tar")
        if not archive.exists():
            subprocess.run([str(PODMAN), "save", "--format", "oci-archive", "-o", str(archive), image], check=True,
                           capture_output=True, timeout=300)
        for node in self.nodes:
            result = subprocess.run(["ctr", "--address", self.containerd(node), "-n", "k8s.io", "images", "import",
                                     "--index-name", image, str(archive)],
                                    capture_output=True, text=True, timeout=300)
            assert result.returncode == 0, f"ctr images import {image} on {node}:\n{result.stderr}"


def without_empty_defaults(node):
    """The schema without its `default: ''` entries."""
    if isinstance(node, dict):
        return {k: without_empty_defaults(v) for k, v in node.items() if not (k == "default" and v == "")}
    if isinstance(node, list):
        return [without_empty_defaults(v) for v in node]
    return node


def plan_crd():
    """SUC v0.15.3's Plan CRD as 1.20 takes it: without its nine `default: ''`. 1.20 reads an empty string default
    as null ('default: Invalid value: "null": in body must be of type string'); the later servers SUC runs on take
    them. They are all on the `name` of a reference (imagePullSecrets, envFrom, valueFrom), which no Plan of
    deploy/ sets; the rest of the schema, drain.timeout's integer type among it, is v0.15.3's."""
    return without_empty_defaults(yaml.safe_load(PLAN_CRD.read_text()))


def kube_problem():
    result = subprocess.run([str(KUBE), "problem"], capture_output=True, text=True, timeout=60)
    return result.stdout.strip() if result.returncode != 0 else None


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory):
    problem = kube_problem()
    if problem:
        pytest.skip(f"no real cluster on this machine: {problem}")
    if not PLAN_CRD.exists():
        pytest.skip(f"{PLAN_CRD} not found (shared/ is beside the repository)")
    started = time.monotonic()
    build = subprocess.run([str(KUBE), "build"], capture_output=True, text=True, timeout=3600)
    assert build.returncode == 0, f"scripts/kube build failed:\n{build.stderr[-4000:]}"
    print(f"\nscripts/kube build: {time.monotonic() - started:.1f} s")
    directory = tmp_path_factory.mktemp("kube")
    started = time.monotonic()
    start = subprocess.run([str(KUBE), "start", str(directory), "2"], capture_output=True, text=True, timeout=900)
    if start.returncode != 0:
        subprocess.run([str(KUBE), "stop", str(directory)], capture_output=True, timeout=300)
        raise AssertionError(f"scripts/kube start failed:\n{start.stderr[-6000:]}")
    print(f"scripts/kube start: {time.monotonic() - started:.1f} s")
    cluster = RealCluster(directory)
    try:
        cluster.apply([plan_crd()])
        cluster.api.wait_for("the Plan CRD is established", lambda: cluster.api.get_or_none(
            f"/apis/upgrade.cattle.io/v1/namespaces/{NAMESPACE}/plans") is not None, 60)
        # SUC's own manifests create its namespace (deploy/namespace is for installs without them).
        cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
        yield cluster
    finally:
        started = time.monotonic()
        stop = subprocess.run([str(KUBE), "stop", str(directory)], capture_output=True, text=True, timeout=300)
        print(f"\nscripts/kube stop: {time.monotonic() - started:.1f} s")
        assert stop.returncode == 0, stop.stderr
        # Nothing left: no cgroup (so no process of the cluster or its pods), the kubelet's sysctls restored.
        left = [p for p in Path("/sys/fs/cgroup").glob("*/hoist-kube")]
        assert not left, left
        for line in (directory / "sysctls").read_text().splitlines():
            name, value = line.split(" ", 1)
            now = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True).stdout.strip()
            assert now == value, (name, now, value)


@pytest.fixture(scope="session")
def hoist_images(real_cluster, hoist_image, tmp_path_factory):
    """hoist's image in the cluster's containerd (the images the Plans name are imported by the tests that build
    them, with import_payload)."""
    work = tmp_path_factory.mktemp("images")
    real_cluster.import_image(hoist_image, work)
    return {"hoist": hoist_image, "work": work}


def import_payload(real_cluster, hoist_images, image):
    real_cluster.import_image(image, hoist_images["work"])
    return image


class Suc:
    """The controller of one test and its scratch host roots."""

    def __init__(self, cluster, tmp_path, **settings):
        self.cluster = cluster
        self.roots = {}
        for node in cluster.nodes:
            root = tmp_path / f"host-{node}"
            (root / "run").mkdir(parents=True)
            (root / "var").mkdir()
            (root / "var/run").symlink_to("/run")
            (root / "etc").mkdir()
            (root / "etc/os-release").write_text("ID=debian\nVERSION_ID=12\n")
            (root / "proc/sys/kernel/random").mkdir(parents=True)
            (root / "proc/sys/kernel/random/boot_id").write_text("11111111-2222-4333-8444-555555555555\n")
            self.roots[node] = root
        self.controller = SucController(cluster.api, self.roots, cluster.kubectl_image, namespace=NAMESPACE,
                                        **settings)

    def host_root(self, node):
        return self.roots[node]

    def start(self):
        self.controller.start()
        return self


@pytest.fixture
def suc_settings():
    """SucController's settings for a test (override with @pytest.mark.parametrize("suc_settings", [...]))."""
    return {}


@pytest.fixture
def suc(real_cluster, tmp_path, suc_settings):
    created = Suc(real_cluster, tmp_path, **suc_settings)
    created.start()
    yield created
    try:
        created.controller.stop()
    finally:
        clean_up(real_cluster)


def clean_up(cluster):
    """Every Plan, Job and pod of the namespace deleted (the pods waited for), the test's node labels and
    cordons gone, the shipped accounts and roles removed."""
    api = cluster.api
    for plan in api.items(PLANS.format(ns=NAMESPACE)):
        api.delete(f"{PLANS.format(ns=NAMESPACE)}/{plan['metadata']['name']}")
    for job in api.items(JOBS.format(ns=NAMESPACE)):
        api.delete(f"{JOBS.format(ns=NAMESPACE)}/{job['metadata']['name']}")
    for pod in api.items(PODS.format(ns=NAMESPACE)):
        api.request("DELETE", f"{PODS.format(ns=NAMESPACE)}/{pod['metadata']['name']}",
                    {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
    api.wait_for("the test's pods are gone", lambda: not api.items(PODS.format(ns=NAMESPACE)), 120)
    for node in api.items(NODES):
        labels = {k: None for k in node["metadata"].get("labels", {}) if k.startswith(TEST_LABEL_PREFIXES)}
        api.merge_patch(f"{NODES}/{node['metadata']['name']}",
                        {"metadata": {"labels": labels}, "spec": {"unschedulable": None}})
    cluster.kubectl("delete", "serviceaccounts,roles,rolebindings", "-n", NAMESPACE, "--all", "--wait=false",
                    check=False)
    cluster.kubectl("delete", "clusterroles,clusterrolebindings", "-l", "app.kubernetes.io/name=hoist",
                    check=False)
    cluster.kubectl("delete", "roles,rolebindings", "-n", "default", "-l", "app.kubernetes.io/name=hoist",
                    check=False)


# ------------------------------------------------------------------ Plans from deploy/

def render_overlay(cluster, tmp_path, overlay, images):
    """deploy/<overlay> rendered by kustomize through an overlay that changes image names only (`images`: name ->
    newName, or name -> (newName, newTag))."""
    if shutil.which("kubectl") is None:
        pytest.skip("no kubectl with kustomize on PATH (test_deploy_manifests.py renders deploy/ with it too)")
    directory = tmp_path / f"overlay-{overlay}"
    directory.mkdir()
    entries = []
    for name, new in images.items():
        entry = {"name": name}
        if isinstance(new, tuple):
            entry["newName"], entry["newTag"] = new
        else:
            entry["newName"] = new
        entries.append(entry)
    (directory / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        # Relative: kustomize takes no absolute path as a resource.
        "resources": [os.path.relpath(REPO / "deploy" / overlay, directory)], "images": entries}))
    # Debian's kubectl 1.20 embeds a kustomize without components: the machine's kubectl renders, as in
    # test_deploy_manifests.py, and the cluster's kubectl applies.
    out = subprocess.run(["kubectl", "kustomize", str(directory)], capture_output=True, text=True, check=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def apply_overlay(cluster, tmp_path, overlay, images, change=None):
    """Renders deploy/<overlay> with image names changed, lets `change(docs)` adjust the rendered documents (a
    Plan's version, say), applies them with kubectl; returns (kubectl's result, the documents)."""
    docs = render_overlay(cluster, tmp_path, overlay, images)
    if change:
        change(docs)
    return cluster.apply(docs, check=False), docs


def plan_of(docs, name):
    return next(d for d in docs if d["kind"] == "Plan" and d["metadata"]["name"] == name)


def get_plan(cluster, name):
    return cluster.api.get(f"{PLANS.format(ns=NAMESPACE)}/{name}")


def set_plan_version(cluster, name, version):
    cluster.api.merge_patch(f"{PLANS.format(ns=NAMESPACE)}/{name}", {"spec": {"version": version}})


def jobs_of(cluster, plan):
    return cluster.api.items(JOBS.format(ns=NAMESPACE), labelSelector=f"upgrade.cattle.io/plan={plan}")


def pods_of(cluster, job_name):
    pods = cluster.api.items(PODS.format(ns=NAMESPACE), labelSelector=f"job-name={job_name}")
    return sorted(pods, key=lambda p: p["metadata"]["creationTimestamp"])


def wait_for_job(cluster, plan, timeout, condition="Complete", suc=None):
    """The Job of `plan` once its `condition` (Complete or Failed) is True."""
    def done():
        if suc is not None:
            suc.controller.check()
        for job in jobs_of(cluster, plan):
            for cond in job.get("status", {}).get("conditions") or []:
                if cond["type"] == condition and cond["status"] == "True":
                    return job
        return None
    return cluster.api.wait_for(f"a Job of plan {plan} is {condition}", done, timeout)


def wait_for_pod_exit(cluster, job_name, container="upgrade", count=1, timeout=300, suc=None):
    """The `count`-th pod of the Job once `container` has terminated; returns (pod, its terminated state)."""
    def exited():
        if suc is not None:
            suc.controller.check()
        pods = pods_of(cluster, job_name)
        if len(pods) < count:
            return None
        pod = pods[count - 1]
        statuses = pod.get("status", {}).get("containerStatuses", []) + \
            pod.get("status", {}).get("initContainerStatuses", [])
        for status in statuses:
            if status["name"] == container and "terminated" in status.get("state", {}):
                return pod, status["state"]["terminated"]
        return None
    return cluster.api.wait_for(f"container {container} of pod {count} of job {job_name} exited", exited, timeout)


def container_log(cluster, pod, container="upgrade"):
    """The container's output through the API server and the kubelet (kubectl logs)."""
    text = cluster.kubectl("logs", "-n", NAMESPACE, pod["metadata"]["name"], "-c", container, check=False).stdout
    record_output(["kubectl", "logs", pod["metadata"]["name"], "-c", container], text, "")
    return text


def node_events(cluster, node, reason=None):
    events = cluster.api.items(EVENTS.format(ns="default"), fieldSelector=f"involvedObject.name={node}")
    return [e for e in events if e.get("involvedObject", {}).get("kind") == "Node"
            and (reason is None or e.get("reason") == reason)]


def plan_events(cluster, plan, reason=None):
    events = cluster.api.items(EVENTS.format(ns=NAMESPACE), fieldSelector=f"involvedObject.name={plan}")
    return [e for e in events if reason is None or e.get("reason") == reason]


def label_node(cluster, node, labels):
    cluster.api.merge_patch(f"{NODES}/{node}", {"metadata": {"labels": labels}})


def get_node(cluster, node):
    return cluster.api.get(f"{NODES}/{node}")
