//! End-to-end tests of the `morphoscope` binary: headless runs on the test pattern and the real
//! sample clip, the image command, and every kind of bad input (each must exit non-zero with a
//! one-line message and never panic). `cli/ends.rs`: how runs end (signals to a real child
//! process, a hard kill, a full disk on a real tmpfs); `cli/network.rs`: sources served by an
//! HTTP server the test starts on 127.0.0.1; `cli/outputs.rs`: the output folder, counters,
//! frame rate, tiny frames, messages and progress; `cli/streams.rs`: several sources in one run
//! and device lists; `cli/secrets.rs`: passwords and URL user-info never shown;
//! `cli/topics.rs`: broker topic prefixes refused at start; `cli/bench.rs`: bench's bounds;
//! `cli/reconnect.rs`: a live source (a real RTSP server) lost and back; `cli/stops.rs`: a stop
//! signal while a source opens or while the run waits for the broker; `cli/segments.rs`:
//! outputs cut into segments, retention and a full disk with retention; `cli/service.rs`: a
//! service driven over HTTP (`run --listen`), scraped by a real Prometheus.

// Helpers of the tests fail loudly, as the tests do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "cli/bench.rs"]
mod bench;
#[path = "cli/ends.rs"]
mod ends;
#[path = "cli/network.rs"]
mod network;
#[path = "cli/outputs.rs"]
mod outputs;
#[path = "cli/reconnect.rs"]
mod reconnect;
#[path = "common/samples.rs"]
mod samples;
#[path = "cli/secrets.rs"]
mod secrets;
#[path = "cli/segments.rs"]
mod segments;
#[path = "cli/service.rs"]
mod service;
#[path = "cli/stops.rs"]
mod stops;
#[path = "cli/streams.rs"]
mod streams;
#[path = "cli/topics.rs"]
mod topics;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use samples::samples_dir;

fn bin() -> Command {
    let mut c = Command::cargo_bin("morphoscope").unwrap();
    c.env("RUST_LOG", "warn").env(
        "XDG_CACHE_HOME",
        std::env::temp_dir().join("morphoscope-test-cache"),
    );
    c
}

/// The sample clip, or None (a failure when MORPHOSCOPE_REQUIRE_SAMPLES=1, as in CI).
fn clip() -> Option<PathBuf> {
    let p = samples_dir().join("vtest.avi");
    if p.is_file() {
        return Some(p);
    }
    assert!(
        std::env::var("MORPHOSCOPE_REQUIRE_SAMPLES").as_deref() != Ok("1"),
        "sample clip missing: run scripts/setup.sh"
    );
    eprintln!("sample clip missing; skipped");
    None
}

