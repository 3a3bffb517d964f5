"""A stand-in for kube-apiserver, enough for `hoist prepare` (no real one runs here).

Python standard library only. It serves, over TLS with a CA the test makes:
LIST and WATCH (and GET) of plans.upgrade.cattle.io/v1 and core/v1 nodes, with
labelSelector, fieldSelector (metadata.name), resourceVersion, timeoutSeconds
and allowWatchBookmarks, chunked like the real server; LISTs in pages (limit,
continue), each page from the snapshot of the first; 410 Gone for a compacted
resourceVersion (as the response or as an ERROR event in the stream), 410
Expired for a continue token whose snapshot was compacted; bearer
tokens with rotation; RBAC rules to enforce (403 in the real server's words); a
log of every request, for tests to count requests and check verbs; CREATE, GET
and PATCH (a JSON merge patch) of events.k8s.io/v1 Events, validated as the real
server validates them on create and on update (only the series may change), a
name taken answered 409 AlreadyExists and a stale resourceVersion 409 Conflict,
kept in `Cluster.events`.

`Cluster` holds the objects and the knobs; `make_pki` makes the certificates
with the openssl CLI; suc_emulator.py changes Plans and nodes over time the way
system-upgrade-controller does. Run as a script it serves a small cluster
(for trying hoist by hand).
"""

import hashlib
import http.server
import json
import re
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
from pathlib import Path

PLAN_API = ("upgrade.cattle.io", "v1", "plans")
NODE_API = ("", "v1", "nodes")
EVENT_API = ("events.k8s.io", "v1", "events")
DAEMONSET_API = ("apps", "v1", "daemonsets")


# ---------------------------------------------------------------- certificates

