"""Secrets never reach hoist's output: the service account token and a
kubeconfig token (`prepare`, on success, on 401 and on broken kubeconfigs), and a
Plan secret and a secret env var (`upgrade` of a payload that is the Plan's
secret, verbose, dry run, failing; `status`). Every stdout and stderr is checked."""

import hashlib
import json
import os

import pytest

pytest.register_assert_rewrite("prepare_harness")

from conftest import HOIST_BIN, run_hoist, run_recorded
from fake_apiserver import Cluster, FakeApiServer, write_kubeconfig
from known_secrets import ENV_SECRET, KUBECONFIG_TOKEN, PLAN_SECRET, SA_TOKEN, SA_TOKEN_ROTATED
from payloads import make_tree
from prepare_harness import (NAMESPACE, SERVER_PLAN, can_fake_service_account, make_service_account,
                             put_server_plan, rotate_token_file, start_prepare, start_prepare_in_cluster, suc,
                             wait_for_watches)

pytest_plugins = ["prepare_harness"]  # pki

SECRETS = [SA_TOKEN, SA_TOKEN_ROTATED, KUBECONFIG_TOKEN, PLAN_SECRET, ENV_SECRET]


def assert_no_secret(*outputs):
    text = "".join(o or "" for o in outputs)
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} leaked:\n{text}"


@pytest.fixture
def token_cluster():
    cluster = Cluster(tokens=(SA_TOKEN, KUBECONFIG_TOKEN))
    cluster.bookmark_interval = 1.0
    for name in ("s1", "s2"):
        cluster.add_node(name, {"node-role.kubernetes.io/control-plane": "true"})
    return cluster


@pytest.fixture
def token_server(token_cluster, pki):
    with FakeApiServer(token_cluster, pki) as server:
        yield server


def test_prepare_with_a_kubeconfig_token_prints_no_token(token_cluster, token_server, pki, tmp_path):
    config = write_kubeconfig(tmp_path / "kc", token_server.url, pki["ca"], token=KUBECONFIG_TOKEN,
                              namespace=NAMESPACE)
    put_server_plan(token_cluster)
    prepare = start_prepare(SERVER_PLAN, kubeconfig=config)
    wait_for_watches(token_cluster, resource="nodes")
    suc(token_cluster, job_seconds=0.1).start().join()
    assert prepare.wait() == 0, prepare.stderr
    assert any(r.get("token") == KUBECONFIG_TOKEN for r in token_cluster.requests)
    assert_no_secret(prepare.stdout, prepare.stderr)


def test_prepare_verbose_failing_on_401_prints_no_token(token_cluster, token_server, pki, tmp_path):
    config = write_kubeconfig(tmp_path / "kc", token_server.url, pki["ca"], token=SA_TOKEN_ROTATED,
                              namespace=NAMESPACE)
    prepare = start_prepare(SERVER_PLAN, "--timeout", "5", kubeconfig=config)
    assert prepare.wait() == 1, prepare.stderr
    assert "401 Unauthorized" in prepare.stderr
    assert_no_secret(prepare.stdout, prepare.stderr)
    verbose = run_hoist("-v", "prepare", SERVER_PLAN, "--timeout", "5", "--kubeconfig", config)
    assert verbose.returncode == 1, verbose
    assert_no_secret(verbose.stdout, verbose.stderr)


@pytest.mark.parametrize("broken", [
    "token-with-newline", "token-with-control", "password-in-server-url", "token-as-number", "yaml-error-after-token",
    "token-file-missing", "token-and-token-file"])
