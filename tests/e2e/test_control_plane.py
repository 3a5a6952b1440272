"""The test cluster itself: the versions it reports, a Job run to completion on a kwok node, and every process
stopped at the end."""

from __future__ import annotations

import subprocess

from e2e.cluster import TestCluster
from e2e.processes import wait_for
from trainium_eks.facts.control_plane import KUBERNETES_PATCH


def test_the_api_server_reports_the_pinned_release_to_the_layers_kubectl(cluster, tools):
    assert cluster.api.request("GET", "/version")["gitVersion"] == KUBERNETES_PATCH
    out = subprocess.run(
        [str(tools["kubectl"]), "--kubeconfig", str(cluster.kubeconfig), "version", "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert f'"gitVersion": "{KUBERNETES_PATCH}"' in out


def test_a_job_runs_to_completion_on_a_kwok_node(cluster):
    cluster.add_node(
        "worker-0",
        labels={"kubernetes.io/hostname": "worker-0", "kubernetes.io/os": "linux"},
        capacity={"cpu": "4", "memory": "16Gi", "pods": "110"},
    )
    cluster.api.create(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "hello", "namespace": "default"},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
                    }
                }
            },
        }
    )
    wait_for(
        "the Job to complete",
        lambda: (cluster.api.get("batch/v1", "Job", "hello", "default") or {}).get("status", {}).get("succeeded"),
        timeout=120,
        check=cluster.check,
        describe=cluster.describe,
    )
    pod = cluster.api.list("v1", "Pod", "default", selector="job-name=hello")[0]
    assert pod["spec"]["nodeName"] == "worker-0"


def test_stopping_the_cluster_stops_every_process_it_started(binaries, tmp_path):
    with TestCluster(binaries, tmp_path / "cluster") as cluster:
        started = [p.popen for p in cluster.processes.started.values()]
        assert {p.name for p in cluster.processes.started.values()} >= {"etcd", "kube-apiserver", "kwok"}
    assert all(popen.poll() is not None for popen in started)