def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(directory, name="server", ca_name="ca", sans=("IP:127.0.0.1", "IP:::1", "DNS:localhost")):
    """Makes (once) a CA `<ca_name>.crt/.key` and a server certificate `<name>.crt/.key`
    signed by it with the given subjectAltNames. Returns the paths as a dict."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_crt = directory / f"{ca_name}.key", directory / f"{ca_name}.crt"
    if not ca_crt.exists():
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", ca_key.name, "-out", ca_crt.name, "-days", "2", "-subj", f"/CN=fake-{ca_name}",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
                 cwd=directory)
    key, crt, csr = directory / f"{name}.key", directory / f"{name}.crt", directory / f"{name}.csr"
    ext = directory / f"{name}.ext"
    ext.write_text("subjectAltName=" + ",".join(sans) + "\nextendedKeyUsage=serverAuth\n")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key.name,
             "-out", csr.name, "-subj", "/CN=kube-apiserver", cwd=directory)
    _openssl("x509", "-req", "-in", csr.name, "-CA", ca_crt.name, "-CAkey", ca_key.name, "-CAcreateserial",
             "-out", crt.name, "-days", "2", "-extfile", ext.name, cwd=directory)
    return {"ca": ca_crt, "ca_key": ca_key, "cert": crt, "key": key}


# ---------------------------------------------------------------- selectors

def _split_requirements(text):
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current)
    return [p.strip() for p in parts if p.strip()]


_SET_RE = re.compile(r"^(\S+)\s+(in|notin)\s+\((.*)\)$")


def parse_label_selector(text):
    """Parses the labelSelector syntax into (key, op, values) tuples; raises ValueError."""
    requirements = []
    for part in _split_requirements(text or ""):
        match = _SET_RE.match(part)
        if match:
            values = {v.strip() for v in match.group(3).split(",") if v.strip()}
            if not values:
                raise ValueError(f"no values in {part!r}")
            requirements.append((match.group(1), match.group(2), values))
        elif part.startswith("!"):
            requirements.append((part[1:].strip(), "!", set()))
        elif "!=" in part:
            key, value = part.split("!=", 1)
            requirements.append((key.strip(), "notin", {value.strip()}))
        elif "==" in part or "=" in part:
            key, value = re.split("==?", part, maxsplit=1)
            requirements.append((key.strip(), "in", {value.strip()}))
        elif re.match(r"^[A-Za-z0-9./_-]+$", part):
            requirements.append((part, "exists", set()))
        else:
            raise ValueError(f"unable to parse requirement {part!r}")
    return requirements


def labels_match(requirements, labels):
    for key, op, values in requirements:
        present = key in labels
        if op == "in" and not (present and labels[key] in values):
            return False
        if op == "notin" and present and labels[key] in values:
            return False
        if op == "exists" and not present:
            return False
        if op == "!" and present:
            return False
    return True


def parse_field_selector(text):
    fields = {}
    for part in _split_requirements(text or ""):
        if "=" not in part:
            raise ValueError(f"unable to parse field selector {part!r}")
        key, value = re.split("==?", part, maxsplit=1)
        if key not in ("metadata.name", "metadata.namespace"):
            raise ValueError(f"field label not supported: {key}")
        fields[key] = value
    return fields


def fields_match(fields, obj):
    meta = obj.get("metadata", {})
    return all(meta.get(key.split(".", 1)[1], "") == value for key, value in fields.items())


def munge(version):
    return version.replace("+", "-")


# ---------------------------------------------------------------- the cluster

class Cluster:
    """The objects, their history (for watches) and the knobs tests turn."""

    def __init__(self, tokens=("token-1",)):
        self.lock = threading.Condition()
        self.rv = 100
        self.objects = {}          # (api, namespace, name) -> object
        self.history = []          # (rv, api, type, old, new)
        self.compacted_rv = 0      # watches from before this get 410
        self.tokens = set(tokens)  # accepted bearer tokens
        self.rbac = None           # None: allow all; else a list of rules (see authorize)
        self.forbidden = set()     # (verb, resource) pairs answered 403
        self.fail_next = []        # statuses to answer the next requests with
        self.raw_next = []         # raw bytes to answer the next requests with (then the connection closes)
        self.gone_as_event = True  # 410 on watch as an ERROR event (the real server's way) or as the status
        self.bookmark_interval = 1.0
        self.chunk_split = 0       # >0: write each watch event in chunks of that many bytes
        self.watch_cut_generation = 0
        self.requests = []         # the request log (dicts)
        self.events = []           # the events.k8s.io/v1 Events created, as stored
        self.path_prefix = ""      # e.g. "/k8s/clusters/c-1": served only under it, as behind Rancher's proxy
        self.watches_open = 0
        self.list_snapshots = {}   # paged LISTs under way: id -> (resourceVersion, objects)
        self.expire_continues = 0  # >0: answer that many of the next continue tokens 410 Expired
        self.daemonset_conflicts = 0  # >0: answer that many of the next DaemonSet patches 409, as if written meanwhile

    # -- objects
    def _bump(self):
        self.rv += 1
        return str(self.rv)

    def put(self, api, obj):
        """Creates or replaces an object (deep-copied); records the event."""
        obj = json.loads(json.dumps(obj))
        meta = obj.setdefault("metadata", {})
        key = (api, meta.get("namespace", ""), meta["name"])
        with self.lock:
            old = self.objects.get(key)
            meta["resourceVersion"] = self._bump()
            if old is None:
                meta.setdefault("uid", hashlib.sha1(repr(key).encode()).hexdigest())
            self.objects[key] = obj
            self.history.append((self.rv, api, "MODIFIED" if old else "ADDED", old, obj))
            self.lock.notify_all()
        return obj

    def get(self, api, name, namespace=""):
        with self.lock:
            obj = self.objects.get((api, namespace, name))
            return json.loads(json.dumps(obj)) if obj else None

    def update(self, api, name, change, namespace=""):
        """Applies `change(obj)` to a copy of the object and stores it."""
        with self.lock:
            obj = self.get(api, name, namespace)
            change(obj)
            return self.put(api, obj)

    def delete(self, api, name, namespace=""):
        with self.lock:
            old = self.objects.pop((api, namespace, name))
            gone = json.loads(json.dumps(old))
            gone["metadata"]["resourceVersion"] = self._bump()
            self.history.append((self.rv, api, "DELETED", old, gone))
            self.lock.notify_all()

    def list(self, api, namespace, labels, fields):
        with self.lock:
            items = [json.loads(json.dumps(o)) for (a, ns, _), o in sorted(self.objects.items())
                     if a == api and (not namespace or ns == namespace)
                     and labels_match(labels, o["metadata"].get("labels", {})) and fields_match(fields, o)]
            return items, str(self.rv)

    # -- convenience for tests
    def add_node(self, name, labels=None, kubelet="v1.29.0+k3s1"):
        all_labels = {"kubernetes.io/hostname": name}
        all_labels.update(labels or {})
        return self.put(NODE_API, {"apiVersion": "v1", "kind": "Node",
                                   "metadata": {"name": name, "labels": all_labels},
                                   "status": {"nodeInfo": {"kubeletVersion": kubelet}}})

    def label_node(self, name, key, value):
        def change(node):
            labels = node["metadata"].setdefault("labels", {})
            if value is None:
                labels.pop(key, None)
            else:
                labels[key] = value
        return self.update(NODE_API, name, change)

    def set_kubelet(self, name, version):
        return self.update(NODE_API, name, lambda n: n["status"]["nodeInfo"].__setitem__("kubeletVersion", version))

    def put_plan(self, name, namespace, spec, status=None):
        plan = {"apiVersion": "upgrade.cattle.io/v1", "kind": "Plan",
                "metadata": {"name": name, "namespace": namespace}, "spec": spec}
        if status is not None:
            plan["status"] = status
        return self.put(PLAN_API, plan)

    def set_plan_status(self, name, namespace, **fields):
        def change(plan):
            plan.setdefault("status", {}).update(fields)
        return self.update(PLAN_API, name, change, namespace)

    # -- knobs
    def compact(self):
        """Forgets the history: every watch from an older resourceVersion, and every continue
        token of a paged LIST read before, gets 410."""
        with self.lock:
            self.compacted_rv = self.rv
            self.history = []
            self.list_snapshots = {}

    def cut_watches(self):
        """Drops every open watch connection mid-stream (no terminal chunk)."""
        with self.lock:
            self.watch_cut_generation += 1
            self.lock.notify_all()

    def rotate_token(self, new_token):
        """Accepts only `new_token` from now on (open watches stay open, as in Kubernetes)."""
        with self.lock:
            self.tokens = {new_token}
            self.lock.notify_all()

    def log_requests(self, **match):
        with self.lock:
            return [r for r in self.requests if all(r.get(k) == v for k, v in match.items())]

    def wait_for(self, predicate, timeout=10):
        """Waits until predicate(self) is true (checked on every change and every 50 ms)."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("condition not reached")
                self.lock.wait(min(left, 0.05))

    def authorize(self, verb, group, resource, namespace):
        """RBAC as the real authorizer applies it to our requests: a rule allows when
        its apiGroups, resources and verbs contain the request's (or '*') and it is
        cluster-wide or bound in the request's namespace."""
        if (verb, resource) in self.forbidden:
            return False
        if self.rbac is None:
            return True
        for rule in self.rbac:
            if rule.get("namespace") is not None and rule["namespace"] != namespace:
                continue
            if not (set(rule["apiGroups"]) & {group, "*"}):
                continue
            if not (set(rule["resources"]) & {resource, "*"}):
                continue
            if set(rule["verbs"]) & {verb, "*"}:
                return True
        return False


