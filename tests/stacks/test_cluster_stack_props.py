"""ClusterStackProps: the props every stack takes, defined, documented and checked in one place."""

import dataclasses
import inspect

import aws_cdk as cdk
import pytest

from tests.support.apps import new_app
from trainium_eks.core.validation import ConfigurationError, Problems
from trainium_eks.stacks.cluster_stack_props import DEFAULT_AZ_ID, ClusterStackProps
from trainium_eks.stacks.composer_training_stack import ComposerTrainingStack
from trainium_eks.stacks.kubeflow_training_stack import KubeflowTrainingStack
from trainium_eks.stacks.training_cluster_stack import TrainingClusterStack
from trainium_eks.stacks.trainium_eks_stack import TrainiumEksStack

SHARED = {field.name for field in dataclasses.fields(ClusterStackProps)}
STACKS = [TrainiumEksStack, KubeflowTrainingStack, ComposerTrainingStack]


def keyword_props(cls):
    return {name for name, p in inspect.signature(cls.__init__).parameters.items() if p.kind == p.KEYWORD_ONLY}


def problems_of(props: ClusterStackProps):
    problems = Problems("stack")
    props.check(problems, region="us-west-2")
    return list(problems)


def test_the_defaults_are_valid_and_run_no_seed_jobs_without_an_image():
    props = ClusterStackProps()
    assert problems_of(props) == []
    assert props.availability_zone_id == DEFAULT_AZ_ID and props.seed_jobs is True
    assert not props.runs_seed_jobs and ClusterStackProps(image_directory="images/x").runs_seed_jobs


def test_each_shared_problem_is_named_by_its_prop():
    found = problems_of(ClusterStackProps(seed_jobs="yes", image_build_args={"A": 1}, vpc=object()))
    assert any(p.startswith("seed_jobs='yes'") for p in found), found
    assert any(p.startswith("image_build_args=") for p in found), found
    assert any(p.startswith("vpc=") for p in found), found
    assert any("give both vpc and node_subnet, or neither" in p for p in found), found


@pytest.mark.parametrize("stack", STACKS, ids=lambda cls: cls.__name__)
def test_no_stack_declares_a_shared_prop_again_and_each_passes_them_on(stack):
    assert keyword_props(stack) & SHARED == set(), "shared props are ClusterStackProps'; stacks pass them on"
    assert keyword_props(TrainingClusterStack) == SHARED


@pytest.mark.parametrize("stack", STACKS, ids=lambda cls: cls.__name__)
def test_every_stack_reports_a_shared_problem_the_same_way_with_its_own(stack):
    with pytest.raises(ConfigurationError) as raised:
        stack(
            new_app(),
            "S",
            env=cdk.Environment(region="us-west-2"),
            seed_jobs="no",
            **({"cpu_node_count": 0} if stack is KubeflowTrainingStack else {"node_count": 0}),
        )
    found = raised.value.problems
    assert any(p.startswith("seed_jobs='no': true or false") for p in found), found
    assert any("node_count=0" in p for p in found), found
