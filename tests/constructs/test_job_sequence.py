"""JobReleaseChart and JobSequence: a held job reaches the cluster through its release Job, once per change."""

import json
from dataclasses import replace

import aws_cdk as cdk
import cdk8s
import pytest
from aws_cdk import assertions

from rehearsal.kubelet_expansion import expand
from tests.support.apps import new_app
from tests.support.clusters import ENV, imported_cluster
from tests.support.manifests import MANIFEST, held_job, manifest_of
from trainium_eks.constructs.job_sequence import JobSequence
from trainium_eks.constructs.training_node_group import TrainingNodeGroup
from trainium_eks.core.conventions import FABRIC_CHECK_LABEL, SYSTEM_NODE_LABELS
from trainium_eks.core.validation import ConfigurationError
from trainium_eks.manifests.jobs import job_release
from trainium_eks.manifests.jobs.adopted_job import AdoptedJobChart
from trainium_eks.manifests.jobs.dataset_staging import STAGING_PROGRAM, DatasetStagingChart
from trainium_eks.manifests.jobs.fabric_check import PROGRAM_CONFIG_MAP
from trainium_eks.manifests.jobs.job_naming import PLACEHOLDER, hashed_name
from trainium_eks.manifests.jobs.job_release import (
    HELD_JOB_LABEL,
    RELEASE_ANNOTATION,
    RELEASE_DIGEST,
    RELEASE_PROGRAM_CONFIG_MAP,
    RELEASE_PROGRAM_MOUNT,
    RELEASE_PROGRAM_PATH,
    RELEASE_PROGRAM_SOURCE,
    WAIT_FOR_ANNOTATION,
    JobReleaseChart,
    ReleaseProgramChart,
    held_annotations,
    kubelet_literal,
)
from trainium_eks.manifests.jobs.job_release_program import NEVER
from trainium_eks.manifests.jobs.topology import NodeGroupTopology
from trainium_eks.manifests.jobs.volcano_job import VolcanoJobChart


def held_manifest(name="train-0123456789", wait_for=("job/data-0123456789",), args=("--lr", "1e-4")):
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "training", "annotations": held_annotations(list(wait_for))},
        "spec": {"tasks": [{"name": "worker", "template": {"spec": {"containers": [{"args": list(args)}]}}}]},
    }


def release_job(chart):
    (job,) = chart.manifests()
    return job


def test_the_release_job_is_a_small_locked_down_pod_on_the_system_nodes_named_after_its_job():
    job = release_job(JobReleaseChart(job=held_manifest(), wait_for=["job/data-0123456789"]))
    assert job["metadata"]["name"] == "train-0123456789-release"
    assert job["metadata"]["labels"][HELD_JOB_LABEL] == "train-0123456789"
    spec = job["spec"]
    assert spec["activeDeadlineSeconds"] == 14 * 24 * 3600 and spec["backoffLimit"] == 6
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == "job-release" and pod["restartPolicy"] == "Never"
    assert pod["nodeSelector"] == SYSTEM_NODE_LABELS
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["resources"]["requests"] == {"cpu": "10m", "memory": "32Mi"}
    assert container["command"][2:] == ["training", "train-0123456789-release", "job/data-0123456789"]


def test_a_job_that_can_never_be_created_fails_the_release_at_once_and_a_drained_pod_does_not_count():
    rules = release_job(JobReleaseChart(job=held_manifest(wait_for=("job/d",)), wait_for=["job/d"]))["spec"][
        "podFailurePolicy"
    ]["rules"]
    fail, ignore = rules
    assert fail["action"] == "FailJob" and fail["onExitCodes"]["values"] == [2, NEVER]
    assert fail["onExitCodes"]["containerName"] == "release"
    assert ignore == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}


@pytest.mark.parametrize("text", ["plain", "$(HOME)", "$$", "a $$(X) b", "cost $5", "${Token[TOKEN.12]}", "$"])
def test_kubelet_literal_survives_the_kubelets_expansion(text):
    assert expand(kubelet_literal(text), {"HOME": "/root", "X": "x"}) == text


