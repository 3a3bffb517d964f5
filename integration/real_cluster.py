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
  bus            (test)    a system bus with the D-Bus doubles in the server node's host root
  wait_job_created (test)  wait(plan): the first Job of a Plan

and the helpers apply_overlay() (deploy/ through kustomize with an overlay for image names only), k3s_server()
(deploy/k3s's server Plan at a version), plan_doc() (a Plan of a test's own), wait_for_job(), wait_for_pod_exit(),
pods_of(), termination_message() and node_events(). docs/dev/real-cluster.md tells how to write a scenario.
"""

import os
import shutil
import subprocess
import time
import warnings
from pathlib import Path

import pytest
import yaml

from conftest import record_output
from dbus_harness import SystemBus, available as dbus_available
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
# The k3s versions of the tests' payloads, and what the cluster's kubelets report (scripts/kube builds them with
# k3s's version suffix).
K3S_OLD, K3S_NEW, K3S_NEWER = "v1.20.1+k3s1", "v1.20.2+k3s1", "v1.20.3+k3s1"
KUBELET = "v1.20.2+k3s1"


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
        """podman's image into every node's containerd, as an OCI archive, named by the archive's own ref annotation
        (podman save writes the image's name there). Not with `--index-name`, which also makes an image of the
        archive's index.json, unpacked first: on the node `vm` of a CI run, every unpack of that index failed with
        `content digest ...: not found`, twice 5 s apart, where the manifest's image imports alone. A failed import
        is tried once more after 5 s with the name removed first, and a failure that the second try repairs is
        reported as a warning with what the first one said. Each import is checked by listing the name."""
        archive = Path(work_dir) / (image.replace("/", "_").replace(":", "_") + ".tar")
        if not archive.exists():
            saved = subprocess.run([str(PODMAN), "save", "--format", "oci-archive", "-o", str(archive), image],
                                   capture_output=True, text=True, timeout=300)
            assert saved.returncode == 0, f"podman save {image} exited {saved.returncode}:\n{saved.stderr}"
        for node in self.nodes:
            ctr = ["ctr", "--address", self.containerd(node), "-n", "k8s.io", "images"]

            def imported():
                result = subprocess.run([*ctr, "import", str(archive)], capture_output=True, text=True, timeout=300)
                if result.returncode == 0:
                    listed = subprocess.run([*ctr, "ls", "-q", f"name=={image}"], capture_output=True, text=True,
                                            timeout=60)
                    if listed.stdout.split() != [image]:
                        result.returncode = 1
                        result.stderr += f"\n{image} is not listed after the import: {listed.stdout!r}"
                return result

            result = imported()
            if result.returncode != 0:
                first = result
                time.sleep(5)
                subprocess.run([*ctr, "rm", image], capture_output=True, timeout=60)
                result = imported()
                assert result.returncode == 0, (
                    f"ctr images import {image} on {node} exited {first.returncode}:\n{first.stderr}\n{first.stdout}"
                    f"\nand again {result.returncode}:\n{result.stderr}\n{result.stdout}")
                warnings.warn(f"ctr images import {image} on {node} failed once ({first.returncode}: "
                              f"{first.stderr.strip()[-1000:]}) and then passed")


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


def image_names(hoist_images, **payloads):
    """A kustomize overlay's image names: localhost/hoist (no shipped Plan names it: their prepare steps run the
    payload images) as the tests' hoist image, and each payload (`k3s=image`) as its test build. The tags stay the
    Plans' own."""
    names = {"localhost/hoist": hoist_images["hoist"].rsplit(":", 1)[0]}
    for recipe, image in payloads.items():
        names[f"localhost/hoist-{recipe}"] = image.rsplit(":", 1)[0]
    return names


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


@pytest.fixture
def bus(suc, tmp_path):
    """A system bus in the server node's scratch host root, where the k3s Plans' upgrade container finds it."""
    if not dbus_available():
        pytest.skip("dbus-daemon or python3-dbusmock (Debian's /usr/bin/python3) is missing")
    created = SystemBus(suc.host_root(suc.cluster.server_node), tmp_path / "bus")
    yield created
    created.stop()


@pytest.fixture
def wait_job_created(real_cluster):
    """wait(plan, timeout): the first Job of `plan`, once the controller has made it."""
    def wait(plan, timeout=120):
        return real_cluster.api.wait_for(f"a Job of plan {plan}", lambda: (jobs_of(real_cluster, plan) or [None])[0],
                                         timeout)
    return wait


