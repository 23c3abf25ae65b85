//! A live source that goes away and comes back, against a real RTSP server the test starts on
//! 127.0.0.1 (GStreamer's RTSP server through Python, `tests/rtsp/server.py`): killed for 5 s
//! mid-run and started again, the run goes on, analyses the frames after the gap, says so in
//! `events.jsonl` and never reuses a track id; a stop while reconnecting ends the run at once
//! with every file finished; a source lost past `give_up_seconds` ends with an error naming it.
//!
//! Without the server's Python bindings (`gir1.2-gst-rtsp-server-1.0`, `python3-gi`) the tests
//! say so and skip, unless `MORPHOSCOPE_REQUIRE_RTSP=1` (CI), where they fail.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::ends::Running;
use super::{FAST, decoded, json, lines};

/// A running `tests/rtsp/server.py`; killed when dropped.
struct RtspServer {
    child: Child,
}

impl RtspServer {
    /// Starts the server on `port` and waits until it listens; `None` (skip) when the RTSP
    /// server's bindings are missing and not required.
    fn start(port: u16) -> Option<Self> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/rtsp/server.py");
        // Its messages go to a file (a pipe nobody reads could fill up and stall it).
        let log = tempfile::NamedTempFile::new().unwrap();
        let mut child = std::process::Command::new("/usr/bin/python3")
            .arg(script)
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log.reopen().unwrap()))
            .spawn()
            .unwrap();
        let mut line = String::new();
        let _ = BufReader::new(child.stdout.take().unwrap()).read_line(&mut line);
        if line.trim() == "ready" {
            return Some(Self { child });
        }
        let _ = child.kill();
        let _ = child.wait();
        let why = std::fs::read_to_string(log.path()).unwrap_or_default();
        assert!(
            std::env::var("MORPHOSCOPE_REQUIRE_RTSP").as_deref() != Ok("1"),
            "the RTSP test server does not start (scripts/setup.sh installs \
             gir1.2-gst-rtsp-server-1.0 and python3-gi): {why}"
        );
        eprintln!(
            "skipped: the RTSP test server does not start (gir1.2-gst-rtsp-server-1.0, python3-gi): {why}"
        );
        None
    }
}

impl Drop for RtspServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port of 127.0.0.1 nobody listens on now.
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// `run` options for the camera at `port`: quick analyses, a short stall timeout and backoff.
fn camera(port: u16, extra: &[&str]) -> Vec<String> {
    let mut v = vec![format!("rtsp://127.0.0.1:{port}/test")];
    v.extend(FAST.iter().map(|s| (*s).to_owned()));
    for set in [
        "source.timeout_seconds=3",
        "source.reconnect.initial_seconds=0.5",
        "source.reconnect.max_seconds=1",
        // One set of files (a live source is otherwise cut into 10-minute segments).
        "output.segment_seconds=0",
    ] {
        v.extend(["--set".to_owned(), set.to_owned()]);
    }
    v.extend(["--quiet".to_owned()]);
    v.extend(extra.iter().map(|s| (*s).to_owned()));
    v
}

