//! Secrets never leave the process: a broker password in a config file that does not parse,
//! and the user-info of a source URL, are masked in every line printed and every file written.

use std::path::Path;

use super::{FAST, bin};

/// Every file under `dir`, read as text.
fn files_text(dir: &Path) -> String {
    let mut all = String::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                all.push_str(&files_text(&p));
            } else {
                all.push_str(&String::from_utf8_lossy(&std::fs::read(&p).unwrap()));
            }
        }
    }
    all
}

/// Neither the output nor the files under `dir` show `secret`.
fn assert_nothing_shows(out: &std::process::Output, dir: &Path, secret: &str) -> String {
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains(secret), "`{secret}` printed: {text}");
    let files = files_text(dir);
    assert!(!files.contains(secret), "`{secret}` written: {files}");
    assert!(!text.contains("panicked"), "{text}");
    text
}

#[test]
fn a_config_error_never_quotes_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("login.toml");
    for (text, says) in [
        (
            "[publish]\nusername = \"cam\"\npassword = \"hunter2-secret\n",
            "line 3",
        ),
        (
            "[publish]\npassword = \"hunter2-secret\"\npassword = \"hunter2-secret\"\n",
            "duplicate key",
        ),
        ("[publish]\npassword = 987654321\n", "publish.password"),
    ] {
        std::fs::write(&config, text).unwrap();
        let out = bin()
            .args(["run", "test:ball", "--quiet", "--config"])
            .arg(&config)
            .arg("--out")
            .arg(dir.path().join("o"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{text:?}");
        let shown = assert_nothing_shows(&out, &dir.path().join("o"), "hunter2-secret");
        assert!(!shown.contains("987654321"), "{shown}");
        assert!(shown.contains(says), "{text:?}: {shown}");
    }
}

#[test]
fn source_credentials_are_masked_in_errors_summaries_and_files() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://admin:s3cr3t-pw@127.0.0.1:{closed}/x.mp4");
    let dir = tempfile::tempdir().unwrap();
    // Alone: the run's error line.
    let out = bin()
        .args(["run", "--quiet", "--no-video"])
        .args(FAST)
        .arg("--out")
        .arg(dir.path().join("one"))
        .arg(&url)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let shown = assert_nothing_shows(&out, dir.path(), "s3cr3t-pw");
    assert!(shown.contains("http://***@127.0.0.1"), "{shown}");
    // Beside a good source: the summary table, the stream's error line and its folder.
    let out = bin()
        .args(["run", "--no-video"])
        .args(FAST)
        .args([
            "--set",
            "source.test.frames=5",
            "--set",
            "source.test.width=160",
        ])
        .args(["--set", "source.test.height=120", "--out"])
        .arg(dir.path().join("two"))
        .arg("test:ball")
        .arg(&url)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let shown = assert_nothing_shows(&out, dir.path(), "s3cr3t-pw");
    assert!(
        shown.contains("error: stream 1 (http://***@127.0.0.1"),
        "{shown}"
    );
    // A pipeline description's password property.
    let out = bin()
        .args(["run", "--quiet", "--no-video"])
        .args(FAST)
        .arg("--out")
        .arg(dir.path().join("three"))
        .arg("rtspsrc location=rtsp://127.0.0.1:1/x user-id=admin user-pw=s3cr3t-pw ! nosuchelement ! appsink name=sink")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_nothing_shows(&out, dir.path(), "s3cr3t-pw");
}
