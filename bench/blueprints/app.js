#!/usr/bin/env node
/*
 * The peer of `make bench` (scripts/bench_synth.py): the AWS CDK EKS Blueprints app, in plain JavaScript, closest to
 * the project's seed stack TrainiumEks. It is synthesized by the same CDK CLI as app.py, interleaved with it, and
 * only for its time: nothing here is deployed, and the stack is not meant to be.
 *
 * What it builds (EKS Blueprints 1.19.0, aws-cdk-lib 2.261.0, both pinned by package-lock.json):
 *   - Blueprints' own VPC (VpcProvider: 10.0.0.0/16, public and private subnets in the two AZs of cdk.json, one NAT
 *     gateway per AZ) and its default KMS key for secrets encryption;
 *   - an EKS cluster (aws-cdk-lib/aws-eks, Kubernetes 1.35: the newest 1.19.0 knows, with its kubectl 1.35 layer),
 *     control-plane logs api/audit/authenticator;
 *   - managed node groups: 2 x m7i.xlarge system nodes and 2 x trn1.32xlarge (AL2023 Neuron AMI) training nodes;
 *   - add-ons: VPC CNI, CoreDNS, kube-proxy, EKS Pod Identity agent, CloudWatch observability (Container Insights),
 *     the FSx for Lustre CSI driver (Blueprints has no add-on for it: its generic CoreAddOn, Pod Identity), Karpenter
 *     (v1, Pod Identity, interruption queue, one trn1.32xlarge NodePool) and the Neuron device plugin.
 *     Blueprints 1.19.0 has no EFA add-on (and the project installs none either).
 * Every managed add-on version is pinned, from Blueprints' own version map for 1.35: "auto" would call the EKS API
 * (DescribeAddonVersions) at synth.
 *
 * Offline and deterministic: account and region are explicit, the AZs come from cdk.json's context (so no lookup),
 * and the only fetch at synth is NeuronDevicePluginAddOn's, served locally:
 *
 * How the Neuron manifests are served. NeuronDevicePluginAddOn.deploy() (dist/addons/neuron/index.js) reads two
 * module constants, PLUGIN_URL and RBAC_URL (raw.githubusercontent.com/aws-neuron/aws-neuron-sdk/master/src/k8/
 * k8s-neuron-device-plugin{,-rbac}.yml), and fetches them with `loadExternalYaml(url)` of dist/utils/yaml-utils.js,
 * a synchronous HTTP GET (the `sync-request` package, which runs the request in a worker process it spawns) followed
 * by js-yaml's loadAll. The add-on takes no property for the URL, and the constants are not exported, so this app
 * replaces the exported `loadExternalYaml` of yaml-utils (the add-on calls it through that module's exports object,
 * `(0, yaml_utils_1.loadExternalYaml)(URL)`, so the replacement is what it calls) with a wrapper that maps the two
 * upstream URLs to the same file names under $BENCH_NEURON_BASE_URL and then calls the original function: the peer
 * still pays its own synth-time fetch (worker process, HTTP, YAML parse), against 127.0.0.1 instead of GitHub. Any
 * other URL is refused, so a synth of this app never reaches the network. The server cannot live in this process:
 * `sync-request` blocks this process's event loop until the response arrives. scripts/bench_synth.py writes the two
 * stand-in manifests (its own small ServiceAccount/ClusterRole/ClusterRoleBinding and DaemonSet, not upstream's YAML),
 * serves them on 127.0.0.1 and sets BENCH_NEURON_BASE_URL for the peer's runs.
 */

const cdk = require("aws-cdk-lib");
const ec2 = require("aws-cdk-lib/aws-ec2");
const eks = require("aws-cdk-lib/aws-eks");
const iam = require("aws-cdk-lib/aws-iam");
const blueprints = require("@aws-quickstart/eks-blueprints");
const yamlUtils = require("@aws-quickstart/eks-blueprints/dist/utils/yaml-utils");
const { CoreAddOn } = require("@aws-quickstart/eks-blueprints/dist/addons/core-addon");

const NEURON_UPSTREAM = "https://raw.githubusercontent.com/aws-neuron/aws-neuron-sdk/master/src/k8/";
const NEURON_FILES = ["k8s-neuron-device-plugin.yml", "k8s-neuron-device-plugin-rbac.yml"];

function serveNeuronManifestsLocally() {
  const base = process.env.BENCH_NEURON_BASE_URL;
  if (!base || !/^http:\/\/127\.0\.0\.1:\d+\/$/.test(base)) {
    throw new Error(
      "BENCH_NEURON_BASE_URL must name the local server of the stand-in Neuron manifests (http://127.0.0.1:PORT/): " +
        "run this app through scripts/bench_synth.py"
    );
  }
  const load = yamlUtils.loadExternalYaml;
  yamlUtils.loadExternalYaml = (url) => {
    const file = url.startsWith(NEURON_UPSTREAM) ? url.slice(NEURON_UPSTREAM.length) : undefined;
    if (!NEURON_FILES.includes(file)) {
      throw new Error(`the bench's peer fetches nothing at synth but the Neuron manifests; refused: ${url}`);
    }
    return load(base + file);
  };
}

