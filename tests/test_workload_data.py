"""Dataset loaders: the embedded digits set, and MNIST-style IDX and CIFAR-10 pickle files that
the tests write in tmp_path in exactly the published formats (gzipped and not)."""

from __future__ import annotations

import gzip
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from problems.workloads.data import DATASETS
from problems.workloads.data import DatasetError
from problems.workloads.data import load_dataset
from problems.workloads.data import read_idx
from tests._idx_files import fake_idx_set
from tests._idx_files import write_idx


def _check_idx_dataset(data, arrays: dict[str, np.ndarray], name: str) -> None:
    assert data.name == name and data.n_classes == 10
    for split, prefix in (("train", "train"), ("test", "t10k")):
        x, y = getattr(data, f"{split}_x"), getattr(data, f"{split}_y")
        images = arrays[f"{prefix}-images-idx3-ubyte"]
        assert x.dtype == torch.float32 and y.dtype == torch.int64
        assert tuple(x.shape) == (images.shape[0], 1, *images.shape[1:])
        # Exact: k/255 in float32 is what both sides compute.
        expected = torch.from_numpy(images[:, None].astype(np.float32) / np.float32(255))
        assert torch.equal(x, expected)
        labels = arrays[f"{prefix}-labels-idx1-ubyte"].astype(np.int64)
        assert torch.equal(y, torch.from_numpy(labels))
    assert data.train_x.min() == 0.0 and data.train_x.max() == 1.0
    assert data.input_shape == (1, 5, 4) and data.input_dim == 20


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_in_torchvision_layout(tmp_path: Path, gz: bool) -> None:
    arrays = fake_idx_set(tmp_path / "MNIST" / "raw", seed=1, gz=gz)
    data = load_dataset("mnist", tmp_path)
    _check_idx_dataset(data, arrays, "mnist")
    assert data.source == str(tmp_path / "MNIST" / "raw")


@pytest.mark.parametrize("gz", [False, True])
def test_fashion_mnist_in_torchvision_layout(tmp_path: Path, gz: bool) -> None:
    arrays = fake_idx_set(tmp_path / "FashionMNIST" / "raw", seed=2, gz=gz)
    _check_idx_dataset(load_dataset("fashion-mnist", tmp_path), arrays, "fashion-mnist")


def test_idx_files_directly_in_root_and_mixed_compression(tmp_path: Path) -> None:
    arrays = fake_idx_set(tmp_path, seed=3)
    label_file = tmp_path / "t10k-labels-idx1-ubyte"  # one file gzipped, the rest not
    gzipped = label_file.with_name(label_file.name + ".gz")
    gzipped.write_bytes(gzip.compress(label_file.read_bytes()))
    label_file.unlink()
    _check_idx_dataset(load_dataset("mnist", str(tmp_path)), arrays, "mnist")


def test_mnist_folder_does_not_satisfy_fashion_mnist(tmp_path: Path) -> None:
    fake_idx_set(tmp_path / "MNIST" / "raw", seed=4)
    with pytest.raises(DatasetError, match="train-images-idx3-ubyte.*FashionMNIST"):
        load_dataset("fashion-mnist", tmp_path)


@pytest.mark.parametrize("dtype", ["u1", "i1", ">i2", ">i4", ">f4", ">f8"])
def test_read_idx_round_trips_every_type(tmp_path: Path, dtype: str) -> None:
    array = (
        (np.arange(24).reshape(2, 3, 4) - 7).astype(dtype)
        if dtype != "u1"
        else np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    )
    parsed = read_idx(write_idx(tmp_path / "a-idx3", array))
    assert parsed.shape == (2, 3, 4) and parsed.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(parsed, array)


