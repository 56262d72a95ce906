"""Image-classification datasets for the MLP/CNN workloads, loaded offline from standard formats.

* ``digits``: scikit-learn's 8x8 handwritten digits (1,797 images, 10 classes, 17 grey levels
  0..16), shipped with scikit-learn, so every workload runs on a fresh machine without a download.
  Split into train/test with a seeded stratified split.
* ``mnist`` and ``fashion-mnist``: the IDX files of LeCun et al. (the layout torchvision writes,
  ``ROOT/MNIST/raw/train-images-idx3-ubyte[.gz]`` etc.), parsed here with numpy.
* ``cifar10``: the python pickles of ``cifar-10-python.tar.gz`` (``ROOT/cifar-10-batches-py``).

Nothing is ever downloaded and torchvision is not needed. Every image tensor is float32 of shape
``(n, channels, height, width)`` with values in ``[0, 1]``; labels are int64. Normalisation (for
example FedNest's MNIST mean/std 0.1307/0.3081) is the workload's business, not the loader's.
"""

from __future__ import annotations

import dataclasses
import gzip
import pickle
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import torch

DATASETS: tuple[str, ...] = ("digits", "mnist", "fashion-mnist", "cifar10")

_N_CLASSES = 10

# IDX type codes (http://yann.lecun.com/exdb/mnist/, "THE IDX FILE FORMAT"): big-endian data.
_IDX_DTYPES: dict[int, str] = {
    0x08: "u1",
    0x09: "i1",
    0x0B: ">i2",
    0x0C: ">i4",
    0x0D: ">f4",
    0x0E: ">f8",
}

# torchvision's folder names for the two IDX datasets.
_IDX_FOLDERS = {"mnist": "MNIST", "fashion-mnist": "FashionMNIST"}
_IDX_SOURCES = {
    "mnist": "http://yann.lecun.com/exdb/mnist/ "
    "(or torchvision.datasets.MNIST(root, download=True))",
    "fashion-mnist": "https://github.com/zalandoresearch/fashion-mnist "
    "(or torchvision.datasets.FashionMNIST(root, download=True))",
}
_CIFAR_FOLDER = "cifar-10-batches-py"
_CIFAR_SOURCE = (
    "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz (extract it into the folder)"
)
_CIFAR_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
_CIFAR_TEST = "test_batch"


