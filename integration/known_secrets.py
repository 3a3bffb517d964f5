"""Credentials the integration suite hands to hoist. None of them may ever appear
in anything hoist prints: test_secrets.py checks its own runs, and
test_zz_log_audit.py greps every output the suite recorded (conftest.record_output)."""

# Distinctive on purpose: no path, version or message can contain them by accident.
SA_TOKEN = "sa-tok-9c1e64b2f07d4a58"
SA_TOKEN_ROTATED = "sa-tok-rotated-3b8d20e1c9f6"
KUBECONFIG_TOKEN = "kc-tok-51f2e7a90c3b"
PLAN_SECRET = "plan-secret-d4c7a1e0b96f"
ENV_SECRET = "env-secret-82b0f9e3a17c"

# Those of the older tests (test_prepare.py).
OLDER = ["token-1", "token-2", "wrong-secret"]

ALL = [SA_TOKEN, SA_TOKEN_ROTATED, KUBECONFIG_TOKEN, PLAN_SECRET, ENV_SECRET, *OLDER]
