//! End-to-end tests of the `morphoscope` binary: headless runs on the test pattern and the real
//! sample clip, the image command, and every kind of bad input (each must exit non-zero with a
//! one-line message and never panic).

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn bin() -> Command {
    let mut c = Command::cargo_bin("morphoscope").unwrap();
    c.env("RUST_LOG", "warn").env("MORPHOSCOPE_CACHE", std::env::temp_dir().join("morphoscope-test-cache"));
    c
}

fn samples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/samples")
}

/// The sample clip, or None (a failure when MORPHOSCOPE_REQUIRE_SAMPLES=1, as in CI).
fn clip() -> Option<PathBuf> {
    let p = samples().join("vtest.avi");
    if p.is_file() {
        return Some(p);
    }
    assert!(std::env::var("MORPHOSCOPE_REQUIRE_SAMPLES").as_deref() != Ok("1"), "sample clip missing: run scripts/setup.sh");
    eprintln!("sample clip missing; skipped");
    None
}

fn lines(p: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(p).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn assert_clean_failure(out: &std::process::Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "should fail: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    let msg: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(msg.len(), 1, "one error line expected: {err}");
    assert!(msg[0].to_lowercase().contains(&needle.to_lowercase()), "`{needle}` not in `{}`", msg[0]);
}

#[test]
fn run_on_test_pattern_writes_all_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args(["run", "test:ball", "--backend", "cpu", "--quiet", "--set", "orientation.length=11", "--set", "orientation.angles=8", "--set", "source.test.frames=40", "--set", "source.test.width=320", "--set", "source.test.height=240", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("frames: in 40 | out 40 | dropped 0"), "{stdout}");
    let frames = lines(&dir.path().join("frames.jsonl"));
    assert_eq!(frames.len(), 40);
    assert_eq!(frames[39]["index"], 39);
    assert_eq!(frames[0]["width"], 320);
    assert!(frames[0]["ops"]["preprocess"]["mean_gray"].as_f64().unwrap() > 0.0);
    assert_eq!(frames[5]["ops"]["orientation"]["spectrum"].as_array().unwrap().len(), 8);
    assert!(frames[5]["ops"]["cca"]["components"].is_u64());
    // The ball on its background: a handful of segments, never zero.
    let segments = frames[5]["ops"]["segmentation"]["segments"].as_u64().unwrap();
    assert!((1..500).contains(&segments), "{segments} segments");
    let t: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("timings.json")).unwrap()).unwrap();
    assert_eq!(t["frames_out"], 40);
    assert_eq!(t["video_frames"], 40);
    let mp4 = std::fs::read(dir.path().join("overlay.mp4")).unwrap();
    assert!(mp4.len() > 1000 && &mp4[4..8] == b"ftyp", "overlay.mp4 is not an MP4");
}

#[test]
fn run_on_the_real_clip_loses_no_frame_and_the_overlay_decodes() {
    let Some(clip) = clip() else { return };
    let dir = tempfile::tempdir().unwrap();
    // Orientation maps and segmentation are slow on a 2-core CPU in a debug build; they have
    // their own tests.
    let out = bin().args(["run", "--backend", "cpu", "--quiet", "--set", "orientation.enabled=false", "--set", "segmentation.enabled=false", "--out"]).arg(dir.path()).arg(&clip).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("frames: in 795 | out 795 | dropped 0"), "{stdout}");
    let frames = lines(&dir.path().join("frames.jsonl"));
    assert_eq!(frames.len(), 795);
    // Pedestrians move: the motion binarization finds components and the tracker confirms tracks.
    let max_tracks = frames.iter().map(|f| f["ops"]["cca"]["tracks"].as_u64().unwrap()).max().unwrap();
    assert!(max_tracks >= 3, "at most {max_tracks} tracks at once on the pedestrian clip");
    let csv = std::fs::read_to_string(dir.path().join("tracks.csv")).unwrap();
    let first: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    assert_eq!(first.len(), 10, "MOT rows have 10 columns");
    assert_eq!(&first[7..], &["-1", "-1", "-1"]);
    assert_eq!(lines(&dir.path().join("components.jsonl")).len(), 795);
    // The overlay video is a real video: read it back through morphoscope itself.
    let dir2 = tempfile::tempdir().unwrap();
    let out = bin().args(["run", "--backend", "cpu", "--quiet", "--no-video", "--set", "orientation.enabled=false", "--set", "segmentation.enabled=false", "--out"]).arg(dir2.path()).arg(dir.path().join("overlay.mp4")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let frames = lines(&dir2.path().join("frames.jsonl"));
    assert_eq!(frames.len(), 795);
    assert_eq!(frames[0]["width"], 768);
}

