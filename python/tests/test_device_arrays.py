"""CUDA arrays in and out, on a GPU machine: every function on CuPy arrays (contiguous or not)
and PyTorch CUDA tensors returns arrays of the input's library, on the device, equal to the
NumPy call's result on the same device bit for bit; the op reads its input in place (checked by
pointer) and nothing image-sized crosses the bus (checked with the torch profiler, CUPTI, when
PyTorch is installed).

Skipped without CuPy or without morphoscope's CUDA (``morphoscope.cuda_available()``); with
``MORPHOSCOPE_REQUIRE_GPU=1`` those are failures instead. PyTorch is optional (its tests skip
without it). The CPU-side checks of the same paths are test_device_interface.py's."""

import gc
import json
import os

import numpy as np
import pytest
from conftest import data, to_u16

import morphoscope
from morphoscope import _core, measure, morphology, orientation, segmentation

REQUIRE = os.environ.get("MORPHOSCOPE_REQUIRE_GPU") == "1"


def missing(why):
    """Skips, or fails under MORPHOSCOPE_REQUIRE_GPU=1."""
    if REQUIRE:
        pytest.fail(f"MORPHOSCOPE_REQUIRE_GPU=1 but {why}")
    pytest.skip(why)


@pytest.fixture(scope="module")
def cp():
    try:
        import cupy
    except ImportError as e:
        missing(f"CuPy cannot be imported ({e})")
    try:
        devices = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - any CUDA failure means "no device"
        missing(f"CuPy finds no CUDA device ({e})")
    if devices < 1:
        missing("CuPy finds no CUDA device")
    if not morphoscope.cuda_available():
        missing("morphoscope.cuda_available() is False (driver, NVRTC or kernels)")
    return cupy


@pytest.fixture(scope="module")
def torch(cp):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA")
    return torch


GRAY = data("cca", "baboon_gray.npy")
U16 = to_u16(GRAY)
MASK = GRAY > 128
RGB = data("segmentation", "baboon_rgb.npy")
F32 = data("orientation", "fruits_f32_input.npy")
LABELS = measure.label(MASK, device="cpu")
PROPS = ("label", "area", "bbox", "centroid", "inertia_tensor", "intensity_mean")

# name -> (host arguments, call(*arguments, device), computed on the device, input read in place)
CASES = {
    "area_opening_u8": ((GRAY,), lambda x, d: morphology.area_opening(x, 30, device=d)),
    "area_opening_u16": ((U16,), lambda x, d: morphology.area_opening(x, 30, 2, device=d)),
    "area_closing_u8": ((GRAY,), lambda x, d: morphology.area_closing(x, 30, 2, device=d)),
    "attribute_opening_u8": (
        (GRAY,),
        lambda x, d: morphology.attribute_opening(x, "height", 9, device=d),
    ),
    "attribute_closing_u16": (
        (U16,),
        lambda x, d: morphology.attribute_closing(x, "volume", 900, device=d),
    ),
    "label_bool": ((MASK,), lambda x, d: measure.label(x, return_num=True, device=d)),
    "label_u8": (
        ((MASK * 7).astype(np.uint8),),
        lambda x, d: measure.label(x, connectivity=1, return_num=True, device=d),
    ),
    "label_i64_background": (
        (np.where(MASK, 3, 5).astype(np.int64),),
        lambda x, d: measure.label(x, background=5, device=d),
    ),
    "felzenszwalb_rgb": ((RGB,), lambda x, d: segmentation.felzenszwalb(x, 100, device=d)),
    "felzenszwalb_gray": (
        (GRAY,),
        lambda x, d: segmentation.felzenszwalb(x, 100, 0.8, 10, device=d),
    ),
    "felzenszwalb_channels_first": (
        (np.ascontiguousarray(np.moveaxis(RGB, -1, 0)),),
        lambda x, d: segmentation.felzenszwalb(x, 100, channel_axis=0, device=d),
    ),
    "linear_opening_u8": ((GRAY,), lambda x, d: orientation.linear_opening(x, 9, 30, device=d)),
    "linear_closing_u16": (
        (U16,),
        lambda x, d: orientation.linear_closing(x, 15, 135, device=d),
    ),
    "linear_opening_f32": ((F32,), lambda x, d: orientation.linear_opening(x, 9, 30, device=d)),
    "orientation_map_u8": (
        (GRAY,),
        lambda x, d: orientation.orientation_map(x, 9, 12, device=d),
    ),
    "orientation_map_u16_closing": (
        (U16,),
        lambda x, d: orientation.orientation_map(x, 9, [0, 30, 90], closing=True, device=d),
    ),
    "orientation_map_f32": (
        (F32,),
        lambda x, d: orientation.orientation_map(x, 9, 6, device=d),
    ),
    "regionprops_table": (
        (LABELS, GRAY),
        lambda l, i, d: measure.regionprops_table(l, i, properties=PROPS, device=d),
    ),
}
# Computed on the host whatever the input (the library has no device path for them).
ON_HOST = {"linear_opening_f32", "orientation_map_f32", "regionprops_table"}
# The array the extension reads is not the input itself (a mask, a rearranged copy).
NOT_IN_PLACE = {"label_bool", "label_u8", "label_i64_background", "felzenszwalb_channels_first"}
ON_DEVICE = sorted(set(CASES) - ON_HOST)


