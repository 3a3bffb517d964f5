"""hoist's image, run with podman the four ways users run it, on scratch host roots:

(a) as the upgrade container of a Plan, with what system-upgrade-controller's job.go gives a Job's container:
    its environment, the pod-info files, the Plan's secrets, the service account, the host at /host;
(b) as the prepare container of a Plan (`hoist stage`, which first waits for the server Plan on agents), against
    the fake API server;
(c) by hand on a node: the README's `podman run --rm --privileged --pid=host --ipc=host --net=host -v /:/host` line;
(d) for a rollback.

The images are built for real: hoist's from the Dockerfile (scripts/image: debootstrapped base image, the
project's own scripts/deps and scripts/build, cached by podman's layers), the payload images from the recipes
under images/, and the Plans' arguments are read from deploy/. What podman cannot do here is a skip with the
reason, never a pass.
"""

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

pytest.register_assert_rewrite("prepare_harness")

from conftest import HOIST_BIN, parse_termination, record_output, termination
from dbus_harness import system_bus  # noqa: F401 (a fixture)
from fake_apiserver import NODE_API, PLAN_API, munge, write_kubeconfig
from known_secrets import SA_TOKEN
from payloads import fake_k3s, host_read, manifest_without, state_of
from prepare_harness import NAMESPACE, SERVER_PLAN, make_service_account, put_server_plan, suc, wait_for_watches
from suc_emulator import SucEmulator
from test_deploy_manifests import DEPLOY, account_rules, by_kind, overlay_docs, patch_files, render

pytest_plugins = ["prepare_harness"]  # the fixtures: pki, cluster, server

REPO = Path(os.environ.get("HOIST_SOURCE_DIR") or Path(__file__).resolve().parent.parent)
PODMAN = REPO / "scripts/podman/podman"
RUN_ID = f"{os.getpid()}"
NODE = "node-1"
CONTROLLER = "system-upgrade-controller"
BOOT_ID_1 = "11111111-2222-4333-8444-555555555555"
BOOT_ID_2 = "99999999-8888-4777-8666-555555555555"

K3S_V1, K3S_V2 = "v1.30.1+k3s1", "v1.30.2+k3s1"
TREE_V1, TREE_V2 = "2024.6.1", "2024.7.0"
SYSEXT_V1 = "1.4.2"


