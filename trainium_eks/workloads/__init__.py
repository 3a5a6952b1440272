"""The seed systems' runs: their jobs, arguments and data sets (BERT phase 1, CIFAR-10 DDP, Composer ResNet and its
recipes)."""

from trainium_eks.workloads.bert_phase1 import BertPhase1Jobs, add_bert_phase1_jobs
from trainium_eks.workloads.cifar10_ddp import Cifar10Jobs, add_cifar10_jobs
from trainium_eks.workloads.composer_recipe import Algorithm, ComposerRecipe
from trainium_eks.workloads.composer_resnet import ComposerComparisonJobs, add_composer_jobs

__all__ = [
    "Algorithm",
    "BertPhase1Jobs",
    "Cifar10Jobs",
    "ComposerComparisonJobs",
    "ComposerRecipe",
    "add_bert_phase1_jobs",
    "add_cifar10_jobs",
    "add_composer_jobs",
]
