//! `morphoscope run --publish` against a real mosquitto on 127.0.0.1 (`publish/broker.rs`): every
//! frame's record arrives as written to `frames.jsonl`, status messages arrive once a second; a
//! broker that is not there costs only dropped messages (the run ends in bounded time and counts
//! them); a wrong password is one clear error line and the password is never printed; the login
//! from the config file works; `mqtts://` delivers with the CA file and refuses an unknown
//! certificate; a broker that goes away and comes back is reconnected; a stream added to a
//! service (`run --listen`) publishes under its id. Skips without mosquitto
//! unless `MORPHOSCOPE_REQUIRE_MQTT=1`.

// Helpers of the tests fail loudly, as the tests do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "publish/broker.rs"]
mod broker;

use std::path::Path;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use broker::{Broker, free_port, mosquitto};

/// Frames of the test pattern each run analyses.
const FRAMES: usize = 45;

fn bin() -> Command {
    let mut c = Command::cargo_bin("morphoscope").unwrap();
    c.env("RUST_LOG", "warn")
        .env(
            "XDG_CACHE_HOME",
            std::env::temp_dir().join("morphoscope-test-cache"),
        )
        .env_remove("MORPHOSCOPE_MQTT_USERNAME")
        .env_remove("MORPHOSCOPE_MQTT_PASSWORD");
    c
}

