"""scripts/architecture_pictures.py: the committed pictures are what the code draws from the stacks today, each
construct is in a panel, and the pages show them."""

import importlib.util
import xml.etree.ElementTree as ElementTree

import aws_cdk as cdk
import pytest
from constructs import Construct

from tests.support.apps import REPO
from tests.support.documentation import DOCS, README, page

SPEC = importlib.util.spec_from_file_location("architecture_pictures", REPO / "scripts" / "architecture_pictures.py")
pictures = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(pictures)


@pytest.fixture(scope="module")
def drawn():
    return pictures.pictures()


def test_each_committed_picture_is_what_the_code_draws(drawn):
    assert sorted(drawn) == [f"architecture-{name}.svg" for name in sorted(pictures.STACKS)]
    for file_name, text in drawn.items():
        assert (DOCS / file_name).read_text() == text, f"docs/{file_name} is stale: make docs draws it again"


def test_a_picture_is_well_formed_svg_with_every_panel_of_its_stack(drawn):
    root = ElementTree.fromstring(drawn["architecture-KubeflowTraining.svg"])
    texts = [element.text for element in root.iter("{http://www.w3.org/2000/svg}text")]
    for group, _ in pictures.GROUPS:
        assert group in texts
    assert "Storage: EfsStorage" in texts and "  TrainJob cifar10-ddp" in texts
    assert not any(pictures.HASH.search(text.strip()) for text in texts if text), "no spec hash in a job's name"


def test_a_construct_of_no_group_stops_the_drawing():
    stack = cdk.Stack(cdk.App(), "S")
    stranger = Construct(stack, "Stranger")
    cdk.CfnResource(stranger, "Queue", type="AWS::SQS::Queue")
    with pytest.raises(SystemExit, match="S/Stranger: Construct is in no group"):
        pictures.panels(stack, {"Resources": {}})


def test_counting_lists_the_connecting_kinds_last_and_counts_the_rest():
    lines = pictures.counted(
        pictures.Counter({"EC2 SubnetRouteTableAssociation": 5, "EC2 Subnet": 5, "EC2 VPC": 1}), "resource"
    )
    assert lines == ["EC2 Subnet ×5", "EC2 VPC", "EC2 SubnetRouteTableAssociation ×5"]
    many = pictures.counted(pictures.Counter({f"K{n}": 1 for n in range(8)}), "object")
    assert many[-1] == "+ 3 more objects of 3 kinds" and len(many) == pictures.MAX_TYPES + 1


def test_the_pages_show_the_pictures():
    for name in pictures.STACKS:
        assert f"](architecture-{name}.svg)" in page("stacks.md")
    assert "](docs/architecture-TrainiumEks.svg)" in README.read_text()
