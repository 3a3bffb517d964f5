"""A small client of a real Kubernetes API server (the cluster of scripts/kube):
JSON over HTTPS with a bearer token, for the real-cluster tests and for
suc_controller.py. Plain urllib: no client library, nothing to install."""

import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

PLANS = "/apis/upgrade.cattle.io/v1/namespaces/{ns}/plans"
JOBS = "/apis/batch/v1/namespaces/{ns}/jobs"
PODS = "/api/v1/namespaces/{ns}/pods"
EVENTS = "/api/v1/namespaces/{ns}/events"
NODES = "/api/v1/nodes"


class ApiError(Exception):
    def __init__(self, method, path, status, body):
        super().__init__(f"{method} {path}: {status} {body[:500]}")
        self.status = status
        self.body = body


class Api:
    """One identity (a token) on one API server."""

    def __init__(self, server, ca_file, token, timeout=30):
        self.server = server.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.context = ssl.create_default_context(cafile=str(ca_file))

    @classmethod
    def from_kubeconfig(cls, path):
        config = yaml.safe_load(open(path))
        cluster = config["clusters"][0]["cluster"]
        return cls(cluster["server"], cluster["certificate-authority"], config["users"][0]["user"]["token"])

    def request(self, method, path, body=None, content_type="application/json", query=None):
        url = self.server + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self.context) as reply:
                text = reply.read().decode()
        except urllib.error.HTTPError as error:
            raise ApiError(method, path, error.code, error.read().decode(errors="replace")) from None
        return json.loads(text) if text else None

    def get(self, path, **query):
        return self.request("GET", path, query=query or None)

    def get_or_none(self, path):
        try:
            return self.get(path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    def items(self, path, **query):
        return self.get(path, **query)["items"]

    def create(self, path, body):
        return self.request("POST", path, body)

    def replace(self, path, body):
        return self.request("PUT", path, body)

    def merge_patch(self, path, body):
        return self.request("PATCH", path, body, "application/merge-patch+json")

    def delete(self, path, propagation="Background"):
        try:
            return self.request("DELETE", path, {"kind": "DeleteOptions", "apiVersion": "v1",
                                                 "propagationPolicy": propagation})
        except ApiError as error:
            if error.status != 404:
                raise
            return None

    def watch(self, path, timeout, **query):
        """The events of a watch on `path` from `resourceVersion` (in `query`), as (type, object), for at most
        `timeout` s: what a poll can miss, such as the last status of a pod that is deleted a moment later."""
        query = dict(query, watch="true", timeoutSeconds=str(int(timeout)))
        request = urllib.request.Request(self.server + path + "?" + urllib.parse.urlencode(query), method="GET")
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout + 30, context=self.context) as reply:
                for line in reply:
                    if line.strip():
                        event = json.loads(line)
                        yield event["type"], event["object"]
        except urllib.error.HTTPError as error:
            raise ApiError("GET", path, error.code, error.read().decode(errors="replace")) from None

    def wait_for(self, what, predicate, timeout, interval=0.5):
        """predicate() until it returns something true; AssertionError naming `what` after `timeout` s."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = predicate()
            except ApiError as error:
                last = error
            else:
                if last:
                    return last
            time.sleep(interval)
        raise AssertionError(f"not within {timeout} s: {what} (last: {last!r})")
