//! A stop signal wherever the run waits: for a source that is still opening (a server that
//! accepts and never answers), and for a broker that never acknowledges (the end of a run with
//! `--publish`). Each must end the run at once with 128 + the signal and finished files;
//! `timings.json` keeps saying where the run stands while it waits.

use std::path::Path;
use std::time::{Duration, Instant};

use super::ends::Running;
use super::json;
use super::network::{Reply, serve};
use super::quick;

/// A broker URL where nothing listens (port 1 of the loopback).
const NO_BROKER: &str = "mqtt://127.0.0.1:1/p";

/// Waits (at most 60 s) until `timings.json` of `folder` satisfies `ok`; returns it.
fn wait_for_timings(folder: &Path, ok: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let t = std::fs::read_to_string(folder.join("timings.json"))
            .ok()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok());
        if let Some(t) = t.filter(|t| ok(t)) {
            return t;
        }
        assert!(
            Instant::now() < deadline,
            "timings.json of {} never got there",
            folder.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `run` options: `args`, then a quick test pattern of `frames` frames, publishing to a broker
/// that is not there and waiting up to 50 s for it at the end.
fn publishing(args: &[&str], frames: u32) -> Vec<String> {
    let mut v: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    v.extend(quick(frames, 64, 48));
    v.extend(
        [
            "--no-video",
            "--quiet",
            "--publish",
            NO_BROKER,
            "--set",
            "publish.flush_seconds=50",
        ]
        .map(str::to_owned),
    );
    v
}

#[test]
fn a_signal_ends_the_wait_for_the_broker_of_several_streams() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = Running::start(&publishing(&["test:ball", "test:smpte"], 20), dir.path());
    for i in ["0", "1"] {
        wait_for_timings(&dir.path().join("out").join(i), |t| t["complete"] == true);
    }
    // Both streams are finished: the run now waits for the broker.
    std::thread::sleep(Duration::from_millis(500));
    let took = run.interrupt(Duration::from_secs(60));
    assert!(
        took < Duration::from_secs(3),
        "the wait for the broker went on after SIGINT: {:?}",
        took
    );
    let stdout = run.stdout();
    let line = stdout
        .lines()
        .find(|l| l.starts_with("publish "))
        .unwrap_or_else(|| panic!("no publisher line: {stdout}"));
    assert!(line.contains("acknowledged 0 | dropped "), "{line}");
    assert!(
        !line.contains("dropped 0"),
        "what is unacknowledged is dropped: {line}"
    );
}

#[test]
fn a_signal_ends_the_wait_for_the_broker_and_timings_say_where_the_run_stands() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = Running::start(&publishing(&["test:ball"], 20), dir.path());
    let folder = dir.path().join("out");
    // While the run waits for the broker, timings.json is the final one and is kept current.
    let t = wait_for_timings(&folder, |t| t["publish"]["flushing"] == true);
    assert_eq!(
        (
            t["complete"].as_bool(),
            t["frames_in"].as_u64(),
            t["frames_out"].as_u64()
        ),
        (Some(true), Some(20), Some(20)),
        "{t}"
    );
    assert_eq!(
        std::fs::read_to_string(folder.join("frames.jsonl"))
            .unwrap()
            .lines()
            .count(),
        20
    );
    let asked = Instant::now();
    run.signal(libc::SIGTERM);
    assert_eq!(
        run.wait(Duration::from_secs(60)),
        Some(143),
        "{}",
        run.stderr()
    );
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "the wait for the broker went on after SIGTERM: {:?}",
        asked.elapsed()
    );
    let t = json(&folder.join("timings.json"));
    let p = &t["publish"];
    assert!(p.get("flushing").is_none(), "{t}");
    assert_eq!(p["acked"], 0, "{t}");
    assert_eq!(p["dropped"], p["offered"], "unacknowledged is dropped: {t}");
    assert!(p["offered"].as_u64().unwrap() >= 20, "{t}");
}

#[test]
fn a_signal_interrupts_a_source_that_is_still_opening() {
    let port = serve(vec![("/x.mp4", Reply::Silent)]);
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "test:ball".to_owned(),
        format!("http://127.0.0.1:{port}/x.mp4"),
    ];
    args.extend(quick(0, 64, 48));
    args.extend(
        [
            "--no-video",
            "--quiet",
            "--set",
            "source.timeout_seconds=60",
        ]
        .map(str::to_owned),
    );
    let mut run = Running::start(&args, dir.path());
    let first = dir.path().join("out").join("0");
    wait_for_timings(&first, |t| t["frames_out"].as_u64().is_some_and(|n| n > 0));
    // Stream 1 waits for its server (60 s before it gives up).
    let took = run.interrupt(Duration::from_secs(90));
    assert!(
        took < Duration::from_secs(5),
        "SIGINT waited for the opening source: {:?}",
        took
    );
    let t = json(&first.join("timings.json"));
    assert_eq!(
        (t["complete"].as_bool(), t["ended"].as_str()),
        (Some(true), Some("SIGINT"))
    );
    let stdout = run.stdout();
    let row = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("1 |"))
        .unwrap_or_else(|| panic!("no row for stream 1: {stdout}"));
    assert!(row.contains("SIGINT"), "{row}");
}
