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
from trainium_eks.manifests.jobs.job_naming import JOB_NAME
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
) -> BertPhase1Jobs:
    """Add the staging, pre-compilation and training jobs to ``sequence``, each created once the one before has
    completed (held by its release Job). The staging Job runs on ``staging_nodes`` (default: ``node_group``).

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
        image=image,
        node_group=staging_nodes or node_group,
        resolve=sequence.resolve,
    )
    common = dict(image=image, node_group=node_group, script=SCRIPT, cache_set=CACHE_SET, resolve=sequence.resolve)
    precompile = VolcanoJobChart(
        name="bert-phase1-compile",
        precompile=True,
        wait_for=[staging],
        args=script_args(OUTPUT) + ["--steps_this_run", str(PRECOMPILE_STEPS)],
        **common,
    )
    training = VolcanoJobChart(
        name="bert-phase1-train",
        wait_for=[precompile],
        args=script_args(OUTPUT),
        **common,
    )
    sequence.add("Staging", staging)
    sequence.add("Precompile", precompile)
    sequence.add("Training", training)
    return BertPhase1Jobs(staging, precompile, training)
