"""`hoist prepare` against the fake API server: the scenarios of issue 5, driven
through the real static binary."""

import os
import socket
import threading
import time

import pytest

pytest.register_assert_rewrite("prepare_harness")  # before its import: it is also a plugin

from conftest import SANITIZER_ENV, parse_termination, run_recorded, termination
from fake_apiserver import NODE_API, PLAN_API, Cluster, FakeApiServer, free_port, make_pki, write_kubeconfig
from prepare_harness import (HOIST_BIN, NAMESPACE, SERVER_PLAN, can_fake_service_account, make_service_account,
                             put_server_plan, rotate_token_file, start_prepare, start_prepare_in_cluster, suc,
                             wait_for_watches)

pytest_plugins = ["prepare_harness"]  # the fixtures: pki, cluster, server, kubeconfig

LABEL = f"plan.upgrade.cattle.io/{SERVER_PLAN}"


def requests(cluster, **match):
    return cluster.log_requests(**match)


def test_a_missing_plan_is_waited_for_then_followed_to_completion(cluster, kubeconfig):
    prepare = start_prepare(SERVER_PLAN, "--timeout", 30, kubeconfig=kubeconfig)
    wait_for_watches(cluster, resource="plans")
    time.sleep(0.5)
    assert prepare.running(), prepare.stderr
    put_server_plan(cluster)
    emulator = suc(cluster, concurrency=2, job_seconds=0.3).start(delay=0.3)
    assert prepare.wait() == 0, prepare.stderr
    emulator.join()
    assert "plan 'k3s-server' does not exist yet; waiting for it to be created" in prepare.stderr
    assert "plan 'k3s-server': 3/3 nodes done at hash" in prepare.stderr
    assert prepare.exited_at >= max(emulator.labeled_at.values())
    # Watched, not polled: one LIST and one WATCH a resource (plus re-watches).
    assert len(requests(cluster, verb="list", resource="plans")) == 1
    assert len(requests(cluster, verb="list", resource="nodes")) == 1
    assert not requests(cluster, verb="get")
    # The nodes are filtered by the server with the Plan's selector.
    node_list = requests(cluster, verb="list", resource="nodes")[0]
    assert node_list["query"]["labelSelector"] == (
        "k3s-upgrade notin (false),kubernetes.io/hostname,node-role.kubernetes.io/control-plane,"
        "plan.upgrade.cattle.io/k3s-server notin (disabled)")
    assert requests(cluster, verb="list", resource="plans")[0]["query"]["fieldSelector"] == "metadata.name=k3s-server"
    for watch in requests(cluster, verb="watch"):
        assert watch["query"]["allowWatchBookmarks"] == "true"
        assert watch["query"]["resourceVersion"]


def test_applying_drained_while_labels_lag_is_not_complete(cluster, kubeconfig):
    cluster.chunk_split = 7  # and every watch event arrives cut into 7-byte chunks
    put_server_plan(cluster)
    # SUC empties status.applying a full second before the last labels land.
    emulator = suc(cluster, concurrency=3, job_seconds=0.2, label_lag=1.0).start()
    prepare = start_prepare(SERVER_PLAN, kubeconfig=kubeconfig)
    assert prepare.wait() == 0, prepare.stderr
    emulator.join()
    assert prepare.exited_at >= max(emulator.labeled_at.values())
    assert "plan 'k3s-server': 0/3 nodes done; waiting for: s1, s2, s3" in prepare.stderr


def test_a_watch_cut_midway_resumes_from_the_last_resource_version(cluster, kubeconfig):
    put_server_plan(cluster)
    prepare = start_prepare(SERVER_PLAN, kubeconfig=kubeconfig)
    wait_for_watches(cluster, resource="nodes")
    emulator = suc(cluster, job_seconds=0.4).start()
    cluster.wait_for(lambda c: len(emulator.labeled_at) >= 1)
    time.sleep(0.2)  # the label's MODIFIED event reaches hoist (the fake sends within 50 ms)
    cluster.cut_watches()
    assert prepare.wait() == 0, prepare.stderr
    emulator.join()
    node_watches = requests(cluster, verb="watch", resource="nodes")
    assert len(node_watches) >= 2
    assert int(node_watches[-1]["query"]["resourceVersion"]) > int(node_watches[0]["query"]["resourceVersion"])
    # A cut stream is re-watched, not re-listed: nothing was lost.
    assert len(requests(cluster, verb="list", resource="nodes")) == 1
    assert "closed the connection in the middle of a response" in prepare.stderr


