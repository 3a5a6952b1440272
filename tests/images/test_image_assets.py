"""Training image assets: their hash (and so every job name) depends only on what the image is built from."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict

import aws_cdk as cdk
import pytest

import app as default_app
from tests.support.apps import REPO, new_app
from trainium_eks.constructs.image_repository import TrainingImageRepository
from trainium_eks.facts import versions
from trainium_eks.stacks.composer_training_stack import ComposerTrainingStack
from trainium_eks.stacks.kubeflow_training_stack import KubeflowTrainingStack
from trainium_eks.stacks.trainium_eks_stack import TrainiumEksStack

IMAGES = sorted(path.name for path in (REPO / "images").iterdir() if (path / "Dockerfile").exists())
STRAY_FILES = (
    ".DS_Store",
    "configs/.DS_Store",
    "notes.py~",
    ".train.py.swp",
    "#backup#",
    "__pycache__/module.cpython-311.pyc",
    "scratch/run-1/log.txt",
    ".ipynb_checkpoints/draft-checkpoint.ipynb",
    ".idea/workspace.xml",
    ".vscode/settings.json",
)


def asset_hash(directory: Path) -> str:
    app = new_app()
    stack = cdk.Stack(app, "Images", env=cdk.Environment(region="us-west-2"))
    TrainingImageRepository(stack, "Images", image_directory=str(directory))
    assets = json.loads(Path(app.synth().directory, "Images.assets.json").read_text())
    (asset_id,) = assets["dockerImages"]
    return asset_id


@pytest.mark.parametrize("image", IMAGES)
def test_stray_files_do_not_change_the_image_hash_but_real_changes_do(image, tmp_path):
    copy = tmp_path / image
    shutil.copytree(REPO / "images" / image, copy, ignore=shutil.ignore_patterns("__pycache__", "scratch"))
    clean = asset_hash(copy)
    for stray in STRAY_FILES:
        path = copy / stray
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("not part of the image\n")
    assert asset_hash(copy) == clean, "a stray file changed the asset hash"
    readme = copy / "README.md"
    readme.write_text(readme.read_text() + "\nA documentation change.\n")
    assert asset_hash(copy) == clean, "the image's README is documentation, not part of the image"
    dockerfile = copy / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "\n# changed\n")
    assert asset_hash(copy) != clean, "a change to the Dockerfile must change the hash"


BASES = {
    "bert-pretrain": versions.NEURON_PYTORCH_TRAINING.image,
    "cifar10-ddp": versions.PYTORCH_RUNTIME.image,
    "composer-resnet": versions.COMPOSER_BASE.image,
}


def effective_base(dockerfile: str, build_args: Dict[str, str]) -> str:
    """The image ``FROM ${BASE_IMAGE}`` pulls when docker builds ``dockerfile`` with ``build_args`` (Docker: a build
    argument overrides the ``ARG``'s default; an ``ARG`` without default and without argument is empty)."""
    (declared,) = re.findall(r"^ARG BASE_IMAGE(?:=(\S+))?$", dockerfile, re.MULTILINE)
    assert re.search(r"^FROM \$\{BASE_IMAGE\}$", dockerfile, re.MULTILINE)
    return build_args.get("BASE_IMAGE", declared)


@pytest.mark.parametrize("image", sorted(BASES))
def test_each_dockerfile_defaults_to_the_pinned_base(image):
    dockerfile = (REPO / "images" / image / "Dockerfile").read_text()
    assert effective_base(dockerfile, {}) == BASES[image], "docker build images/<image> works without arguments"


def stacks_as_users_build_them():
    """The default app, and each stack class with the library's image and no build arguments (docs/stacks.md;
    composing a stack with its image_directory)."""
    app = new_app()
    default = default_app.build_app(app)
    built = dict(default)
    env = cdk.Environment(region="us-west-2")
    built["MyTrainium"] = TrainiumEksStack(
        app, "MyTrainium", env=env, image_directory=str(REPO / "images/bert-pretrain")
    )
    built["MyKubeflow"] = KubeflowTrainingStack(
        app, "MyKubeflow", env=env, image_directory=str(REPO / "images/cifar10-ddp")
    )
    built["MyComposer"] = ComposerTrainingStack(
        app, "MyComposer", env=env, image_directory=str(REPO / "images/composer-resnet")
    )
    return app, built


def test_every_image_asset_builds_from_its_pinned_base_however_the_stack_was_made():
    app, built = stacks_as_users_build_them()
    assembly = app.synth()
    for name in built:
        assets = json.loads(Path(assembly.directory, f"{name}.assets.json").read_text())["dockerImages"]
        (asset,) = assets.values()
        source = asset["source"]
        image = Path(source["directory"]).name
        dockerfile = (Path(source["directory"]) / "Dockerfile").read_text()
        base = effective_base(dockerfile, source.get("dockerBuildArgs") or {})
        assert base == BASES[image], f"{name}: cdk deploy would build FROM {base!r}"


BUILD_CHECKS = {
    "bert-pretrain": "c10d rendezvous round trip",
    "cifar10-ddp": "c10d rendezvous round trip",
}


def build_check(dockerfile: str) -> str:
    """The Dockerfile's last RUN step (its build check), as the shell line docker runs."""
    runs = re.findall(r"^RUN (.*?)(?<!\\)$", dockerfile, re.MULTILINE | re.DOTALL)
    return runs[-1].replace("\\\n", " ")


@pytest.mark.parametrize("image", sorted(BUILD_CHECKS))
def test_the_images_build_check_runs_here_with_a_real_rendezvous(image, tmp_path):
    """The check the image runs at build time (two torchrun agents meeting through c10d on 127.0.0.1, one training
    step), run here with the test environment's python3 in a copy of the image's folder (its WORKDIR): a check that
    cannot pass here would fail the image build."""
    folder = tmp_path / image
    shutil.copytree(REPO / "images" / image, folder)
    script = build_check((folder / "Dockerfile").read_text())
    assert "--rdzv_backend c10d" in script and "wait" in script
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(["sh", "-c", script], cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
