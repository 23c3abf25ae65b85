"""The analysis half of scripts/profile_timeline.py on a synthetic kernel timeline (no GPU, no
torch): every statistic is worked out by hand below and asserted exactly."""

import importlib.util
import json
import os

SCRIPT = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "profile_timeline.py"
)
_spec = importlib.util.spec_from_file_location("profile_timeline", SCRIPT)
pt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pt)


def k(name, ts, dur, stream):
    return {"name": name, "ts": float(ts), "dur": float(dur), "stream": stream}


# Two frames. Intervals [ts, ts + dur] by stream:
#   7:  maxtree_local_u8 [0,10], maxtree_merge [20,50], cca_hist [60,64],
#       orientation_reduce_u8 [70,76], maxtree_local_u8 [80,92], compose_rgb [100,102]
#   13: segmentation_edges [25,30], blur_horizontal [40,60], convert_u32_to_i32 [55,65]
#       (overlaps the blur), nv12_to_rgb [100,108]
#   21: a torch kernel [110,120]
KERNELS = [
    k("maxtree_local_u8", 0, 10, "7"),
    k("maxtree_merge", 20, 30, "7"),
    k("cca_hist", 60, 4, "7"),
    k("orientation_reduce_u8", 70, 6, "7"),
    k("maxtree_local_u8", 80, 12, "7"),
    k("compose_rgb", 100, 2, "7"),
    k("segmentation_edges", 25, 5, "13"),
    k("blur_horizontal", 40, 20, "13"),
    k("convert_u32_to_i32", 55, 10, "13"),
    k("nv12_to_rgb", 100, 8, "13"),
    k("void at::native::elementwise_kernel", 110, 10, "21"),
]


def test_percentile_and_union():
    assert pt.percentile([], 50) is None
    assert pt.percentile([7.0], 90) == 7.0
    assert pt.percentile([30.0, 10.0, 12.0], 50) == 12.0
    assert pt.percentile([30.0, 10.0, 12.0], 90) == 26.4  # rank 1.8: 12 + 0.8 * 18
    # [0,10] + [20,50]∪[25,30]∪[40,60]∪[60,64] (touching merges) + [70,76]
    assert pt.union_length([(20, 50), (0, 10), (25, 30), (40, 60), (60, 64), (70, 76)]) == 60
    assert pt.union_length([]) == 0


def test_group_of():
    assert pt.group_of("maxtree_restitute_u8") == "max-tree"
    assert pt.group_of("void maxtree_jump") == "max-tree"
    assert pt.group_of("cca_strip") == "CCA"
    assert pt.group_of("orientation_finish_u16") == "orientation"
    assert pt.group_of("segmentation_final") == "segmentation"
    assert pt.group_of("blur_vertical_f64") == "segmentation"
    assert pt.group_of("compose_i420") == "compose"
    assert pt.group_of("nv12_to_rgb") == "input"
    assert pt.group_of("preprocess_rgb_to_gray") == "input"
    assert pt.group_of("convert_lookup_u16_f32") == "input"
    assert pt.group_of("ampere_sgemm_128x64") == "other"