@pytest.mark.parametrize("as_event", [True, False], ids=["error-event", "http-410"])
def test_410_gone_relists(cluster, kubeconfig, as_event):
    cluster.gone_as_event = as_event
    cluster.bookmark_interval = 3600  # a bookmark would move hoist past the compaction
    put_server_plan(cluster)
    prepare = start_prepare(SERVER_PLAN, kubeconfig=kubeconfig)
    wait_for_watches(cluster, resource="nodes")
    cluster.add_node("x9")  # a change hoist does not see (not selected), then history is gone
    cluster.compact()
    cluster.cut_watches()
    suc(cluster, job_seconds=0.2).start(delay=0.5).join()
    assert prepare.wait() == 0, prepare.stderr
    assert "is too old (410 Gone); listing again" in prepare.stderr
    assert len(requests(cluster, verb="list", resource="nodes")) >= 2
    assert len(requests(cluster, verb="list", resource="plans")) >= 2


@pytest.mark.skipif(not can_fake_service_account(), reason="needs root and unshare for a private mount namespace")
def test_in_cluster_a_rotated_token_is_reread_after_401(cluster, server, pki, tmp_path):
    account = make_service_account(tmp_path / "sa", pki["ca"], "token-1")
    put_server_plan(cluster)
    prepare = start_prepare_in_cluster(account, server, SERVER_PLAN)
    wait_for_watches(cluster, resource="nodes")
    rotate_token_file(account, "token-2")
    cluster.rotate_token("token-2")
    cluster.cut_watches()
    # Generous: on a loaded machine the reconnect after the cut can take longer than wait_for's default.
    cluster.wait_for(lambda c: any(r["token"] == "token-2" and r["status"] == 200 for r in c.requests), timeout=60)
    suc(cluster, job_seconds=0.2).start().join()
    assert prepare.wait() == 0, prepare.stderr
    rejected = [r for r in cluster.requests if r.get("status") == 401]
    assert rejected and all(r["token"] == "token-1" for r in rejected)
    # Namespace from the service account; the token in no log line.
    assert f"in namespace '{NAMESPACE}'" in prepare.stderr
    assert "token-1" not in prepare.stderr + prepare.stdout
    assert "token-2" not in prepare.stderr + prepare.stdout


def test_a_refused_token_fails_naming_the_request(cluster, server, pki, tmp_path):
    config = write_kubeconfig(tmp_path / "kc", server.url, pki["ca"], token="wrong-secret", namespace=NAMESPACE)
    prepare = start_prepare(SERVER_PLAN, kubeconfig=config)
    assert prepare.wait() == 1, prepare.stderr
    assert f"failed to list plans.upgrade.cattle.io in namespace '{NAMESPACE}' on '127.0.0.1:{server.port}': " \
           "401 Unauthorized" in prepare.stderr
    assert "wrong-secret" not in prepare.stderr


def test_the_wrong_ca_fails_naming_server_and_reason(cluster, server, tmp_path):
    other = make_pki(tmp_path / "other", ca_name="other-ca")
    config = write_kubeconfig(tmp_path / "kc", server.url, other["ca"], token="token-1", namespace=NAMESPACE)
    prepare = start_prepare(SERVER_PLAN, kubeconfig=config)
    assert prepare.wait() == 1, prepare.stderr
    assert prepare.elapsed < 5
    assert f"TLS handshake with '127.0.0.1:{server.port}' failed: the server's certificate is not trusted: " \
           "unable to get local issuer certificate" in prepare.stderr


