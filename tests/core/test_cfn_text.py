"""cfn_text: a resolved CloudFormation string expression as one text, in cdk-nag's form or the caller's."""

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3

from trainium_eks.core.cfn_text import cfn_text, compact_json


def test_plain_strings_and_joins_of_references_and_attributes():
    expression = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":s3:::", {"Fn::GetAtt": ["Bucket", "Arn"]}]]}
    assert cfn_text("text") == "text"
    assert cfn_text(expression) == "arn:<AWS::Partition>:s3:::<Bucket.Arn>"
    assert cfn_text({"Fn::GetAtt": "Bucket.Arn"}) == "<Bucket.Arn>"
    assert cfn_text({"Fn::Sub": "${AWS::AccountId}.dkr"}) == "${AWS::AccountId}.dkr"


def test_the_caller_chooses_how_references_read():
    expression = {"Fn::Join": ["/", [{"Ref": "A"}, {"Fn::GetAtt": ["B", "Arn"]}]]}
    assert cfn_text(expression, reference=lambda i: f"ref({i})", attribute=lambda p: "+".join(p)) == "ref(A)/B+Arn"


def test_what_cdk_nag_names_a_bucket_objects_resource():
    stack = cdk.Stack(cdk.App(), "S")
    bucket = s3.Bucket(stack, "Models")
    text = cfn_text(stack.resolve(bucket.arn_for_objects("sagemaker/*")))
    assert text == f"<{stack.get_logical_id(bucket.node.default_child)}.Arn>/sagemaker/*"


@pytest.mark.parametrize("value", [{"Fn::Select": [0, ["a"]]}, {"Fn::Sub": ["${A}", {"A": "x"}]}, 3, None])
def test_any_other_expression_is_refused(value):
    with pytest.raises(ValueError, match="not a string expression"):
        cfn_text(value)


def test_another_intrinsic_inside_a_join_is_written_as_cdk_nag_writes_it_when_asked():
    select = {"Fn::Select": [6, {"Fn::Split": [":", {"Ref": "Workflow"}]}]}
    expression = {
        "Fn::Join": ["", ["arn:aws:states:us-west-2:", {"Ref": "AWS::AccountId"}, ":execution:", select, ":*"]]
    }
    name = '{"Fn::Select":[6,{"Fn::Split":[":",{"Ref":"Workflow"}]}]}'
    assert cfn_text(expression, other=compact_json) == f"arn:aws:states:us-west-2:<AWS::AccountId>:execution:{name}:*"