/// `run` of [`FRAMES`] small test-pattern frames at 30 fps in real time (1.5 s: at least one
/// status a second besides the last), CPU backend, the slow analyses off, no video.
fn run_args(out: &Path, url: &str) -> Vec<String> {
    let mut v: Vec<String> = [
        "run",
        "test",
        "--quiet",
        "--no-video",
        "--backend",
        "cpu",
        "--publish",
        url,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for set in [
        "orientation.enabled=false".to_owned(),
        "segmentation.enabled=false".to_owned(),
        format!("source.test.frames={FRAMES}"),
        "source.test.width=160".to_owned(),
        "source.test.height=120".to_owned(),
        "source.test.fps=30".to_owned(),
        "source.pacing=realtime".to_owned(),
    ] {
        v.extend(["--set".to_owned(), set]);
    }
    v.extend(["--out".to_owned(), out.display().to_string()]);
    v
}

fn frame_lines(out: &Path) -> Vec<String> {
    std::fs::read_to_string(out.join("frames.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn timings(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("timings.json")).unwrap()).unwrap()
}

/// Checks that every frame record and the status messages reached `sub`, and the counts.
fn assert_delivered(broker: &Broker, sub: &broker::Subscriber, out: &Path, stdout: &str) {
    let lines = frame_lines(out);
    assert_eq!(lines.len(), FRAMES, "frames.jsonl");
    let records = sub.wait_for("ms/0/frames", FRAMES, Duration::from_secs(10));
    assert_eq!(records.len(), FRAMES, "records received");
    for (record, line) in records.iter().zip(&lines) {
        assert_eq!(record, line, "a record differs from its frames.jsonl line");
        let a: serde_json::Value = serde_json::from_str(record).unwrap();
        let b: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(a, b);
    }
    let statuses = sub.wait_for("ms/0/status", 2, Duration::from_secs(5));
    assert!(
        statuses.len() >= 2,
        "a status a second and one at the end: {statuses:?}"
    );
    let last: serde_json::Value = serde_json::from_str(statuses.last().unwrap()).unwrap();
    assert_eq!(last["stream"], 0);
    assert_eq!(last["frames_out"], FRAMES as u64, "{last}");
    assert_eq!(last["frames_in"], FRAMES as u64, "{last}");
    assert_eq!(last["publish_dropped"], 0, "{last}");
    assert_eq!(last["errors"], 0, "{last}");
    assert!(last["fps"].as_f64().unwrap() >= 0.0 && last["unix_ms"].as_u64().unwrap() > 0);
    let messages = (records.len() + statuses.len()) as u64;
    let publish = &timings(out)["publish"];
    assert_eq!(publish["offered"], messages, "{publish}");
    assert_eq!(publish["acked"], messages, "{publish}");
    assert_eq!(publish["dropped"], 0, "{publish}");
    assert_eq!(publish["connected_ever"], true, "{publish}");
    let summary = format!(
        "publish mqtt://127.0.0.1:{}/ms: sent {messages} | acknowledged {messages} | dropped 0",
        broker.port
    );
    assert!(stdout.contains(&summary), "`{summary}` not in {stdout}");
}

#[test]
fn every_frame_record_and_the_status_arrive() {
    let Some(binary) = mosquitto() else { return };
    let broker = Broker::start(&binary, None);
    let sub = broker.subscribe("ms/#");
    let dir = tempfile::tempdir().unwrap();
    let url = format!("mqtt://127.0.0.1:{}/ms", broker.port);
    let out = bin().args(run_args(dir.path(), &url)).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}\n{}", broker.log());
    assert_delivered(&broker, &sub, dir.path(), &stdout);
}

#[test]
fn the_login_from_the_config_file_is_used() {
    let Some(binary) = mosquitto() else { return };
    let broker = Broker::start(&binary, Some(("camera", "s3cret-pass")));
    let sub = broker.subscribe("ms/#");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("login.toml");
    std::fs::write(
        &config,
        "[publish]\nusername = \"camera\"\npassword = \"s3cret-pass\"\n",
    )
    .unwrap();
    let out_dir = dir.path().join("out");
    let url = format!("mqtt://127.0.0.1:{}/ms", broker.port);
    let out = bin()
        .arg("--config")
        .arg(&config)
        .args(run_args(&out_dir, &url))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}\n{}", broker.log());
    assert_delivered(&broker, &sub, &out_dir, &stdout);
    assert!(!stdout.contains("s3cret-pass") && !stderr.contains("s3cret-pass"));
}

#[test]
fn a_wrong_password_is_one_clear_error_and_never_printed() {
    let Some(binary) = mosquitto() else { return };
    let broker = Broker::start(&binary, Some(("camera", "right-pass")));
    let dir = tempfile::tempdir().unwrap();
    let url = format!("mqtt://127.0.0.1:{}/ms", broker.port);
    let out = bin()
        .env("MORPHOSCOPE_MQTT_USERNAME", "camera")
        .env("MORPHOSCOPE_MQTT_PASSWORD", "wrong-pass-xyz")
        .args(run_args(dir.path(), &url))
        .args(["--set", "publish.flush_seconds=1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "one error line at the end: {stderr}");
    assert!(
        errors[0].contains("refused the login")
            && (errors[0].contains("not authorised")
                || errors[0].contains("bad user name or password")),
        "{}",
        errors[0]
    );
    let logged = stderr.matches("the broker refused the login").count();
    assert_eq!(logged, 1, "the refusal is logged once: {stderr}");
    for text in [&stdout, &stderr] {
        assert!(
            !text.contains("wrong-pass-xyz"),
            "the password is printed: {text}"
        );
    }
    // The files are written all the same; nothing reached the broker.
    assert_eq!(frame_lines(dir.path()).len(), FRAMES);
    let publish = &timings(dir.path())["publish"];
    assert_eq!(publish["acked"], 0, "{publish}");
    assert!(
        publish["dropped"].as_u64().unwrap() > FRAMES as u64,
        "{publish}"
    );
    assert!(publish["refused"].as_str().unwrap().contains("password"));
    assert!(stdout.contains("login refused"), "{stdout}");
}

#[test]
fn mqtts_with_the_ca_file_delivers_and_without_it_the_certificate_is_refused() {
    let Some(binary) = mosquitto() else { return };
    let Some(broker) = Broker::start_tls(&binary) else {
        return;
    };
    let (tls_port, ca) = broker.tls.clone().unwrap();
    let sub = broker.subscribe("ms/#");
    let dir = tempfile::tempdir().unwrap();
    let url = format!("mqtts://127.0.0.1:{tls_port}/ms");
    let out = bin()
        .args(run_args(dir.path(), &url))
        .args(["--set", &format!("publish.ca_file={}", ca.display())])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}\n{}", broker.log());
    let lines = frame_lines(dir.path());
    let records = sub.wait_for("ms/0/frames", FRAMES, Duration::from_secs(10));
    assert_eq!(records, lines, "every record over TLS");
    assert!(
        stdout.contains(&format!("publish mqtts://127.0.0.1:{tls_port}/ms: sent")),
        "{stdout}"
    );
    // The system's roots do not know the test CA: the broker's certificate is refused.
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args(run_args(dir.path(), &url))
        .args(["--set", "publish.flush_seconds=1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("broker never reached"), "{stdout}");
    assert!(stderr.to_lowercase().contains("certificate"), "{stderr}");
}

#[test]
fn a_broker_that_goes_away_and_comes_back_is_reconnected() {
    let Some(binary) = mosquitto() else { return };
    let mut broker = Broker::start(&binary, None);
    let dir = tempfile::tempdir().unwrap();
    let url = format!("mqtt://127.0.0.1:{}/ms", broker.port);
    // 120 frames at 30 fps: 4 s; the broker is away from about 1 s to about 2 s.
    let mut args = run_args(dir.path(), &url);
    let frames = args
        .iter()
        .position(|a| a.starts_with("source.test.frames="))
        .unwrap();
    args[frames] = "source.test.frames=120".to_owned();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_morphoscope"))
        .env("RUST_LOG", "warn")
        .env_remove("MORPHOSCOPE_MQTT_USERNAME")
        .env_remove("MORPHOSCOPE_MQTT_PASSWORD")
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    broker.kill();
    std::thread::sleep(Duration::from_millis(1000));
    broker.restart();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("connection lost"), "{stderr}");
    assert!(stderr.contains("connected again"), "{stderr}");
    let publish = &timings(dir.path())["publish"];
    let offered = publish["offered"].as_u64().unwrap();
    let acked = publish["acked"].as_u64().unwrap();
    assert!(offered > 120, "{publish}");
    // What was sent after the broker came back (a good half of the run) was acknowledged.
    assert!(acked >= 60, "{publish}");
    assert_eq!(
        publish["dropped"].as_u64(),
        Some(offered - acked),
        "{publish}"
    );
    assert!(publish["errors"].as_u64().unwrap() >= 1, "{publish}");
}

#[test]
fn a_broker_that_is_not_there_costs_dropped_messages_only() {
    // No mosquitto needed: nothing listens on the port.
    let dir = tempfile::tempdir().unwrap();
    let url = format!("mqtt://127.0.0.1:{}/ms", free_port());
    let started = Instant::now();
    let out = bin()
        .args(run_args(dir.path(), &url))
        .args(["--set", "publish.flush_seconds=1"])
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // 1.5 s of frames, 1 s of flushing, the start: far below this bound.
    assert!(elapsed < Duration::from_secs(30), "took {elapsed:?}");
    assert_eq!(frame_lines(dir.path()).len(), FRAMES);
    let publish = &timings(dir.path())["publish"];
    let offered = publish["offered"].as_u64().unwrap();
    assert!(offered > FRAMES as u64, "frames and statuses: {publish}");
    assert_eq!(publish["dropped"].as_u64(), Some(offered), "{publish}");
    assert_eq!(publish["acked"], 0, "{publish}");
    assert_eq!(publish["connected_ever"], false, "{publish}");
    assert!(
        stdout.contains(&format!("dropped {offered} | broker never reached")),
        "{stdout}"
    );
    assert!(stderr.contains("cannot connect"), "{stderr}");
}

#[test]
fn a_stream_added_to_a_service_publishes_under_its_id() {
    let Some(binary) = mosquitto() else { return };
    let broker = Broker::start(&binary, None);
    let sub = broker.subscribe("ms/#");
    let dir = tempfile::tempdir().unwrap();
    let url = format!("mqtt://127.0.0.1:{}/ms", broker.port);
    // The options of `run_args` without its source: a service, streams added over HTTP.
    let mut args = run_args(&dir.path().join("out"), &url);
    args.retain(|a| a != "test");
    args.extend(["--listen".into(), "127.0.0.1:0".into()]);
    let stdout_file = dir.path().join("stdout");
    let mut service = std::process::Command::new(env!("CARGO_BIN_EXE_morphoscope"))
        .env("RUST_LOG", "warn")
        .args(&args)
        .stdout(std::fs::File::create(&stdout_file).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let base = loop {
        let text = std::fs::read_to_string(&stdout_file).unwrap_or_default();
        if let Some(rest) = text.split("listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "the service did not listen");
        std::thread::sleep(Duration::from_millis(50));
    };
    let added = ureq::post(format!("{base}/streams"))
        .send(r#"{"source": "test", "id": "door-1"}"#)
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert_eq!(added, r#"{"id":"door-1"}"#);
    let records = sub.wait_for("ms/door-1/frames", FRAMES, Duration::from_secs(60));
    let statuses = sub.wait_for("ms/door-1/status", 2, Duration::from_secs(10));
    // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
    assert_eq!(
        unsafe { libc::kill(service.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    assert_eq!(service.wait().unwrap().code(), Some(130));
    let lines = frame_lines(&dir.path().join("out").join("door-1"));
    assert_eq!(lines.len(), FRAMES);
    assert_eq!(records, lines, "each record as written to frames.jsonl");
    let last: serde_json::Value = serde_json::from_str(statuses.last().unwrap()).unwrap();
    assert_eq!(
        (&last["id"], &last["stream"]),
        (&"door-1".into(), &0.into()),
        "{last}"
    );
    assert!(
        sub.messages()
            .iter()
            .all(|(t, _)| t.starts_with("ms/door-1/"))
    );
}