def test_a_server_that_closes_during_the_handshake_is_retried_and_named(pki, tmp_path):
    # A TCP listener that reads each ClientHello and closes: no TLS reply, and nothing in OpenSSL's error queue.
    # A dropped connection is transient (an API server restarting), so prepare retries until its timeout.
    accepted = []

    def close_each(listener):
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.recv(4096)
            accepted.append(1)

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        closer = threading.Thread(target=close_each, args=(listener,), daemon=True)
        closer.start()
        config = write_kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{port}", pki["ca"], token="token-1",
                                  namespace=NAMESPACE)
        prepare = start_prepare(SERVER_PLAN, "--timeout", 3, kubeconfig=config)
        assert prepare.wait() == 1, prepare.stderr
        listener.shutdown(socket.SHUT_RDWR)
    closer.join(5)
    assert len(accepted) >= 2, prepare.stderr
    assert (f"TLS handshake with '127.0.0.1:{port}' failed: connection closed by the server; retrying"
            in prepare.stderr), prepare.stderr
    assert ("timed out after 3 s waiting for plan 'k3s-server' in namespace 'system-upgrade': the Plan could not be "
            "read from the API server; last error: failed to list plans.upgrade.cattle.io in namespace "
            f"'system-upgrade' on '127.0.0.1:{port}': TLS handshake with '127.0.0.1:{port}' failed: connection closed "
            "by the server") in prepare.stderr, prepare.stderr


def test_a_certificate_for_another_address_is_refused(tmp_path, pki):
    # Signed by the right CA, but for another IP: only the name check stops it.
    wrong = make_pki(pki["ca"].parent, name="wrong-san", sans=("IP:10.9.9.9", "DNS:elsewhere.example"))
    cluster = Cluster()
    with FakeApiServer(cluster, wrong) as other_server:
        config = write_kubeconfig(tmp_path / "kc", other_server.url, pki["ca"], token="token-1")
        prepare = start_prepare(SERVER_PLAN, kubeconfig=config)
        assert prepare.wait() == 1, prepare.stderr
        assert "the server's certificate is not trusted: IP address mismatch" in prepare.stderr
        config = write_kubeconfig(tmp_path / "kc2", f"https://localhost:{other_server.port}", pki["ca"],
                                  token="token-1")
        prepare = start_prepare(SERVER_PLAN, kubeconfig=config)
        assert prepare.wait() == 1, prepare.stderr
        assert "the server's certificate is not trusted: hostname mismatch" in prepare.stderr


@pytest.mark.parametrize("verb,resource,expected", [
    ("watch", "plans", "failed to watch plans.upgrade.cattle.io in namespace 'system-upgrade' on '127.0.0.1:{port}': "
                       "403 Forbidden (RBAC must allow verb 'watch' on resource 'plans' in API group "
                       "'upgrade.cattle.io' in namespace 'system-upgrade'): plans.upgrade.cattle.io is forbidden"),
    ("list", "nodes", "failed to list nodes on '127.0.0.1:{port}': 403 Forbidden (RBAC must allow verb 'list' on "
                      "resource 'nodes' in the core API group cluster-wide): nodes is forbidden"),
])
def test_forbidden_fails_naming_what_rbac_must_allow(cluster, server, kubeconfig, verb, resource, expected):
    cluster.forbidden.add((verb, resource))
    put_server_plan(cluster)
    prepare = start_prepare(SERVER_PLAN, kubeconfig=kubeconfig)
    assert prepare.wait() == 1, prepare.stderr
    assert expected.format(port=server.port) in prepare.stderr


def test_a_node_opted_out_with_disabled_is_not_waited_for(cluster, kubeconfig):
    cluster.label_node("s3", LABEL, "disabled")
    put_server_plan(cluster)
    emulator = suc(cluster, concurrency=1, job_seconds=0.2).start()
    prepare = start_prepare(SERVER_PLAN, kubeconfig=kubeconfig)
    assert prepare.wait() == 0, prepare.stderr
    emulator.join()
    assert set(emulator.labeled_at) == {"s1", "s2"}
    assert "plan 'k3s-server': 2/2 nodes done" in prepare.stderr


