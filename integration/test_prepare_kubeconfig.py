"""`hoist prepare` outside a Job, found the way kubectl finds its cluster: --kubeconfig, then KUBECONFIG (a
':'-separated list, merged), then ~/.kube/config; --context and -n/--namespace; a server URL with a path prefix
(Rancher's /k8s/clusters/<id>); a kubeconfig that is not there is exit 2 naming it."""

import shutil
from pathlib import Path

import pytest

pytest.register_assert_rewrite("prepare_harness")  # before its import: it is also a plugin
from prepare_harness import NAMESPACE, SERVER_PLAN, put_server_plan, start_prepare, suc  # noqa: E402

pytest_plugins = ["prepare_harness"]  # the fixtures: pki, cluster, server, kubeconfig


@pytest.fixture
def complete(cluster):
    """The server Plan, already applied to every server: prepare exits 0 at once once it reaches the API."""
    put_server_plan(cluster)
    suc(cluster, concurrency=3, job_seconds=0).start().join(30)
    return cluster


def run(*args, env=None, kubeconfig=None):
    prepare = start_prepare(SERVER_PLAN, "--timeout", 20, *args, kubeconfig=kubeconfig, env=env)
    return prepare.wait(), prepare


def split_kubeconfig(directory, server_url, ca):
    """Two files as a KUBECONFIG list merges them: the first holds the current context, the second the cluster
    (its CA a path relative to the second file's directory) and the user."""
    first, second = Path(directory) / "a", Path(directory) / "b"
    first.mkdir()
    second.mkdir()
    shutil.copy(ca, second / "ca.crt")
    (first / "config").write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
        f"contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: hoist\n    namespace: {NAMESPACE}\n")
    (second / "config").write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: elsewhere\n"
        f"clusters:\n- name: fake\n  cluster:\n    server: {server_url}\n    certificate-authority: ca.crt\n"
        "users:\n- name: hoist\n  user:\n    token: token-1\n"
        "contexts:\n- name: fake\n  context:\n    cluster: nowhere\n    user: nobody\n")
    return first / "config", second / "config"


def test_kubeconfig_lists_are_merged_as_kubectl_merges_them(complete, server, pki, tmp_path):
    first, second = split_kubeconfig(tmp_path, server.url, pki["ca"])
    missing = tmp_path / "not-there"
    code, prepare = run(env={"KUBECONFIG": f"{missing}::{first}:{second}"})
    assert code == 0, prepare.stderr
    assert f"waiting for plan 'k3s-server' in namespace '{NAMESPACE}' on '127.0.0.1:{server.port}'" in prepare.stderr


def test_kubeconfig_naming_no_file_that_exists_is_exit_2_naming_them(tmp_path):
    code, prepare = run(env={"KUBECONFIG": f"{tmp_path}/a:{tmp_path}/b"})
    assert code == 2
    assert f"KUBECONFIG names no kubeconfig file that exists ('{tmp_path}/a', '{tmp_path}/b')" in prepare.stderr


def test_a_missing_kubeconfig_flag_file_is_exit_2_naming_it(tmp_path):
    code, prepare = run(kubeconfig=tmp_path / "nope")
    assert code == 2
    assert f"'{tmp_path}/nope'" in prepare.stderr and "No such file or directory" in prepare.stderr


def test_home_kube_config_is_the_default(complete, server, pki, tmp_path, kubeconfig):
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    shutil.copy(kubeconfig, home / ".kube/config")
    code, prepare = run(env={"HOME": str(home)})
    assert code == 0, prepare.stderr
    # KUBECONFIG comes first.
    code, prepare = run(env={"HOME": str(home), "KUBECONFIG": str(tmp_path / "none")})
    assert code == 2 and "KUBECONFIG names no kubeconfig file that exists" in prepare.stderr


def test_context_picks_another_context_and_n_another_namespace(complete, server, pki, tmp_path, cluster):
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: broken\n"
        f"clusters:\n- name: fake\n  cluster:\n    server: {server.url}\n    certificate-authority: {pki['ca']}\n"
        "- name: dead\n  cluster:\n    server: https://127.0.0.1:1\n"
        "users:\n- name: hoist\n  user:\n    token: token-1\n"
        "contexts:\n- name: broken\n  context:\n    cluster: dead\n    user: hoist\n"
        "- name: good\n  context:\n    cluster: fake\n    user: hoist\n    namespace: elsewhere\n")
    code, prepare = run("--context", "good", "-n", NAMESPACE, kubeconfig=config)
    assert code == 0, prepare.stderr
    assert f"in namespace '{NAMESPACE}' on '127.0.0.1:{server.port}'" in prepare.stderr
    code, prepare = run("--context", "nope", kubeconfig=config)
    assert code == 2 and f"kubeconfig '{config}': no entry 'nope' in contexts" in prepare.stderr


def test_a_server_url_with_a_path_prefix_is_served_under_it(complete, server, pki, tmp_path):
    complete.path_prefix = "/k8s/clusters/c-m-4x2b"
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: rancher\n"
        f"clusters:\n- name: rancher\n  cluster:\n    server: {server.url}/k8s/clusters/c-m-4x2b/\n"
        f"    certificate-authority: {pki['ca']}\n"
        f"users:\n- name: hoist\n  user:\n    token: token-1\n"
        f"contexts:\n- name: rancher\n  context:\n    cluster: rancher\n    user: hoist\n    namespace: {NAMESPACE}\n")
    code, prepare = run(kubeconfig=config)
    assert code == 0, prepare.stderr
    paths = {r["path"] for r in complete.requests}
    assert paths == {f"/k8s/clusters/c-m-4x2b/apis/upgrade.cattle.io/v1/namespaces/{NAMESPACE}/plans",
                     "/k8s/clusters/c-m-4x2b/api/v1/nodes"}, paths


@pytest.mark.parametrize("path", ["/k8s/clusters/a?b", "/a/../b", "/a//b", "/a b"])
def test_a_server_path_that_is_not_plain_segments_is_refused(tmp_path, pki, path):
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters:\n- name: c\n  cluster:\n    server: \"https://127.0.0.1:6443{path}\"\n"
        f"    certificate-authority: {pki['ca']}\n"
        "contexts:\n- name: c\n  context:\n    cluster: c\n")
    code, prepare = run(kubeconfig=config)
    assert code == 2
    assert "must be plain segments, as /k8s/clusters/<id>" in prepare.stderr


@pytest.mark.parametrize("data", ["aA==aA==", "a==="])
def test_certificate_authority_data_that_is_not_strict_base64_is_refused_naming_the_field(tmp_path, data):
    """'=' anywhere but at the end once decoded to other bytes, which only the TLS setup refused, after prepare had
    said it was waiting."""
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n"
        f"    certificate-authority-data: \"{data}\"\n"
        "users:\n- name: u\n  user:\n    token: t\n"
        "contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n")
    code, prepare = run(kubeconfig=config)
    assert code == 2
    assert (f"failed to decode kubeconfig '{config}' certificate-authority-data: not valid base64"
            in prepare.stderr), prepare.stderr
    assert "waiting for plan" not in prepare.stderr
