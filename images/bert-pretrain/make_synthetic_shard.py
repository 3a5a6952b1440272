"""Write a small BERT phase-1 pretraining shard (HDF5) filled with random tokens.

The layout is the one of the pre-tokenized phase-1 shards that the training script reads (NVIDIA's BERT HDF5 format,
also used by the Neuron BERT tutorial's wikicorpus dataset): one row per training sequence and six datasets

    input_ids             int32 [N, seq_len]            token ids, 0 = [PAD]
    input_mask            int8  [N, seq_len]            1 for real tokens, 0 for padding
    segment_ids           int8  [N, seq_len]            0 for sentence A, 1 for sentence B
    masked_lm_positions   int32 [N, max_predictions]    positions of masked tokens, zero-padded at the end
    masked_lm_ids         int32 [N, max_predictions]    original ids at those positions, zero-padded
    next_sentence_labels  int8  [N]                     1 when sentence B is a random sentence

Position 0 always holds [CLS] and is never masked, which is why 0 can mark padding in ``masked_lm_positions``.
The tokens are random, so a model cannot learn much from them: the shard is for smoke tests and dry runs.

Usage::

    python make_synthetic_shard.py --output ./scratch/data/synthetic_training_0.hdf5 \
        --vocab_size 1024 --seq_len 64 --max_predictions 10 --num_samples 256 --seed 1
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

import h5py
import numpy as np

# Special token ids of the BERT uncased vocabulary; random tokens are drawn above them.
PAD_ID = 0
CLS_ID = 101
SEP_ID = 102
MASK_ID = 103
FIRST_RANDOM_ID = 104


def make_shard_arrays(
    *,
    vocab_size: int,
    seq_len: int,
    max_predictions: int,
    num_samples: int,
    seed: int,
) -> dict[str, np.ndarray]:
    """Builds the arrays of one synthetic shard (see the module docstring for their meaning).

    Each sample is ``[CLS] A [SEP] B [SEP]`` followed by padding, with a random real length, and 15% of its
    non-special tokens (at least one, at most ``max_predictions``) replaced by [MASK].
    """
    if vocab_size <= FIRST_RANDOM_ID + 1:
        raise ValueError(f"vocab_size must be greater than {FIRST_RANDOM_ID + 1}, got {vocab_size}")
    if seq_len < 16:
        raise ValueError(f"seq_len must be at least 16, got {seq_len}")
    if max_predictions < 1:
        raise ValueError(f"max_predictions must be at least 1, got {max_predictions}")
    if num_samples < 1:
        raise ValueError(f"num_samples must be at least 1, got {num_samples}")

    rng = np.random.default_rng(seed)
    input_ids = np.zeros((num_samples, seq_len), dtype=np.int32)
    input_mask = np.zeros((num_samples, seq_len), dtype=np.int8)
    segment_ids = np.zeros((num_samples, seq_len), dtype=np.int8)
    masked_lm_positions = np.zeros((num_samples, max_predictions), dtype=np.int32)
    masked_lm_ids = np.zeros((num_samples, max_predictions), dtype=np.int32)
    next_sentence_labels = rng.integers(0, 2, size=num_samples).astype(np.int8)

    for row in range(num_samples):
        length = int(rng.integers(seq_len // 2, seq_len + 1))  # real tokens, including [CLS] and two [SEP]
        body = length - 3
        len_a = int(rng.integers(1, body))
        len_b = body - len_a
        tokens = rng.integers(FIRST_RANDOM_ID, vocab_size, size=body).astype(np.int32)
        sep_a = 1 + len_a
        ids = np.concatenate(([CLS_ID], tokens[:len_a], [SEP_ID], tokens[len_a:], [SEP_ID])).astype(np.int32)
        input_ids[row, :length] = ids
        input_mask[row, :length] = 1
        segment_ids[row, sep_a + 1 : sep_a + 1 + len_b + 1] = 1

        candidates = np.array([i for i in range(1, length) if ids[i] not in (CLS_ID, SEP_ID)])
        n_masked = min(max_predictions, max(1, round(0.15 * len(candidates))))
        positions = np.sort(rng.choice(candidates, size=n_masked, replace=False)).astype(np.int32)
        masked_lm_positions[row, :n_masked] = positions
        masked_lm_ids[row, :n_masked] = input_ids[row, positions]
        input_ids[row, positions] = MASK_ID

    return {
        "input_ids": input_ids,
        "input_mask": input_mask,
        "segment_ids": segment_ids,
        "masked_lm_positions": masked_lm_positions,
        "masked_lm_ids": masked_lm_ids,
        "next_sentence_labels": next_sentence_labels,
    }


def write_shard(path: str, arrays: dict[str, np.ndarray]) -> None:
    """Writes ``arrays`` to an HDF5 file at ``path`` (gzip-compressed, as the real shards are)."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    with h5py.File(path, "w") as f:
        for name, data in arrays.items():
            f.create_dataset(name, data=data, compression="gzip")


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: writes one synthetic shard and prints its path."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", required=True, help="path of the .hdf5 file to write")
    parser.add_argument("--vocab_size", type=int, default=30522, help="vocabulary size of the model config")
    parser.add_argument("--seq_len", type=int, default=128, help="sequence length (phase 1: 128)")
    parser.add_argument("--max_predictions", type=int, default=20, help="masked positions per sequence (phase 1: 20)")
    parser.add_argument("--num_samples", type=int, default=1024, help="number of sequences in the shard")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    args = parser.parse_args(argv)
    arrays = make_shard_arrays(
        vocab_size=args.vocab_size,
        seq_len=args.seq_len,
        max_predictions=args.max_predictions,
        num_samples=args.num_samples,
        seed=args.seed,
    )
    write_shard(args.output, arrays)
    print(f"wrote {args.num_samples} samples (seq_len {args.seq_len}) to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