#[test]
fn max_frames_stops_early() {
    let dir = tempfile::tempdir().unwrap();
    let out = bin().args(["run", "test", "--backend", "cpu", "--quiet", "--no-video", "--max-frames", "5", "--out"]).arg(dir.path()).output().unwrap();
    assert!(out.status.success());
    assert_eq!(lines(&dir.path().join("frames.jsonl")).len(), 5);
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
        ("videotestsrc ! nosuchelement ! appsink name=sink".into(), "nosuchelement"),
        ("camera:7".into(), "video7"),
        ("test:nosuchpattern".into(), "unknown test pattern"),
    ];
    for (src, needle) in cases {
        let out = bin().args(["run", "--backend", "cpu", "--quiet", "--no-video", "--out"]).arg(dir.path().join("o")).arg(&src).output().unwrap();
        assert_clean_failure(&out, needle);
    }
}

#[test]
fn truncated_video_yields_the_decodable_frames_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    // Make a 120-frame MP4 with the index first (as streaming files are), then cut it in half.
    let full = dir.path().join("full.mp4");
    let status = std::process::Command::new("gst-launch-1.0")
        .args(["-q", "videotestsrc", "num-buffers=120", "!", "video/x-raw,width=320,height=240,framerate=30/1", "!", "videoconvert", "!", "video/x-raw,format=I420", "!", "x264enc", "!", "h264parse", "!", "mp4mux", "faststart=true", "!", "filesink"])
        .arg(format!("location={}", full.display()))
        .status();
    let Ok(status) = status else {
        eprintln!("gst-launch-1.0 not installed (scripts/setup.sh); skipped");
        return;
    };
    assert!(status.success());
    let bytes = std::fs::read(&full).unwrap();
    let cut = dir.path().join("cut.mp4");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let o = dir.path().join("o");
    let out = bin().args(["run", "--backend", "cpu", "--quiet", "--no-video", "--out"]).arg(&o).arg(&cut).output().unwrap();
    assert_clean_failure(&out, "ended early");
    let n = lines(&o.join("frames.jsonl")).len();
    assert!(n > 10 && n < 120, "decodable frames kept: {n}");
}

#[test]
fn invalid_config_is_rejected_with_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("bad.toml");
    std::fs::write(&cfg, "[pipeline]\nring_sise = 3\n").unwrap();
    let out = bin().args(["run", "test", "--out"]).arg(dir.path().join("o")).arg("--config").arg(&cfg).output().unwrap();
    assert_clean_failure(&out, "ring_sise");
    let out = bin().args(["run", "test", "--set", "pipeline.ring_size=0", "--out"]).arg(dir.path().join("o")).output().unwrap();
    assert_clean_failure(&out, "pipeline.ring_size");
    let out = bin().args(["run", "test", "--config", "/no/such.toml", "--out"]).arg(dir.path().join("o")).output().unwrap();
    assert_clean_failure(&out, "no/such.toml");
}

