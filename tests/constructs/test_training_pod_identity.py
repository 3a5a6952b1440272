"""TrainingPodIdentity: the training pods' role, trusted by EKS Pod Identity and limited to the data bucket."""

from tests.support.apps import BUCKET_CONTEXT, default_template, resources_of, role_by_description


def test_training_role_trusts_pod_identity_and_is_bound_to_the_training_service_account(template):
    role_id, role = role_by_description(template, "Training pods")
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    (association,) = [
        r["Properties"]
        for r in resources_of(template, "AWS::EKS::PodIdentityAssociation").values()
        if r["Properties"]["Namespace"] == "training"
    ]
    assert association["ServiceAccount"] == "training"
    assert association["RoleArn"] == {"Fn::GetAtt": [role_id, "Arn"]}
    assert not [
        p for p in resources_of(template, "AWS::IAM::Policy").values() if {"Ref": role_id} in p["Properties"]["Roles"]
    ], "without a data bucket the role has no permissions"


def test_training_role_is_limited_to_the_data_bucket_and_cannot_delete():
    template = default_template(**BUCKET_CONTEXT)
    role_id, _ = role_by_description(template, "Training pods")
    (policy,) = [
        p for p in resources_of(template, "AWS::IAM::Policy").values() if {"Ref": role_id} in p["Properties"]["Roles"]
    ]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    by_resource = {
        s["Resource"]: sorted([s["Action"]] if isinstance(s["Action"], str) else s["Action"]) for s in statements
    }
    assert by_resource == {
        "arn:aws:s3:::my-training-data": ["s3:ListBucket"],
        "arn:aws:s3:::my-training-data/*": ["s3:AbortMultipartUpload", "s3:GetObject", "s3:PutObject"],
    }
