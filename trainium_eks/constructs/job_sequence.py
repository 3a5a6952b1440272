"""JobSequence: jobs applied to the cluster by the stack, each after the jobs it waits for have completed."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import cdk8s
from aws_cdk import Duration, Stack
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct, IConstruct

from trainium_eks.constructs.applied_chart import AppliedChart
from trainium_eks.core.validation import Problems, check_cluster, check_dns_label, check_instance, implements
from trainium_eks.manifests.access.fabric_suspect_admission import FabricSuspectAdmissionChart
from trainium_eks.manifests.access.held_job_admission import HeldJobAdmissionChart
from trainium_eks.manifests.access.job_release_access import (
    FabricSuspectAccessChart,
    JobReleaseAccessChart,
    JobReleaseCreatorChart,
)
from trainium_eks.manifests.access.peers_policy_admission import PeersPolicyAdmissionChart
from trainium_eks.manifests.addons.etcd import EtcdChart
from trainium_eks.manifests.jobs.adopted_job import AdoptedJobChart
from trainium_eks.manifests.jobs.dataset_staging import StagingProgramChart
from trainium_eks.manifests.jobs.fabric_check import FabricProgramChart
from trainium_eks.manifests.jobs.job_chart import JobChart
from trainium_eks.manifests.jobs.job_release import (
    DEFAULT_TIMEOUT_SECONDS,
    MAX_TIMEOUT_SECONDS,
    JobReleaseChart,
    ReleaseProgramChart,
    is_held,
)
from trainium_eks.manifests.jobs.job_release_program import API


class JobSequence(Construct):
    """Applies job charts (``DatasetStagingChart``, ``VolcanoJobChart``, ``TrainJobChart``, ...) to a cluster, each
    job created only once the jobs it waits for have completed.

    - **A job of one pod that waits for nothing** is applied as it is, after ``prerequisites``.
    - **A job that waits for others, and every gang, is held**: the stack applies its release Job instead
      (:class:`~trainium_eks.manifests.jobs.job_release.JobReleaseChart`), a small pod on the system nodes that creates
      the job, owned by the release Job, once every job it waits for has completed, and fails naming the job that failed
      (or the one it gave up on after ``release_timeout``). Until then the held job does not exist, so it holds no
      device, CPU or memory that the jobs it waits for need, whatever order the objects arrive in and however often
      those jobs restart; nothing waits inside a training pod. A gang (two pods or more) has its nodes held first
      and is watched until it ends, so that its first start and every restart find all its nodes
      (:class:`~trainium_eks.manifests.jobs.job_release_program.Capacity`,
      :class:`~trainium_eks.manifests.jobs.job_release_program.GangWatch`). The release Jobs' service account and Roles
      (:mod:`~trainium_eks.manifests.access.job_release_access`) are applied once per namespace and held kind, and
      the ConfigMap of their program (:class:`~trainium_eks.manifests.jobs.job_release.ReleaseProgramChart`) once per
      namespace, before the releases.
    - **A multi-node job on EFA nodes is checked first**: a job chart that has a fabric check (``VolcanoJobChart``,
      ``TrainJobChart`` or ``PyTorchJobChart`` on more than one node of an EFA type, ``fabric_check=True`` by default:
      its :attr:`~trainium_eks.manifests.jobs.distributed_job_chart.DistributedJobChart.fabric_check`) has it added
      first, as ``<id>-FabricCheck``: a Volcano Job that runs a collective benchmark (nccom-test on Neuron,
      nccl-tests on NVIDIA) across the job's nodes with the job's devices, EFA interfaces and environment
      (:class:`~trainium_eks.manifests.jobs.fabric_check.FabricCheckChart`). The check waits for what the job waits
      for (so it is applied, or held by a release, like the job would be), and the job waits for the check too: the
      job's release creates it only once the check has completed. The checks of a namespace mount the fabric
      program from one ConfigMap (:class:`~trainium_eks.manifests.jobs.fabric_check.FabricProgramChart`), applied
      once, before them. A check below its floor fails (Volcano ``TerminateJob``), the job's release fails naming
      it, and the job, and every job held after it, is never created. A check that names suspect nodes of a Karpenter
      NodePool is run again on new ones first: its release may taint nodes (only there, and with rounds to run: node
      groups replace no tainted node, so their checks' releases get no such permission), with the ClusterRole and
      admission policy of
      :class:`~trainium_eks.manifests.access.fabric_suspect_admission.FabricSuspectAdmissionChart` (once per
      sequence) and the binding of :class:`~trainium_eks.manifests.access.job_release_access.FabricSuspectAccessChart`
      (once per namespace), applied before it. A single-node job, or one on a type without
      EFA, has no check.
    - **A staging Job** (``DatasetStagingChart``) runs the staging program from its namespace's ConfigMap
      (:class:`~trainium_eks.manifests.jobs.dataset_staging.StagingProgramChart`), applied once, before it.
    - **A job that rendezvouses through etcd** (``VolcanoJobChart(rendezvous="etcd")``) gets the etcd server
      (:class:`~trainium_eks.manifests.addons.etcd.EtcdChart`) of its namespace, applied once, before it; with the
      default c10d rendezvous no etcd runs.

    A job's name carries a hash of its spec, and each job (or its release Job) is an :class:`AppliedChart`, whose
    resource is keyed by that name. So a changed job (an argument, the node count, the image) is a new CloudFormation
    resource: the next deploy creates the new job (or release), then deletes the old one with ``kubectl delete``,
    which stops a running old job (and, for a release, the garbage collector deletes the job it created); a job removed
    from the app is deleted from the cluster. No job is ever updated in place (a pod template is immutable) and nothing
    relies on ``kubectl apply --prune`` (it never prunes Volcano Jobs). Every job and release is created side by side
    after ``prerequisites``: CloudFormation never waits for a job to run.

    :param cluster: Required.
    :param prerequisites: What every job comes after. Default: nothing.
    :param access_prerequisites: What the release Jobs' service account and Roles come after (the namespace: they
        need nothing else, so they are applied while the rest of the prerequisites is). Default: ``prerequisites``.
    :param release_timeout: How long a held job's release waits for the jobs it waits for, from 11 minutes to 90 days.
        Default: 14 days.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        cluster: eks.ICluster,
        prerequisites: Sequence[IConstruct] = (),
        access_prerequisites: Optional[Sequence[IConstruct]] = None,
        release_timeout: Optional[Duration] = None,
    ) -> None:
        super().__init__(scope, id_)
        problems = Problems(self.node.path)
        check_cluster(problems, "cluster", cluster, "kubectl_provider")
        extra = () if access_prerequisites is None else access_prerequisites
        for name, value in (("prerequisites", prerequisites), ("access_prerequisites", extra)):
            if not isinstance(value, (list, tuple)) or not all(implements(item, IConstruct) for item in value):
                problems.add(name, value, "a list of constructs")
        if release_timeout is None:
            release_timeout = Duration.seconds(DEFAULT_TIMEOUT_SECONDS)
        if check_instance(problems, "release_timeout", release_timeout, Duration, "a Duration"):
            seconds = release_timeout.to_seconds()
            if not 660 <= seconds <= MAX_TIMEOUT_SECONDS:
                problems.add("release_timeout", release_timeout.to_human_string(), "from 11 minutes to 90 days")
        problems.raise_if_any()
        self.cluster = cluster
        self.prerequisites = list(prerequisites)
        self.access_prerequisites = list(prerequisites if access_prerequisites is None else access_prerequisites)
        self.release_timeout_seconds = int(release_timeout.to_seconds())
        self.jobs: List[AppliedChart] = []
        """What the sequence applies per job: the job itself, or the release Job of a held job."""
        self.releases: Dict[str, JobReleaseChart] = {}
        """Held job's reference (``vcjob/<name>``) -> its release chart."""
        self.fabric_checks: Dict[str, JobChart] = {}
        """Checked job's reference -> its fabric check (a ``FabricCheckChart``), applied before it."""
        self._shared: Dict[str, AppliedChart] = {}
        """What the sequence applies once per namespace (release access, programs, etcd), by construct id."""

    def add_prerequisites(self, *constructs: IConstruct) -> None:
        """What every job added from now on comes after, besides :attr:`prerequisites` (a controller installed after
        the sequence was built, say)."""
        problems = Problems(f"{self.node.path}.add_prerequisites")
        if not all(implements(item, IConstruct) for item in constructs):
            problems.add("constructs", constructs, "constructs")
        problems.raise_if_any()
        self.prerequisites.extend(constructs)

    def resolve(self, value: Any) -> Any:
        """``value`` with CDK tokens in CloudFormation form: pass it to job charts as ``resolve`` so that a job's
        hash does not depend on token numbering."""
        return Stack.of(self).resolve(value)

    def add(
        self, id_: str, chart: Union[JobChart, cdk8s.Chart], *, wait_for: Sequence[Union[str, JobChart]] = ()
    ) -> AppliedChart:
        """Apply ``chart`` after the prerequisites: the job itself when it is one pod that waits for nothing, else its
        release Job.

        ``chart`` is a job chart of the library (``VolcanoJobChart``, ``TrainJobChart``, ``DatasetStagingChart``...,
        which say what they wait for themselves), or a ``cdk8s.Chart`` of yours holding one job, which is adopted
        (:class:`~trainium_eks.manifests.jobs.adopted_job.AdoptedJobChart`: named after the hash of its spec) and
        waits for ``wait_for``. A job chart with a fabric check (``chart.fabric_check``) has the check added first,
        as ``<id_>-FabricCheck``: the job's own wait for it holds the job until the check has completed."""
        problems = Problems(f"{self.node.path}/{id_}")
        if check_instance(problems, "chart", chart, cdk8s.Chart, "a job chart (VolcanoJobChart, ...) or a cdk8s.Chart"):
            if isinstance(chart, JobChart) and wait_for:
                problems.add("wait_for", wait_for, f"empty: {type(chart).__name__} takes its own wait_for")
        problems.raise_if_any()
        if not isinstance(chart, JobChart):
            chart = AdoptedJobChart(chart, wait_for=wait_for, resolve=self.resolve)
        check = getattr(chart, "fabric_check", None)
        if check is not None:
            others = tuple(ref for ref in chart.wait_for if ref != check.ref)
            if check.ref not in chart.wait_for or check.wait_for != others:
                raise ValueError(f"{chart.ref}: its fabric check {check.ref} waits for {check.wait_for}, not {others}")
            self.add(f"{id_}-FabricCheck", check)
            self.fabric_checks[chart.ref] = check
        namespace = chart.namespace_name
        after = list(self.prerequisites)
        if getattr(chart, "needs_etcd", False):
            after += self._etcd_server(namespace).of_kind("Service")
        if getattr(chart, "needs_fabric_program", False):
            after.append(self._fabric_program(namespace))
        if getattr(chart, "needs_staging_program", False):
            after.append(self._staging_program(namespace))
        if not is_held(chart.manifest, chart.wait_for):
            applied = AppliedChart(self, id_, cluster=self.cluster, chart=chart, after=after)
        else:
            release = JobReleaseChart(
                job=chart.manifest, wait_for=chart.wait_for, timeout_seconds=self.release_timeout_seconds
            )
            after += self.release_prerequisites(namespace, chart.ref_kind)
            if getattr(chart, "needs_fabric_program", False) and chart.node_pool and chart.suspect_rounds:
                after.append(self._fabric_suspect_access(namespace))  # a check on a Karpenter pool: it may taint
            applied = AppliedChart(self, id_, cluster=self.cluster, chart=release, after=after)
            self.releases[chart.ref] = release
        self.jobs.append(applied)
        return applied

    def release_prerequisites(self, namespace: str, kind: str) -> List[AppliedChart]:
        """What a release Job of ``namespace`` that creates jobs of ``kind`` (``vcjob``, ``trainjob``, ...) needs
        before it runs: the release service account and reader Role, the Role that lets releases create ``kind``,
        the release program's ConfigMap, and the admission policy that lets only releases create the namespace's held
        jobs (:class:`~trainium_eks.manifests.access.held_job_admission.HeldJobAdmissionChart`), and the one that lets
        releases create no NetworkPolicy but a held job's peers policy
        (:class:`~trainium_eks.manifests.access.peers_policy_admission.PeersPolicyAdmissionChart`); each applied once
        per sequence. Give them to a release of your own (the hybrid workflow's runs use them). A fabric check's release
        needs more (:meth:`_fabric_suspect_access`), which :meth:`add` gives it."""
        problems = Problems(f"{self.node.path}.release_prerequisites")
        check_dns_label(problems, "namespace", namespace)
        if kind not in API:
            problems.add("kind", kind, f"one of {', '.join(sorted(API))}")
        problems.raise_if_any()
        return [
            self._release_access(namespace, ""),
            self._release_access(namespace, kind),
            self._release_program(namespace),
            self._held_job_admission(namespace),
            self._peers_policy_admission(namespace),
        ]

    def _release_access(self, namespace: str, kind: str) -> AppliedChart:
        """The release service account and reader Role of ``namespace`` (``kind`` empty), or the Role that lets
        releases create jobs of ``kind`` there; applied once each."""
        if kind:
            return self._once(
                f"ReleaseAccess-{namespace}-{kind}",
                lambda: JobReleaseCreatorChart(namespace=namespace, kind=kind),
                self.access_prerequisites,
            )
        return self._once(
            f"ReleaseAccess-{namespace}", lambda: JobReleaseAccessChart(namespace=namespace), self.access_prerequisites
        )

    def _fabric_suspect_access(self, namespace: str) -> AppliedChart:
        """What the release of a fabric check of ``namespace`` needs to taint the nodes its check found slow: the
        binding of the ClusterRole to the namespace's release account
        (:class:`~trainium_eks.manifests.access.job_release_access.FabricSuspectAccessChart`), applied once per
        namespace, after the ClusterRole and the admission policy that lets releases add that taint and nothing else
        (:class:`~trainium_eks.manifests.access.fabric_suspect_admission.FabricSuspectAdmissionChart`), applied once
        per sequence (its objects are cluster-scoped, for every namespace's releases): the permission is granted only
        once its limit is in place, and a release that comes after the binding comes after both."""
        guard = self._once("FabricSuspectGuard", FabricSuspectAdmissionChart, self.access_prerequisites)
        return self._once(
            f"FabricSuspectAccess-{namespace}",
            lambda: FabricSuspectAccessChart(namespace=namespace),
            [*self.access_prerequisites, guard],
        )

    def _release_program(self, namespace: str) -> AppliedChart:
        """The release program's ConfigMap of ``namespace``, which every release Job there runs; applied once."""
        return self._once(
            f"ReleaseProgram-{namespace}", lambda: ReleaseProgramChart(namespace=namespace), self.access_prerequisites
        )

    def _held_job_admission(self, namespace: str) -> AppliedChart:
        """The admission policy that lets only the releases of ``namespace`` create its held jobs; applied once."""
        return self._once(
            f"ReleaseGuard-{namespace}",
            lambda: HeldJobAdmissionChart(namespace=namespace),
            self.access_prerequisites,
        )

    def _peers_policy_admission(self, namespace: str) -> AppliedChart:
        """The admission policy that lets the releases of ``namespace`` create held jobs' peers policies and no other
        NetworkPolicy; applied once."""
        return self._once(
            f"PeersGuard-{namespace}",
            lambda: PeersPolicyAdmissionChart(namespace=namespace),
            self.access_prerequisites,
        )

    def _fabric_program(self, namespace: str) -> AppliedChart:
        """The fabric program's ConfigMap of ``namespace``, which every fabric check there mounts; applied once."""
        return self._once(
            f"FabricProgram-{namespace}", lambda: FabricProgramChart(namespace=namespace), self.access_prerequisites
        )

    def _staging_program(self, namespace: str) -> AppliedChart:
        """The staging program's ConfigMap of ``namespace``, which every staging Job there mounts; applied once."""
        return self._once(
            f"StagingProgram-{namespace}", lambda: StagingProgramChart(namespace=namespace), self.access_prerequisites
        )

    def _etcd_server(self, namespace: str) -> AppliedChart:
        """The etcd server of ``namespace``, applied once."""
        return self._once(f"Etcd-{namespace}", lambda: EtcdChart(namespace=namespace), self.prerequisites)

    def _once(self, id_: str, chart: Callable[[], cdk8s.Chart], after: Sequence[IConstruct]) -> AppliedChart:
        """The chart ``chart()`` applied as ``id_`` after ``after``, the first time it is asked for; then the same."""
        if id_ not in self._shared:
            self._shared[id_] = AppliedChart(self, id_, cluster=self.cluster, chart=chart(), after=list(after))
        return self._shared[id_]
