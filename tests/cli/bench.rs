//! `bench` refuses what it cannot measure: no frames, and `--streams` trials whose length is not
//! a finite number of seconds within the bound (inf, NaN and 1e20 used to return at once and
//! say "held").

use super::bin;

fn bench(args: &[&str]) -> std::process::Output {
    bin()
        .args([
            "bench",
            "--backend",
            "cpu",
            "--size",
            "160x120",
            "--source",
            "test:ball",
        ])
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_trial_of_unbounded_seconds_is_refused_naming_the_value() {
    for (seconds, shown) in [
        ("inf", "--seconds inf"),
        ("NaN", "--seconds NaN"),
        ("1e20", "--seconds 100000000000000000000"),
    ] {
        let out = bench(&["--streams", "1", "--fps", "10", "--seconds", seconds]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{seconds}: {err}");
        assert!(err.contains(shown), "{seconds}: {err}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!stdout.contains("held"), "{seconds}: {stdout}");
    }
}

#[test]
fn zero_frames_are_refused() {
    let out = bench(&["--frames", "0"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--frames 0"), "{err}");
}
