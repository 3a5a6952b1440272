"""The training jobs as ``status`` shows them: where each kind keeps its state and restarts, and which pod's progress
file says the last step."""

import pytest

from tests.support.training_pods import training_pod as pod
from trainium_eks.commands import training_jobs
from trainium_eks.commands.training_jobs import BATCH, JOBSET, PYTORCHJOB, TRAINJOB, VOLCANO
from trainium_eks.manifests.jobs.progress_watch import PROGRESS_FILE

NOW = 1_800_000_000


@pytest.mark.parametrize(
    "kind, resource, jobsets, pods, expected",
    [
        (VOLCANO, {"status": {}}, {}, [], ("Pending", 0)),
        (
            VOLCANO,
            {"status": {"state": {"phase": "Restarting"}, "retryCount": 2}},
            {},
            [],
            ("Restarting", 2),
        ),
        (TRAINJOB, {"status": {}}, {}, [], ("Created", None)),
        (TRAINJOB, {"status": {}}, {"t": {"status": {"restarts": 1}}}, [pod("p", {})], ("Running", 1)),
        (
            TRAINJOB,
            {
                "status": {
                    "conditions": [{"type": "Failed", "status": "True"}, {"type": "Suspended", "status": "False"}]
                }
            },
            {},
            [],
            ("Failed", None),
        ),
        (
            JOBSET,
            {"status": {"conditions": [{"type": "Suspended", "status": "True"}]}},
            {},
            [],
            ("Suspended", 0),
        ),
        (
            PYTORCHJOB,
            {"status": {"conditions": [{"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}]}},
            {},
            [pod("a", {}, restarts=2), pod("b", {}, restarts=1)],
            ("Running", 2),
        ),
        (BATCH, {"status": {"active": 1, "failed": 2}}, {}, [], ("Running", 2)),
        (
            BATCH,
            {"status": {"active": 1, "conditions": [{"type": "FailureTarget", "status": "True"}]}},
            {},
            [],
            ("Running", 0),
        ),
        (VOLCANO, {"status": {"state": {"phase": "Aborted"}}}, {}, [], ("Aborted", 0)),
        (VOLCANO, {"status": {"state": {"phase": "Terminated"}}}, {}, [], ("Terminated", 0)),
        (JOBSET, {"status": {}}, {}, [pod("p", {}, phase="Pending")], ("Pending", 0)),
    ],
)
def test_each_kind_keeps_its_state_and_restarts_where_its_controller_does(kind, resource, jobsets, pods, expected):
    job = training_jobs.job_of(kind, {"metadata": {"name": "t"}, **resource}, jobsets, pods)
    assert (job.state, job.restarts) == expected
    assert job.failed == (job.state in ("Failed", "Terminated"))  # a suspended Volcano job is Aborted


def test_step_text_reads_the_progress_line_as_the_probe_does():
    assert training_jobs.step_text("1200 1799992700\n", NOW) == "step 1200, 2 h 1 min ago"
    assert training_jobs.step_text("1200 1799996400\n", NOW) == "step 1200, 60 min ago"
    assert training_jobs.step_text("start 1800000100", NOW) == "no step yet, started 0 s ago"
    assert training_jobs.step_text("garbage", NOW) == "unreadable progress file: 'garbage'"


def test_the_last_step_is_read_from_the_first_running_pod_that_writes_one():
    launcher = pod("t-launcher-0-0", {"jobset.sigs.k8s.io/job-global-index": "0"}, progress=False)
    node_1 = pod("t-node-0-1", {"jobset.sigs.k8s.io/job-global-index": "2"})
    node_0 = pod("t-node-0-0", {"jobset.sigs.k8s.io/job-global-index": "1"})
    waiting = pod("t-node-0-2", {"jobset.sigs.k8s.io/job-global-index": "0"}, phase="Pending")
    found = training_jobs.progress_pod([launcher, node_1, node_0, waiting])
    assert found is not None and found[0] is node_0 and found[1:] == ("train", PROGRESS_FILE)
    assert training_jobs.progress_pod([launcher, waiting]) is None
