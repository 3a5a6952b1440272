"""CIFAR-10 for the Composer image: a ResNet for 32x32 images and the dataset read from the shared volume.

The model is the CIFAR ResNet of He et al., "Deep Residual Learning for Image Recognition" (2016), section 4.2:
a 3x3 stem with 16 channels, three stages of ``n`` basic blocks with 16, 32 and 64 channels (the first block of
the second and third stage halves the resolution), global average pooling and a linear classifier: ``6n + 2``
layers, so ResNet-20 (n=3, 0.27 M parameters) and ResNet-56 (n=9, 0.86 M). Shortcuts that change the shape are
1x1 convolutions with batch norm (the paper's option B).

The data is the CIFAR-10 "python version" as extracted from ``cifar-10-python.tar.gz``:
``<data-dir>/cifar-10-batches-py/data_batch_1`` .. ``data_batch_5`` (training) and ``test_batch``, or the same files
directly in ``<data-dir>``, as the library's staging job leaves them (the script
checks they exist before it starts). Each is a pickled dict with ``b"data"`` (uint8, N x 3072, the red, green and
blue planes of 32x32 images) and ``b"labels"`` (N ints in 0..9). The files are unpickled with an allow-list of the
few globals such files contain, so a file on the volume cannot run code. Nothing is ever downloaded.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Tuple

import numpy as np
import torch
from PIL import Image
from torch import nn
from torchvision import transforms
from torchvision.datasets import VisionDataset

NUM_CLASSES = 10
# Per-channel mean and standard deviation of the CIFAR-10 training images.
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)
DEPTHS = {"resnet20": 3, "resnet56": 9}


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm, plus the input (projected when the shape changes)."""

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False), nn.BatchNorm2d(out_channels)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class CifarResNet(nn.Module):
    """ResNet-(6n+2) for 32x32 images; works at other sizes too (progressive resizing feeds smaller ones).

    :param blocks_per_stage: ``n``: 3 for ResNet-20, 9 for ResNet-56.
    :param num_classes: Outputs of the classifier. Default: 10.
    """

    def __init__(self, blocks_per_stage: int, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        stages = []
        in_channels = 16
        for stage, channels in enumerate((16, 32, 64)):
            for block in range(blocks_per_stage):
                stride = 2 if stage > 0 and block == 0 else 1
                stages.append(BasicBlock(in_channels, channels, stride))
                in_channels = channels
        self.blocks = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))


def build_resnet(arch: str) -> CifarResNet:
    """The ResNet named ``arch``, a key of :data:`DEPTHS`."""
    return CifarResNet(DEPTHS[arch])


class _CifarUnpickler(pickle.Unpickler):
    """Unpickles CIFAR-10 batch files and nothing else: only NumPy arrays, dicts, lists, bytes and numbers."""

    _ALLOWED = {
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("_codecs", "encode"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a CIFAR-10 batch file")
        # Files written by NumPy 1 name numpy.core, an alias that NumPy 2 deprecates.
        return super().find_class(module.replace("numpy.core.", "numpy._core."), name)


def read_batch(path: Path) -> Tuple[np.ndarray, np.ndarray]:
    """Images (N x 32 x 32 x 3, uint8, HWC) and labels (N, int64) of one CIFAR-10 batch file."""
    with path.open("rb") as f:
        batch = _CifarUnpickler(f, encoding="bytes").load()
    if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
        raise ValueError(f"{path}: not a CIFAR-10 batch (a dict with b'data' and b'labels')")
    data = np.asarray(batch[b"data"], dtype=np.uint8)
    labels = np.asarray(batch[b"labels"], dtype=np.int64)
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(labels) != len(data):
        raise ValueError(f"{path}: b'data' must be N x 3072 with N labels; got {data.shape} and {len(labels)}")
    if len(labels) and (labels.min() < 0 or labels.max() >= NUM_CLASSES):
        raise ValueError(f"{path}: labels must be in 0..{NUM_CLASSES - 1}")
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), labels


def read_files(paths: Sequence[Path]) -> Tuple[np.ndarray, np.ndarray]:
    """The images and labels of CIFAR-10 batch files, concatenated in order."""
    batches = [read_batch(p) for p in paths]
    return np.concatenate([b[0] for b in batches]), np.concatenate([b[1] for b in batches])


class Cifar10(VisionDataset):
    """CIFAR-10 images as PIL images through ``transform``, with int labels.

    A torchvision ``VisionDataset`` with a ``Compose`` transform, so that Composer's dataset-level algorithms
    (AugMix, RandAugment, ColOut with ``batch=False``) can insert their transform before ``ToTensor``.

    :param images: N x 32 x 32 x 3 uint8.
    :param labels: N labels.
    :param transform: Applied to each PIL image.
    """

    def __init__(self, images: np.ndarray, labels: np.ndarray, transform: Optional[Callable] = None) -> None:
        super().__init__(root=None, transform=transform)
        self.images = images
        self.labels = labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> Tuple[Any, int]:
        image = Image.fromarray(self.images[index])
        return (self.transform(image) if self.transform is not None else image), int(self.labels[index])


def cifar10(paths: Sequence[Path], train: bool) -> Cifar10:
    """The images of the batch files ``paths``, normalized; with random crop and flip for training."""
    normalize = [transforms.ToTensor(), transforms.Normalize(MEAN, STD)]
    augment = [transforms.RandomCrop(32, padding=4), transforms.RandomHorizontalFlip()] if train else []
    images, labels = read_files(paths)
    return Cifar10(images, labels, transforms.Compose(augment + normalize))
