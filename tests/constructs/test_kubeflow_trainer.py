"""KubeflowTrainer: its Helm release on the system nodes after ``after``, its runtime after it, its refusals."""

import json

import aws_cdk as cdk
import pytest
from aws_cdk import assertions

from tests.support.apps import new_app, only, resources_of
from tests.support.clusters import ENV, imported_cluster
from tests.support.manifests import MANIFEST, manifest_of
from trainium_eks.constructs.kubeflow_trainer import KubeflowTrainer
from trainium_eks.core.conventions import SYSTEM_NODE_LABELS
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.manifests.addons.training_runtime import DEFAULT_RUNTIME


def trainer_stack(**props):
    """A stack with an imported cluster, a stand-in for Volcano's release and the trainer built with ``props``."""
    stack = cdk.Stack(new_app(), "Trainer", env=ENV)
    _, cluster = imported_cluster(stack)
    volcano = cdk.CfnWaitConditionHandle(stack, "VolcanoRelease")
    trainer = KubeflowTrainer(stack, "Trainer", cluster=cluster, **{"after": [volcano], **props})
    return stack, trainer, assertions.Template.from_stack(stack)


def test_defaults_run_the_controller_on_the_system_nodes_and_a_volcano_runtime_after_the_release():
    _, trainer, template = trainer_stack()
    ((release_id, release),) = resources_of(template, "Custom::AWSCDK-EKS-HelmChart").items()
    assert json.loads(release["Properties"]["Values"])["manager"] == {"nodeSelector": dict(SYSTEM_NODE_LABELS)}
    assert release["Properties"]["CreateNamespace"] is True
    network = namespace_network(template)
    assert sorted(release["DependsOn"]) == sorted(["VolcanoRelease", *network]), "after ``after`` and its namespace"
    (resource,) = [r for r in resources_of(template, MANIFEST).values() if manifest_of(r)["kind"] not in NETWORK_KINDS]
    assert release_id in resource["DependsOn"], "the runtime waits for the controller and its webhook"
    runtime = manifest_of(resource)
    assert (runtime["kind"], runtime["metadata"]["name"]) == ("ClusterTrainingRuntime", DEFAULT_RUNTIME)
    spec = runtime["spec"]
    assert "volcano" in spec["podGroupPolicy"]
    pod = spec["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["schedulerName"] == "volcano"
    assert trainer.job_prerequisites == [trainer.runtime]
    assert trainer.runtime_chart.runtime_name == DEFAULT_RUNTIME


NETWORK_KINDS = ("Namespace", "NetworkPolicy")


def namespace_network(template):
    """The logical IDs of kubeflow-system's namespace and allow-all policy, applied before the release."""
    found = {lid: manifest_of(r) for lid, r in resources_of(template, MANIFEST).items()}
    network = {lid: obj for lid, obj in found.items() if obj["kind"] in NETWORK_KINDS}
    assert sorted((o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in network.values()) == [
        ("Namespace", "kubeflow-system", None),
        ("NetworkPolicy", "allow-all", "kubeflow-system"),
    ]
    return list(network)


def test_a_named_runtime_without_volcano_and_nothing_to_wait_for_but_its_namespace():
    _, _, template = trainer_stack(runtime_name="neuron-torch", volcano=False, after=[])
    release = only(template, "Custom::AWSCDK-EKS-HelmChart")
    assert sorted(release["DependsOn"]) == sorted(namespace_network(template))
    (resource,) = [r for r in resources_of(template, MANIFEST).values() if manifest_of(r)["kind"] not in NETWORK_KINDS]
    runtime = manifest_of(resource)
    assert runtime["metadata"]["name"] == "neuron-torch"
    assert "podGroupPolicy" not in runtime["spec"]
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert "schedulerName" not in pod, "the default scheduler places the pods"


def test_every_wrong_setting_is_named_in_one_error():
    with pytest.raises(ConfigurationError) as raised:
        trainer_stack(runtime_name="Torch_Runtime", volcano="yes", after="volcano")
    message = str(raised.value)
    assert "Trainer/Trainer: 3 configuration problems" in message
    assert "runtime_name='Torch_Runtime': a DNS-1123 label" in message
    assert "volcano='yes': true or false" in message
    assert "after='volcano': a list of constructs (Volcano's Helm release)" in message
    with pytest.raises(ConfigurationError, match=r"after=\['x'\]: a list of constructs"):
        trainer_stack(after=["x"])


def test_a_cluster_imported_without_a_kubectl_provider_is_refused_with_how_to_import_it():
    stack = cdk.Stack(new_app(), "NoKubectl", env=ENV)
    _, cluster = imported_cluster(stack, kubectl_provider=None)
    with pytest.raises(
        ConfigurationError, match=r"a cluster with kubectl_provider: import it with .*kubectl_provider="
    ):
        KubeflowTrainer(stack, "Trainer", cluster=cluster)
    assert resources_of(assertions.Template.from_stack(stack), "Custom::AWSCDK-EKS-HelmChart") == {}
