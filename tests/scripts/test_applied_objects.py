"""scripts/applied_objects.py writes every object a template applies, the held jobs too, and Volcano Jobs as pods."""

import importlib.util
import json

import yaml

from tests.support.apps import REPO, stack_template
from tests.support.manifests import applied_objects

SPEC = importlib.util.spec_from_file_location("applied_objects", REPO / "scripts" / "applied_objects.py")
script = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(script)


def test_every_applied_object_and_held_job_is_written_and_volcano_jobs_become_their_tasks_pods(tmp_path):
    template = stack_template("TrainiumEks")
    out = tmp_path / "cdk.out"
    out.mkdir()
    (out / "TrainiumEks.template.json").write_text(json.dumps(template.to_json()))
    written = script.write(out, tmp_path / "objects")
    found = {(o["kind"], o["metadata"]["name"]) for o in (yaml.safe_load(p.read_text()) for p in written)}
    assert found == set(applied_objects(template)), "the same objects the tests read, held jobs included"
    as_pods = script.write(out, tmp_path / "pods", pods=True)
    kinds = [yaml.safe_load(p.read_text()) for p in as_pods]
    volcano = [o for o in kinds if o["apiVersion"].startswith("batch.volcano.sh")]
    pods = [o for o in kinds if o["kind"] == "Pod"]
    assert not volcano and len(pods) == 4, "two training jobs and two fabric checks, one task each"
    assert all(pod["spec"]["containers"] and pod["metadata"]["namespace"] == "training" for pod in pods)
