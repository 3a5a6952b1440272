"""TrainingImageRepository: the ECR repository and the image asset."""

import json

import aws_cdk as cdk

from tests.support.apps import only
from trainium_eks.constructs.image_repository import TrainingImageRepository


def test_image_repository_scans_keeps_tags_immutable_encrypts_expires_untagged_and_is_retained(template):
    repository = only(template, "AWS::ECR::Repository")
    assert repository["DeletionPolicy"] == "Retain"
    props = repository["Properties"]
    assert props["ImageScanningConfiguration"] == {"ScanOnPush": True}
    assert props["ImageTagMutability"] == "IMMUTABLE"
    assert props["EncryptionConfiguration"] == {"EncryptionType": "KMS"}
    (rule,) = json.loads(props["LifecyclePolicy"]["LifecyclePolicyText"])["rules"]
    assert rule["selection"]["tagStatus"] == "untagged"
    assert rule["action"] == {"type": "expire"}


def test_image_asset_is_staged_for_amd64_and_not_built_at_synth(tmp_path):
    (tmp_path / "image").mkdir()
    (tmp_path / "image" / "Dockerfile").write_text("FROM scratch\n")
    app = cdk.App(outdir=str(tmp_path / "out"))
    stack = cdk.Stack(app, "S")
    images = TrainingImageRepository(stack, "Images", image_directory=str(tmp_path / "image"))
    assembly = app.synth()
    (asset,) = json.loads((tmp_path / "out" / "S.assets.json").read_text())["dockerImages"].values()
    assert asset["source"]["platform"] == "linux/amd64"
    assert "executable" not in asset["source"], "built by cdk deploy from the staged directory"
    assert images.image_uri is not None
    assert assembly.get_stack_by_name("S").template is not None