class DatasetError(ValueError):
    """A dataset cannot be loaded: a missing folder or file, or a malformed file."""


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A train/test image-classification dataset held as torch tensors.

    ``train_x``/``test_x`` are float32 ``(n, channels, height, width)`` in ``[0, 1]``;
    ``train_y``/``test_y`` are int64 ``(n,)`` in ``[0, n_classes)``; ``source`` says where the
    data came from (``"sklearn.datasets.load_digits"`` or the files' folder).
    """

    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    n_classes: int
    source: str

    @property
    def input_shape(self) -> tuple[int, int, int]:
        """``(channels, height, width)`` of one image."""
        c, h, w = self.train_x.shape[1:]
        return int(c), int(h), int(w)

    @property
    def input_dim(self) -> int:
        """Length of a flattened image, ``channels * height * width`` (784 for MNIST)."""
        c, h, w = self.input_shape
        return c * h * w

    @property
    def n_train(self) -> int:
        return int(self.train_y.shape[0])

    @property
    def n_test(self) -> int:
        return int(self.test_y.shape[0])


def load_dataset(
    name: str,
    root: str | Path | None = None,
    *,
    test_fraction: float = 0.25,
    seed: int = 0,
    limit: int | None = None,
) -> Dataset:
    """Load dataset ``name`` (one of :data:`DATASETS`) from ``root``; never downloads.

    ``root`` is required for ``mnist``, ``fashion-mnist`` and ``cifar10`` (the folder the user
    keeps the files in) and ignored for ``digits``. ``test_fraction`` and ``seed`` set the
    stratified train/test split of ``digits``; the file datasets keep their official split.
    ``limit`` keeps ``limit`` training samples, the first ones of a permutation seeded by ``seed``
    (a uniform random subset, for quick runs); the test set is kept whole.
    """
    if name not in DATASETS:
        raise DatasetError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise DatasetError(f"limit must be a positive integer or None, got {limit!r}")
    if name == "digits":
        data = _load_digits(test_fraction, seed)
    else:
        if root is None:
            raise DatasetError(
                f"dataset {name!r} is read from a local folder: pass root=FOLDER "
                f"(it is never downloaded; get it from {_source_hint(name)})"
            )
        folder = Path(root).expanduser()
        if folder.exists() and not folder.is_dir():
            raise DatasetError(
                f"dataset folder {str(folder)!r} for {name!r} is a file, not a "
                "folder: root names the folder that holds the data files"
            )
        if not folder.is_dir():
            raise DatasetError(
                f"dataset folder {str(folder)!r} for {name!r} does not exist "
                f"(get the data from {_source_hint(name)})"
            )
        data = _load_cifar10(folder) if name == "cifar10" else _load_idx_dataset(name, folder)
    if limit is not None and limit < data.n_train:
        keep = torch.from_numpy(np.random.default_rng([seed, 1]).permutation(data.n_train)[:limit])
        data = dataclasses.replace(data, train_x=data.train_x[keep], train_y=data.train_y[keep])
    return data


def _source_hint(name: str) -> str:
    return _CIFAR_SOURCE if name == "cifar10" else _IDX_SOURCES[name]


def _images_to_tensor(images: np.ndarray, scale: float) -> torch.Tensor:
    """Integer grey levels ``0..scale`` to float32 in ``[0, 1]``."""
    return torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32) / np.float32(scale))


def _labels_to_tensor(labels: np.ndarray, where: str) -> torch.Tensor:
    labels = np.asarray(labels)
    if labels.size and (labels.min() < 0 or labels.max() >= _N_CLASSES):
        raise DatasetError(
            f"{where}: labels must lie in [0, {_N_CLASSES}), found [{labels.min()}, {labels.max()}]"
        )
    return torch.from_numpy(labels.astype(np.int64))


# --- digits -------------------------------------------------------------------------------------


def _load_digits(test_fraction: float, seed: int) -> Dataset:
    """scikit-learn digits, 16 grey levels scaled to [0, 1], stratified seeded split."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if not 0.0 < test_fraction < 1.0:
        raise DatasetError(f"test_fraction must lie in (0, 1), got {test_fraction!r}")
    bunch = load_digits()
    images = np.asarray(bunch.images)[:, None, :, :]  # (1797, 1, 8, 8), values 0..16
    labels = np.asarray(bunch.target)
    train_idx, test_idx = train_test_split(
        np.arange(labels.shape[0]), test_size=test_fraction, stratify=labels, random_state=seed
    )
    x = _images_to_tensor(images, 16.0)
    y = _labels_to_tensor(labels, "sklearn digits")
    tr, te = torch.from_numpy(train_idx), torch.from_numpy(test_idx)
    return Dataset("digits", x[tr], y[tr], x[te], y[te], _N_CLASSES, "sklearn.datasets.load_digits")


# --- MNIST / Fashion-MNIST (IDX) ----------------------------------------------------------------


def read_idx(path: str | Path) -> np.ndarray:
    """Parse one IDX file (optionally gzipped) into a numpy array of its stated type and shape.

    Layout: two zero bytes, a type code (0x08 unsigned byte, 0x09 signed byte, 0x0B int16,
    0x0C int32, 0x0D float32, 0x0E float64), the number of dimensions, then one big-endian
    uint32 per dimension, then the data in C order, big-endian.
    """
    path = Path(path)
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as handle:
            raw = handle.read()
    # gzip raises BadGzipFile (an OSError), EOFError (cut short) or zlib.error (a corrupt
    # compressed stream)
    except (OSError, EOFError, zlib.error) as error:
        raise DatasetError(f"cannot read IDX file {str(path)!r}: {error}") from error
    if len(raw) < 4:
        raise DatasetError(f"{str(path)!r} is not an IDX file: only {len(raw)} bytes")
    zero0, zero1, code, ndim = raw[0], raw[1], raw[2], raw[3]
    if zero0 != 0 or zero1 != 0 or code not in _IDX_DTYPES:
        raise DatasetError(
            f"{str(path)!r} is not an IDX file: bad magic number "
            f"0x{raw[:4].hex()} (expected 0x0000TTDD with type TT in "
            f"{sorted(hex(c) for c in _IDX_DTYPES)})"
        )
    header = 4 + 4 * ndim
    if ndim == 0 or len(raw) < header:
        raise DatasetError(f"{str(path)!r}: truncated IDX header ({ndim} dimensions)")
    dims = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    dtype = np.dtype(_IDX_DTYPES[code])
    expected = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    if len(raw) - header != expected:
        raise DatasetError(
            f"{str(path)!r}: header says shape {dims} ({expected} data bytes) but "
            f"the file has {len(raw) - header} data bytes"
        )
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(dims)


def _find_idx_file(name: str, folder: Path, stem: str) -> Path:
    """``stem`` or ``stem.gz`` under torchvision's ``FOLDER/raw``, ``FOLDER`` or ``root`` itself."""
    sub = _IDX_FOLDERS[name]
    candidates = [folder / sub / "raw", folder / sub, folder]
    for directory in candidates:
        for filename in (stem, stem + ".gz"):
            if (directory / filename).is_file():
                return directory / filename
    looked = ", ".join(str(d) for d in candidates)
    raise DatasetError(
        f"{name}: file {stem}[.gz] not found (looked in {looked}); get it from {_IDX_SOURCES[name]}"
    )


def _read_idx_pair(name: str, folder: Path, prefix: str) -> tuple[torch.Tensor, torch.Tensor]:
    image_path = _find_idx_file(name, folder, f"{prefix}-images-idx3-ubyte")
    label_path = _find_idx_file(name, folder, f"{prefix}-labels-idx1-ubyte")
    images, labels = read_idx(image_path), read_idx(label_path)
    if images.dtype != np.uint8 or images.ndim != 3:
        raise DatasetError(
            f"{str(image_path)!r}: expected uint8 images of shape (n, rows, cols), "
            f"got {images.dtype} {images.shape}"
        )
    if labels.dtype != np.uint8 or labels.ndim != 1:
        raise DatasetError(
            f"{str(label_path)!r}: expected uint8 labels of shape (n,), "
            f"got {labels.dtype} {labels.shape}"
        )
    if images.shape[0] != labels.shape[0]:
        raise DatasetError(
            f"{name} {prefix}: {images.shape[0]} images but "
            f"{labels.shape[0]} labels ({image_path}, {label_path})"
        )
    return _images_to_tensor(images[:, None], 255.0), _labels_to_tensor(labels, str(label_path))


def _load_idx_dataset(name: str, folder: Path) -> Dataset:
    train_x, train_y = _read_idx_pair(name, folder, "train")
    test_x, test_y = _read_idx_pair(name, folder, "t10k")
    if train_x.shape[1:] != test_x.shape[1:]:
        raise DatasetError(
            f"{name}: train images {tuple(train_x.shape[1:])} and test images "
            f"{tuple(test_x.shape[1:])} differ in shape"
        )
    source = _find_idx_file(name, folder, "train-images-idx3-ubyte").parent
    return Dataset(name, train_x, train_y, test_x, test_y, _N_CLASSES, str(source))


# --- CIFAR-10 (python pickles) ------------------------------------------------------------------


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles plain containers and numpy arrays only (no arbitrary code from a data file).

    The official batches were pickled under Python 2 with numpy < 2, whose array reconstructor
    lives in ``numpy.core.multiarray``; numpy >= 2 moved it to ``numpy._core``.
    """

    _ALLOWED = {
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy._core.numeric", "_frombuffer"),
        ("_codecs", "encode"),
    }  # how protocol-2 pickles written by Python 3 store bytes

    def find_class(self, module: str, name: str) -> Any:
        if module.startswith("numpy.core"):
            module = "numpy._core" + module[len("numpy.core") :]
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a data file")
        return super().find_class(module, name)


def _read_cifar_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR-10 batch: a dict with b"data" uint8 (n, 3072) and b"labels" (n ints)."""
    try:
        with path.open("rb") as handle:
            batch = _ArrayUnpickler(handle, encoding="bytes").load()
    except (
        OSError,
        EOFError,
        pickle.UnpicklingError,
        ValueError,
        TypeError,
        AttributeError,
        IndexError,
    ) as error:
        raise DatasetError(f"cannot read CIFAR-10 batch {str(path)!r}: {error}") from error
    if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
        keys = sorted(batch) if isinstance(batch, dict) else type(batch).__name__
        raise DatasetError(
            f"{str(path)!r}: expected a dict with keys b'data' and b'labels', got {keys}"
        )
    data, labels = batch[b"data"], np.asarray(batch[b"labels"])
    if (
        not isinstance(data, np.ndarray)
        or data.dtype != np.uint8
        or data.ndim != 2
        or data.shape[1] != 3 * 32 * 32
    ):
        shape = getattr(data, "shape", None)
        raise DatasetError(
            f"{str(path)!r}: b'data' must be a uint8 array of shape (n, 3072), "
            f"got {getattr(data, 'dtype', type(data).__name__)} {shape}"
        )
    if (
        labels.ndim != 1
        or labels.shape[0] != data.shape[0]
        or not np.issubdtype(labels.dtype, np.integer)
    ):
        raise DatasetError(
            f"{str(path)!r}: b'labels' must hold {data.shape[0]} integers, "
            f"got {labels.dtype} {labels.shape}"
        )
    return data, labels


def _load_cifar10(folder: Path) -> Dataset:
    directory = folder / _CIFAR_FOLDER if (folder / _CIFAR_FOLDER).is_dir() else folder
    missing = [f for f in (*_CIFAR_TRAIN, _CIFAR_TEST) if not (directory / f).is_file()]
    if missing:
        raise DatasetError(
            f"cifar10: {', '.join(missing)} not found in {str(directory)!r} "
            f"(expected {folder / _CIFAR_FOLDER}/data_batch_1..5 and test_batch; "
            f"get them from {_CIFAR_SOURCE})"
        )

    def load(files: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        parts = [_read_cifar_batch(directory / f) for f in files]
        data = np.concatenate([d for d, _ in parts]).reshape(-1, 3, 32, 32)  # rows are R|G|B
        labels = np.concatenate([lab for _, lab in parts])
        return _images_to_tensor(data, 255.0), _labels_to_tensor(labels, f"cifar10 {files}")

    train_x, train_y = load(_CIFAR_TRAIN)
    test_x, test_y = load((_CIFAR_TEST,))
    return Dataset("cifar10", train_x, train_y, test_x, test_y, _N_CLASSES, str(directory))
