"""The held jobs' admission policy on the real API server: a held job (a gang of the library's job charts, a job that
waits for others) applied as it is, by anyone but its namespace's release, is refused with a message that names the
way to apply it; the release creates it; jobs without the annotation and updates are not looked at."""

from __future__ import annotations

import copy

import yaml

from e2e.api import Api, ApiError
from e2e.deploy import UPSTREAM
from e2e.processes import wait_for
from trainium_eks.facts import versions
from trainium_eks.manifests.access.held_job_admission import HeldJobAdmissionChart
from trainium_eks.manifests.access.job_release_access import JobReleaseAccessChart, JobReleaseCreatorChart
from trainium_eks.manifests.jobs.job_release import RELEASE_SERVICE_ACCOUNT, held_annotations

NAMESPACE = "training"
VOLCANO_CHART = UPSTREAM / "charts" / f"volcano-{versions.VOLCANO.version}"
VOLCANO_JOB_CRD = VOLCANO_CHART / "crd" / "bases" / "batch.volcano.sh_jobs.yaml"


def _job(name, annotations):
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
            }
        },
    }


def _gang(name):
    task = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": held_annotations([])},
        "spec": {"minAvailable": 2, "tasks": [{"name": "node", "replicas": 2, "template": task}]},
    }


def _dry_run(api: Api, manifest):
    metadata = manifest["metadata"]
    path = api.path(manifest["apiVersion"], manifest["kind"], metadata["namespace"]) + "?dryRun=All"
    return api.request("POST", path, manifest)


def _refusal(api: Api, manifest):
    """The API server's answer to creating ``manifest``: None when it would be created, else the error."""
    try:
        _dry_run(api, manifest)
    except ApiError as error:
        return error
    return None


def test_only_the_release_creates_a_held_job_and_only_in_its_namespace(cluster):
    api = cluster.api
    for namespace in (NAMESPACE, "elsewhere"):
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    api.create(yaml.safe_load(VOLCANO_JOB_CRD.read_text()))
    charts = (
        JobReleaseAccessChart(namespace=NAMESPACE),
        JobReleaseCreatorChart(namespace=NAMESPACE, kind="job"),
        HeldJobAdmissionChart(namespace=NAMESPACE),
    )
    for chart in charts:
        for manifest in chart.manifests():
            api.create(manifest)
    held = _job("staging", held_annotations(["job/awaited"]))
    # The API server enforces a new policy once its informers have it (a second or so): a bounded wait.
    wait_for("the policy to refuse a held job", lambda: _refusal(api, held) is not None, timeout=60)

    refused = _refusal(api, held)
    assert refused.status == 403, refused
    assert "only its release Job" in str(refused) and "JobSequence.add" in str(refused)
    assert "e2e-admin did" in str(refused), "the message names who tried"
    wait_for("the Volcano Job CRD", lambda: api.resource("batch.volcano.sh/v1alpha1", "Job"), timeout=60)
    gang = _gang("train")
    assert _refusal(api, gang).status == 403, "a gang held by annotation is refused to the cluster's admin"

    unheld = _job("plain", {"note": "users' own jobs carry no release annotation"})
    assert _refusal(api, unheld) is None
    unheld_gang = copy.deepcopy(gang)
    unheld_gang["metadata"]["annotations"] = {}
    assert _refusal(api, unheld_gang) is None, "a gang of a user's own manifest is not looked at"
    elsewhere = copy.deepcopy(held)
    elsewhere["metadata"]["namespace"] = "elsewhere"
    assert _refusal(api, elsewhere) is None, "the policy guards its own namespace only"

    release = Api(api.server, api.token(NAMESPACE, RELEASE_SERVICE_ACCOUNT), str(cluster.pki.pair.cert))
    assert release.create(held)["metadata"]["name"] == "staging"
    api.patch("batch/v1", "Job", "staging", {"metadata": {"labels": {"seen": "yes"}}}, NAMESPACE)
    assert api.get("batch/v1", "Job", "staging", NAMESPACE)["metadata"]["labels"]["seen"] == "yes", "updates pass"
