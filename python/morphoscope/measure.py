"""Labels and region properties, scikit-image's ``skimage.measure`` names and defaults.

``label`` equals scikit-image's on binary images (one foreground value besides the background):
same numbering (raster order of each component's first pixel), dtype (int32 for bool input,
int64 otherwise) and default connectivity (8 neighbours). ``regionprops_table`` computes the
properties of morphoscope's feature pass from exact integer sums.
"""

import numpy as np

from . import _args, _core

__all__ = ["label", "regionprops_table"]


def label(label_image, background=None, return_num=False, connectivity=None, *, device="auto"):
    """Labels the connected components of the pixels that differ from ``background`` (default
    0): 0 for the background, ``1..n`` in raster order of each component's first pixel.
    scikit-image: ``skimage.measure.label`` (same result and dtype).

    ``connectivity`` 1: 4 neighbours, 2 or ``None``: 8. The image must be binary (one value
    besides the background); scikit-image also splits touching regions of different values,
    which morphoscope does not compute (``ValueError``). With ``return_num``, returns
    ``(labels, n)``.
    """
    arr = _args.image_2d(label_image, "label", "label_image")
    if connectivity is not None and not 1 <= connectivity <= 2:
        raise ValueError(
            f"Connectivity for 2D image should be in [1, ..., 2]. Got {connectivity}."
        )
    conn = _args.neighbours(connectivity, 2)
    bg = 0 if background is None else background
    mask = arr != bg
    values = arr[mask]
    if values.size and (values != values[0]).any():
        raise ValueError(
            "morphoscope labels binary images (one value besides the background); label_image "
            "has several (e.g. "
            f"{values[0]!r} and {values[values != values[0]][0]!r}): label the mask of each "
            "value separately"
        )
    labels, num = _core.label(np.ascontiguousarray(mask).view(np.uint8), conn, device)
    if arr.dtype == bool:
        labels = labels.astype(np.int32)
    return (labels, num) if return_num else labels


# scikit-image property → columns of _core.region_sums, in scikit-image's key order.
_COLUMNS = {
    "label": ["label"],
    "area": ["area"],
    "bbox": ["min_row", "min_col", "max_row", "max_col"],
    "centroid": ["centroid_row", "centroid_col"],
    "intensity_mean": ["intensity_mean"],
}
_SUPPORTED = ("label", "area", "bbox", "centroid", "inertia_tensor", "intensity_mean")


def regionprops_table(
    label_image, intensity_image=None, properties=("label", "bbox"), *, separator="-",
    device="auto",
):
    """Properties of the regions of an integer label image (every positive value is one
    region; 0 and negative values are background) as a dict of 1D NumPy arrays, one entry per
    region in label order. scikit-image: ``skimage.measure.regionprops_table`` (same keys,
    dtypes and values).

    ``properties``: any of ``label``, ``area``, ``bbox``, ``centroid``, ``inertia_tensor`` (the
    second-order central moments, scikit-image's ``[[mu_cc, -mu_rc], [-mu_rc, mu_rr]] / area``
    where ``mu_cc`` sums the squared column offsets), ``intensity_mean`` (uint8 or uint16
    ``intensity_image``).
    label, area, bbox, centroid and intensity_mean are bit-identical to scikit-image;
    inertia_tensor agrees to rounding (exact integer sums here, floating-point sums there).
    Computed on the CPU whatever ``device`` (which is still checked).
    """
    if device not in ("auto", "cuda", "cpu"):
        raise ValueError(f'device={device!r}: one of "auto", "cuda", "cpu"')
    if device == "cuda" and not _core.cuda_available():
        raise RuntimeError('device="cuda": CUDA is unavailable; use device="cpu" or "auto"')
    arr = _args.image_2d(label_image, "regionprops_table", "label_image")
    if arr.dtype == bool:
        raise TypeError(
            "Non-integer image types are ambiguous: use morphoscope.measure.label to label the "
            "connected components of label_image, or label_image.astype(np.uint8) to interpret "
            "the True values as a single label."
        )
    if arr.dtype.kind not in "iu":
        raise TypeError("Non-integer label_image types are ambiguous")
    if isinstance(properties, str):
        properties = (properties,)
    for p in properties:
        if p not in _SUPPORTED:
            raise ValueError(
                f"property {p!r} is not computed by morphoscope (one of: {', '.join(_SUPPORTED)})"
            )
    if "intensity_mean" in properties and intensity_image is None:
        raise AttributeError(
            "Attribute 'intensity_mean' unavailable when `intensity_image` has not been "
            "specified."
        )
    labels = np.ascontiguousarray(arr, dtype=np.int64)
    intensity = None
    if intensity_image is not None:
        iarr = _args.image_2d(intensity_image, "regionprops_table", "intensity_image")
        if iarr.shape != arr.shape:
            raise ValueError(
                f"intensity_image has shape {iarr.shape}, label_image {arr.shape}: they must match"
            )
        intensity = _args.unsigned(iarr, "regionprops_table", "intensity_image")
    sums = _core.region_sums(labels, intensity)
    out = {}
    for p in properties:
        if p == "inertia_tensor":
            area = sums["area"]
            with np.errstate(invalid="ignore", divide="ignore"):
                t00 = sums["mu20"] / area
                t01 = -sums["mu11"] / area
                t11 = sums["mu02"] / area
            out[f"inertia_tensor{separator}0{separator}0"] = t00
            out[f"inertia_tensor{separator}0{separator}1"] = t01
            out[f"inertia_tensor{separator}1{separator}0"] = t01.copy()
            out[f"inertia_tensor{separator}1{separator}1"] = t11
            continue
        cols = _COLUMNS[p]
        if len(cols) == 1:
            out[p] = sums[cols[0]]
        else:
            for i, c in enumerate(cols):
                out[f"{p}{separator}{i}"] = sums[c]
    return out
