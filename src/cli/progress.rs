//! Progress of a headless run, wherever stderr goes: a bar in a terminal (its total grows when
//! a file's estimated frame count was short, and it ends at the frames written), and in a log or
//! a pipe a status line every few seconds (frames, rate, drops, elapsed time, ETA when the total
//! is known). `--quiet` shows neither.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use morphoscope::stats::CounterSnapshot;

/// How often the status line is printed when stderr is not a terminal.
const LINE_EVERY: Duration = Duration::from_secs(5);

enum Mode {
    Hidden,
    Bar(ProgressBar),
    Lines { last: Instant },
}

/// The progress display of one run.
pub struct Progress {
    mode: Mode,
    total: Option<u64>,
    started: Instant,
}

impl Progress {
    /// A bar (stderr is a terminal), status lines (it is not), or nothing (`quiet`). `total`:
    /// the frames expected, when known.
    pub fn new(total: Option<u64>, quiet: bool) -> Self {
        let mode = if quiet {
            Mode::Hidden
        } else if std::io::stderr().is_terminal() {
            Mode::Bar(bar(total))
        } else {
            Mode::Lines {
                last: Instant::now(),
            }
        };
        Self {
            mode,
            total,
            started: Instant::now(),
        }
    }

    /// Shows `written` frames out of the counters' state (cheap when nothing is due).
    pub fn update(&mut self, written: u64, counters: &CounterSnapshot) {
        let elapsed = self.started.elapsed();
        match &mut self.mode {
            Mode::Hidden => {}
            Mode::Bar(pb) => {
                if pb.length().is_some_and(|len| written > len) {
                    pb.set_length(written);
                }
                pb.set_position(written);
                if counters.dropped > 0 {
                    pb.set_message(format!("{} dropped", counters.dropped));
                }
            }
            Mode::Lines { last } => {
                if last.elapsed() >= LINE_EVERY {
                    *last = Instant::now();
                    eprintln!(
                        "{}",
                        status_line(written, self.total, counters.dropped, elapsed)
                    );
                }
            }
        }
    }

    /// Removes the bar (the summary follows).
    pub fn finish(&mut self, written: u64) {
        if let Mode::Bar(pb) = &self.mode {
            pb.set_length(written);
            pb.set_position(written);
            pb.finish_and_clear();
        }
    }
}

fn bar(total: Option<u64>) -> ProgressBar {
    let (pb, style) = match total {
        Some(n) => (
            ProgressBar::new(n),
            "{spinner} {pos}/{len} frames [{elapsed_precise}<{eta_precise}] {per_sec} {msg}",
        ),
        None => (
            ProgressBar::new_spinner(),
            "{spinner} {pos} frames [{elapsed_precise}] {per_sec} {msg}",
        ),
    };
    if let Ok(s) = ProgressStyle::with_template(style) {
        pb.set_style(s);
    }
    pb
}

/// `progress: 120 of ~400 frames (30%) | 23.9 fps | 0 dropped | 5 s elapsed | ETA 12 s`.
#[must_use]
pub fn status_line(written: u64, total: Option<u64>, dropped: u64, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64();
    let fps = if secs > 0.0 {
        written as f64 / secs
    } else {
        0.0
    };
    let of = match total {
        Some(n) if n > 0 => format!(" of ~{n} frames ({}%)", (written * 100 / n).min(100)),
        _ => " frames".to_owned(),
    };
    let eta = match total {
        Some(n) if fps > 0.0 && n > written => {
            format!(" | ETA {:.0} s", (n - written) as f64 / fps)
        }
        _ => String::new(),
    };
    format!("progress: {written}{of} | {fps:.1} fps | {dropped} dropped | {secs:.0} s elapsed{eta}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_say_how_far_and_how_long() {
        let s = status_line(120, Some(400), 0, Duration::from_secs(5));
        assert_eq!(
            s,
            "progress: 120 of ~400 frames (30%) | 24.0 fps | 0 dropped | 5 s elapsed | ETA 12 s"
        );
        let s = status_line(50, None, 3, Duration::from_secs(10));
        assert_eq!(
            s,
            "progress: 50 frames | 5.0 fps | 3 dropped | 10 s elapsed"
        );
        // An estimate that was short: no ETA, never past 100 %.
        assert!(
            status_line(410, Some(400), 0, Duration::from_secs(10)).contains("(100%) | 41.0 fps")
        );
    }
}