def clean_up(cluster):
    """Every Plan, Job and pod of the namespace deleted (the pods waited for), the test's node labels and
    cordons gone, the shipped accounts and roles removed, hoist's Events about the nodes deleted."""
    api = cluster.api
    for event in api.items(EVENTS.format(ns="default")):
        if event.get("reportingComponent") == "hoist":
            api.delete(f"{EVENTS.format(ns='default')}/{event['metadata']['name']}")
    for plan in api.items(PLANS.format(ns=NAMESPACE)):
        api.delete(f"{PLANS.format(ns=NAMESPACE)}/{plan['metadata']['name']}")
    for job in api.items(JOBS.format(ns=NAMESPACE)):
        api.delete(f"{JOBS.format(ns=NAMESPACE)}/{job['metadata']['name']}")
    for pod in api.items(PODS.format(ns=NAMESPACE)):
        try:
            api.request("DELETE", f"{PODS.format(ns=NAMESPACE)}/{pod['metadata']['name']}",
                        {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
        except ApiError as error:
            if error.status != 404:   # the garbage collector deleted it with its Job meanwhile
                raise
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


def apply_ok(result):
    assert result.returncode == 0, result.stderr


def k3s_server(cluster, payloads, hoist_images, tmp_path, version, drop=("k3s-agent",), args=None):
    """deploy/k3s with the payload image's test name, the server Plan at `version`, the objects named in `drop`
    left out (the agent Plan), `args(list)` given the server Plan's upgrade arguments to change; the server node
    labelled as the Plan selects it. Returns the applied documents."""
    image = import_payload(cluster, hoist_images, payloads.get("k3s", version))
    label_node(cluster, cluster.server_node, {"node-role.kubernetes.io/control-plane": "true", "k3s-upgrade": "true"})

    def change(docs):
        docs[:] = [d for d in docs if d["metadata"]["name"] not in drop]
        spec = plan_of(docs, "k3s-server")["spec"]
        spec["version"] = version
        if args:
            args(spec["upgrade"]["args"])
    result, docs = apply_overlay(cluster, tmp_path, "k3s", image_names(hoist_images, k3s=image), change)
    apply_ok(result)
    return docs


def shipped_accounts(cluster, tmp_path, overlay="k3s"):
    """The accounts and roles of deploy/<overlay> without its Plans, for Plans of a test's own."""
    result, _ = apply_overlay(cluster, tmp_path, overlay, {}, lambda docs: docs.__setitem__(
        slice(None), [d for d in docs if d["kind"] != "Plan"]))
    apply_ok(result)


def plan_doc(name, selector, account, hoist_image, prepare_args=None, upgrade_args=("version",), version=K3S_NEW):
    """A Plan of the tests' own (not from deploy/): hoist's image, tagged, for its steps."""
    spec = {"version": version, "concurrency": 1, "serviceAccountName": account,
            "nodeSelector": {"matchExpressions": selector},
            "upgrade": {"image": hoist_image, "args": list(upgrade_args)}}
    if prepare_args:
        spec["prepare"] = {"image": hoist_image, "args": list(prepare_args)}
    return {"apiVersion": "upgrade.cattle.io/v1", "kind": "Plan",
            "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}


SERVER_SELECTOR = [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]
AGENT_SELECTOR = [{"key": "k3s-upgrade", "operator": "Exists"},
                  {"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"}]


def two_k3s_nodes(cluster):
    """The server node labelled as deploy/k3s's server Plan selects it, the other as its agent Plan does."""
    label_node(cluster, cluster.server_node, {"node-role.kubernetes.io/control-plane": "true", "k3s-upgrade": "true"})
    label_node(cluster, cluster.agent_node, {"k3s-upgrade": "true"})


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


def wait_for_job(cluster, plan, timeout, condition="Complete", suc=None, version=None):
    """The Job of `plan` (of its `version`, when given: an earlier version's Job stays for its TTL) once its
    `condition` (Complete or Failed) is True."""
    def done():
        if suc is not None:
            suc.controller.check()
        for job in jobs_of(cluster, plan):
            if version is not None and job["metadata"]["labels"].get("upgrade.cattle.io/version") != version:
                continue
            for cond in job.get("status", {}).get("conditions") or []:
                if cond["type"] == condition and cond["status"] == "True":
                    return job
        return None
    return cluster.api.wait_for(f"a Job of plan {plan} is {condition}", done, timeout)


def wait_for_plan_failed(cluster, plan, timeout=60, suc=None):
    """The Plan's Complete condition once SUC's Job handler wrote the failure of its Job (False, JobFailed): it
    does so a moment after the Job controller marked the Job Failed."""
    def failed():
        if suc is not None:
            suc.controller.check()
        for cond in get_plan(cluster, plan).get("status", {}).get("conditions") or []:
            if cond["type"] == "Complete" and cond["status"] == "False" and cond.get("reason") == "JobFailed":
                return cond
        return None
    return cluster.api.wait_for(f"the Plan {plan} says its Job failed", failed, timeout)


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


def termination_message(pod, container="upgrade"):
    """What the kubelet read from the container's /dev/termination-log, as the pod's status keeps it."""
    for status in pod["status"].get("containerStatuses", []) + pod["status"].get("initContainerStatuses", []):
        if status["name"] == container:
            return status["state"].get("terminated", {}).get("message", "")
    return None


def pod_log_path(cluster, pod, container="upgrade"):
    """The file the node's containerd writes the container's output to (CRI's format, a line per write), under the
    node's own /var/log (scripts/kube gives each node one): readable while the pod runs and, once opened, after the
    kubelet removed it with the pod."""
    meta = pod["metadata"]
    return (cluster.dir / "nodes" / pod["spec"]["nodeName"] / "log/pods" /
            f"{meta['namespace']}_{meta['name']}_{meta['uid']}" / container / "0.log")


def termination_message_path(cluster, pod, container="upgrade"):
    """The file the node's kubelet mounts at the container's terminationMessagePath (its root's
    pods/UID/containers/NAME/ID), where hoist writes its termination message in place on exit: once opened, it
    can be read after the kubelet removed it with the pod."""
    meta = pod["metadata"]
    directory = (cluster.dir / "nodes" / pod["spec"]["nodeName"] / "kubelet/pods" / meta["uid"] / "containers" /
                 container)
    return max(directory.iterdir(), key=lambda path: path.stat().st_mtime_ns)


def cri_log_text(raw):
    """The output in a CRI log file's lines ('<time> <stream> <P|F> <text>'), P being part of a line."""
    out = []
    for line in raw.splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4:
            out.append(parts[3] + ("" if parts[2] == "P" else "\n"))
    return "".join(out)


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
