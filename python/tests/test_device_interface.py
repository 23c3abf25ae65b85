"""CUDA array inputs without a GPU: how morphoscope recognises a device array, and the checks
it makes before touching the device (shape, dtype, device, contiguity, the interface itself),
with fake objects that expose ``__cuda_array_interface__`` or DLPack. The GPU behaviour is
test_device_arrays.py's (run on a GPU machine).

A fake array's pointer is not device memory: where CUDA is available, a call that passes every
check reaches the extension, which refuses the pointer (``ValueError``); without CUDA it stops
at the CUDA check (``RuntimeError``)."""

import numpy as np
import pytest

import morphoscope
from morphoscope import _core, _device, measure, morphology, orientation, segmentation

CUDA = morphoscope.cuda_available()


class FakeCuda:
    """An object with ``__cuda_array_interface__`` (and, unless ``device`` is None,
    ``__dlpack_device__``), pointing at nothing."""

    def __init__(self, shape, typestr="|u1", strides=None, device=(2, 0), stream=None,
                 mask=None, version=3, ptr=0xDEAD0000):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape),
            "typestr": typestr,
            "data": (ptr, False),
            "strides": strides,
            "version": version,
            "stream": stream,
        }
        if mask is not None:
            self.__cuda_array_interface__["mask"] = mask
        self._device = device

    def __getattr__(self, name):
        if name == "__dlpack_device__" and self.__dict__.get("_device") is not None:
            return lambda: self._device
        raise AttributeError(name)


class FakeDlpack:
    """An object that only speaks DLPack, on device ``(kind, id)``."""

    def __init__(self, kind, device_id=0):
        self._device = (kind, device_id)

    def __dlpack__(self, stream=None):
        raise AssertionError("not converted in these tests")

    def __dlpack_device__(self):
        return self._device


GRAY = FakeCuda((40, 60))
U16 = FakeCuda((40, 60), "<u2")
F32 = FakeCuda((40, 60), "<f4")
RGB = FakeCuda((40, 60, 3))
LABELS = FakeCuda((40, 60), "<i8")

# Every function on a valid fake input, with the device argument.
CALLS = {
    "area_opening": lambda x, d: morphology.area_opening(x, 20, device=d),
    "area_closing": lambda x, d: morphology.area_closing(x, 20, device=d),
    "attribute_opening": lambda x, d: morphology.attribute_opening(x, "height", 9, device=d),
    "attribute_closing": lambda x, d: morphology.attribute_closing(x, "volume", 90, device=d),
    "label": lambda x, d: measure.label(x, device=d),
    "regionprops_table": lambda x, d: measure.regionprops_table(LABELS, x, device=d),
    "felzenszwalb": lambda x, d: segmentation.felzenszwalb(RGB, 100, device=d),
    "linear_opening": lambda x, d: orientation.linear_opening(x, 9, 30, device=d),
    "linear_closing": lambda x, d: orientation.linear_closing(x, 9, 30, device=d),
    "orientation_map": lambda x, d: orientation.orientation_map(x, 9, 8, device=d),
}


def test_what_counts_as_a_device_array():
    assert _device.from_object(np.zeros((2, 2), np.uint8)) is None
    assert _device.from_object([[1, 2], [3, 4]]) is None
    assert _device.from_object(FakeDlpack(_device.KDL_CPU)) is None
    a = _device.from_object(FakeCuda((3, 5), "<u2"))
    assert isinstance(a, _device.CudaArray)
    assert (a.shape, a.ndim, a.dtype, a.size, a.library) == ((3, 5), 2, np.uint16, 15, "cai")
    assert _device.from_object(FakeCuda((3, 5), device=None)).device_id is None


def test_a_cpu_torch_tensor_takes_the_numpy_path():
    torch = pytest.importorskip("torch")
    assert _device.from_object(torch.zeros((2, 2), dtype=torch.uint8)) is None


@pytest.mark.parametrize("name", sorted(CALLS))
def test_device_cpu_with_a_cuda_array_is_value_error(name):
    x = U16 if name == "regionprops_table" else GRAY
    with pytest.raises(ValueError, match='device="cpu" with a CUDA array'):
        CALLS[name](x, "cpu")