def test_the_timeout_fails_naming_the_nodes_still_missing(cluster, kubeconfig):
    put_server_plan(cluster)
    plan = suc(cluster).resolve()
    latest_hash = plan[2]
    cluster.label_node("s1", LABEL, latest_hash)
    cluster.set_plan_status(SERVER_PLAN, NAMESPACE, applying=["s2"])
    prepare = start_prepare(SERVER_PLAN, "--timeout", 2, kubeconfig=kubeconfig)
    assert prepare.wait() == 1, prepare.stderr
    assert 2 <= prepare.elapsed < 4
    assert ("timed out after 2 s waiting for plan 'k3s-server' in namespace 'system-upgrade': "
            "nodes not done: s2, s3 (applying: s2)") in prepare.stderr


def test_a_plan_whose_job_failed_fails_prepare_at_once_naming_suc_message(cluster, kubeconfig, tmp_path):
    # It waited out its whole --timeout after SUC had given up, said only "nodes not done", and wrote no
    # termination message.
    put_server_plan(cluster)
    message = tmp_path / "termination-log"
    message.write_text("")  # the kubelet makes the file
    prepare = start_prepare(SERVER_PLAN, "--timeout", 120, kubeconfig=kubeconfig,
                            env={"HOIST_TERMINATION_MESSAGE_PATH": str(message)})
    wait_for_watches(cluster, resource="plans")
    # s1's Job: three pods fail, then the Job's backoff limit (2, SUC's code default) fails it.
    emulator = suc(cluster, job_seconds=0.1, failing={"s1"}, backoff_limit=2).start()
    assert prepare.wait(timeout=60) == 1, prepare.stderr
    emulator.join()
    assert emulator.pods["s1"] == [1, 1, 1]
    assert prepare.elapsed < 30
    job = emulator.job_name("s1", cluster.get(PLAN_API, SERVER_PLAN, NAMESPACE)["status"]["latestHash"])
    suc_says = (f"Job system-upgrade/{job} failed on Node s1: BackoffLimitExceeded: Job has reached the specified "
                "backoff limit")
    error = f"plan 'k3s-server' in namespace 'system-upgrade' has failed: system-upgrade-controller says: {suc_says}"
    assert error in prepare.stderr
    assert parse_termination(message.read_text()) == termination("prepare", 1, error)


def test_a_failure_of_an_older_version_is_not_this_ones(cluster, kubeconfig):
    # SUC sets Complete to Resolved when the version changes; until it has, the status describes the old version.
    put_server_plan(cluster)
    suc(cluster, job_seconds=0.1, failing={"s1"}, backoff_limit=0).start().join()
    cluster.update(PLAN_API, SERVER_PLAN, lambda p: p["spec"].__setitem__("version", "v1.30.2+k3s1"), NAMESPACE)
    prepare = start_prepare(SERVER_PLAN, "--timeout", 60, kubeconfig=kubeconfig)
    wait_for_watches(cluster, resource="plans")
    time.sleep(0.5)
    assert prepare.running(), prepare.stderr
    suc(cluster, job_seconds=0.1).start().join()
    assert prepare.wait() == 0, prepare.stderr


def test_prepare_writes_the_termination_message_when_the_plan_is_complete(cluster, kubeconfig, tmp_path):
    put_server_plan(cluster)
    suc(cluster, concurrency=3, job_seconds=0).start().join()
    message = tmp_path / "termination-log"
    message.write_text("")
    prepare = start_prepare(SERVER_PLAN, kubeconfig=kubeconfig, env={"HOIST_TERMINATION_MESSAGE_PATH": str(message)})
    assert prepare.wait() == 0, prepare.stderr
    parsed = parse_termination(message.read_text())
    [line] = parsed["components"]
    assert (parsed["outcome"], parsed["error"]) == ("ok", None)
    assert line.startswith("plan 'k3s-server': 3/3 nodes done at hash ") and line.endswith("; complete"), line


def test_node_version_waits_for_the_kubelet_version(cluster, kubeconfig):
    put_server_plan(cluster)
    suc(cluster, concurrency=3, set_kubelet=False).start().join()
    prepare = start_prepare(SERVER_PLAN, "--node-version", "v1.30.1-k3s1", kubeconfig=kubeconfig)
    wait_for_watches(cluster, resource="nodes")
    time.sleep(0.5)
    assert prepare.running(), prepare.stderr
    for node in ("s1", "s2", "s3"):
        cluster.set_kubelet(node, "v1.30.1+k3s1")
    assert prepare.wait() == 0, prepare.stderr
    assert "labeled but on another kubelet version: s1, s2, s3" in prepare.stderr


