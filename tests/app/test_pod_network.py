"""Every pod a stack runs in its training namespace can make the connections its work needs, and nothing else can reach
it or be reached from it: the stacks' NetworkPolicies through the model of :mod:`rehearsal.network_policy`."""

import itertools
from typing import Dict, List, Tuple

import pytest

from rehearsal.network_policy import Address, Cluster, Pod, Service
from tests.support.apps import COMPOSER_TRAINING, KUBEFLOW_TRAINING, TRAINIUM_EKS, resources_of, stack_template
from tests.support.manifests import MANIFEST, applied_objects, held_job, manifest_of, pod_templates
from trainium_eks.core.conventions import FABRIC_CHECK_LABEL, HELD_JOB_LABEL, INGRESS_POLICY_LABEL
from trainium_eks.manifests.access.training_network_policy import EKS_KUBERNETES_SERVICE_IPS
from trainium_eks.manifests.addons.etcd import CLIENT_PORT, PEER_PORT, EtcdChart
from trainium_eks.manifests.jobs.distributed_workload import MASTER_PORT
from trainium_eks.manifests.jobs.job_release import RELEASE_SERVICE_ACCOUNT
from trainium_eks.manifests.jobs.job_release_program import peer_labelled, peer_templates, peers_policy

STACKS = [TRAINIUM_EKS, KUBEFLOW_TRAINING, COMPOSER_TRAINING]
NAMESPACE = "training"
COREDNS = Pod(namespace="kube-system", labels={"k8s-app": "kube-dns"}, ip="10.0.100.2", ports={"dns": 53})
KUBE_DNS = Service(namespace="kube-system", selector={"k8s-app": "kube-dns"}, cluster_ip="172.20.0.10", ports={53: 53})
KARPENTER = Pod(namespace="kube-system", labels={"app.kubernetes.io/name": "karpenter"}, ip="10.0.100.3")
ELSEWHERE = Pod(namespace="default", labels={}, ip="10.0.100.4")
S3 = Address("52.218.128.1")
"""An address of Amazon S3 in us-west-2 (the staging jobs' source, through the gateway endpoint or NAT)."""
IMDS = Address("169.254.169.254")
POD_IDENTITY_AGENT = Address("169.254.170.23")
VPC_HOST = Address("10.0.1.5")
FSX = Address("10.0.130.7")
"""A Lustre file server in the node subnet: the CSI node plugin mounts it on the node, never from a pod."""
EPHEMERAL = 45123
"""A port the collectives' bootstrap might pick between a job's pods (NCCL, gloo, the Neuron runtime)."""


def released(template) -> Tuple[Dict[Tuple[str, str], Dict], List[Dict]]:
    """What the stack applies with every held job as its release creates it (its pods labelled for its peers policy),
    and the held jobs' peers policies (the release program's own functions make both)."""
    found = applied_objects(template)
    policies = []
    for obj in list(found.values()):
        if HELD_JOB_LABEL in (obj["metadata"].get("labels") or {}):
            held = held_job(obj)
            if peer_templates(held):
                found[held["kind"], held["metadata"]["name"]] = peer_labelled(held)
                policies.append(peers_policy(held, NAMESPACE, obj["metadata"]["name"], "release-uid"))
    return found, policies


def namespace_pods(template) -> Dict[str, List[Pod]]:
    """Two pods of every pod template the stack runs in the training namespace, by the object that makes them."""
    addresses = (f"10.0.{i // 250}.{i % 250 + 2}" for i in itertools.count(10))
    found: Dict[str, List[Pod]] = {}
    for (kind, name), obj in released(template)[0].items():
        if obj["metadata"].get("namespace") != NAMESPACE:
            continue
        for pod_template in pod_templates(obj):
            spec = pod_template["spec"]
            labels = {**pod_template["labels"], "trainium-eks/test-sa": spec.get("serviceAccountName") or "default"}
            ports = {
                p["name"]: p["containerPort"] for c in spec["containers"] for p in c.get("ports", []) if "name" in p
            }
            found[f"{kind}/{name}"] = [Pod(NAMESPACE, labels, next(addresses), ports=ports) for _ in range(2)]
    return found


