"""What system-upgrade-controller does to a Plan and its nodes, played against
the fake API server's Cluster for the `hoist prepare` tests and benchmark."""

import hashlib
import threading
import time

from fake_apiserver import NODE_API, PLAN_API, labels_match, munge


class SucEmulator:
    """Applies a Plan the way system-upgrade-controller does, on a thread:
    resolves it (status.latestVersion, status.latestHash), then in batches of
    `concurrency` puts nodes in status.applying, "runs" a Job for `job_seconds`,
    labels the node plan.upgrade.cattle.io/<plan>=<hash> (optionally setting its
    kubelet version) and drops it from applying. With `label_lag`, applying is
    emptied first and the labels follow that many seconds later: the window in
    which a naive waiter that trusts applying alone exits too early."""

    def __init__(self, cluster, name, namespace, concurrency=1, job_seconds=0.3, label_lag=0.0,
                 set_kubelet=True):
        self.cluster, self.name, self.namespace = cluster, name, namespace
        self.concurrency, self.job_seconds, self.label_lag = concurrency, job_seconds, label_lag
        self.set_kubelet = set_kubelet
        self.labeled_at = {}  # node -> time.monotonic() of its label
        self.thread = None
        self.error = None

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

    def resolve(self):
        plan = self.cluster.get(PLAN_API, self.name, self.namespace)
        version = munge(plan["spec"]["version"])
        latest_hash = hashlib.sha224((version + plan["spec"].get("serviceAccountName", "")).encode()).hexdigest()
        self.cluster.set_plan_status(self.name, self.namespace, latestVersion=version, latestHash=latest_hash,
                                     applying=[])
        return plan, version, latest_hash

    def run(self):
        plan, version, latest_hash = self.resolve()
        label = f"plan.upgrade.cattle.io/{self.name}"
        while True:
            todo = [n for n in self.selected_nodes(plan)
                    if self.cluster.get(NODE_API, n)["metadata"]["labels"].get(label) != latest_hash]
            if not todo:
                return
            batch = todo[: self.concurrency]
            self.cluster.set_plan_status(self.name, self.namespace, applying=batch)
            time.sleep(self.job_seconds)
            if self.label_lag:
                self.cluster.set_plan_status(self.name, self.namespace, applying=[])
                time.sleep(self.label_lag)
            for node in batch:
                if self.set_kubelet:
                    self.cluster.set_kubelet(node, plan["spec"]["version"])
                self.cluster.label_node(node, label, latest_hash)
                self.labeled_at[node] = time.monotonic()
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
