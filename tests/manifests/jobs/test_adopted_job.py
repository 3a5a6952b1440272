"""manifests.jobs.adopted_job: AdoptedJobChart, the one job of a user's cdk8s chart, named and held like ours."""

import cdk8s
import pytest

from trainium_eks.core.validation import ConfigurationError
from trainium_eks.manifests.jobs.adopted_job import JOB_KINDS, AdoptedJobChart
from trainium_eks.manifests.jobs.job_naming import JOB_NAME, PLACEHOLDER, hashed_name
from trainium_eks.manifests.jobs.job_release import WAIT_FOR_ANNOTATION, held_annotations

SPEC = {"template": {"spec": {"containers": [{"name": "e", "image": "e.example/e:1", "args": [f"/out/{JOB_NAME}"]}]}}}


def user_chart(api_version="batch/v1", kind="Job", spec=SPEC, **metadata):
    """A cdk8s chart of the user's own with one object."""
    chart = cdk8s.Chart(cdk8s.App(), "Mine")
    metadata = {"name": "my-eval", "namespace": "research", **metadata}
    cdk8s.ApiObject(chart, "Job", api_version=api_version, kind=kind, metadata=metadata).add_json_patch(
        cdk8s.JsonPatch.add("/spec", spec)
    )
    return chart


@pytest.mark.parametrize("api_version,kind", list(JOB_KINDS), ids=list(JOB_KINDS.values()))
def test_each_job_kind_is_adopted_as_it_was_written_and_named_after_the_hash_of_its_spec(api_version, kind):
    adopted = AdoptedJobChart(user_chart(api_version, kind, labels={"team": "a"}))
    unnamed = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": PLACEHOLDER, "namespace": "research", "labels": {"team": "a"}},
        "spec": SPEC,
    }
    assert adopted.job_name == hashed_name("my-eval", unnamed)
    assert adopted.ref == f"{JOB_KINDS[api_version, kind]}/{adopted.job_name}"
    (job,) = adopted.manifests()
    assert (job["apiVersion"], job["kind"], job["metadata"]["namespace"]) == (api_version, kind, "research")
    assert job["metadata"]["name"] == adopted.job_name
    assert job["metadata"]["labels"] == {
        "app.kubernetes.io/part-of": "trainium-eks",
        "app.kubernetes.io/name": "my-eval",
        "team": "a",
    }
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == [f"/out/{adopted.job_name}"]


def test_a_changed_spec_is_another_job_and_resolve_decides_what_is_hashed():
    first = AdoptedJobChart(user_chart()).job_name
    assert AdoptedJobChart(user_chart()).job_name == first
    assert AdoptedJobChart(user_chart(spec={**SPEC, "backoffLimit": 1})).job_name != first
    same = lambda manifest: {"kind": manifest["kind"]}  # noqa: E731 - a resolve that forgets the spec
    assert AdoptedJobChart(user_chart(), resolve=same).job_name == hashed_name("my-eval", {"kind": "Job"})
    assert AdoptedJobChart(user_chart(spec={"x": 1}), resolve=same).job_name == hashed_name("my-eval", {"kind": "Job"})


def test_a_job_that_waits_keeps_its_own_annotations_next_to_the_held_ones():
    adopted = AdoptedJobChart(user_chart(annotations={"note": "mine"}), wait_for=["job/data-0123456789"])
    assert adopted.wait_for == ("job/data-0123456789",)
    annotations = adopted.manifest["metadata"]["annotations"]
    assert annotations == {"note": "mine", **held_annotations(["job/data-0123456789"])}
    assert annotations[WAIT_FOR_ANNOTATION] == "job/data-0123456789"
    assert adopted.job_name != AdoptedJobChart(user_chart(annotations={"note": "mine"})).job_name


def two_objects():
    chart = user_chart()
    cdk8s.ApiObject(chart, "Cm", api_version="v1", kind="ConfigMap", metadata={"name": "c", "namespace": "research"})
    return chart


@pytest.mark.parametrize(
    "chart,expected",
    [
        (lambda: {"kind": "Job"}, "chart={'kind': 'Job'}: a cdk8s.Chart"),
        (lambda: cdk8s.Chart(cdk8s.App(), "Empty"), "chart=[]: one job: Job (batch/v1), Job (batch.volcano.sh"),
        (lambda: user_chart("apps/v1", "Deployment"), "chart=['Deployment (apps/v1)']: one job: Job (batch/v1)"),
        (lambda: user_chart("batch/v1", "CronJob"), "chart=['CronJob (batch/v1)']: one job"),
        (two_objects, "chart=['Job (batch/v1)', 'ConfigMap (v1)']: one job"),
    ],
    ids=["not a chart", "empty", "deployment", "cronjob", "two objects"],
)
def test_a_chart_that_is_not_one_job_is_refused(chart, expected):
    with pytest.raises(ConfigurationError) as raised:
        AdoptedJobChart(chart())
    assert raised.value.where == "AdoptedJobChart"
    (problem,) = raised.value.problems
    assert problem.startswith(expected), problem


def test_a_bad_name_namespace_and_wait_for_are_reported_together():
    with pytest.raises(ConfigurationError) as raised:
        AdoptedJobChart(user_chart(name="My_Eval", namespace=None), wait_for=["deployment/x"])
    assert [p.split(":")[0] for p in raised.value.problems] == [
        "name='My_Eval'",
        "namespace=None",
        "wait_for=['deployment/x']",
    ]


def test_a_trainjob_of_several_nodes_without_its_node_pod_template_is_refused_for_its_release_could_not_label_it():
    trainer = {"numNodes": 2, "image": "e.example/e:1"}
    spec = {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer}
    with pytest.raises(ConfigurationError) as raised:
        AdoptedJobChart(user_chart("trainer.kubeflow.org/v1alpha1", "TrainJob", spec=spec))
    (problem,) = raised.value.problems
    assert "without the pod template of its 'node' replicated job" in problem and "peers policy" in problem
    runtime_count = {**spec, "trainer": {"image": "e.example/e:1"}}
    waiting = ["job/data-0123456789"]
    with pytest.raises(ConfigurationError, match="without the pod template"):
        AdoptedJobChart(user_chart("trainer.kubeflow.org/v1alpha1", "TrainJob", spec=runtime_count), wait_for=waiting)
    assert AdoptedJobChart(user_chart("trainer.kubeflow.org/v1alpha1", "TrainJob", spec=runtime_count)), (
        "no release creates it: no peers policy either (docs/security.md)"
    )
    no_template = {"tasks": [{"name": "node", "replicas": 2}]}
    assert AdoptedJobChart(user_chart("batch.volcano.sh/v1alpha1", "Job", spec=no_template)), "not a TrainJob"
    node = {"name": "node", "template": {"spec": {"template": {"spec": {"nodeSelector": {"a": "b"}}}}}}
    patch = {"manager": "example.com/mine", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [node]}}}}
    assert AdoptedJobChart(
        user_chart("trainer.kubeflow.org/v1alpha1", "TrainJob", spec={**spec, "runtimePatches": [patch]})
    )
    one = {**spec, "trainer": {**trainer, "numNodes": 1}}
    assert AdoptedJobChart(user_chart("trainer.kubeflow.org/v1alpha1", "TrainJob", spec=one)), "one pod: no gang"
