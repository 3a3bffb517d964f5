"""`hoist prepare` reads a big node list in pages (limit and continue, as
client-go's pager does) and starts a list over whose continue token expired,
against the fake API server, through the real static binary."""

import pytest

pytest.register_assert_rewrite("prepare_harness")  # before its import: it is also a plugin

from prepare_harness import SERVER_PLAN, put_server_plan, start_prepare, suc, wait_for_watches

pytest_plugins = ["prepare_harness"]  # the fixtures: pki, cluster, server, kubeconfig

LABEL = f"plan.upgrade.cattle.io/{SERVER_PLAN}"
PAGE = 50   # the items prepare asks for in each page
EXTRA = 117  # control-plane nodes besides the fixture's s1-s3: 120 selected, three pages


def big_plan(cluster):
    """The server Plan, resolved, over 120 selected nodes of which all but `last` carry its label."""
    for i in range(EXTRA):
        cluster.add_node(f"cp-{i:03d}", {"node-role.kubernetes.io/control-plane": "true"})
    put_server_plan(cluster)
    latest_hash = suc(cluster).resolve()[2]
    for name in ["s1", "s2", "s3"] + [f"cp-{i:03d}" for i in range(EXTRA - 1)]:
        cluster.label_node(name, LABEL, latest_hash)
    return latest_hash


def node_lists(cluster):
    return cluster.log_requests(verb="list", resource="nodes")


def finish(cluster, prepare, latest_hash):
    wait_for_watches(cluster, resource="nodes")
    assert prepare.running(), prepare.stderr
    cluster.label_node(f"cp-{EXTRA - 1:03d}", LABEL, latest_hash)
    assert prepare.wait() == 0, prepare.stderr
    assert "plan 'k3s-server': 120/120 nodes done at hash" in prepare.stderr


def test_a_big_node_list_is_read_in_pages(cluster, kubeconfig):
    latest_hash = big_plan(cluster)
    prepare = start_prepare(SERVER_PLAN, "--timeout", 30, kubeconfig=kubeconfig)
    finish(cluster, prepare, latest_hash)
    pages = node_lists(cluster)
    assert [p["status"] for p in pages] == [200, 200, 200]
    assert [p["query"]["limit"] for p in pages] == [str(PAGE)] * 3
    # The first page without a token, each next one with the token the page before it answered
    # (the fake's tokens are "<snapshot>:<offset>"), and the same selector on every page.
    assert "continue" not in pages[0]["query"]
    assert [p["query"]["continue"].split(":")[1] for p in pages[1:]] == [str(PAGE), str(2 * PAGE)]
    assert len({p["query"]["labelSelector"] for p in pages}) == 1
    # Waiting for one node of 120: the progress line names ten at most.
    assert "plan 'k3s-server': 119/120 nodes done; waiting for: cp-116\n" in prepare.stderr
    # The watch starts from the list's resourceVersion, the one every page carried.
    assert len({p["resourceVersion"] for p in pages}) == 1
    watch = cluster.log_requests(verb="watch", resource="nodes")[0]
    assert watch["query"]["resourceVersion"] == pages[0]["resourceVersion"]


def test_an_expired_continue_token_lists_again_from_the_first_page(cluster, kubeconfig):
    latest_hash = big_plan(cluster)
    cluster.expire_continues = 1
    prepare = start_prepare(SERVER_PLAN, "--timeout", 30, kubeconfig=kubeconfig)
    finish(cluster, prepare, latest_hash)
    pages = node_lists(cluster)
    assert [p["status"] for p in pages] == [200, 410, 200, 200, 200]
    assert ["continue" in p["query"] for p in pages] == [False, True, False, True, True]
    assert ("410 Gone: The provided continue parameter is too old to display a consistent list result."
            in prepare.stderr)
    assert "; listing again from the first page" in prepare.stderr
    # Every node counted once, though the first page was read twice.
    assert "plan 'k3s-server': 119/120 nodes done; waiting for: cp-116\n" in prepare.stderr


def test_continue_tokens_that_keep_expiring_are_retried_after_a_pause(cluster, kubeconfig):
    latest_hash = big_plan(cluster)
    cluster.expire_continues = 4  # one more than a list starts over by itself
    prepare = start_prepare(SERVER_PLAN, "--timeout", 30, kubeconfig=kubeconfig)
    finish(cluster, prepare, latest_hash)
    pages = node_lists(cluster)
    assert [p["status"] for p in pages] == [200, 410] * 4 + [200, 200, 200]
    assert prepare.stderr.count("; listing again from the first page") == 3
    assert "410 Gone: The provided continue parameter is too old" in prepare.stderr
    assert "; retrying in " in prepare.stderr
