"""Images for the tests: crops in tests/data (in git) and the full sample pictures in
assets/samples (filled by scripts/setup.sh), as uint8 grey, uint16 grey and uint8 RGB."""

import os

import numpy as np
import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DATA = os.path.join(ROOT, "tests", "data")
# The sample pictures: assets/samples, or $MORPHOSCOPE_DATA/samples (as the Rust tests).
SAMPLES = (
    os.path.join(os.environ["MORPHOSCOPE_DATA"], "samples")
    if os.environ.get("MORPHOSCOPE_DATA")
    else os.path.join(ROOT, "assets", "samples")
)
# The device the comparisons run on: "auto" (CUDA where present), or MORPHOSCOPE_TEST_DEVICE.
DEVICE = os.environ.get("MORPHOSCOPE_TEST_DEVICE", "auto")
STILLS = ["baboon.jpg", "building.jpg", "fruits.jpg", "pic1.png", "text_motion.jpg"]


def data(*path):
    """An array of tests/data."""
    return np.load(os.path.join(DATA, *path))


def sample_rgb(name):
    """A sample picture as uint8 RGB (skipped when assets/samples lacks it: run scripts/setup.sh)."""
    path = os.path.join(SAMPLES, name)
    if not os.path.exists(path):
        if os.environ.get("MORPHOSCOPE_REQUIRE_SAMPLES") == "1":
            pytest.fail(f"{path} missing and MORPHOSCOPE_REQUIRE_SAMPLES=1")
        pytest.skip(f"{path} missing: scripts/setup.sh fills assets/samples")
    from skimage import io

    img = io.imread(path)
    if img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    return np.ascontiguousarray(img[..., :3])


def to_gray(rgb):
    """BT.601 grey, rounded (any grey will do: the results are compared on the same input)."""
    g = rgb[..., 0] * 0.299 + rgb[..., 1] * 0.587 + rgb[..., 2] * 0.114
    return np.round(g).astype(np.uint8)


def to_u16(gray):
    """A 16-bit image with distinct low bytes, so that 16-bit levels matter."""
    rng = np.random.default_rng(7)
    return (gray.astype(np.uint16) << 8) | rng.integers(0, 256, gray.shape, dtype=np.uint16)


@pytest.fixture(params=STILLS)
def still(request):
    """(name, uint8 RGB) of each sample picture."""
    return request.param, sample_rgb(request.param)


@pytest.fixture(params=STILLS)
def gray(request):
    """(name, uint8 grey) of each sample picture."""
    return request.param, to_gray(sample_rgb(request.param))


def pytest_sessionstart(session):
    """With MORPHOSCOPE_REQUIRE_GPU=1 (the GPU machine) a missing CUDA fails the run."""
    if os.environ.get("MORPHOSCOPE_REQUIRE_GPU") == "1":
        import morphoscope

        if not morphoscope.cuda_available():
            raise pytest.UsageError("MORPHOSCOPE_REQUIRE_GPU=1 but CUDA is unavailable")


def on_cuda(device):
    """Whether a call with ``device`` runs on CUDA here."""
    import morphoscope

    return device == "cuda" or (device == "auto" and morphoscope.cuda_available())


def assert_same_segments(got, want, device):
    """Felzenszwalb labels: identical on the CPU. On CUDA the round-based segmentation decides
    what Kruskal decides except between edges of exactly equal weight (docs/python.md), so there
    the partitions must agree on at least 99.5 % of the pixels (each of ``want``'s segments
    matched to the ``got`` segment covering most of it) with segment counts within 1 %."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if not on_cuda(device) or np.array_equal(got, want):
        np.testing.assert_array_equal(got, want)
        return
    pairs = want.astype(np.int64).ravel() * (int(got.max()) + 1) + got.ravel()
    keys, counts = np.unique(pairs, return_counts=True)
    owner = keys // (int(got.max()) + 1)
    best = np.zeros(int(want.max()) + 1, np.int64)
    np.maximum.at(best, owner, counts)
    agree = best.sum() / want.size
    n_got, n_want = int(got.max()) + 1, int(want.max()) + 1
    assert agree >= 0.995, f"partitions agree on {agree:.4%} of the pixels"
    assert abs(n_got - n_want) <= max(1, n_want // 100), (n_got, n_want)