def test_missing_files_and_folders_are_named(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="root=FOLDER"):
        load_dataset("mnist")
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset("mnist", tmp_path / "nowhere")
    fake_idx_set(tmp_path, seed=5)
    (tmp_path / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(DatasetError, match=r"t10k-labels-idx1-ubyte\[\.gz\] not found"):
        load_dataset("mnist", tmp_path)
    with pytest.raises(DatasetError, match="unknown dataset 'emnist'"):
        load_dataset("emnist", tmp_path)


def _corrupt(tmp_path: Path, stem: str, payload: bytes) -> None:
    fake_idx_set(tmp_path, seed=6)
    (tmp_path / stem).write_bytes(payload)


@pytest.mark.parametrize(
    ("stem", "payload", "message"),
    [
        ("train-images-idx3-ubyte", b"\x00\x00\x08", "only 3 bytes"),
        ("train-images-idx3-ubyte", b"\x01\x00\x08\x03" + b"\x00" * 12, "bad magic"),
        ("train-images-idx3-ubyte", b"\x00\x00\x07\x03" + b"\x00" * 12, "bad magic"),
        ("train-images-idx3-ubyte", b"\x00\x00\x08\x03\x00\x00\x00\x07", "truncated IDX header"),
        (
            "train-images-idx3-ubyte",
            bytes([0, 0, 8, 3]) + struct.pack(">3I", 7, 5, 4) + b"\x00" * 139,
            "139 data bytes",
        ),
        (
            "train-images-idx3-ubyte",
            bytes([0, 0, 8, 2]) + struct.pack(">2I", 7, 20) + b"\x00" * 140,
            r"shape \(n, rows, cols\)",
        ),
        (
            "train-labels-idx1-ubyte",
            bytes([0, 0, 8, 1]) + struct.pack(">I", 6) + b"\x00" * 6,
            "7 images but 6 labels",
        ),
        (
            "train-labels-idx1-ubyte",
            bytes([0, 0, 8, 1]) + struct.pack(">I", 7) + b"\x0a" * 7,
            r"labels must lie in \[0, 10\)",
        ),
        (
            "train-labels-idx1-ubyte",
            bytes([0, 0, 0x0C, 1]) + struct.pack(">I", 7) + b"\x00" * 28,
            "expected uint8 labels",
        ),
    ],
)
def test_malformed_idx_files_raise(tmp_path: Path, stem: str, payload: bytes, message: str) -> None:
    _corrupt(tmp_path, stem, payload)
    with pytest.raises(DatasetError, match=message):
        load_dataset("mnist", tmp_path)


def test_corrupt_gzip_raises(tmp_path: Path) -> None:
    fake_idx_set(tmp_path, seed=7, gz=True)
    (tmp_path / "train-images-idx3-ubyte.gz").write_bytes(b"not gzip at all")
    with pytest.raises(DatasetError, match="cannot read IDX file"):
        load_dataset("mnist", tmp_path)


def test_limit_keeps_a_seeded_subset_of_training_rows(tmp_path: Path) -> None:
    fake_idx_set(tmp_path, seed=8, n_train=20)
    full = load_dataset("mnist", tmp_path)
    small = load_dataset("mnist", tmp_path, limit=6, seed=3)
    again = load_dataset("mnist", tmp_path, limit=6, seed=3)
    other = load_dataset("mnist", tmp_path, limit=6, seed=4)
    assert small.n_train == 6 and torch.equal(small.train_x, again.train_x)
    assert not torch.equal(small.train_x, other.train_x)
    flat_full = full.train_x.flatten(1)
    for row, label in zip(small.train_x.flatten(1), small.train_y, strict=True):
        matches = (flat_full == row).all(dim=1).nonzero().flatten()
        assert matches.numel() >= 1 and bool((full.train_y[matches] == label).any())
    assert torch.equal(small.test_x, full.test_x)  # the test set is kept whole
    assert load_dataset("mnist", tmp_path, limit=100).n_train == 20
    with pytest.raises(DatasetError, match="limit must be a positive integer"):
        load_dataset("mnist", tmp_path, limit=0)


# --- CIFAR-10 -----------------------------------------------------------------------------------


def fake_cifar(
    folder: Path, seed: int, *, per_batch: int = 3, protocol: int = 2, numpy1_names: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """``data_batch_1..5`` and ``test_batch`` as pickled dicts, like cifar-10-python.tar.gz.

    ``numpy1_names`` rewrites the pickled global ``numpy._core`` to ``numpy.core``, the name the
    official (Python 2, numpy 1) files use; protocol 2 stores globals as text lines, so the byte
    replacement yields a valid pickle.
    """
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    all_data, all_labels = [], []
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
        labels = rng.integers(0, 10, per_batch).tolist()
        payload = pickle.dumps(
            {
                b"batch_label": name.encode(),
                b"labels": labels,
                b"data": data,
                b"filenames": [b"x.png"] * per_batch,
            },
            protocol=protocol,
        )
        if numpy1_names:
            assert b"numpy._core" in payload
            payload = payload.replace(b"numpy._core", b"numpy.core")
        (folder / name).write_bytes(payload)
        all_data.append(data)
        all_labels.append(labels)
    return np.concatenate(all_data), np.concatenate(all_labels)


@pytest.mark.parametrize(("protocol", "numpy1_names"), [(2, True), (2, False), (5, False)])
def test_cifar10_batches(tmp_path: Path, protocol: int, numpy1_names: bool) -> None:
    data, labels = fake_cifar(
        tmp_path / "cifar-10-batches-py", seed=9, protocol=protocol, numpy1_names=numpy1_names
    )
    loaded = load_dataset("cifar10", tmp_path)
    assert loaded.input_shape == (3, 32, 32) and loaded.input_dim == 3072
    assert loaded.n_train == 15 and loaded.n_test == 3
    assert loaded.train_x.dtype == torch.float32 and loaded.train_y.dtype == torch.int64
    # A row is 1024 red, then 1024 green, then 1024 blue values, each row-major over 32x32.
    for i, (ch, r, c) in enumerate([(0, 0, 0), (1, 3, 5), (2, 31, 30), (0, 17, 2)]):
        assert loaded.train_x[i + 4, ch, r, c] == np.float32(
            data[i + 4, ch * 1024 + r * 32 + c]
        ) / np.float32(255)
    expected = torch.from_numpy(data[:15].reshape(15, 3, 32, 32).astype(np.float32) / 255)
    assert torch.equal(loaded.train_x, expected)
    assert loaded.train_y.tolist() == labels[:15].tolist()
    assert loaded.test_y.tolist() == labels[15:].tolist()
    assert loaded.source == str(tmp_path / "cifar-10-batches-py")


def test_cifar10_files_directly_in_root(tmp_path: Path) -> None:
    fake_cifar(tmp_path, seed=10)
    assert load_dataset("cifar10", tmp_path).n_train == 15


def test_cifar10_missing_batch_is_named(tmp_path: Path) -> None:
    fake_cifar(tmp_path / "cifar-10-batches-py", seed=11)
    (tmp_path / "cifar-10-batches-py" / "data_batch_4").unlink()
    with pytest.raises(DatasetError, match="data_batch_4 not found"):
        load_dataset("cifar10", tmp_path)


class _Exploit:
    def __reduce__(self):
        return (Path.touch, (Path("/nonexistent-dir/pwned"),))


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        ({b"labels": [0, 1]}, "expected a dict with keys"),
        ([1, 2, 3], "expected a dict with keys"),
        ({b"data": np.zeros((2, 3072), np.float32), b"labels": [0, 1]}, "must be a uint8 array"),
        ({b"data": np.zeros((2, 1024), np.uint8), b"labels": [0, 1]}, r"shape \(n, 3072\)"),
        ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0]}, "must hold 2 integers"),
        ({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 10]}, r"lie in \[0, 10\)"),
        (
            {b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 1], b"x": _Exploit()},
            "refusing to load",
        ),
    ],
)
def test_cifar10_malformed_batches_raise(tmp_path: Path, batch: object, message: str) -> None:
    fake_cifar(tmp_path, seed=12)
    (tmp_path / "data_batch_2").write_bytes(pickle.dumps(batch, protocol=2))
    with pytest.raises(DatasetError, match=message):
        load_dataset("cifar10", tmp_path)


