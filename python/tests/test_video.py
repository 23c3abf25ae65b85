"""morphoscope.open: the frames of the library's own stream (CPU backend), checked against the
frames.jsonl and components.jsonl that `morphoscope run` writes for the same source and
settings, against regionprops_table on the frame's grey layer, and for its life: close, break,
garbage collection, Ctrl+C, errors with the CLI's messages.

The CLI is $MORPHOSCOPE_BIN (scripts/test-python.sh builds it), else target/debug/morphoscope;
without it the comparisons with `run` skip. The sample clip comes from assets/samples (skipped
when absent, unless MORPHOSCOPE_REQUIRE_SAMPLES=1)."""

import gc
import json
import os
import re
import signal
import subprocess
import threading
import time

import numpy as np
import pytest
import skimage.measure
from conftest import ROOT, SAMPLES, assert_same_segments

import morphoscope
from morphoscope import measure
from morphoscope import video as video_module

# A 96x64 ball on black, 30 fps, thresholded frame by frame (one component a frame); the
# analyses that cost most are off.
BALL = "test:ball"
QUICK = {
    "source.test.width": 96,
    "source.test.height": 64,
    "source.test.frames": 12,
    "cca.source": "frame",
    "orientation.enabled": False,
    "segmentation.enabled": False,
}
# The sample clip, thresholded frame by frame (many components), first frames only.
CLIP_SETTINGS = {
    "cca.source": "frame",
    "cca.threshold": "otsu",
    "orientation.enabled": False,
    "segmentation.enabled": False,
}
CLIP_FRAMES = 8
PROPERTIES = ("label", "area", "bbox", "centroid")


def clip():
    path = os.path.join(SAMPLES, "vtest.avi")
    if not os.path.exists(path):
        if os.environ.get("MORPHOSCOPE_REQUIRE_SAMPLES") == "1":
            pytest.fail(f"{path} missing (MORPHOSCOPE_REQUIRE_SAMPLES=1)")
        pytest.skip(f"{path} missing: scripts/setup.sh fetches it")
    return path


def cli():
    """The morphoscope binary, or skip."""
    path = os.environ.get("MORPHOSCOPE_BIN")
    if path:
        assert os.access(path, os.X_OK), f"MORPHOSCOPE_BIN={path} is not an executable"
        return path
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    path = os.path.join(target, "debug", "morphoscope")
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} missing: `cargo build --bin morphoscope` (scripts/test-python.sh does)")
    return path


def sets(settings):
    """The `--set` arguments of a settings dict, as `open` makes them."""
    return [a for k, v in settings.items() for a in ("--set", video_module._setting(k, v))]


def run_cli(source, settings, out, *extra):
    """`morphoscope run` on the CPU backend: (returncode, last `error: ` line of stderr, or None
    when the run succeeded: libraries GStreamer loads can print such lines of their own, e.g.
    about XDG_RUNTIME_DIR while its plugin registry is rebuilt)."""
    args = [cli(), "run", source, "--out", str(out), "--backend", "cpu", "--quiet", "--no-video"]
    p = subprocess.run(
        [*args, *sets(settings), *extra], capture_output=True, text=True, timeout=600
    )
    errors = [line for line in p.stderr.splitlines() if line.startswith("error: ")]
    if p.returncode == 0:
        return 0, None
    return p.returncode, errors[-1][len("error: "):] if errors else None


def lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def stream_threads():
    """The names of this process's threads that belong to morphoscope's streams."""
    names = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        if name.startswith("morphoscope"):
            names.append(name)
    return names