def podman(*args, check=True, timeout=300, **kwargs):
    result = subprocess.run([str(PODMAN), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                            **kwargs)
    if args and args[0] == "run":  # hoist's output, for test_zz_log_audit.py
        record_output([PODMAN, *args], result.stdout, result.stderr)
    if check and result.returncode != 0:
        raise AssertionError(f"podman {' '.join(map(str, args))} exited {result.returncode}:\n{result.stderr}")
    return result


# ------------------------------------------------------------------ can podman run here?

def _archive_reachable():
    try:
        with urllib.request.urlopen("http://deb.debian.org/debian/dists/bookworm/Release", timeout=10) as reply:
            return reply.status == 200
    except OSError:
        return False


def podman_problem():
    """Why podman cannot build and run hoist's image here, or None."""
    if os.geteuid() != 0:
        return "needs root: rootful podman with privileged containers, debootstrap for the base image"
    for tool in ("podman", "runc", "conmon"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            return f"{tool} is not installed (scripts/apt-packages lists it; scripts/deps installs it)"
    info = podman("info", "--format", "{{.Host.OCIRuntime.Name}}", check=False, timeout=60)
    if info.returncode != 0:
        return f"podman does not work here: {info.stderr.strip()[-500:]}"
    base = podman("image", "exists", "localhost/hoist-debian:bookworm", check=False)
    if base.returncode != 0:
        if shutil.which("debootstrap") is None and not Path("/usr/sbin/debootstrap").exists():
            return "no base image and no debootstrap to make it"
        if not _archive_reachable():
            return "no base image, and Debian's archive (deb.debian.org) cannot be reached to debootstrap one"
    return None


def image_name():
    """The name scripts/image gives hoist's image here (HOIST_IMAGE): one per checkout. Checkouts of the repository on
    one machine (git worktrees) share the store of scripts/podman; under scripts/image's default name, two builds at
    once would tag over each other's image and build stage, and a test would run the other checkout's hoist. The
    tag stays scripts/image's (v<version>), the one the Plans name."""
    checkout = REPO.resolve()
    slug = re.sub(r"[^a-z0-9]+", "-", checkout.name.lower()).strip("-")[:20] or "checkout"
    return f"localhost/hoist-{slug}-{hashlib.sha256(str(checkout).encode()).hexdigest()[:8]}"


def image_of_binary(binary):
    """An image of the static binary `binary` alone, as the Dockerfile's last stage lays it out, under a name of
    its own with scripts/image's tag: HOIST_IMAGE_BINARY runs the Job-shape tests against another build of hoist
    (an older commit's, to show that a test fails there) without compiling it in podman. The tests of what
    else the image holds (SBOM, licence, labels) fail with it."""
    version = re.search(r"^project\(hoist VERSION ([^ )]+)", (REPO / "CMakeLists.txt").read_text(), re.M)[1]
    image = f"{image_name()}-given:v{version}"
    with tempfile.TemporaryDirectory() as context:
        shutil.copy2(binary, Path(context) / "hoist")
        (Path(context) / "Containerfile").write_text('FROM scratch\nCOPY hoist /hoist\nENTRYPOINT ["/hoist"]\n')
        podman("build", "--pull=never", "--tag", image, "--file", Path(context) / "Containerfile", context,
               timeout=600)
    return image


@pytest.fixture(scope="session")
def hoist_image():
    problem = podman_problem()
    if problem:
        pytest.skip(problem)
    started = time.monotonic()
    if os.environ.get("HOIST_IMAGE_BINARY"):
        image = image_of_binary(Path(os.environ["HOIST_IMAGE_BINARY"]))
    else:
        build = subprocess.run([str(REPO / "scripts/image")], capture_output=True, text=True, timeout=3300,
                               env=dict(os.environ, HOIST_IMAGE=image_name()))
        assert build.returncode == 0, f"scripts/image failed:\n{build.stderr[-6000:]}"
        image = build.stdout.strip().splitlines()[-1]
    print(f"\nhoist's image: {image} in {time.monotonic() - started:.1f} s")
    # A first container run proves that podman can run containers at all.
    probe = podman("run", "--rm", "--pull=never", "--net=host", image, "version", check=False, timeout=120)
    if probe.returncode != 0 and ("OCI" in probe.stderr or "runc" in probe.stderr or "cgroup" in probe.stderr):
        pytest.skip(f"podman cannot run a container here: {probe.stderr.strip()[-500:]}")
    assert probe.returncode == 0, probe.stderr
    return image


@pytest.fixture(scope="session")
def signing_key(tmp_path_factory):
    """An Ed25519 release key: the payload images' SHA256SUMS are signed with it,
    and the Plan's secret holds its public half."""
    directory = tmp_path_factory.mktemp("release-key")
    private, public = directory / "release.key", directory / "release.pem"
    subprocess.run(["openssl", "genpkey", "-quiet", "-algorithm", "ed25519", "-out", private], check=True)
    subprocess.run(["openssl", "pkey", "-in", private, "-pubout", "-out", public], check=True)
    return {"private": private, "public": public}


class Payloads:
    """Payload images built from images/<recipe> under test-only names, removed at the end."""

    def __init__(self, hoist_image, signing_key):
        self.hoist_image = hoist_image
        self.signing_key = signing_key
        self.built = {}

    def name(self, recipe):
        return f"localhost/hoist-test{RUN_ID}-{recipe}"

    def get(self, recipe, version, signed=False, epoch=None):
        key = (recipe, version, signed)
        if key not in self.built:
            env = dict(os.environ, PATH="/usr/sbin:/usr/bin:/sbin:/bin")
            env.pop("HOIST_SIGNING_KEY", None)
            if signed:
                env["HOIST_SIGNING_KEY"] = str(self.signing_key["private"])
            if epoch:
                env["SOURCE_DATE_EPOCH"] = str(epoch)
            name = self.name(recipe) + ("-signed" if signed else "")
            build = subprocess.run([str(REPO / "images/build"), recipe, version, "--from", self.hoist_image,
                                    "--name", name], capture_output=True, text=True, env=env, timeout=600)
            assert build.returncode == 0, f"images/build {recipe} {version} failed:\n{build.stderr[-4000:]}"
            self.built[key] = build.stdout.strip().splitlines()[-1]
        return self.built[key]

    def remove(self):
        if self.built:
            podman("rmi", "--force", *self.built.values(), check=False)


@pytest.fixture(scope="session")
def payloads(hoist_image, signing_key):
    built = Payloads(hoist_image, signing_key)
    yield built
    built.remove()


def image_file(image, path):
    """The bytes of `path` in `image` (podman cp from a created, never started container)."""
    name = f"hoist-test{RUN_ID}-cp-{uuid.uuid4().hex[:8]}"
    podman("create", "--pull=never", "--name", name, image)
    try:
        out = subprocess.run([str(PODMAN), "cp", f"{name}:{path}", "-"], capture_output=True, check=True,
                             timeout=60).stdout
        with tarfile.open(fileobj=io.BytesIO(out)) as archive:
            member = archive.getmembers()[0]
            return archive.extractfile(member).read()
    finally:
        podman("rm", "--force", name, check=False)


# ------------------------------------------------------------------ a Plan's Job, as job.go makes it

def load_plans():
    """The Plans as deploy/ ships them, by name; an overlay's patches of Plans (deploy/k3s-upstream) are not Plans."""
    plans = {}
    for path in sorted((REPO / "deploy").glob("*/plan*.yaml")):
        if path.resolve() in patch_files():
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "Plan":
                plans[doc["metadata"]["name"]] = doc
    return plans


def plan_hash(plan):
    # What SUC's hash is for does not matter here: a stable digest of the spec.
    return hashlib.sha224(json.dumps(plan["spec"], sort_keys=True).encode()).hexdigest()


def downward_api(values):
    """A Downward API volume file: key="value" lines, sorted, values quoted the way Go's strconv.Quote does."""
    def quote(text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return "".join(f"{k}={quote(v)}\n" for k, v in sorted(values.items()))


def secret_volume(directory, files):
    """A Secret volume the way kubelet writes one: the files in a timestamped
    directory, ..data linking to it, and each name a link through ..data."""
    directory = Path(directory)
    stamp = directory / "..2024_06_01_00_00_00.000000001"
    stamp.mkdir(parents=True)
    for name, content in files.items():
        (stamp / name).write_bytes(content)
    (directory / "..data").symlink_to(stamp.name)
    for name in files:
        (directory / name).symlink_to(f"..data/{name}")
    return directory


class Job:
    """One Job pod of a Plan on NODE, as system-upgrade-controller's job.go builds it:
    hostPID, hostIPC, hostNetwork; the host's / at /host; the pod's labels and
    annotations at /run/system-upgrade/pod; each of the Plan's secrets at
    /run/system-upgrade/secrets/<name> (or its path), read-only; the service
    account; the env of every container (node, pod, the Plan's envs, then the
    Plan's name, latest hash and latest version, munged); the upgrade container
    privileged with CAP_SYS_BOOT, the prepare container only as its Plan's
    securityContext says; a container's `command` replaces the image's entrypoint,
    and its `volumes` are hostPath mounts (here: under the scratch host root)."""

    def __init__(self, plan, host_root, work_dir, image_names, secrets=None, kubernetes=("10.43.0.1", 443),
                 service_account=None, extra_env=None):
        self.plan = plan
        # The file the kubelet mounts at /dev/termination-log in every container; what it shows of the pod.
        self.termination_log = Path(work_dir) / "termination-log"
        self.extra_env = dict(extra_env or {})
        self.name = plan["metadata"]["name"]
        self.version = munge(plan["spec"]["version"])
        self.hash = plan_hash(plan)
        self.host_root = Path(host_root)
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.termination_log.write_text("")
        self.image_names = image_names
        self.pod_name = f"apply-{self.name}-on-{NODE}-with-{self.hash[:8]}-{uuid.uuid4().hex[:5]}"
        self.pod_uid = str(uuid.uuid4())
        self.kubernetes = kubernetes
        pod_info = self.work_dir / "pod-info"
        pod_info.mkdir(exist_ok=True)
        job_uid = str(uuid.uuid4())
        (pod_info / "labels").write_text(downward_api({
            "batch.kubernetes.io/controller-uid": job_uid,
            "batch.kubernetes.io/job-name": self.pod_name.rsplit("-", 1)[0],
            "controller-uid": job_uid,
            "job-name": self.pod_name.rsplit("-", 1)[0],
            f"plan.upgrade.cattle.io/{self.name}": self.hash,
            "upgrade.cattle.io/controller": CONTROLLER,
            "upgrade.cattle.io/node": NODE,
            "upgrade.cattle.io/plan": self.name,
            "upgrade.cattle.io/version": self.version,
        }))
        (pod_info / "annotations").write_text(downward_api({
            "kubernetes.io/config.seen": "2024-06-01T00:00:00.000000000Z",
            "example.com/note": 'a value with "quotes"\nand a second line',
        }))
        self.pod_info = pod_info
        self.secrets = {}
        for spec in plan["spec"].get("secrets", []):
            path = spec.get("path") or spec["name"]
            mount = path if path.startswith("/") else f"/run/system-upgrade/secrets/{path}"
            self.secrets[mount] = secret_volume(self.work_dir / f"secret-{spec['name']}", secrets[spec["name"]])
        self.service_account = service_account or make_service_account(
            self.work_dir / "serviceaccount", self._dummy_ca(), SA_TOKEN, plan["metadata"]["namespace"])

    def _dummy_ca(self):
        # For the Plans whose upgrade container never calls the API (the k3s Plans' does: see in_cluster()); the
        # files are there as in any pod.
        path = self.work_dir / "ca.crt"
        path.write_text("-----BEGIN CERTIFICATE-----\nnot used by the upgrade container\n-----END CERTIFICATE-----\n")
        return path

    def image(self, container):
        """The container's image, with SUC's latest tag appended to an untagged one."""
        spec = self.plan["spec"][container]
        image = spec["image"]
        name, _, tag = image.partition(":")
        name = self.image_names.get(name, name)
        return f"{name}:{tag or self.version}"

    def env(self, container):
        spec = self.plan["spec"][container]
        env = {"SYSTEM_UPGRADE_NODE_NAME": NODE, "SYSTEM_UPGRADE_POD_NAME": self.pod_name,
               "SYSTEM_UPGRADE_POD_UID": self.pod_uid}
        for item in spec.get("env", []):
            env[item["name"]] = item["value"]
        env.update({"SYSTEM_UPGRADE_PLAN_NAME": self.name, "SYSTEM_UPGRADE_PLAN_LATEST_HASH": self.hash,
                    "SYSTEM_UPGRADE_PLAN_LATEST_VERSION": self.version,
                    "KUBERNETES_SERVICE_HOST": self.kubernetes[0], "KUBERNETES_SERVICE_PORT": str(self.kubernetes[1]),
                    "KUBERNETES_PORT": f"tcp://{self.kubernetes[0]}:{self.kubernetes[1]}"})
        env.update(self.extra_env)
        return env

    def args(self, container):
        """The container's args, with $(VAR) references expanded from its env as kubelet does."""
        env = self.env(container)
        out = []
        for arg in self.plan["spec"][container].get("args", []):
            for key, value in env.items():
                arg = arg.replace(f"$({key})", value)
            out.append(arg)
        return out

    def podman_argv(self, container, name):
        argv = ["run", "--rm", "--pull=never", "--name", name, "--net=host", "--pid=host", "--ipc=host",
                "--volume", f"{self.host_root}:/host",
                "--volume", f"{self.pod_info}:/run/system-upgrade/pod:ro",
                "--volume", f"{self.service_account}:/var/run/secrets/kubernetes.io/serviceaccount:ro",
                "--volume", f"{self.termination_log}:/dev/termination-log"]
        if container == "upgrade":
            argv += ["--privileged", "--cap-add", "SYS_BOOT"]
        elif (self.plan["spec"][container].get("securityContext") or {}).get("privileged"):
            argv += ["--privileged"]
        for mount, directory in self.secrets.items():
            argv += ["--volume", f"{directory}:{mount}:ro"]
        spec = self.plan["spec"][container]
        for volume in spec.get("volumes") or []:
            source = self.host_root / volume["source"].lstrip("/")
            source.mkdir(parents=True, exist_ok=True)  # containerd makes a missing hostPath directory
            argv += ["--volume", f"{source}:{volume['destination']}"]
        if spec.get("command"):
            argv += ["--entrypoint", json.dumps(spec["command"])]
        for key, value in self.env(container).items():
            argv += ["--env", f"{key}={value}"]
        return argv + [self.image(container), *self.args(container)]

    def start(self, container="upgrade"):
        name = f"hoist-test{RUN_ID}-{container}-{uuid.uuid4().hex[:8]}"
        argv = [str(PODMAN), *self.podman_argv(container, name)]
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        STARTED.append(name)
        return Container(name, process, argv)

    def run(self, container="upgrade", timeout=120):
        return self.start(container).wait(timeout)

    def run_pod(self, timeout=120):
        """The pod's containers that run hoist, in SUC's order: prepare when the Plan has one, then upgrade. As in
        the pod, a container that fails ends it (SUC's cordon or drain between the two is not hoist's). Each
        container's result, in order."""
        results = []
        for container in ("prepare", "upgrade"):
            if container in self.plan["spec"]:
                results.append(self.run(container, timeout))
                if results[-1].returncode != 0:
                    break
        return results


class Container:
    def __init__(self, name, process, argv):
        self.name, self.process, self.argv = name, process, argv
        self.returncode = self.stdout = self.stderr = None

    def wait(self, timeout=120):
        if self.returncode is not None:
            return self
        try:
            self.stdout, self.stderr = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            podman("rm", "--force", self.name, check=False)
            self.stdout, self.stderr = self.process.communicate()
            raise AssertionError(f"container {self.name} did not exit within {timeout} s:\n{self.stderr}")
        self.returncode = self.process.returncode
        record_output(self.argv, self.stdout, self.stderr)  # for test_zz_log_audit.py
        return self

    def stop(self, seconds=20):
        """What kubelet does to a pod that is deleted (or a node that shuts down): SIGTERM, then SIGKILL."""
        podman("stop", "--time", seconds, self.name, check=False, timeout=seconds + 60)

    def __repr__(self):
        return f"Container(rc={self.returncode}, stdout={self.stdout!r}, stderr={self.stderr!r})"


def manual(image, host_root, *args, timeout=120):
    """The README's line for a person on a node."""
    argv = [str(PODMAN), "run", "--rm", "--pull=never", "--privileged", "--pid=host", "--ipc=host", "--net=host",
            "-v", f"{host_root}:/host", image, *map(str, args)]
    process = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    record_output(argv, process.stdout, process.stderr)
    result = Container("manual", None, argv)
    result.returncode, result.stdout, result.stderr = process.returncode, process.stdout, process.stderr
    return result


STARTED = []  # the names of the containers a test started in the background


@pytest.fixture(autouse=True)
def no_container_left_behind():
    """A test that fails while its container still runs (waiting for a reboot, say) leaves nothing behind."""
    yield
    while STARTED:
        podman("rm", "--force", "--ignore", STARTED.pop(), check=False)


@pytest.fixture
def plans():
    return load_plans()


def node_at(cluster, kubelet):
    """The Job's Node as the k3s Plans' node-ready check reads it: Ready, its kubelet on `kubelet`."""
    if cluster.get(NODE_API, NODE) is None:
        cluster.add_node(NODE)

    def ready(node):
        node["status"]["nodeInfo"]["kubeletVersion"] = kubelet
        node["status"]["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]
    cluster.update(NODE_API, NODE, ready)


def in_cluster(server, pki, directory):
    """A Job's keyword arguments for a pod that reaches the (fake) API server with its service account, as the k3s
    Plans' upgrade container does for its node-ready check."""
    return {"kubernetes": (server.host, server.port),
            "service_account": make_service_account(directory, pki["ca"], "token-1", "system-upgrade")}


def set_boot_id(host_root, boot_id):
    (host_root / "proc/sys/kernel/random/boot_id").write_text(boot_id + "\n")


def with_version(plan, version):
    changed = json.loads(json.dumps(plan))
    changed["spec"]["version"] = version
    return changed


def signed_variant(plan):
    """The k3s Plan of images/k3s/README.md's signed variant: the release key's
    public half from a Secret mounted by the Plan."""
    changed = json.loads(json.dumps(plan))
    changed["spec"]["secrets"] = [{"name": "hoist-release-key"}]
    return changed


# ------------------------------------------------------------------ the image itself

def test_the_image_is_the_static_binary_and_its_documents_from_scratch(hoist_image, tmp_path):
    info = json.loads(podman("image", "inspect", hoist_image).stdout)[0]
    assert info["Config"]["Entrypoint"] == ["/hoist"]
    assert info["Os"] == "linux"
    labels = info["Config"]["Labels"]
    project_version = next(line.split("VERSION", 1)[1].split()[0].rstrip(")")
                           for line in (REPO / "CMakeLists.txt").read_text().splitlines()
                           if line.startswith("project(hoist"))
    assert labels["org.opencontainers.image.title"] == "hoist"
    assert labels["org.opencontainers.image.version"] == project_version
    if subprocess.run(["git", "-C", str(REPO), "rev-parse", "--git-dir"], capture_output=True).returncode == 0:
        assert labels["org.opencontainers.image.revision"] not in ("", "unknown")
    else:  # built from an export without .git: scripts/image cannot know the commit
        assert labels["org.opencontainers.image.revision"] == "unknown"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", labels["org.opencontainers.image.created"])
    assert labels["org.opencontainers.image.source"]
    licenses = labels["org.opencontainers.image.licenses"]
    assert licenses.startswith("Apache-2.0 AND ") and "LGPL-2.1-or-later" in licenses, licenses
    # Two layers: the binary, and its license, notices, SBOM, man pages and completion.
    assert len(info["RootFS"]["Layers"]) == 2
    archive = tmp_path / "image.tar"
    podman("save", "--format", "docker-archive", "-o", archive, hoist_image)
    entries = {}
    with tarfile.open(archive) as outer:
        manifest = json.load(outer.extractfile("manifest.json"))
        for name in manifest[0]["Layers"]:
            with tarfile.open(fileobj=outer.extractfile(name)) as layer:
                entries.update({m.name.lstrip("./"): m for m in layer.getmembers()
                                if m.isfile() and m.name.strip("./")})
    docs = "usr/share/doc/hoist/"
    pages = [f"usr/share/man/man8/{name}.8" for name in ("hoist", "hoist-prepare", "hoist-rollback", "hoist-stage",
                                                          "hoist-status", "hoist-upgrade", "hoist-version")]
    assert sorted(entries) == sorted(["hoist", docs + "LICENSE", docs + "THIRD_PARTY_NOTICES", docs + "hoist.spdx.json",
                                      "usr/share/man/man5/hoist.json.5", *pages,
                                      "usr/share/bash-completion/completions/hoist",
                                      "usr/share/zsh/vendor-completions/_hoist"])
    # The pages are the binary's own help: the build's pages of the same sources say the same.
    build_pages = Path(os.environ.get("HOIST_BUILD_DIR", Path(HOIST_BIN).parent))
    for name in ("man5/hoist.json.5", "man8/hoist-upgrade.8"):
        if (build_pages / name).exists():
            assert image_file(hoist_image, "/usr/share/man/" + name).decode().split("\n", 1)[1] == \
                (build_pages / name).read_text().split("\n", 1)[1], name
    assert entries["hoist"].mode & 0o111
    binary = tmp_path / "hoist"
    binary.write_bytes(image_file(hoist_image, "/hoist"))
    described = subprocess.run(["file", binary], capture_output=True, text=True).stdout
    assert "static-pie linked" in described and "not stripped" not in described, described
    # The SBOM in the image is the stripped binary's, with the revision of the label.
    sbom = json.loads(image_file(hoist_image, "/" + docs + "hoist.spdx.json"))
    hoist = next(p for p in sbom["packages"] if p["name"] == "hoist")
    assert hoist["checksums"][0]["checksumValue"] == hashlib.sha256(binary.read_bytes()).hexdigest()
    assert hoist["sourceInfo"] == f"git revision {labels['org.opencontainers.image.revision']}"
    assert "GNU LESSER GENERAL PUBLIC LICENSE" in image_file(hoist_image, "/" + docs + "THIRD_PARTY_NOTICES").decode()
    size = int(podman("image", "inspect", "--format", "{{.Size}}", hoist_image).stdout)
    print(f"\nimage size: {size} bytes ({size / 2**20:.1f} MiB); binary {entries['hoist'].size} bytes")
    assert size < 16 * 2**20


def test_the_image_runs_hoist_with_no_shell_and_no_arguments(hoist_image):
    version = podman("run", "--rm", "--pull=never", "--net=host", hoist_image, "version")
    project_version = json.loads(podman("image", "inspect", hoist_image).stdout)[0]["Config"]["Labels"][
        "org.opencontainers.image.version"]
    assert project_version in version.stdout
    # The build context has no .git: the commit in `hoist version` is the one scripts/image was told, as the label.
    revision = json.loads(podman("image", "inspect", hoist_image).stdout)[0]["Config"]["Labels"][
        "org.opencontainers.image.revision"]
    built = json.loads(podman("run", "--rm", "--pull=never", "--net=host", hoist_image, "version", "--json").stdout)
    if revision == "unknown":
        assert built["commit"] == "unknown"
    else:
        head, _, dirty = revision.partition("-")
        assert built["commit"] == head[:12] + ("-" + dirty if dirty else "")
    bare = podman("run", "--rm", "--pull=never", "--net=host", hoist_image, check=False)
    assert bare.returncode == 0, bare.stderr
    assert "Usage: hoist" in bare.stdout
    # There is nothing else in the image to run.
    shell = podman("run", "--rm", "--pull=never", "--net=host", "--entrypoint", "/bin/sh", hoist_image, "-c", "true",
                   check=False)
    assert shell.returncode != 0


# ------------------------------------------------------------------ (a) the upgrade container of a Plan

def test_a_k3s_plan_job_upgrades_restarts_and_is_idempotent(plans, payloads, host_root, tmp_path, system_bus,
                                                            signing_key, cluster, server, pki):
    systemd = system_bus.start("systemd_manager")
    node_at(cluster, K3S_V1)  # the kubelet comes back on the new version
    # What get.k3s.io put there: a static binary (as k3s is), which the recipe's manifest asks its version.
    old_k3s = fake_k3s(host_root, tmp_path, "v1.29.5+k3s1").read_bytes()
    image = payloads.get("k3s", K3S_V1, signed=True)
    plan = signed_variant(plans["k3s-server"])
    release_key = {"release.pem": signing_key["public"].read_bytes()}
    names = {"localhost/hoist-k3s": image.rsplit(":", 1)[0]}
    job = Job(plan, host_root, tmp_path / "job", names, secrets={"hoist-release-key": release_key},
              **in_cluster(server, pki, tmp_path / "sa"))
    assert job.image("upgrade") == image   # SUC's tag: the Plan's version, munged
    assert job.image("prepare") == image

    # The prepare container, before SUC cordons the node: decided, verified and staged; nothing switched.
    staged, result = job.run_pod(timeout=240)  # the unit check waits 30 s (--health-settle's default)
    assert staged.returncode == 0, staged
    assert f"k3s: staged {K3S_V1} in " in staged.stderr
    assert "k3s: verified /payload/k3s against /payload/SHA256SUMS (signed)" in staged.stderr
    # Then the upgrade container switches to what was staged, without staging it again.
    assert result.returncode == 0, result
    assert f"switching to {K3S_V1} as `hoist stage` staged it" in result.stderr
    assert "health: unit:k3s.service passed" in result.stderr
    assert f"health: node-ready passed: node '{NODE}' is Ready (kubelet {K3S_V1})" in result.stderr
    assert state_of(host_root, "k3s")["health"]["verdict"] == "passed"
    assert {(r["verb"], r["path"]) for r in cluster.requests if r["method"] == "GET"} == \
        {("get", f"/api/v1/nodes/{NODE}")}
    assert os.readlink(host_root / "usr/local/bin/k3s") == "/var/lib/hoist/k3s/v1.30.1+k3s1/k3s"
    assert host_read(host_root, "/usr/local/bin/k3s") == image_file(image, "/payload/k3s")
    assert b"k3s version v1.30.1+k3s1" in host_read(host_root, "/usr/local/bin/k3s")
    assert (host_root / "var/lib/hoist/k3s/pre-hoist/k3s").read_bytes() == old_k3s
    state = state_of(host_root, "k3s")
    assert state["current"] == "v1.30.1+k3s1"
    assert state["last_result"]["outcome"] == "succeeded"
    assert systemd.called("RestartUnit") == ['RestartUnit "k3s.service" "replace"']
    assert state["staged"] is None

    # The pod again (a retry, or the Job's re-run after a reboot): nothing to do, no restart.
    pod = Job(plan, host_root, tmp_path / "job-again", names, secrets={"hoist-release-key": release_key},
              **in_cluster(server, pki, tmp_path / "sa-again")).run_pod()
    assert [c.returncode for c in pod] == [0, 0], pod
    assert f"gate: k3s: already at {K3S_V1}, nothing to do" in pod[0].stderr  # the prepare container
    assert len(systemd.called("RestartUnit")) == 1
    assert state_of(host_root, "k3s")["last_result"]["outcome"] == "unchanged"


def standin_k3s_upgrade_image(tmp_path, version):
    """A stand-in for rancher/k3s-upgrade:<munged version>, which no registry here can give: FROM scratch with the
    release's binary at /opt/k3s, where the upstream image keeps it, and nothing else (its entrypoint, upgrade.sh in
    Alpine, never runs under deploy/k3s-upstream, which gives each container hoist as its command). The binary is
    the images/k3s recipe's stand-in k3s."""
    context = tmp_path / "k3s-upgrade"
    recipe = subprocess.run([str(REPO / "images/k3s/payload"), str(context / "payload"), version],
                            capture_output=True, text=True, env={**os.environ, "HOIST_BIN": ""}, timeout=60)
    assert recipe.returncode == 0, recipe.stderr
    shutil.copy2(context / "payload/k3s", context / "k3s")
    # upstream's entrypoint and command, named and absent: the Plans replace them, and the image has no shell to run
    # them with anyway.
    (context / "Containerfile").write_text('FROM scratch\nCOPY k3s /opt/k3s\nENTRYPOINT ["/bin/upgrade.sh"]\n'
                                           'CMD ["upgrade"]\n')
    image = f"{image_name()}-k3s-upgrade:{munge(version)}"
    podman("build", "--pull=never", "--tag", image, "--file", context / "Containerfile", context, timeout=300)
    return image, (context / "k3s").read_bytes()


def release_sums(binary):
    """A release's sha256sum-amd64.txt: the binary's line among the other assets'."""
    digest = hashlib.sha256(binary).hexdigest()
    return {"sha256sum-amd64.txt": f"{'1' * 64}  k3s-airgap-images-amd64.tar.zst\n{digest}  k3s\n".encode()}


def test_the_hoist_plan_installs_hoist_and_the_upstream_k3s_upgrade_image_runs_it(
        plans, hoist_image, host_root, tmp_path, system_bus, cluster, server, pki):
    # deploy/hoist, then deploy/k3s-upstream as rendered, as SUC's job.go runs them (docs/upstream-images.md).
    systemd = system_bus.start("systemd_manager")
    node_at(cluster, K3S_V1)
    old_k3s = fake_k3s(host_root, tmp_path, "v1.29.5+k3s1").read_bytes()
    name, tag = hoist_image.rsplit(":", 1)
    (installed,) = Job(with_version(plans["hoist"], tag), host_root, tmp_path / "hoist-job",
                       {"localhost/hoist": name}).run_pod()
    assert installed.returncode == 0, installed
    assert os.readlink(host_root / "usr/local/bin/hoist") == f"/var/lib/hoist/hoist/{tag}/hoist"
    assert host_read(host_root, "/usr/local/bin/hoist") == image_file(hoist_image, "/hoist")
    assert os.access(host_root / f"var/lib/hoist/hoist/{tag}/hoist", os.X_OK)

    image, k3s = standin_k3s_upgrade_image(tmp_path, K3S_V1)
    try:
        upstream = by_kind(render(DEPLOY / "k3s-upstream"))["Plan"]
        names = {"rancher/k3s-upgrade": image.rsplit(":", 1)[0]}
        # The Secret of another release: refused in prepare, before SUC cordons the node; the host as it was.
        before = manifest_without(host_root, "run/hoist", "var/lib/hoist/k3s")
        job = Job(upstream["k3s-server"], host_root, tmp_path / "job-wrong", names,
                  secrets={"k3s-release-sums": release_sums(b"another release's k3s\n")})
        assert job.image("prepare") == image and job.image("upgrade") == image
        (refused,) = job.run_pod()
        assert refused.returncode == 5, refused
        assert "checksum mismatch for 'k3s'" in refused.stderr
        assert manifest_without(host_root, "run/hoist", "var/lib/hoist/k3s") == before

        job = Job(upstream["k3s-server"], host_root, tmp_path / "job", names,
                  secrets={"k3s-release-sums": release_sums(k3s)}, **in_cluster(server, pki, tmp_path / "sa"))
        staged, result = job.run_pod(timeout=240)
        assert staged.returncode == 0, staged
        assert ("k3s: verified /opt/k3s against /run/system-upgrade/secrets/k3s-release-sums/sha256sum-amd64.txt"
                in staged.stderr)
        assert f"k3s: staged {K3S_V1} in " in staged.stderr
        assert result.returncode == 0, result
        assert f"switching to {K3S_V1} as `hoist stage` staged it" in result.stderr
        assert f"health: node-ready passed: node '{NODE}' is Ready (kubelet {K3S_V1})" in result.stderr
        assert os.readlink(host_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{K3S_V1}/k3s"
        assert host_read(host_root, "/usr/local/bin/k3s") == k3s == image_file(image, "/opt/k3s")
        assert (host_root / "var/lib/hoist/k3s/pre-hoist/k3s").read_bytes() == old_k3s
        assert systemd.called("RestartUnit") == ['RestartUnit "k3s.service" "replace"']
        assert state_of(host_root, "k3s")["current"] == K3S_V1
        assert state_of(host_root, "hoist")["current"] == tag
    finally:
        podman("rmi", "--force", image, check=False)


def test_a_plan_whose_version_the_image_does_not_carry_is_refused(plans, payloads, host_root, tmp_path):
    # The Plan says v1.30.3+k3s1, but the registry's v1.30.3-k3s1 tag holds the v1.30.1 payload.
    image = payloads.get("k3s", K3S_V1)
    name = image.rsplit(":", 1)[0]
    podman("tag", image, f"{name}:v1.30.3-k3s1")
    payloads.built[("k3s", "mistagged", False)] = f"{name}:v1.30.3-k3s1"
    (host_root / "usr/local/bin").mkdir(parents=True)
    before = manifest_without(host_root, "run/hoist")
    job = Job(with_version(plans["k3s-server"], "v1.30.3+k3s1"), host_root, tmp_path / "job",
              {"localhost/hoist-k3s": name})
    # Refused by the prepare container, before SUC cordons the node: the upgrade container never runs.
    (result,) = job.run_pod()
    assert result.argv[result.argv.index(job.image("prepare")) + 1] == "stage"
    assert result.returncode == 2, result
    assert "versions disagree for component 'k3s': 'v1.30.1+k3s1' from the payload's manifest but 'v1.30.3-k3s1' " \
           "from SYSTEM_UPGRADE_PLAN_LATEST_VERSION" in result.stderr
    assert manifest_without(host_root, "run/hoist") == before


def test_a_k3s_plan_job_on_a_node_without_a_system_bus_changes_nothing(plans, payloads, host_root, tmp_path, cluster,
                                                                       server, pki):
    # It switched /usr/local/bin/k3s to the new version, then exited 1: the disk held the new binary, the running
    # k3s was the old one, no health check ran, and the next reboot would have started the new version unchecked.
    old_k3s = fake_k3s(host_root, tmp_path, "v1.29.5+k3s1").read_bytes()
    image = payloads.get("k3s", K3S_V1)
    job = Job(plans["k3s-server"], host_root, tmp_path / "job", {"localhost/hoist-k3s": image.rsplit(":", 1)[0]},
              **in_cluster(server, pki, tmp_path / "sa"))
    staged, result = job.run_pod(timeout=240)  # staging needs no system bus: the prepare container stages
    assert staged.returncode == 0, staged
    assert result.returncode == 1, result
    error = (f"k3s: cannot restart k3s.service after the switch to {K3S_V1}: failed to find the system bus socket "
             "'/host/run/dbus/system_bus_socket': No such file or directory")
    assert error in result.stderr
    # The host is on the old version: the installer's binary, untouched.
    assert not os.path.islink(host_root / "usr/local/bin/k3s")
    assert (host_root / "usr/local/bin/k3s").read_bytes() == old_k3s
    assert parse_termination(job.termination_log.read_text()) == termination(
        "upgrade", 1, error, [f"k3s: v1.29.5+k3s1 (what '/usr/local/bin/k3s --version' says) -> {K3S_V1} (upgrade)"])


def test_a_refused_downgrade_that_suc_retries_pod_after_pod_is_one_event_series(plans, payloads, host_root, tmp_path,
                                                                                 cluster, server, pki):
    # SUC retries a failed pod until the backoff limit (99 in its manifests) or the deadline: each refusal was a new
    # Warning Event, and the termination message said the refusal twice.
    older = payloads.get("tree", TREE_V1, epoch=1717200000)
    newer = payloads.get("tree", TREE_V2, epoch=1719792000)
    assert manual(newer, host_root, "upgrade", "--manifest", "/payload/hoist.json").returncode == 0
    plan = plans["os-tree"]  # its version, 2024.6.1, is older than the host's
    assert munge(plan["spec"]["version"]) == TREE_V1
    cluster.rbac = account_rules(overlay_docs("tree"), "hoist-os-tree", "events")
    cluster.add_node(NODE, {"hoist-os": "enabled"})
    cluster.put_plan("os-tree", NAMESPACE, plan["spec"])
    names = {"localhost/hoist-tree": older.rsplit(":", 1)[0]}
    pods = []

    def run_pod(node, attempt, seconds_left):
        job = Job(plan, host_root, tmp_path / f"pod{attempt}", names,
                  **in_cluster(server, pki, tmp_path / f"sa{attempt}"))
        containers = job.run_pod(timeout=120)
        # Refused by the prepare container, before SUC drains the node: the upgrade container never runs.
        assert len(containers) == 1, containers
        pods.append(containers[-1])
        return pods[-1].returncode

    # Three pods: the first, then two retries, and the Job's backoff limit (2, SUC's code default) fails it.
    emulator = SucEmulator(cluster, "os-tree", NAMESPACE, run_pod=run_pod, backoff_limit=2).start()
    emulator.join(timeout=600)
    assert emulator.pods[NODE] == [3, 3, 3]
    refusal = f"os: refusing to downgrade from {TREE_V2} to {TREE_V1} (--allow-downgrade allows it)"
    for pod in pods:
        assert f"gate: {refusal}" in pod.stderr
    # One Event, counted three times; the refusal said once.
    events = [(e["reason"], e["note"], e.get("series", {}).get("count")) for e in cluster.events]
    assert events == [("HoistStageFailed", f"hoist stage: failed (exit 3): {refusal}", 3)]
    message = (tmp_path / "pod3" / "termination-log").read_text()
    assert parse_termination(message) == termination("stage", 3, refusal)
    assert not [r for r in cluster.requests if r.get("status") == 403]
    # SUC gave up: the Plan says why, as the agents' prepare reads it.
    complete = next(c for c in cluster.get(PLAN_API, "os-tree", NAMESPACE)["status"]["conditions"]
                    if c["type"] == "Complete")
    assert (complete["status"], complete["reason"]) == ("False", "JobFailed")
    assert complete["message"].endswith(f"failed on Node {NODE}: BackoffLimitExceeded: Job has reached the specified "
                                        "backoff limit")
    assert os.readlink(host_root / "opt/hoist-os/current") == TREE_V2


def test_a_payload_signed_by_another_key_is_refused_before_the_host_changes(plans, payloads, host_root, tmp_path,
                                                                           server, pki):
    image = payloads.get("k3s", K3S_V1, signed=True)
    other = tmp_path / "other"
    other.mkdir()
    subprocess.run(["openssl", "genpkey", "-quiet", "-algorithm", "ed25519", "-out", other / "k"], check=True)
    public = subprocess.run(["openssl", "pkey", "-in", other / "k", "-pubout"], check=True,
                            capture_output=True).stdout
    (host_root / "usr/local/bin").mkdir(parents=True)
    before = manifest_without(host_root, "run/hoist")
    job = Job(signed_variant(plans["k3s-server"]), host_root, tmp_path / "job",
              {"localhost/hoist-k3s": image.rsplit(":", 1)[0]}, secrets={"hoist-release-key": {"release.pem": public}},
              **in_cluster(server, pki, tmp_path / "sa"))
    (result,) = job.run_pod()  # the prepare container refuses: the upgrade container never runs
    assert result.returncode == 5, result
    assert "signature of '/payload/SHA256SUMS' does not verify with public key " \
           "'/run/system-upgrade/secrets/hoist-release-key/release.pem'" in result.stderr
    assert manifest_without(host_root, "run/hoist") == before


def test_a_tree_plan_job_reboots_and_its_rerun_after_the_boot_exits_0(plans, payloads, host_root, tmp_path,
                                                                      system_bus, cluster, server, pki):
    logind = system_bus.start("logind_manager")
    system_bus.start("systemd_manager")
    image = payloads.get("tree", TREE_V1, epoch=1717200000)
    names = {"localhost/hoist-tree": image.rsplit(":", 1)[0]}
    plan = plans["os-tree"]
    set_boot_id(host_root, BOOT_ID_1)
    # The Plan's account as the shipped RBAC grants it, and kured's DaemonSet with its lock free.
    cluster.rbac = account_rules(overlay_docs("tree"), "hoist-os-tree")
    kured = ("apps", "v1", "daemonsets")
    cluster.put(kured, {"apiVersion": "apps/v1", "kind": "DaemonSet",
                        "metadata": {"name": "kured", "namespace": "kube-system"}})
    job = Job(plan, host_root, tmp_path / "job", names, **in_cluster(server, pki, tmp_path / "sa"))
    staged = job.run("prepare")  # before SUC drains the node
    assert staged.returncode == 0, staged
    assert f"os: staged {TREE_V1}" in staged.stderr
    assert not os.path.lexists(host_root / "opt/hoist-os/current")
    pod = job.start()
    # hoist switches, records the pending reboot, asks logind, and waits for the host to go down.
    logind.wait_for_call("RebootWithFlags", timeout=60)
    assert os.readlink(host_root / "opt/hoist-os/current") == TREE_V1
    assert state_of(host_root, "os")["pending_reboot"]
    # kured's lock taken for this node, in kured's form, before the reboot: kured reboots no other node meanwhile.
    lock = json.loads(cluster.get(kured, "kured", "kube-system")["metadata"]["annotations"][
        "weave.works/kured-node-lock"])
    assert (lock["nodeID"], lock["metadata"]) == (NODE, {"unschedulable": True})
    # The node shuts down: kubelet stops the pod (SIGTERM).
    pod.stop()
    pod.wait()
    assert pod.returncode == 1, pod
    assert "stopped by SIGTERM while waiting for the reboot into" in pod.stderr
    # The node is back with a new boot id; SUC runs the Job's pod again.
    set_boot_id(host_root, BOOT_ID_2)
    pod = Job(plan, host_root, tmp_path / "job-after-boot", names,
              **in_cluster(server, pki, tmp_path / "sa-after-boot")).run_pod()
    assert [c.returncode for c in pod] == [0, 0], pod
    rerun = pod[-1]
    assert "gave kured's lock (DaemonSet kube-system/kured) back" in rerun.stderr
    assert "weave.works/kured-node-lock" not in cluster.get(kured, "kured", "kube-system")["metadata"].get(
        "annotations", {})
    assert not [r for r in cluster.requests if r.get("status") == 403]
    assert f"os: the host rebooted into {TREE_V1} (boot id {BOOT_ID_1} → {BOOT_ID_2}): done, no second reboot" \
        in rerun.stderr
    assert len(logind.called("RebootWithFlags")) == 1
    state = state_of(host_root, "os")
    assert state["pending_reboot"] is None
    assert state["current"] == TREE_V1


def test_a_sysext_plan_job_links_the_extension_and_refreshes_sysext(plans, payloads, host_root, tmp_path,
                                                                   system_bus):
    if not Path("/dev/loop-control").exists():
        pytest.skip("reading a sysext image needs loop devices (/dev/loop-control)")
    systemd = system_bus.start("systemd_manager")
    image = payloads.get("sysext", SYSEXT_V1)
    # The scratch host root is not the root of PID 1's mount namespace here, as it is on a node: the container's
    # own namespace shows the extension the systemd double merged under /host.
    job = Job(plans["sysext-node-tools"], host_root, tmp_path / "job",
              {"localhost/hoist-sysext": image.rsplit(":", 1)[0]},
              extra_env={"HOIST_HOST_MOUNT_NAMESPACE": "/proc/self/ns/mnt"})
    result = job.run()
    assert result.returncode == 0, result
    assert "health: sysext:/etc/extensions/node-tools.raw passed" in result.stderr
    assert "node-tools: the extension-release of /payload/node-tools.raw matches the host's os-release" in result.stderr
    link = host_root / "etc/extensions/node-tools.raw"
    assert os.readlink(link) == f"/var/lib/hoist/node-tools/node-tools-{SYSEXT_V1}.raw"
    assert host_read(host_root, "/etc/extensions/node-tools.raw") == image_file(image, "/payload/node-tools.raw")
    assert systemd.called("ReloadOrRestartUnit") == ['ReloadOrRestartUnit "systemd-sysext.service" "replace"']


def test_a_sysext_for_another_os_is_refused(plans, payloads, host_root, tmp_path):
    if not Path("/dev/loop-control").exists():
        pytest.skip("reading a sysext image needs loop devices (/dev/loop-control)")
    (host_root / "etc/os-release").write_text("ID=fedora\nVERSION_ID=40\n")
    image = payloads.get("sysext", SYSEXT_V1)
    job = Job(plans["sysext-node-tools"], host_root, tmp_path / "job",
              {"localhost/hoist-sysext": image.rsplit(":", 1)[0]})
    result = job.run()
    assert result.returncode == 5, result
    assert "extension 'node-tools' does not match the host (/payload/node-tools.raw:usr/lib/extension-release.d/" \
           "extension-release.node-tools): ID is 'debian', the host's ID is 'fedora'" in result.stderr
    assert not os.path.lexists(host_root / "etc/extensions/node-tools.raw")


# ------------------------------------------------------------------ (b) the prepare container of a Plan

def agent_job(plans, payloads, host_root, tmp_path, server, account):
    """The k3s agent Plan's Job on a node that get.k3s.io installed v1.29.5+k3s1 on, reaching the (fake) API
    server as `account`."""
    fake_k3s(host_root, tmp_path, "v1.29.5+k3s1")
    image = payloads.get("k3s", K3S_V1)
    return Job(plans["k3s-agent"], host_root, tmp_path / "job", {"localhost/hoist-k3s": image.rsplit(":", 1)[0]},
               kubernetes=(server.host, server.port), service_account=account)


def test_the_agent_plans_prepare_container_waits_for_the_server_plan_then_stages(plans, payloads, cluster, server,
                                                                                 pki, host_root, tmp_path):
    account = make_service_account(tmp_path / "sa", pki["ca"], "token-1", "system-upgrade")
    job = agent_job(plans, payloads, host_root, tmp_path, server, account)
    # The payload image, SUC's tag appended, as for the upgrade container.
    assert job.image("prepare") == job.image("upgrade") == payloads.get("k3s", K3S_V1)
    assert job.args("prepare") == ["stage", "--manifest=/payload/hoist.json", "--wait-for-plan=k3s-server",
                                   "--node-version=v1.30.1-k3s1", "--wait-timeout=1200", "--lock-timeout=60"]
    put_server_plan(cluster)
    pod = job.start("prepare")
    wait_for_watches(cluster, resource="nodes", timeout=60)
    assert pod.process.poll() is None, pod.wait()
    assert not (host_root / "var/lib/hoist/k3s" / K3S_V1).exists()  # nothing staged while the servers are not done
    emulator = suc(cluster, concurrency=2, job_seconds=0.3).start()
    pod.wait(timeout=60)
    emulator.join()
    assert pod.returncode == 0, pod
    # In-cluster: the API server from the env, the namespace from the service account.
    assert f"waiting for plan 'k3s-server' in namespace 'system-upgrade' on '{server.host}:{server.port}' " \
           "(timeout 1200 s, kubelet version v1.30.1-k3s1)" in pod.stderr
    assert "plan 'k3s-server' is complete" in pod.stderr
    assert "plan 'k3s-server': 3/3 nodes done at hash" in pod.stderr
    # Then staged beside the installed k3s, which stays current until the upgrade container switches.
    assert pod.stderr.index("plan 'k3s-server' is complete") < pod.stderr.index(f"k3s: staged {K3S_V1} in ")
    assert state_of(host_root, "k3s")["staged"]["version"] == K3S_V1
    assert not os.path.islink(host_root / "usr/local/bin/k3s")
    assert "token-1" not in pod.stderr + pod.stdout
    # In the pod's own identity: the service account's token, nothing else.
    assert {r["token"] for r in cluster.requests} == {"token-1"}


def test_prepare_in_the_image_with_a_refused_token_fails_naming_the_request(plans, payloads, cluster, server, pki,
                                                                             host_root, tmp_path):
    account = make_service_account(tmp_path / "sa", pki["ca"], SA_TOKEN, "system-upgrade")  # not the cluster's
    job = agent_job(plans, payloads, host_root, tmp_path, server, account)
    result = job.run("prepare", timeout=60)
    assert result.returncode == 1, result
    assert "failed to list plans.upgrade.cattle.io in namespace 'system-upgrade'" in result.stderr
    assert "401 Unauthorized" in result.stderr
    assert SA_TOKEN not in result.stderr + result.stdout


def test_the_agent_plans_prepare_container_fails_at_once_when_the_server_plan_failed(plans, payloads, cluster,
                                                                                     server, pki, host_root,
                                                                                     tmp_path):
    # It waited out its whole --timeout=1200 after SUC had given up on the server Plan, said only "nodes not done",
    # and wrote no termination message; SUC then started a second pod that waited again.
    account = make_service_account(tmp_path / "sa", pki["ca"], "token-1", "system-upgrade")
    job = agent_job(plans, payloads, host_root, tmp_path, server, account)
    put_server_plan(cluster)
    pod = job.start("prepare")
    wait_for_watches(cluster, resource="plans", timeout=60)
    # The server Plan's Job on s1 fails: its deadline passes while its pods fail.
    emulator = suc(cluster, job_seconds=0.5, failing={"s1"}, deadline=2).start()
    started = time.monotonic()
    pod.wait(timeout=120)
    emulator.join()
    assert pod.returncode == 1, pod
    assert time.monotonic() - started < 60
    job_name = emulator.job_name("s1", cluster.get(PLAN_API, SERVER_PLAN, NAMESPACE)["status"]["latestHash"])
    error = (f"plan 'k3s-server' in namespace 'system-upgrade' has failed: system-upgrade-controller says: Job "
             f"system-upgrade/{job_name} failed on Node s1: DeadlineExceeded: Job was active longer than specified "
             "deadline")
    assert error in pod.stderr
    assert parse_termination(job.termination_log.read_text()) == termination("stage", 1, error)
    assert not (host_root / "var/lib/hoist/k3s" / K3S_V1).exists()  # nothing staged


def test_prepare_by_hand_with_a_kubeconfig_naming_the_server_by_host_name(hoist_image, cluster, server, pki,
                                                                          tmp_path):
    # The static binary resolves names in an image without any NSS module: /etc/hosts and DNS.
    config = write_kubeconfig(tmp_path / "kubeconfig", server.url.replace("127.0.0.1", "localhost"), pki["ca"],
                              token="token-1", namespace="system-upgrade")
    put_server_plan(cluster)
    suc(cluster, job_seconds=0.2).start(delay=1.0)
    result = podman("run", "--rm", "--pull=never", "--net=host", "-v", f"{tmp_path}:{tmp_path}:ro",
                    "-v", f"{pki['ca'].parent}:{pki['ca'].parent}:ro", hoist_image,
                    "prepare", "k3s-server", "--kubeconfig", config, "--timeout", "60", check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"on 'localhost:{server.port}'" in result.stderr
    assert "plan 'k3s-server' is complete" in result.stderr


# ------------------------------------------------------------------ (c) by hand, (d) rollback

def test_by_hand_upgrade_then_rollback_with_the_readme_line(payloads, hoist_image, host_root):
    v1 = payloads.get("tree", TREE_V1, epoch=1717200000)
    v2 = payloads.get("tree", TREE_V2, epoch=1719792000)
    first = manual(v1, host_root, "upgrade", "--manifest", "/payload/hoist.json")
    assert first.returncode == 0, first
    second = manual(v2, host_root, "upgrade", "--manifest", "/payload/hoist.json")
    assert second.returncode == 0, second
    assert f"gate: os: {TREE_V1} -> {TREE_V2} (upgrade)" in second.stderr
    assert re.search(r"os: staged 2024\.7\.0 in [0-9.]+ s: .*, 1 unchanged,", second.stderr), second.stderr
    os_dir = host_root / "opt/hoist-os"
    assert os.readlink(os_dir / "current") == TREE_V2
    assert os.readlink(os_dir / "previous") == TREE_V1
    assert (os_dir / "current/etc/os-release").read_text().endswith(f"VERSION_ID={TREE_V2}\n")
    assert (os_dir / "current/bin/os-version").read_bytes() == image_file(v2, "/payload/os/bin/os-version")
    assert os.readlink(os_dir / "current/bin/version") == "os-version"
    # The firmware did not change: the new version hard-links the old one's.
    blob_v1, blob_v2 = os_dir / TREE_V1 / "lib/firmware/blob.bin", os_dir / TREE_V2 / "lib/firmware/blob.bin"
    assert os.stat(blob_v1).st_ino == os.stat(blob_v2).st_ino
    assert blob_v2.read_bytes() == image_file(v2, "/payload/os/lib/firmware/blob.bin")

    status = manual(hoist_image, host_root, "status", "--json")
    assert status.returncode == 0, status
    assert TREE_V2 in status.stdout

    # (d) rollback, with hoist's own image: no payload needed.
    back = manual(hoist_image, host_root, "rollback", "--component", "os")
    assert back.returncode == 0, back
    assert f"os: rolled back from {TREE_V2} to {TREE_V1}" in back.stderr
    assert os.readlink(os_dir / "current") == TREE_V1
    assert (os_dir / "current/etc/os-release").read_text().endswith(f"VERSION_ID={TREE_V1}\n")
    assert state_of(host_root, "os")["current"] == TREE_V1
    # The v2 payload again: the version rolled back from is quarantined (exit 3, nothing changes) until the
    # operator lets it in again.
    refused = manual(v2, host_root, "upgrade", "--manifest", "/payload/hoist.json")
    assert refused.returncode == 3, refused
    assert f"refusing {TREE_V2}: it is quarantined since" in refused.stderr
    assert os.readlink(os_dir / "current") == TREE_V1
    forward = manual(v2, host_root, "upgrade", "--manifest", "/payload/hoist.json", "--allow-quarantined")
    assert forward.returncode == 0, forward
    assert os.readlink(os_dir / "current") == TREE_V2


def test_rollback_of_a_k3s_plan_through_the_image_restarts_k3s(plans, payloads, hoist_image, host_root, tmp_path,
                                                               system_bus, signing_key, cluster, server, pki):
    systemd = system_bus.start("systemd_manager")
    release_key = {"release.pem": signing_key["public"].read_bytes()}
    plan = signed_variant(plans["k3s-server"])
    (host_root / "usr/local/bin").mkdir(parents=True)
    for index, version in enumerate((K3S_V1, K3S_V2)):
        image = payloads.get("k3s", version, signed=True)
        node_at(cluster, version)
        job = Job(with_version(plan, version), host_root, tmp_path / f"job{index}",
                  {"localhost/hoist-k3s": image.rsplit(":", 1)[0]}, secrets={"hoist-release-key": release_key},
                  **in_cluster(server, pki, tmp_path / f"sa{index}"))
        pod = job.run_pod(timeout=240)  # the unit check waits 30 s after the restart
        assert [c.returncode for c in pod] == [0, 0], pod
    assert os.readlink(host_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{K3S_V2}/k3s"
    # The README's one-off rollback Plan: hoist's own image, tagged, no payload.
    rollback_plan = {"metadata": {"name": "k3s-rollback", "namespace": "system-upgrade"},
                     "spec": {"version": K3S_V1, "serviceAccountName": "hoist",
                              "upgrade": {"image": hoist_image,
                                          "args": ["rollback", "--component=k3s", "--restart=k3s.service"]}}}
    back = Job(rollback_plan, host_root, tmp_path / "rollback", {"localhost/hoist": hoist_image.rsplit(":", 1)[0]})
    assert back.image("upgrade") == hoist_image
    back = back.run()
    assert back.returncode == 0, back
    assert f"k3s: rolled back from {K3S_V2} to {K3S_V1}" in back.stderr
    assert os.readlink(host_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{K3S_V1}/k3s"
    assert b"k3s version v1.30.1+k3s1" in host_read(host_root, "/usr/local/bin/k3s")
    assert systemd.called("RestartUnit") == ['RestartUnit "k3s.service" "replace"'] * 3
    # The v2 Plan's Job, run again after the rollback (a retry): v2 is quarantined, so the rollback sticks
    # (exit 3 from the prepare container, before any cordon; k3s stays on v1, no restart).
    image = payloads.get("k3s", K3S_V2, signed=True)
    (again,) = Job(with_version(plan, K3S_V2), host_root, tmp_path / "job-again",
                   {"localhost/hoist-k3s": image.rsplit(":", 1)[0]}, secrets={"hoist-release-key": release_key},
                   **in_cluster(server, pki, tmp_path / "sa-again")).run_pod()
    assert again.returncode == 3, again
    assert f"refusing {K3S_V2}: it is quarantined since" in again.stderr
    assert os.readlink(host_root / "usr/local/bin/k3s") == f"/var/lib/hoist/k3s/{K3S_V1}/k3s"
    assert systemd.called("RestartUnit") == ['RestartUnit "k3s.service" "replace"'] * 3