def network_policies(template) -> List[Dict]:
    """Every NetworkPolicy the stack applies, in every namespace (``applied_objects`` keys by kind and name), and
    those its releases create."""
    found = [manifest_of(resource) for resource in resources_of(template, MANIFEST).values()]
    return [obj for obj in found if obj["kind"] == "NetworkPolicy"] + released(template)[1]


def system_namespaces(template) -> List[str]:
    """The namespaces other than the training namespace where the stack runs pods: its Helm releases', its add-ons'
    (kube-system always; amazon-cloudwatch with Container Insights) and those of the pods it applies itself."""
    found = {"kube-system"}
    found |= {r["Properties"]["Namespace"] for r in resources_of(template, "Custom::AWSCDK-EKS-HelmChart").values()}
    addons = {r["Properties"]["AddonName"] for r in resources_of(template, "AWS::EKS::Addon").values()}
    found |= {"amazon-cloudwatch"} if "amazon-cloudwatch-observability" in addons else set()
    found |= {o["metadata"].get("namespace") for o in applied_objects(template).values() if pod_templates(o)}
    return sorted(found - {NAMESPACE, None})  # None: a cluster-scoped runtime's templates, for the training namespace


def cluster_of(template, pods: Dict[str, List[Pod]]) -> Cluster:
    """The stack's policies in the VPC CNI's strict mode (``TrainingCluster``'s default)."""
    every_pod = [pod for group in pods.values() for pod in group] + [COREDNS, KARPENTER, ELSEWHERE]
    namespaces = {NAMESPACE: {}, "default": {}, **{name: {} for name in system_namespaces(template)}}
    return Cluster(network_policies(template), namespaces=namespaces, pods=every_pod, services=[KUBE_DNS], strict=True)


@pytest.mark.parametrize("name", STACKS)
def test_in_strict_mode_every_pod_of_the_stacks_own_namespaces_keeps_its_network(name):
    """A pod that no policy selects has no network in strict mode: each namespace where the stack runs pods admits
    its pods' traffic (a Helm release's pod, CoreDNS, the CloudWatch agent: to the API server and AWS, and from the
    API server to a webhook), while the device plugins keep their policy (no ingress) and the default namespace,
    which the stack leaves alone, is closed."""
    template = stack_template(name)
    namespaces = system_namespaces(template)
    expected = {"kube-system", "volcano-system", "amazon-cloudwatch"}
    expected |= {"kubeflow-system"} if name == KUBEFLOW_TRAINING else set()
    assert set(namespaces) == expected
    cluster = Cluster(
        network_policies(template),
        namespaces={n: {} for n in [*namespaces, "default"]},
        pods=[COREDNS],
        services=[KUBE_DNS],
        strict=True,
    )
    for namespace in namespaces:
        component = Pod(namespace, {"app.kubernetes.io/name": "component"}, "10.0.7.7")
        assert cluster.selected(component), namespace
        assert cluster.allowed(component, Address(EKS_KUBERNETES_SERVICE_IPS[1]), 443), namespace
        assert cluster.allowed(component, S3, 443) and cluster.allowed(component, KUBE_DNS, 53, "UDP"), namespace
        assert cluster.allowed(VPC_HOST, component, 9443), f"{namespace}: the API server calls its webhooks"
    plugins = [
        Pod(o["metadata"]["namespace"], t["labels"], "10.0.8.8")
        for o in applied_objects(template).values()
        if o["kind"] == "DaemonSet" and "device-plugin" in o["metadata"]["name"]
        for t in pod_templates(o)
        if not t["spec"].get("hostNetwork")  # the EFA plugin's: no policy applies to the host's network
    ]
    assert bool(plugins) == (name != KUBEFLOW_TRAINING)  # Neuron, NVIDIA; KubeflowTraining's GPU group is optional
    for plugin in plugins:
        assert cluster.allowed(plugin, Address(EKS_KUBERNETES_SERVICE_IPS[1]), 443), plugin.labels
        assert not cluster.allowed(VPC_HOST, plugin, 8080) and not cluster.allowed(COREDNS, plugin, 8080), plugin
    assert not cluster.allowed(ELSEWHERE, S3, 443) and not cluster.allowed(COREDNS, ELSEWHERE, 80)


