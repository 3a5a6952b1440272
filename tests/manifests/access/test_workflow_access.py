"""WorkflowAccessChart: the hybrid workflow's Kubernetes group may create, read and delete TrainJobs only."""

from __future__ import annotations

import pytest

from trainium_eks.core.validation import ConfigurationError
from trainium_eks.manifests.access.workflow_access import WorkflowAccessChart


def test_workflow_access_chart_refuses_bad_names():
    with pytest.raises(ConfigurationError) as raised:
        WorkflowAccessChart(group="system:masters", namespace="Training")
    assert len(raised.value.problems) == 2
