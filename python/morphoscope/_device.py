"""CUDA device arrays in and out of morphoscope's functions, with no host round trip.

Accepted: objects with ``__cuda_array_interface__`` (CuPy arrays, Numba device arrays),
PyTorch CUDA tensors, and objects that only speak DLPack with ``__dlpack_device__()`` ==
(kDLCUDA, 0), which are taken through ``cupy.from_dlpack`` (zero-copy; CuPy must be
installed). Only device 0 is supported (the extension's CUDA context, the device's primary
context, which CuPy and PyTorch use too).

:class:`CudaArray` is such an input as the functions see it: its shape and dtype (checked with
the NumPy path's rules and messages), made C-contiguous on the device with its own library when
it is not, and handed to the extension as its interface (pointer, shape, dtype and the producer's
stream, which the extension waits for on the device). Results come back as arrays of the
input's library: ``cupy.asarray`` / ``torch.as_tensor`` of the extension's ``DeviceArray``,
which they keep alive as the owner of the memory (no copy).
"""

import importlib

import numpy as np

from . import _core

# DLPack device types (dlpack.h).
KDL_CPU = 1
KDL_CUDA = 2

_ACCEPTED = (
    "NumPy arrays, or CUDA arrays on device 0: CuPy arrays, PyTorch CUDA tensors, objects with "
    "__cuda_array_interface__, or DLPack objects on CUDA (through CuPy)"
)


