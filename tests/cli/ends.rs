//! How a run ends: Ctrl+C and SIGTERM sent to a real child process, a second signal, a hard kill
//! (SIGKILL), and a full disk (a small tmpfs mounted by the test where it may mount one). In
//! every case the files must stay readable: whole JSON lines, a `timings.json` that parses, an
//! overlay video that decodes.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::{assert_clean_failure, decoded, json, lines, quick};

/// A `morphoscope run` in the background, its stdout and stderr in files of `dir`.
pub(super) struct Running {
    child: Child,
    dir: PathBuf,
}

impl Running {
    pub(super) fn start(args: &[String], dir: &Path) -> Self {
        let stdout = std::fs::File::create(dir.join("stdout")).unwrap();
        let stderr = std::fs::File::create(dir.join("stderr")).unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_morphoscope"))
            .env("RUST_LOG", "warn")
            .env(
                "XDG_CACHE_HOME",
                std::env::temp_dir().join("morphoscope-test-cache"),
            )
            .arg("run")
            .args(args)
            .arg("--out")
            .arg(dir.join("out"))
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(stderr))
            .spawn()
            .unwrap();
        Self {
            child,
            dir: dir.to_owned(),
        }
    }

    pub(super) fn out(&self, file: &str) -> PathBuf {
        self.dir.join("out").join(file)
    }

    /// Waits until frames.jsonl holds at least `n` lines.
    pub(super) fn wait_for_frames(&mut self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let have =
                std::fs::read_to_string(self.out("frames.jsonl")).map_or(0, |s| s.lines().count());
            if have >= n {
                return;
            }
            assert!(
                self.child.try_wait().unwrap().is_none(),
                "the run ended before {n} frames: {}",
                self.stderr()
            );
            assert!(Instant::now() < deadline, "no {n} frames within 120 s");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(super) fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on the pid of a child we spawned and have not reaped.
        let r = unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
        assert_eq!(r, 0, "kill failed");
    }

    /// Sends SIGINT and waits (at most `limit`) for the exit, which must be 130; how long it
    /// took.
    pub(super) fn interrupt(&mut self, limit: Duration) -> Duration {
        let asked = Instant::now();
        self.signal(libc::SIGINT);
        assert_eq!(self.wait(limit), Some(130), "{}", self.stderr());
        asked.elapsed()
    }

    /// Waits for the exit (at most `limit`); its code (`None`: killed by a signal).
    pub(super) fn wait(&mut self, limit: Duration) -> Option<i32> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("still running after {limit:?}: {}", self.stderr());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(super) fn stdout(&self) -> String {
        std::fs::read_to_string(self.dir.join("stdout")).unwrap_or_default()
    }

    pub(super) fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("stderr")).unwrap_or_default()
    }
}

impl Drop for Running {
    /// A test that failed leaves no process behind.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Every line of frames.jsonl parses and the indices run 0, 1, 2, …
fn whole_lines(p: &Path) -> usize {
    let frames = lines(p);
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f["index"], i as u64, "frames.jsonl line {i}");
    }
    frames.len()
}

/// `frames: in A | out B | dropped C` from the summary.
fn summary_counts(stdout: &str) -> (u64, u64, u64) {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("frames: in "))
        .unwrap_or_else(|| panic!("no summary: {stdout}"));
    let n: Vec<u64> = line
        .split(['|', ' '])
        .filter_map(|w| w.parse().ok())
        .collect();
    (n[0], n[1], n[2])
}

#[test]
fn ctrl_c_finishes_the_frames_taken_and_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = Running::start(
        &[&["test:ball".to_string()], &quick(0, 160, 120)[..]].concat(),
        dir.path(),
    );
    run.wait_for_frames(15);
    run.interrupt(Duration::from_secs(60));
    let (frames_in, out, dropped) = summary_counts(&run.stdout());
    assert_eq!(
        (frames_in, dropped),
        (out, 0),
        "a file-like source loses nothing: {}",
        run.stdout()
    );
    assert!(
        run.stderr().contains("SIGINT: stopping"),
        "{}",
        run.stderr()
    );
    assert_eq!(whole_lines(&run.out("frames.jsonl")) as u64, out);
    let t = json(&run.out("timings.json"));
    assert_eq!(
        (t["complete"].as_bool(), t["ended"].as_str()),
        (Some(true), Some("SIGINT"))
    );
    assert_eq!(
        (t["frames_out"].as_u64(), t["video_frames"].as_u64()),
        (Some(out), Some(out))
    );
    assert_eq!(
        decoded(&run.out("overlay.mkv")).len() as u64,
        out,
        "every frame is in the video"
    );
}

