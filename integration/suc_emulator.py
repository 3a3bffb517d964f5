"""What system-upgrade-controller does to a Plan and its nodes, played against
the fake API server's Cluster for the `hoist prepare` tests and benchmark, and
for the image tests, whose Jobs run real pods.

The facts, from rancher/system-upgrade-controller's source (v0.15.3; v0.20.1
does the same in all of this):
- pkg/upgrade/handle_upgrade.go: a Plan resolved from spec.version gets
  status.latestVersion (munged) and the conditions LatestResolved True (reason
  Version) and Validated True (PlanIsValid); a new version sets Complete False,
  reason Resolved. Each change of status.applying sets Complete False, reason
  SyncJob; no node left to do sets Complete True, reason Complete.
- pkg/upgrade/plan/plan.go: status.latestHash is a SHA-224 of the latest
  version and the service account name (and of the Plan's secrets and the
  fields its upgrade.cattle.io/digest annotation names): nothing else of the
  spec.
- pkg/upgrade/job/job.go: one Job a node, backoffLimit from
  SYSTEM_UPGRADE_JOB_BACKOFF_LIMIT (99 in SUC's own manifests; 2 in the code),
  activeDeadlineSeconds from the Plan's jobActiveDeadlineSecs; the pod's
  restartPolicy is Never, so a failed pod is replaced by a new one (Kubernetes'
  Job controller) until a pod succeeds, the backoff limit is passed, or the
  deadline is.
- pkg/upgrade/handle_batch.go: a Job whose Failed condition is true sets the
  Plan's Complete False, reason JobFailed, message "Job <ns>/<job> failed on
  Node <node>: <the Job's reason>: <its message>"; the node stays in applying
  and is not labeled. A Job that completes labels its node
  plan.upgrade.cattle.io/<plan>=<hash>.
"""

import hashlib
import threading
import time

from fake_apiserver import NODE_API, PLAN_API, labels_match, munge

# The Job controller's words for a failed Job (batch/v1 JobFailed condition reasons and messages).
DEADLINE_EXCEEDED = ("DeadlineExceeded", "Job was active longer than specified deadline")
BACKOFF_LIMIT_EXCEEDED = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")


