//! Segments and retention (`output.segment_seconds`, `keep_hours`, `keep_gb`): a run cut into
//! segment folders, each with its own playable overlay video and the lines of exactly the frames
//! it holds; retention deleting the oldest whole segments by size; and a full disk (a real
//! tmpfs) that, with retention set, deletes the oldest segment and goes on.

use std::path::{Path, PathBuf};

use super::ends::Tmpfs;
use super::{bin, decoded, json, lines, quick};

/// `run` options of a real-time test pattern (the ball) of `seconds` at 10 fps, 160x120,
/// segmented every `segment` seconds, plus `extra` settings.
fn paced(seconds: u32, segment: u32, extra: &[&str]) -> Vec<String> {
    let mut v = quick(seconds * 10, 160, 120);
    for s in [
        "source.test.fps=10".to_owned(),
        "source.pacing=realtime".to_owned(),
        format!("output.segment_seconds={segment}"),
    ]
    .into_iter()
    .chain(extra.iter().map(|s| (*s).to_owned()))
    {
        v.extend(["--set".to_owned(), s]);
    }
    v.push("--quiet".to_owned());
    v
}

/// `run ARGS --out OUT OPTIONS`, which must succeed; its stderr.
fn run_ok(args: &[&str], out: &Path, options: Vec<String>) -> String {
    let run = bin()
        .arg("run")
        .args(args)
        .arg("--out")
        .arg(out)
        .args(options)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "{stderr}");
    stderr
}

