//! Several sources in one run: a folder per stream with frames in = out for each, a bad source
//! that leaves the others running and is reported with its index, Ctrl+C that finishes every
//! stream, and the device list (`--device 0,1`, `pipeline.devices`).

use std::path::Path;
use std::time::{Duration, Instant};

use super::ends::Running;
use super::{bin, json, lines, quick};

/// frames.jsonl of `folder` has `n` lines indexed 0..n and timings.json says in = out = n.
fn assert_whole_stream(folder: &Path, n: u64, source: &str) {
    let frames = lines(&folder.join("frames.jsonl"));
    assert_eq!(frames.len() as u64, n, "{}", folder.display());
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f["index"], i as u64);
    }
    let t = json(&folder.join("timings.json"));
    assert_eq!(
        (t["frames_in"].as_u64(), t["frames_out"].as_u64()),
        (Some(n), Some(n)),
        "{t}"
    );
    assert_eq!(t["dropped"], 0);
    assert_eq!(t["complete"], true);
    assert_eq!(t["source"], source);
    assert!(folder.join("tracks.csv").is_file());
}

#[test]
fn two_test_sources_write_a_folder_each_with_frames_in_equal_out() {
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args(["run", "test:ball", "test:smpte", "--no-video", "--out"])
        .arg(dir.path())
        .args(quick(12, 160, 120))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_whole_stream(&dir.path().join("0"), 12, "test:ball");
    assert_whole_stream(&dir.path().join("1"), 12, "test:smpte");
    assert!(
        !dir.path().join("frames.jsonl").exists(),
        "nothing at the top level"
    );
    assert!(stdout.contains("morphoscope run: 2 streams"), "{stdout}");
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("| end of stream"))
        .collect();
    assert_eq!(rows.len(), 2, "a row per stream: {stdout}");
    assert!(
        rows[0].trim_start().starts_with("0 |") && rows[0].ends_with("test:ball"),
        "{}",
        rows[0]
    );
    assert!(
        stdout.contains("total: in 24 | out 24 | dropped 0"),
        "{stdout}"
    );
}

#[test]
fn a_missing_file_is_reported_with_its_index_and_the_other_stream_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.avi");
    let out = bin()
        .args(["run", "test:ball"])
        .arg(&missing)
        // Streams that fail where they parse (2) or where they open (1, 3) leave the same files.
        .args([
            "gopher://x/y",
            "videotestsrc ! nosuchelement ! appsink name=sink",
        ])
        .args(["--no-video", "--out"])
        .arg(dir.path().join("o"))
        .args(quick(12, 160, 120))
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_whole_stream(&dir.path().join("o/0"), 12, "test:ball");
    let files = |i: usize| {
        let mut names: Vec<String> = std::fs::read_dir(dir.path().join(format!("o/{i}")))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let base = ["events.jsonl", "frames.jsonl", "timings.json", "tracks.csv"];
    assert!(
        base.iter().all(|f| files(0).contains(&(*f).to_owned())),
        "{:?}",
        files(0)
    );
    for i in 1..4 {
        assert_eq!(files(i), base, "stream {i}'s folder");
        let t = json(&dir.path().join(format!("o/{i}/timings.json")));
        assert_eq!(t["complete"], true);
        assert!(t["ended"].as_str().unwrap().starts_with("error: "), "{t}");
        let events = lines(&dir.path().join(format!("o/{i}/events.jsonl")));
        assert_eq!(events.last().unwrap()["event"], "finished");
    }
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 3, "{stderr}");
    assert!(
        errors[0].starts_with("error: stream 1 (") && errors[0].contains("missing.avi"),
        "{}",
        errors[0]
    );
    assert!(
        stdout.contains("total: in 12 | out 12 | dropped 0"),
        "{stdout}"
    );
    let row = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("1 |"))
        .unwrap_or_default();
    assert!(row.contains("| error"), "{stdout}");
}

#[test]
fn ctrl_c_stops_every_stream_and_each_finishes_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        &["test:ball".to_owned(), "test:snow".to_owned()],
        &quick(0, 160, 120)[..],
    ]
    .concat();
    let mut run = Running::start(&args, dir.path());
    let deadline = Instant::now() + Duration::from_secs(120);
    let count = |i: usize| {
        std::fs::read_to_string(run.out(&format!("{i}/frames.jsonl")))
            .map_or(0, |s| s.lines().count())
    };
    while count(0) < 10 || count(1) < 10 {
        assert!(Instant::now() < deadline, "no frames: {}", run.stderr());
        std::thread::sleep(Duration::from_millis(50));
    }
    run.interrupt(Duration::from_secs(120));
    for i in 0..2 {
        let t = json(&run.out(&format!("{i}/timings.json")));
        assert_eq!(t["ended"], "SIGINT", "{t}");
        assert_eq!(t["complete"], true);
        let written = lines(&run.out(&format!("{i}/frames.jsonl"))).len() as u64;
        assert_eq!(t["frames_out"].as_u64(), Some(written));
        assert_eq!(
            t["frames_in"].as_u64(),
            Some(written),
            "endless test sources block, none dropped"
        );
    }
    assert!(run.stdout().contains("| SIGINT"), "{}", run.stdout());
}

#[test]
fn device_lists_on_the_command_line_and_in_the_config() {
    let dir = tempfile::tempdir().unwrap();
    for (device, needle) in [
        ("0,x", "`x` is not a device ordinal"),
        ("1,1", "device 1 listed twice"),
    ] {
        let out = bin()
            .args(["run", "test:ball", "--device", device, "--out"])
            .arg(dir.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(needle), "--device {device}: {err}");
    }
    let cfg = dir.path().join("devices.toml");
    std::fs::write(&cfg, "[pipeline]\ndevices = [0, 0]\n").unwrap();
    let out = bin()
        .args(["run", "test:ball", "--config"])
        .arg(&cfg)
        .arg("--out")
        .arg(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("pipeline.devices"), "{err}");
    // The CPU backend takes a list (devices apply to CUDA only): both forms run.
    for extra in [
        &["--device", "0,1"][..],
        &["--set", "pipeline.devices=[0, 1]"][..],
    ] {
        let o = dir.path().join(extra[0].trim_start_matches('-'));
        let out = bin()
            .args(["run", "test:ball", "test:smpte", "--no-video", "--out"])
            .arg(&o)
            .args(extra)
            .args(quick(5, 160, 120))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{extra:?}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            stdout.lines().filter(|l| l.contains("| cpu ")).count(),
            2,
            "{stdout}"
        );
    }
}