class SucEmulator:
    """Applies a Plan the way system-upgrade-controller does, on a thread:
    resolves it (status.latestVersion, status.latestHash, the conditions), then in
    batches of `concurrency` puts nodes in status.applying and runs a Job for each:
    pod after pod, each `run_pod(node, attempt, seconds_left)` returning its exit
    code (by default each pod takes `job_seconds` and succeeds, or exits 1 on a node
    of `failing`), until one succeeds, `backoff_limit` failed pods are exceeded, or
    `deadline` seconds pass. A Job that succeeds labels its node
    plan.upgrade.cattle.io/<plan>=<hash> (optionally setting its kubelet version)
    and drops it from applying; one that fails sets the Plan's Complete condition
    as SUC does, and the Plan goes no further (its node keeps its place in
    applying). With `label_lag`, applying is emptied first and the labels follow
    that many seconds later: the window in which a naive waiter that trusts
    applying alone exits too early."""

    def __init__(self, cluster, name, namespace, concurrency=1, job_seconds=0.3, label_lag=0.0,
                 set_kubelet=True, run_pod=None, failing=(), backoff_limit=99, deadline=None, backoff_seconds=0.0):
        self.cluster, self.name, self.namespace = cluster, name, namespace
        self.concurrency, self.job_seconds, self.label_lag = concurrency, job_seconds, label_lag
        self.set_kubelet = set_kubelet
        self.run_pod = run_pod or self._default_pod
        self.failing = set(failing)
        self.backoff_limit, self.deadline, self.backoff_seconds = backoff_limit, deadline, backoff_seconds
        self.labeled_at = {}  # node -> time.monotonic() of its label
        self.pods = {}  # node -> the exit codes of its Job's pods, in order
        self.failed_jobs = {}  # node -> (reason, message) of its failed Job
        self.thread = None
        self.error = None

    def _default_pod(self, node, attempt, seconds_left):
        time.sleep(self.job_seconds)
        return 1 if node in self.failing else 0

    def selected_nodes(self, plan):
        requirements = []
        selector = plan["spec"].get("nodeSelector")
        if selector is None:
            return []
        for key, value in (selector.get("matchLabels") or {}).items():
            requirements.append((key, "in", {value}))
        for expr in selector.get("matchExpressions") or []:
            op = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}[expr["operator"]]
            requirements.append((expr["key"], op, set(expr.get("values") or [])))
        requirements.append(("kubernetes.io/hostname", "exists", set()))
        requirements.append((f"plan.upgrade.cattle.io/{self.name}", "notin", {"disabled"}))
        with self.cluster.lock:
            nodes = [o for (a, _, _), o in sorted(self.cluster.objects.items()) if a == NODE_API]
        return [n["metadata"]["name"] for n in nodes if labels_match(requirements, n["metadata"].get("labels", {}))]

    def set_complete(self, status, reason, message=""):
        """The Plan's Complete condition, as SUC's PlanComplete.SetError() writes it."""
        conditions = [c for c in self.cluster.get(PLAN_API, self.name, self.namespace).get("status", {})
                      .get("conditions", []) if c["type"] != "Complete"]
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        conditions.append({"type": "Complete", "status": status, "reason": reason, "message": message,
                           "lastUpdateTime": now})
        self.cluster.set_plan_status(self.name, self.namespace, conditions=conditions)

    def resolve(self):
        plan = self.cluster.get(PLAN_API, self.name, self.namespace)
        version = munge(plan["spec"]["version"])
        latest_hash = hashlib.sha224((version + plan["spec"].get("serviceAccountName", "")).encode()).hexdigest()
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.cluster.set_plan_status(self.name, self.namespace, latestVersion=version, latestHash=latest_hash,
                                     applying=[], conditions=[
                                         {"type": "LatestResolved", "status": "True", "reason": "Version",
                                          "lastUpdateTime": now},
                                         {"type": "Validated", "status": "True", "reason": "PlanIsValid",
                                          "lastUpdateTime": now},
                                         {"type": "Complete", "status": "False", "reason": "Resolved",
                                          "lastUpdateTime": now}])
        return plan, version, latest_hash

    def job_name(self, node, latest_hash):
        # job.go: name.SafeConcatName("apply", plan, "on", node, "with", hash), cut to 63 characters.
        name = f"apply-{self.name}-on-{node}-with-{latest_hash}"
        return name if len(name) <= 63 else name[:57] + "-" + hashlib.sha256(name.encode()).hexdigest()[:5]

    def run_job(self, node):
        """Pod after pod until one succeeds (True), or the backoff limit or the deadline fails the Job (False)."""
        started = time.monotonic()
        codes = self.pods.setdefault(node, [])
        attempt = 0
        while True:
            left = None if self.deadline is None else self.deadline - (time.monotonic() - started)
            if left is not None and left <= 0:
                self.failed_jobs[node] = DEADLINE_EXCEEDED
                return False
            attempt += 1
            code = self.run_pod(node, attempt, left)
            codes.append(code)
            if code == 0:
                return True
            if len([c for c in codes if c != 0]) > self.backoff_limit:
                self.failed_jobs[node] = BACKOFF_LIMIT_EXCEEDED
                return False
            time.sleep(self.backoff_seconds)

    def run(self):
        plan, version, latest_hash = self.resolve()
        label = f"plan.upgrade.cattle.io/{self.name}"
        while True:
            todo = [n for n in self.selected_nodes(plan)
                    if self.cluster.get(NODE_API, n)["metadata"]["labels"].get(label) != latest_hash]
            if not todo:
                self.set_complete("True", "Complete")
                return
            batch = todo[: self.concurrency]
            self.cluster.set_plan_status(self.name, self.namespace, applying=batch)
            self.set_complete("False", "SyncJob")
            results = {}
            threads = [threading.Thread(target=lambda n=n: results.__setitem__(n, self.run_job(n))) for n in batch]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if self.label_lag:
                self.cluster.set_plan_status(self.name, self.namespace, applying=[])
                time.sleep(self.label_lag)
            for node in batch:
                if not results[node]:
                    continue
                if self.set_kubelet:
                    self.cluster.set_kubelet(node, plan["spec"]["version"])
                self.cluster.label_node(node, label, latest_hash)
                self.labeled_at[node] = time.monotonic()
            failed = [n for n in batch if not results[n]]
            if failed:
                node = failed[0]
                reason, message = self.failed_jobs[node]
                self.set_complete("False", "JobFailed", f"Job {self.namespace}/{self.job_name(node, latest_hash)} "
                                                        f"failed on Node {node}: {reason}: {message}")
                self.cluster.set_plan_status(self.name, self.namespace, applying=failed)
                return
            if not self.label_lag:
                self.cluster.set_plan_status(self.name, self.namespace, applying=[])

    def start(self, delay=0.0):
        def body():
            try:
                time.sleep(delay)
                self.run()
            except Exception as error:  # surfaced by join()
                self.error = error
        self.thread = threading.Thread(target=body, daemon=True)
        self.thread.start()
        return self

    def join(self, timeout=30):
        self.thread.join(timeout)
        if self.error:
            raise self.error
