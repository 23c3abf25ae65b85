//! A `--publish` topic prefix the broker would mangle or drop is refused at start, with the rule
//! it breaks and the prefix as typed (nothing is analysed, no broker is needed).

use super::bin;

#[test]
fn prefixes_the_broker_cannot_take_are_refused_naming_the_rule() {
    let long = "c".repeat(65_536);
    let deep = vec!["a"; 700].join("/");
    let dir = tempfile::tempdir().unwrap();
    for (prefix, says, shown) in [
        (long.as_str(), "65535", "`cccccccccc"),
        (deep.as_str(), "700 levels", "`a/a/a/a/"),
        ("cams\tnorth", "control characters", "`cams\\tnorth`"),
        ("$SYS/x", "starts with '$'", "`$SYS/x`"),
        ("a/+/b", "wildcard", "`a/+/b`"),
    ] {
        let out = bin()
            .args([
                "run",
                "test:ball",
                "--quiet",
                "--backend",
                "cpu",
                "--publish",
            ])
            .arg(format!("mqtt://127.0.0.1:1/{prefix}"))
            .arg("--out")
            .arg(dir.path().join("o"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{prefix:.40}: {err:.400}");
        assert!(
            err.contains(says) && err.contains(shown),
            "{prefix:.40}: {err:.400}"
        );
        assert!(
            err.len() < 1000,
            "the error quotes the whole prefix: {err:.400}"
        );
        assert!(!dir.path().join("o").join("frames.jsonl").exists());
    }
}

#[test]
fn a_prefix_that_is_not_utf8_is_refused() {
    use std::os::unix::ffi::OsStrExt;
    let url = std::ffi::OsStr::from_bytes(b"mqtt://127.0.0.1:1/cams\xff");
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args([
            "run",
            "test:ball",
            "--quiet",
            "--backend",
            "cpu",
            "--publish",
        ])
        .arg(url)
        .arg("--out")
        .arg(dir.path().join("o"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("not UTF-8") && err.contains("cams"), "{err}");
}
