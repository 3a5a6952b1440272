"""core.conventions: the names, taints and resources that constructs and charts agree on."""

import dataclasses

import pytest

from trainium_eks.core import conventions
from trainium_eks.core.conventions import (
    ACCELERATOR_TAINTS,
    EfsVolumeSource,
    LustreVolumeSource,
    Taint,
    accelerator_taint,
)
from trainium_eks.core.validation import Problems, check_absolute_path, check_dns_label, check_label_key, check_labels
from trainium_eks.facts.catalog import Accelerator


def test_a_taints_toleration_tolerates_exactly_that_key_value_and_effect():
    taint = Taint("example.com/dedicated", "team-a", "NoExecute")
    assert taint.toleration() == {
        "key": "example.com/dedicated",
        "operator": "Equal",
        "value": "team-a",
        "effect": "NoExecute",
    }
    assert taint.toleration() is not taint.toleration(), "a new dict each time: callers may extend it"


@pytest.mark.parametrize(
    "accelerator,resource",
    [(Accelerator.NEURON, conventions.NEURON_DEVICE_RESOURCE), (Accelerator.NVIDIA, conventions.GPU_RESOURCE)],
)
def test_accelerated_nodes_are_tainted_no_schedule_by_their_device_plugins_resource(accelerator, resource):
    taint = accelerator_taint(accelerator)
    assert taint == Taint(resource, "true", "NoSchedule")
    assert taint is ACCELERATOR_TAINTS[accelerator]


def test_cpu_nodes_are_not_tainted():
    assert accelerator_taint(Accelerator.NONE) is None
    assert set(ACCELERATOR_TAINTS) == {a for a in Accelerator if a is not Accelerator.NONE}


def test_the_shared_names_are_valid_kubernetes_names_and_paths():
    problems = Problems("conventions")
    check_dns_label(problems, "DEFAULT_NAMESPACE", conventions.DEFAULT_NAMESPACE)
    check_dns_label(problems, "DEFAULT_SERVICE_ACCOUNT", conventions.DEFAULT_SERVICE_ACCOUNT)
    check_labels(problems, "SYSTEM_NODE_LABELS", dict(conventions.SYSTEM_NODE_LABELS))
    for name in ("NEURON_DEVICE_RESOURCE", "NEURON_CORE_RESOURCE", "EFA_RESOURCE", "GPU_RESOURCE"):
        check_label_key(problems, name, getattr(conventions, name))  # extended resources are qualified names
    check_absolute_path(problems, "SHARED_MOUNT", conventions.SHARED_MOUNT)
    check_absolute_path(problems, "OUTPUT_ROOT", conventions.OUTPUT_ROOT)
    assert list(problems) == []
    assert list(conventions.SYSTEM_NODE_LABELS) == [conventions.SYSTEM_NODE_LABEL]
    assert conventions.OUTPUT_ROOT.startswith(conventions.SHARED_MOUNT + "/"), "runs are written to the shared claim"


@pytest.mark.parametrize(
    "value",
    [
        Taint("k", "v", "NoSchedule"),
        LustreVolumeSource("fs-0123456789abcdef0", "fs.example", "abcdefgh", 1200),
        EfsVolumeSource("fs-0123456789abcdef0"),
    ],
    ids=lambda value: type(value).__name__,
)
def test_the_shared_values_are_immutable_and_compare_by_value(value):
    field = dataclasses.fields(value)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field, "changed")
    assert value == dataclasses.replace(value) and hash(value) == hash(dataclasses.replace(value))
