"""system-upgrade-controller's part, played on a real API server for the
real-cluster tests: Plans resolved, Jobs made in SUC's shape, nodes labelled
and uncordoned, failures written to the Plan's conditions.

Every behaviour here is system-upgrade-controller v0.15.3's, read from its
source; each comment names the file (paths in that repository at tag v0.15.3).
Nothing is copied from it: this is the same behaviour written again in Python,
polled instead of driven by informers. Where the tests need something else, it
is a constructor argument named after SUC's own setting, or is said below:

- the `host-root` volume is a hostPath to a scratch directory per node
  (`host_roots`), not the node's "/": the tests must not change the machine
  they run on. The mount point in the containers is /host, as in SUC;
- images are pulled IfNotPresent, job.go's default (SUC's shipped manifest sets
  Always through its ConfigMap, which needs a registry; the images here are
  imported into containerd);
- the kubectl image of the cordon and drain containers is the cluster's own
  (scripts/kube builds it from the same Kubernetes sources) instead of
  rancher/kubectl.
"""

import hashlib
import json
import threading
import time
import traceback
import uuid
from datetime import datetime, timezone

from kube_api import EVENTS, JOBS, NODES, PLANS, ApiError

GROUP = "upgrade.cattle.io"
# pkg/apis/upgrade.cattle.io/constants.go: the label and annotation keys.
LABEL_CONTROLLER = f"{GROUP}/controller"
LABEL_EXCLUSIVE = f"{GROUP}/exclusive"
LABEL_NODE = f"{GROUP}/node"
LABEL_PLAN = f"{GROUP}/plan"
LABEL_VERSION = f"{GROUP}/version"
ANNOTATION_TTL = f"{GROUP}/ttl-seconds-after-finished"
ANNOTATION_DIGEST = f"{GROUP}/digest"
HOSTNAME = "kubernetes.io/hostname"

# manifests/system-upgrade-controller.yaml (the default-controller-env ConfigMap): the Job settings a deployed
# v0.15.3 runs with. job.go's own defaults differ (backoff limit 2, deadline 600 s); the ConfigMap's are what a
# real cluster showed (backoff limit 99).
BACKOFF_LIMIT = 99
ACTIVE_DEADLINE_SECONDS = 900
TTL_SECONDS_AFTER_FINISHED = 900
CONTROLLER_NAME = "system-upgrade-controller"


def plan_label(plan_name):
    """constants.go LabelPlanName: plan.upgrade.cattle.io/<plan>."""
    return f"plan.{GROUP}/{plan_name}"


def munge(version):
    """plan.go MungeVersion: every '+' becomes '-'."""
    return version.replace("+", "-")


def safe_concat_name(*parts):
    """wrangler's name.SafeConcatName, which job.go names Jobs with: joined by '-'; 64 characters or more are cut
    to 57 (56 when the 57th is not a lowercase letter or digit) plus '-' and the first 5 (6) hex digits of the
    sha256 of the whole."""
    full = "-".join(parts)
    if len(full) < 64:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()
    c = full[56]
    if "a" <= c <= "z" or "0" <= c <= "9":
        return full[:57] + "-" + digest[:5]
    return full[:56] + "-" + digest[:6]


def secret_hash(secret):
    """kubectl's pkg/util/hash SecretHash, which plan.go DigestStatus adds to the Plan's hash for each secret: the
    sha256 of the JSON of kind, type, name and data (keys sorted, as Go's encoding/json writes a map), its first
    10 hex digits with 0, 1, 3, a, e written g, h, k, m, t."""
    encoded = {"kind": "Secret", "type": secret.get("type", ""), "name": secret["metadata"]["name"],
               "data": secret.get("data") or None}
    if "immutable" in secret:
        encoded["immutable"] = secret["immutable"]
    text = json.dumps(encoded, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).hexdigest()[:10]
    return digest.translate(str.maketrans("013ae", "ghkmt"))