def test_an_unreachable_server_is_retried_until_it_answers(cluster, pki, tmp_path):
    port = free_port()
    config = write_kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{port}", pki["ca"], token="token-1",
                              namespace=NAMESPACE)
    prepare = start_prepare(SERVER_PLAN, kubeconfig=config)
    time.sleep(1.5)
    assert prepare.running(), prepare.stderr
    with FakeApiServer(cluster, pki, port=port):
        put_server_plan(cluster)
        suc(cluster, concurrency=3, job_seconds=0.1).start().join()
        assert prepare.wait() == 0, prepare.stderr
    assert f"failed to list plans.upgrade.cattle.io in namespace 'system-upgrade' on '127.0.0.1:{port}': " \
           f"failed to connect to '127.0.0.1:{port}': Connection refused; retrying in" in prepare.stderr


def test_an_unreachable_server_fails_at_the_timeout_with_the_last_error(pki, tmp_path):
    port = free_port()
    config = write_kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{port}", pki["ca"], token="token-1",
                              namespace=NAMESPACE)
    prepare = start_prepare(SERVER_PLAN, "--timeout", 2, kubeconfig=config)
    assert prepare.wait() == 1, prepare.stderr
    assert ("timed out after 2 s waiting for plan 'k3s-server' in namespace 'system-upgrade': the Plan could not be "
            "read from the API server; last error: failed to list") in prepare.stderr
    # Backoff, not a busy loop: a handful of attempts in 2 s.
    assert prepare.stderr.count("retrying in") <= 2  # repeats of one error are logged at debug


def _start_prepare_before_its_server(pki, tmp_path, *args):
    """prepare against a port nothing listens on yet: it first finds the server unreachable, as during a
    restart of the API server; returns (prepare, port)."""
    port = free_port()
    config = write_kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{port}", pki["ca"], token="token-1",
                              namespace=NAMESPACE)
    prepare = start_prepare(SERVER_PLAN, *args, kubeconfig=config)
    time.sleep(1.5)
    assert prepare.running(), prepare.stderr
    return prepare, port


def test_a_403_from_a_server_just_back_is_retried_until_it_is_ready(cluster, pki, tmp_path):
    # A real kube-apiserver answers requests its RBAC allows with 403 for a few seconds after it comes back.
    cluster.forbidden.update({("list", "plans"), ("watch", "plans")})
    prepare, port = _start_prepare_before_its_server(pki, tmp_path, "--timeout", 60)
    with FakeApiServer(cluster, pki, port=port):
        put_server_plan(cluster)
        cluster.wait_for(lambda c: sum(r.get("status") == 403 for r in c.requests) >= 2, timeout=20)
        assert prepare.running(), prepare.stderr
        with cluster.lock:
            cluster.forbidden.clear()
        suc(cluster, concurrency=3, job_seconds=0.1).start().join()
        assert prepare.wait() == 0, prepare.stderr
    assert f"failed to list plans.upgrade.cattle.io in namespace 'system-upgrade' on '127.0.0.1:{port}': " \
           "403 Forbidden" in prepare.stderr
    assert "taken for a server still starting); retrying in" in prepare.stderr


def test_a_403_that_outlasts_the_timeout_fails_naming_it(cluster, pki, tmp_path):
    cluster.forbidden.add(("list", "plans"))
    prepare, port = _start_prepare_before_its_server(pki, tmp_path, "--timeout", 5)
    with FakeApiServer(cluster, pki, port=port):
        put_server_plan(cluster)
        assert prepare.wait() == 1, prepare.stderr
    assert "timed out after 5 s waiting for plan 'k3s-server'" in prepare.stderr
    assert "last error: failed to list plans.upgrade.cattle.io in namespace 'system-upgrade' on " \
           f"'127.0.0.1:{port}': 403 Forbidden" in prepare.stderr


