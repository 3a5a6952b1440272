"""manifests.jobs.job_release: job references, the release program's source, and JobReleaseChart per held job."""

import json

import pytest

from trainium_eks.core.validation import ConfigurationError, Problems
from trainium_eks.facts import versions
from trainium_eks.manifests.addons.training_runtime import TRAINER_API_VERSION
from trainium_eks.manifests.jobs.job_release import (
    MAX_TIMEOUT_SECONDS,
    RELEASE_ANNOTATION,
    RELEASE_DIGEST,
    RELEASE_IMAGE,
    JobReleaseChart,
    check_references,
    held_annotations,
)
from trainium_eks.manifests.jobs.job_release_program import DEADLINE_MARGIN_SECONDS
from trainium_eks.manifests.jobs.pytorch_job import PYTORCH_JOB_API_VERSION
from trainium_eks.manifests.jobs.volcano_job import VOLCANO_JOB_API_VERSION

WAITS = ["job/data-0123456789", "vcjob/train-0123456789"]


def held(api_version="batch/v1", kind="Job", namespace="research", name="eval-0123456789", wait_for=WAITS):
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "annotations": held_annotations(list(wait_for))},
        "spec": {"note": "$(NOT_A_VARIABLE)"},
    }


def test_references_name_a_job_kind_and_a_lowercase_name_and_only_the_bad_ones_are_reported():
    good = ["job/a", "vcjob/a.b-1", "trainjob/x", "pytorchjob/y0"]
    bad = ["cronjob/a", "job/", "job/A", "job/a-", "job/a/b", "vcjob/-a", " job/a", "job/a\n"]
    problems = Problems("t")
    assert check_references(problems, "wait_for", good) and check_references(problems, "wait_for", [])
    assert not problems
    assert check_references(problems, "wait_for", good + bad) is False
    (problem,) = problems
    assert problem == f"wait_for={bad!r}: job charts, or references like job/<name>, vcjob/<name> or trainjob/<name>"
    problems = Problems("t")
    assert check_references(problems, "wait_for", "job/a") is False
    (problem,) = problems
    assert problem.startswith("wait_for='job/a': a list of strings")


def test_the_release_image_and_digest():
    assert RELEASE_IMAGE == versions.JOB_RELEASE_IMAGE.image
    assert len(RELEASE_DIGEST) == 12 and int(RELEASE_DIGEST, 16) >= 0


@pytest.mark.parametrize(
    "api_version,kind,ref_kind",
    [
        ("batch/v1", "Job", "job"),
        (VOLCANO_JOB_API_VERSION, "Job", "vcjob"),
        (TRAINER_API_VERSION, "TrainJob", "trainjob"),
        (PYTORCH_JOB_API_VERSION, "PyTorchJob", "pytorchjob"),
    ],
)
def test_the_release_job_lives_in_the_held_jobs_namespace_and_carries_the_held_job_as_written(
    api_version, kind, ref_kind
):
    job = held(api_version, kind)
    chart = JobReleaseChart(job=job, wait_for=WAITS)
    assert (chart.held_ref, chart.job_name, chart.wait_for) == (
        f"{ref_kind}/eval-0123456789",
        "eval-0123456789-release",
        WAITS,
    )
    (release,) = chart.manifests()
    assert release["metadata"]["namespace"] == "research"
    (container,) = release["spec"]["template"]["spec"]["containers"]
    assert container["command"][2:] == ["research", "eval-0123456789-release", *WAITS]
    (variable,) = container["env"]
    assert variable["name"] == "HELD_JOB"
    assert variable["value"] == json.dumps(job, sort_keys=True).replace("$(", "$$("), "kubelet-escaped, keys sorted"
    job["spec"]["note"] = "changed later"
    assert chart.held_job["spec"]["note"] == "$(NOT_A_VARIABLE)", "the chart keeps a copy"


@pytest.mark.parametrize(
    "timeout,accepted",
    [
        (DEADLINE_MARGIN_SECONDS + 60, True),
        (DEADLINE_MARGIN_SECONDS + 59, False),
        (MAX_TIMEOUT_SECONDS, True),
        (MAX_TIMEOUT_SECONDS + 1, False),
        (3600.0, False),
        (True, False),
    ],
)
def test_the_timeout_leaves_the_program_its_margin_and_stays_within_90_days(timeout, accepted):
    if accepted:
        (release,) = JobReleaseChart(job=held(), wait_for=WAITS, timeout_seconds=timeout).manifests()
        assert release["spec"]["activeDeadlineSeconds"] == timeout
    else:
        with pytest.raises(ConfigurationError) as raised:
            JobReleaseChart(job=held(), wait_for=WAITS, timeout_seconds=timeout)
        (problem,) = raised.value.problems
        assert problem == (
            f"timeout_seconds={timeout!r}: an integer from {DEADLINE_MARGIN_SECONDS + 60} to {MAX_TIMEOUT_SECONDS}"
            + (" (did you mean 3600?)" if isinstance(timeout, float) else "")
        )


def test_every_problem_of_a_release_is_reported_in_one_error():
    stale = held()
    stale["metadata"]["annotations"][RELEASE_ANNOTATION] = "000000000000"
    with pytest.raises(ConfigurationError) as raised:
        JobReleaseChart(job=stale, wait_for=["deployment/x"], timeout_seconds=0)
    assert raised.value.where == "job release chart"
    assert [p.split(":")[0] for p in raised.value.problems] == [
        "job='job/eval-0123456789'",
        "wait_for=['deployment/x']",
        "timeout_seconds=0",
    ]
    with pytest.raises(ConfigurationError, match=r"job=\['not', 'a', 'manifest'\]: the manifest of a batch/v1 Job"):
        JobReleaseChart(job=["not", "a", "manifest"], wait_for=WAITS)


def test_a_held_job_must_name_what_its_release_waits_for_and_be_a_whole_manifest():
    with pytest.raises(ConfigurationError, match=r"job='job/eval-0123456789': a job held until job/a"):
        JobReleaseChart(job=held(wait_for=["job/other"]), wait_for=["job/a"])
    with pytest.raises(ConfigurationError, match=r"wait_for=\[\]: at least one job"):
        JobReleaseChart(job=held(wait_for=[]), wait_for=[])
    nameless = held()
    del nameless["metadata"]["name"]
    with pytest.raises(ConfigurationError, match="job.metadata.name=None"):
        JobReleaseChart(job=nameless, wait_for=WAITS)
    with pytest.raises(ConfigurationError, match="job.metadata.namespace=None"):
        JobReleaseChart(job=held(namespace=None), wait_for=WAITS)
    bare = held()
    bare["metadata"]["annotations"] = None
    with pytest.raises(ConfigurationError, match="carries held_annotations"):
        JobReleaseChart(job=bare, wait_for=WAITS)
