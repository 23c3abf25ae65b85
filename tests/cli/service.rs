//! `run --listen`: a service on 127.0.0.1 driven over HTTP as an orchestrator drives it —
//! streams added and removed, settings patched live, metrics scraped (by `promtool` and by a
//! real Prometheus server when installed: `MORPHOSCOPE_REQUIRE_PROMETHEUS=1` in CI makes their
//! absence a failure), a token off loopback, and hundreds of bad requests that must leave the
//! pipeline delivering frames.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::ends::Running;
use super::{assert_clean_failure, bin, lines, quick};

/// A service process and an HTTP client for it.
struct Served {
    run: Running,
    base: String,
    agent: ureq::Agent,
    token: Option<String>,
}

/// Options of a quick service: the CPU, small test frames paced like a camera.
fn service_args(extra: &[&str]) -> Vec<String> {
    let mut args = vec!["--listen".to_owned(), "127.0.0.1:0".to_owned()];
    args.extend(quick(0, 64, 48));
    args.extend(["--set".into(), "source.pacing=realtime".into()]);
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args
}

impl Served {
    fn start(args: &[String], dir: &Path) -> Self {
        let run = Running::start(args, dir);
        let deadline = Instant::now() + Duration::from_secs(60);
        let base = loop {
            let out = run.stdout();
            if let Some(at) = out.find("listening on http://") {
                let rest = &out[at + "listening on ".len()..];
                break rest.split_whitespace().next().unwrap().to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "the service did not listen within 60 s: {}",
                run.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            // A connection per request: the server closes one whose body it refused.
            .max_idle_connections(0)
            .max_idle_connections_per_host(0)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        Self {
            run,
            base,
            agent,
            token: None,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn auth<B>(&self, r: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.token {
            Some(t) => r.header("Authorization", format!("Bearer {t}")),
            None => r,
        }
    }

    /// The status and body; status 0 with the error when the connection failed (the server
    /// may close it while a client still sends a body it refuses).
    fn answer(r: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> (u16, String) {
        match r {
            Ok(mut r) => {
                let status = r.status().as_u16();
                (status, r.body_mut().read_to_string().unwrap())
            }
            Err(e) => (0, e.to_string()),
        }
    }

    fn get(&self, path: &str) -> (u16, String) {
        Self::answer(self.auth(self.agent.get(self.url(path))).call())
    }

    fn delete(&self, path: &str) -> (u16, String) {
        Self::answer(self.auth(self.agent.delete(self.url(path))).call())
    }

    fn post(&self, path: &str, body: &str) -> (u16, String) {
        Self::answer(
            self.auth(self.agent.post(self.url(path)))
                .header("Content-Type", "application/json")
                .send(body),
        )
    }

    fn patch(&self, path: &str, body: &str) -> (u16, String) {
        Self::answer(
            self.auth(self.agent.patch(self.url(path)))
                .header("Content-Type", "application/json")
                .send(body),
        )
    }

    /// The answer's JSON, which must come with `status`.
    fn expect(&self, (status, body): (u16, String), want: u16) -> Value {
        assert_eq!(status, want, "{body}\nstderr: {}", self.run.stderr());
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
    }

    fn folder(&self, id: &str) -> PathBuf {
        self.run.out(id)
    }

    fn frames(&self, id: &str) -> Vec<Value> {
        let p = self.folder(id).join("frames.jsonl");
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Waits until stream `id` wrote at least `n` frames; they are returned.
    fn wait_frames(&self, id: &str, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let frames = self.frames(id);
            if frames.len() >= n {
                return frames;
            }
            assert!(
                Instant::now() < deadline,
                "stream {id}: {} frames, not {n}, within 60 s: {}",
                frames.len(),
                self.run.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Whether a frame's record holds analysis `op`.
fn has(frame: &Value, op: &str) -> bool {
    frame["ops"].get(op).is_some()
}

/// The value of the metric line that starts with `series ` in `text`.
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// `tool` when installed; else `None`, a failure when `MORPHOSCOPE_REQUIRE_PROMETHEUS=1`.
fn prometheus_tool(tool: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(tool))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var("MORPHOSCOPE_REQUIRE_PROMETHEUS").as_deref() != Ok("1"),
            "{tool} missing: run scripts/setup.sh (Debian's prometheus package)"
        );
        eprintln!("{tool} not installed; its part of the test is skipped");
    }
    found
}

#[test]
fn a_service_adds_scrapes_patches_and_removes_streams() {
    let dir = tempfile::tempdir().unwrap();
    let media = dir.path().join("media");
    std::fs::create_dir(&media).unwrap();
    std::fs::write(dir.path().join("outside.avi"), b"not under the media root").unwrap();
    let root = format!("service.media_root={}", media.display());
    let mut s = Served::start(&service_args(&["--set", &root]), dir.path());
    assert_eq!(s.expect(s.get("/healthz"), 200)["status"], "ok");
    assert_eq!(s.expect(s.get("/streams"), 200), json!([]));
    assert_eq!(s.expect(s.get("/readyz"), 200)["ready"], true);

    // Two streams added over HTTP: one named, one numbered.
    let named = s.expect(
        s.post("/streams", r#"{"source": "test:ball", "id": "door-1"}"#),
        201,
    );
    assert_eq!(named["id"], "door-1");
    assert_eq!(
        s.expect(s.post("/streams", r#"{"source": "test:snow"}"#), 201)["id"],
        "0"
    );
    let conflict = s.expect(
        s.post("/streams", r#"{"source": "test", "id": "door-1"}"#),
        409,
    );
    assert!(conflict["error"].as_str().unwrap().contains("door-1"));
    s.wait_frames("door-1", 20);
    s.wait_frames("0", 20);
    let rows = s.expect(s.get("/streams"), 200);
    let ids: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["0", "door-1"]);
    assert!(
        rows.as_array()
            .unwrap()
            .iter()
            .all(|r| r["state"] == "running")
    );
    assert_eq!(s.expect(s.get("/readyz"), 200)["ready"], true);

    // A scrape: the streams' series, and promtool's lint of the exposition.
    let (status, text) = s.get("/metrics");
    assert_eq!(status, 200);
    let out = metric(&text, "morphoscope_frames_out_total{stream=\"door-1\"}").unwrap();
    assert!(out >= 20.0, "{text}");
    assert_eq!(
        metric(&text, "morphoscope_stream_up{stream=\"0\"}"),
        Some(1.0)
    );
    assert!(text.contains("morphoscope_latency_seconds_bucket{stream=\"0\",le=\"+Inf\"}"));
    assert!(
        text.contains("morphoscope_region_seconds_count{stream=\"door-1\",region=\"cca_cpu\"}")
    );
    assert!(text.contains("morphoscope_build_info{version="));
    if let Some(promtool) = prometheus_tool("promtool") {
        let mut check = Command::new(promtool)
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        check
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let checked = check.wait_with_output().unwrap();
        assert!(
            checked.status.success(),
            "promtool check metrics: {}{}",
            String::from_utf8_lossy(&checked.stdout),
            String::from_utf8_lossy(&checked.stderr)
        );
    }

    // Settings patched for every stream, then for one: they show in the next frames' records.
    let before = s.frames("0").len();
    assert!(has(&s.frames("0")[0], "cca"));
    let ops = s.expect(s.patch("/settings", r#"{"cca.enabled": false}"#), 200);
    assert_eq!(ops["cca"]["enabled"], false);
    let after = s.wait_frames("0", before + 15);
    assert!(
        !has(after.last().unwrap(), "cca"),
        "{}",
        after.last().unwrap()
    );
    assert!(!has(s.wait_frames("door-1", 1).last().unwrap(), "cca"));
    let before = s.frames("door-1").len();
    s.expect(
        s.patch("/streams/door-1/settings", r#"{"maxtree.enabled": false}"#),
        200,
    );
    let door = s.wait_frames("door-1", before + 15);
    assert!(!has(door.last().unwrap(), "maxtree"));
    assert!(
        has(s.frames("0").last().unwrap(), "maxtree"),
        "the other stream keeps it"
    );
    let settings = s.expect(s.get("/settings"), 200);
    assert_eq!(settings["cca"]["enabled"], false);
    assert_eq!(settings["maxtree"]["enabled"], true);
    assert!(settings["service"].get("token").is_none());

    // Refusals, each with its status and a message naming what is wrong.
    let bad_key = s.expect(s.patch("/settings", r#"{"maxtree.nope": 1}"#), 400);
    assert!(
        bad_key["error"].as_str().unwrap().contains("maxtree.nope"),
        "{bad_key}"
    );
    let frozen = s.expect(
        s.patch("/settings", r#"{"source.timeout_seconds": 1}"#),
        400,
    );
    assert!(
        frozen["error"]
            .as_str()
            .unwrap()
            .contains("source.timeout_seconds")
    );
    let range = s.expect(s.patch("/settings", r#"{"pipeline.ring_size": 99}"#), 400);
    assert!(
        range["error"]
            .as_str()
            .unwrap()
            .contains("pipeline.ring_size")
    );
    s.expect(s.delete("/streams/nope"), 404);
    s.expect(
        s.patch("/streams/nope/settings", r#"{"cca.enabled": true}"#),
        404,
    );
    let pipeline = s.expect(
        s.post(
            "/streams",
            r#"{"source": "videotestsrc ! appsink name=sink"}"#,
        ),
        403,
    );
    assert!(pipeline["error"].as_str().unwrap().contains("pipeline"));
    let outside = dir.path().join("outside.avi").display().to_string();
    for source in [outside.as_str(), "../outside.avi", "/etc/passwd"] {
        let body = json!({ "source": source }).to_string();
        let refused = s.expect(s.post("/streams", &body), 403);
        assert!(
            refused["error"].as_str().unwrap().contains("refused"),
            "{refused}"
        );
    }
    assert_eq!(
        s.expect(s.get("/streams"), 200).as_array().unwrap().len(),
        2
    );

    // Removal: the stream's files are finished exactly as on Ctrl+C.
    let summary = s.expect(s.delete("/streams/door-1"), 200);
    assert_eq!(summary["ended"], "removed");
    assert_eq!(summary["error"], Value::Null);
    let written = lines(&s.folder("door-1").join("frames.jsonl")).len();
    assert_eq!(summary["frames_out"], written as u64);
    assert_eq!(summary["frames_in"], summary["frames_out"]);
    let timings: Value = serde_json::from_str(
        &std::fs::read_to_string(s.folder("door-1").join("timings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(timings["frames_out"], written as u64);
    assert_eq!(timings["ended"], "removed");
    let events = lines(&s.folder("door-1").join("events.jsonl"));
    assert_eq!(events.last().unwrap()["event"], "finished");
    assert_eq!(events.last().unwrap()["ended"], "removed");
    assert!(super::decoded(&s.folder("door-1").join("overlay.mkv")).len() >= written - 1);
    s.expect(s.delete("/streams/door-1"), 404);
    let (_, text) = s.get("/metrics");
    assert!(!text.contains("door-1"), "its series go with it");
    assert_eq!(
        s.expect(s.get("/streams"), 200).as_array().unwrap().len(),
        1
    );

    // The service stops on SIGINT, finishing the stream it still runs.
    s.run.interrupt(Duration::from_secs(30));
    let stdout = s.run.stdout();
    assert!(stdout.contains("SIGINT"), "{stdout}");
    let left = lines(&s.folder("0").join("frames.jsonl"));
    assert_eq!(
        lines(&s.folder("0").join("events.jsonl")).last().unwrap()["ended"],
        "SIGINT"
    );
    assert!(left.len() >= 50);
}

/// Sends `request` as is on a new connection and returns what came back (maybe nothing).
fn raw(base: &str, request: &[u8]) -> String {
    let addr = base.trim_start_matches("http://");
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let _ = tcp.write_all(request);
    let mut answer = Vec::new();
    let _ = tcp.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

#[test]
fn hundreds_of_bad_requests_leave_the_pipeline_delivering() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = service_args(&[]);
    args.push("test:ball".into());
    let mut s = Served::start(&args, dir.path());
    let first = s.wait_frames("0", 10).len();
    let big = format!(r#"{{"source": "{}"}}"#, "x".repeat(100 * 1024));
    let long_id = json!({ "source": "test", "id": "a".repeat(65) }).to_string();
    let json_cases: Vec<(&str, &str, String, u16)> = vec![
        ("POST", "/streams", "{".into(), 400),
        ("POST", "/streams", "[]".into(), 400),
        ("POST", "/streams", "null".into(), 400),
        ("POST", "/streams", r#"{"source": 5}"#.into(), 400),
        (
            "POST",
            "/streams",
            r#"{"source": "test", "extra": 1}"#.into(),
            400,
        ),
        ("POST", "/streams", r#"{"id": "x"}"#.into(), 400),
        ("POST", "/streams", r#"{"source": "test:nope"}"#.into(), 400),
        ("POST", "/streams", r#"{"source": ""}"#.into(), 400),
        (
            "POST",
            "/streams",
            r#"{"source": "test", "id": "../x"}"#.into(),
            400,
        ),
        (
            "POST",
            "/streams",
            r#"{"source": "test", "id": "a/b"}"#.into(),
            400,
        ),
        ("POST", "/streams", long_id, 400),
        ("POST", "/streams", r#"{"source": "ftp://h/x"}"#.into(), 403),
        (
            "POST",
            "/streams",
            r#"{"source": "file:///etc/passwd"}"#.into(),
            403,
        ),
        ("POST", "/streams", big, 413),
        ("PATCH", "/settings", "{}".into(), 400),
        ("PATCH", "/settings", "\u{0}\u{1}garbage".into(), 400),
        (
            "PATCH",
            "/settings",
            r#"{"cca": {"enabled": false}}"#.into(),
            400,
        ),
        ("PATCH", "/settings", r#"{"cca.enabled": null}"#.into(), 400),
        (
            "PATCH",
            "/settings",
            r#"{"cca.enabled": "maybe"}"#.into(),
            400,
        ),
        (
            "PATCH",
            "/settings",
            r#"{"maxtree.threshold": -5}"#.into(),
            400,
        ),
        (
            "PATCH",
            "/settings",
            r#"{"publish.password": "x"}"#.into(),
            400,
        ),
        ("PATCH", "/settings", r#"{"nokey": 1}"#.into(), 400),
        (
            "PATCH",
            "/streams/zzz/settings",
            r#"{"cca.enabled": true}"#.into(),
            404,
        ),
        ("DELETE", "/streams/zzz", String::new(), 404),
        ("GET", "/nowhere", String::new(), 404),
        ("GET", "/streams/zzz", String::new(), 404),
        ("PUT", "/streams", "{}".into(), 405),
        ("POST", "/metrics", "{}".into(), 405),
    ];
    let mut sent = 0;
    while sent < 200 {
        for (method, path, body, want) in &json_cases {
            let answer = match *method {
                "POST" => s.post(path, body),
                "PATCH" => s.patch(path, body),
                "DELETE" => s.delete(path),
                "PUT" => Served::answer(s.agent.put(s.url(path)).send(body.as_str())),
                _ => s.get(path),
            };
            // A body over the limit is answered 413 before the client has sent it all, and the
            // connection closed: the client may see either.
            let closed_early = *want == 413 && answer.0 == 0;
            assert!(
                answer.0 == *want || closed_early,
                "{method} {path} {body:.80}: {} {}",
                answer.0,
                answer.1
            );
            sent += 1;
        }
    }
    // Requests no client library would send: malformed HTTP, huge or missing headers, a body
    // longer than announced, a connection closed mid-request.
    // (Each closes its connection, so that the answer is read to its end at once.)
    let huge_header = format!(
        "GET /streams HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-A: {}\r\n\r\n",
        "a".repeat(40_000)
    );
    let junk: Vec<(Vec<u8>, &str)> = vec![
        (b"\x00\x01\x02garbage\r\n\r\n".to_vec(), " 400 "),
        (b"GET\r\n\r\n".to_vec(), " 400 "),
        (b"GET /streams HTTP/9.9\r\n\r\n".to_vec(), " 400 "),
        (huge_header.into_bytes(), " 431 "),
        (b"GET /%ff%fe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(), " 404 "),
        (b"GET /streams/%2e%2e HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec(), " 404 "),
        (
            b"POST /streams HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n{}".to_vec(),
            " 413 ",
        ),
        (
            b"POST /streams HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec(),
            " 400 ",
        ),
        // A body shorter than announced: the server stops waiting for it after 10 s.
        (
            b"POST /streams HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{\"so".to_vec(),
            " 408 ",
        ),
        (
            b"PATCH /settings HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n[]"
                .to_vec(),
            " 400 ",
        ),
    ];
    for (request, want) in &junk {
        let answer = raw(&s.base, request);
        assert!(
            answer.contains(want),
            "{:.60?} answered {answer:.200}",
            String::from_utf8_lossy(request)
        );
        sent += 1;
    }
    assert!(sent >= 200);
    // The service still serves, and its stream still delivers.
    assert_eq!(s.expect(s.get("/healthz"), 200)["status"], "ok");
    let now = s.frames("0").len();
    assert!(now > first, "frames went on during the requests");
    s.wait_frames("0", now + 10);
    let rows = s.expect(s.get("/streams"), 200);
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["state"], "running");
    s.run.interrupt(Duration::from_secs(30));
    assert!(!s.run.stderr().contains("panicked"), "{}", s.run.stderr());
}

#[test]
fn off_loopback_a_token_is_required_and_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    // No token: refused at start.
    let out = bin()
        .args(["run", "--listen", "0.0.0.0:0", "--backend", "cpu", "--out"])
        .arg(dir.path().join("none"))
        .output()
        .unwrap();
    assert_clean_failure(&out, "not a loopback address");
    // Never from the command line.
    let out = bin()
        .args([
            "run",
            "--listen",
            "0.0.0.0:0",
            "--set",
            "service.token=hunter2",
            "--out",
        ])
        .arg(dir.path().join("none"))
        .output()
        .unwrap();
    assert_clean_failure(&out, "never taken from the command line");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("hunter2"));
    // From the config file, on every address: every endpoint but /healthz asks for it.
    let config = dir.path().join("service.toml");
    std::fs::write(&config, "[service]\ntoken = \"s3cret-token\"\n").unwrap();
    let mut args = service_args(&["--config", config.to_str().unwrap()]);
    args[1] = "0.0.0.0:0".into();
    args.push("test:ball".into());
    let mut s = Served::start(&args, dir.path());
    let port = s.base.rsplit(':').next().unwrap().to_owned();
    s.base = format!("http://127.0.0.1:{port}");
    assert_eq!(s.get("/healthz").0, 200);
    for path in ["/metrics", "/streams", "/settings", "/readyz", "/nowhere"] {
        assert_eq!(s.get(path).0, 401, "{path}");
    }
    assert_eq!(s.post("/streams", r#"{"source": "test"}"#).0, 401);
    s.token = Some("s3cret-tokeN".into());
    assert_eq!(s.get("/streams").0, 401, "a wrong token");
    s.token = Some("s3cret-token".into());
    s.wait_frames("0", 5);
    assert_eq!(
        s.expect(s.get("/streams"), 200).as_array().unwrap().len(),
        1
    );
    let settings = s.expect(s.get("/settings"), 200);
    assert!(!settings.to_string().contains("s3cret"), "{settings}");
    s.run.interrupt(Duration::from_secs(30));
    let shown = format!("{}{}", s.run.stdout(), s.run.stderr());
    assert!(!shown.contains("s3cret"), "{shown}");
}

/// A free port on 127.0.0.1 (closed again: a race with other processes is unlikely).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn a_real_prometheus_scrapes_the_service() {
    let Some(prometheus) = prometheus_tool("prometheus") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut args = service_args(&[]);
    args.push("test:ball".into());
    let mut s = Served::start(&args, dir.path());
    // The scrape config users are given, pointed at this service and scraping every second.
    let shipped = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/prometheus.yml"),
    )
    .unwrap();
    assert!(shipped.contains("127.0.0.1:9900"), "{shipped}");
    let config = shipped
        .replace("127.0.0.1:9900", s.base.trim_start_matches("http://"))
        .replace("scrape_interval: 15s", "scrape_interval: 1s");
    let config_file = dir.path().join("prometheus.yml");
    std::fs::write(&config_file, config).unwrap();
    let web = format!("127.0.0.1:{}", free_port());
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let mut server = Command::new(prometheus)
        .arg(format!("--config.file={}", config_file.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address={web}"))
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap();
    let query = format!(
        "http://{web}/api/v1/query?query=morphoscope_frames_out_total%7Bstream%3D%220%22%7D"
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    let value = loop {
        let answer = s.agent.get(&query).call().ok().and_then(|mut r| {
            serde_json::from_str::<Value>(&r.body_mut().read_to_string().ok()?).ok()
        });
        let value = answer.as_ref().and_then(|a| {
            a["data"]["result"][0]["value"][1]
                .as_str()
                .and_then(|v| v.parse::<f64>().ok())
        });
        if let Some(v) = value.filter(|v| *v > 0.0) {
            break v;
        }
        if Instant::now() > deadline {
            let _ = server.kill();
            panic!(
                "Prometheus did not scrape a frame count within 90 s: {answer:?}\n{}",
                std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let _ = server.kill();
    let _ = server.wait();
    assert!(value > 0.0);
    s.run.interrupt(Duration::from_secs(30));
}