def test_server_errors_are_retried(cluster, kubeconfig):
    cluster.fail_next = [500, 503]
    put_server_plan(cluster)
    suc(cluster, concurrency=3, job_seconds=0.1).start().join()
    prepare = start_prepare(SERVER_PLAN, kubeconfig=kubeconfig)
    assert prepare.wait() == 0, prepare.stderr
    assert "HTTP 500: injected failure 500; retrying in" in prepare.stderr


def test_waiting_costs_no_requests(cluster, kubeconfig):
    put_server_plan(cluster)
    suc(cluster).resolve()
    prepare = start_prepare(SERVER_PLAN, "--timeout", 30, kubeconfig=kubeconfig)
    wait_for_watches(cluster, resource="nodes")
    before = len(cluster.requests)
    time.sleep(3)
    assert len(cluster.requests) == before
    assert prepare.running()
    prepare.kill()


def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback")
def test_an_ipv6_server_in_brackets(cluster, pki, tmp_path):
    with FakeApiServer(cluster, pki, host="::1") as server6:
        assert server6.url.startswith("https://[::1]:")
        config = write_kubeconfig(tmp_path / "kc", server6.url, pki["ca"], token="token-1", namespace=NAMESPACE)
        put_server_plan(cluster)
        suc(cluster, concurrency=3, job_seconds=0.1).start().join()
        prepare = start_prepare(SERVER_PLAN, kubeconfig=config)
        assert prepare.wait() == 0, prepare.stderr
        assert f"on '[::1]:{server6.port}'" in prepare.stderr


@pytest.mark.skipif(not (ipv6_loopback() and can_fake_service_account()), reason="needs IPv6, root and unshare")
def test_in_cluster_with_an_ipv6_service_host(cluster, pki, tmp_path):
    account = make_service_account(tmp_path / "sa", pki["ca"], "token-1")
    with FakeApiServer(cluster, pki, host="::1") as server6:
        put_server_plan(cluster)
        suc(cluster, concurrency=3, job_seconds=0.1).start().join()
        prepare = start_prepare_in_cluster(account, server6, SERVER_PLAN)
        assert prepare.wait() == 0, prepare.stderr


def test_bad_usage_exits_2(kubeconfig):
    prepare = start_prepare("Not_A_Plan", kubeconfig=kubeconfig)
    assert prepare.wait() == 2
    assert "invalid plan name 'Not_A_Plan'" in prepare.stderr
    outside = start_prepare(SERVER_PLAN)
    assert outside.wait() == 2
    assert "not running in a Kubernetes pod" in outside.stderr


def test_kubeconfig_with_insecure_skip_is_refused(server, pki, tmp_path):
    config = write_kubeconfig(tmp_path / "kc", server.url, pki["ca"], token="token-1")
    config.write_text(config.read_text().replace("    server:", "    insecure-skip-tls-verify: true\n    server:"))
    prepare = start_prepare(SERVER_PLAN, kubeconfig=config)
    assert prepare.wait() == 2
    assert "insecure-skip-tls-verify is set; hoist always verifies" in prepare.stderr


# ---- the kubeconfig read strictly: no server is needed, every case is refused before a connection ----

def offline_kubeconfig(tmp_path, pki, **kwargs):
    return write_kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{free_port()}", pki["ca"], **kwargs)


def prepare_limited(config, memory=512 << 20):
    """prepare under an address-space limit, so that a parser that blows up fails fast instead of eating the
    machine (the old binary grew to gigabytes on ten lines of aliases)."""
    # A sanitizer build reserves terabytes of address space for its shadow memory and cannot even start under
    # such a limit: there the test checks the verdicts, and the static build's run of it checks the bound.
    limit = [] if SANITIZER_ENV else ["prlimit", f"--as={memory}"]
    return run_recorded([*limit, HOIST_BIN, "prepare", SERVER_PLAN, "--timeout", "2",
                         "--kubeconfig", str(config)], capture_output=True, text=True, timeout=60,
                        env={"PATH": "/usr/bin:/bin", **SANITIZER_ENV})


