"""Video: the analysed frames of a source, one at a time, with the settings of ``morphoscope run``.

::

    import morphoscope

    with morphoscope.open("rtsp://cam/live", settings={"cca.threshold": "otsu"}) as video:
        for frame in video:
            print(frame.index, frame.timestamp, frame.summary["cca"]["components"])

The stream is the library's own (the code ``morphoscope run`` runs: the same sources, settings,
opening, reconnecting and finishing) on a thread of its own; iterating waits for the next
analysed frame with the GIL released. See docs/python.md ("Video").
"""

import numbers
import os

from . import _core

__all__ = ["Frame", "Video", "open"]


class Frame:
    """One analysed frame.

    - ``index``: the frame's number from the source (0, 1, 2, … for a file).
    - ``timestamp``: the source's timestamp in seconds (``float``), ``None`` if it gives none.
    - ``summary``: per analysis its summary, as ``frames.jsonl`` of ``morphoscope run`` writes
      it under ``ops`` (e.g. ``summary["cca"]["components"]``).
    - ``components``: the component table as ``measure.regionprops_table(labels,
      properties=("label", "area", "bbox", "centroid"))`` returns it (same keys and dtypes),
      plus ``track_id`` (``int64``; -1: no confirmed track, or several merged in it). Empty
      arrays when ``cca`` is off.
    - ``tracks``: the tracks (confirmed, merged, lost), a dict of 1D arrays: ``id``, ``age``
      (frames), ``area``, ``centroid-0``/``-1``, ``velocity-0``/``-1`` (pixels a second),
      ``bbox-0..3`` (floats, regionprops' order).
    - ``image``: the frame, ``uint8`` H×W×3 (``None`` for a grey source).
    - ``layers``: with ``open(..., layers=True)``, a dict of arrays: ``gray`` (the grey frame the
      analyses ran on) and each analysis' layer under its name (``maxtree``: the residue,
      ``orientation``: the colour picture, ``segmentation``: the labels); else ``None``.
    """

    __slots__ = ("index", "timestamp", "summary", "components", "tracks", "image", "layers")

    def __init__(self, index, timestamp, summary, components, tracks, image, layers):
        self.index = index
        self.timestamp = timestamp
        self.summary = summary
        self.components = components
        self.tracks = tracks
        self.image = image
        self.layers = layers

    def __repr__(self):
        return (
            f"Frame(index={self.index}, timestamp={self.timestamp}, "
            f"components={len(self.components['label'])}, tracks={len(self.tracks['id'])})"
        )


class Video:
    """A running stream: iterate it for its :class:`Frame` objects. Also a context manager;
    :meth:`close` (or leaving the ``with`` block, or the object being garbage collected) stops
    the stream and waits for its thread."""

    def __init__(self, stream, source):
        self._stream = stream
        self.source = source

    def __iter__(self):
        return self

    def __next__(self):
        fields = self._stream.next()
        if fields is None:
            raise StopIteration
        return Frame(**fields)

    def close(self):
        """Stops the stream (the frames in flight are discarded) and waits for its thread.
        Iterating a closed stream ends at once; closing twice does nothing."""
        self._stream.close()

    @property
    def closed(self):
        """True once closed, or once the end of the stream was read."""
        return self._stream.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        state = "closed" if self.closed else "open"
        return f"<morphoscope.Video {self.source!r} ({state})>"


def _setting(key, value):
    """One ``--set`` argument from a settings dict entry."""
    if not isinstance(key, str):
        raise TypeError(f"settings keys are section.key strings, got {key!r}")
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = value
    elif isinstance(value, numbers.Integral):
        text = str(int(value))
    elif isinstance(value, numbers.Real):
        text = repr(float(value))
    else:
        raise TypeError(
            f"settings[{key!r}] = {value!r}: a str, int, float or bool (as --set {key}=VALUE)"
        )
    return f"{key}={text}"


def open(source, settings=None, *, device="auto", layers=False, config=None, max_frames=None):
    """Opens ``source`` and analyses it as ``morphoscope run SOURCE`` would, handing over each
    analysed frame: returns a :class:`Video` to iterate (and to close, or use in ``with``).

    - ``source``: what ``run`` takes: a file, ``rtsp://…``/``http(s)://…``/``file://…``,
      ``camera[:N]``, ``test[:PATTERN]``, or a pipeline ending in ``appsink name=sink``.
    - ``settings``: ``{"section.key": value}``, each as ``--set section.key=value`` (values
      ``str``, ``int``, ``float`` or ``bool``), applied after ``config``.
    - ``config``: a TOML settings file, as ``--config``.
    - ``device``: ``"auto"`` (``pipeline.backend`` of the settings, ``auto`` unless set: CUDA
      when available), ``"cpu"`` or ``"cuda"`` (as ``--backend``).
    - ``layers``: hand over each frame's layers as arrays (on CUDA read back from the device
      each frame, a cost the stream pays only when asked).
    - ``max_frames``: stop after this many frames, as ``--max-frames``.

    Bad settings or sources raise ``ValueError`` with the CLI's message (a missing file
    ``FileNotFoundError``); a stream that fails (a source lost past its reconnects) raises
    ``RuntimeError`` with its error after its last frame.
    """
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"source must be a str or a path, got {source!r}")
    source = os.fspath(source)
    if settings is None:
        settings = {}
    if not isinstance(settings, dict):
        raise TypeError(f"settings must be a dict of section.key -> value, got {settings!r}")
    sets = [_setting(k, v) for k, v in settings.items()]
    if config is not None:
        config = os.fspath(config)
    if max_frames is not None:
        if isinstance(max_frames, bool) or not isinstance(max_frames, numbers.Integral):
            raise TypeError(f"max_frames must be an integer or None, got {max_frames!r}")
        if max_frames < 1:
            raise ValueError(f"max_frames={max_frames}: at least 1 (or None for every frame)")
        max_frames = int(max_frames)
    stream = _core.open(source, sets, config, device, bool(layers), max_frames)
    return Video(stream, source)
