"""The SageMaker side of the hybrid workflow: the training types an image may run on."""

from __future__ import annotations

from trainium_eks.facts.catalog import INSTANCE_CATALOG, SAGEMAKER_TRAINING_TYPES


def test_sagemaker_types_are_sagemaker_training_types_of_the_catalog():
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    training_types = set(model.shape_for("TrainingInstanceType").enum)
    assert set(SAGEMAKER_TRAINING_TYPES) <= training_types
    assert all(name[3:] in INSTANCE_CATALOG for name in SAGEMAKER_TRAINING_TYPES)