def wait_for_no_stream_threads(before, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if len(stream_threads()) <= before:
            return
        time.sleep(0.05)
    pytest.fail(f"stream threads still running: {stream_threads()}")


def test_frames_come_in_order_with_the_source_timestamps():
    frames = list(morphoscope.open(BALL, QUICK, device="cpu"))
    assert [f.index for f in frames] == list(range(12))
    stamps = [f.timestamp for f in frames]
    assert all(isinstance(t, float) for t in stamps)
    assert stamps == pytest.approx([i / 30 for i in range(12)])
    for f in frames:
        assert f.image.shape == (64, 96, 3) and f.image.dtype == np.uint8
        assert f.layers is None
        assert set(f.summary) >= {"preprocess", "maxtree", "cca"}
        assert "orientation" not in f.summary and "segmentation" not in f.summary
        assert f.summary["cca"]["components"] == len(f.components["label"])
        assert list(f.components) == [
            "label", "area", "bbox-0", "bbox-1", "bbox-2", "bbox-3", "centroid-0", "centroid-1",
            "track_id",
        ]
    # The ball is one component, tracked once confirmed.
    assert all(f.summary["cca"]["components"] >= 1 for f in frames)
    last = frames[-1]
    assert last.summary["cca"]["tracks"] == len(last.tracks["id"]) >= 1
    assert last.components["track_id"].dtype == np.int64
    assert set(last.tracks["id"]) <= set(last.components["track_id"]) | {-1}
    assert "Frame(index=11" in repr(last)


def assert_as_run_writes(frames, out):
    """`frames` against frames.jsonl and components.jsonl of `run` in `out`: the same frames,
    summaries, component tables and track ids."""
    records = lines(out / "frames.jsonl")
    tables = lines(out / "components.jsonl")
    assert [r["index"] for r in records] == [f.index for f in frames]
    assert [r["pts_nanos"] / 1e9 for r in records] == [f.timestamp for f in frames]
    assert [t["frame"] for t in tables] == [f.index for f in frames]
    for f, r, t in zip(frames, records, tables):
        assert f.summary == r["ops"]
        comps = t["table"]["components"]
        assert len(f.components["label"]) == f.summary["cca"]["components"] == len(comps)
        expected = {
            "label": [c["label"] for c in comps],
            "area": [float(c["area"]) for c in comps],
            "bbox-0": [c["top"] for c in comps],
            "bbox-1": [c["left"] for c in comps],
            "bbox-2": [c["top"] + c["height"] for c in comps],
            "bbox-3": [c["left"] + c["width"] for c in comps],
            "centroid-0": [c["centroid"][1] for c in comps],
            "centroid-1": [c["centroid"][0] for c in comps],
            "track_id": [c.get("track_id", -1) for c in comps],
        }
        assert {k: v.tolist() for k, v in f.components.items()} == expected


def test_every_frame_equals_what_run_writes(tmp_path):
    frames = list(morphoscope.open(BALL, QUICK, device="cpu"))
    assert (len(frames), frames[-1].summary["cca"]["tracks"]) == (12, 1)
    assert run_cli(BALL, QUICK, tmp_path) == (0, None)
    assert_as_run_writes(frames, tmp_path)


def test_the_sample_clip_gives_what_run_writes(tmp_path):
    path = clip()
    # The default settings (motion, tracked) but for the costly analyses.
    settings = {"orientation.enabled": False, "segmentation.enabled": False}
    frames = list(morphoscope.open(path, settings, device="cpu", max_frames=CLIP_FRAMES))
    assert run_cli(path, settings, tmp_path, "--max-frames", str(CLIP_FRAMES)) == (0, None)
    assert [f.index for f in frames] == list(range(CLIP_FRAMES))
    assert all(b.timestamp > a.timestamp for a, b in zip(frames, frames[1:]))
    assert_as_run_writes(frames, tmp_path)
    assert sum(f.summary["cca"]["components"] for f in frames) > 20
    assert frames[-1].summary["cca"]["tracks"] >= 1
    assert (frames[-1].components["track_id"] >= 1).any()


@pytest.mark.parametrize("source", ["ball", "clip"])
def test_the_component_table_is_regionprops_table_of_the_thresholded_frame(source):
    if source == "clip":
        video = morphoscope.open(
            clip(), CLIP_SETTINGS, device="cpu", layers=True, max_frames=3
        )
    else:
        video = morphoscope.open(BALL, QUICK, device="cpu", layers=True)
    with video:
        for f in video:
            gray = f.layers["gray"]
            assert gray.shape == f.image.shape[:2] and gray.dtype == np.uint8
            assert f.layers["maxtree"].shape == gray.shape
            # cca: the pixels brighter than the threshold, 8-connected.
            labels = measure.label(gray > f.summary["cca"]["threshold"], connectivity=2)
            expected = measure.regionprops_table(labels, properties=PROPERTIES)
            table = {k: v for k, v in f.components.items() if k != "track_id"}
            assert list(table) == list(expected)
            for k in expected:
                assert table[k].dtype == expected[k].dtype, k
                np.testing.assert_array_equal(table[k], expected[k], err_msg=k)
            if len(table["label"]):
                ski = skimage.measure.regionprops_table(labels, properties=PROPERTIES)
                assert {k: v.dtype for k, v in table.items()} == {
                    k: v.dtype for k, v in ski.items()
                }


def test_every_layer_comes_as_an_array():
    settings = {**QUICK, "orientation.enabled": True, "segmentation.enabled": True}
    with morphoscope.open(BALL, settings, device="cpu", layers=True, max_frames=2) as video:
        f = next(video)
    assert set(f.layers) == {"gray", "maxtree", "orientation", "segmentation"}
    assert f.layers["orientation"].shape == (64, 96, 3)
    seg = f.layers["segmentation"]
    assert seg.shape == (64, 96) and seg.dtype == np.int64 and seg.min() == 0


def test_layers_on_cuda_equal_the_cpu_layers():
    """On CUDA the layers are read back from the device: the same arrays as the CPU backend's
    (segments tie-aware, as everywhere on CUDA)."""
    if not morphoscope.cuda_available():
        pytest.skip("CUDA unavailable")
    settings = {"cca.source": "frame", "cca.threshold": "otsu"}
    runs = {}
    for device in ("cpu", "cuda"):
        with morphoscope.open(clip(), settings, device=device, layers=True, max_frames=3) as v:
            runs[device] = list(v)
    assert len(runs["cuda"]) == len(runs["cpu"]) == 3
    for cpu, cuda in zip(runs["cpu"], runs["cuda"], strict=True):
        assert set(cuda.layers) == set(cpu.layers) == {
            "gray", "maxtree", "orientation", "segmentation"
        }
        for name in ("gray", "maxtree", "orientation"):
            assert cuda.layers[name].dtype == cpu.layers[name].dtype, name
            np.testing.assert_array_equal(cuda.layers[name], cpu.layers[name], err_msg=name)
        assert_same_segments(cuda.layers["segmentation"], cpu.layers["segmentation"], "cuda")


def test_a_settings_dict_changes_the_result():
    on = list(morphoscope.open(BALL, QUICK, device="cpu", max_frames=3))
    off = list(morphoscope.open(BALL, {**QUICK, "cca.enabled": False}, device="cpu", max_frames=3))
    assert all(len(f.components["label"]) >= 1 for f in on)
    for f in off:
        assert "cca" not in f.summary
        assert all(len(v) == 0 for v in f.components.values())
        assert all(len(v) == 0 for v in f.tracks.values())
        assert f.components["area"].dtype == np.float64


def test_a_config_file_is_read_as_run_reads_it(tmp_path):
    config = tmp_path / "settings.toml"
    config.write_text("[cca]\nenabled = false\n")
    frames = list(morphoscope.open(BALL, QUICK, device="cpu", config=config, max_frames=2))
    assert len(frames) == 2 and all("cca" not in f.summary for f in frames)


def test_a_grey_source_has_no_colour_image():
    frames = list(morphoscope.open(BALL, {**QUICK, "source.format": "gray8"}, device="cpu"))
    assert len(frames) == 12 and all(f.image is None for f in frames)


def test_bad_settings_raise_value_error_with_the_cli_s_message(tmp_path):
    for settings in ({"cca.nope": 1}, {"cca.threshold": "blue"}, {"orientation.length": 4}):
        with pytest.raises(ValueError) as e:
            morphoscope.open(BALL, settings)
        try:
            code, error = run_cli(BALL, settings, tmp_path)
        except pytest.skip.Exception:
            assert str(e.value).startswith("invalid")
            continue
        assert (code, error) == (2, str(e.value))
    with pytest.raises(TypeError, match="str, int, float or bool"):
        morphoscope.open(BALL, {"cca.threshold": [30]})
    with pytest.raises(ValueError, match="device"):
        morphoscope.open(BALL, QUICK, device="gpu")
    with pytest.raises(ValueError, match="max_frames"):
        morphoscope.open(BALL, QUICK, max_frames=0)


def test_bad_sources_raise_with_the_cli_s_message(tmp_path):
    missing = str(tmp_path / "missing.avi")
    with pytest.raises(FileNotFoundError) as e:
        morphoscope.open(missing)
    assert str(e.value) == f"file not found: {missing}"
    with pytest.raises(ValueError, match="unknown test pattern `nope`"):
        morphoscope.open("test:nope")
    with pytest.raises(ValueError, match="unknown scheme"):
        morphoscope.open("gopher://host/video")
    try:
        code, error = run_cli(missing, {}, tmp_path / "out")
    except pytest.skip.Exception:
        return
    assert (code, error) == (2, str(e.value))


def test_a_source_that_fails_raises_runtime_error_with_run_s_message(tmp_path):
    bad = tmp_path / "not-a-video.avi"
    bad.write_bytes(b"this is not a video\n" * 100)
    video = morphoscope.open(str(bad), QUICK, device="cpu")
    with pytest.raises(RuntimeError) as e:
        next(video)
    assert str(e.value)
    assert video.closed
    assert list(video) == []
    try:
        code, error = run_cli(str(bad), QUICK, tmp_path / "out")
    except pytest.skip.Exception:
        return
    # The source fails while opening (`cannot open …`, exit 2) or right after (exit 1), as the
    # decoder's timing has it, for `run` as for `open`: the cause is the same, from an element
    # numbered in its process (decodebin0, decodebin2).
    assert code in (1, 2)

    def cause(message):
        return re.sub(r"^([a-z]+)\d+: ", r"\1: ", message.removeprefix(f"cannot open {bad}: "))

    assert cause(error) == cause(str(e.value))


def test_close_mid_stream_returns_promptly_and_ends_the_iteration():
    endless = {**QUICK, "source.test.frames": 0}
    before = len(stream_threads())
    video = morphoscope.open(BALL, endless, device="cpu")
    assert [next(video).index for _ in range(3)] == [0, 1, 2]
    assert not video.closed
    started = time.monotonic()
    video.close()
    assert time.monotonic() - started < 5
    assert video.closed
    assert len(stream_threads()) <= before, stream_threads()
    with pytest.raises(StopIteration):
        next(video)
    assert list(video) == []
    video.close()


def test_close_from_another_thread_ends_a_reader_waiting_for_a_frame():
    slow = {**QUICK, "source.test.frames": 0, "source.test.fps": 5, "source.pacing": "realtime"}
    before = len(stream_threads())
    video = morphoscope.open(BALL, slow, device="cpu")
    read = []
    reader = threading.Thread(target=lambda: read.extend(f.index for f in video))
    reader.start()
    time.sleep(0.7)
    video.close()
    reader.join(5)
    assert not reader.is_alive()
    assert read and read == list(range(len(read)))
    assert len(stream_threads()) <= before, stream_threads()


def test_leaving_a_for_loop_early_stops_the_stream():
    endless = {**QUICK, "source.test.frames": 0}
    before = len(stream_threads())
    for f in morphoscope.open(BALL, endless, device="cpu"):
        assert len(stream_threads()) > before
        if f.index == 2:
            break
    gc.collect()
    wait_for_no_stream_threads(before)


def test_a_with_block_stops_the_stream():
    endless = {**QUICK, "source.test.frames": 0}
    before = len(stream_threads())
    with morphoscope.open(BALL, endless, device="cpu") as video:
        assert next(video).index == 0
    assert video.closed
    assert len(stream_threads()) <= before, stream_threads()


def test_ctrl_c_interrupts_the_wait_for_a_frame():
    # One frame a second, in real time: the iterator waits for the second one.
    slow = {**QUICK, "source.test.frames": 0, "source.test.fps": 1, "source.pacing": "realtime"}
    before = len(stream_threads())
    with morphoscope.open(BALL, slow, device="cpu") as video:
        assert next(video).index == 0
        timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
        started = time.monotonic()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            next(video)
        timer.join()
        assert time.monotonic() - started < 0.9
    assert len(stream_threads()) <= before


def test_max_frames_is_run_s_frame_limit():
    assert [f.index for f in morphoscope.open(BALL, QUICK, device="cpu", max_frames=4)] == [
        0, 1, 2, 3,
    ]