def test_a_broken_kubeconfig_fails_without_printing_the_token(token_server, pki, tmp_path, broken):
    config = write_kubeconfig(tmp_path / "kc", token_server.url, pki["ca"], token=KUBECONFIG_TOKEN,
                              namespace=NAMESPACE)
    text = config.read_text()
    if broken == "token-with-newline":
        text = text.replace(f"token: {KUBECONFIG_TOKEN}", f'token: "{KUBECONFIG_TOKEN}\\r\\nX-Injected: 1"')
    elif broken == "token-with-control":
        text = text.replace(f"token: {KUBECONFIG_TOKEN}", f'token: "{KUBECONFIG_TOKEN}\\u0001"')
    elif broken == "password-in-server-url":
        text = text.replace("server: https://", f"server: https://admin:{KUBECONFIG_TOKEN}@")
    elif broken == "token-as-number":
        text = text.replace(f"token: {KUBECONFIG_TOKEN}", f"token: [{KUBECONFIG_TOKEN}]")
    elif broken == "yaml-error-after-token":
        text = text.replace(f"token: {KUBECONFIG_TOKEN}", f"token: {KUBECONFIG_TOKEN}\n   : : [")
    elif broken == "token-file-missing":
        text = text.replace(f"token: {KUBECONFIG_TOKEN}", "tokenFile: /nonexistent/token")
    elif broken == "token-and-token-file":
        text = text.replace(f"token: {KUBECONFIG_TOKEN}",
                            f"token: {KUBECONFIG_TOKEN}\n    tokenFile: {tmp_path / 'tf'}")
        (tmp_path / "tf").write_text(SA_TOKEN)
    config.write_text(text)
    for argv in (["prepare", SERVER_PLAN, "--timeout", "3", "--kubeconfig", config],
                 ["-v", "prepare", SERVER_PLAN, "--timeout", "3", "--kubeconfig", config],
                 ["--log-format", "json", "prepare", SERVER_PLAN, "--timeout", "3", "--kubeconfig", config]):
        result = run_hoist(*argv, timeout=60)
        assert result.returncode in (1, 2), result
        assert_no_secret(result.stdout, result.stderr)


@pytest.mark.skipif(not can_fake_service_account(), reason="needs root and unshare -m to mount a service account")
def test_prepare_in_cluster_with_a_rotated_service_account_token_prints_no_token(token_cluster, token_server, pki,
                                                                                  tmp_path):
    account = make_service_account(tmp_path / "sa", pki["ca"], SA_TOKEN)
    put_server_plan(token_cluster)
    prepare = start_prepare_in_cluster(account, token_server, SERVER_PLAN)
    wait_for_watches(token_cluster, resource="nodes")
    rotate_token_file(account, SA_TOKEN_ROTATED)
    token_cluster.rotate_token(SA_TOKEN_ROTATED)
    token_cluster.cut_watches()
    token_cluster.wait_for(lambda c: any(r["token"] == SA_TOKEN_ROTATED and r["status"] == 200 for r in c.requests),
                           timeout=60)
    suc(token_cluster, job_seconds=0.1).start().join()
    assert prepare.wait() == 0, prepare.stderr
    assert_no_secret(prepare.stdout, prepare.stderr)


def sync_args(source, version, *extra):
    return ["--component", "registries", "--kind", "sync", "--source", source, "--destination",
            "/etc/rancher/k3s/registries.d", "--version", version, "--version-scheme", "systemd", *extra]


def test_upgrade_of_a_plan_secret_prints_no_secret(host_root, tmp_path):
    # A Plan secret mounted where SUC mounts it, synced to the host as a config file; a secret in a Plan env var.
    secret_dir = make_tree(tmp_path / "run/system-upgrade/secrets/registries", {
        "registries.yaml": f"configs:\n  reg.example:\n    auth:\n      password: {PLAN_SECRET}\n"}, 1)
    env = {"REGISTRY_PASSWORD": ENV_SECRET, "SYSTEM_UPGRADE_PLAN_NAME": "registries",
           "SYSTEM_UPGRADE_NODE_NAME": "s1"}
    outputs = []
    for argv in (sync_args(secret_dir, "1", "--dry-run"), sync_args(secret_dir, "1"), sync_args(secret_dir, "1"),
                 sync_args(secret_dir, "1", "--checksum")):
        outputs.append(run_hoist("-v", "upgrade", "--host-root", host_root, "--lock-timeout", "5", *argv, env=env,
                                 check=0))
    # The secret changed: -v logs what changed, never the content.
    (secret_dir / "registries.yaml").write_text(f"password: {PLAN_SECRET}-2\n")
    outputs.append(run_hoist("-v", "--log-format", "json", "upgrade", "--host-root", host_root, "--lock-timeout", "5",
                             *sync_args(secret_dir, "2"), env=env, check=0))
    # A checksum mismatch and a malformed SHA256SUMS name the file, not its content.
    sums = tmp_path / "SHA256SUMS"
    sums.write_text("0" * 64 + "  registries.yaml\n")
    outputs.append(run_hoist("-v", "upgrade", "--host-root", host_root, "--lock-timeout", "5",
                             *sync_args(secret_dir, "3", "--sha256sums", sums), env=env, check=5))
    sums.write_text(f"{PLAN_SECRET} registries.yaml\n")
    outputs.append(run_hoist("-v", "upgrade", "--host-root", host_root, "--lock-timeout", "5",
                             *sync_args(secret_dir, "3", "--sha256sums", sums), env=env))
    # A bad manifest made of the secret.
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"schema": 1, "components": [{"name": PLAN_SECRET}]}))
    outputs.append(run_hoist("upgrade", "--host-root", host_root, "--manifest", manifest, env=env))
    # The last run failed: status exits 1.
    outputs.append(run_hoist("status", "--host-root", host_root, env=env, check=1))
    outputs.append(run_hoist("status", "--host-root", host_root, "--json", env=env, check=1))
    outputs.append(run_hoist("rollback", "--host-root", host_root, "--lock-timeout", "5", "--component", "registries",
                             env=env, check=0))
    for result in outputs:
        assert_no_secret(result.stdout, result.stderr)
    assert (host_root / "etc/rancher/k3s/registries.d/registries.yaml").read_text().endswith(f"{PLAN_SECRET}\n")
    assert os.path.exists(host_root / "var/lib/hoist/registries/state.json")