fn lines(p: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The CPU backend with the two slow analyses (orientation maps, segmentation) off.
const FAST: [&str; 6] = [
    "--backend",
    "cpu",
    "--set",
    "orientation.enabled=false",
    "--set",
    "segmentation.enabled=false",
];

/// Options of a quick run on the test pattern ([`FAST`]): `frames` frames (0: endless) of
/// `width`x`height`.
fn quick(frames: u32, width: u32, height: u32) -> Vec<String> {
    let mut v: Vec<String> = FAST.iter().map(|s| s.to_string()).collect();
    for s in [
        format!("source.test.frames={frames}"),
        format!("source.test.width={width}"),
        format!("source.test.height={height}"),
    ] {
        v.extend(["--set".to_owned(), s]);
    }
    v
}

/// The frames of a video as morphoscope reads them back (its frames.jsonl lines).
fn decoded(video: &Path) -> Vec<serde_json::Value> {
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args([
            "run",
            "--backend",
            "cpu",
            "--quiet",
            "--no-video",
            "--set",
            "orientation.enabled=false",
            "--set",
            "segmentation.enabled=false",
            "--set",
            "maxtree.enabled=false",
            "--out",
        ])
        .arg(dir.path())
        .arg(video)
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    let p = dir.path().join("frames.jsonl");
    if p.is_file() { lines(&p) } else { Vec::new() }
}

/// A test video made by GStreamer's command line tool, or `None` (skipped) when it is missing.
fn gst_video(path: &Path, pipeline_head: &[&str]) -> Option<()> {
    let status = std::process::Command::new("gst-launch-1.0")
        .arg("-q")
        .args(pipeline_head)
        .arg(format!("location={}", path.display()))
        .status();
    let Ok(status) = status else {
        eprintln!("gst-launch-1.0 not installed (scripts/setup.sh); skipped");
        return None;
    };
    assert!(
        status.success(),
        "gst-launch-1.0 failed for {}",
        path.display()
    );
    Some(())
}

/// An H.264 MP4 at `path` with its index first (faststart, as files meant for streaming are):
/// `source` (a `videotestsrc` and its properties) in the raw `caps`, encoded by x264; `None`
/// (skip) without gst-launch-1.0.
fn faststart_h264(path: &Path, source: &[&str], caps: &str) -> Option<()> {
    let tail = [
        "!",
        caps,
        "!",
        "videoconvert",
        "!",
        "video/x-raw,format=I420",
        "!",
        "x264enc",
        "!",
        "h264parse",
        "!",
        "mp4mux",
        "faststart=true",
        "!",
        "filesink",
    ];
    let pipeline: Vec<&str> = source.iter().copied().chain(tail).collect();
    gst_video(path, &pipeline)
}

fn assert_clean_failure(out: &std::process::Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "should fail: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    let msg: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(msg.len(), 1, "one error line expected: {err}");
    assert!(
        msg[0].to_lowercase().contains(&needle.to_lowercase()),
        "`{needle}` not in `{}`",
        msg[0]
    );
}

#[test]
fn run_on_test_pattern_writes_all_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args([
            "run",
            "test:ball",
            "--backend",
            "cpu",
            "--quiet",
            "--set",
            "orientation.length=11",
            "--set",
            "orientation.angles=8",
            "--set",
            "source.test.frames=40",
            "--set",
            "source.test.width=320",
            "--set",
            "source.test.height=240",
            "--out",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("frames: in 40 | out 40 | dropped 0"),
        "{stdout}"
    );
    let frames = lines(&dir.path().join("frames.jsonl"));
    assert_eq!(frames.len(), 40);
    assert_eq!(frames[39]["index"], 39);
    assert_eq!(frames[0]["width"], 320);
    assert!(
        frames[0]["ops"]["preprocess"]["mean_gray"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert_eq!(
        frames[5]["ops"]["orientation"]["spectrum"]
            .as_array()
            .unwrap()
            .len(),
        8
    );
    assert!(frames[5]["ops"]["cca"]["components"].is_u64());
    // The ball on its background: a handful of segments, never zero.
    let segments = frames[5]["ops"]["segmentation"]["segments"]
        .as_u64()
        .unwrap();
    assert!((1..500).contains(&segments), "{segments} segments");
    let t = json(&dir.path().join("timings.json"));
    assert_eq!(t["frames_out"], 40);
    assert_eq!(t["video_frames"], 40);
    assert_eq!(
        (t["complete"].as_bool(), t["ended"].as_str()),
        (Some(true), Some("end of stream"))
    );
    assert!(
        t["encoder"].as_str().is_some_and(|e| e.ends_with("enc")),
        "{}",
        t["encoder"]
    );
    let mkv = std::fs::read(dir.path().join("overlay.mkv")).unwrap();
    assert!(
        mkv.len() > 1000 && mkv[..4] == [0x1a, 0x45, 0xdf, 0xa3],
        "overlay.mkv is not Matroska"
    );
    assert!(dir.path().join("tracks.csv").is_file());
}

#[test]
fn run_on_the_real_clip_loses_no_frame_and_the_overlay_decodes() {
    let Some(clip) = clip() else { return };
    let dir = tempfile::tempdir().unwrap();
    // Orientation maps and segmentation are slow on a 2-core CPU in a debug build; they have
    // their own tests.
    let out = bin()
        .args([
            "run",
            "--backend",
            "cpu",
            "--quiet",
            "--set",
            "orientation.enabled=false",
            "--set",
            "segmentation.enabled=false",
            "--out",
        ])
        .arg(dir.path())
        .arg(&clip)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("frames: in 795 | out 795 | dropped 0"),
        "{stdout}"
    );
    let frames = lines(&dir.path().join("frames.jsonl"));
    assert_eq!(frames.len(), 795);
    // Pedestrians move: the motion binarization finds components and the tracker confirms tracks.
    let max_tracks = frames
        .iter()
        .map(|f| f["ops"]["cca"]["tracks"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!(
        max_tracks >= 3,
        "at most {max_tracks} tracks at once on the pedestrian clip"
    );
    let csv = std::fs::read_to_string(dir.path().join("tracks.csv")).unwrap();
    let first: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    assert_eq!(first.len(), 10, "MOT rows have 10 columns");
    assert_eq!(&first[7..], &["-1", "-1", "-1"]);
    assert_eq!(lines(&dir.path().join("components.jsonl")).len(), 795);
    let t = json(&dir.path().join("timings.json"));
    assert_eq!(t["frame_rate"], 10.0, "the clip is 10 fps");
    assert!(
        t["decoder"].as_str().is_some_and(|d| !d.is_empty()),
        "decoder: {}",
        t["decoder"]
    );
    assert_eq!(t["live"], false);
    assert_eq!(
        t["frame_memory"], "system",
        "the CPU backend reads frames in system memory"
    );
    // The overlay video is a real video at the clip's rate: read it back through morphoscope.
    let frames = decoded(&dir.path().join("overlay.mkv"));
    assert_eq!(frames.len(), 795);
    assert_eq!(frames[0]["width"], 768);
    let pts: Vec<u64> = frames
        .iter()
        .map(|f| f["pts_nanos"].as_u64().unwrap())
        .collect();
    assert!(
        pts.windows(2).all(|p| p[1] - p[0] == 100_000_000),
        "frames 100 ms apart (10 fps)"
    );
}

#[test]
fn max_frames_stops_early_and_counters_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args([
            "run",
            "test",
            "--quiet",
            "--no-video",
            "--max-frames",
            "5",
            "--out",
        ])
        .arg(dir.path())
        .args(quick(100, 160, 120))
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(lines(&dir.path().join("frames.jsonl")).len(), 5);
    // Only the frames analysed were taken from the source.
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("frames: in 5 | out 5 | dropped 0 |"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        json(&dir.path().join("timings.json"))["ended"],
        "--max-frames"
    );
    let out = bin()
        .args(["run", "test", "--max-frames", "0", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_clean_failure(&out, "max-frames");
}

#[test]
fn bad_sources_fail_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let text_mp4 = dir.path().join("notes.mp4");
    std::fs::write(&text_mp4, "this is not a video, just text\n".repeat(50)).unwrap();
    let cases: Vec<(String, &str)> = vec![
        ("/no/such/clip.mp4".into(), "not found"),
        (text_mp4.display().to_string(), "text file"),
        ("gopher://example/x".into(), "unknown scheme"),
        ("videotestsrc ! fakesink".into(), "appsink name=sink"),
        (
            "videotestsrc ! nosuchelement ! appsink name=sink".into(),
            "nosuchelement",
        ),
        ("camera:7".into(), "video7"),
        ("test:nosuchpattern".into(), "unknown test pattern"),
    ];
    for (src, needle) in cases {
        let out = bin()
            .args(["run", "--backend", "cpu", "--quiet", "--no-video", "--out"])
            .arg(dir.path().join("o"))
            .arg(&src)
            .output()
            .unwrap();
        assert_clean_failure(&out, needle);
    }
}

#[test]
fn truncated_video_yields_the_decodable_frames_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    // Make a 120-frame MP4 with the index first (as streaming files are), then cut it in half.
    let full = dir.path().join("full.mp4");
    let source = ["videotestsrc", "num-buffers=120"];
    if faststart_h264(
        &full,
        &source,
        "video/x-raw,width=320,height=240,framerate=30/1",
    )
    .is_none()
    {
        return;
    }
    let bytes = std::fs::read(&full).unwrap();
    let cut = dir.path().join("cut.mp4");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let o = dir.path().join("o");
    let out = bin()
        .args(["run", "--backend", "cpu", "--quiet", "--no-video", "--out"])
        .arg(&o)
        .arg(&cut)
        .output()
        .unwrap();
    assert_clean_failure(&out, "ended early");
    let n = lines(&o.join("frames.jsonl")).len();
    assert!(n > 10 && n < 120, "decodable frames kept: {n}");
    // timings.json says what the run said.
    let ended = json(&o.join("timings.json"))["ended"].clone();
    assert!(
        ended
            .as_str()
            .is_some_and(|e| e.starts_with("error: stream ended early")),
        "{ended}"
    );
}

#[test]
fn invalid_config_is_rejected_with_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("bad.toml");
    std::fs::write(&cfg, "[pipeline]\nring_sise = 3\n").unwrap();
    let out = bin()
        .args(["run", "test", "--out"])
        .arg(dir.path().join("o"))
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    assert_clean_failure(&out, "ring_sise");
    let out = bin()
        .args(["run", "test", "--set", "pipeline.ring_size=0", "--out"])
        .arg(dir.path().join("o"))
        .output()
        .unwrap();
    assert_clean_failure(&out, "pipeline.ring_size");
    let out = bin()
        .args(["run", "test", "--config", "/no/such.toml", "--out"])
        .arg(dir.path().join("o"))
        .output()
        .unwrap();
    assert_clean_failure(&out, "no/such.toml");
}

#[test]
fn cuda_backend_without_a_gpu_fails_cleanly_and_auto_falls_back() {
    if morphoscope::gpu::GpuContext::new(0).is_ok() {
        eprintln!("a GPU is present; this test is for machines without one");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args(["run", "test", "--backend", "cuda", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_clean_failure(&out, "cuda");
    let out = bin()
        .env("RUST_LOG", "info")
        .args([
            "run",
            "test",
            "--max-frames",
            "3",
            "--no-video",
            "--quiet",
            "--out",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.lines().filter(|l| l.contains("backend:")).count(),
        1,
        "{err}"
    );
    assert!(err.contains("cpu backend (auto: CUDA unavailable"), "{err}");
}

#[test]
fn devices_always_succeeds() {
    let out = bin().arg("devices").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("cpu:"));
}

#[test]
fn image_gray_and_its_errors() {
    let dir = tempfile::tempdir().unwrap();
    let input = samples_dir().join("fruits.jpg");
    if input.is_file() {
        let o = dir.path().join("g.png");
        let out = bin()
            .args(["image", "--op", "gray", "--backend", "cpu", "--out"])
            .arg(&o)
            .arg(&input)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let back = morphoscope::io::read_image(&o).unwrap();
        assert!(matches!(back, morphoscope::image::DynImage::Gray8(_)));
    }
    let fake = dir.path().join("fake.png");
    std::fs::write(&fake, "text").unwrap();
    let out = bin()
        .args(["image", "--op", "gray", "--out", "x.png"])
        .arg(&fake)
        .output()
        .unwrap();
    assert_clean_failure(&out, "fake.png");
    assert_eq!(out.status.code(), Some(2));
    let out = bin()
        .args(["image", "--op", "nope", "--out", "x.png"])
        .arg(&fake)
        .output()
        .unwrap();
    assert_clean_failure(&out, "unknown op");
    let out = bin()
        .args(["image", "--op", "gray", "--out", "x.png", "/no/such.png"])
        .output()
        .unwrap();
    assert_clean_failure(&out, "not found");
}

fn data(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(p)
}

#[test]
fn image_area_ops_equal_scikit_image_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    for (op, input, golden, area, conn) in [
        (
            "area-opening",
            "baboon_u8.npy",
            "baboon_u8_opening_a100_c8.npy",
            "100",
            "8",
        ),
        (
            "area-closing",
            "baboon_u8.npy",
            "baboon_u8_closing_a50_c4.npy",
            "50",
            "4",
        ),
        (
            "area-closing",
            "fruits_u16.npy",
            "fruits_u16_closing_a40_c8.npy",
            "40",
            "8",
        ),
    ] {
        let o = dir.path().join(format!("{op}-{golden}"));
        let out = bin()
            .args([
                "image",
                "--backend",
                "cpu",
                "--op",
                op,
                "--area",
                area,
                "--connectivity",
                conn,
                "--out",
            ])
            .arg(&o)
            .arg(data(&format!("maxtree/{input}")))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got = morphoscope::io::read_image(&o).unwrap();
        let want = morphoscope::io::read_image(&data(&format!("maxtree/{golden}"))).unwrap();
        assert_eq!(
            got, want,
            "{op} {golden}: output dtype and pixels must equal scikit-image's"
        );
    }
}

#[test]
fn image_cca_orientation_and_linear_opening_write_their_outputs() {
    let input = samples_dir().join("fruits.jpg");
    if !input.is_file() {
        assert!(std::env::var("MORPHOSCOPE_REQUIRE_SAMPLES").as_deref() != Ok("1"));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (json, npy) = (dir.path().join("stats.json"), dir.path().join("labels.npy"));
    let out = bin()
        .args([
            "image",
            "--backend",
            "cpu",
            "--op",
            "cca",
            "--threshold",
            "otsu",
            "--out",
        ])
        .arg(&json)
        .arg("--labels")
        .arg(&npy)
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let comps = stats["components"].as_array().unwrap();
    assert!(!comps.is_empty());
    assert_eq!(comps[0]["label"], 1);
    for key in [
        "area", "left", "top", "width", "height", "centroid", "moments",
    ] {
        assert!(comps[0].get(key).is_some(), "{key} missing");
    }
    let labels = morphoscope::io::npy::read(&mut std::fs::File::open(&npy).unwrap()).unwrap();
    assert_eq!(labels.dtype, morphoscope::io::npy::NpyDtype::I32);
    assert_eq!(
        labels.shape,
        vec![
            stats["height"].as_u64().unwrap() as usize,
            stats["width"].as_u64().unwrap() as usize
        ]
    );
    let max_label = labels
        .bytes
        .as_chunks::<4>()
        .0
        .iter()
        .map(|c| i32::from_le_bytes(*c))
        .max()
        .unwrap();
    assert_eq!(max_label as usize, comps.len());

    let od = dir.path().join("orient");
    let out = bin()
        .args([
            "image",
            "--backend",
            "cpu",
            "--op",
            "orientation",
            "--length",
            "15",
            "--angles",
            "12",
            "--out",
        ])
        .arg(&od)
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "orientation.png",
        "angle.npy",
        "strength.npy",
        "spectrum.csv",
    ] {
        assert!(od.join(f).is_file(), "{f} missing");
    }
    let csv = std::fs::read_to_string(od.join("spectrum.csv")).unwrap();
    assert_eq!(csv.lines().count(), 13);
    assert_eq!(csv.lines().next().unwrap(), "angle_deg,sum");

    let lo = dir.path().join("lo.png");
    let out = bin()
        .args([
            "image",
            "--backend",
            "cpu",
            "--op",
            "linear-opening",
            "--length",
            "21",
            "--angle",
            "45",
            "--out",
        ])
        .arg(&lo)
        .arg(&input)
        .output()
        .unwrap();
    assert!(out.status.success());
    // An opening is anti-extensive: never above the grey input.
    let morphoscope::image::DynImage::Gray8(opened) = morphoscope::io::read_image(&lo).unwrap()
    else {
        panic!("8-bit output")
    };
    let gray = dir.path().join("g.png");
    assert!(
        bin()
            .args(["image", "--backend", "cpu", "--op", "gray", "--out"])
            .arg(&gray)
            .arg(&input)
            .output()
            .unwrap()
            .status
            .success()
    );
    let morphoscope::image::DynImage::Gray8(g) = morphoscope::io::read_image(&gray).unwrap() else {
        panic!()
    };
    assert!(opened.data().iter().zip(g.data()).all(|(o, i)| o <= i));
    assert!(opened.data() != g.data());
}

#[test]
fn image_segmentation_equals_scikit_image_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let (npy, png) = (dir.path().join("seg.npy"), dir.path().join("seg.png"));
    let out = bin()
        .args([
            "image",
            "--backend",
            "cpu",
            "--op",
            "segmentation",
            "--scale",
            "100",
            "--sigma",
            "0.8",
            "--min-size",
            "20",
            "--out",
        ])
        .arg(&npy)
        .arg("--overlay")
        .arg(&png)
        .arg(data("segmentation/baboon_rgb.npy"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = morphoscope::io::npy::read_file(&npy).unwrap().to_f64();
    let want = morphoscope::io::npy::read_file(&data("segmentation/baboon_rgb_k100_s0.8_m20.npy"))
        .unwrap()
        .to_f64();
    assert_eq!(got, want, "labels must equal scikit-image's felzenszwalb");
    let count = want.iter().fold(0.0f64, |m, &v| m.max(v)) as usize + 1;
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("{count} segments")));
    let morphoscope::image::DynImage::Rgb8(pic) = morphoscope::io::read_image(&png).unwrap() else {
        panic!("RGB overlay")
    };
    assert_eq!((pic.width(), pic.height()), (160, 160));
    // Bad parameters and outputs fail on one line.
    let out = bin()
        .args(["image", "--op", "segmentation", "--scale=-3", "--out"])
        .arg(&npy)
        .arg(data("segmentation/baboon_rgb.npy"))
        .output()
        .unwrap();
    assert_clean_failure(&out, "scale");
    let out = bin()
        .args(["image", "--op", "felzenszwalb", "--out"])
        .arg(&png)
        .arg(data("segmentation/baboon_rgb.npy"))
        .output()
        .unwrap();
    assert_clean_failure(&out, ".npy");
}

#[test]
fn image_op_errors_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let input = data("maxtree/baboon_u8.npy");
    let o = dir.path().join("x.png");
    let out = bin()
        .args(["image", "--op", "area-opening", "--out"])
        .arg(&o)
        .arg(&input)
        .output()
        .unwrap();
    assert_clean_failure(&out, "--area");
    let out = bin()
        .args([
            "image",
            "--op",
            "attribute-filter",
            "--attribute",
            "nope",
            "--threshold",
            "3",
            "--out",
        ])
        .arg(&o)
        .arg(&input)
        .output()
        .unwrap();
    assert_clean_failure(&out, "--attribute nope");
    let out = bin()
        .args([
            "image",
            "--op",
            "linear-opening",
            "--length",
            "4",
            "--angle",
            "0",
            "--out",
        ])
        .arg(&o)
        .arg(&input)
        .output()
        .unwrap();
    assert_clean_failure(&out, "length");
    let out = bin()
        .args(["image", "--op", "cca", "--out"])
        .arg(&o)
        .arg(&input)
        .output()
        .unwrap();
    assert_clean_failure(&out, ".json");
}