/// The segment folders of a stream's folder, oldest first.
fn segment_dirs(out: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(out.join("segments"))
        .map(|r| r.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// The events of `events.jsonl` of `kind`.
fn events_of(out: &Path, kind: &str) -> Vec<serde_json::Value> {
    lines(&out.join("events.jsonl"))
        .into_iter()
        .filter(|e| e["event"] == kind)
        .collect()
}

#[test]
fn a_30_s_run_in_10_s_segments_gives_playable_segments_whose_lines_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o");
    run_ok(&["test:ball"], &out, paced(30, 10, &[]));
    let t = json(&out.join("timings.json"));
    assert_eq!(t["frames_out"], 300, "{t}");
    assert_eq!(t["segments"]["seconds"], 10);
    // Cut on the UTC clock's multiples of 10 s: 3 whole segments, and a 4th unless the run
    // started on a boundary.
    let dirs = segment_dirs(&out);
    assert!((3..=4).contains(&dirs.len()), "{dirs:?}");
    assert_eq!(t["segments"]["opened"], dirs.len());
    assert!(!out.join("frames.jsonl").exists() && !out.join("overlay.mkv").exists());
    let mut next_index = 0u64;
    let mut ids_by_segment = Vec::new();
    for d in &dirs {
        let frames = lines(&d.join("frames.jsonl"));
        assert!(!frames.is_empty(), "{d:?} is empty");
        for f in &frames {
            assert_eq!(f["index"], next_index, "{d:?}: frame indices count on");
            next_index += 1;
        }
        // Each segment's video plays alone and holds its frames.
        assert_eq!(decoded(&d.join("overlay.mkv")).len(), frames.len(), "{d:?}");
        let rows = std::fs::read_to_string(d.join("tracks.csv")).unwrap();
        let ids: std::collections::BTreeSet<u64> = rows
            .lines()
            .filter(|r| !r.starts_with("frame"))
            .map(|r| r.split(',').nth(1).unwrap().parse().unwrap())
            .collect();
        ids_by_segment.push(ids);
    }
    assert_eq!(
        next_index, 300,
        "the segments' lines add up to the frames out"
    );
    // The ball's track runs on across the boundaries: one id in consecutive segments.
    for pair in ids_by_segment.windows(2) {
        assert!(
            pair[0].intersection(&pair[1]).next().is_some(),
            "no track id runs across a boundary: {ids_by_segment:?}"
        );
    }
    let opened = events_of(&out, "segment_opened");
    let closed = events_of(&out, "segment_closed");
    assert_eq!((opened.len(), closed.len()), (dirs.len(), dirs.len()));
    let closed_frames: u64 = closed.iter().map(|e| e["frames"].as_u64().unwrap()).sum();
    assert_eq!(closed_frames, 300);
    let last = lines(&out.join("events.jsonl")).pop().unwrap();
    assert_eq!(
        last["event"], "finished",
        "the last event, after the last segment's"
    );
}

#[test]
fn retention_deletes_the_oldest_whole_segments() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o");
    // 1 s segments of a few kB each; keep at most 30 kB.
    run_ok(
        &["test:ball", "--no-video"],
        &out,
        paced(8, 1, &["output.keep_gb=0.00003"]),
    );
    let deleted = events_of(&out, "retention_deleted");
    assert!(!deleted.is_empty(), "nothing deleted");
    assert!(
        deleted.iter().all(|e| e["reason"] == "keep_gb"),
        "{deleted:?}"
    );
    let closed = events_of(&out, "segment_closed");
    let left = segment_dirs(&out);
    let left_names: Vec<String> = left
        .iter()
        .map(|d| d.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    // The oldest went: every deleted segment is older than every one left.
    for e in &deleted {
        let name = e["segment"].as_str().unwrap();
        assert!(
            left_names.iter().all(|l| l.as_str() > name),
            "{name} vs {left_names:?}"
        );
    }
    assert_eq!(deleted.len() + left.len(), closed.len());
    // Whole segments: the frames left plus those of the deleted add up to the frames out.
    let frames_of = |name: &str| {
        closed
            .iter()
            .find(|e| e["segment"] == name)
            .map(|e| e["frames"].as_u64().unwrap())
            .unwrap()
    };
    let in_deleted: u64 = deleted
        .iter()
        .map(|e| frames_of(e["segment"].as_str().unwrap()))
        .sum();
    let in_left: u64 = left
        .iter()
        .map(|d| lines(&d.join("frames.jsonl")).len() as u64)
        .sum();
    assert_eq!(in_deleted + in_left, 80);
    assert_eq!(json(&out.join("timings.json"))["frames_out"], 80);
}

#[test]
fn with_retention_a_full_disk_deletes_the_oldest_segment_and_the_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let disk = match Tmpfs::mount(&dir.path().join("disk"), "512k") {
        Ok(d) => d,
        Err(why) => {
            eprintln!("cannot mount a tmpfs here ({why}); needs root or CAP_SYS_ADMIN; skipped");
            return;
        }
    };
    let out = disk.0.join("o");
    // Snow does not compress: about 60 kB of video a second at 500 kbit/s, so 15 s of it do not
    // fit in 512 kB (without the components, the line files stay small).
    let settings = [
        "output.keep_gb=100",
        "output.video_kbps=500",
        "cca.enabled=false",
    ];
    let stderr = run_ok(&["test:snow"], &out, paced(15, 1, &settings));
    let freed = events_of(&out, "retention_deleted");
    assert!(!freed.is_empty(), "the disk never filled: {stderr}");
    assert!(
        freed.iter().all(|e| e["reason"] == "disk full"),
        "{freed:?}"
    );
    let t = json(&out.join("timings.json"));
    assert_eq!(t["frames_out"], 150, "{t}");
    assert_eq!(t["complete"], true);
    // Whole segments went: those left hold whole lines, and their frames plus those of the
    // deleted ones are every frame.
    let closed = events_of(&out, "segment_closed");
    let frames_of = |name: &serde_json::Value| {
        closed
            .iter()
            .filter(|e| &e["segment"] == name)
            .map(|e| e["frames"].as_u64().unwrap())
            .sum::<u64>()
    };
    let in_deleted: u64 = freed.iter().map(|e| frames_of(&e["segment"])).sum();
    let left = segment_dirs(&out);
    let in_left: u64 = left
        .iter()
        .map(|d| lines(&d.join("frames.jsonl")).len() as u64)
        .sum();
    assert_eq!(in_deleted + in_left, 150);
    // The newest segment's video plays.
    let newest = left.last().unwrap();
    assert_eq!(
        decoded(&newest.join("overlay.mkv")).len(),
        lines(&newest.join("frames.jsonl")).len()
    );
}