# ---------------------------------------------------------------- events

_MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
_QUALIFIED = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def validate_event_update(new, old):
    """What kube-apiserver checks of an update of an events.k8s.io/v1 Event (ValidateEventUpdate in
    pkg/apis/core/validation/events.go): everything but the series and the metadata is immutable, and a series
    changed must count at least 2 and carry lastObservedTime. The problems, or []."""
    problems = validate_event(new, old["metadata"]["namespace"])
    for field in ("regarding", "related", "reason", "note", "type", "action", "eventTime", "reportingController",
                  "reportingInstance", "deprecatedSource", "deprecatedFirstTimestamp", "deprecatedLastTimestamp",
                  "deprecatedCount"):
        if new.get(field) != old.get(field):
            problems.append(f"{field}: Invalid value: field is immutable")
    if new["metadata"].get("name") != old["metadata"].get("name"):
        problems.append("metadata.name: Invalid value: field is immutable")
    series = new.get("series")
    if series != old.get("series") and series is not None:
        if not isinstance(series, dict) or not isinstance(series.get("count"), int) or series["count"] < 2:
            problems.append("series.count: Invalid value: should be at least 2")
        if not isinstance(series, dict) or not _MICRO_TIME.match(str(series.get("lastObservedTime", ""))):
            problems.append("series.lastObservedTime: Required value")
    return problems


