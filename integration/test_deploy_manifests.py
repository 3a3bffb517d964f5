"""The manifests under deploy/: every Plan validates against SUC's Plan CRD,
the kustomize output is what we mean to ship, and the RBAC is exactly what
`hoist prepare` uses (checked against the requests it makes to the fake server)."""

import base64
import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

pytest.register_assert_rewrite("prepare_harness")  # before its import: it is also a plugin
import yaml

from conftest import SANITIZER_ENV, run_hoist
from fake_apiserver import NODE_API, Cluster, FakeApiServer, munge, write_kubeconfig
from known_secrets import SA_TOKEN
from payloads import make_tree, state_of
from prepare_harness import (HOIST_BIN, NAMESPACE, SERVER_PLAN, Prepare, can_fake_service_account,
                             make_service_account, put_server_plan, start_prepare, suc)
from suc_emulator import SucEmulator
from test_node_events import NODE, in_pod
from test_node_events import tree_args as node_event_tree_args

pytest_plugins = ["prepare_harness"]  # the fixtures: pki, cluster

REPO = Path(__file__).resolve().parent.parent
DEPLOY = REPO / "deploy"
# shared/ is beside the repository; HOIST_REFERENCE_DIR names it for a checkout elsewhere (a git worktree).
REFERENCE = Path(os.environ.get("HOIST_REFERENCE_DIR") or REPO.parent / "shared/reference") / \
    "system-upgrade-controller"
# The Plan CRD of each SUC the Plans are checked against (docs/suc.md, "Tested versions"): v0.20's, and v0.15.3's
# as it created it on a real cluster, whose drain.timeout is an integer count of nanoseconds only.
CRDS = {"v0.20": REFERENCE / "upgrade.cattle.io_plans.yaml", "v0.15.3": REFERENCE / "upgrade.cattle.io_plans-v0.15.3.yaml"}
SUC_ROLES = REFERENCE / "clusterrole.yaml"
OVERLAYS = ["hoist", "k3s", "sysext", "tree"]
EXPECTED_PLANS = {"hoist": {"hoist"}, "k3s": {"k3s-server", "k3s-agent"}, "sysext": {"sysext-node-tools"},
                  "tree": {"os-tree"}}
# deploy/k3s-upstream: ../k3s's Plans patched to run from rancher/k3s-upgrade with the host's hoist (the hoist Plan
# installs it). Checked on its own below: its Plans are k3s's under the same names.
UPSTREAM = "k3s-upstream"
# SUC's namespace: its own manifests create it, the overlays use it.
SUC_NAMESPACE = "system-upgrade"
PROJECT_VERSION = re.search(r"^project\(hoist VERSION (\S+?)[ )]", (REPO / "CMakeLists.txt").read_text(), re.M)[1]
# hoist's own image, as scripts/image tags it.
# Where the API server keeps events about cluster-scoped objects such as Nodes.
EVENT_NAMESPACE = "default"

needs_kubectl = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl (kustomize) not installed")