@pytest.fixture(scope="module", params=STACKS)
def stack(request):
    template = stack_template(request.param)
    pods = namespace_pods(template)
    return request.param, cluster_of(template, pods), pods


def role_of(owner: str, pod: Pod) -> str:
    if pod.labels["trainium-eks/test-sa"] == RELEASE_SERVICE_ACCOUNT:
        return "release"
    if FABRIC_CHECK_LABEL in pod.labels:
        return "fabric"
    if owner.startswith("Job/") and "-data-" in owner:
        return "staging"
    if owner.startswith(("Deployment/tensorboard",)):
        return "tensorboard"
    return "training"


def test_every_stack_runs_each_kind_of_pod_it_checks(stack):
    name, _, pods = stack
    roles = {role_of(owner, group[0]) for owner, group in pods.items()}
    expected = {"release", "staging", "tensorboard", "training"} | ({"fabric"} if name == TRAINIUM_EKS else set())
    assert roles == expected


HELD = {TRAINIUM_EKS: 4, KUBEFLOW_TRAINING: 1, COMPOSER_TRAINING: 2}
"""How many held training jobs each stack runs (each created by its release, with a peers policy): TrainiumEks's
pre-compilation and training gangs, each with its fabric check; KubeflowTraining's TrainJob; ComposerTraining's two
jobs (one pod each, held until the data is staged)."""


def peered(pods: Dict[str, List[Pod]]) -> List[str]:
    """The owners whose pods carry a peers policy's label (set by their release)."""
    return [owner for owner, group in pods.items() if group[0].labels.get(INGRESS_POLICY_LABEL, "").endswith("-peers")]


def test_the_pods_of_a_job_reach_each_other_on_every_port(stack):
    name, cluster, pods = stack
    assert len(peered(pods)) == HELD[name], peered(pods)
    assert {role_of(owner, pods[owner][0]) for owner in peered(pods)} <= {"training", "fabric"}
    for owner in peered(pods):
        first, second = pods[owner]
        for port in (MASTER_PORT, 22, EPHEMERAL):
            assert cluster.allowed(first, second, port) and cluster.allowed(second, first, port), (owner, port)


def test_no_pod_of_a_job_reaches_the_pods_of_another_job(stack):
    """Each held job admits its own pods only (its peers policy): not another job's, not a release's, not a staging
    Job's, not TensorBoard's."""
    _, cluster, pods = stack
    for target in peered(pods):
        for owner, group in pods.items():
            if owner != target:
                for port in (MASTER_PORT, 22, EPHEMERAL):
                    assert not cluster.allowed(group[0], pods[target][0], port), (owner, target, port)


def test_without_its_peers_policy_a_jobs_pods_would_not_reach_each_other(stack):
    """The mutation the peers policies answer: the namespace's own policies admit no pod of a gang from another."""
    name, _, pods = stack
    template = stack_template(name)
    namespace_only = [p for p in network_policies(template) if not p["metadata"]["name"].endswith("-peers")]
    cluster = Cluster(namespace_only, namespaces={NAMESPACE: {}}, strict=True)
    for owner in peered(pods):
        first, second = pods[owner]
        assert not cluster.allowed(first, second, MASTER_PORT), owner


def test_every_pod_resolves_names_and_gets_pod_identity_credentials(stack):
    _, cluster, pods = stack
    for owner, (pod, _) in pods.items():
        for protocol in ("UDP", "TCP"):
            assert cluster.allowed(pod, KUBE_DNS, 53, protocol), owner
            assert cluster.allowed(pod, COREDNS, 53, protocol), owner
        assert not cluster.allowed(pod, COREDNS, 9153), f"{owner}: CoreDNS's metrics port is not DNS"
        assert cluster.allowed(pod, POD_IDENTITY_AGENT, 80), owner


def test_only_the_releases_reach_the_kubernetes_api(stack):
    _, cluster, pods = stack
    for owner, (pod, _) in pods.items():
        for address in EKS_KUBERNETES_SERVICE_IPS:
            reaches = cluster.allowed(pod, Address(address), 443)
            assert reaches == (role_of(owner, pod) == "release"), owner