def test_a_kubeconfig_alias_bomb_is_refused_at_once_in_bounded_memory(tmp_path, pki):
    config = offline_kubeconfig(tmp_path, pki, token="token-1")
    bomb = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    bomb += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    config.write_text("\n".join(bomb) + "\n" + config.read_text())
    result = prepare_limited(config)
    assert result.returncode == 2, result
    assert f"failed to parse '{config}' line 1 column 5: an anchor (&name): kubeconfigs have none, refused" \
        in result.stderr


def test_a_kubeconfig_alias_is_refused_naming_the_line(tmp_path, pki):
    config = offline_kubeconfig(tmp_path, pki, token="token-1")
    config.write_text(config.read_text() + "extra: *undefined\n")
    line = config.read_text().count("\n")
    result = prepare_limited(config)
    assert result.returncode == 2, result
    assert f"failed to parse '{config}' line {line} column 8: an alias (*name): kubeconfigs have none, refused" \
        in result.stderr


def test_a_duplicate_key_in_a_kubeconfig_is_refused_naming_the_line(tmp_path, pki):
    config = offline_kubeconfig(tmp_path, pki, token="token-1")
    text = config.read_text()
    # Which context is current? Last wins in a lenient parser; kubectl refuses it too.
    config.write_text(text + "current-context: other\n")
    line = text.count("\n") + 1
    result = prepare_limited(config)
    assert result.returncode == 2, result
    assert f"failed to parse '{config}' line {line} column 1: duplicate key" in result.stderr


@pytest.mark.parametrize("value", ["yes", "Yes", "YES", "on", "On", "ON", "y", "Y", "True", "TRUE"])
def test_insecure_skip_tls_verify_is_read_as_kubectl_reads_yaml(tmp_path, pki, value):
    config = offline_kubeconfig(tmp_path, pki, token="token-1")
    config.write_text(config.read_text().replace("    server:", f"    insecure-skip-tls-verify: {value}\n    server:"))
    result = prepare_limited(config)
    # The old binary compared with "true" only and went on to connect, skipping nothing but trusting the flag off.
    assert result.returncode == 2, result
    assert f"kubeconfig '{config}': insecure-skip-tls-verify is set; hoist always verifies" in result.stderr


@pytest.mark.parametrize("value", ["false", "no", "off", "N", "~"])
def test_insecure_skip_tls_verify_false_in_any_spelling_is_accepted(tmp_path, pki, value):
    config = offline_kubeconfig(tmp_path, pki, token="token-1")
    config.write_text(config.read_text().replace("    server:", f"    insecure-skip-tls-verify: {value}\n    server:"))
    result = prepare_limited(config)
    assert result.returncode == 1, result  # read, then the unreachable server at the timeout
    assert "insecure-skip-tls-verify" not in result.stderr


def test_insecure_skip_tls_verify_that_is_not_a_boolean_is_refused(tmp_path, pki):
    config = offline_kubeconfig(tmp_path, pki, token="token-1")
    config.write_text(config.read_text().replace("    server:", "    insecure-skip-tls-verify: maybe\n    server:"))
    result = prepare_limited(config)
    assert result.returncode == 2, result
    assert f"kubeconfig '{config}': insecure-skip-tls-verify: expected true or false" in result.stderr


@pytest.mark.parametrize("what", ["kubeconfig", "tokenFile", "certificate-authority"])
def test_a_kubeconfig_input_that_is_a_fifo_is_refused_at_once(tmp_path, pki, what):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    if what == "kubeconfig":
        config = fifo
    elif what == "tokenFile":
        config = offline_kubeconfig(tmp_path, pki, token_file=fifo)
    else:
        config = write_kubeconfig(tmp_path / "kc", f"https://127.0.0.1:{free_port()}", fifo, token="token-1")
    result = prepare_limited(config)  # the old binary blocked in open(2) until the 60 s timeout
    assert result.returncode == 2, result
    assert f"failed to read '{fifo}': it is a FIFO, not a regular file" in result.stderr