def _module(name):
    """The module ``name`` when it is importable, else None."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _root_module(x):
    return type(x).__module__.split(".", 1)[0]


class _Interface:
    """What the extension reads: ``__cuda_array_interface__`` (version 3, with the producer's
    stream), holding the array it describes alive."""

    __slots__ = ("__cuda_array_interface__", "owner")

    def __init__(self, owner, interface):
        self.owner = owner
        self.__cuda_array_interface__ = interface


def _torch_typestr(dtype):
    """The interface's typestr of a PyTorch dtype (PyTorch's own ``__cuda_array_interface__``
    lacks bool and uint16 before 2.x releases that added them), None for one NumPy lacks."""
    torch = _module("torch")
    names = {
        "bool": "|b1", "uint8": "|u1", "int8": "|i1", "uint16": "<u2", "int16": "<i2",
        "uint32": "<u4", "int32": "<i4", "uint64": "<u8", "int64": "<i8", "float16": "<f2",
        "float32": "<f4", "float64": "<f8",
    }
    for name, typestr in names.items():
        if getattr(torch, name, None) == dtype:
            return typestr
    return None


def _torch_interface(t):
    """``__cuda_array_interface__`` (version 3) of a PyTorch CUDA tensor, built from the
    tensor itself, with its current stream."""
    typestr = _torch_typestr(t.dtype)
    if typestr is None:
        raise TypeError(f"{t.dtype} tensors have no NumPy dtype; morphoscope takes {_ACCEPTED}")
    itemsize = t.element_size()
    strides = None if t.is_contiguous() else tuple(s * itemsize for s in t.stride())
    torch = _module("torch")
    stream = torch.cuda.current_stream(t.device).cuda_stream
    return {
        "shape": tuple(t.shape),
        "typestr": typestr,
        "data": (t.data_ptr() if t.numel() > 0 else 0, False),
        "strides": strides,
        "version": 3,
        # 0 is PyTorch's legacy default stream, which the interface names 1.
        "stream": stream if stream != 0 else 1,
    }


def _c_contiguous(shape, strides, itemsize):
    if strides is None or 0 in shape:
        return True
    expected = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True


def _check_ordinal(device_id):
    if device_id is not None and device_id != 0:
        raise ValueError(
            f"the CUDA array is on device {device_id}; morphoscope runs on device 0 only (its "
            "CUDA context): copy it to device 0 first (e.g. tensor.to('cuda:0'), or "
            "cupy.asarray(a) under cupy.cuda.Device(0))"
        )


class CudaArray:
    """A CUDA array given to a function: ``array`` in its own library (``library`` "cupy",
    "torch", or "cai" for another ``__cuda_array_interface__`` object), with the ``shape``,
    ``ndim`` and ``dtype`` (a NumPy dtype) the argument checks read."""

    def __init__(self, array, library, interface, device_id=None):
        _check_ordinal(device_id)
        self.array = array
        self.library = library
        self.device_id = device_id
        if interface.get("mask") is not None:
            raise TypeError(
                "masked CUDA arrays (__cuda_array_interface__ with a mask) are not taken"
            )
        self.shape = tuple(int(n) for n in interface["shape"])
        self.ndim = len(self.shape)
        try:
            self.dtype = np.dtype(interface["typestr"])
        except TypeError as e:
            raise TypeError(
                f"the CUDA array's typestr {interface['typestr']!r} is not a NumPy dtype"
            ) from e
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self.interface = interface

    def __repr__(self):
        return f"CudaArray({self.library}, shape={self.shape}, dtype={self.dtype})"

    # --- the input's library -------------------------------------------------------------

    def _cupy(self):
        cupy = _module("cupy")
        if cupy is None:
            raise TypeError(
                f"{type(self.array).__name__} is a CUDA array that morphoscope handles through "
                "CuPy (to make it contiguous, compare or move axes), which is not installed: "
                "install CuPy, or pass a C-contiguous CuPy array or PyTorch tensor"
            )
        return cupy

    def native(self):
        """The array as a CuPy array or a PyTorch tensor (another ``__cuda_array_interface__``
        object is seen through CuPy, zero-copy)."""
        if self.library in ("cupy", "torch"):
            return self
        cupy = self._cupy()
        return from_object(cupy.asarray(self.array))

    def with_array(self, array):
        """Another array of the same library (a result of an operation on this one)."""
        return from_object(array)

    def contiguous(self):
        """This array C-contiguous, in native byte order: itself, or a copy made on the device
        by its own library."""
        if not self.dtype.isnative:
            raise TypeError(f"CUDA arrays in {self.dtype.str} byte order are not taken")
        if _c_contiguous(self.shape, self.interface.get("strides"), self.dtype.itemsize):
            return self
        n = self.native()
        if n.library == "torch":
            return n.with_array(n.array.contiguous())
        return n.with_array(self._cupy().ascontiguousarray(n.array))

    def moveaxis(self, source, destination):
        """``np.moveaxis`` on the device (a view)."""
        n = self.native()
        if n.library == "torch":
            return n.with_array(n.array.movedim(source, destination))
        return n.with_array(self._cupy().moveaxis(n.array, source, destination))

    def expand_last(self):
        """A trailing axis of length 1 (``a[..., np.newaxis]``, a view)."""
        n = self.native()
        return n.with_array(n.array[..., None])

    # --- to the extension and back ------------------------------------------------------

    def handle(self):
        """What the extension reads: this array's interface with the producer's stream (a
        PyTorch tensor's current stream, taken now; CuPy and others name theirs)."""
        if self.library == "torch":
            return _Interface(self.array, _torch_interface(self.array))
        return _Interface(self.array, dict(self.interface))

    def wrap(self, result):
        """A result of the extension as this array's library: ``DeviceArray`` in place, NumPy
        arrays (small tables, host-computed results) copied to the device, tuples element by
        element, anything else unchanged."""
        if isinstance(result, tuple):
            return tuple(self.wrap(r) for r in result)
        if isinstance(result, _core.DeviceArray):
            cupy = _module("cupy")
            if self.library == "torch":
                torch = _module("torch")
                try:
                    return torch.as_tensor(result, device=self.array.device)
                except TypeError:
                    # A PyTorch that reads no such typestr from the interface: DLPack, through
                    # CuPy (zero-copy both ways).
                    if cupy is None:
                        raise
                    return torch.from_dlpack(cupy.asarray(result))
            return result if cupy is None else cupy.asarray(result)
        if isinstance(result, np.ndarray):
            return self.from_host(result)
        return result

    def from_host(self, host):
        """A NumPy array copied to this array's library and device."""
        if self.library == "torch":
            torch = _module("torch")
            return torch.as_tensor(host, device=self.array.device)
        return self._cupy().asarray(host)

    def to_host(self):
        """This array read to the host (a NumPy array): for the computations the library only
        does on the host."""
        n = self.native()
        if n.library == "torch":
            return n.array.detach().cpu().numpy()
        return self._cupy().asnumpy(n.array)

    def call(self, fn, device):
        """``fn(array, device)`` through the extension on the device, its result wrapped
        (:meth:`wrap`); an empty array goes through the NumPy path (nothing to copy)."""
        require_cuda(device)
        if self.size == 0:
            return self.wrap(fn(np.zeros(self.shape, self.dtype), "cpu"))
        return self.wrap(fn(self.contiguous().handle(), device))


def from_object(x):
    """``x`` as a :class:`CudaArray` when it is a CUDA array, None when it is a host array
    (NumPy, lists, a CPU tensor: the NumPy path). ``ValueError`` for a device other than 0,
    ``TypeError`` for a device array morphoscope cannot read."""
    if isinstance(x, (np.ndarray, np.generic, list, tuple, int, float, bool)) or x is None:
        return None
    if _root_module(x) == "torch" and hasattr(x, "is_cuda"):
        if not x.is_cuda:
            return None
        if x.requires_grad:
            x = x.detach()
        return CudaArray(x, "torch", _torch_interface(x), x.device.index)
    try:
        interface = x.__cuda_array_interface__
    except AttributeError:
        interface = None
    if interface is not None:
        device_id = None
        if hasattr(x, "__dlpack_device__"):
            kind, device_id = x.__dlpack_device__()
            if kind != KDL_CUDA:
                device_id = None
        library = "cupy" if _root_module(x) == "cupy" else "cai"
        return CudaArray(x, library, interface, device_id)
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        kind, device_id = x.__dlpack_device__()
        if kind == KDL_CPU:
            return None
        if kind != KDL_CUDA:
            raise TypeError(
                f"{type(x).__name__} is on DLPack device type {int(kind)}; morphoscope takes "
                + _ACCEPTED
            )
        _check_ordinal(device_id)
        cupy = _module("cupy")
        if cupy is None:
            raise TypeError(
                f"{type(x).__name__} is a DLPack array on CUDA, which morphoscope takes "
                "through cupy.from_dlpack, and CuPy is not installed; it takes " + _ACCEPTED
            )
        return from_object(cupy.from_dlpack(x))
    return None


def require_cuda(device):
    """Checks ``device`` for a CUDA array: "auto" or "cuda" with CUDA available; "cpu" is
    ``ValueError`` (the CPU cannot read device memory), CUDA missing ``RuntimeError``."""
    if device not in ("auto", "cuda", "cpu"):
        raise ValueError(f'device={device!r}: one of "auto", "cuda", "cpu"')
    if device == "cpu":
        raise ValueError(
            'device="cpu" with a CUDA array: pass device="auto" or "cuda" to compute on the '
            "device, or a NumPy array (e.g. cupy.asnumpy(a), tensor.cpu().numpy()) for the CPU"
        )
    if not _core.cuda_available():
        raise RuntimeError(
            "the input is a CUDA array but morphoscope's CUDA is unavailable (no driver, "
            "NVRTC or device; morphoscope.cuda_available() is False): pass a NumPy array"
        )