def test_only_the_staging_jobs_reach_the_internet(stack):
    _, cluster, pods = stack
    for owner, (pod, _) in pods.items():
        assert cluster.allowed(pod, S3, 443) == (role_of(owner, pod) == "staging"), owner
        assert not cluster.allowed(pod, S3, 80), owner


def test_no_pod_of_the_namespace_reaches_a_pod_that_reaches_the_internet(stack):
    """A staging pod is nobody's way out: it admits no connection, from its own job's other pod either."""
    _, cluster, pods = stack
    every_pod = [pod for group in pods.values() for pod in group]
    staging = [pod for owner, group in pods.items() for pod in group if role_of(owner, pod) == "staging"]
    assert staging
    for target in staging:
        for source in every_pod:
            if source is not target:
                for port in (22, 443, 1080, 3128, MASTER_PORT, EPHEMERAL):
                    assert not cluster.allowed(source, target, port), (source.labels, port)


def test_no_pod_reaches_the_node_role_the_vpc_other_namespaces_or_the_file_servers(stack):
    _, cluster, pods = stack
    for owner, (pod, _) in pods.items():
        assert not cluster.allowed(pod, IMDS, 80), owner
        assert not cluster.allowed(pod, VPC_HOST, 443) and not cluster.allowed(pod, VPC_HOST, 22), owner
        assert not cluster.allowed(pod, KARPENTER, 8080) and not cluster.allowed(pod, ELSEWHERE, 80), owner
        assert not cluster.allowed(pod, FSX, 988), f"{owner}: the node mounts the file system, not the pod"


def test_nothing_outside_the_namespace_reaches_its_pods_but_their_node(stack):
    _, cluster, pods = stack
    for owner, (pod, _) in pods.items():
        for source in (ELSEWHERE, KARPENTER, COREDNS, VPC_HOST, S3):
            for port in (MASTER_PORT, 22, 6006, EPHEMERAL):
                assert not cluster.allowed(source, pod, port), (owner, source, port)
        assert cluster.allowed(Address(pod.node_ip), pod, 6006), f"{owner}: kubelet probes"


def test_tensorboard_admits_the_namespace_on_its_port_only(stack):
    _, cluster, pods = stack
    (tensorboard, _) = pods["Deployment/tensorboard"]
    training = next(group[0] for owner, group in pods.items() if role_of(owner, group[0]) == "training")
    assert cluster.allowed(training, tensorboard, 6006)
    assert not cluster.allowed(training, tensorboard, 22), "its own policy alone decides its ingress"


def test_etcd_admits_the_namespace_on_its_client_port_only():
    template = stack_template(TRAINIUM_EKS)
    pods = namespace_pods(template)
    etcd = EtcdChart()
    (deployment,) = [o for o in etcd.manifests() if o["kind"] == "Deployment"]
    (service,) = [o for o in etcd.manifests() if o["kind"] == "Service"]
    etcd_pod = Pod(NAMESPACE, deployment["spec"]["template"]["metadata"]["labels"], "10.0.99.9")
    etcd_service = Service(NAMESPACE, service["spec"]["selector"], "172.20.0.50", {CLIENT_PORT: CLIENT_PORT})
    policies = [obj for obj in applied_objects(template).values() if obj["kind"] == "NetworkPolicy"]
    policies += [o for o in etcd.manifests() if o["kind"] == "NetworkPolicy"]
    every_pod = [pod for group in pods.values() for pod in group] + [etcd_pod, ELSEWHERE]
    cluster = Cluster(policies, namespaces={NAMESPACE: {}, "default": {}}, pods=every_pod, services=[etcd_service])
    worker = pods[next(owner for owner, group in pods.items() if role_of(owner, group[0]) == "training")][0]
    assert cluster.allowed(worker, etcd_service, CLIENT_PORT) and cluster.allowed(worker, etcd_pod, CLIENT_PORT)
    assert not cluster.allowed(worker, etcd_pod, PEER_PORT), "the peer port is the member's own"
    assert not cluster.allowed(ELSEWHERE, etcd_pod, CLIENT_PORT)
