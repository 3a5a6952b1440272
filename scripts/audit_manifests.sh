#!/usr/bin/env bash
# checkov (Kubernetes framework) on every object the default app applies to the cluster, as tests/app/test_audit.py
# runs it: the objects of cdk.out (and the jobs the release Jobs create; Volcano Jobs as their tasks' pods), written by
# scripts/applied_objects.py. Accepted findings are acknowledged on their objects with a reason
# (trainium_eks/manifests/audit_exceptions.py); checkov lists them as skipped. Exit status 1 on any other finding.
# Usage: make audit   (synthesizes first; checkov lives in .venv-audit, from requirements-audit.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
test -d cdk.out || { echo "run make synth first" >&2; exit 2; }
out=$(mktemp -d)
.venv/bin/python scripts/applied_objects.py --pods cdk.out "$out"
.venv-audit/bin/checkov -d "$out" --framework kubernetes --compact
