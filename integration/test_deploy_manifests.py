"""The manifests under deploy/: every Plan validates against SUC's Plan CRD,
the kustomize output is what we mean to ship, and the RBAC is exactly what
`hoist prepare` uses (checked against the requests it makes to the fake server)."""

import copy
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

pytest.register_assert_rewrite("prepare_harness")  # before its import: it is also a plugin
import yaml

from fake_apiserver import FakeApiServer, write_kubeconfig
from prepare_harness import NAMESPACE, SERVER_PLAN, put_server_plan, start_prepare, suc

pytest_plugins = ["prepare_harness"]  # the fixtures: pki, cluster

REPO = Path(__file__).resolve().parent.parent
DEPLOY = REPO / "deploy"
CRD = REPO.parent / "shared/reference/system-upgrade-controller/upgrade.cattle.io_plans.yaml"
OVERLAYS = ["k3s", "sysext", "tree"]

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


@pytest.fixture(scope="module")
def plan_schema():
    if not CRD.exists():
        pytest.skip(f"{CRD} not found (shared/ is beside the repository)")
    crd = yaml.safe_load(CRD.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    return strict(version["schema"]["openAPIV3Schema"])


@pytest.fixture(scope="module")
def rendered():
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl (kustomize) not installed")
    return {name: render(DEPLOY / name) for name in OVERLAYS}


def base_docs():
    """deploy/base's resources as its kustomization lists them, read without
    kustomize (base has no transformations), so the RBAC checks run anywhere."""
    kustomization = yaml.safe_load((DEPLOY / "base/kustomization.yaml").read_text())
    return [doc for name in kustomization["resources"]
            for doc in yaml.safe_load_all((DEPLOY / "base" / name).read_text()) if doc]


def plan_files():
    return sorted(p for p in DEPLOY.rglob("*.yaml") if any(d.get("kind") == "Plan" for d in
                                                               yaml.safe_load_all(p.read_text()) if d))


@pytest.mark.parametrize("path", plan_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_shipped_plan_validates_against_the_crd(path, plan_schema):
    plans = [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "Plan"]
    assert plans
    for plan in plans:
        jsonschema.validate(plan, plan_schema, cls=jsonschema.Draft7Validator)
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


def by_kind(docs):
    found = {}
    for doc in docs:
        found.setdefault(doc["kind"], {})[doc["metadata"]["name"]] = doc
    return found


def test_rendered_output_is_what_we_ship(rendered, plan_schema):
    expected_plans = {"k3s": {"k3s-server", "k3s-agent"}, "sysext": {"sysext-node-tools"}, "tree": {"os-tree"}}
    base = sorted((d["kind"], d["metadata"]["name"]) for d in base_docs())
    for name, docs in rendered.items():
        kinds = by_kind(docs)
        assert sorted((d["kind"], d["metadata"]["name"]) for d in docs if d["kind"] != "Plan") == base
        assert set(kinds["Plan"]) == expected_plans[name]
        namespace = kinds["Namespace"]["system-upgrade"]
        assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
        assert set(kinds["ServiceAccount"]) == {"hoist"}
        assert set(kinds["Role"]) == {"hoist-prepare"}
        assert set(kinds["ClusterRole"]) == {"hoist-prepare-nodes", "hoist-cordon-drain"}
        for binding in list(kinds["RoleBinding"].values()) + list(kinds["ClusterRoleBinding"].values()):
            assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "hoist", "namespace": "system-upgrade"}]
            ref = binding["roleRef"]
            assert ref["name"] in kinds[ref["kind"]]
        for plan in kinds["Plan"].values():
            jsonschema.validate(plan, plan_schema, cls=jsonschema.Draft7Validator)
            assert plan["metadata"]["namespace"] == "system-upgrade"
            assert plan["spec"]["serviceAccountName"] == "hoist"
            assert plan["spec"]["upgrade"]["image"].startswith("localhost/hoist")
            # SUC appends the version as the tag of an untagged upgrade image.
            assert ":" not in plan["spec"]["upgrade"]["image"]
            assert plan["spec"]["upgrade"]["args"][0] == "upgrade"
            assert plan["spec"]["jobActiveDeadlineSecs"] >= 900