def test_the_held_job_reaches_the_program_exactly_as_synthesized_even_with_dollar_references():
    manifest = held_manifest(args=("--out", "$(JOB_NAME)/ckpt", "$$literal"))
    release = release_job(JobReleaseChart(job=manifest, wait_for=["job/data-0123456789"]))
    assert held_job(release) == manifest
    (container,) = release["spec"]["template"]["spec"]["containers"]
    assert container["command"][:2] == ["python3", RELEASE_PROGRAM_PATH]
    (program,) = ReleaseProgramChart(namespace="training").manifests()
    assert program["data"] == {"job_release_program.py": RELEASE_PROGRAM_SOURCE}
    (volume,) = release["spec"]["template"]["spec"]["volumes"]
    assert volume["configMap"]["name"] == program["metadata"]["name"] == RELEASE_PROGRAM_CONFIG_MAP
    assert {"name": volume["name"], "mountPath": RELEASE_PROGRAM_MOUNT, "readOnly": True} in container["volumeMounts"]


def test_the_held_name_changes_with_the_waits_and_the_release_job(monkeypatch):
    annotations = held_annotations(["job/a", "vcjob/b"])
    assert annotations == {WAIT_FOR_ANNOTATION: "job/a vcjob/b", RELEASE_ANNOTATION: RELEASE_DIGEST}
    kwargs = dict(
        name="train",
        image="example.com/t:1",
        node_group=_topology(),
        script="/opt/t.py",
        namespace="training",
        fabric_check=False,
    )

    def name(**props):
        return VolcanoJobChart(**kwargs, **props).manifest["metadata"]["name"]

    first, second, alone = name(wait_for=["job/a"]), name(wait_for=["job/b"]), name()
    assert len({first, second, alone}) == 3
    single = AdoptedJobChart(user_job_chart()).manifest["metadata"]["name"]
    monkeypatch.setattr(job_release, "RELEASE_DIGEST", "0123456789ab")
    assert name(wait_for=["job/a"]) != first, "another release Job, another held job"
    assert name() != alone, "a gang is held even when it waits for nothing: its release holds its nodes"
    assert AdoptedJobChart(user_job_chart()).manifest["metadata"]["name"] == single, (
        "a job of one pod that waits for nothing is not held and does not depend on the release"
    )


def test_the_release_digest_covers_everything_of_the_release_job_that_cannot_change_in_place(monkeypatch):
    """Kubernetes refuses a change to a Job's pod template or pod failure policy: any of them must rename it."""
    assert job_release._release_digest() == RELEASE_DIGEST
    with monkeypatch.context() as patched:
        patched.setattr(job_release, "RELEASE_IMAGE", "python:3.14-slim")
        assert job_release._release_digest() != RELEASE_DIGEST
    with monkeypatch.context() as patched:
        patched.setattr(job_release, "pod_failure_rules", lambda container, exit_codes: [])
        assert job_release._release_digest() != RELEASE_DIGEST
    with monkeypatch.context() as patched:
        patched.setattr(job_release, "SYSTEM_NODE_LABELS", {"role": "other"})
        assert job_release._release_digest() != RELEASE_DIGEST
    short = release_job(
        JobReleaseChart(job=held_manifest(wait_for=("job/d",)), wait_for=["job/d"], timeout_seconds=3600)
    )
    long = release_job(JobReleaseChart(job=held_manifest(wait_for=("job/d",)), wait_for=["job/d"]))
    assert short["metadata"]["name"] == long["metadata"]["name"], "the deadline is updated in place (mutable)"


@pytest.mark.parametrize(
    "change,expected",
    [
        (dict(job={"kind": "Deployment"}), "job="),
        (dict(job=held_manifest() | {"metadata": {"name": "x", "namespace": "training"}}), "job='vcjob/x'"),
        (dict(wait_for=["deployment/x"]), "wait_for="),
        (dict(wait_for="job/x"), "wait_for="),
        (dict(timeout_seconds=600), "timeout_seconds="),
        (dict(timeout_seconds=91 * 24 * 3600), "timeout_seconds="),
    ],
)
def test_a_release_that_could_not_work_is_refused_saying_why(change, expected):
    with pytest.raises(ConfigurationError) as raised:
        JobReleaseChart(**{"job": held_manifest(), "wait_for": ["job/data-0123456789"], **change})
    (problem,) = raised.value.problems
    assert problem.startswith(expected), problem