def go_duration(nanoseconds):
    """Go's time.Duration String(), which job.go passes to kubectl drain --timeout (300 s is "5m0s")."""
    if nanoseconds == 0:
        return "0s"
    sign = "-" if nanoseconds < 0 else ""
    n = abs(nanoseconds)
    if n < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if n >= size:
                return sign + f"{n / size:g}{unit}"
    seconds = n / 1e9
    hours, rest = divmod(int(seconds), 3600)
    minutes = rest // 60
    secs = seconds - hours * 3600 - minutes * 60
    text = f"{secs:.9f}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{text}"
    if minutes:
        return f"{sign}{minutes}m{text}"
    return sign + text


def now_rfc3339():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text):
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


# ------------------------------------------------------------------ conditions

class Conditions:
    """pkg/apis/condition/condition.go on a Plan's status.conditions: a condition is created Unknown; setting a
    field to a new value stamps lastUpdateTime; SetError(reason, None) is True with an empty message and the
    reason, SetError(reason, message) False with the message and the reason ("Error" when empty).
    lastTransitionTime is never set by it."""

    def __init__(self, status):
        self.list = status.setdefault("conditions", [])

    def find(self, kind):
        return next((c for c in self.list if c.get("type") == kind), None)

    def get(self, kind, field):
        cond = self.find(kind)
        return "" if cond is None else cond.get(field, "")

    def _cond(self, kind):
        cond = self.find(kind)
        if cond is None:
            cond = {"type": kind, "status": "Unknown"}
            self.list.append(cond)
        return cond

    def _set(self, kind, field, value):
        cond = self._cond(kind)
        if cond.get(field, "") != value:
            cond[field] = value
            cond["lastUpdateTime"] = now_rfc3339()

    def create_unknown(self, kind):
        if self.find(kind) is None:
            self._set(kind, "status", "Unknown")

    def is_true(self, kind):
        return self.get(kind, "status") == "True"

    def is_false(self, kind):
        return self.get(kind, "status") == "False"

    def false(self, kind):
        self._set(kind, "status", "False")

    def message(self, kind, text):
        self._set(kind, "message", text)

    def reason(self, kind, text):
        self._set(kind, "reason", text)

    def set_error(self, kind, reason, error=None):
        if error is None:
            self._set(kind, "status", "True")
            self.message(kind, "")
            self.reason(kind, reason)
            return
        self._set(kind, "status", "False")
        self.message(kind, error)
        self.reason(kind, reason or "Error")


# ------------------------------------------------------------------ the controller