const K8S = eks.KubernetesVersion.V1_35;
// Blueprints 1.19.0's own version map for Kubernetes 1.35 (what its "auto" falls back to offline).
const VERSIONS = {
  vpcCni: "v1.21.1-eksbuild.1",
  coreDns: "v1.13.2-eksbuild.3",
  kubeProxy: "v1.35.0-eksbuild.2",
  podIdentityAgent: "v1.3.10-eksbuild.2",
  cloudWatch: "v5.3.1-eksbuild.1",
};

/** The FSx for Lustre CSI driver as an EKS managed add-on: Blueprints 1.19.0 has none, so its generic CoreAddOn. */
function fsxCsiDriver() {
  return new CoreAddOn({
    addOnName: "aws-fsx-csi-driver",
    version: undefined, // no pin: EKS picks its default (as the project does); not "auto", which would call the EKS API
    saName: "fsx-csi-controller-sa",
    saType: eks.IdentityType.POD_IDENTITY,
    policyDocumentProvider: (partition) =>
      new iam.PolicyDocument({
        statements: [
          new iam.PolicyStatement({
            actions: ["fsx:CreateFileSystem", "fsx:DeleteFileSystem", "fsx:DescribeFileSystems", "fsx:TagResource"],
            resources: ["*"],
          }),
          new iam.PolicyStatement({
            actions: ["iam:CreateServiceLinkedRole", "iam:AttachRolePolicy", "iam:PutRolePolicy"],
            resources: [`arn:${partition}:iam::*:role/aws-service-role/fsx.amazonaws.com/*`],
          }),
        ],
      }),
  });
}

function main() {
  serveNeuronManifestsLocally();
  const app = new cdk.App({ stackTraces: false, context: { "aws:cdk:disable-creation-stack-traces": true } });
  const account = app.node.tryGetContext("account");
  const region = app.node.tryGetContext("region");

  const clusterProvider = blueprints.clusterBuilder()
    .version(K8S)
    .managedNodeGroup(
      {
        id: "system",
        instanceTypes: [new ec2.InstanceType("m7i.xlarge")],
        amiType: eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
        minSize: 2,
        desiredSize: 2,
        maxSize: 2,
      },
      {
        id: "trainium",
        instanceTypes: [new ec2.InstanceType("trn1.32xlarge")],
        amiType: eks.NodegroupAmiType.AL2023_X86_64_NEURON,
        minSize: 2,
        desiredSize: 2,
        maxSize: 2,
        labels: { "trainium-eks/accelerator": "neuron" },
        taints: [{ key: "aws.amazon.com/neuron", value: "true", effect: eks.TaintEffect.NO_SCHEDULE }],
      }
    )
    .build();

  blueprints.EksBlueprint.builder()
    .account(account)
    .region(region)
    .version(K8S)
    .clusterProvider(clusterProvider)
    .enableControlPlaneLogTypes(
      blueprints.ControlPlaneLogType.API,
      blueprints.ControlPlaneLogType.AUDIT,
      blueprints.ControlPlaneLogType.AUTHENTICATOR
    )
    .addOns(
      new blueprints.addons.VpcCniAddOn({ version: VERSIONS.vpcCni }),
      new blueprints.addons.CoreDnsAddOn(VERSIONS.coreDns),
      new blueprints.addons.KubeProxyAddOn(VERSIONS.kubeProxy),
      new blueprints.addons.EksPodIdentityAgentAddOn(VERSIONS.podIdentityAgent),
      new blueprints.addons.CloudWatchInsights({ version: VERSIONS.cloudWatch }),
      fsxCsiDriver(),
      new blueprints.addons.NeuronDevicePluginAddOn(),
      new blueprints.addons.KarpenterV1AddOn({
        podIdentity: true,
        interruptionHandling: true,
        nodePoolSpec: {
          requirements: [
            { key: "node.kubernetes.io/instance-type", operator: "In", values: ["trn1.32xlarge"] },
            { key: "karpenter.sh/capacity-type", operator: "In", values: ["on-demand"] },
          ],
          taints: [{ key: "aws.amazon.com/neuron", value: "true", effect: "NoSchedule" }],
          disruption: { consolidationPolicy: "WhenEmpty", consolidateAfter: "10m" },
        },
        ec2NodeClassSpec: {
          amiFamily: "AL2023",
          amiSelectorTerms: [{ alias: "al2023@latest" }],
          subnetSelectorTerms: [{ tags: { "karpenter.sh/discovery": "BlueprintsPeer" } }],
          securityGroupSelectorTerms: [{ tags: { "karpenter.sh/discovery": "BlueprintsPeer" } }],
        },
      })
    )
    .build(app, "BlueprintsPeer")
    .waitForAsyncTasks()
    .then(() => app.synth());
}

main();
