"""Old import paths of moved modules keep working for one release, warning; the library itself uses the new ones."""

import importlib
import subprocess
import sys
import warnings

import pytest

from tests.support.apps import REPO
from trainium_eks.moved import MOVED_MODULES


@pytest.mark.parametrize("old, new", sorted(MOVED_MODULES.items()))
def test_an_old_path_imports_with_a_warning_naming_the_new_one_and_gives_the_same_names(old, new):
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert [str(w.message) for w in caught if w.category is DeprecationWarning] == [
        f"{old} moved to {new}; the old path works until the next release"
    ]
    target = importlib.import_module(new)
    public = [name for name in vars(target) if not name.startswith("_")]
    assert public and all(getattr(module, name) is getattr(target, name) for name in public)


def test_the_library_and_the_default_app_use_no_old_path():
    code = (
        "import warnings; warnings.simplefilter('error', DeprecationWarning); import app; import trainium_eks.commands"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize(
    "old_module, old_name, new_name",
    [
        ("trainium_eks.training_stack", "TrainingStack", "TrainiumEksStack"),
        ("trainium_eks.system_stack", "TrainingSystemStack", "TrainingClusterStack"),
        ("trainium_eks.constructs.accelerated_node_group", "AcceleratedNodeGroup", "TrainingNodeGroup"),
        ("trainium_eks.manifests.training_job", "TrainingJobChart", "VolcanoJobChart"),
        ("trainium_eks.manifests.fsx_volume", "FsxVolumeChart", "LustreVolumeChart"),
        ("trainium_eks.constructs", "AcceleratedNodeGroup", "TrainingNodeGroup"),
    ],
)
def test_a_renamed_name_still_resolves_from_its_old_place_with_a_warning(old_module, old_name, new_name):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old_module)
        found = getattr(module, old_name)
    assert found.__name__ == new_name
    assert any(f".{old_name} is now " in str(w.message) and new_name in str(w.message) for w in caught)
    with pytest.raises(AttributeError):
        module.NoSuchName  # noqa: B018 - the attribute access is the test


def test_renamed_props_and_attributes_still_work_with_a_warning():
    import aws_cdk as cdk

    from trainium_eks.constructs.network import TrainingNetwork

    stack = cdk.Stack(cdk.App(), "Renamed", env=cdk.Environment(region="us-west-2"))
    with pytest.warns(DeprecationWarning, match=r"TrainingNetwork\(accelerated_az_id=\.\.\.\) is now node_az_id"):
        network = TrainingNetwork(stack, "Network", accelerated_az_id="usw2-az4")
    assert network.node_az_id == "usw2-az4"
    with pytest.warns(
        DeprecationWarning, match="TrainingNetwork.accelerated_subnet is now TrainingNetwork.node_subnet"
    ):
        assert network.accelerated_subnet is network.node_subnet
    with pytest.raises(TypeError, match="unexpected keyword argument 'acelerated_az_id'"):
        TrainingNetwork(stack, "Typo", acelerated_az_id="usw2-az4")


def test_the_trainium_stacks_old_prop_names_still_work_with_a_warning():
    from tests.support.apps import new_app
    from trainium_eks.stacks.trainium_eks_stack import TrainiumEksStack

    with pytest.warns(DeprecationWarning, match=r"accelerated_az_id=\.\.\.\) is now availability_zone_id"):
        stack = TrainiumEksStack(new_app(), "Old", accelerated_az_id="usw2-az3")
    assert stack.accelerated_nodes.subnet is stack.network.node_subnet and stack.network.node_az_id == "usw2-az3"


@pytest.mark.parametrize(
    "module,name,new_home",
    [
        ("trainium_eks.constructs.hybrid_workflow", "jsonata", "trainium_eks.constructs.private.jsonata"),
        (
            "trainium_eks.constructs.hybrid_workflow",
            "trainjob_template",
            "trainium_eks.constructs.private.trainjob_template",
        ),
        ("trainium_eks.constructs.hybrid_workflow", "EKS_CALL", "trainium_eks.constructs.private.workflow_definition"),
        (
            "trainium_eks.constructs.hybrid_workflow",
            "HISTORY_EVENT_QUOTA",
            "trainium_eks.constructs.private.workflow_checks",
        ),
        ("trainium_eks.workloads.cifar10_ddp", "DATASET_URL", "trainium_eks.workloads.cifar10_dataset"),
    ],
)
def test_a_name_that_moved_out_of_a_module_still_works_from_it_and_warns(module, name, new_home):
    with pytest.warns(DeprecationWarning, match=f"{module}.{name} is now {new_home}.{name}"):
        value = getattr(importlib.import_module(module), name)
    assert value is getattr(importlib.import_module(new_home), name)


@pytest.mark.parametrize(
    "owner,prop,replacement",
    [
        ("LustreVolumeChart", "storage_gib", "volume: LustreStorage's volume_source"),
        ("LustreVolumeChart", "file_system_id", "LustreVolumeSource(file_system_id=..."),
        ("TrainingRuntimeChart", "gate_image", "created by its release Job"),
        ("ClusterAddons", "system_nodes", "now after_nodes=[<the system node group>]"),
        ("WorkflowAccessChart", "read_jobs", "creates and reads each run's release Job"),
        ("WorkflowRunCleanup", "trainjobs_path", "jobs_path, the API path of the namespace's batch/v1 Jobs"),
        ("WorkflowRunCleanup", "job_name", "release_name, a function of the execution's name"),
    ],
)
def test_a_removed_prop_is_refused_saying_what_replaced_it(owner, prop, replacement):
    import aws_cdk as cdk

    from trainium_eks.constructs.cluster_addons import ClusterAddons
    from trainium_eks.constructs.workflow_run_cleanup import WorkflowRunCleanup
    from trainium_eks.core.validation import ConfigurationError
    from trainium_eks.manifests.access.workflow_access import WorkflowAccessChart
    from trainium_eks.manifests.addons.training_runtime import TrainingRuntimeChart
    from trainium_eks.manifests.storage.lustre_volume import LustreVolumeChart

    build = {
        "LustreVolumeChart": lambda **props: LustreVolumeChart(**props),
        "TrainingRuntimeChart": lambda **props: TrainingRuntimeChart(**props),
        "ClusterAddons": lambda **props: ClusterAddons(cdk.Stack(cdk.App(), "S"), "Addons", **props),
        "WorkflowAccessChart": lambda **props: WorkflowAccessChart(**props),
        "WorkflowRunCleanup": lambda **props: WorkflowRunCleanup(cdk.Stack(cdk.App(), "S"), "Cleanup", **props),
    }[owner]
    with pytest.raises(ConfigurationError) as raised:
        build(**{prop: "old"})
    (problem,) = raised.value.problems
    assert raised.value.where == owner
    assert problem.startswith(f"{prop}='old': removed: ") and replacement in problem