#[test]
fn cuda_backend_without_a_gpu_fails_cleanly_and_auto_falls_back() {
    if morphoscope::gpu::GpuContext::new(0).is_ok() {
        eprintln!("a GPU is present; this test is for machines without one");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = bin().args(["run", "test", "--backend", "cuda", "--out"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_clean_failure(&out, "cuda");
    let out = bin().env("RUST_LOG", "info").args(["run", "test", "--max-frames", "3", "--no-video", "--quiet", "--out"]).arg(dir.path()).output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().filter(|l| l.contains("backend:")).count(), 1, "{err}");
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
    let input = samples().join("fruits.jpg");
    if input.is_file() {
        let o = dir.path().join("g.png");
        let out = bin().args(["image", "--op", "gray", "--backend", "cpu", "--out"]).arg(&o).arg(&input).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let back = morphoscope::io::read_image(&o).unwrap();
        assert!(matches!(back, morphoscope::image::DynImage::Gray8(_)));
    }
    let fake = dir.path().join("fake.png");
    std::fs::write(&fake, "text").unwrap();
    let out = bin().args(["image", "--op", "gray", "--out", "x.png"]).arg(&fake).output().unwrap();
    assert_clean_failure(&out, "fake.png");
    assert_eq!(out.status.code(), Some(2));
    let out = bin().args(["image", "--op", "nope", "--out", "x.png"]).arg(&fake).output().unwrap();
    assert_clean_failure(&out, "unknown op");
    let out = bin().args(["image", "--op", "gray", "--out", "x.png", "/no/such.png"]).output().unwrap();
    assert_clean_failure(&out, "not found");
}

fn data(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(p)
}

#[test]
fn image_area_ops_equal_scikit_image_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    for (op, input, golden, area, conn) in [
        ("area-opening", "baboon_u8.npy", "baboon_u8_opening_a100_c8.npy", "100", "8"),
        ("area-closing", "baboon_u8.npy", "baboon_u8_closing_a50_c4.npy", "50", "4"),
        ("area-closing", "fruits_u16.npy", "fruits_u16_closing_a40_c8.npy", "40", "8"),
    ] {
        let o = dir.path().join(format!("{op}-{golden}"));
        let out = bin()
            .args(["image", "--backend", "cpu", "--op", op, "--area", area, "--connectivity", conn, "--out"])
            .arg(&o)
            .arg(data(&format!("maxtree/{input}")))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let got = morphoscope::io::read_image(&o).unwrap();
        let want = morphoscope::io::read_image(&data(&format!("maxtree/{golden}"))).unwrap();
        assert_eq!(got, want, "{op} {golden}: output dtype and pixels must equal scikit-image's");
    }
}

#[test]
fn image_label_orientation_and_linear_opening_write_their_outputs() {
    let input = samples().join("fruits.jpg");
    if !input.is_file() {
        assert!(std::env::var("MORPHOSCOPE_REQUIRE_SAMPLES").as_deref() != Ok("1"));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (json, npy) = (dir.path().join("stats.json"), dir.path().join("labels.npy"));
    let out = bin().args(["image", "--backend", "cpu", "--op", "label", "--threshold", "otsu", "--out"]).arg(&json).arg("--labels").arg(&npy).arg(&input).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stats: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let comps = stats["components"].as_array().unwrap();
    assert!(!comps.is_empty());
    assert_eq!(comps[0]["label"], 1);
    for key in ["area", "left", "top", "width", "height", "centroid", "moments"] {
        assert!(comps[0].get(key).is_some(), "{key} missing");
    }
    let labels = morphoscope::io::npy::read(&mut std::fs::File::open(&npy).unwrap()).unwrap();
    assert_eq!(labels.dtype, morphoscope::io::npy::NpyDtype::I32);
    assert_eq!(labels.shape, vec![stats["height"].as_u64().unwrap() as usize, stats["width"].as_u64().unwrap() as usize]);
    let max_label = labels.bytes.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).max().unwrap();
    assert_eq!(max_label as usize, comps.len());

    let od = dir.path().join("orient");
    let out = bin().args(["image", "--backend", "cpu", "--op", "orientation", "--length", "15", "--angles", "12", "--out"]).arg(&od).arg(&input).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for f in ["orientation.png", "angle.npy", "strength.npy", "spectrum.csv"] {
        assert!(od.join(f).is_file(), "{f} missing");
    }
    let csv = std::fs::read_to_string(od.join("spectrum.csv")).unwrap();
    assert_eq!(csv.lines().count(), 13);
    assert_eq!(csv.lines().next().unwrap(), "angle_deg,sum");

    let lo = dir.path().join("lo.png");
    let out = bin().args(["image", "--backend", "cpu", "--op", "linear-opening", "--length", "21", "--angle", "45", "--out"]).arg(&lo).arg(&input).output().unwrap();
    assert!(out.status.success());
    // An opening is anti-extensive: never above the grey input.
    let morphoscope::image::DynImage::Gray8(opened) = morphoscope::io::read_image(&lo).unwrap() else { panic!("8-bit output") };
    let gray = dir.path().join("g.png");
    assert!(bin().args(["image", "--backend", "cpu", "--op", "gray", "--out"]).arg(&gray).arg(&input).output().unwrap().status.success());
    let morphoscope::image::DynImage::Gray8(g) = morphoscope::io::read_image(&gray).unwrap() else { panic!() };
    assert!(opened.data().iter().zip(g.data()).all(|(o, i)| o <= i));
    assert!(opened.data() != g.data());
}

#[test]
fn image_felzenszwalb_equals_scikit_image_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let (npy, png) = (dir.path().join("seg.npy"), dir.path().join("seg.png"));
    let out = bin()
        .args(["image", "--backend", "cpu", "--op", "felzenszwalb", "--scale", "100", "--sigma", "0.8", "--min-size", "20", "--out"])
        .arg(&npy)
        .arg("--overlay")
        .arg(&png)
        .arg(data("segment/baboon_rgb.npy"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got = morphoscope::io::npy::read_file(&npy).unwrap().to_f64();
    let want = morphoscope::io::npy::read_file(&data("segment/baboon_rgb_k100_s0.8_m20.npy")).unwrap().to_f64();
    assert_eq!(got, want, "labels must equal scikit-image's felzenszwalb");
    let count = want.iter().fold(0.0f64, |m, &v| m.max(v)) as usize + 1;
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("{count} segments")));
    let morphoscope::image::DynImage::Rgb8(pic) = morphoscope::io::read_image(&png).unwrap() else { panic!("RGB overlay") };
    assert_eq!((pic.width(), pic.height()), (160, 160));
    // Bad parameters and outputs fail on one line.
    let out = bin().args(["image", "--op", "felzenszwalb", "--scale=-3", "--out"]).arg(&npy).arg(data("segment/baboon_rgb.npy")).output().unwrap();
    assert_clean_failure(&out, "scale");
    let out = bin().args(["image", "--op", "felzenszwalb", "--out"]).arg(&png).arg(data("segment/baboon_rgb.npy")).output().unwrap();
    assert_clean_failure(&out, ".npy");
}

#[test]
fn image_op_errors_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let input = data("maxtree/baboon_u8.npy");
    let o = dir.path().join("x.png");
    let out = bin().args(["image", "--op", "area-opening", "--out"]).arg(&o).arg(&input).output().unwrap();
    assert_clean_failure(&out, "--area");
    let out = bin().args(["image", "--op", "attribute-filter", "--attribute", "nope", "--threshold", "3", "--out"]).arg(&o).arg(&input).output().unwrap();
    assert_clean_failure(&out, "--attribute nope");
    let out = bin().args(["image", "--op", "linear-opening", "--length", "4", "--angle", "0", "--out"]).arg(&o).arg(&input).output().unwrap();
    assert_clean_failure(&out, "length");
    let out = bin().args(["image", "--op", "label", "--out"]).arg(&o).arg(&input).output().unwrap();
    assert_clean_failure(&out, ".json");
}