# --- JobSequence ------------------------------------------------------------------------------------------------


def _topology():
    stack = cdk.Stack(new_app(), "Topology", env=ENV)
    network, cluster = imported_cluster(stack)
    return TrainingNodeGroup(stack, "Nodes", cluster=cluster, subnet=network.node_subnet).topology


def sequence(**props):
    app = new_app()
    stack = cdk.Stack(app, "Jobs", env=ENV)
    network, cluster = imported_cluster(stack)
    nodes = TrainingNodeGroup(stack, "Nodes", cluster=cluster, subnet=network.node_subnet)
    prerequisite = cdk.CfnWaitConditionHandle(stack, "Prerequisite")
    jobs = JobSequence(stack, "Seq", cluster=cluster, prerequisites=[prerequisite], **props)
    return stack, nodes.topology, jobs


def training(topology, name, **props):
    """A two-node Trainium job; without its fabric check unless ``fabric_check=True`` (the tests of the check's
    wiring are below)."""
    props.setdefault("fabric_check", False)
    return VolcanoJobChart(name=name, image="example.com/t:1", node_group=topology, script="/opt/t.py", **props)


def applied(stack):
    template = assertions.Template.from_stack(stack).to_json()["Resources"]
    return {
        logical_id: (manifest_of(resource), set(resource.get("DependsOn", [])))
        for logical_id, resource in template.items()
        if resource["Type"] == MANIFEST
    }


def by_prefix(found, prefix):
    matches = [value for key, value in found.items() if key.startswith(prefix)]
    assert len(matches) == 1, (prefix, list(found))
    return matches[0]


def test_a_job_of_one_pod_that_waits_for_nothing_is_applied_as_it_is_and_nothing_else_is():
    stack, topology, jobs = sequence()
    chart = jobs.add("First", user_job_chart()).chart
    found = applied(stack)
    (job, depends) = by_prefix(found, "SeqFirst")
    assert job == json.loads(json.dumps(chart.manifest))
    assert depends == {"Prerequisite"}
    assert not jobs.releases and len(found) == 1, "no release access, no etcd for a job that needs neither"


def test_a_gang_that_waits_for_nothing_is_created_by_a_release_that_holds_its_nodes_first():
    stack, topology, jobs = sequence()
    chart = training(topology, "first")
    jobs.add("First", chart)
    release, depends = by_prefix(applied(stack), "SeqFirst")
    assert release["metadata"]["name"] == f"{chart.job_name}-release" and held_job(release) == chart.manifest
    assert release["spec"]["template"]["spec"]["containers"][0]["command"][2:] == [
        "training",
        release["metadata"]["name"],
    ]
    assert set(jobs.releases) == {chart.ref} and "Prerequisite" in depends


def test_held_jobs_share_one_release_account_per_namespace_and_one_creator_role_per_kind():
    stack, topology, jobs = sequence()
    first = training(topology, "first")
    jobs.add("First", first)
    second = training(topology, "second", wait_for=[first])
    third = training(topology, "third", wait_for=[second, "job/data-0123456789"])
    jobs.add("Second", second)
    jobs.add("Third", third)
    found = applied(stack)
    access = {key: found[key] for key in found if key.startswith("SeqReleaseAccess")}
    groups = {key: "vcjob" if key.startswith("SeqReleaseAccesstrainingvcjob") else "reader" for key in access}
    kinds = {
        group: sorted(obj["kind"] for key, (obj, _) in access.items() if groups[key] == group)
        for group in groups.values()
    }
    assert kinds == {
        "reader": ["Role", "Role", "RoleBinding", "RoleBinding", "ServiceAccount"],
        "vcjob": ["Role", "RoleBinding"],
    }
    assert set(jobs.releases) == {first.ref, second.ref, third.ref}, "the first, a gang, for its nodes"
    for name, chart in (("Second", second), ("Third", third)):
        release, depends = by_prefix(found, f"Seq{name}")
        assert release["metadata"]["name"] == f"{chart.manifest['metadata']['name']}-release"
        assert held_job(release)["metadata"]["name"] == chart.manifest["metadata"]["name"]
        assert "Prerequisite" in depends
        assert set(access) <= depends, "its service account and both Roles first"
    for _, depends in access.values():
        assert depends == {"Prerequisite"}, "access needs only the namespace"