def merge_patch(target, patch):
    """RFC 7386: objects merged key by key, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return json.loads(json.dumps(patch))
    result = json.loads(json.dumps(target)) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def validate_event(event, namespace):
    """What kube-apiserver checks of an events.k8s.io/v1 Event on create (pkg/apis/core/validation/events.go):
    the problems, or [] for a valid one."""
    problems = []
    if not isinstance(event, dict) or event.get("apiVersion") != "events.k8s.io/v1" or event.get("kind") != "Event":
        return ["not an events.k8s.io/v1 Event"]
    meta = event.get("metadata") or {}
    if not meta.get("name") or len(meta["name"]) > 253:
        problems.append("metadata.name: Required value")
    if meta.get("namespace", namespace) != namespace:
        problems.append("metadata.namespace: does not match the namespace of the request")
    if not _MICRO_TIME.match(str(event.get("eventTime", ""))):
        problems.append("eventTime: Required value")
    controller = event.get("reportingController", "")
    if not controller or len(controller) > 316 or not _QUALIFIED.match(controller):
        problems.append("reportingController: Invalid value")
    for field, limit in (("reportingInstance", 128), ("action", 128), ("reason", 128)):
        if not event.get(field) or len(event[field]) > limit:
            problems.append(f"{field}: Required value, at most {limit} characters")
    if event.get("type") not in ("Normal", "Warning"):
        problems.append("type: Unsupported value")
    if len(event.get("note", "").encode()) > 1024:
        problems.append("note: Too long: may not be more than 1024 bytes")
    regarding = event.get("regarding") or {}
    if not regarding.get("kind") or not regarding.get("name"):
        problems.append("regarding: Required value")
    if not regarding.get("namespace") and namespace not in ("", "default"):
        problems.append("regarding.namespace: does not match event.namespace")
    return problems


# ---------------------------------------------------------------- HTTP

# The real server's message for a continue token whose resourceVersion was compacted (storage/errors.go).
_CONTINUE_EXPIRED = ("The provided continue parameter is too old to display a consistent list result. You can start "
                     "a new list without the continue parameter, or use the continue token in this response to "
                     "retrieve the remainder of the results. Continuing with the provided token results in an "
                     "inconsistent list - objects that were created, modified, or deleted between the time the "
                     "first chunk was returned and now may show up in the list.")


def _status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-apiserver"
    cluster: Cluster = None  # set per server class

    def log_message(self, fmt, *args):  # quiet
        pass

    def _send_json(self, code, body):
        self._send_data(code, json.dumps(body).encode())

    def _send_data(self, code, data):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_GET(self):  # noqa: N802 (http.server's naming)
        cluster = self.cluster
        url = urllib.parse.urlsplit(self.path)
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        path = self._unprefixed(url.path)
        parts = [p for p in (path or "").split("/") if p] if path is not None else ["not-served"]
        entry = {"time": time.monotonic(), "method": "GET", "path": url.path, "query": query}
        # /api/v1/nodes[/name]  or  /apis/upgrade.cattle.io/v1/namespaces/NS/plans[/name]
        namespace, name = "", None
        if parts[:2] == ["api", "v1"]:
            api, rest = NODE_API, parts[2:]
        elif parts[:3] == ["apis", "upgrade.cattle.io", "v1"]:
            api, rest = PLAN_API, parts[3:]
        elif parts[:3] == ["apis", "apps", "v1"]:
            api, rest = DAEMONSET_API, parts[3:]
        elif parts[:3] == ["apis", "events.k8s.io", "v1"] and len(parts) == 7 and parts[3] == "namespaces" \
                and parts[5] == "events":
            return self._event_request("GET", parts[4], parts[6], entry, b"")
        else:
            entry.update(status=404)
            with cluster.lock:
                cluster.requests.append(entry)
            return self._send_json(404, _status(404, "NotFound", "the server could not find the requested resource"))
        if rest[:1] == ["namespaces"] and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        resource = rest[0] if rest else ""
        name = rest[1] if len(rest) > 1 else None
        watch = query.get("watch") in ("true", "1")
        verb = "get" if name else ("watch" if watch else "list")
        entry.update(verb=verb, group=api[0], resource=resource, namespace=namespace, name=name)

        token = None
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            token = auth[len("Bearer "):]
        entry["token"] = token
        with cluster.lock:
            cluster.requests.append(entry)
            injected = cluster.fail_next.pop(0) if cluster.fail_next else None
            raw = cluster.raw_next.pop(0) if cluster.raw_next and not injected else None
            token_ok = token in cluster.tokens
        if raw is not None:
            entry["status"] = "raw"
            self.close_connection = True
            self.wfile.write(raw)
            self.wfile.flush()
            return None
        if injected:
            entry["status"] = injected
            return self._send_json(injected, _status(injected, "InternalError", f"injected failure {injected}"))
        if not token_ok:
            entry["status"] = 401
            return self._send_json(401, _status(401, "Unauthorized", "Unauthorized"))
        if (api == PLAN_API and (resource != "plans" or not namespace)) or (api == NODE_API and resource != "nodes") \
                or (api == DAEMONSET_API and (resource != "daemonsets" or not namespace or not name)):
            entry["status"] = 404
            return self._send_json(404, _status(404, "NotFound", "the server could not find the requested resource"))
        if not cluster.authorize(verb, api[0], resource, namespace):
            entry["status"] = 403
            group_text = f'in API group "{api[0]}"' if api[0] else 'in API group ""'
            where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
            full = f"{resource}.{api[0]}" if api[0] else resource
            return self._send_json(403, _status(
                403, "Forbidden", f'{full} is forbidden: User "system:serviceaccount:test:hoist" cannot {verb} '
                                  f'resource "{resource}" {group_text}{where}'))
        try:
            labels = parse_label_selector(query.get("labelSelector", ""))
            fields = parse_field_selector(query.get("fieldSelector", ""))
        except ValueError as error:
            entry["status"] = 400
            return self._send_json(400, _status(400, "BadRequest", str(error)))

        if verb == "get":
            obj = cluster.get(api, name, namespace)
            entry["status"] = 200 if obj else 404
            if not obj:
                return self._send_json(404, _status(404, "NotFound", f'{resource} "{name}" not found'))
            return self._send_json(200, obj)
        if verb == "list":
            return self._list(api, namespace, labels, fields, query, entry)
        return self._watch(api, namespace, labels, fields, query, entry)

    def _list(self, api, namespace, labels, fields, query, entry):
        """A LIST, whole or in pages (`limit`, `continue`) as the real server pages one read from etcd: every
        page from the snapshot the first one was read at, and 410 Expired for a token whose snapshot is gone."""
        cluster = self.cluster
        kind = "PlanList" if api == PLAN_API else "NodeList"
        api_version = "upgrade.cattle.io/v1" if api == PLAN_API else "v1"
        limit_text, token = query.get("limit", ""), query.get("continue", "")
        if limit_text and not limit_text.isdigit():
            return self._deny(entry, 400, "BadRequest", f"invalid limit {limit_text!r}")
        limit = int(limit_text or "0")
        if not token and not limit:
            items, rv = cluster.list(api, namespace, labels, fields)
            entry["status"] = 200
            return self._send_json(200, {"kind": kind, "apiVersion": api_version,
                                         "metadata": {"resourceVersion": rv}, "items": items})
        with cluster.lock:
            if token:
                try:
                    snapshot_id, start = (int(part) for part in token.split(":"))
                except ValueError:
                    return self._deny(entry, 400, "BadRequest", f"continue key is not valid: {token!r}")
                snapshot = cluster.list_snapshots.get(snapshot_id)
                expire = cluster.expire_continues > 0
                if expire:
                    cluster.expire_continues -= 1
                if snapshot is None or expire or int(snapshot[0]) < cluster.compacted_rv:
                    return self._deny(entry, 410, "Expired", _CONTINUE_EXPIRED)
            else:
                start = 0
                snapshot_id = len(cluster.list_snapshots) + 1
                # The stored objects are replaced on every change, never changed in place: the
                # references are the snapshot.
                snapshot = (str(cluster.rv), [o for (a, ns, _), o in sorted(cluster.objects.items())
                                              if a == api and (not namespace or ns == namespace)
                                              and labels_match(labels, o["metadata"].get("labels", {}))
                                              and fields_match(fields, o)])
                cluster.list_snapshots[snapshot_id] = snapshot
            rv, objects = snapshot
            end = start + limit if limit else len(objects)
            page = objects[start:end]
            entry.update(status=200, resourceVersion=rv)
            metadata = {"resourceVersion": rv}
            if end < len(objects):
                metadata["continue"] = f"{snapshot_id}:{end}"
                metadata["remainingItemCount"] = len(objects) - end
            else:
                cluster.list_snapshots.pop(snapshot_id, None)
            # Serialized under the lock, page by page: the objects are shared with the cluster.
            data = json.dumps({"kind": kind, "apiVersion": api_version, "metadata": metadata, "items": page}).encode()
        return self._send_data(200, data)

    def _watch(self, api, namespace, labels, fields, query, entry):
        cluster = self.cluster
        since = query.get("resourceVersion", "")
        timeout = float(query.get("timeoutSeconds", "1800"))
        bookmarks = query.get("allowWatchBookmarks") == "true"

        def visible(obj):
            return (obj is not None and (not namespace or obj["metadata"].get("namespace", "") == namespace)
                    and labels_match(labels, obj["metadata"].get("labels", {})) and fields_match(fields, obj))

        with cluster.lock:
            too_old = since not in ("", "0") and int(since) < cluster.compacted_rv
            start_rv = cluster.rv if since in ("", "0") else int(since)
            initial = []
            if since in ("", "0"):
                initial = [("ADDED", o) for (a, _, _), o in sorted(cluster.objects.items()) if a == api and visible(o)]
            cut_generation = cluster.watch_cut_generation
        gone = _status(410, "Expired", f"too old resource version: {since} ({cluster.compacted_rv})")
        if too_old and not cluster.gone_as_event:
            entry["status"] = 410
            return self._send_json(410, gone)
        entry["status"] = 200
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

        def send(kind, obj):
            data = json.dumps({"type": kind, "object": obj}).encode() + b"\n"
            step = cluster.chunk_split or len(data)
            for i in range(0, len(data), step):  # events cut across chunks, as proxies may
                self._chunk(data[i:i + step])

        with cluster.lock:
            cluster.watches_open += 1
        try:
            if too_old:
                send("ERROR", gone)
                self._chunk(b"")
                return
            for kind, obj in initial:
                send(kind, obj)
            ends = time.monotonic() + timeout
            last_bookmark = time.monotonic()
            seen = start_rv
            while True:
                with cluster.lock:
                    events = [h for h in cluster.history if h[0] > seen and h[1] == api]
                    if not events and cluster.watch_cut_generation == cut_generation:
                        cluster.lock.wait(0.05)
                        events = [h for h in cluster.history if h[0] > seen and h[1] == api]
                    cut = cluster.watch_cut_generation != cut_generation
                    current_rv = cluster.rv
                if cut:
                    # Drop the TCP connection without the terminal chunk, as a
                    # dying apiserver or a load balancer does.
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                for rv, _, kind, old, new in events:
                    seen = rv
                    was, now = visible(old), visible(new)
                    if kind == "DELETED":
                        if was:
                            send("DELETED", new)
                    elif was and now:
                        send("MODIFIED", new)
                    elif now:
                        send("ADDED", new)
                    elif was:
                        send("DELETED", new)  # left the selector: the real watch cache says DELETED
                # Every event up to current_rv was in `events` (same lock), so a
                # bookmark there loses nothing for a client that resumes from it.
                seen = max(seen, current_rv)
                if bookmarks and time.monotonic() - last_bookmark >= cluster.bookmark_interval:
                    kind_name = "Plan" if api == PLAN_API else "Node"
                    send("BOOKMARK", {"kind": kind_name, "metadata": {"resourceVersion": str(seen)}})
                    last_bookmark = time.monotonic()
                if time.monotonic() >= ends:
                    self._chunk(b"")  # the server ends the watch cleanly
                    return
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True
        finally:
            with cluster.lock:
                cluster.watches_open -= 1


    def _unprefixed(self, path):
        """The API path under the cluster's path_prefix, or None when the request is not under it."""
        prefix = self.cluster.path_prefix
        if not prefix:
            return path
        return path[len(prefix):] if path.startswith(prefix + "/") else None

    def _deny(self, entry, code, reason, message):
        entry["status"] = code
        return self._send_json(code, _status(code, reason, message))

    def _event_request(self, method, namespace, name, entry, body):
        """GET or PATCH of the Event `name`, with what every request gets: the log, injected failures, the token,
        RBAC."""
        cluster = self.cluster
        verb = {"GET": "get", "PATCH": "patch"}[method]
        auth = self.headers.get("Authorization", "")
        token = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
        entry.update(verb=verb, group=EVENT_API[0], resource="events", namespace=namespace, name=name, token=token)
        with cluster.lock:
            cluster.requests.append(entry)
            injected = cluster.fail_next.pop(0) if cluster.fail_next else None
            token_ok = token in cluster.tokens
        if injected:
            return self._deny(entry, injected, "InternalError", f"injected failure {injected}")
        if not token_ok:
            return self._deny(entry, 401, "Unauthorized", "Unauthorized")
        if not cluster.authorize(verb, EVENT_API[0], "events", namespace):
            return self._deny(entry, 403, "Forbidden",
                              f'events.events.k8s.io "{name}" is forbidden: User "system:serviceaccount:test:hoist" '
                              f'cannot {verb} resource "events" in API group "events.k8s.io" in the namespace '
                              f'"{namespace}"')
        with cluster.lock:
            index = next((i for i, e in enumerate(cluster.events) if e["metadata"]["name"] == name
                          and e["metadata"]["namespace"] == namespace), None)
            stored = json.loads(json.dumps(cluster.events[index])) if index is not None else None
        if stored is None:
            return self._deny(entry, 404, "NotFound", f'events.events.k8s.io "{name}" not found')
        if method == "GET":
            entry["status"] = 200
            return self._send_json(200, stored)
        if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/merge-patch+json":
            return self._deny(entry, 415, "UnsupportedMediaType", "the body is not application/merge-patch+json")
        try:
            patch = json.loads(body)
        except ValueError as error:
            return self._deny(entry, 400, "BadRequest", f"invalid JSON: {error}")
        updated = merge_patch(stored, patch)
        with cluster.lock:
            current = cluster.events[index]
            wanted = (patch.get("metadata") or {}).get("resourceVersion")
            if wanted is not None and wanted != current["metadata"]["resourceVersion"]:
                return self._deny(entry, 409, "Conflict",
                                  f'Operation cannot be fulfilled on events.events.k8s.io "{name}": the object has '
                                  f'been modified; please apply your changes to the latest version and try again')
            problems = validate_event_update(updated, current)
            if problems:
                return self._deny(entry, 422, "Invalid", "Event is invalid: " + "; ".join(problems))
            updated["metadata"]["resourceVersion"] = cluster._bump()
            cluster.events[index] = updated
            cluster.lock.notify_all()
        entry["status"] = 200
        return self._send_json(200, updated)

    def do_PATCH(self):  # noqa: N802 (http.server's naming)
        url = urllib.parse.urlsplit(self.path)
        path = self._unprefixed(url.path)
        parts = [p for p in path.split("/") if p] if path is not None else ["not-served"]
        entry = {"time": time.monotonic(), "method": "PATCH", "path": url.path, "query": {}}
        length = self.headers.get("Content-Length")
        body = self.rfile.read(int(length)) if length and length.isdigit() else b""
        if len(parts) == 7 and parts[:3] == ["apis", "apps", "v1"] and parts[3] == "namespaces" \
                and parts[5] == "daemonsets":
            return self._daemonset_patch(parts[4], parts[6], entry, body)
        if not (len(parts) == 7 and parts[:3] == ["apis", "events.k8s.io", "v1"] and parts[3] == "namespaces"
                and parts[5] == "events"):
            with self.cluster.lock:
                self.cluster.requests.append(entry)
            return self._deny(entry, 404, "NotFound", "the server could not find the requested resource")
        return self._event_request("PATCH", parts[4], parts[6], entry, body)

    def _admit_body(self, entry, injected, token_ok, verb, what, content_type, body):
        """What a write goes through before its object is looked at: an injected failure, the token, RBAC (for
        `what`: group, resource, namespace and name, as the request names them), the content type and the JSON.
        (True, the document), or (False, None) once the refusal is sent."""
        group, resource, namespace, name = what
        if injected:
            self._deny(entry, injected, "Conflict" if injected == 409 else "InternalError",
                       f"injected failure {injected}")
            return False, None
        if not token_ok:
            self._deny(entry, 401, "Unauthorized", "Unauthorized")
            return False, None
        if not self.cluster.authorize(verb, group, resource, namespace):
            named = f' "{name}"' if name else ""
            self._deny(entry, 403, "Forbidden",
                       f'{resource}.{group}{named} is forbidden: User "system:serviceaccount:test:hoist" cannot '
                       f'{verb} resource "{resource}" in API group "{group}" in the namespace "{namespace}"')
            return False, None
        if self.headers.get("Content-Type", "").split(";")[0].strip() != content_type:
            self._deny(entry, 415, "UnsupportedMediaType", f"the body is not {content_type}")
            return False, None
        try:
            return True, json.loads(body)
        except ValueError as error:
            self._deny(entry, 400, "BadRequest", f"invalid JSON: {error}")
            return False, None

    def _daemonset_patch(self, namespace, name, entry, body):
        """A merge patch of a DaemonSet, as kube-apiserver takes one: a metadata.resourceVersion in it is a
        precondition (409 Conflict when the object moved on), everything else merged (RFC 7386)."""
        cluster = self.cluster
        auth = self.headers.get("Authorization", "")
        token = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
        entry.update(verb="patch", group="apps", resource="daemonsets", namespace=namespace, name=name, token=token)
        with cluster.lock:
            cluster.requests.append(entry)
            injected = cluster.fail_next.pop(0) if cluster.fail_next else None
            token_ok = token in cluster.tokens
        admitted, patch = self._admit_body(entry, injected, token_ok, "patch", ("apps", "daemonsets", namespace, name),
                                           "application/merge-patch+json", body)
        if not admitted:
            return None
        with cluster.lock:
            current = cluster.get(DAEMONSET_API, name, namespace)
            if current is None:
                return self._deny(entry, 404, "NotFound", f'daemonsets.apps "{name}" not found')
            wanted = (patch.get("metadata") or {}).get("resourceVersion")
            moved = cluster.daemonset_conflicts > 0
            if moved:
                cluster.daemonset_conflicts -= 1
                current = cluster.put(DAEMONSET_API, current)  # another writer: a new resourceVersion
            if wanted is not None and wanted != current["metadata"]["resourceVersion"]:
                return self._deny(entry, 409, "Conflict",
                                  f'Operation cannot be fulfilled on daemonsets.apps "{name}": the object has been '
                                  f'modified; please apply your changes to the latest version and try again')
            stored = cluster.put(DAEMONSET_API, merge_patch(current, patch))
        entry["status"] = 200
        return self._send_json(200, stored)

    def do_POST(self):  # noqa: N802 (http.server's naming)
        cluster = self.cluster
        url = urllib.parse.urlsplit(self.path)
        path = self._unprefixed(url.path)
        parts = [p for p in path.split("/") if p] if path is not None else ["not-served"]
        entry = {"time": time.monotonic(), "method": "POST", "path": url.path, "query": {}, "verb": "create"}
        length = self.headers.get("Content-Length")
        body = self.rfile.read(int(length)) if length and length.isdigit() else b""
        auth = self.headers.get("Authorization", "")
        token = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
        entry["token"] = token
        with cluster.lock:
            cluster.requests.append(entry)
            injected = cluster.fail_next.pop(0) if cluster.fail_next else None
            token_ok = token in cluster.tokens
        # /apis/events.k8s.io/v1/namespaces/NS/events: the only collection hoist creates in.
        if not (len(parts) == 6 and parts[:3] == ["apis", "events.k8s.io", "v1"] and parts[3] == "namespaces"
                and parts[5] == "events"):
            return self._deny(entry, 404, "NotFound", "the server could not find the requested resource")
        namespace = parts[4]
        entry.update(group=EVENT_API[0], resource="events", namespace=namespace, name=None)
        admitted, event = self._admit_body(entry, injected, token_ok, "create",
                                           (EVENT_API[0], "events", namespace, None), "application/json", body)
        if not admitted:
            return None
        problems = validate_event(event, namespace)
        if problems:
            return self._deny(entry, 422, "Invalid", "Event is invalid: " + "; ".join(problems))
        with cluster.lock:
            taken = any(e["metadata"]["name"] == event["metadata"]["name"] and e["metadata"]["namespace"] == namespace
                        for e in cluster.events)
            if not taken:
                event["metadata"]["namespace"] = namespace
                event["metadata"]["resourceVersion"] = cluster._bump()
                event["metadata"]["uid"] = hashlib.sha1(repr(("event", namespace, event["metadata"]["name"])
                                                             ).encode()).hexdigest()
                cluster.events.append(event)
                cluster.lock.notify_all()
        if taken:
            return self._deny(entry, 409, "AlreadyExists",
                              f'events.events.k8s.io "{event["metadata"]["name"]}" already exists')
        entry["status"] = 201
        return self._send_json(201, event)