# --- what is read from a file under the secrets directory is never quoted ------------------------------------------

def secret_volume(directory, files):
    """`files` laid out as the kubelet writes a Secret volume: a timestamped directory, `..data` linking to it, and
    one link a key."""
    data = directory / "..2026_11_27_10_00_00.000000001"
    data.mkdir(parents=True)
    for name, text in files.items():
        (data / name).write_text(text)
        os.symlink(f"..data/{name}", directory / name)
    os.symlink(data.name, directory / "..data")
    return directory


def run_with_plan_secret(volume, *args):
    """hoist with `volume` mounted where SUC mounts a Plan's secret `hoist` (/run/system-upgrade/secrets/hoist,
    through a bind mount in a private mount namespace)."""
    script = ('mount -t tmpfs tmpfs /run && mkdir -p /run/system-upgrade/secrets/hoist && '
              'mount --bind "$0" /run/system-upgrade/secrets/hoist && exec "$@"')
    argv = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, str(volume), HOIST_BIN, *map(str, args)]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    return run_recorded(argv, env=env, capture_output=True, text=True, timeout=60)


def assert_no_part_of_the_secret(text):
    # Not only the whole value: any 10 bytes of it in a row, as a refusal that quotes a part or an escaped form
    # would show.
    for i in range(len(PLAN_SECRET) - 9):
        assert PLAN_SECRET[i:i + 10] not in text, f"{PLAN_SECRET[i:i + 10]!r} of the secret leaked:\n{text}"


def component(**fields):
    return {"name": "app", "kind": "tree", "source": "/payload", "destination": "/opt/app", "version": "1.0.0",
            **fields}


def secret_manifests(value):
    """The field at fault → a manifest whose text holds `value` there."""
    return {
        "$.components[0].kind": {"schema": 1, "components": [component(kind=value)]},
        "$.components[0].version": {"schema": 1, "components": [component(version=value + "+x.y")]},
        "$.components[0].version_scheme": {"schema": 1, "components": [component(version_scheme=value)]},
        "$.components[0].installed_version_from": {"schema": 1,
                                                   "components": [component(installed_version_from=value)]},
        "$.components[0].name": {"schema": 1, "components": [component(name=value + "/x")]},
        "$.components[1].name": {"schema": 1, "components": [component(name=value), component(name=value)]},
        "$.components[0]": {"schema": 1, "components": [component(destination="relative/" + value)]},
        "$": {"schema": 1, value: 1, "components": [component()]},
        "$.health_checks[0]": {"schema": 1, "health_checks": [value], "components": [component()]},
    }


# What the same manifests hold outside a secret, where a refusal quotes it (the log audit must not see the secret).
VISIBLE = "visible-value-7f3a91"