class SucController:
    """Polls the Plans of `namespace`, their nodes and Jobs every `interval` seconds and does what v0.15.3's
    handlers do on the events they would get. Runs on a thread (start(), stop()); the first exception stops it
    and is raised by stop() or check()."""

    def __init__(self, api, host_roots, kubectl_image, namespace="system-upgrade", name=CONTROLLER_NAME,
                 backoff_limit=BACKOFF_LIMIT, active_deadline_seconds=ACTIVE_DEADLINE_SECONDS,
                 ttl_seconds_after_finished=TTL_SECONDS_AFTER_FINISHED, image_pull_policy="IfNotPresent",
                 interval=0.5):
        self.api = api
        self.host_roots = dict(host_roots)
        self.kubectl_image = kubectl_image
        self.namespace = namespace
        self.name = name
        self.backoff_limit = backoff_limit
        self.active_deadline_seconds = active_deadline_seconds
        self.ttl = ttl_seconds_after_finished
        self.image_pull_policy = image_pull_policy
        self.interval = interval
        self.handled_jobs = {}   # job name -> resourceVersion last handled (an informer's change event)
        self.applied = {}        # plan name -> the resourceVersion its Jobs were last applied for
        self.job_wakeups = {}    # job name -> time.time() of its EnqueueAfter
        self.error = None
        self._stop = threading.Event()
        self._thread = None

    # -------------------------------------------------------------- running

    def start(self):
        self._thread = threading.Thread(target=self._loop, name="suc-controller", daemon=True)
        self._thread.start()
        return self

    def _loop(self):
        while not self._stop.is_set():
            try:
                self.tick()
            except ApiError as error:
                # A conflict or a restarting API server: the next round retries, as a requeue would.
                if error.status not in (409, 500, 503, 504):
                    self.error = error
                    return
            except OSError:
                pass  # the API server is down (restarted by a test): try again
            except Exception as error:  # surfaced by check() and stop()
                self.error = RuntimeError(traceback.format_exc())
                return
            self._stop.wait(self.interval)

    def check(self):
        if self.error:
            raise self.error

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join(30)
        self.check()

    def tick(self):
        ns = self.namespace
        for plan in self.api.items(PLANS.format(ns=ns)):
            plan = self.plan_status(plan)
            if plan is not None:
                self.generate(plan)
        for job in self.api.items(JOBS.format(ns=ns), labelSelector=f"{LABEL_CONTROLLER}={self.name}"):
            name = job["metadata"]["name"]
            changed = self.handled_jobs.get(name) != job["metadata"]["resourceVersion"]
            due = name in self.job_wakeups and time.time() >= self.job_wakeups[name]
            if changed or due:
                self.job_wakeups.pop(name, None)
                self.handled_jobs[name] = job["metadata"]["resourceVersion"]
                self.handle_job(job)

    # -------------------------------------------------------------- events

    def event(self, plan, kind, reason, message):
        """The controller's recorder: a core/v1 Event about the Plan, in its namespace."""
        meta = plan["metadata"]
        stamp = now_rfc3339()
        self.api.create(EVENTS.format(ns=meta["namespace"]), {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:16]}", "namespace": meta["namespace"]},
            "involvedObject": {"apiVersion": f"{GROUP}/v1", "kind": "Plan", "name": meta["name"],
                               "namespace": meta["namespace"], "uid": meta["uid"],
                               "resourceVersion": meta["resourceVersion"]},
            "reason": reason, "message": message, "type": kind,
            "source": {"component": self.name}, "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1})

    # -------------------------------------------------------------- the Plan's status

    def digest(self, plan):
        """plan.go DigestStatus: sha224 of the latest version, the service account's name, the parts of the Plan
        the digest annotation names, and the hash of each secret not marked ignoreUpdates."""
        spec = plan["spec"]
        h = hashlib.sha224()
        h.update(plan["status"].get("latestVersion", "").encode())
        h.update(spec.get("serviceAccountName", "").encode())
        annotation = plan["metadata"].get("annotations", {}).get(ANNOTATION_DIGEST, "")
        if annotation:
            for entry in annotation.split(","):
                value = plan
                for key in entry.split("."):
                    value = value.get(key, {}) if isinstance(value, dict) else {}
                h.update((value if isinstance(value, str) else "").encode())
        for secret in spec.get("secrets") or []:
            if not secret.get("ignoreUpdates"):
                found = self.api.get(f"/api/v1/namespaces/{plan['metadata']['namespace']}/secrets/{secret['name']}")
                h.update(secret_hash(found).encode())
        return h.hexdigest()

    def validate(self, plan):
        """plan.go Validate: drain's two delete flags together, and each secret (not ignoreUpdates) must exist."""
        drain = plan["spec"].get("drain")
        if drain and "deleteEmptydirData" in drain and "deleteLocalData" in drain:
            return "spec.drain cannot specify both deleteEmptydirData and deleteLocalData"
        missing = []
        for secret in plan["spec"].get("secrets") or []:
            if secret.get("ignoreUpdates"):
                continue
            path = f"/api/v1/namespaces/{plan['metadata']['namespace']}/secrets/{secret['name']}"
            if self.api.get_or_none(path) is None:
                missing.append(f'secret "{secret["name"]}" not found')
        return ", ".join(missing) or None

    def plan_status(self, plan):
        """handle_upgrade.go, the Plan status handler (a spec version; channels are not played). Returns the Plan
        as written back, or None when it could not be written (a conflict: the next round does it again)."""
        before = json.dumps(plan.get("status", {}), sort_keys=True)
        status = plan.setdefault("status", {})
        cond = Conditions(status)
        cond.create_unknown("Complete")
        cond.create_unknown("Validated")
        error = self.validate(plan)
        if error:
            if not cond.is_false("Validated"):
                self.event(plan, "Warning", "ValidateFailed", f"Failed to validate plan: {error}")
            cond.set_error("Validated", "Error", error)
        else:
            if not cond.is_true("Validated"):
                self.event(plan, "Normal", "Validated", "Plan is valid")
            cond.set_error("Validated", "PlanIsValid")
            cond.create_unknown("LatestResolved")
            version = plan["spec"].get("version", "")
            if not version:
                if not cond.is_false("LatestResolved"):
                    self.event(plan, "Warning", "ResolveFailed", "cannot resolve plan: missing channel and version")
                cond.set_error("LatestResolved", "Error", "cannot resolve plan: missing channel and version")
            else:
                latest = munge(version)
                if not cond.is_true("LatestResolved") or status.get("latestVersion") != latest:
                    # A new version: the Plan is not complete until its Jobs are.
                    self.event(plan, "Normal", "Resolved", f"Resolved latest version from Spec.Version: {latest}")
                    cond.false("Complete")
                    cond.message("Complete", "")
                    cond.reason("Complete", "Resolved")
                status["latestVersion"] = latest
                cond.set_error("LatestResolved", "Version")
        if cond.get("LatestResolved", "reason") != "Error":
            status["latestHash"] = self.digest(plan)
        return self.write_status(plan, before)

    def write_status(self, plan, before):
        if json.dumps(plan.get("status", {}), sort_keys=True) == before:
            return plan
        meta = plan["metadata"]
        try:
            return self.api.replace(f"{PLANS.format(ns=meta['namespace'])}/{meta['name']}/status", plan)
        except ApiError as error:
            if error.status == 409:
                return None
            raise

    # -------------------------------------------------------------- Jobs from a Plan

    def selected_nodes(self, plan):
        """plan.go SelectConcurrentNodes: the nodes of the Plan's selector with a hostname label whose Plan label is
        neither "disabled" nor the latest hash; those in status.applying first, then others ordered by the
        sha256 of node UID, Plan UID and latest hash, up to spec.concurrency; sorted by name."""
        spec, status = plan["spec"], plan["status"]
        selector = label_selector(spec.get("nodeSelector"))
        label = plan_label(plan["metadata"]["name"])
        latest_hash = status.get("latestHash", "")
        nodes = [n for n in self.api.items(NODES)
                 if selector(n["metadata"].get("labels", {}))
                 and HOSTNAME in n["metadata"].get("labels", {})
                 and n["metadata"]["labels"].get(label) not in ("disabled", latest_hash)]
        applying = status.get("applying") or []
        selected = [n for n in nodes if hostname(n) in applying]
        rest = [n for n in nodes if hostname(n) not in applying]
        concurrency = int(spec.get("concurrency", 0))
        if len(selected) < concurrency:
            rest.sort(key=lambda n: hashlib.sha256((n["metadata"]["uid"] + plan["metadata"]["uid"]
                                                     + latest_hash).encode()).hexdigest())
            selected += rest[:concurrency - len(selected)]
        return sorted(selected, key=lambda n: n["metadata"]["name"])

    def generate(self, plan):
        """handle_upgrade.go, the Plan generating handler: a Job per selected node (applied, never deleted
        here: WithNoDelete), status.applying and the Complete condition."""
        status = plan["status"]
        before = json.dumps(status, sort_keys=True)
        cond = Conditions(status)
        if not cond.is_true("Validated") or not cond.is_true("LatestResolved"):
            cond.set_error("Complete", "NotReady", "plan is not valid and resolved")
            self.write_status(plan, before)
            return
        nodes = self.selected_nodes(plan)
        names = [hostname(n) for n in nodes]
        self.apply_jobs(plan, nodes)
        if names:
            if (status.get("applying") or []) != names:
                self.event(plan, "Normal", "SyncJob", f"Jobs synced for version {status['latestVersion']} on Nodes "
                           f"{','.join(names)}. Hash: {status['latestHash']}")
                status["applying"] = names
                cond.false("Complete")
                cond.message("Complete", "")
                cond.reason("Complete", "SyncJob")
        else:
            if not cond.is_true("Complete"):
                self.event(plan, "Normal", "Complete", f"Jobs complete for version {status['latestVersion']}. "
                           f"Hash: {status['latestHash']}")
            status.pop("applying", None)
            cond.set_error("Complete", "Complete")
        updated = self.write_status(plan, before)
        # job.go: a Job is created paused (parallelism 0) and unpaused once its node is in status.applying (SUC
        # issue 134): the Plan written back is applied again, with parallelism 1.
        if updated is not None and names:
            self.apply_jobs(updated, nodes)

    def apply_jobs(self, plan, nodes):
        """The generating handler's apply, with UniqueApplyForResourceVersion: once per resourceVersion of the Plan
        (wrangler's generic/generating.go), never deleting (WithNoDelete). So a Job that the TTL controller
        deleted is made again only when the Plan changes."""
        meta = plan["metadata"]
        if self.applied.get(meta["name"]) == meta["resourceVersion"]:
            return
        self.applied[meta["name"]] = meta["resourceVersion"]
        for node in nodes:
            self.apply_job(self.job(plan, node))

    def apply_job(self, job):
        path = JOBS.format(ns=job["metadata"]["namespace"])
        name = job["metadata"]["name"]
        existing = self.api.get_or_none(f"{path}/{name}")
        if existing is None:
            try:
                self.api.create(path, job)
            except ApiError as error:
                if error.status != 409:
                    raise
            return
        if existing["spec"].get("parallelism") != job["spec"]["parallelism"]:
            self.api.merge_patch(f"{path}/{name}", {"spec": {"parallelism": job["spec"]["parallelism"]}})
        # An existing Job applied again is seen again by the Job handler. That is what a real v0.15.3 showed
        # (issue 28): a Plan moved back, within the TTL, to a version whose Job has finished is completed by that
        # Job at once, and no pod runs.
        self.handled_jobs.pop(name, None)

    def job(self, plan, node):
        """job.go New: the Job that applies `plan` on `node`."""
        meta, spec, status = plan["metadata"], plan["spec"], plan["status"]
        plan_name = meta["name"]
        node_name = node["metadata"]["name"]
        node_hostname = hostname(node)
        exclusive = "true" if spec.get("exclusive") else "false"
        ttl = self.ttl
        # The Plan's own labels and annotations go to the Job and its pod, except cattle.io/ keys (and, for
        # annotations, kubectl.kubernetes.io/ ones).
        job_annotations = {ANNOTATION_TTL: str(ttl)}
        pod_annotations = {}
        for key, value in (meta.get("annotations") or {}).items():
            if "cattle.io/" not in key and "kubectl.kubernetes.io/" not in key:
                job_annotations[key] = value
                pod_annotations[key] = value
        labels = {LABEL_CONTROLLER: self.name, LABEL_EXCLUSIVE: exclusive, LABEL_NODE: node_name,
                  LABEL_PLAN: plan_name, LABEL_VERSION: status["latestVersion"],
                  plan_label(plan_name): status["latestHash"]}
        for key, value in (meta.get("labels") or {}).items():
            if "cattle.io/" not in key:
                labels[key] = value
        # Anti-affinity: one pod of this Plan per host; an exclusive Plan's pod not beside any exclusive one.
        anti = {"key": LABEL_PLAN, "operator": "In", "values": [plan_name]}
        if spec.get("exclusive"):
            anti = {"key": LABEL_EXCLUSIVE, "operator": "In", "values": [exclusive]}
        volumes = [
            {"name": "host-root", "hostPath": {"path": self.host_root(node_name), "type": "Directory"}},
            {"name": "pod-info", "downwardAPI": {"defaultMode": 420, "items": [
                {"path": "labels", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels"}},
                {"path": "annotations", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.annotations"}}]}},
        ]
        for secret in spec.get("secrets") or []:
            volumes.append({"name": safe_concat_name("secret", secret["name"]),
                            "secret": {"secretName": secret["name"], "optional": bool(secret.get("ignoreUpdates"))}})
        upgrade = spec["upgrade"]
        for volume in upgrade.get("volumes") or []:
            volumes.append({"name": volume["name"], "hostPath": {"path": volume["source"]}})
        init_containers = []
        if spec.get("prepare"):
            prepare = spec["prepare"]
            init_containers.append(self.container(
                "prepare", prepare, plan, latest_tag=True, volumes=prepare.get("volumes"),
                security_context=prepare.get("securityContext")))
        drain, cordon = spec.get("drain"), spec.get("cordon")
        if drain is not None:
            init_containers.append(self.container(
                "drain", {"image": self.kubectl_image, "args": drain_args(drain, node_name)}, plan,
                volumes=upgrade.get("volumes")))
        elif cordon:
            init_containers.append(self.container(
                "cordon", {"image": self.kubectl_image, "args": ["cordon", node_name]}, plan,
                volumes=upgrade.get("volumes")))
        # The upgrade container: the Plan's securityContext, else privileged with CAP_SYS_BOOT.
        security = upgrade.get("securityContext") or {"privileged": True, "capabilities": {"add": ["CAP_SYS_BOOT"]}}
        containers = [self.container("upgrade", upgrade, plan, latest_tag=True, volumes=upgrade.get("volumes"),
                                     security_context=security)]
        deadline = spec.get("jobActiveDeadlineSecs")
        if deadline is None or deadline < 0:
            deadline = self.active_deadline_seconds
        elif deadline == 0:
            deadline = None
        short_node = node_name.split(".", 1)[0]
        job = {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": safe_concat_name("apply", plan_name, "on", short_node, "with", status["latestHash"]),
                         "namespace": meta["namespace"], "annotations": job_annotations, "labels": labels},
            "spec": {
                # podReplacementPolicy TerminatingOrFailed: a field 1.20 does not have (it would be dropped).
                "backoffLimit": self.backoff_limit,
                "ttlSecondsAfterFinished": ttl,
                "completions": 1,
                "parallelism": 1 if node_hostname in (status.get("applying") or []) else 0,
                "template": {
                    "metadata": {"annotations": pod_annotations, "labels": dict(labels)},
                    "spec": {
                        "hostIPC": True, "hostPID": True, "hostNetwork": True,
                        "dnsPolicy": "ClusterFirstWithHostNet",
                        "serviceAccountName": spec.get("serviceAccountName", ""),
                        "affinity": {
                            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [{"matchExpressions": [
                                    {"key": HOSTNAME, "operator": "In", "values": [node_hostname]}]}]}},
                            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                                {"labelSelector": {"matchExpressions": [anti]}, "topologyKey": HOSTNAME}]}},
                        "tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                                         "effect": "NoSchedule"}] + list(spec.get("tolerations") or []),
                        "restartPolicy": "Never",
                        "volumes": volumes,
                        "imagePullSecrets": spec.get("imagePullSecrets") or [],
                        "initContainers": init_containers,
                        "containers": containers,
                    },
                },
            },
        }
        if deadline is not None:
            job["spec"]["activeDeadlineSeconds"] = deadline
        return job

    def host_root(self, node_name):
        if node_name not in self.host_roots:
            raise KeyError(f"no scratch host root for node {node_name!r}: the tests never mount a node's real /")
        return str(self.host_roots[node_name])

    def container(self, name, spec, plan, latest_tag=False, volumes=None, security_context=None):
        """container.go New and its options: the host at /host, the pod-info files, the node and pod env from the
        downward API, then the spec's env, then the Plan's name, hash and version; the secrets read-only at
        /run/system-upgrade/secrets/<name> (or their path); an untagged image gets the latest version as its
        tag (prepare and upgrade only)."""
        status = plan["status"]
        image = spec["image"]
        if latest_tag and name_only(image):
            image = f"{image}:{status['latestVersion']}"
        env = [{"name": "SYSTEM_UPGRADE_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
               {"name": "SYSTEM_UPGRADE_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
               {"name": "SYSTEM_UPGRADE_POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}]
        env += list(spec.get("env") or [])
        env += [{"name": "SYSTEM_UPGRADE_PLAN_NAME", "value": plan["metadata"]["name"]},
                {"name": "SYSTEM_UPGRADE_PLAN_LATEST_HASH", "value": status["latestHash"]},
                {"name": "SYSTEM_UPGRADE_PLAN_LATEST_VERSION", "value": status["latestVersion"]}]
        mounts = [{"name": "host-root", "mountPath": "/host"},
                  {"name": "pod-info", "mountPath": "/run/system-upgrade/pod", "readOnly": True}]
        for secret in plan["spec"].get("secrets") or []:
            path = secret.get("path") or ""
            if not path:
                path = f"/run/system-upgrade/secrets/{secret['name']}"
            elif not path.startswith("/"):
                path = f"/run/system-upgrade/secrets/{path}"
            mounts.append({"name": safe_concat_name("secret", secret["name"]), "mountPath": path, "readOnly": True})
        for volume in volumes or []:
            mounts.append({"name": volume["name"], "mountPath": volume["destination"]})
        container = {"name": name, "image": image, "env": env, "volumeMounts": mounts,
                     "imagePullPolicy": self.image_pull_policy}
        for key in ("command", "args", "envFrom"):
            if spec.get(key):
                container[key] = spec[key]
        if security_context:
            container["securityContext"] = security_context
        return container

    # -------------------------------------------------------------- Jobs

    def handle_job(self, job):
        """handle_batch.go, the Job handler: deletes a Job whose Plan, version or node is gone; on failure writes
        the Plan's Complete condition (False, reason JobFailed, the Job's failure in the message) and a Warning
        Event; on success labels the node with the Plan's hash and uncordons it (when the Plan cordons or
        drains); either way keeps the finished Job for its TTL, then deletes it; deletes a running Job whose
        node is not in status.applying."""
        meta = job["metadata"]
        labels = meta.get("labels") or {}
        ns = meta["namespace"]
        path = f"{JOBS.format(ns=ns)}/{meta['name']}"
        plan_name, version, node_name = labels.get(LABEL_PLAN), labels.get(LABEL_VERSION), labels.get(LABEL_NODE)
        if plan_name is None or version is None:
            self.api.delete(path)
            return
        plan = self.api.get_or_none(f"{PLANS.format(ns=ns)}/{plan_name}")
        # Only one Job per node is kept in the TTL window: one for another version goes at once.
        if plan is None or version != plan.get("status", {}).get("latestVersion"):
            self.api.delete(path)
            return
        node = self.api.get_or_none(f"{NODES}/{node_name}") if node_name else None
        if node is None:
            self.api.delete(path)
            return
        conditions = {c["type"]: c for c in job.get("status", {}).get("conditions") or []}
        failed, complete = conditions.get("Failed"), conditions.get("Complete")
        if failed and failed.get("status") == "True":
            message = (f"Job {ns}/{meta['name']} failed on Node {node_name}: {failed.get('reason', '')}: "
                       f"{failed.get('message', '')}")
            self.event(plan, "Warning", "JobFailed", message)
            before = json.dumps(plan.get("status", {}), sort_keys=True)
            Conditions(plan.setdefault("status", {})).set_error("Complete", "JobFailed", message)
            if self.write_status(plan, before) is None:
                self.handled_jobs.pop(meta["name"], None)  # try again next round
                return
            self.enqueue_or_delete(job, failed["lastTransitionTime"])
            return
        if complete and complete.get("status") == "True":
            hash_label = plan_label(plan_name)
            if hash_label in labels:
                self.event(plan, "Normal", "JobComplete", f"Job completed on Node {node_name}")
                node["metadata"].setdefault("labels", {})[hash_label] = labels[hash_label]
                spec = plan["spec"]
                if node["spec"].get("unschedulable") and (spec.get("cordon") or spec.get("drain") is not None):
                    node["spec"]["unschedulable"] = False
                try:
                    self.api.replace(f"{NODES}/{node_name}", node)
                except ApiError as error:
                    if error.status != 409:
                        raise
                    self.handled_jobs.pop(meta["name"], None)
                    return
            self.enqueue_or_delete(job, complete["lastTransitionTime"])
            return
        if node_name not in (plan.get("status", {}).get("applying") or []):
            self.api.delete(path)

    def enqueue_or_delete(self, job, finished_at):
        ttl = job["spec"].get("ttlSecondsAfterFinished")
        if ttl is None:
            ttl = int(job["metadata"].get("annotations", {}).get(ANNOTATION_TTL, 0))
        wake = parse_time(finished_at) + ttl
        if time.time() < wake:
            self.job_wakeups[job["metadata"]["name"]] = wake
        else:
            self.api.delete(f"{JOBS.format(ns=job['metadata']['namespace'])}/{job['metadata']['name']}")


def hostname(node):
    """node.go Hostname: the kubernetes.io/hostname label, else the node's name."""
    return (node["metadata"].get("labels") or {}).get(HOSTNAME, node["metadata"]["name"])


def name_only(image):
    """An image reference with neither tag nor digest (docker/distribution's reference.IsNameOnly)."""
    last = image.rsplit("/", 1)[-1]
    return ":" not in last and "@" not in image


def drain_args(drain, node_name):
    """job.go: `kubectl drain NODE` with a pod selector that spares SUC's own pods (no controller label) and the
    Plan's, then --ignore-daemonsets and --delete-emptydir-data unless turned off, --force, --timeout (a Go
    duration), --grace-period, --disable-eviction and --skip-wait-for-delete-timeout as the Plan says."""
    selector = f"!{LABEL_CONTROLLER}"
    extra = drain.get("podSelector")
    if extra:
        selector += "," + format_selector(extra)
    args = ["drain", node_name, "--pod-selector", selector]
    if drain.get("ignoreDaemonSets", True):
        args.append("--ignore-daemonsets")
    if drain.get("deleteLocalData", True) and drain.get("deleteEmptydirData", True):
        args.append("--delete-emptydir-data")
    if drain.get("force"):
        args.append("--force")
    if drain.get("timeout") is not None:
        args += ["--timeout", go_duration(int(drain["timeout"]))]
    if drain.get("gracePeriod") is not None:
        args += ["--grace-period", str(drain["gracePeriod"])]
    if drain.get("disableEviction"):
        args.append("--disable-eviction=true")
    if drain.get("skipWaitForDeleteTimeout", 0) > 0:
        args += ["--skip-wait-for-delete-timeout", str(drain["skipWaitForDeleteTimeout"])]
    return args


def format_selector(selector):
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        op, key, values = expr["operator"], expr["key"], ",".join(expr.get("values") or [])
        parts.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": key,
                      "DoesNotExist": f"!{key}"}[op])
    return ",".join(parts)


def label_selector(selector):
    """A metav1.LabelSelector as a predicate on a label map (a nil selector selects nothing)."""
    if selector is None:
        return lambda labels: False
    tests = []
    for key, value in (selector.get("matchLabels") or {}).items():
        tests.append(lambda labels, k=key, v=value: labels.get(k) == v)
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], set(expr.get("values") or [])
        if op == "In":
            tests.append(lambda labels, k=key, vs=values: k in labels and labels[k] in vs)
        elif op == "NotIn":
            tests.append(lambda labels, k=key, vs=values: k not in labels or labels[k] not in vs)
        elif op == "Exists":
            tests.append(lambda labels, k=key: k in labels)
        elif op == "DoesNotExist":
            tests.append(lambda labels, k=key: k not in labels)
    return lambda labels: all(test(labels) for test in tests)
