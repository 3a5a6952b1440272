"""JobReleaseAccessChart and JobReleaseCreatorChart: release Jobs read jobs and create only the kinds they hold."""

import pytest

from tests.support.charts import objects
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.manifests.access.job_release_access import JobReleaseAccessChart, JobReleaseCreatorChart


def test_release_jobs_may_read_jobs_hold_capacity_and_create_only_the_kinds_they_hold():
    access = objects(JobReleaseAccessChart(namespace="training"))
    assert access["Role", "job-release-read"]["rules"] == [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get"]},
        {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": ["get"]},
        {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs"], "verbs": ["get"]},
        {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs"], "verbs": ["get"]},
    ]
    assert access["Role", "job-release-capacity"]["rules"] == [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "list", "delete"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "list"]},
        {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["create", "get"]},
    ]
    creator = objects(JobReleaseCreatorChart(namespace="training", kind="vcjob"))
    assert creator["Role", "job-release-create-vcjob"]["rules"] == [
        {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": ["create", "delete"]}
    ]
    bindings = [obj for found in (access, creator) for key, obj in found.items() if key[0] == "RoleBinding"]
    assert len(bindings) == 3
    for binding in bindings:
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "job-release", "namespace": "training"}]
    with pytest.raises(ConfigurationError, match="kind='deployment'"):
        JobReleaseCreatorChart(namespace="training", kind="deployment")