@pytest.mark.parametrize("field, value", [
    # YAML's "\0" is a NUL: as a C string the CA path would name '<ca>' cut short, here the CA itself.
    ("certificate-authority", '"{ca}\\0.evil"'),
    ("server", '"{url}\\r\\nX-Injected: 1"'),
    ("token", '"token-1\\r\\nX-Injected: 1"'),
])
def test_a_control_character_in_a_kubeconfig_field_is_refused(server, pki, tmp_path, field, value):
    config = write_kubeconfig(tmp_path / "kc", server.url, pki["ca"], token="token-1")
    text = config.read_text()
    shown = value.format(ca=pki["ca"], url=server.url)
    lines = [f"    {field}: {shown}" if line.strip().startswith(field + ":") else line for line in text.splitlines()]
    config.write_text("\n".join(lines) + "\n")
    prepare = start_prepare(SERVER_PLAN, kubeconfig=config)
    assert prepare.wait() == 2
    assert f"kubeconfig '{config}': field '{field}' must not contain control characters" in prepare.stderr
    assert "X-Injected" not in prepare.stderr


def test_node_list_follows_a_changed_plan_selector(cluster, kubeconfig):
    put_server_plan(cluster)
    latest_hash = suc(cluster).resolve()[2]
    for node in ("s1", "s2", "s3"):
        cluster.label_node(node, LABEL, latest_hash)
    cluster.set_plan_status(SERVER_PLAN, NAMESPACE, applying=["a1"])
    prepare = start_prepare(SERVER_PLAN, kubeconfig=kubeconfig)
    wait_for_watches(cluster, resource="nodes")
    # The Plan now also selects the agents (a1, a2), which are not labeled yet.
    def widen(plan):
        plan["spec"]["nodeSelector"] = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "Exists"}]}
    cluster.update(PLAN_API, SERVER_PLAN, widen, NAMESPACE)
    cluster.wait_for(lambda c: len(c.log_requests(verb="list", resource="nodes")) >= 2)
    cluster.set_plan_status(SERVER_PLAN, NAMESPACE, applying=[])
    time.sleep(0.5)
    assert prepare.running(), prepare.stderr
    for node in ("a1", "a2"):
        cluster.label_node(node, LABEL, latest_hash)
    assert prepare.wait() == 0, prepare.stderr
    assert "5/5 nodes done" in prepare.stderr
    assert cluster.get(NODE_API, "a1")["metadata"]["labels"][LABEL] == latest_hash


# ---- HTTP framing read strictly: each malformed answer is named, then retried like any failed request ----

@pytest.mark.parametrize("raw, error", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n{}", "bad Content-Length '-1'"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\n{}", "bad Content-Length '+2'"),
    (b"HTTP/1.1 200 OK\r\nContent-Length:  2 2\r\n\r\n{}", "bad Content-Length '2 2'"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n{}",
     "Content-Length of more than 18 digits"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{} ", "two different Content-Length headers"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
     "both Content-Length and Transfer-Encoding"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
     "two Transfer-Encoding headers"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n{}\r\n0\r\n\r\n", "bad chunk size '-1'"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n+2\r\n{}\r\n0\r\n\r\n", "bad chunk size '+2'"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\n{}\r\n0\r\n\r\n", "bad chunk size '0x2'"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n{}\r\n0\r\n\r\n",
     "chunk size of more than 15 hex digits"),
    (b"HTTP/1.1 +20 OK\r\nContent-Length: 2\r\n\r\n{}", "bad status line 'HTTP/1.1 +20 OK'"),
    (b"HTTP/1.1 002 OK\r\nContent-Length: 2\r\n\r\n{}", "status code 002 outside 100-599"),
    (b"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\n{}", "bad header line"),
])
def test_malformed_http_framing_is_refused_and_retried(cluster, kubeconfig, raw, error):
    put_server_plan(cluster)
    suc(cluster, concurrency=3, job_seconds=0.1).start().join()
    cluster.raw_next = [raw]
    prepare = start_prepare(SERVER_PLAN, "--timeout", 20, kubeconfig=kubeconfig)
    assert prepare.wait() == 0, prepare.stderr
    assert f"malformed HTTP response from '127.0.0.1:" in prepare.stderr
    assert error in prepare.stderr, prepare.stderr
