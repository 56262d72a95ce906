"""MNIST-style IDX files written in exactly the published format (magic 0x0000TTDD, big-endian
uint32 dimensions, C-order data; gzipped or not), for the dataset loaders' tests
(tests/test_workload_data.py, tests/test_failures_one_line.py)."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np

#: Rows and columns of a fake image: rows != cols, so a transposed reshape would show.
IMAGE_SHAPE = (5, 4)
#: Test images in a fake set.
N_TEST = 3
#: The data type codes of IDX (the magic number's third byte), by numpy dtype.
IDX_CODES = {
    np.dtype("u1"): 0x08,
    np.dtype("i1"): 0x09,
    np.dtype(">i2"): 0x0B,
    np.dtype(">i4"): 0x0C,
    np.dtype(">f4"): 0x0D,
    np.dtype(">f8"): 0x0E,
}


def write_idx(path: Path, array: np.ndarray, *, gz: bool = False) -> Path:
    """Write ``array`` as an IDX file (magic 0x0000TTDD, big-endian uint32 dims, C-order data)."""
    big_endian = array.astype(array.dtype.newbyteorder(">")) if array.dtype.itemsize > 1 else array
    header = bytes([0, 0, IDX_CODES[big_endian.dtype], array.ndim])
    header += struct.pack(f">{array.ndim}I", *array.shape)
    payload = header + big_endian.tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    if gz:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(payload))
    else:
        path.write_bytes(payload)
    return path


def fake_idx_set(
    folder: Path, seed: int, *, n_train: int = 7, gz: bool = False
) -> dict[str, np.ndarray]:
    """Tiny MNIST-format files in ``folder``: ``n_train`` training and :data:`N_TEST` test images
    of :data:`IMAGE_SHAPE` with their labels, drawn from ``seed`` (gzipped with ``gz``)."""
    rng = np.random.default_rng(seed)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, *IMAGE_SHAPE), dtype=np.uint8),
        "train-labels-idx1-ubyte": rng.integers(0, 10, n_train, dtype=np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (N_TEST, *IMAGE_SHAPE), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": rng.integers(0, 10, N_TEST, dtype=np.uint8),
    }
    arrays["train-images-idx3-ubyte"][0, 0, 0] = 255  # both ends of the grey scale occur
    arrays["train-images-idx3-ubyte"][0, 0, 1] = 0
    for stem, array in arrays.items():
        write_idx(folder / stem, array, gz=gz)
    return arrays