def call(name, args, device):
    return CASES[name][1](*args, device)


def arrays_of(result):
    """The arrays of a result (an array, a tuple, a dict), in order."""
    if isinstance(result, dict):
        return [a for v in result.values() for a in arrays_of(v)]
    if isinstance(result, tuple):
        return [a for v in result for a in arrays_of(v)]
    if isinstance(result, (int, np.integer)):
        return []
    return [result]


def same(got, want, to_host, kind):
    """``got`` (arrays of ``kind``) equals ``want`` (the NumPy call's result): type, dtype,
    shape and values, through tuples (namedtuples too) and dicts."""
    if isinstance(want, dict):
        assert list(got) == list(want)
        for k in want:
            same(got[k], want[k], to_host, kind)
    elif isinstance(want, tuple):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w, to_host, kind)
    elif isinstance(want, np.ndarray):
        assert isinstance(got, kind), type(got)
        host = to_host(got)
        assert host.dtype == want.dtype and host.shape == want.shape
        np.testing.assert_array_equal(host, want)
    else:
        assert got == want


def cupy_same(cp, got, want):
    same(got, want, cp.asnumpy, cp.ndarray)


def to_cupy(cp, args):
    return tuple(cp.asarray(a) for a in args)


@pytest.mark.parametrize("name", sorted(CASES))
def test_cupy_in_cupy_out_equals_numpy(cp, name):
    args = CASES[name][0]
    want = call(name, args, "cuda")
    x = to_cupy(cp, args)
    before = [cp.asnumpy(a) for a in x]
    for device in ["cuda", "auto"]:
        cupy_same(cp, call(name, x, device), want)
    for a, b in zip(x, before):
        np.testing.assert_array_equal(cp.asnumpy(a), b)


def is_device_memory(cp, ptr):
    return cp.cuda.runtime.pointerGetAttributes(ptr).type == cp.cuda.runtime.memoryTypeDevice


@pytest.mark.parametrize("name", ON_DEVICE)
def test_no_host_copy_by_pointer(cp, name):
    x = to_cupy(cp, CASES[name][0])
    got = call(name, x, "cuda")
    read = _core._last_device_input()
    assert is_device_memory(cp, read)
    if name not in NOT_IN_PLACE:
        assert read == x[0].data.ptr, "the op read a copy of its input"
    for a in arrays_of(got):
        if a.size < 64:
            continue  # orientation_map's spectrum and angles: small tables copied up
        assert is_device_memory(cp, a.data.ptr)
        assert a.data.ptr != x[0].data.ptr
        # CuPy wraps the extension's buffer (its owner), no copy into CuPy's pool.
        assert isinstance(a.data.mem, cp.cuda.memory.UnownedMemory), type(a.data.mem)


