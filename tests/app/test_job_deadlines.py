"""Nothing bills forever: every job each stack of the default app applies, and every job its release Jobs create, ends
by a deadline, and each seed job's deadline is the one its workload documents."""

import re

import pytest

from tests.support.apps import COMPOSER_TRAINING, KUBEFLOW_TRAINING, TRAINIUM_EKS, stack_template
from tests.support.documentation import all_text
from tests.support.manifests import applied_objects
from trainium_eks.workloads import bert_phase1, cifar10_dataset, cifar10_ddp, composer_resnet

HOUR = 3600
RELEASE = 14 * 24 * HOUR
EXPECTED = {
    TRAINIUM_EKS: {
        "bert-phase1-data": 4 * HOUR,
        "bert-phase1-compile": 4 * HOUR,
        "bert-phase1-train": 72 * HOUR,
        "bert-phase1-compile-fabric": 2 * HOUR,
        "bert-phase1-train-fabric": 2 * HOUR,
    },
    KUBEFLOW_TRAINING: {"cifar10-data": HOUR, "cifar10-ddp": 2 * HOUR},
    COMPOSER_TRAINING: {"cifar10-data": HOUR, "resnet-baseline": 4 * HOUR, "resnet-recipe": 4 * HOUR},
}
"""Base name of each seed job -> its deadline in seconds (a Volcano job's: each pod's, so each attempt's)."""
HASHED = re.compile(r"^(?P<base>.+)-[0-9a-f]{10}(?P<release>-release)?$")


def deadlines(job):
    """The deadlines of a job object: the job's own, or each pod template's of a Volcano job."""
    if job["apiVersion"].startswith("batch.volcano.sh/"):
        return {task["template"]["spec"].get("activeDeadlineSeconds") for task in job["spec"]["tasks"]}
    if job["kind"] == "PyTorchJob":
        return {job["spec"]["runPolicy"].get("activeDeadlineSeconds")}
    return {job["spec"].get("activeDeadlineSeconds")}


@pytest.mark.parametrize("stack", [TRAINIUM_EKS, KUBEFLOW_TRAINING, COMPOSER_TRAINING])
def test_every_job_of_each_stack_ends_by_its_deadline(stack):
    jobs = {
        name: obj
        for (kind, name), obj in applied_objects(stack_template(stack)).items()
        if kind in ("Job", "TrainJob", "PyTorchJob")
    }
    seen = {}
    for name, job in jobs.items():
        found = deadlines(job)
        assert None not in found and len(found) == 1, f"{name}: a deadline on the job, or on every pod of a gang"
        match = HASHED.match(name)
        assert match, name
        if match["release"]:
            assert found == {RELEASE}, f"{name}: a release Job waits 14 days at most"
        else:
            seen[match["base"]] = found.pop()
    assert seen == EXPECTED[stack], "each seed job's deadline is its workload's documented default"


def test_the_readme_states_the_seed_deadlines_the_workloads_set():
    readme = " ".join(all_text().split())
    assert (
        f"the staging Job {bert_phase1.STAGING_DEADLINE_SECONDS // HOUR} hours in all; pre-compilation "
        f"{bert_phase1.PRECOMPILE_DEADLINE_SECONDS // HOUR} hours and training "
        f"{bert_phase1.TRAINING_DEADLINE_SECONDS // HOUR} hours per attempt"
    ) in readme
    assert (
        f"the TrainJob fails {cifar10_ddp.DEADLINE_SECONDS // HOUR} hours after its creation, restarts included, and "
        f"the staging Job after {cifar10_dataset.STAGING_DEADLINE_SECONDS // HOUR} hour"
    ) in readme
    assert f"Each run's pods end after {composer_resnet.RUN_DEADLINE_SECONDS // HOUR} hours" in readme
    assert "**Nothing bills forever**" in readme and "## Job deadlines" in readme
