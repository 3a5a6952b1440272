"""Training image assets: their hash (and so every job name) depends only on what the image is built from."""

import json
import shutil
from pathlib import Path

import aws_cdk as cdk
import pytest

from tests.conftest import REPO, new_app
from trainium_eks.constructs.image_repository import TrainingImageRepository

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
    dockerfile = copy / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "\n# changed\n")
    assert asset_hash(copy) != clean, "a change to the Dockerfile must change the hash"