VIEWS = {
    "step": lambda xp, a: a[::2, ::3],
    "reversed": lambda xp, a: a[:, ::-1],
    "fortran": lambda xp, a: xp.asfortranarray(a),
    "transposed": lambda xp, a: a.T if a.ndim == 2 else a.transpose(1, 0, 2),
}


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("name", sorted(CASES))
def test_non_contiguous_cupy_views(cp, name, view):
    if name == "felzenszwalb_channels_first" and view in ("transposed", "step"):
        pytest.skip("the channel axis would move or lose channels")
    args = CASES[name][0]
    host = tuple(VIEWS[view](np, a) for a in args)
    x = tuple(VIEWS[view](cp, a) for a in to_cupy(cp, args))
    assert not x[0].flags.c_contiguous
    cupy_same(cp, call(name, x, "cuda"), call(name, host, "cuda"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_device_cpu_with_a_cupy_array_is_value_error(cp, name):
    with pytest.raises(ValueError, match='device="cpu" with a CUDA array'):
        call(name, to_cupy(cp, CASES[name][0]), "cpu")


def torch_tensor(torch, a):
    try:
        return torch.as_tensor(a, device="cuda")
    except TypeError as e:
        pytest.skip(f"PyTorch cannot hold {a.dtype} ({e})")


@pytest.mark.parametrize("name", sorted(CASES))
def test_torch_in_torch_out(cp, torch, name):
    args = CASES[name][0]
    want = call(name, args, "cuda")
    t = tuple(torch_tensor(torch, a) for a in args)

    def to_host(g):
        assert g.device == t[0].device
        return g.cpu().numpy()

    same(call(name, t, "cuda"), want, to_host, torch.Tensor)
    if t[0].dtype.is_floating_point:
        g = t[0].clone().requires_grad_(True)
        same(call(name, (g,) + t[1:], "cuda"), want, to_host, torch.Tensor)
    if name == "felzenszwalb_channels_first":
        return
    # A non-contiguous view (PyTorch has no negative steps).
    host = tuple(a[::2, ::3] for a in args)
    view = tuple(a[::2, ::3] for a in t)
    assert not view[0].is_contiguous()
    same(call(name, view, "cuda"), call(name, host, "cuda"), to_host, torch.Tensor)


def test_torch_input_on_a_side_stream(cp, torch):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        t = torch.as_tensor(GRAY, device="cuda")
        for _ in range(20):  # pending work on the side stream the op must wait for
            t = (t.to(torch.int32) * 3 // 3).to(torch.uint8)
        got = morphology.area_opening(t, 30)
    s.synchronize()
    np.testing.assert_array_equal(got.cpu().numpy(), morphology.area_opening(GRAY, 30))


def test_cupy_input_on_a_non_blocking_stream(cp):
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x = cp.asarray(np.tile(GRAY, (4, 4)))
        for _ in range(20):  # pending work on the stream the interface names
            x = (x.astype(cp.int32) * 3 // 3).astype(cp.uint8)
        got = morphology.area_closing(x, 30)
    s.synchronize()
    want = morphology.area_closing(np.tile(GRAY, (4, 4)), 30, device="cuda")
    np.testing.assert_array_equal(cp.asnumpy(got), want)


class DlpackOnly:
    """A CUDA array that only speaks DLPack (as JAX's do)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, stream=None, **kwargs):
        return self._a.__dlpack__(stream=stream, **kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_only_objects_go_through_cupy(cp):
    got = morphology.area_opening(DlpackOnly(cp.asarray(GRAY)), 30)
    assert isinstance(got, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(got), morphology.area_opening(GRAY, 30, device="cuda"))


def test_empty_arrays(cp):
    for shape in [(0, 5), (4, 0)]:
        got = morphology.area_opening(cp.zeros(shape, cp.uint8), 30)
        assert isinstance(got, cp.ndarray) and got.shape == shape and got.dtype == cp.uint8
        labels, n = measure.label(cp.zeros(shape, bool), return_num=True)
        assert isinstance(labels, cp.ndarray) and labels.dtype == cp.int32 and n == 0


def free_memory(cp):
    gc.collect()
    cp.get_default_memory_pool().free_all_blocks()
    cp.cuda.Device().synchronize()
    return cp.cuda.runtime.memGetInfo()[0]


def test_results_outlive_their_inputs_and_are_freed(cp):
    big = np.tile(GRAY, (8, 8))
    want = morphology.area_opening(big, 30, device="cuda")[:256, :256]
    morphology.area_opening(cp.asarray(big), 30)  # warm-up
    free_before = free_memory(cp)
    for _ in range(100):
        x = cp.asarray(big)
        r = morphology.area_opening(x, 30)
        view = r[:256, :256]
        del x, r
        gc.collect()
        # The view keeps the result's memory alive, and CuPy reads it on its own stream.
        np.testing.assert_array_equal(cp.asnumpy(view + 0), want)
        del view
    # 100 results of 4 MiB were freed (a loose bound: 400 MiB if none were).
    assert free_memory(cp) > free_before - 128 * 2**20


def test_a_second_device_is_refused(cp):
    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("one CUDA device")
    with cp.cuda.Device(1):
        x = cp.asarray(GRAY)
    with pytest.raises(ValueError, match="device 1"):
        morphology.area_opening(x, 30)


# No image-sized copy across the bus, seen by CUPTI (all contexts of the process): 1-Mpixel
# images; the reads allowed are the small tables (counts, the segmentation's round counters of
# ~128 kB, the spectrum) in all under half a byte a pixel.

BIG = np.tile(GRAY, (4, 4))
BIG_CASES = {
    "area_opening_u8": (BIG,),
    "area_opening_u16": (to_u16(BIG),),
    "attribute_closing_u16": (to_u16(BIG),),
    "label_bool": (BIG > 128,),
    "label_u8": (((BIG > 128) * 7).astype(np.uint8),),
    "felzenszwalb_rgb": (np.ascontiguousarray(np.stack([BIG, BIG.T, BIG[::-1]], axis=-1)),),
    "felzenszwalb_gray": (BIG,),
    "linear_opening_u8": (BIG,),
    "linear_closing_u16": (to_u16(BIG),),
    "orientation_map_u8": (BIG,),
}
SMALL = 512 * 1024


def memcpy_bytes(torch, run, path):
    """Bytes each kind of memcpy (HtoD, DtoH, DtoD) moved while ``run()`` ran, and how many
    memcpy activities the profiler recorded."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    prof.export_chrome_trace(str(path))
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    moved = {"HtoD": 0, "DtoH": 0, "DtoD": 0}
    count = 0
    for ev in events:
        name = str(ev.get("name", ""))
        if not name.startswith("Memcpy"):
            continue
        count += 1
        for kind in moved:
            if kind in name:
                moved[kind] += int(ev.get("args", {}).get("bytes", 0))
    return moved, count


@pytest.mark.parametrize("name", sorted(BIG_CASES))
def test_no_image_sized_memcpy(cp, torch, name, tmp_path):
    args = BIG_CASES[name]
    pixels = args[0].shape[0] * args[0].shape[1]
    assert pixels >= 2 * SMALL
    x = to_cupy(cp, args)
    call(name, x, "cuda")  # warm-up: CuPy's kernels, the extension's context
    # The control: the NumPy call uploads and downloads images, and the profiler sees it.
    control, seen = memcpy_bytes(torch, lambda: call(name, args, "cuda"), tmp_path / "numpy.json")
    if seen == 0:
        pytest.skip("the torch profiler (CUPTI) records no memcpy in this process")
    assert control["HtoD"] >= pixels and control["DtoH"] >= pixels, control
    results = []
    moved, _ = memcpy_bytes(torch, lambda: results.append(call(name, x, "cuda")),
                            tmp_path / "cupy.json")
    assert moved["HtoD"] + moved["DtoH"] <= SMALL, moved
    assert moved["DtoD"] <= SMALL, moved  # the input read in place, the results not copied
    cupy_same(cp, results[0], call(name, args, "cuda"))
