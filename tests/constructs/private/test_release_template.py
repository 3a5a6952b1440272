"""release_template: the release Job a hybrid-workflow run creates, and the TrainJob text it carries through the
kubelet's expansion of ``$(VAR)``."""

import json

from rehearsal.kubelet_expansion import expand
from tests.support.jsonata import evaluate
from trainium_eks.constructs.private.release_template import (
    HELD_JOB_TEXT,
    RELEASE_NAME,
    release_template,
    release_timeout,
    waiting_seconds,
)
from trainium_eks.manifests.jobs.job_release import release_job
from trainium_eks.manifests.jobs.job_release_program import DEADLINE_MARGIN_SECONDS


def test_the_trainjob_reaches_the_release_program_as_it_was_rendered_whatever_dollars_it_holds():
    trainjob = {
        "metadata": {"name": "cifar10-run-0123456789"},
        "spec": {
            "trainer": {
                "command": ["bash", "-c", "echo $(HOME) $$ ${TRAINING_JOB_NAME} $PATH cost: 5$ $("],
                "env": [{"name": "X", "value": "$(HELD_JOB)$$(HOME)"}],
            }
        },
    }
    (text,) = evaluate([(HELD_JOB_TEXT, {"trainjob": trainjob})])
    defined = {"HOME": "/root", "HELD_JOB": "itself", "TRAINING_JOB_NAME": "x", "PATH": "/bin"}
    assert json.loads(expand(text, defined)) == trainjob, "every variable defined, none expanded"
    assert json.loads(text.replace("$$", "$")) == trainjob


def test_the_release_is_the_librarys_release_job_with_the_runs_names():
    release = release_template("research", 7200, 1000)
    library = release_job("research", held_name="run", held_text="{}", wait_for=[], timeout_seconds=8800)
    assert release["spec"]["activeDeadlineSeconds"] == release_timeout(7200, 1000) == 8200 + DEADLINE_MARGIN_SECONDS
    assert release["metadata"]["name"] == "{% " + RELEASE_NAME + " %}" == "{% $job_name & '-release' %}"
    assert release["metadata"]["annotations"]["trainium-eks/execution"] == "{% $states.context.Execution.Id %}"
    assert release["metadata"]["labels"]["trainium-eks/held-job"] == "{% $job_name %}"
    (container,) = release["spec"]["template"]["spec"]["containers"]
    assert container["command"][-2:] == ["research", "{% $job_name & '-release' %}"], "no job to wait for"
    assert container["env"] == [{"name": "HELD_JOB", "value": "{% " + HELD_JOB_TEXT + " %}"}]
    for part in (release, library):
        part["metadata"].pop("name")
        part["metadata"]["annotations"].pop("trainium-eks/execution", None)
        for labels in (part["metadata"]["labels"], part["spec"]["template"]["metadata"]["labels"]):
            labels.pop("trainium-eks/held-job")
        (container,) = part["spec"]["template"]["spec"]["containers"]
        container["command"] = container["command"][:-1]
        container.pop("env")
    assert release == library, "image, service account, failure policy, security, resources: the library's own"


def test_the_wait_for_nodes_covers_every_capacity_attempt_of_the_first_start_and_of_each_restart():
    assert waiting_seconds({}) == (3 * 1800 + 2 * 600) * (1 + 3) == 26400
    annotations = {
        "trainium-eks/capacity-attempts": "2",
        "trainium-eks/capacity-timeout-seconds": "600",
        "trainium-eks/capacity-pause-seconds": "60",
        "trainium-eks/capacity-restarts": "1",
    }
    assert waiting_seconds({"metadata": {"annotations": annotations}}) == (2 * 600 + 60) * 2
