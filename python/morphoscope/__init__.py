"""morphoscope: mathematical morphology on NumPy arrays, on the CPU or with CUDA.

The modules follow scikit-image's layout and signatures for what both compute, with the same
results bit for bit on the CPU:

- :mod:`morphoscope.morphology`: ``area_opening``, ``area_closing``, ``attribute_opening``,
  ``attribute_closing`` (max-tree filters, 8- and 16-bit).
- :mod:`morphoscope.measure`: ``label``, ``regionprops_table``.
- :mod:`morphoscope.segmentation`: ``felzenszwalb``.
- :mod:`morphoscope.orientation`: ``linear_opening``, ``linear_closing``, ``orientation_map``
  (no scikit-image counterpart).
- :mod:`morphoscope.video`: ``open``, the analysed frames of a video source with the settings
  of ``morphoscope run`` (``morphoscope.open``).

Every function takes ``device="auto"|"cuda"|"cpu"``: ``auto`` runs on CUDA when a device, the
driver and NVRTC are present, else on the CPU; ``cuda`` raises ``RuntimeError`` when CUDA is
unavailable. The GIL is released while an op computes. CUDA arrays (CuPy, PyTorch, DLPack) are
computed on the device and come back as arrays of their library. See docs/python.md.
"""

from . import measure, morphology, orientation, segmentation, video
from ._core import cuda_available
# morphoscope.open; not in __all__, so that `from morphoscope import *` keeps the builtin.
from .video import open  # noqa: A004

__all__ = ["cuda_available", "measure", "morphology", "orientation", "segmentation", "video"]
