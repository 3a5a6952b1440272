"""Write a small, learnable data set in the CIFAR-10 "python version" layout, for smoke tests and dry runs.

The output folder gets ``cifar-10-batches-py/`` with ``data_batch_1`` ... ``data_batch_5``, ``test_batch`` and
``batches.meta``, pickled as in the real data set: each batch is a dict with ``b"batch_label"``, ``b"labels"`` (list of
ints in 0..9), ``b"data"`` (uint8, N x 3072: the red, green and blue 32x32 planes of each image, row-major) and
``b"filenames"``. The images are not photographs: every class has its own prototype, a random 4x4 grid of black or
full-colour 8x8-pixel blocks per channel, and each sample is its class's prototype plus Gaussian noise, so that a small
CNN learns the classes within a few dozen steps.

Usage::

    python make_synthetic_cifar.py --output-dir ./scratch/data --num-train 256 --num-test 64 --seed 0
"""

from __future__ import annotations

import argparse
import os
import pickle
from collections.abc import Sequence

import numpy as np

BATCHES_FOLDER = "cifar-10-batches-py"
NUM_TRAIN_BATCHES = 5
NUM_CLASSES = 10
IMAGE_BYTES = 3 * 32 * 32
LABEL_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


def make_images(num_images: int, *, seed: int, noise: float, prototypes_seed: int) -> tuple[np.ndarray, list[int]]:
    """``num_images`` images (uint8, N x 3072) with balanced labels in a shuffled order.

    The class prototypes come from ``prototypes_seed`` (shared by the training and test splits); the labels' order
    and the noise from ``seed``. ``noise`` is the standard deviation of the noise, in units of the 0..255 range.
    """
    if num_images < 1:
        raise ValueError(f"num_images must be at least 1, got {num_images}")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    blocks = np.random.default_rng(prototypes_seed).choice([0.0, 255.0], size=(NUM_CLASSES, 3, 4, 4))
    prototypes = blocks.repeat(8, axis=2).repeat(8, axis=3).reshape(NUM_CLASSES, IMAGE_BYTES)
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(num_images) % NUM_CLASSES)
    images = prototypes[labels] + rng.normal(0.0, noise, size=(num_images, IMAGE_BYTES))
    return np.clip(np.rint(images), 0, 255).astype(np.uint8), [int(label) for label in labels]


def write_pickle(path: str, payload: dict) -> None:
    """Pickles ``payload`` to ``path``."""
    with open(path, "wb") as f:
        pickle.dump(payload, f)


def write_dataset(output_dir: str, *, num_train: int, num_test: int, seed: int = 0, noise: float = 40.0) -> str:
    """Writes the batches under ``<output_dir>/cifar-10-batches-py``; returns that folder.

    The ``num_train`` training images are split over the five training batches (the first batches take the
    remainder); each batch holds at least one image.
    """
    if num_train < NUM_TRAIN_BATCHES:
        raise ValueError(f"num_train must be at least {NUM_TRAIN_BATCHES} (one per batch file), got {num_train}")
    folder = os.path.join(output_dir, BATCHES_FOLDER)
    os.makedirs(folder, exist_ok=True)
    train_images, train_labels = make_images(num_train, seed=seed + 1, noise=noise, prototypes_seed=seed)
    test_images, test_labels = make_images(num_test, seed=seed + 2, noise=noise, prototypes_seed=seed)
    bounds = np.cumsum([0] + [len(part) for part in np.array_split(np.arange(num_train), NUM_TRAIN_BATCHES)])
    for index in range(NUM_TRAIN_BATCHES):
        lo, hi = int(bounds[index]), int(bounds[index + 1])
        write_pickle(
            os.path.join(folder, f"data_batch_{index + 1}"),
            {
                b"batch_label": f"synthetic training batch {index + 1} of {NUM_TRAIN_BATCHES}".encode(),
                b"labels": train_labels[lo:hi],
                b"data": train_images[lo:hi],
                b"filenames": [f"synthetic_{i:06d}.png".encode() for i in range(lo, hi)],
            },
        )
    write_pickle(
        os.path.join(folder, "test_batch"),
        {
            b"batch_label": b"synthetic testing batch 1 of 1",
            b"labels": test_labels,
            b"data": test_images,
            b"filenames": [f"synthetic_test_{i:06d}.png".encode() for i in range(num_test)],
        },
    )
    write_pickle(
        os.path.join(folder, "batches.meta"),
        {
            b"label_names": [name.encode() for name in LABEL_NAMES],
            b"num_cases_per_batch": int(bounds[1]),
            b"num_vis": IMAGE_BYTES,
        },
    )
    return folder


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: writes the data set and prints where."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output-dir", required=True, help=f"folder that will hold {BATCHES_FOLDER}/")
    parser.add_argument("--num-train", type=int, default=1000, help="training images, over the five batch files")
    parser.add_argument("--num-test", type=int, default=200, help="test images")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--noise", type=float, default=40.0, help="standard deviation of the per-pixel noise")
    args = parser.parse_args(argv)
    try:
        folder = write_dataset(
            args.output_dir, num_train=args.num_train, num_test=args.num_test, seed=args.seed, noise=args.noise
        )
    except ValueError as error:
        parser.error(str(error))
    print(f"wrote {args.num_train} training and {args.num_test} test images to {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
