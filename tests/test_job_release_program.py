"""The start gate, run as the init container runs it (``python3 -c <source> ...``) against a fake API server."""

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from trainium_eks.manifests.distributed_workload import START_GATE_SOURCE


class FakeApi:
    """Answers GETs of jobs from ``objects`` (path -> JSON, or an int HTTP status); a callable advances time."""

    def __init__(self):
        self.objects = {}
        self.requests = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's naming
                api.requests.append(self.path)
                answer = api.objects.get(self.path, 404)
                if callable(answer):
                    answer = answer(len([p for p in api.requests if p == self.path]))
                if isinstance(answer, int):
                    self.send_response(answer)
                    self.end_headers()
                    return
                body = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def gate(self, *args, timeout=20):
        env = {"START_GATE_API_URL": self.url, "START_GATE_POLL_SECONDS": "0", "PATH": "/usr/bin:/bin"}
        return subprocess.run(
            [sys.executable, "-c", START_GATE_SOURCE, *args], env=env, capture_output=True, text=True, timeout=timeout
        )


@pytest.fixture
def api():
    fake = FakeApi()
    yield fake
    fake.server.shutdown()


VCJOB = "/apis/batch.volcano.sh/v1alpha1/namespaces/training/jobs/compile-1"
JOB = "/apis/batch/v1/namespaces/training/jobs/data-1"


def vcjob(phase):
    return {"status": {"state": {"phase": phase}}}


def batch_job(condition):
    return {"status": {"conditions": [{"type": condition, "status": "True"}]}}


def test_waits_until_every_job_has_completed(api):
    api.objects[VCJOB] = lambda n: 404 if n == 1 else vcjob("Running") if n < 4 else vcjob("Completed")
    api.objects[JOB] = batch_job("Complete")
    result = api.gate("training", "vcjob/compile-1", "job/data-1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "waiting for vcjob/compile-1" in result.stdout
    assert api.requests.count(VCJOB) == 4


@pytest.mark.parametrize(
    "path,answer,ref",
    [
        (VCJOB, vcjob("Failed"), "vcjob/compile-1"),
        (VCJOB, vcjob("Aborted"), "vcjob/compile-1"),
        (JOB, batch_job("Failed"), "job/data-1"),
    ],
)
def test_fails_as_soon_as_a_job_failed(api, path, answer, ref):
    api.objects[path] = answer
    result = api.gate("training", ref)
    assert result.returncode == 1
    assert f"{ref} failed; not starting" in result.stdout


def test_fails_when_the_service_account_may_not_read_jobs(api):
    api.objects[JOB] = 403
    result = api.gate("training", "job/data-1")
    assert result.returncode == 1
    assert "cannot read job/data-1" in result.stdout and "403" in result.stdout


def test_keeps_waiting_through_server_errors(api):
    api.objects[JOB] = lambda n: 503 if n < 3 else batch_job("Complete")
    result = api.gate("training", "job/data-1")
    assert result.returncode == 0
    assert "API not reachable, retrying" in result.stdout


@pytest.mark.parametrize("args", [["training", "deployment/x"], ["training", "job-x"], ["training", "job/a vcjob"]])
def test_usage_errors(api, args):
    result = api.gate(*args)
    assert result.returncode == 2 and result.stderr.startswith("usage:")


@pytest.mark.parametrize("args", [["training"], ["training", ""], ["training", "  "]])
def test_nothing_to_wait_for_passes_at_once(api, args):
    """A runtime's gate gets its jobs from one environment variable, empty when the job waits for nothing."""
    result = api.gate(*args)
    assert result.returncode == 0 and "nothing to wait for" in result.stdout


def test_several_jobs_in_one_argument_as_an_environment_variable_gives_them(api):
    api.objects[JOB] = batch_job("Complete")
    api.objects["/apis/trainer.kubeflow.org/v1alpha1/namespaces/training/trainjobs/t-1"] = {
        "status": {"conditions": [{"type": "Complete", "status": "True"}]}
    }
    result = api.gate("training", "job/data-1 trainjob/t-1")
    assert result.returncode == 0, result.stdout + result.stderr