@pytest.mark.parametrize("name", sorted(CALLS))
def test_other_devices_are_value_error(name):
    x = FakeCuda((40, 60), "<u2" if name == "regionprops_table" else "|u1", device=(2, 1))
    if name == "felzenszwalb":
        with pytest.raises(ValueError, match="device 1; morphoscope runs on device 0 only"):
            segmentation.felzenszwalb(FakeCuda((40, 60, 3), device=(2, 1)))
        return
    with pytest.raises(ValueError, match="device 1; morphoscope runs on device 0 only"):
        CALLS[name](x, "auto")


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("device", ["auto", "cuda"])
def test_without_cuda_a_device_array_is_runtime_error(name, device):
    x = U16 if name == "regionprops_table" else GRAY
    if CUDA and name in ("label", "regionprops_table"):
        pytest.skip("CuPy reads these fake arrays first: test_device_arrays.py has real ones")
    if CUDA:
        # The checks pass; the extension refuses the fake pointer.
        with pytest.raises(ValueError, match="not memory CUDA knows|not device memory"):
            CALLS[name](x, device)
    else:
        with pytest.raises(RuntimeError, match="CUDA is unavailable"):
            CALLS[name](x, device)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_bad_device_name_is_value_error(name):
    x = U16 if name == "regionprops_table" else GRAY
    with pytest.raises(ValueError, match="device"):
        CALLS[name](x, "gpu")


def same_error(call, fake, host, kind):
    """``call`` raises the same ``kind`` and message on the fake CUDA array as on ``host``."""
    with pytest.raises(kind) as on_device:
        call(fake)
    with pytest.raises(kind) as on_host:
        call(host)
    assert str(on_device.value) == str(on_host.value)


@pytest.mark.parametrize(
    "call",
    [
        lambda x: morphology.area_opening(x, 20),
        lambda x: morphology.attribute_closing(x, "area", 20),
        lambda x: orientation.linear_opening(x, 9, 0),
        lambda x: orientation.orientation_map(x, 9),
        lambda x: measure.label(x),
        lambda x: measure.regionprops_table(x),
    ],
)
def test_shape_errors_are_the_numpy_ones(call):
    same_error(call, FakeCuda((2, 3, 4)), np.zeros((2, 3, 4), np.uint8), ValueError)
    same_error(call, FakeCuda((7,)), np.zeros(7, np.uint8), ValueError)


def test_dtype_errors_are_the_numpy_ones():
    for typestr, dtype in [("<f4", np.float32), ("<i2", np.int16), ("|b1", bool)]:
        same_error(lambda x: morphology.area_opening(x, 20), FakeCuda((4, 5), typestr),
                   np.zeros((4, 5), dtype), TypeError)
    for typestr, dtype in [("<f8", np.float64), ("<i4", np.int32)]:
        same_error(lambda x: orientation.linear_closing(x, 9, 0), FakeCuda((4, 5), typestr),
                   np.zeros((4, 5), dtype), TypeError)
    for typestr, dtype in [("<u2", np.uint16), ("<f4", np.float32)]:
        same_error(lambda x: segmentation.felzenszwalb(x), FakeCuda((4, 5, 3), typestr),
                   np.zeros((4, 5, 3), dtype), TypeError)
    for typestr, dtype in [("|b1", bool), ("<f4", np.float32)]:
        same_error(lambda x: measure.regionprops_table(x), FakeCuda((4, 5), typestr),
                   np.zeros((4, 5), dtype), TypeError)
    same_error(
        lambda x: measure.regionprops_table(
            LABELS if isinstance(x, FakeCuda) else np.zeros((40, 60), np.int64), x
        ),
        FakeCuda((40, 60), "<f4"),
        np.zeros((40, 60), np.float32),
        TypeError,
    )


def test_felzenszwalb_shape_errors_are_the_numpy_ones():
    same_error(lambda x: segmentation.felzenszwalb(x), FakeCuda((2, 3, 4, 5)),
               np.zeros((2, 3, 4, 5), np.uint8), ValueError)
    same_error(lambda x: segmentation.felzenszwalb(x, channel_axis=None), FakeCuda((2, 3, 3)),
               np.zeros((2, 3, 3), np.uint8), ValueError)
    same_error(lambda x: segmentation.felzenszwalb(x, min_size=-1), FakeCuda((4, 5, 3)),
               np.zeros((4, 5, 3), np.uint8), ValueError)