class FakeApiServer:
    """The server on a thread: `with FakeApiServer(cluster, pki) as server: server.port`."""

    def __init__(self, cluster, pki, host="127.0.0.1", port=0):
        self.cluster = cluster
        handler = type("Handler", (_Handler,), {"cluster": cluster})
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        server_class = type("Server", (http.server.ThreadingHTTPServer,),
                            {"address_family": family, "daemon_threads": True, "allow_reuse_address": True,
                             # a client that refuses our certificate is a test, not a server bug
                             "handle_error": lambda self, request, address: None})
        self.httpd = server_class((host, port), handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pki["cert"], pki["key"])
        # The handshake happens in the handler's thread, not in accept(): a client
        # that refuses our certificate must not stall the accept loop.
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True, do_handshake_on_connect=False)
        self.host = host
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.cluster.cut_watches()
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def url(self):
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}"


def free_port(host="127.0.0.1"):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def write_kubeconfig(path, server_url, ca_path, token=None, token_file=None, namespace=None):
    """A kubeconfig in YAML, as kubectl writes one."""
    user = f"    token: {token}\n" if token else f"    tokenFile: {token_file}\n" if token_file else "    {}\n"
    ns = f"    namespace: {namespace}\n" if namespace else ""
    Path(path).write_text(
        "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n"
        f"    certificate-authority: {ca_path}\n    server: {server_url}\n  name: fake\n"
        f"contexts:\n- context:\n    cluster: fake\n    user: hoist\n{ns}  name: fake\n"
        f"current-context: fake\nusers:\n- name: hoist\n  user:\n{user}")
    return path


if __name__ == "__main__":
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description="serve a small fake cluster for trying `hoist prepare`")
    parser.add_argument("--port", type=int, default=6443)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="fake-apiserver-"))
    pki = make_pki(tmp)
    cluster = Cluster()
    for i in range(3):
        cluster.add_node(f"server-{i}", {"node-role.kubernetes.io/control-plane": "true"})
    with FakeApiServer(cluster, pki, port=args.port) as server:
        kubeconfig = write_kubeconfig(tmp / "kubeconfig", server.url, pki["ca"], token="token-1",
                                      namespace="system-upgrade")
        print(f"serving {server.url}; kubeconfig: {kubeconfig}", flush=True)
        cluster.put_plan("k3s-server", "system-upgrade",
                         {"version": "v1.30.1+k3s1", "concurrency": 1, "upgrade": {"image": "x"},
                          "nodeSelector": {"matchExpressions": [
                              {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]}})
        time.sleep(2)
        from suc_emulator import SucEmulator
        SucEmulator(cluster, "k3s-server", "system-upgrade", job_seconds=2).start().join(120)
        print("plan applied; Ctrl-C to stop", flush=True)
        while True:
            time.sleep(3600)