def test_release_access_can_come_after_less_than_the_jobs():
    app = new_app()
    stack = cdk.Stack(app, "Jobs", env=ENV)
    network, cluster = imported_cluster(stack)
    topology = TrainingNodeGroup(stack, "Nodes", cluster=cluster, subnet=network.node_subnet).topology
    namespace, volcano = cdk.CfnWaitConditionHandle(stack, "Namespace"), cdk.CfnWaitConditionHandle(stack, "Volcano")
    jobs = JobSequence(
        stack, "Seq", cluster=cluster, prerequisites=[namespace, volcano], access_prerequisites=[namespace]
    )
    jobs.add("Held", training(topology, "held", wait_for=["job/data-0123456789"]))
    jobs.add_prerequisites(cdk.CfnWaitConditionHandle(stack, "Trainer"))
    jobs.add("Later", training(topology, "later"))
    found = applied(stack)
    guards = ("SeqReleaseAccess", "SeqReleaseGuard")
    assert {key: depends for key, (_, depends) in found.items() if key.startswith(guards)} == {
        key: {"Namespace"} for key in found if key.startswith(guards)
    }
    assert any(key.startswith("SeqReleaseGuard") for key in found)
    waiter = by_prefix(found, "SeqHeld")[1]
    assert waiter >= {"Namespace", "Volcano"} and "Trainer" not in waiter
    assert by_prefix(found, "SeqLater")[1] >= {"Namespace", "Volcano", "Trainer"}


def test_etcd_runs_only_for_jobs_that_rendezvous_through_it_once_per_namespace():
    stack, topology, jobs = sequence()
    jobs.add("C10d", training(topology, "c10d"))
    assert not any(key.startswith("SeqEtcd") for key in applied(stack))
    stack, topology, jobs = sequence()
    jobs.add("One", training(topology, "one", rendezvous="etcd"))
    jobs.add("Two", training(topology, "two", rendezvous="etcd"))
    found = applied(stack)
    etcd = {key: value for key, value in found.items() if key.startswith("SeqEtcdtraining")}
    assert {obj["kind"] for obj, _ in etcd.values()} == {"Service", "Deployment", "NetworkPolicy"}
    service = next(key for key, (obj, _) in etcd.items() if obj["kind"] == "Service")
    for name in ("One", "Two"):
        assert service in by_prefix(found, f"Seq{name}")[1]


def test_release_timeout_becomes_the_release_jobs_deadline():
    stack, topology, jobs = sequence(release_timeout=cdk.Duration.hours(6))
    jobs.add("Held", training(topology, "held", wait_for=["job/data-0123456789"]))
    release, _ = by_prefix(applied(stack), "SeqHeld")
    assert release["spec"]["activeDeadlineSeconds"] == 6 * 3600


@pytest.mark.parametrize("timeout", [cdk.Duration.minutes(10), cdk.Duration.days(91), 3600])
def test_a_release_timeout_out_of_bounds_is_refused(timeout):
    with pytest.raises(ConfigurationError) as raised:
        sequence(release_timeout=timeout)
    (problem,) = raised.value.problems
    assert problem.startswith("release_timeout="), problem


def test_the_same_job_added_twice_under_new_ids_is_two_resources_of_one_name():
    """A job's resource is keyed by its hashed name: a change of spec is a new resource, a new name."""
    stack, topology, jobs = sequence()
    jobs.add("A", training(topology, "same"))
    jobs.add("B", training(topology, "same", args=["--steps", "2"]))
    found = applied(stack)
    names = {by_prefix(found, f"Seq{key}")[0]["metadata"]["name"] for key in ("A", "B")}
    assert len(names) == 2
    for key, (obj, _) in found.items():
        assert obj["metadata"]["name"].replace("-", "") in key
    assert len([key for key in found if key.startswith(("SeqA", "SeqB"))]) == 2