def test_label_argument_errors_come_first():
    with pytest.raises(ValueError, match="Connectivity"):
        measure.label(GRAY, connectivity=3)


def test_regionprops_table_takes_both_images_on_one_side():
    with pytest.raises(TypeError, match="must both be NumPy arrays or both CUDA arrays"):
        measure.regionprops_table(LABELS, np.zeros((40, 60), np.uint8))
    with pytest.raises(TypeError, match="must both be NumPy arrays or both CUDA arrays"):
        measure.regionprops_table(np.zeros((40, 60), np.int64), GRAY)
    with pytest.raises(ValueError, match="must match"):
        measure.regionprops_table(LABELS, FakeCuda((40, 61)))


def test_dlpack_objects():
    with pytest.raises(ValueError, match="device 3; morphoscope runs on device 0 only"):
        morphology.area_opening(FakeDlpack(_device.KDL_CUDA, 3))
    with pytest.raises(TypeError, match="DLPack device type 10"):
        morphology.area_opening(FakeDlpack(10))
    if _device._module("cupy") is None:
        with pytest.raises(TypeError, match="cupy.from_dlpack"):
            morphology.area_opening(FakeDlpack(_device.KDL_CUDA, 0))


def test_masked_arrays_are_refused():
    with pytest.raises(TypeError, match="masked"):
        morphology.area_opening(FakeCuda((4, 5), mask=object()))


def test_contiguity():
    assert _device._c_contiguous((4, 5), None, 1)
    assert _device._c_contiguous((4, 5), (5, 1), 1)
    assert _device._c_contiguous((4, 5, 1), (10, 2, 0), 2)
    assert _device._c_contiguous((1, 5), (999, 4), 4)
    assert _device._c_contiguous((0, 5), (1, 1), 1)
    assert not _device._c_contiguous((4, 5), (1, 4), 1)
    assert not _device._c_contiguous((4, 5), (10, 2), 1)
    assert not _device._c_contiguous((4, 5), (-5, 1), 1)
    contiguous = _device.from_object(FakeCuda((4, 5), strides=(5, 1)))
    assert contiguous.contiguous() is contiguous
    strided = _device.from_object(FakeCuda((4, 5), strides=(10, 2)))
    if _device._module("cupy") is None:
        with pytest.raises(TypeError, match="through CuPy"):
            strided.contiguous()
    with pytest.raises(TypeError, match="byte order"):
        _device.from_object(FakeCuda((4, 5), ">u2")).contiguous()


# The extension reads the interface itself (for any caller of morphoscope._core): these run
# before any CUDA call, so they are checked here.


def core_filter(x, device="auto"):
    return _core.attribute_filter(x, "max", "area", 10.0, 4, device)


def test_the_extension_checks_the_interface():
    with pytest.raises(ValueError, match="C-contiguous"):
        core_filter(FakeCuda((4, 5), strides=(1, 4)))
    with pytest.raises(ValueError, match="stream"):
        core_filter(FakeCuda((4, 5), stream=0))
    with pytest.raises(TypeError, match="masked"):
        core_filter(FakeCuda((4, 5), mask=object()))
    with pytest.raises(ValueError, match='device="cpu" with a CUDA array'):
        core_filter(FakeCuda((4, 5)), "cpu")
    if CUDA:
        with pytest.raises(TypeError, match="uint8 or uint16 images; the CUDA array is <f4"):
            core_filter(FakeCuda((4, 5), "<f4"))
        with pytest.raises(ValueError, match="not memory CUDA knows|not device memory"):
            core_filter(FakeCuda((4, 5)))
    else:
        with pytest.raises(RuntimeError, match="CUDA is unavailable"):
            core_filter(FakeCuda((4, 5)))
    bad = FakeCuda((4, 5))
    bad.__cuda_array_interface__ = [1, 2]
    with pytest.raises(TypeError, match="must be a dict"):
        core_filter(bad)
    missing = FakeCuda((4, 5))
    del missing.__cuda_array_interface__["typestr"]
    with pytest.raises(TypeError, match="typestr"):
        core_filter(missing)


def test_device_array_type_is_exported_for_isinstance():
    assert _core.DeviceArray.__name__ == "DeviceArray"
    with pytest.raises(TypeError):
        _core.DeviceArray()
    assert isinstance(_core._last_device_input(), int)