def test_cifar10_truncated_pickle_raises(tmp_path: Path) -> None:
    fake_cifar(tmp_path, seed=13)
    payload = (tmp_path / "test_batch").read_bytes()
    (tmp_path / "test_batch").write_bytes(payload[: len(payload) // 2])
    with pytest.raises(DatasetError, match="cannot read CIFAR-10 batch"):
        load_dataset("cifar10", tmp_path)


# --- digits -------------------------------------------------------------------------------------


def test_digits_shapes_dtypes_and_grey_levels() -> None:
    data = load_dataset("digits")
    assert data.name == "digits" and data.n_classes == 10 and DATASETS[0] == "digits"
    assert data.n_train + data.n_test == 1797
    assert data.n_test == 450  # sklearn: ceil(0.25 * 1797)
    assert tuple(data.train_x.shape) == (1347, 1, 8, 8) and data.input_dim == 64
    assert data.train_x.dtype == torch.float32 and data.train_y.dtype == torch.int64
    both = torch.cat([data.train_x, data.test_x])
    assert both.min() == 0.0 and both.max() == 1.0
    assert torch.equal(both * 16, torch.round(both * 16))  # 17 levels k/16, k = 0..16
    # Together the two parts are exactly sklearn's images, each once.
    bunch = load_digits()
    reference = np.asarray(bunch.images, np.float32).reshape(1797, 64) / np.float32(16)
    mine = both.reshape(1797, 64).numpy()
    assert np.array_equal(np.unique(mine, axis=0), np.unique(reference, axis=0))
    ys = torch.cat([data.train_y, data.test_y]).numpy()
    assert np.array_equal(np.bincount(ys), np.bincount(bunch.target))


@pytest.mark.parametrize("test_fraction", [0.25, 0.5])
def test_digits_split_is_stratified(test_fraction: float) -> None:
    data = load_dataset("digits", test_fraction=test_fraction, seed=1)
    per_class = np.bincount(load_digits().target)
    test_counts = np.bincount(data.test_y.numpy(), minlength=10)
    # Stratification rounds each class's share to an integer: at most one sample off.
    assert np.all(np.abs(test_counts - test_fraction * per_class) <= 1.0)


def test_digits_is_deterministic_by_seed() -> None:
    a, b, c = (load_dataset("digits", seed=s) for s in (5, 5, 6))
    assert torch.equal(a.train_x, b.train_x) and torch.equal(a.test_y, b.test_y)
    assert not torch.equal(a.train_x, c.train_x)
    small = load_dataset("digits", seed=5, limit=100)
    assert small.n_train == 100 and small.n_test == a.n_test
    assert torch.equal(small.train_x, load_dataset("digits", seed=5, limit=100).train_x)


def test_digits_rejects_bad_test_fraction() -> None:
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(DatasetError, match="test_fraction"):
            load_dataset("digits", test_fraction=bad)