/// The events of `events.jsonl` so far.
fn events(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The kinds of `events`, less the failed attempts (their number depends on timing).
fn changes(events: &[serde_json::Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .filter(|k| *k != "attempt_failed")
        .collect()
}

/// Waits (at most `limit`) until `events.jsonl` holds `n` events of `kind`.
fn wait_for_event(path: &Path, kind: &str, n: usize, limit: Duration) {
    let deadline = Instant::now() + limit;
    while events(path).iter().filter(|e| e["event"] == kind).count() < n {
        assert!(
            Instant::now() < deadline,
            "no {n} `{kind}` events within {limit:?}: {:?}",
            events(path)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// frames.jsonl lines now.
fn frame_count(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |s| s.lines().count())
}

#[test]
fn a_camera_that_goes_away_for_5_s_comes_back_and_a_stop_while_reconnecting_is_prompt() {
    let port = free_port();
    let Some(server) = RtspServer::start(port) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut run = Running::start(&camera(port, &[]), dir.path());
    let events_file = run.out("events.jsonl");
    run.wait_for_frames(30);
    drop(server);
    let killed = Instant::now();
    wait_for_event(&events_file, "lost", 1, Duration::from_secs(20));
    std::thread::sleep(Duration::from_secs(5).saturating_sub(killed.elapsed()));
    let server = RtspServer::start(port).unwrap();
    wait_for_event(&events_file, "back", 1, Duration::from_secs(30));
    let back_at = frame_count(&run.out("frames.jsonl"));
    run.wait_for_frames(back_at + 30);
    // Away again, and stopped while it reconnects.
    drop(server);
    wait_for_event(&events_file, "lost", 2, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(700));
    let took = run.interrupt(Duration::from_secs(30));
    assert!(
        took < Duration::from_secs(2),
        "SIGINT while reconnecting took {:?}",
        took
    );

    // events.jsonl: started, lost, back after the gap, lost, finished by SIGINT.
    let ev = events(&events_file);
    assert_eq!(
        changes(&ev),
        ["started", "lost", "back", "lost", "finished"],
        "{ev:?}"
    );
    let back = ev.iter().find(|e| e["event"] == "back").unwrap();
    let gap = back["gap_seconds"].as_f64().unwrap();
    assert!((4.5..30.0).contains(&gap), "gap {gap} s: {back}");
    assert!(
        ev.iter()
            .all(|e| e["stream"] == 0 && e["time"].as_str().is_some_and(|t| t.ends_with('Z')))
    );
    assert_eq!(ev.last().unwrap()["ended"], "SIGINT");

    // Every frame written, indices counting on across the gap, timestamps monotonic with it.
    let frames = lines(&run.out("frames.jsonl"));
    let t = json(&run.out("timings.json"));
    assert_eq!(t["complete"], true);
    assert_eq!(t["losses"], 2, "{t}");
    assert_eq!(t["frames_out"].as_u64(), Some(frames.len() as u64));
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f["index"], i as u64);
    }
    let pts: Vec<u64> = frames
        .iter()
        .map(|f| f["pts_nanos"].as_u64().unwrap())
        .collect();
    assert!(pts.windows(2).all(|w| w[1] > w[0]), "timestamps go back");
    let gap_at = pts
        .windows(2)
        .position(|w| w[1] - w[0] > 3_000_000_000)
        .expect("the gap in the timestamps")
        + 1;
    assert!(frames.len() - gap_at >= 30, "frames after the gap analysed");

    // Tracks end at the gap: no id of before is used after it (MOT rows: 1-based frames).
    let rows = std::fs::read_to_string(run.out("tracks.csv")).unwrap();
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for row in rows.lines().filter(|r| !r.starts_with("frame")) {
        let mut cols = row.split(',');
        let frame: usize = cols.next().unwrap().parse().unwrap();
        let id: u64 = cols.next().unwrap().parse().unwrap();
        if frame - 1 < gap_at {
            before.push(id);
        } else {
            after.push(id);
        }
    }
    assert!(
        !before.is_empty() && !after.is_empty(),
        "the ball is tracked on both sides"
    );
    let last_before = before.iter().max().unwrap();
    assert!(
        after.iter().all(|id| id > last_before),
        "a track id of before the gap is used after it: {before:?} / {after:?}"
    );

    // The overlay video plays on across the gap.
    assert_eq!(decoded(&run.out("overlay.mkv")).len(), frames.len());
}

#[test]
fn a_camera_lost_past_give_up_ends_the_stream_with_an_error_naming_it() {
    let port = free_port();
    let Some(server) = RtspServer::start(port) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut run = Running::start(
        &camera(
            port,
            &["--no-video", "--set", "source.reconnect.give_up_seconds=2"],
        ),
        dir.path(),
    );
    run.wait_for_frames(10);
    drop(server);
    assert_eq!(
        run.wait(Duration::from_secs(30)),
        Some(1),
        "{}",
        run.stderr()
    );
    let stderr = run.stderr();
    assert!(
        stderr.contains("gave up reconnecting")
            && stderr.contains(&format!("rtsp://127.0.0.1:{port}/test")),
        "{stderr}"
    );
    let ev = events(&run.out("events.jsonl"));
    assert!(ev.iter().any(|e| e["event"] == "attempt_failed"), "{ev:?}");
    assert_eq!(ev.last().unwrap()["event"], "finished");
    assert_eq!(json(&run.out("timings.json"))["complete"], true);
}

#[test]
fn a_camera_down_at_the_start_is_waited_for() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let mut run = Running::start(&camera(port, &["--no-video"]), dir.path());
    let events_file = run.out("events.jsonl");
    wait_for_event(&events_file, "attempt_failed", 1, Duration::from_secs(20));
    let Some(_server) = RtspServer::start(port) else {
        return;
    };
    wait_for_event(&events_file, "back", 1, Duration::from_secs(30));
    run.wait_for_frames(20);
    run.interrupt(Duration::from_secs(30));
    let ev = events(&events_file);
    assert_eq!(
        changes(&ev),
        ["started", "lost", "back", "finished"],
        "{ev:?}"
    );
    let frames = lines(&run.out("frames.jsonl"));
    assert!(frames.len() >= 20);
    assert_eq!(frames[0]["index"], 0);
}
