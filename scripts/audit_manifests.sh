#!/usr/bin/env bash
# checkov (Kubernetes framework) on every object the default app applies to the cluster.
# checkov pins boto3 1.35 and other packages of its own, so it gets its own venv (.venv-audit).
# Usage: make audit   (after make synth)
set -euo pipefail
cd "$(dirname "$0")/.."
test -d cdk.out || { echo "run make synth first" >&2; exit 2; }
test -x .venv-audit/bin/checkov || { python3 -m venv .venv-audit && .venv-audit/bin/pip install --quiet checkov==3.3.30; }
out=$(mktemp -d)
.venv/bin/python ../shared/k8s-schemas/extract_manifests.py cdk.out "$out"
.venv-audit/bin/checkov -d "$out" --framework kubernetes --compact --quiet || true