#[test]
fn a_second_signal_exits_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // Slow analyses behind a long queue: finishing after the first signal would take seconds.
    let mut args = vec!["test:ball".to_string(), "--backend".into(), "cpu".into()];
    for s in [
        "source.test.frames=0",
        "source.test.width=320",
        "source.test.height=240",
        "pipeline.queue=64",
        "pipeline.ring_size=8",
    ] {
        args.extend(["--set".to_string(), s.to_string()]);
    }
    let mut run = Running::start(&args, dir.path());
    run.wait_for_frames(3);
    run.signal(libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(300));
    let second = Instant::now();
    run.signal(libc::SIGTERM);
    assert_eq!(run.wait(Duration::from_secs(30)), Some(143));
    assert!(
        second.elapsed() < Duration::from_secs(2),
        "took {:?} after the second signal",
        second.elapsed()
    );
    assert!(
        !run.stdout().contains("frames: in"),
        "the second signal must not wait for the summary: {}",
        run.stdout()
    );
    whole_lines(&run.out("frames.jsonl"));
    json(&run.out("timings.json"));
}

#[test]
fn a_hard_kill_leaves_readable_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = Running::start(
        &[&["test:ball".to_string()], &quick(0, 160, 120)[..]].concat(),
        dir.path(),
    );
    run.wait_for_frames(10);
    // timings.json is rewritten every 2 s: let one rewrite happen.
    std::thread::sleep(Duration::from_millis(2500));
    run.signal(libc::SIGKILL);
    assert_eq!(
        run.wait(Duration::from_secs(10)),
        None,
        "killed by the signal"
    );
    let n = whole_lines(&run.out("frames.jsonl"));
    let t = json(&run.out("timings.json"));
    assert_eq!(t["complete"], false);
    assert!(
        t["frames_out"]
            .as_u64()
            .is_some_and(|f| f > 0 && f as usize <= n),
        "timings.json: {t}"
    );
    let video = decoded(&run.out("overlay.mkv")).len();
    assert!(video > 0 && video <= n, "{video} frames decode of {n}");
}

/// A tmpfs mounted for one test, unmounted when dropped.
pub(super) struct Tmpfs(pub(super) PathBuf);

impl Tmpfs {
    pub(super) fn mount(at: &Path, size: &str) -> Result<Self, String> {
        std::fs::create_dir_all(at).unwrap();
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .output();
        match out {
            Ok(o) if o.status.success() => Ok(Self(at.to_owned())),
            Ok(o) => Err(String::from_utf8_lossy(&o.stderr).trim().to_owned()),
            Err(e) => Err(e.to_string()),
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

#[test]
fn a_full_disk_ends_the_run_with_one_line_and_files_that_stay_valid() {
    let dir = tempfile::tempdir().unwrap();
    let disk = match Tmpfs::mount(&dir.path().join("disk"), "384k") {
        Ok(d) => d,
        Err(why) => {
            eprintln!(
                "cannot mount a tmpfs here ({why}); the full-disk test needs root or CAP_SYS_ADMIN; skipped"
            );
            return;
        }
    };
    // Snow does not compress: the video fills the disk within a few dozen frames.
    let out_dir = disk.0.join("o");
    let out = super::bin()
        .args(["run", "test:snow", "--quiet", "--out"])
        .arg(&out_dir)
        .args(quick(0, 320, 240))
        .output()
        .unwrap();
    // GStreamer says "No space left on the resource", the system "No space left on device".
    assert_clean_failure(&out, "no space left on");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&out_dir.display().to_string()),
        "the file is named: {err}"
    );
    assert!(!err.contains("CRITICAL"), "{err}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (frames_in, written, dropped) = summary_counts(&stdout);
    let in_flight: u64 = stdout
        .split("in flight ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert_eq!(
        frames_in,
        written + dropped + in_flight,
        "counters add up: {stdout}"
    );
    assert_eq!(whole_lines(&out_dir.join("frames.jsonl")) as u64, written);
    json(&out_dir.join("timings.json"));
    let video = decoded(&out_dir.join("overlay.mkv")).len() as u64;
    assert!(video <= written, "{video} video frames of {written}");
}
