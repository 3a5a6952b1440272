"""The seed workload: stage the BERT phase-1 dataset, pre-compile the graphs, pretrain BERT-large phase 1.

The tutorial's run (aws-neuron-eks-samples dp_bert_hf_pretrain, README §3.2-3.4) with the project's own script
(``images/bert-pretrain``): 2 x trn1.32xlarge x 32 workers, bf16, micro-batch 16, 32 accumulation steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from trainium_eks.constructs.job_sequence import JobSequence
from trainium_eks.core.conventions import OUTPUT_ROOT, SHARED_MOUNT
from trainium_eks.manifests.jobs.dataset_staging import DatasetStagingChart
from trainium_eks.manifests.jobs.graceful_stop import GracefulStop
from trainium_eks.manifests.jobs.job_deadline import HOUR
from trainium_eks.manifests.jobs.job_naming import JOB_NAME
from trainium_eks.manifests.jobs.progress_watch import ProgressWatch
from trainium_eks.manifests.jobs.topology import NodeGroupTopology
from trainium_eks.manifests.jobs.volcano_job import VolcanoJobChart

DATASET_URI = (
    "s3://neuron-s3/training_datasets/bert_pretrain_wikicorpus_tokenized_hdf5/"
    "bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128.tar"
)
"""Public tarball of the tokenized phase-1 shards (read with --no-sign-request). Source: aws-neuron-eks-samples
dp_bert_hf_pretrain README §3.2."""

DATASET_DIRECTORY = "bert_pretrain_wikicorpus_tokenized_hdf5_seqlen128"
SCRIPT = "/opt/bert/pretrain_bert.py"
"""The training script inside the image built from ``images/bert-pretrain``."""
CACHE_SET = "bert-large"
OUTPUT = f"{OUTPUT_ROOT}/{JOB_NAME}"
"""Each job's checkpoints and TensorBoard events, in a folder named after the job (``<name>-<hash>``): a restarted job
resumes its own run; a changed job (another argument, image or node count) starts a run of its own instead of resuming
one made with other settings."""
PRECOMPILE_STEPS = 10
"""Optimizer steps the pre-compilation job runs to trace every graph (the tutorial's ``--steps_this_run 10``)."""

STAGING_DEADLINE_SECONDS = 4 * HOUR
"""``activeDeadlineSeconds`` of the staging Job, all its attempts: the "50+ GB" tarball (the tutorial's README)
streamed from S3 onto FSx, up to four times (``backoff_limit`` 3) at about 14 MB/s."""

PRECOMPILE_DEADLINE_SECONDS = 4 * HOUR
"""``activeDeadlineSeconds`` of each pre-compilation pod, so of each of its three attempts: the image pull on two new
nodes, then :data:`PRECOMPILE_STEPS` steps whose graphs the Neuron compiler compiles on an empty cache. No Neuron
document gives that time for BERT-large: 4 hours is a margin, not a measure."""

MAX_STEPS = 28125
"""Optimizer steps of the whole run: ``--max_steps`` of ``images/bert-pretrain/pretrain_bert.py``, which the seed run
leaves at its default."""

TRAINING_DEADLINE_SECONDS = 72 * HOUR
"""``activeDeadlineSeconds`` of each training pod, so of each of its three attempts (at most 9 days in all). The run
is :data:`MAX_STEPS` steps of 16 x 32 x 64 = 32,768 sequences, 921.6 million sequences; at the BERT-large phase-1
throughput the Neuron SDK publishes for trn1.32xlarge (autocast bf16 with stochastic rounding, LAMB, micro-batch 16:
53,655.8 seq/s on 16 nodes, 3,353 a node, Neuron 2.23.0: "Trn1/Trn1n Training Performance",
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/benchmarks/trn1/trn1-training-performance.html, last
updated 2025-05-20), two nodes take about 38 hours: 72 leave room for a slower script and the checkpoints. An attempt
cut by its deadline restarts (Volcano's ``PodFailed -> RestartJob``) and resumes from its newest checkpoint."""
TRAINING_PROGRESS = ProgressWatch(startup_seconds=2 * HOUR, stall_seconds=HOUR)
"""How long the training's containers may go without an optimizer step before each is stopped and the job restarts
(:mod:`~trainium_eks.manifests.jobs.progress_watch`): two hours to the first step (loading the shards, the rendezvous
of both nodes, and the graphs from the compile cache that the pre-compilation filled, or compiled anew where it
missed one), then an hour between steps (a graph first seen later, such as the last step's, compiles in minutes to
tens of minutes; a checkpoint of the model and its LAMB state is a few GB on the shared volume). The
pre-compilation job has no watch: ``neuron_parallel_compile`` compiles every graph after the script's steps."""
TRAINING_STOP = GracefulStop(grace_seconds=300, step_seconds=120)
"""A training pod deleted while its node drains or its job restarts finishes its step, saves, and exits
(:mod:`~trainium_eks.manifests.jobs.graceful_stop`) within 5 minutes: a step is about 5 seconds at the published
throughput (32,768 sequences at 3,353 a second a node, two nodes), and the checkpoint (BERT-large's 336 M parameters
and their two LAMB moments in fp32, about 4 GB) is copied from the devices and written to FSx for Lustre at its
300 MB/s (1.2 TiB of PERSISTENT_2 at 250 MB/s per TiB: :mod:`~trainium_eks.constructs.lustre_storage`) in well under
a minute. That fits the 9 minutes a Capacity Block's end leaves, not the 2 minutes of a Spot warning. Two minutes
without a step after the signal end the container without a checkpoint: a gang whose peer is gone makes none. The
pre-compilation has no checkpoint to save and keeps Kubernetes' 30 s."""


@dataclass(frozen=True)
class BertPhase1Jobs:
    """The three jobs of the seed workload, as charts."""

    staging: DatasetStagingChart
    precompile: VolcanoJobChart
    training: VolcanoJobChart


def script_args(output_dir: str) -> List[str]:
    """Arguments of the pretraining script, as in the tutorial's run."""
    return [
        "--data_dir",
        f"{SHARED_MOUNT}/{DATASET_DIRECTORY}",
        "--shard_pattern",
        "*training*",
        "--output_dir",
        output_dir,
        "--model_config",
        "configs/bert-large.json",
        "--batch_size",
        "16",
        "--grad_accum_usteps",
        "32",
        "--optimizer",
        "lamb",
        "--bf16",
    ]


def add_bert_phase1_jobs(
    sequence: JobSequence,
    *,
    image: str,
    node_group: NodeGroupTopology,
    staging_nodes: Optional[NodeGroupTopology] = None,
    staging_deadline_seconds: int = STAGING_DEADLINE_SECONDS,
    precompile_deadline_seconds: int = PRECOMPILE_DEADLINE_SECONDS,
    training_deadline_seconds: int = TRAINING_DEADLINE_SECONDS,
) -> BertPhase1Jobs:
    """Add the staging, pre-compilation and training jobs to ``sequence``, each created once the one before has
    completed (held by its release Job). The staging Job runs on ``staging_nodes`` (default: ``node_group``).

    Each job ends by its deadline (:mod:`~trainium_eks.manifests.jobs.job_deadline`): ``staging_deadline_seconds``
    bounds the whole staging Job (default: :data:`STAGING_DEADLINE_SECONDS`, 4 hours);
    ``precompile_deadline_seconds`` and ``training_deadline_seconds`` bound each attempt of the Volcano jobs, each of
    which runs at most three times (defaults: :data:`PRECOMPILE_DEADLINE_SECONDS`, 4 hours, and
    :data:`TRAINING_DEADLINE_SECONDS`, 72 hours). The fabric checks keep theirs
    (:data:`~trainium_eks.manifests.jobs.fabric_check.POD_DEADLINE_SECONDS`, 2 hours an attempt, two attempts).

    The stack stages on its system nodes: a one-node copy on a Karpenter pool leaves one warm node when the two-node
    pre-compilation gang arrives; Volcano places one of the gang's pods there, discards the placement for want of the
    second node and marks that pod ``Schedulable``, which Karpenter ignores, while Karpenter counts the other pod onto
    the warm node it sees empty and launches nothing: the gang never runs (volcano#3976; the scheduling rehearsal
    finds it, ``tests/rehearsal/test_karpenter_provisioner.py``)."""
    staging = DatasetStagingChart(
        name="bert-phase1-data",
        source=DATASET_URI,
        directory=DATASET_DIRECTORY,
        unsigned=True,
        node_group=staging_nodes or node_group,
        deadline_seconds=staging_deadline_seconds,
        resolve=sequence.resolve,
    )
    common = dict(image=image, node_group=node_group, script=SCRIPT, cache_set=CACHE_SET, resolve=sequence.resolve)
    precompile = VolcanoJobChart(
        name="bert-phase1-compile",
        precompile=True,
        wait_for=[staging],
        args=script_args(OUTPUT) + ["--steps_this_run", str(PRECOMPILE_STEPS)],
        deadline_seconds=precompile_deadline_seconds,
        **common,
    )
    training = VolcanoJobChart(
        name="bert-phase1-train",
        wait_for=[precompile],
        args=script_args(OUTPUT),
        deadline_seconds=training_deadline_seconds,
        progress=TRAINING_PROGRESS,
        graceful_stop=TRAINING_STOP,
        **common,
    )
    sequence.add("Staging", staging)
    sequence.add("Precompile", precompile)
    sequence.add("Training", training)
    return BertPhase1Jobs(staging, precompile, training)