def render(path):
    out = subprocess.run(["kubectl", "kustomize", str(path)], capture_output=True, text=True, check=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def strict(schema):
    """The CRD schema with unknown fields refused: the API server would prune
    them silently (a typo like `jobActiveDeadlineSeconds` would just vanish)."""
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if (node.get("type") == "object" and "properties" in node and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(schema)
    # metadata is validated by the API server itself, not by this schema.
    schema["properties"]["metadata"] = {"type": "object"}
    return schema


def load_schema(crd_path):
    if not crd_path.exists():
        pytest.skip(f"{crd_path} not found (shared/ is beside the repository)")
    crd = next(doc for doc in yaml.safe_load_all(crd_path.read_text()) if doc)
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    return strict(version["schema"]["openAPIV3Schema"])


@pytest.fixture(scope="module", params=sorted(CRDS))
def plan_schema(request):
    """Each SUC's Plan schema in turn: every test that takes it runs against both."""
    return load_schema(CRDS[request.param])


# What SUC since v0.16.3 reads spec.drain.timeout into: Kubernetes' IntOrString, whose integer is 32 bits, so a
# Plan whose drain.timeout is a larger integer passes the schema and cannot be read by the controller at all.
INT32_MAX = 2**31 - 1


def suc_reads(plan, suc):
    """The problems controller `suc` would have reading `plan` beyond its CRD's schema, or []."""
    timeout = (plan["spec"].get("drain") or {}).get("timeout")
    if suc != "v0.15.3" and isinstance(timeout, int) and timeout > INT32_MAX:
        return [f"spec.drain.timeout {timeout} does not fit SUC's 32-bit IntOrString (v0.16.3 and later)"]
    return []


@pytest.fixture(scope="module")
def rendered():
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl (kustomize) not installed")
    return {name: render(DEPLOY / name) for name in OVERLAYS}


def overlay_docs(name):
    """An overlay's own resources as its kustomization lists them, read without
    kustomize (the component only adds labels), so the RBAC checks run anywhere."""
    kustomization = yaml.safe_load((DEPLOY / name / "kustomization.yaml").read_text())
    return [doc for resource in kustomization["resources"]
            for doc in yaml.safe_load_all((DEPLOY / name / resource).read_text()) if doc]


def patch_files():
    """The files kustomizations name as patches (resolved paths): parts of Plans, checked as the overlay renders
    them."""
    return {(path.parent / patch["path"]).resolve() for path in DEPLOY.rglob("kustomization.yaml")
            for patch in yaml.safe_load(path.read_text()).get("patches", []) if "path" in patch}


def plan_files():
    return sorted(p for p in DEPLOY.rglob("*.yaml") if p.resolve() not in patch_files() and
                  any(d.get("kind") == "Plan" for d in yaml.safe_load_all(p.read_text()) if d))


@pytest.mark.parametrize("path", plan_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_shipped_plan_validates_against_the_crd(path, plan_schema):
    plans = [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "Plan"]
    assert plans
    for plan in plans:
        jsonschema.validate(plan, plan_schema, cls=jsonschema.Draft7Validator)
        assert [problem for suc in CRDS for problem in suc_reads(plan, suc)] == []
        assert plan["apiVersion"] == "upgrade.cattle.io/v1"
        assert plan["spec"].get("version") or plan["spec"].get("channel"), "SUC cannot resolve a Plan without either"


def test_the_strict_schema_catches_a_typo(plan_schema):
    plan = {"apiVersion": "upgrade.cattle.io/v1", "kind": "Plan", "metadata": {"name": "x"},
            "spec": {"version": "v1", "upgrade": {"image": "i"}, "jobActiveDeadlineSeconds": 5}}
    with pytest.raises(jsonschema.ValidationError, match="jobActiveDeadlineSeconds"):
        jsonschema.validate(plan, plan_schema, cls=jsonschema.Draft7Validator)
    del plan["spec"]["jobActiveDeadlineSeconds"]
    plan["spec"]["nodeSelector"] = {"matchExpressions": [{"key": "k"}]}  # operator is required
    with pytest.raises(jsonschema.ValidationError, match="operator"):
        jsonschema.validate(plan, plan_schema, cls=jsonschema.Draft7Validator)


def with_drain_timeout(plan, timeout):
    changed = copy.deepcopy(plan)
    changed["spec"]["drain"]["timeout"] = timeout
    return changed


# docs/suc.md's patch for an overlay that wants a drain timeout, in each controller's form.
DRAIN_TIMEOUT_PATCHES = {"v0.20": "300s", "v0.15.3": 300_000_000_000}


@pytest.mark.parametrize("suc", sorted(CRDS))
def test_no_drain_timeout_works_with_both_controllers_and_the_documented_patch_works_with_its_own(suc):
    # The shipped Plans set none; an overlay adds the one its controller reads (docs/suc.md).
    schemas = {name: load_schema(path) for name, path in CRDS.items()}
    other = next(name for name in CRDS if name != suc)
    drained = [p for p in plans_in_files() if "drain" in p["spec"]]
    assert {p["metadata"]["name"] for p in drained} == {"k3s-agent", "os-tree"}
    for plan in drained:
        assert "timeout" not in plan["spec"]["drain"], "no form of drain.timeout works with both controllers"
        patched = with_drain_timeout(plan, DRAIN_TIMEOUT_PATCHES[suc])
        jsonschema.validate(patched, schemas[suc], cls=jsonschema.Draft7Validator)
        assert suc_reads(patched, suc) == []
        assert seconds(DRAIN_TIMEOUT_PATCHES[suc]) == 300
    # Each form fails with the other controller: v0.15.3's schema refuses the string; v0.20's takes the integer,
    # and its controller then cannot read the Plan.
    if other == "v0.15.3":
        with pytest.raises(jsonschema.ValidationError, match="is not of type 'integer'"):
            jsonschema.validate(patched, schemas[other], cls=jsonschema.Draft7Validator)
    else:
        jsonschema.validate(patched, schemas[other], cls=jsonschema.Draft7Validator)
        assert suc_reads(patched, other) == [
            "spec.drain.timeout 300000000000 does not fit SUC's 32-bit IntOrString (v0.16.3 and later)"]
    # The docs carry both patches.
    text = (REPO / "docs/suc.md").read_text()
    assert "timeout: 300s" in text and "timeout: 300000000000" in text


@needs_kubectl
def test_the_documented_drain_timeout_patch_renders_in_each_controllers_form(tmp_path):
    # docs/suc.md's overlay patch, as written there, applied to the drained Plans with kustomize.
    text = (REPO / "docs/suc.md").read_text()
    block = re.search(r"```yaml\n(# SUC v0\.16\.3 and later\n.*?)```", text, re.S)[1]
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    for suc, value in (("v0.20", "300s"), ("v0.15.3", "300000000000")):
        overlay = tmp_path / f"overlay-{suc}"
        overlay.mkdir()
        (overlay / "kustomization.yaml").write_text("resources: [../deploy/k3s, ../deploy/tree]\n" +
                                                    block.replace("value: 300s", f"value: {value}"))
        plans = by_kind(render(overlay))["Plan"]
        schema = load_schema(CRDS[suc])
        for name, plan in plans.items():
            jsonschema.validate(plan, schema, cls=jsonschema.Draft7Validator)
            assert suc_reads(plan, suc) == []
            if name in ("k3s-agent", "os-tree"):
                assert seconds(plan["spec"]["drain"]["timeout"]) == 300, (suc, name)
            else:
                assert "timeout" not in (plan["spec"].get("drain") or {}), name


def documented_overlay(document, name, tmp_path):
    """The overlay `document` writes with `cat > overlays/NAME/kustomization.yaml <<'EOF'`, as written there, beside a
    copy of deploy/ (kustomize loads nothing outside an overlay's root but directories beside it)."""
    text = document.read_text()
    block = re.search(rf"cat > overlays/{name}/kustomization\.yaml <<'EOF'\n(.*?)\nEOF\n", text, re.S)[1]
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    overlay = tmp_path / "overlays" / name
    overlay.mkdir(parents=True)
    (overlay / "kustomization.yaml").write_text(block + "\n")
    return overlay


@needs_kubectl
def test_the_readme_quick_start_overlay_renders_the_plans_with_its_images_and_version(tmp_path):
    # README's step 3, as written there: every image the Plans run is the operator's, both Plans name the version.
    plans = by_kind(render(documented_overlay(REPO / "README.md", "my-k3s", tmp_path)))["Plan"]
    assert sorted(plans) == ["k3s-agent", "k3s-server"]
    for name, plan in plans.items():
        assert plan["spec"]["version"] == "v1.30.1+k3s1", name
        containers = [plan["spec"]["upgrade"]] + ([plan["spec"]["prepare"]] if "prepare" in plan["spec"] else [])
        for container in containers:
            assert container["image"] == "registry.example/hoist-k3s", (name, container["image"])


def plans_in_files():
    return [d for path in plan_files() for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "Plan"]


def by_kind(docs):
    found = {}
    for doc in docs:
        found.setdefault(doc["kind"], {})[doc["metadata"]["name"]] = doc
    return found


def plans_of(rendered):
    return {name: plan for docs in rendered.values() for name, plan in by_kind(docs)["Plan"].items()}


def test_rendered_output_is_what_we_ship(rendered, plan_schema):
    for name, docs in rendered.items():
        kinds = by_kind(docs)
        assert sorted((d["kind"], d["metadata"]["name"]) for d in docs) == \
            sorted((d["kind"], d["metadata"]["name"]) for d in overlay_docs(name))
        assert set(kinds["Plan"]) == EXPECTED_PLANS[name]
        for binding in list(kinds.get("RoleBinding", {}).values()) + list(kinds.get("ClusterRoleBinding", {}).values()):
            ref = binding["roleRef"]
            assert ref["name"] in kinds[ref["kind"]]
            for subject in binding["subjects"]:
                assert subject["kind"] == "ServiceAccount" and subject["namespace"] == SUC_NAMESPACE
                assert subject["name"] in kinds["ServiceAccount"]
        for plan in kinds["Plan"].values():
            jsonschema.validate(plan, plan_schema, cls=jsonschema.Draft7Validator)
            assert [problem for suc in CRDS for problem in suc_reads(plan, suc)] == []
            assert plan["metadata"]["namespace"] == SUC_NAMESPACE
            assert plan["spec"]["upgrade"]["image"].startswith("localhost/hoist")
            # SUC appends the version as the tag of an untagged upgrade image.
            assert ":" not in plan["spec"]["upgrade"]["image"]
            assert plan["spec"]["upgrade"]["args"][0] == "upgrade"


def test_no_overlay_declares_suc_namespace_and_the_component_adds_it(rendered, tmp_path):
    # `kubectl delete -k deploy/k3s` deletes what the overlay declares: never
    # SUC's namespace, and SUC in it.
    for name, docs in rendered.items():
        assert "Namespace" not in by_kind(docs), name
        assert {d["metadata"].get("namespace") for d in docs if d["kind"] in ("Plan", "ServiceAccount", "Role",
                                                                             "RoleBinding")
                and not d["metadata"]["name"].endswith(("-events", "-kured-lock"))} == {SUC_NAMESPACE}
        # kured's lock is an annotation on kured's DaemonSet, in kured's namespace.
        assert {d["metadata"].get("namespace") for d in docs if d["kind"] in ("Role", "RoleBinding")
                and d["metadata"]["name"].endswith("-kured-lock")} <= {"kube-system"}
        # Events about a Node can only be created in "default" (the API server refuses another namespace).
        assert {d["metadata"].get("namespace") for d in docs if d["kind"] in ("Role", "RoleBinding")
                and d["metadata"]["name"].endswith("-events")} == {EVENT_NAMESPACE}
    # A standalone install adds it with the optional component.
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text("resources: [../deploy/k3s]\ncomponents: [../deploy/namespace]\n")
    namespaces = by_kind(render(overlay))["Namespace"]
    assert set(namespaces) == {SUC_NAMESPACE}
    labels = namespaces[SUC_NAMESPACE]["metadata"]["labels"]
    for mode in ("enforce", "audit", "warn"):
        assert labels[f"pod-security.kubernetes.io/{mode}"] == "privileged"
    assert labels["app.kubernetes.io/name"] == "hoist"
    assert labels["app.kubernetes.io/managed-by"] == "kustomize"


def test_every_object_carries_the_app_labels(rendered):
    for name, docs in rendered.items():
        for doc in docs:
            labels = doc["metadata"].get("labels", {})
            assert labels.get("app.kubernetes.io/name") == "hoist", (name, doc["kind"], doc["metadata"]["name"])
            assert labels.get("app.kubernetes.io/instance") == f"hoist-{name}", (name, doc["metadata"]["name"])
            assert labels.get("app.kubernetes.io/managed-by") == "kustomize", (name, doc["metadata"]["name"])
            # SUC copies a Plan's labels onto its Jobs, except cattle.io/ keys.
            assert not [key for key in labels if "cattle.io/" in key]
        # Labels, not selectors: kustomize must not have touched the nodeSelectors.
        for plan in by_kind(docs)["Plan"].values():
            source = by_kind(overlay_docs(name))["Plan"][plan["metadata"]["name"]]
            assert plan["spec"]["nodeSelector"] == source["spec"]["nodeSelector"]


# ------------------------------------------------------------------ which nodes, which taints

def selects(selector, labels):
    """A metav1.LabelSelector applied to a node's labels, as SUC applies a Plan's."""
    for key, value in selector.get("matchLabels", {}).items():
        if labels.get(key) != value:
            return False
    for requirement in selector.get("matchExpressions", []):
        key, operator, values = requirement["key"], requirement["operator"], requirement.get("values", [])
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


# Each Plan's opt-in label, and the labels that make a node one of its kind.
OPT_IN = {"hoist": ("k3s-upgrade", {}),
          "k3s-server": ("k3s-upgrade", {"node-role.kubernetes.io/control-plane": "true"}),
          "k3s-agent": ("k3s-upgrade", {}),
          "sysext-node-tools": ("hoist-sysext", {}),
          "os-tree": ("hoist-os", {})}


def test_every_plan_is_opt_in_in_suc_form(rendered):
    plans = plans_of(rendered)
    assert set(plans) == set(OPT_IN)
    for name, plan in plans.items():
        key, role = OPT_IN[name]
        selector = plan["spec"]["nodeSelector"]
        expressions = selector["matchExpressions"]
        # SUC's own k3s Plans: the key must exist, and disabled or false opt out.
        assert {"key": key, "operator": "Exists"} in expressions, name
        assert {"key": key, "operator": "NotIn", "values": ["disabled", "false"]} in expressions, name
        assert not selects(selector, {**role}), f"{name} selects a node that did not opt in"
        for value in ("disabled", "false"):
            assert not selects(selector, {**role, key: value}), f"{name} selects {key}={value}"
        for value in ("true", "enabled", "server", ""):
            assert selects(selector, {**role, key: value}), f"{name} skips {key}={value!r}"
    # Servers and agents are disjoint: a server (whatever the role label's value) is the server Plan's only.
    for role_value in ("true", ""):
        server = {"k3s-upgrade": "true", "node-role.kubernetes.io/control-plane": role_value}
        assert selects(plans["k3s-server"]["spec"]["nodeSelector"], server)
        assert not selects(plans["k3s-agent"]["spec"]["nodeSelector"], server)
    agent = {"k3s-upgrade": "true"}
    assert selects(plans["k3s-agent"]["spec"]["nodeSelector"], agent)
    assert not selects(plans["k3s-server"]["spec"]["nodeSelector"], agent)


def tolerates(tolerations, taint):
    """Kubernetes' rule: a toleration matches a taint's key (an empty key with
    Exists matches every key), its value (Equal) and its effect (empty: every effect)."""
    for toleration in tolerations:
        if toleration.get("key", "") not in ("", taint["key"]):
            continue
        if not toleration.get("key") and toleration.get("operator") != "Exists":
            continue
        if toleration.get("operator", "Equal") == "Equal" and toleration.get("value", "") != taint.get("value", ""):
            continue
        if toleration.get("effect", "") not in ("", taint["effect"]):
            continue
        return True
    return False


# The taints that servers carry: kubeadm's and k3s's control-plane taints (the
# old master one too), k3s's CriticalAddonsOnly (--node-taint), RKE2's etcd-only nodes.
SERVER_TAINTS = [
    {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
    {"key": "node-role.kubernetes.io/control-plane", "value": "true", "effect": "NoSchedule"},
    {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"},
    {"key": "node-role.kubernetes.io/master", "value": "true", "effect": "NoSchedule"},
    {"key": "CriticalAddonsOnly", "value": "true", "effect": "NoExecute"},
    {"key": "CriticalAddonsOnly", "value": "true", "effect": "NoSchedule"},
    {"key": "node-role.kubernetes.io/etcd", "value": "true", "effect": "NoExecute"},
]


def test_the_server_plan_tolerates_the_control_plane_taints(rendered):
    plans = plans_of(rendered)
    # SUC adds only the unschedulable toleration to the Plan's own.
    tolerations = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    tolerations += plans["k3s-server"]["spec"].get("tolerations", [])
    for taint in SERVER_TAINTS:
        assert tolerates(tolerations, taint), f"k3s-server's Job never schedules on a server tainted {taint}"
    # Exactly these keys: no blanket toleration of every taint (NoExecute of a failing node, say).
    assert {t.get("key") for t in tolerations[1:]} == {t["key"] for t in SERVER_TAINTS}
    assert not tolerates(tolerations, {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"})


# ------------------------------------------------------------------ exclusive, and the time budget

def option(args, name):
    """The value of `--name=V` or `--name V` in a container's args, or None;
    the last one wins, as in hoist's parser."""
    value = None
    for index, arg in enumerate(args):
        if arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
        elif arg == name and index + 1 < len(args):
            value = args[index + 1]
    return value


def test_plans_that_restart_k3s_or_reboot_are_exclusive(rendered):
    plans = plans_of(rendered)
    exclusive = set()
    for name, plan in plans.items():
        args = plan["spec"]["upgrade"]["args"]
        restarts = option(args, "--restart") is not None
        reboots = option(args, "--reboot") not in (None, "never")
        if restarts or reboots:
            exclusive.add(name)
        # Two of them never run on one node at once: SUC's anti-affinity between exclusive Jobs.
        assert plan["spec"].get("exclusive", False) == (restarts or reboots), name
    assert exclusive == {"k3s-server", "k3s-agent", "os-tree"}


def seconds(duration):
    """drain.timeout as SUC passes it to kubectl: an integer is nanoseconds, a
    string a Go duration (300s, 5m, 1h30m)."""
    if isinstance(duration, int):
        return duration / 1e9
    units = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", duration)
    assert parts and "".join(n + u for n, u in parts) == duration, f"not a Go duration: {duration!r}"
    return sum(float(n) * units[u] for n, u in parts)


# What no option of the Plan bounds, per pod: image pulls, container starts,
# the cordon, hoist's own work on the payload.
SPARE = 120
# A server's embedded etcd asked for its health (--etcd-health=check): 10 s for the member list, then 5 s for each
# member's status, up to 7 members.
ETCD_HEALTH = 10 + 5 * 7
# A rebooting Plan: shutdown, boot and the kubelet starting the Job's next pod.
BOOT = 300
# What the deadline must leave a drain, which no timeout of its own bounds: evictions, and pods' graceful exits.
DRAIN = 300


def budget(plan):
    """The seconds a Plan's Job may need at worst, from its own settings; each
    wait must be stated in the Plan, not left to a default the Plan cannot see."""
    spec = plan["spec"]
    name = plan["metadata"]["name"]
    parts = {"spare": SPARE}
    if "prepare" in spec:
        prepare = spec["prepare"]["args"]
        if prepare[0] == "stage":
            # hoist stage: its lock, then the staging (hoist's own work, in the spare); with --wait-for-plan, the
            # wait first.
            lock = option(prepare, "--lock-timeout")
            assert lock is not None, f"{name}: hoist stage without --lock-timeout waits its default for the lock"
            parts["stage_lock"] = float(lock)
            if option(prepare, "--restart") is not None and option(prepare, "--etcd-health") != "skip":
                parts["stage_etcd_health"] = ETCD_HEALTH
            if option(prepare, "--wait-for-plan") is not None:
                timeout = option(prepare, "--wait-timeout")
                assert timeout is not None, f"{name}: --wait-for-plan without --wait-timeout waits its default"
                parts["prepare"] = float(timeout)
        else:
            timeout = option(prepare, "--timeout")
            assert timeout is not None, f"{name}: prepare without --timeout waits its default, whatever the deadline"
            parts["prepare"] = float(timeout)
    if "drain" in spec:
        # No drain.timeout (see test_no_drain_timeout_works_with_both_controllers...): the drain has what the
        # deadline leaves it, which must be at least this allowance.
        assert "timeout" not in spec["drain"], f"{name}: a drain.timeout works with one SUC only"
        parts["drain"] = DRAIN
    args = spec["upgrade"]["args"]
    lock = option(args, "--lock-timeout")
    assert lock is not None, f"{name}: no --lock-timeout"
    parts["lock"] = float(lock)
    # Each --restart unit, and systemd-sysext's reload after a sysext component.
    units = sum(1 for a in args if a == "--restart" or a.startswith("--restart="))
    units += spec["upgrade"]["image"] == "localhost/hoist-sysext"
    if units:
        restart = option(args, "--restart-timeout")
        assert restart is not None, f"{name}: no --restart-timeout"
        parts["restart"] = units * float(restart)
    if any(a == "--health-check" or a.startswith("--health-check=") for a in args):
        health = option(args, "--health-timeout")
        assert health is not None, f"{name}: --health-check without --health-timeout waits its default"
        parts["health"] = float(health)
        if "restart" in parts:
            # A version that fails its checks is switched back and its units restarted again.
            parts["restart_back"] = parts["restart"]
    datastore = option(args, "--datastore-timeout")
    if datastore is not None:
        # A server's snapshot before the switch (SQLite: the unit stopped first), and after failed checks the restore
        # (the unit stopped, the restore, then the checks once more on the old version): docs/datastore.md.
        parts["snapshot"] = float(datastore) + parts.get("restart", 0)
        if option(args, "--etcd-health") != "skip":
            parts["etcd_health"] = ETCD_HEALTH
        if "health" in parts:
            parts["restore"] = float(datastore) + parts.get("restart", 0) + parts["health"]
    if option(args, "--reboot") not in (None, "never"):
        reboot = option(args, "--reboot-timeout")
        assert reboot is not None, f"{name}: no --reboot-timeout"
        # The pod that reboots, the boot, then the Job's next pod, which runs
        # every container again and finds the version current.
        parts.update(reboot=float(reboot), boot=BOOT, rerun=sum(parts.values()))
    return sum(parts.values()), parts


def test_the_time_budget_adds_up(rendered):
    for name, plan in plans_of(rendered).items():
        deadline = plan["spec"].get("jobActiveDeadlineSecs")
        # Unset means SUC's controller default, which the Plan cannot see; 0 means no deadline.
        assert deadline and deadline > 0, name
        total, parts = budget(plan)
        assert total <= deadline, f"{name}: {parts} add up to {total} s, over its deadline of {deadline} s"
        if "prepare" in parts:
            # prepare's wait is what the deadline leaves: a prepare that
            # succeeds at the last moment still leaves drain and upgrade their time.
            assert total == deadline, f"{name}: prepare's wait should be {deadline - (total - parts['prepare'])}"
    plans = plans_of(rendered)
    assert budget(plans["k3s-agent"])[1] == {"spare": 120, "stage_lock": 60, "prepare": 1200, "drain": 300,
                                             "lock": 60, "restart": 120, "health": 300, "restart_back": 120}
    assert budget(plans["k3s-server"]) == (1650, {"spare": 120, "stage_lock": 60, "stage_etcd_health": 45,
                                                  "lock": 60, "restart": 120, "health": 300, "restart_back": 120,
                                                  "snapshot": 240, "restore": 540, "etcd_health": 45})
    # Its prepare step checks the same server's datastore (etcd's health included) before the cordon.
    prepare = plans["k3s-server"]["spec"]["prepare"]["args"]
    assert option(prepare, "--restart") == "k3s.service" and option(prepare, "--datastore-snapshot") == "take"
    # The server Plan snapshots its datastore before the switch, with a bound of its own.
    assert option(plans["k3s-server"]["spec"]["upgrade"]["args"], "--datastore-snapshot") == "take"
    assert budget(plans["os-tree"])[0] == 1680


def test_no_comment_says_skip_wait_for_delete_timeout_bounds_evictions():
    # kubectl's --skip-wait-for-delete-timeout skips pods deleted long ago; it
    # bounds no eviction (only the Job's deadline does).
    for path in DEPLOY.rglob("*.yaml"):
        assert "PodDisruptionBudgets for up to" not in path.read_text(), path


def test_the_agent_plan_prepares_by_waiting_for_the_server_plan(rendered):
    plans = by_kind(rendered["k3s"])["Plan"]
    server, agent = plans["k3s-server"], plans["k3s-agent"]
    assert agent["spec"]["prepare"]["args"][:2] == ["stage", "--manifest=/payload/hoist.json"]
    assert "--wait-for-plan=k3s-server" in agent["spec"]["prepare"]["args"]
    assert "--node-version=$(SYSTEM_UPGRADE_PLAN_LATEST_VERSION)" in agent["spec"]["prepare"]["args"]
    assert agent["spec"]["version"] == server["spec"]["version"]


def test_the_plans_that_cordon_or_drain_stage_in_prepare_with_the_upgrades_image_and_manifest(rendered):
    # docs/two-phase.md: a version hoist refuses is refused before SUC cordons or drains the node, and what passes
    # is staged before the drain. The sysext Plan neither cordons nor drains: one phase.
    staged = set()
    for plan in plans_of(rendered).values():
        spec = plan["spec"]
        if "drain" not in spec and not spec.get("cordon"):
            assert "prepare" not in spec, plan["metadata"]["name"]
            continue
        prepare, upgrade = spec["prepare"], spec["upgrade"]
        assert prepare["args"][0] == "stage"
        # The same payload image, untagged (SUC appends the Plan's version to both), and the same manifest.
        assert prepare["image"] == upgrade["image"] and ":" not in prepare["image"]
        assert option(prepare["args"], "--manifest") == option(upgrade["args"], "--manifest")
        # It writes the host: privileged, as SUC makes the upgrade container by itself.
        assert prepare["securityContext"] == {"privileged": True}
        staged.add(plan["metadata"]["name"])
    assert staged == {"k3s-server", "k3s-agent", "os-tree"}


# ------------------------------------------------------------------ deploy/k3s-upstream and deploy/hoist

# The k3s component as the payload image's manifest (images/k3s/payload) states it, given as flags in the upstream
# Plans; the sums are the release's own file from the Plan's Secret.
SUMS_DIR = "/run/system-upgrade/secrets/k3s-release-sums"
UPSTREAM_COMPONENT = ["--component=k3s", "--kind=file", "--source=/opt/k3s", "--destination=/usr/local/bin/k3s",
                      "--version-scheme=k3s", "--installed-version-from=exec:--version",
                      f"--sha256sums={SUMS_DIR}/sha256sum-amd64.txt"]


def without_containers(spec):
    return {k: v for k, v in spec.items() if k not in ("prepare", "upgrade", "secrets")}


@needs_kubectl
def test_the_upstream_plans_are_the_k3s_plans_run_from_rancher_k3s_upgrade_with_the_hosts_hoist(
        rendered, plan_schema, tmp_path):
    upstream = render(DEPLOY / UPSTREAM)
    ours = rendered["k3s"]
    # The same objects as deploy/k3s (its accounts and roles as they are), only the Plans' containers changed.
    assert sorted((d["kind"], d["metadata"]["name"]) for d in upstream) == \
        sorted((d["kind"], d["metadata"]["name"]) for d in ours)
    assert [d for d in upstream if d["kind"] != "Plan"] == [d for d in ours if d["kind"] != "Plan"]
    hoist_plan = by_kind(rendered["hoist"])["Plan"]["hoist"]
    hoist_args = hoist_plan["spec"]["upgrade"]["args"]
    # Where the hoist Plan puts hoist, and where its file component's link points (hoist's state directory).
    command = ["/host" + option(hoist_args, "--destination")]
    versions = "/var/lib/hoist/" + option(hoist_args, "--component")
    assert (command, versions) == (["/host/usr/local/bin/hoist"], "/var/lib/hoist/hoist")
    # The payload image's manifest, whose component the flags restate.
    recipe = subprocess.run([str(REPO / "images/k3s/payload"), str(tmp_path / "payload"), "v1.30.1+k3s1"],
                            capture_output=True, text=True, env={**os.environ, "HOIST_BIN": ""}, timeout=60)
    assert recipe.returncode == 0, recipe.stderr
    (component,) = json.loads((tmp_path / "payload/hoist.json").read_text())["components"]
    assert {"--component": component["name"], "--kind": component["kind"], "--destination": component["destination"],
            "--installed-version-from": component["installed_version_from"],
            "--version-scheme": json.loads((tmp_path / "payload/hoist.json").read_text())["version_scheme"]} == \
        {name: option(UPSTREAM_COMPONENT, name) for name in ("--component", "--kind", "--destination",
                                                              "--installed-version-from", "--version-scheme")}
    plans = by_kind(upstream)["Plan"]
    assert set(plans) == EXPECTED_PLANS["k3s"]
    for name, plan in plans.items():
        jsonschema.validate(plan, plan_schema, cls=jsonschema.Draft7Validator)
        assert [problem for suc in CRDS for problem in suc_reads(plan, suc)] == []
        theirs = by_kind(ours)["Plan"][name]
        assert without_containers(plan["spec"]) == without_containers(theirs["spec"]), name
        assert budget(plan) == budget(theirs), name
        assert plan["spec"]["secrets"] == [{"name": "k3s-release-sums", "path": SUMS_DIR}]
        for container in ("prepare", "upgrade"):
            mine, base = plan["spec"][container], theirs["spec"][container]
            # Untagged: SUC appends the munged version, rancher/k3s-upgrade's own tags.
            assert mine["image"] == "rancher/k3s-upgrade"
            assert mine["command"] == command
            assert mine["volumes"] == [{"name": "hoist", "source": versions, "destination": versions}]
            assert mine.get("securityContext") == base.get("securityContext")
            # hoist's arguments: the payload image's, the manifest's component given as flags.
            args = mine["args"]
            assert [a for a in args if a in UPSTREAM_COMPONENT] == UPSTREAM_COMPONENT, (name, container)
            assert [a for a in args if a not in UPSTREAM_COMPONENT] == \
                [a for a in base["args"] if a != "--manifest=/payload/hoist.json"], (name, container)


@needs_kubectl
def test_the_upstream_overlay_of_the_docs_renders_with_its_secret_version_and_mirror(tmp_path):
    # docs/upstream-images.md's overlay, as written there, beside a release's sum file.
    overlay = documented_overlay(REPO / "docs/upstream-images.md", "k3s-upstream", tmp_path)
    (overlay / "sha256sum-amd64.txt").write_text(f"{'a' * 64}  k3s\n")
    docs = render(overlay)
    (secret,) = by_kind(docs)["Secret"].values()
    assert (secret["metadata"]["name"], secret["metadata"]["namespace"]) == ("k3s-release-sums", SUC_NAMESPACE)
    assert base64.b64decode(secret["data"]["sha256sum-amd64.txt"]) == f"{'a' * 64}  k3s\n".encode()
    plans = by_kind(docs)["Plan"]
    assert sorted(plans) == ["k3s-agent", "k3s-server"]
    for name, plan in plans.items():
        assert plan["spec"]["version"] == "v1.30.1+k3s1", name
        assert {plan["spec"][c]["image"] for c in ("prepare", "upgrade")} == \
            {"registry.example/rancher/k3s-upgrade"}, name
        assert plan["spec"]["secrets"][0]["name"] == secret["metadata"]["name"]


# ------------------------------------------------------------------ images

def test_hoist_image_is_the_version_tag_everywhere(rendered):
    # A version tag, never :latest: a Job that runs :latest runs whatever was pushed last.
    for docs in rendered.values():
        for plan in by_kind(docs)["Plan"].values():
            for container in ("prepare", "upgrade"):
                if container in plan["spec"]:
                    assert not plan["spec"][container]["image"].endswith(":latest")
    # scripts/image tags v<version> (CMakeLists.txt's) and nothing else.
    script = (REPO / "scripts/image").read_text()
    assert re.search(r'^tag=v\$version$', script, re.M)
    assert not re.search(r'--tag "\$image:(latest|\$version)"', script)
    # README and the operator docs name hoist's image by the same tag (README also names the arm64 image that
    # HOIST_IMAGE_ARCHES=arm64 adds, the same tag with -arm64).
    mentions = re.findall(r"(?:localhost|registry\.example)/hoist:([\w.+-]+)",
                          "".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]))
    assert f"v{PROJECT_VERSION}" in mentions, mentions
    assert set(mentions) <= {f"v{PROJECT_VERSION}", f"v{PROJECT_VERSION}-arm64"}, mentions


@needs_kubectl
def test_an_overlay_can_replace_the_image_placeholders(tmp_path):
    # kustomize loads nothing outside an overlay's root but directories beside it.
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "resources: [../deploy/k3s]\n"
        "images:\n- {name: localhost/hoist-k3s, newName: registry.example/hoist-k3s}\n")
    plans = by_kind(render(overlay))["Plan"]
    # One name for both containers of both Plans: the prepare step stages from the payload image.
    assert {p["spec"][c]["image"] for p in plans.values() for c in ("prepare", "upgrade")} == \
        {"registry.example/hoist-k3s"}


# ------------------------------------------------------------------ RBAC

def account_rules(docs, account, purpose=None):
    """The rules bound to a Plan's ServiceAccount, in the shape the fake server
    enforces: a RoleBinding's rules in its namespace, a ClusterRoleBinding's
    cluster-wide. With `purpose`, only the roles named for it (hoist-PLAN-prepare,
    -drain, -cordon)."""
    kinds = by_kind(docs)
    rules = []
    for kind, namespaced in (("RoleBinding", True), ("ClusterRoleBinding", False)):
        for binding in kinds.get(kind, {}).values():
            if {"kind": "ServiceAccount", "name": account, "namespace": SUC_NAMESPACE} not in binding["subjects"]:
                continue
            ref = binding["roleRef"]
            if purpose and not ref["name"].endswith("-" + purpose):
                continue
            namespace = binding["metadata"]["namespace"] if namespaced else None
            rules += [dict(rule, namespace=namespace) for rule in kinds[ref["kind"]][ref["name"]]["rules"]]
    return rules


def granted(rules):
    return {(verb, group, resource, rule["namespace"])
            for rule in rules for verb in rule["verbs"] for group in rule["apiGroups"]
            for resource in rule["resources"]}


# What each part of a Job does with the API as the Plan's account: `hoist
# prepare` (checked against its real requests below), and SUC's init
# containers running `kubectl cordon` or `kubectl drain`.
PREPARE_NEEDS = {("list", "upgrade.cattle.io", "plans", SUC_NAMESPACE),
                 ("watch", "upgrade.cattle.io", "plans", SUC_NAMESPACE),
                 ("list", "", "nodes", None), ("watch", "", "nodes", None)}
CORDON_NEEDS = {("get", "", "nodes", None), ("patch", "", "nodes", None)}
# hoist upgrade, and rollback, in every Plan's Job: an Event on the node, or one more count on its series when a
# retried pod says the same (test_node_events.py).
EVENTS_NEEDS = {(verb, "events.k8s.io", "events", EVENT_NAMESPACE) for verb in ("create", "get", "patch")}
# What only a repeat uses (the count on its series): one run that posts once creates.
SERIES_NEEDS = {(verb, "events.k8s.io", "events", EVENT_NAMESPACE) for verb in ("get", "patch")}
# hoist upgrade reading its own Node: the node-ready check, --installed-version-from node.
OWN_NODE_NEEDS = {("get", "", "nodes", None)}
DRAIN_NEEDS = CORDON_NEEDS | {("get", "", "pods", None), ("list", "", "pods", None), ("delete", "", "pods", None),
                              ("create", "", "pods/eviction", None)} | \
    {(verb, "apps", resource, None) for verb in ("get", "list")
     for resource in ("statefulsets", "daemonsets", "replicasets")}


def reads_own_node(args):
    """Whether a Plan's hoist upgrade reads the Job's Node (the manifests in the payload images say exec:)."""
    return option(args, "--installed-version-from") == "node" or \
        any(a in ("--health-check=node-ready", "node-ready") for a in args)


def test_each_plan_runs_as_its_own_account_with_only_what_it_needs(rendered):
    accounts = set()
    for name, docs in rendered.items():
        kinds = by_kind(docs)
        for plan_name, plan in kinds["Plan"].items():
            spec = plan["spec"]
            account = spec["serviceAccountName"]
            assert account == f"hoist-{plan_name}"
            assert account in kinds["ServiceAccount"]
            accounts.add(account)
            needs = set(EVENTS_NEEDS)
            if reads_own_node(spec["upgrade"]["args"]):
                needs |= OWN_NODE_NEEDS
            if "prepare" in spec and (spec["prepare"]["args"][0] == "prepare" or
                                      option(spec["prepare"]["args"], "--wait-for-plan") is not None):
                needs |= PREPARE_NEEDS
            if option(spec["upgrade"]["args"], "--kured-lock") is not None:
                kured_namespace = option(spec["upgrade"]["args"], "--kured-lock").split("/")[0]
                needs |= {(verb, "apps", "daemonsets", kured_namespace) for verb in ("get", "patch")}
            if "drain" in spec:
                needs |= DRAIN_NEEDS
            elif spec.get("cordon"):
                needs |= CORDON_NEEDS
            assert granted(account_rules(docs, account)) == needs, plan_name
        # No account that no Plan runs as.
        assert set(kinds["ServiceAccount"]) == {p["spec"]["serviceAccountName"] for p in kinds["Plan"].values()}
    assert len(accounts) == sum(len(plans) for plans in EXPECTED_PLANS.values())


def agent_prepare_rules():
    return account_rules(overlay_docs("k3s"), "hoist-k3s-agent", "prepare")


def run_prepare_with_rbac(cluster, pki, tmp_path, rules):
    cluster.rbac = rules
    with FakeApiServer(cluster, pki) as server:
        config = write_kubeconfig(tmp_path / "kc", server.url, pki["ca"], token="token-1", namespace=NAMESPACE)
        put_server_plan(cluster)
        emulator = suc(cluster, concurrency=2, job_seconds=0.2).start(delay=0.3)
        prepare = start_prepare(SERVER_PLAN, "--timeout", 20, kubeconfig=config)
        code = prepare.wait()
        emulator.join()
        return code, prepare


def test_the_rbac_we_ship_is_exactly_what_prepare_uses(cluster, pki, tmp_path):
    rules = agent_prepare_rules()
    code, prepare = run_prepare_with_rbac(cluster, pki, tmp_path, rules)
    assert code == 0, prepare.stderr
    assert not [r for r in cluster.requests if r.get("status") == 403]
    used = {(r["verb"], r["group"], r["resource"], r["namespace"] or None) for r in cluster.requests}
    assert used == granted(rules)
    assert used == PREPARE_NEEDS


@pytest.mark.parametrize("dropped", [("list", "plans"), ("watch", "plans"), ("list", "nodes"), ("watch", "nodes")],
                         ids=lambda d: "-".join(d))
def test_prepare_fails_without_any_one_of_its_rules(cluster, pki, tmp_path, dropped):
    rules = []
    for rule in agent_prepare_rules():
        if dropped[1] in rule["resources"]:
            rule = dict(rule, verbs=[v for v in rule["verbs"] if v != dropped[0]])
        rules.append(rule)
    code, prepare = run_prepare_with_rbac(cluster, pki, tmp_path, rules)
    assert code == 1
    assert f"403 Forbidden (RBAC must allow verb '{dropped[0]}' on resource '{dropped[1]}'" in prepare.stderr


def test_the_agent_plans_own_prepare_step_waits_for_the_shipped_server_plan_then_stages(pki, tmp_path, rendered,
                                                                                        host_root):
    """The k3s Plans as shipped, through the binary: the agent Plan's prepare
    arguments ($(SYSTEM_UPGRADE_PLAN_LATEST_VERSION) expanded as the kubelet
    does), with only its account's prepare rights, waiting for the server
    Plan as rendered, whose opt-in selector leaves out the servers that did
    not opt in, and staging only then. The payload manifest is the payload
    image's (test_image.py runs the step there); here the same component is
    given on the command line, from a file beside the test."""
    plans = plans_of(rendered)
    server_plan, agent = plans["k3s-server"], plans["k3s-agent"]
    cluster = Cluster(tokens=("token-1",))
    cluster.bookmark_interval = 1.0
    for name in ("s1", "s2"):
        cluster.add_node(name, {"node-role.kubernetes.io/control-plane": "true", "k3s-upgrade": "true"})
    cluster.add_node("s3", {"node-role.kubernetes.io/control-plane": "true"})
    cluster.add_node("s4", {"node-role.kubernetes.io/control-plane": "true", "k3s-upgrade": "disabled"})
    cluster.add_node("a1", {"k3s-upgrade": "true"})
    cluster.rbac = agent_prepare_rules()
    version = munge(agent["spec"]["version"])
    args = [arg.replace("$(SYSTEM_UPGRADE_PLAN_LATEST_VERSION)", version) for arg in agent["spec"]["prepare"]["args"]]
    assert args[:2] == ["stage", "--manifest=/payload/hoist.json"]
    payload = tmp_path / "k3s"
    payload.write_bytes(b"k3s " + version.encode() + b"\n")
    (host_root / "usr/local/bin").mkdir(parents=True)
    component = ["--component", "k3s", "--kind", "file", "--source", payload, "--destination", "/usr/local/bin/k3s",
                 "--version-scheme", "k3s", "--version", version]
    with FakeApiServer(cluster, pki) as server:
        config = write_kubeconfig(tmp_path / "kc", server.url, pki["ca"], token="token-1", namespace=NAMESPACE)
        cluster.put_plan("k3s-server", SUC_NAMESPACE, server_plan["spec"])
        emulator = SucEmulator(cluster, "k3s-server", SUC_NAMESPACE, concurrency=server_plan["spec"]["concurrency"],
                               job_seconds=0.2).start(delay=0.5)
        argv = [HOIST_BIN, "stage", "--host-root", host_root, *component, *args[2:], "--kubeconfig", config]
        staging = Prepare(list(map(str, argv)), {"PATH": "/usr/bin:/bin", **SANITIZER_ENV})
        code = staging.wait(timeout=60)
        emulator.join()
    assert code == 0, staging.stderr
    assert not [r for r in cluster.requests if r.get("status") == 403]
    assert f"(timeout {option(args, '--wait-timeout')} s, kubelet version {version})" in staging.stderr
    assert "plan 'k3s-server': 2/2 nodes done at hash" in staging.stderr
    # s3 and s4 did not opt in: neither SUC nor prepare touched or waited for them.
    assert sorted(emulator.labeled_at) == ["s1", "s2"]
    # Then staged, not switched: the upgrade container switches after the drain.
    assert staging.exited_at >= max(emulator.labeled_at.values())
    assert staging.stderr.index("plan 'k3s-server' is complete") < staging.stderr.index("gate: k3s: ")
    state = state_of(host_root, "k3s")
    assert state["staged"]["version"] == version.replace("-k3s", "+k3s")
    assert not os.path.lexists(host_root / "usr/local/bin/k3s")


def test_the_plans_prepare_and_upgrade_arguments_are_hoists(rendered, host_root):
    # Every option a Plan passes parses: the run gets as far as reading the
    # payload manifest, which only the payload image has (a stage step that
    # waits for a Plan reads it first: bad input fails before the wait), or
    # the payload itself (hoist's own /hoist, the upstream image's /opt/k3s).
    plans = [(name, plan) for name, plan in plans_of(rendered).items()]
    plans += [(f"{UPSTREAM}/{name}", plan) for name, plan in by_kind(render(DEPLOY / UPSTREAM))["Plan"].items()]
    for name, plan in plans:
        for container in ("prepare", "upgrade"):
            if container not in plan["spec"]:
                continue
            args = plan["spec"][container]["args"]
            # The env SUC gives every container: the Plan's version, munged.
            result = run_hoist("--host-root", host_root, *args,
                               env={"SYSTEM_UPGRADE_PLAN_LATEST_VERSION": munge(plan["spec"]["version"])})
            assert "Run 'hoist --help'" not in result.stderr, (name, container, result)
            read_first = option(args, "--manifest") or option(args, "--source")
            assert f"'{read_first}'" in result.stderr, (name, container, result)
            assert result.returncode == 2, (name, container, result)


def test_every_plan_writes_metrics_for_node_exporters_textfile_collector(rendered):
    for name, plan in plans_of(rendered).items():
        assert "--metrics-file=/var/lib/node_exporter/textfile_collector/hoist.prom" in plan["spec"]["upgrade"]["args"]


def test_the_drain_roles_stay_within_suc_own_drainer_role():
    if not SUC_ROLES.exists():
        pytest.skip("SUC's clusterrole.yaml not found")
    theirs = by_kind([d for d in yaml.safe_load_all(SUC_ROLES.read_text()) if d])["ClusterRole"]
    allowed = granted([dict(r, namespace=None) for r in theirs["system-upgrade-controller-drainer"]["rules"]])
    assert DRAIN_NEEDS <= allowed
    drain_roles = {name: role for overlay in OVERLAYS for name, role in
                   by_kind(overlay_docs(overlay)).get("ClusterRole", {}).items() if name.endswith("-drain")}
    assert set(drain_roles) == {"hoist-k3s-agent-drain", "hoist-os-tree-drain"}
    for role in drain_roles.values():
        assert granted([dict(r, namespace=None) for r in role["rules"]]) == DRAIN_NEEDS


@pytest.mark.skipif(not can_fake_service_account(), reason="needs root and unshare for a private mount namespace")
@pytest.mark.parametrize("overlay,plan", [(o, p) for o in OVERLAYS for p in sorted(EXPECTED_PLANS[o])])
def test_each_plans_events_role_lets_its_upgrade_post_the_event(overlay, plan, pki, tmp_path, host_root):
    cluster = Cluster(tokens=(SA_TOKEN,))
    cluster.rbac = account_rules(overlay_docs(overlay), f"hoist-{plan}", "events")
    source = make_tree(tmp_path / "v1", {"a": "one\n"}, 1)
    account = make_service_account(tmp_path / "sa", pki["ca"], SA_TOKEN)
    with FakeApiServer(cluster, pki) as server:
        in_pod(account, server.port, host_root, "upgrade", *node_event_tree_args(source, "1.0.0"), check=0)
    assert [(e["reason"], e["metadata"]["namespace"]) for e in cluster.events] == [("HoistUpgraded", EVENT_NAMESPACE)]
    assert [r["status"] for r in cluster.requests] == [201]


def node_ready_cluster(rules):
    cluster = Cluster(tokens=(SA_TOKEN,))
    cluster.rbac = rules
    cluster.add_node(NODE)
    cluster.update(NODE_API, NODE, lambda node: node["status"].__setitem__(
        "conditions", [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]))
    return cluster


def node_checks(args):
    """A Plan's upgrade arguments that check the node through the API: its node-ready check and
    --health-timeout (its unit checks need systemd, test_health.py drives those)."""
    return [a for a in args if a == "--health-check=node-ready" or a.startswith("--health-timeout=")]


@pytest.mark.skipif(not can_fake_service_account(), reason="needs root and unshare for a private mount namespace")
@pytest.mark.parametrize("plan", sorted(EXPECTED_PLANS["k3s"]))
def test_each_k3s_plans_node_role_is_what_its_node_ready_check_uses(plan, pki, tmp_path, host_root, rendered):
    args = plans_of(rendered)[plan]["spec"]["upgrade"]["args"]
    checks = node_checks(args)
    assert "--health-check=node-ready" in checks and option(checks, "--health-timeout") is not None
    rules = account_rules(overlay_docs("k3s"), f"hoist-{plan}", "node") + \
        account_rules(overlay_docs("k3s"), f"hoist-{plan}", "events")
    assert granted(rules) == OWN_NODE_NEEDS | EVENTS_NEEDS
    cluster = node_ready_cluster(rules)
    source = make_tree(tmp_path / "v1", {"a": "one\n"}, 1)
    account = make_service_account(tmp_path / "sa", pki["ca"], SA_TOKEN)
    with FakeApiServer(cluster, pki) as server:
        result = in_pod(account, server.port, host_root, "upgrade", *node_event_tree_args(source, "1.0.0", *checks),
                        check=0)
    assert f"health: node-ready passed: node '{NODE}' is Ready" in result.stderr
    # No unit check here: the line says nothing of units (it said "each unit up for 30 s").
    assert f"health: checking node-ready (at most {option(checks, '--health-timeout')} s in all)" in result.stderr
    assert not [r for r in cluster.requests if r.get("status") == 403]
    used = {(r["verb"], r["group"], r["resource"], r["namespace"] or None) for r in cluster.requests}
    assert used == granted(rules) - SERIES_NEEDS
    assert {r["path"] for r in cluster.log_requests(verb="get")} == {f"/api/v1/nodes/{NODE}"}


@pytest.mark.skipif(not can_fake_service_account(), reason="needs root and unshare for a private mount namespace")
@pytest.mark.parametrize("plan", sorted(EXPECTED_PLANS["k3s"]))
def test_node_ready_fails_without_the_node_role(plan, pki, tmp_path, host_root):
    cluster = node_ready_cluster(account_rules(overlay_docs("k3s"), f"hoist-{plan}", "events"))
    source = make_tree(tmp_path / "v1", {"a": "one\n"}, 1)
    account = make_service_account(tmp_path / "sa", pki["ca"], SA_TOKEN)
    with FakeApiServer(cluster, pki) as server:
        result = in_pod(account, server.port, host_root, "upgrade",
                        *node_event_tree_args(source, "1.0.0", "--health-check=node-ready", "--health-timeout=2"),
                        check=1)
    assert "health check node-ready did not pass within 2 s: failed to get nodes on '127.0.0.1:" in result.stderr
    assert "403 Forbidden (RBAC must allow verb 'get' on resource 'nodes' in the core API group cluster-wide)" \
        in result.stderr
