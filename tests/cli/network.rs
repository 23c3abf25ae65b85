//! Network sources against a small HTTP server the test starts on 127.0.0.1: a file served over
//! HTTP is a file (paced, nothing dropped), and a missing file, a refused connection and a server
//! that never answers each end the run with one line naming the URL and the cause.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use super::{FAST, assert_clean_failure, bin, faststart_h264, json};

/// What the server answers for a path.
#[derive(Clone)]
pub(super) enum Reply {
    /// 200 with this body.
    File(Vec<u8>),
    /// Accepts the request and never answers.
    Silent,
}

/// Serves `routes` (anything else: 404) on an ephemeral port of 127.0.0.1; returns the port.
pub(super) fn serve(routes: Vec<(&'static str, Reply)>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let routes = routes.clone();
            std::thread::spawn(move || answer(stream, &routes));
        }
    });
    port
}

fn answer(mut stream: TcpStream, routes: &[(&'static str, Reply)]) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    let path = head.split_whitespace().nth(1).unwrap_or("/");
    match routes.iter().find(|(p, _)| *p == path).map(|(_, r)| r) {
        Some(Reply::File(body)) => {
            let header = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: video/mp4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream
                .write_all(header.as_bytes())
                .and_then(|()| stream.write_all(body));
        }
        Some(Reply::Silent) => std::thread::sleep(Duration::from_secs(60)),
        None => {
            let _ = stream.write_all(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    }
}

#[test]
fn an_http_file_is_paced_like_a_file_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clip = dir.path().join("clip.mp4");
    // The index first (faststart), as files meant for streaming are.
    let made = faststart_h264(
        &clip,
        &["videotestsrc", "pattern=ball", "num-buffers=90"],
        "video/x-raw,width=160,height=120,framerate=30/1",
    );
    if made.is_none() {
        return;
    }
    let port = serve(vec![(
        "/clip.mp4",
        Reply::File(std::fs::read(&clip).unwrap()),
    )]);
    let o = dir.path().join("o");
    let out = bin()
        .args(["run", "--quiet", "--no-video"])
        .args(FAST)
        .arg("--out")
        .arg(&o)
        .arg(format!("http://127.0.0.1:{port}/clip.mp4"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("frames: in 90 | out 90 | dropped 0 |"),
        "{stdout}"
    );
    let t = json(&o.join("timings.json"));
    assert_eq!(t["live"], false, "an HTTP file is not live");
    assert!(t["decoder"].as_str().is_some(), "{t}");
}

#[test]
fn network_errors_name_the_url_and_the_cause() {
    let port = serve(vec![("/silent.mp4", Reply::Silent)]);
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (format!("http://127.0.0.1:{port}/missing.mp4"), "404"),
        (
            format!("http://127.0.0.1:{closed}/clip.mp4"),
            "connection refused",
        ),
        (
            format!("http://127.0.0.1:{port}/silent.mp4"),
            "no answer within 2 s",
        ),
    ];
    for (url, cause) in cases {
        let out = bin()
            .args([
                "run",
                "--backend",
                "cpu",
                "--quiet",
                "--no-video",
                "--set",
                "source.timeout_seconds=2",
                "--out",
            ])
            .arg(dir.path().join("o"))
            .arg(&url)
            .output()
            .unwrap();
        assert_clean_failure(&out, cause);
        assert_clean_failure(&out, &url);
    }
}