def test_the_release_program_runs_without_its_docstring_so_moving_the_library_does_not_rename_held_jobs():
    assert RELEASE_PROGRAM_SOURCE.startswith("import ") and "trainium_eks" not in RELEASE_PROGRAM_SOURCE
    compile(RELEASE_PROGRAM_SOURCE, "job_release_program", "exec")


def user_job_chart(name="my-eval", namespace="training"):
    """A cdk8s chart of the user's own, with one batch/v1 Job written with cdk8s."""
    chart = cdk8s.Chart(cdk8s.App(), "Mine")
    cdk8s.ApiObject(
        chart,
        "Eval",
        api_version="batch/v1",
        kind="Job",
        metadata={"name": name, "namespace": namespace},
    ).add_json_patch(
        cdk8s.JsonPatch.add(
            "/spec",
            {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "e", "image": "e.example/e:1"}]}}},
        )
    )
    return chart


def test_a_cdk8s_chart_of_the_users_is_adopted_named_by_its_hash_and_held_until_what_it_waits_for_completed():
    stack, topology, jobs = sequence()
    first = training(topology, "first")
    jobs.add("First", first)
    applied_chart = jobs.add("Eval", user_job_chart(), wait_for=[first])
    (release,) = [chart for ref, chart in jobs.releases.items() if ref.startswith("job/my-eval-")]
    held = release.held_job
    assert held["metadata"]["name"].startswith("my-eval-") and len(held["metadata"]["name"]) == len("my-eval-") + 10
    assert held["metadata"]["labels"]["app.kubernetes.io/part-of"] == "trainium-eks"
    assert held["metadata"]["annotations"][WAIT_FOR_ANNOTATION] == first.ref
    assert applied_chart.chart is release
    again = jobs.add("EvalAgain", user_job_chart(), wait_for=[first])
    assert again.chart.held_job["metadata"]["name"] == held["metadata"]["name"], "same spec, same name"


def test_a_users_chart_that_is_not_one_job_or_a_library_job_with_wait_for_is_refused():
    _, topology, jobs = sequence()
    two = user_job_chart()
    cdk8s.ApiObject(two, "Extra", api_version="v1", kind="ConfigMap", metadata={"name": "x", "namespace": "training"})
    with pytest.raises(ConfigurationError, match=r"one job: Job \(batch/v1\)"):
        jobs.add("Two", two)
    with pytest.raises(ConfigurationError, match="name='a-name-far-longer-than-twenty-eight'"):
        jobs.add("Long", user_job_chart(name="a-name-far-longer-than-twenty-eight"))
    with pytest.raises(ConfigurationError, match="VolcanoJobChart takes its own wait_for"):
        jobs.add("Lib", training(topology, "lib"), wait_for=["job/data-0123456789"])


# --- fabric checks: one before each multi-node job on EFA nodes ---------------------------------------------------


def release_waits(release):
    """The references a release Job's program waits for (its arguments after the namespace and its own name)."""
    (container,) = release["spec"]["template"]["spec"]["containers"]
    return [ref for arg in container["command"][4:] for ref in arg.split()]


def test_a_multi_node_efa_job_gets_its_fabric_check_first_and_is_created_only_once_the_check_completed():
    stack, topology, jobs = sequence()
    chart = training(topology, "train", fabric_check=True)
    applied_job = jobs.add("Training", chart)
    check = chart.fabric_check
    assert check is not None and jobs.fabric_checks == {chart.ref: check}
    assert [entry.node.id for entry in jobs.jobs] == ["Training-FabricCheck", "Training"], "the check first"
    assert applied_job is jobs.jobs[-1]
    found = applied(stack)
    applied_check, depends = by_prefix(found, "SeqTrainingFabricCheck")
    program, program_depends = by_prefix(found, "SeqFabricProgramtraining")
    assert program["kind"] == "ConfigMap" and program["metadata"]["name"] == PROGRAM_CONFIG_MAP
    assert program_depends == {"Prerequisite"}
    program_id = next(key for key in found if key.startswith("SeqFabricProgramtraining"))
    assert held_job(applied_check) == json.loads(json.dumps(check.manifest)), "a gang: created by its release"
    assert {"Prerequisite", program_id} <= depends and release_waits(applied_check) == []
    assert check.manifest["metadata"]["labels"][FABRIC_CHECK_LABEL] == chart.job_name
    release, _ = by_prefix(found, "SeqTrainingJob")
    assert held_job(release) == json.loads(json.dumps(chart.manifest)), "the job itself is held"
    assert release_waits(release) == [check.ref], "until its check has completed"
    assert chart.manifest["metadata"]["annotations"][WAIT_FOR_ANNOTATION] == check.ref, "its name covers the wait"


