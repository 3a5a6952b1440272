"""audit_exceptions: checkov's accepted findings as annotations, and which image findings are accepted."""

from aws_cdk import Token

from trainium_eks.facts import versions
from trainium_eks.manifests.audit_exceptions import (
    DIGEST_NOT_READ,
    STACK_IMAGE,
    checkov_skips,
    image_skips,
    worker_skips,
)


def test_skips_are_numbered_annotations_in_the_order_of_their_checks():
    assert checkov_skips({"CKV_K8S_9": "b", "CKV_K8S_11": "a"}) == {
        "checkov.io/skip1": "CKV_K8S_11=a",
        "checkov.io/skip2": "CKV_K8S_9=b",
    }


def test_only_the_stacks_own_image_and_unread_pins_have_their_image_findings_accepted():
    asset = Token.as_string({"Ref": "ImageUri"})
    assert image_skips(asset) == {"CKV_K8S_15": STACK_IMAGE, "CKV_K8S_43": STACK_IMAGE}
    assert image_skips(versions.ETCD.image) == {
        "CKV_K8S_15": image_skips(versions.TENSORBOARD.image)["CKV_K8S_15"],
        "CKV_K8S_43": DIGEST_NOT_READ,
    }
    assert image_skips(versions.JOB_RELEASE_IMAGE.image) == {}, "pinned by digest: nothing to accept"
    assert image_skips("example.com/mine:v1") == {}, "your image by tag is a true finding"
    assert "CKV_K8S_43" not in worker_skips("example.com/mine:v1") and "CKV_K8S_23" in worker_skips("x")
    assert "CKV_K8S_8" in worker_skips("x") and "CKV_K8S_8" not in worker_skips("x", liveness_probe=True)
