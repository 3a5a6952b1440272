"""manifests.jobs.job_chart: JobChart names its one job after the hash of its spec and holds it when it waits."""

import pytest

from trainium_eks.core.validation import Problems
from trainium_eks.manifests.jobs.job_chart import JobChart, check_wait_for, wait_references
from trainium_eks.manifests.jobs.job_naming import JOB_NAME, PLACEHOLDER, hashed_name
from trainium_eks.manifests.jobs.job_release import RELEASE_ANNOTATION, WAIT_FOR_ANNOTATION, held_annotations


def job_manifest(chart, args=("--lr", "1e-4"), **metadata):
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": chart.metadata(PLACEHOLDER, **metadata),
        "spec": {"template": {"spec": {"containers": [{"name": "w", "args": [*args, f"/out/{JOB_NAME}"]}]}}},
    }


def job_chart(name="train", wait_for=(), **manifest):
    chart = JobChart(name, namespace="training", wait_for=wait_for)
    chart.add_job(job_manifest(chart, **manifest), None)
    return chart


def test_the_job_is_named_after_the_hash_of_its_spec_and_carries_its_name_wherever_the_placeholder_was():
    chart = JobChart("train", namespace="training")
    manifest = job_manifest(chart)
    chart.add_job(manifest, None)
    assert chart.job_name == hashed_name("train", manifest) and chart.ref == f"job/{chart.job_name}"
    (job,) = chart.manifests()
    assert job == chart.manifest
    assert job["metadata"]["name"] == chart.job_name and job["metadata"]["namespace"] == "training"
    assert job["metadata"]["labels"] == {"app.kubernetes.io/part-of": "trainium-eks", "app.kubernetes.io/name": "train"}
    assert job["spec"]["template"]["spec"]["containers"][0]["args"][-1] == f"/out/{chart.job_name}"
    assert "annotations" not in job["metadata"], "a job that waits for nothing is not held"
    assert job_chart().job_name == chart.job_name, "the same spec, the same name"
    assert job_chart(args=("--lr", "3e-4")).job_name != chart.job_name, "a changed spec is a new job"


def test_the_manifest_property_is_a_copy():
    chart = job_chart()
    chart.manifest["metadata"]["name"] = "changed"
    assert chart.manifest["metadata"]["name"] == chart.job_name


def test_a_job_that_waits_carries_the_held_annotations_next_to_its_own_and_its_hash_covers_them():
    first = job_chart("first")
    given = job_manifest(JobChart("x", namespace="training"), annotations={"team": "a"})
    chart = JobChart("second", namespace="training", wait_for=[first, "vcjob/data-0123456789"])
    chart.add_job(given, None)
    assert chart.wait_for == (first.ref, "vcjob/data-0123456789")
    annotations = chart.manifest["metadata"]["annotations"]
    assert annotations == {"team": "a", **held_annotations([first.ref, "vcjob/data-0123456789"])}
    assert (
        annotations[WAIT_FOR_ANNOTATION] == f"{first.ref} vcjob/data-0123456789" and RELEASE_ANNOTATION in annotations
    )
    assert given["metadata"]["annotations"] == {"team": "a"}, "the manifest given is not changed"
    alone = JobChart("second", namespace="training")
    alone.add_job(given, None)
    other = JobChart("second", namespace="training", wait_for=["vcjob/data-0123456789"])
    other.add_job(given, None)
    assert len({chart.job_name, alone.job_name, other.job_name}) == 3


def test_a_subclass_names_the_kind_of_its_references():
    class VolcanoLike(JobChart):
        ref_kind = "vcjob"

    chart = VolcanoLike("train", namespace="training")
    chart.add_job(job_manifest(chart), None)
    assert chart.ref == f"vcjob/{chart.job_name}"


@pytest.mark.parametrize(
    "wait_for,problem",
    [
        ((), None),
        (["job/a", "trainjob/b.c", "pytorchjob/d-1"], None),
        ("job/a", "wait_for='job/a': a list of strings"),
        (["deployment/a", "job/ok", "job/A"], "wait_for=['deployment/a', 'job/A']: job charts, or references"),
        ([JobChart("unnamed", namespace="training")], "wait_for=['']: job charts, or references"),
    ],
)
def test_wait_for_takes_job_charts_or_references(wait_for, problem):
    problems = Problems("t")
    assert check_wait_for(problems, wait_for) is (problem is None)
    assert [p[: len(problem)] for p in problems] == ([problem] if problem else [])
    named = job_chart()
    assert wait_references([named, "job/x"]) == [named.ref, "job/x"]
    assert wait_references("job/x") == "job/x", "anything but a list is left for check_wait_for to judge"