def test_the_check_waits_for_what_its_job_waits_for_and_the_job_for_both():
    stack, topology, jobs = sequence()
    chart = training(topology, "train", fabric_check=True, wait_for=["job/data-0123456789"])
    jobs.add("Training", chart)
    check = chart.fabric_check
    found = applied(stack)
    check_release, _ = by_prefix(found, "SeqTrainingFabricCheck")
    assert held_job(check_release)["metadata"]["name"] == check.job_name
    assert release_waits(check_release) == ["job/data-0123456789"]
    release, _ = by_prefix(found, "SeqTrainingJob")
    assert release_waits(release) == ["job/data-0123456789", check.ref]
    assert set(jobs.releases) == {check.ref, chart.ref}


def test_a_chain_of_checked_jobs_gets_a_check_before_each():
    """The seed run's order: staging -> check -> pre-compilation -> check -> training."""
    stack, topology, jobs = sequence()
    compile_ = training(topology, "compile", fabric_check=True, wait_for=["job/data-0123456789"])
    train = training(topology, "train", fabric_check=True, wait_for=[compile_])
    jobs.add("Precompile", compile_)
    jobs.add("Training", train)
    assert [entry.node.id for entry in jobs.jobs] == [
        "Precompile-FabricCheck",
        "Precompile",
        "Training-FabricCheck",
        "Training",
    ]
    assert train.fabric_check.wait_for == (compile_.ref,)
    found = applied(stack)
    programs = [key for key in found if key.startswith("SeqFabricProgram")]
    assert len(programs) == 1, "one program ConfigMap for the namespace's checks"
    for name in ("PrecompileFabricCheck", "TrainingFabricCheck"):
        assert programs[0] in by_prefix(found, f"Seq{name}")[1], "each check (or its release) after it"
    assert train.wait_for == (compile_.ref, train.fabric_check.ref)
    assert compile_.wait_for == ("job/data-0123456789", compile_.fabric_check.ref)


@pytest.mark.parametrize(
    "props",
    [
        {"nodes": 1},
        {"fabric_check": False},
        {"efa_interfaces": 0},
    ],
    ids=["single node", "opted out", "no EFA requested"],
)
def test_no_check_for_a_single_node_job_an_opted_out_one_or_one_without_efa(props):
    stack, topology, jobs = sequence()
    chart = training(topology, "train", **{"fabric_check": True, **props})
    jobs.add("Training", chart)
    assert chart.fabric_check is None and not jobs.fabric_checks and chart.wait_for == ()
    training_keys = [key for key in applied(stack) if key.startswith("SeqTraining")]
    assert len(training_keys) == 1 and not any("Fabric" in key for key in applied(stack)), "the job alone"
    if props != {"nodes": 1}:
        assert set(jobs.releases) == {chart.ref}, "a gang, created by its release"


def test_no_check_on_nodes_without_efa():
    stack, _, jobs = sequence()
    cpu = NodeGroupTopology("m5.xlarge", 2, 2, 0, (), frozenset())
    chart = training(cpu, "train", fabric_check=True)
    jobs.add("Training", chart)
    assert chart.fabric_check is None and not jobs.fabric_checks


def test_an_opted_out_job_is_named_by_its_own_spec_and_waits_alone():
    """fabric_check=False: no check, no wait for one; the name is the hash of the job's spec with its own waits."""
    _, topology, _ = sequence()
    chart = training(topology, "train", fabric_check=False, wait_for=["job/data-0123456789"])
    spec = json.loads(json.dumps(chart.manifest).replace(chart.job_name, PLACEHOLDER))
    assert chart.job_name == hashed_name("train", spec)