def test_gpu_events():
    trace = {
        "traceEvents": [
            {"ph": "X", "cat": "kernel", "name": "cca_hist", "pid": 0, "tid": 7,
             "ts": 5, "dur": 3, "args": {"stream": 13, "device": 0}},
            {"ph": "X", "cat": "Kernel", "name": "maxtree_jump", "pid": 0, "tid": 9,
             "ts": 1.5, "dur": 2.25},
            {"ph": "f", "cat": "kernel", "name": "flow", "ts": 1, "id": 3},
            {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 0, "dur": 4},
            {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH", "ts": 9, "dur": 2},
            {"ph": "X", "cat": "Memset", "name": "Memset", "ts": 9, "dur": 1},
            {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "ts": 0, "dur": 50},
            {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "ts": 0, "dur": 1},
        ]
    }
    kernels, memops = pt.gpu_events(trace)
    assert kernels == [k("cca_hist", 5, 3, "13"), k("maxtree_jump", 1.5, 2.25, "9")]
    assert memops == {"gpu_memcpy": {"count": 2, "us": 6.0}, "gpu_memset": {"count": 1, "us": 1.0}}
    assert pt.gpu_events(trace["traceEvents"]) == (kernels, memops)


def test_analyse():
    memops = {"gpu_memcpy": {"count": 4, "us": 20.0}}
    s = pt.analyse(KERNELS, frames=2, wall_s=0.5, memops=memops)
    assert (s["frames"], s["wall_s"], s["fps"], s["kernels"]) == (2, 0.5, 4.0, 11)
    assert s["memops"] == {"gpu_memcpy": {"count": 4, "per_frame": 2.0, "us_per_frame": 10.0}}
    # Durations sum to 117 µs. Union: [0,10] 10 + [20,65] 45 + [70,76] 6 + [80,92] 12
    # + [100,108] 8 + [110,120] 10 = 91, over the span [0,120].
    assert s["kernel_us_per_frame"] == 58.5
    assert s["gpu"] == {"span_us": 120.0, "busy_us": 91.0, "busy_fraction": 91 / 120,
                        "mean_concurrency": 117 / 91}

    assert list(s["groups"]) == [
        "input", "max-tree", "CCA", "orientation", "segmentation", "compose", "other"]
    g = s["groups"]
    # input: nv12 8, convert 10 -> median 9, p90 8 + 0.9 * 2, one of two under 10 µs.
    assert g["input"] == {"launches": 2, "launches_per_frame": 1.0, "kernel_us_per_frame": 9.0,
                          "median_us": 9.0, "p90_us": 9.8, "short_share": 0.5}
    # max-tree: 10, 12, 30 -> median 12, p90 at rank 1.8: 26.4; 10 µs is not under 10.
    assert g["max-tree"] == {"launches": 3, "launches_per_frame": 1.5,
                             "kernel_us_per_frame": 26.0, "median_us": 12.0, "p90_us": 26.4,
                             "short_share": 0.0}
    assert g["CCA"] == {"launches": 1, "launches_per_frame": 0.5, "kernel_us_per_frame": 2.0,
                        "median_us": 4.0, "p90_us": 4.0, "short_share": 1.0}
    assert g["orientation"] == {"launches": 1, "launches_per_frame": 0.5,
                                "kernel_us_per_frame": 3.0, "median_us": 6.0, "p90_us": 6.0,
                                "short_share": 1.0}
    # segmentation: edges 5, blur 20 -> median 12.5, p90 5 + 0.9 * 15 = 18.5.
    assert g["segmentation"] == {"launches": 2, "launches_per_frame": 1.0,
                                 "kernel_us_per_frame": 12.5, "median_us": 12.5,
                                 "p90_us": 18.5, "short_share": 0.5}
    assert g["compose"] == {"launches": 1, "launches_per_frame": 0.5, "kernel_us_per_frame": 1.0,
                            "median_us": 2.0, "p90_us": 2.0, "short_share": 1.0}
    assert g["other"] == {"launches": 1, "launches_per_frame": 0.5, "kernel_us_per_frame": 5.0,
                          "median_us": 10.0, "p90_us": 10.0, "short_share": 0.0}

    st = s["streams"]
    assert list(st) == ["7", "13", "21"]  # most launches first
    # 7: busy 10+30+4+6+12+2 = 64 of [0,102]; gaps 10, 10, 6, 4, 8 -> sorted 4 6 8 10 10:
    # median 8, p90 at rank 3.6: 10; sum 38 over 2 frames.
    assert st["7"] == {"launches": 6, "span_us": 102.0, "busy_fraction": 64 / 102,
                       "median_gap_us": 8.0, "p90_gap_us": 10.0, "gap_us_per_frame": 19.0}
    # 13: busy 5 + 25 ([40,65]) + 8 = 38 of [25,108]; gaps 10, 0 (convert overlaps the blur),
    # 35 (100 - 65) -> median 10, p90 at rank 1.8: 10 + 0.8 * 25 = 30; sum 45.
    assert st["13"] == {"launches": 4, "span_us": 83.0, "busy_fraction": 38 / 83,
                        "median_gap_us": 10.0, "p90_gap_us": 30.0, "gap_us_per_frame": 22.5}
    assert st["21"] == {"launches": 1, "span_us": 10.0, "busy_fraction": 1.0,
                        "median_gap_us": None, "p90_gap_us": None, "gap_us_per_frame": 0.0}

    assert s["top_kernels"] == [
        {"name": "maxtree_merge", "count": 1, "total_ms": 0.03, "mean_us": 30.0},
        {"name": "maxtree_local_u8", "count": 2, "total_ms": 0.022, "mean_us": 11.0},
        {"name": "blur_horizontal", "count": 1, "total_ms": 0.02, "mean_us": 20.0},
        # ties of 10 µs in name order
        {"name": "convert_u32_to_i32", "count": 1, "total_ms": 0.01, "mean_us": 10.0},
        {"name": "void at::native::elementwise_kernel", "count": 1, "total_ms": 0.01,
         "mean_us": 10.0},
        {"name": "nv12_to_rgb", "count": 1, "total_ms": 0.008, "mean_us": 8.0},
        {"name": "orientation_reduce_u8", "count": 1, "total_ms": 0.006, "mean_us": 6.0},
        {"name": "segmentation_edges", "count": 1, "total_ms": 0.005, "mean_us": 5.0},
        {"name": "cca_hist", "count": 1, "total_ms": 0.004, "mean_us": 4.0},
        {"name": "compose_rgb", "count": 1, "total_ms": 0.002, "mean_us": 2.0},
    ]
    assert pt.format_summary(s).startswith("frames 2  wall 0.500 s  fps 4.0  kernels 11")


def test_top_is_fifteen():
    kernels = [k(f"k{i:02d}", 10 * i, i + 1, "7") for i in range(20)]
    top = pt.analyse(kernels, frames=1)["top_kernels"]
    assert [r["name"] for r in top] == [f"k{i:02d}" for i in range(19, 4, -1)]


def test_analyse_command(tmp_path, capsys):
    events = [{"ph": "X", "cat": "kernel", "name": x["name"], "ts": x["ts"], "dur": x["dur"],
               "pid": 0, "tid": int(x["stream"]), "args": {"stream": int(x["stream"])}}
              for x in KERNELS]
    meta = {"video": "/v/clip.mp4", "settings": {"segmentation.downscale": "2"}, "frames": 2,
            "wall_s": 0.5}
    trace = tmp_path / "run1.trace.json"
    trace.write_text(json.dumps({"traceEvents": events, "morphoscope_profile": meta}))
    pt.main(["--analyse", str(trace)])
    summary = json.loads((tmp_path / "run1.summary.json").read_text())
    want = pt.analyse(KERNELS, frames=2, wall_s=0.5, memops={})
    assert summary == {"label": "run1", "trace": str(trace), "video": "/v/clip.mp4",
                       "settings": {"segmentation.downscale": "2"}, **want}
    assert "GPU busy 75.8% of 0.1 ms" in capsys.readouterr().out