def test_the_agent_plan_prepares_by_waiting_for_the_server_plan(rendered):
    plans = by_kind(rendered["k3s"])["Plan"]
    server, agent = plans["k3s-server"], plans["k3s-agent"]
    assert agent["spec"]["prepare"]["args"][:2] == ["prepare", "k3s-server"]
    assert "--node-version=$(SYSTEM_UPGRADE_PLAN_LATEST_VERSION)" in agent["spec"]["prepare"]["args"]
    assert agent["spec"]["prepare"]["image"] == "localhost/hoist:latest"
    assert agent["spec"]["version"] == server["spec"]["version"]
    # The two Plans select disjoint nodes: servers, and everything else.
    server_keys = {e["key"]: e["operator"] for e in server["spec"]["nodeSelector"]["matchExpressions"]}
    agent_keys = {e["key"]: e["operator"] for e in agent["spec"]["nodeSelector"]["matchExpressions"]}
    assert server_keys["node-role.kubernetes.io/control-plane"] == "In"
    assert agent_keys["node-role.kubernetes.io/control-plane"] == "DoesNotExist"


@needs_kubectl
def test_an_overlay_can_replace_the_image_placeholders(tmp_path):
    # kustomize loads nothing outside an overlay's root but directories beside it.
    shutil.copytree(DEPLOY, tmp_path / "deploy")
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "resources: [../deploy/k3s]\n"
        "images:\n- {name: localhost/hoist, newName: registry.example/hoist, newTag: v0.1.0}\n"
        "- {name: localhost/hoist-k3s, newName: registry.example/hoist-k3s}\n")
    plans = by_kind(render(overlay))["Plan"]
    assert plans["k3s-agent"]["spec"]["prepare"]["image"] == "registry.example/hoist:v0.1.0"
    assert {p["spec"]["upgrade"]["image"] for p in plans.values()} == {"registry.example/hoist-k3s"}


# ------------------------------------------------------------------ RBAC

def prepare_rules(docs):
    """The rules granted to the hoist service account for prepare, in the shape
    the fake server enforces: a Role's rules bound in its namespace, a
    ClusterRole's bound cluster-wide. The drain role is not prepare's."""
    kinds = by_kind(docs)
    rules = []
    for binding in kinds.get("RoleBinding", {}).values():
        for rule in kinds[binding["roleRef"]["kind"]][binding["roleRef"]["name"]]["rules"]:
            rules.append(dict(rule, namespace=binding["metadata"]["namespace"]))
    for binding in kinds.get("ClusterRoleBinding", {}).values():
        if binding["roleRef"]["name"] == "hoist-cordon-drain":
            continue
        for rule in kinds["ClusterRole"][binding["roleRef"]["name"]]["rules"]:
            rules.append(dict(rule, namespace=None))
    return rules


def granted(rules):
    return {(verb, group, resource, rule["namespace"])
            for rule in rules for verb in rule["verbs"] for group in rule["apiGroups"]
            for resource in rule["resources"]}


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
    rules = prepare_rules(base_docs())
    code, prepare = run_prepare_with_rbac(cluster, pki, tmp_path, rules)
    assert code == 0, prepare.stderr
    assert not [r for r in cluster.requests if r.get("status") == 403]
    used = {(r["verb"], r["group"], r["resource"], r["namespace"] or None) for r in cluster.requests}
    assert used == granted(rules)
    assert used == {("list", "upgrade.cattle.io", "plans", NAMESPACE),
                    ("watch", "upgrade.cattle.io", "plans", NAMESPACE),
                    ("list", "", "nodes", None), ("watch", "", "nodes", None)}


@pytest.mark.parametrize("dropped", [("list", "plans"), ("watch", "plans"), ("list", "nodes"), ("watch", "nodes")],
                         ids=lambda d: "-".join(d))
def test_prepare_fails_without_any_one_of_its_rules(cluster, pki, tmp_path, dropped):
    rules = []
    for rule in prepare_rules(base_docs()):
        if dropped[1] in rule["resources"]:
            rule = dict(rule, verbs=[v for v in rule["verbs"] if v != dropped[0]])
        rules.append(rule)
    code, prepare = run_prepare_with_rbac(cluster, pki, tmp_path, rules)
    assert code == 1
    assert f"403 Forbidden (RBAC must allow verb '{dropped[0]}' on resource '{dropped[1]}'" in prepare.stderr


def test_the_drain_role_stays_within_suc_own_drainer_role():
    reference = REPO.parent / "shared/reference/system-upgrade-controller/clusterrole.yaml"
    if not reference.exists():
        pytest.skip("SUC's clusterrole.yaml not found")
    theirs = by_kind([d for d in yaml.safe_load_all(reference.read_text()) if d])["ClusterRole"]
    allowed = granted([dict(r, namespace=None) for r in theirs["system-upgrade-controller-drainer"]["rules"]])
    drain_role = by_kind(base_docs())["ClusterRole"]["hoist-cordon-drain"]
    ours = granted([dict(r, namespace=None) for r in drain_role["rules"]])
    assert ours <= allowed