def test_a_release_of_your_own_gets_the_prerequisites_the_sequences_releases_share():
    stack = cdk.Stack(new_app(), "Jobs", env=ENV)
    _, cluster = imported_cluster(stack)
    jobs = JobSequence(stack, "Jobs", cluster=cluster)
    first = jobs.release_prerequisites("training", "trainjob")
    assert jobs.release_prerequisites("training", "trainjob") == first, "applied once"
    other = jobs.release_prerequisites("training", "vcjob")
    assert [other[0], *other[2:]] == [first[0], *first[2:]], "the account, program and admission policy are shared"
    assert other[1] != first[1], "a Role per kind created"
    with pytest.raises(ConfigurationError) as raised:
        jobs.release_prerequisites("Training", "cronjob")
    assert [problem.split("=")[0] for problem in raised.value.problems] == ["namespace", "kind"]
    assert "one of job, pytorchjob, trainjob, vcjob" in raised.value.problems[1]


def test_a_check_on_a_karpenter_pool_may_taint_suspect_nodes_once_the_guard_is_in_place_and_on_node_groups_not():
    stack, topology, jobs = sequence()
    jobs.add("Training", training(topology, "train", fabric_check=True))
    assert not [key for key in applied(stack) if key.startswith("SeqFabricSuspect")], "a node group: no permission"
    stack, topology, jobs = sequence()
    jobs.add("Training", training(replace(topology, node_pool="accelerated"), "train", fabric_check=True))
    jobs.add("Again", training(replace(topology, node_pool="accelerated"), "again", fabric_check=True))
    found = applied(stack)
    guard_ids = sorted(key for key in found if key.startswith("SeqFabricSuspectGuard"))
    assert sorted(found[key][0]["kind"] for key in guard_ids) == [
        "ClusterRole",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ], "once per sequence"
    (access_id,) = [key for key in found if key.startswith("SeqFabricSuspectAccesstraining")]
    binding, binding_depends = found[access_id]
    assert binding["kind"] == "ClusterRoleBinding" and binding["subjects"][0]["namespace"] == "training"
    assert set(guard_ids) <= binding_depends, "the permission comes only once its limit is in place"
    for prefix in ("SeqTrainingFabricCheck", "SeqAgainFabricCheck"):
        _, depends = by_prefix(found, prefix)
        assert access_id in depends, "the check's release may taint once the binding exists"
    _, job_depends = by_prefix(found, "SeqTrainingJob")
    assert access_id not in job_depends, "the job's own release taints nothing"


def test_a_check_with_no_round_for_suspects_gets_no_permission_on_nodes():
    stack, topology, jobs = sequence()
    pool = replace(topology, node_pool="accelerated")
    jobs.add("Training", training(pool, "train", fabric_check=True, fabric_suspect_rounds=0))
    assert not [key for key in applied(stack) if key.startswith("SeqFabricSuspect")]


def test_staging_jobs_come_after_their_programs_config_map_applied_once_per_namespace():
    stack, topology, jobs = sequence()
    nodes = replace(topology, shared_claims=frozenset({"shared"}))
    for name in ("data-a", "data-b"):
        staging = DatasetStagingChart(
            name=name, source=f"s3://bucket/{name}.tar", region="us-west-2", directory=name, node_group=nodes
        )
        jobs.add(name.title().replace("-", ""), staging)
    found = applied(stack)
    programs = [key for key in found if key.startswith("SeqStagingProgramtraining")]
    assert len(programs) == 1, "one program ConfigMap for the namespace's staging Jobs"
    program, program_depends = found[programs[0]]
    assert program["kind"] == "ConfigMap" and program["metadata"]["name"] == STAGING_PROGRAM.config_map
    assert program_depends == {"Prerequisite"}
    for name in ("SeqDataA", "SeqDataB"):
        job, depends = by_prefix(found, name)
        assert job["kind"] == "Job" and depends == {"Prerequisite", programs[0]}