@pytest.mark.skipif(not can_fake_service_account(), reason="needs root and unshare -m to mount a tmpfs on /run")
@pytest.mark.parametrize("field", list(secret_manifests(PLAN_SECRET)))
def test_a_manifest_from_a_plan_secret_is_refused_naming_the_field_never_its_text(host_root, tmp_path, field):
    # `invalid kind 'plan-secret-…': expected tree, file, sysext or sync` printed the secret's text.
    volume = secret_volume(tmp_path / "secret", {"manifest.json": json.dumps(secret_manifests(PLAN_SECRET)[field])})
    result = run_with_plan_secret(volume, "upgrade", "--host-root", host_root, "--lock-timeout", "5", "--manifest",
                                  "/run/system-upgrade/secrets/hoist/manifest.json")
    assert result.returncode == 2, result
    assert ("invalid manifest '/run/system-upgrade/secrets/hoist/manifest.json': " + field + ": ") in result.stderr
    assert "(the value is not shown: '/run/system-upgrade/secrets/hoist/manifest.json' may hold a secret)" in \
        result.stderr or "is listed twice (first at $.components[0].name)" in result.stderr, result.stderr
    assert_no_part_of_the_secret(result.stdout + result.stderr)
    # The same file anywhere else is quoted as before: the message says what is wrong with the value.
    plain = tmp_path / "manifest.json"
    plain.write_text(json.dumps(secret_manifests(VISIBLE)[field]))
    shown = run_hoist("upgrade", "--host-root", host_root, "--lock-timeout", "5", "--manifest", plain, check=2)
    assert VISIBLE in shown.stderr


@pytest.mark.skipif(not can_fake_service_account(), reason="needs root and unshare -m to mount a tmpfs on /run")
def test_a_manifest_in_a_secret_at_a_path_of_the_plans_choosing_is_not_quoted_either(host_root, tmp_path):
    # A Plan may mount a secret anywhere: the kubelet's `..data` link says what it is.
    text = json.dumps(secret_manifests(PLAN_SECRET)["$.components[0].kind"])
    volume = secret_volume(tmp_path / "etc-hoist", {"manifest.json": text})
    result = run_hoist("upgrade", "--host-root", host_root, "--lock-timeout", "5", "--manifest",
                       volume / "manifest.json", check=2)
    assert "$.components[0].kind: not a valid value (the value is not shown: " in result.stderr
    assert_no_part_of_the_secret(result.stderr)


@pytest.mark.skipif(not can_fake_service_account(), reason="needs root and unshare -m to mount a tmpfs on /run")
def test_sha256sums_from_a_plan_secret_are_checked_without_quoting_a_name_or_digest_of_theirs(host_root, tmp_path):
    payload = make_tree(tmp_path / "payload", {"etc/conf": "conf\n"}, 1)
    good = hashlib.sha256(b"conf\n").hexdigest()
    listed = "5ec7e7" + "0" * 58  # a digest of the secret file's: not the payload's
    cases = {
        # the SHA256SUMS text: what the refusal says instead of quoting it
        f"{good}  ../{PLAN_SECRET}\n": "line 1: file name has a '..' component",
        f"{good}  {PLAN_SECRET}\n{good}  {PLAN_SECRET}\n": "line 2: duplicate file name (first on line 1)",
        f"{good}  etc/conf\n{good}  {PLAN_SECRET}\n":
            "an entry of SHA256SUMS '/run/system-upgrade/secrets/hoist/SHA256SUMS' is not in the payload (the value "
            "is not shown",
        f"{listed}  etc/conf\n": f"checksum mismatch for 'etc/conf': not what SHA256SUMS "
                                 f"'/run/system-upgrade/secrets/hoist/SHA256SUMS' lists (the value is not shown",
    }
    for i, (text, said) in enumerate(cases.items()):
        volume = secret_volume(tmp_path / f"sums{i}", {"SHA256SUMS": text})
        result = run_with_plan_secret(volume, "upgrade", "--host-root", host_root, "--lock-timeout", "5",
                                      "--component", "app", "--kind", "tree", "--source", payload, "--destination",
                                      "/opt/app", "--version", "1.0.0", "--sha256sums",
                                      "/run/system-upgrade/secrets/hoist/SHA256SUMS")
        assert result.returncode == 5, result
        assert said in result.stderr, result.stderr
        assert_no_part_of_the_secret(result.stderr)
        assert listed not in result.stderr
