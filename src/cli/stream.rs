//! One stream as the terminal shows it: its progress (a bar or status lines, see
//! [`super::progress`]) while [`morphoscope::lifecycle`] runs it, and the summary of a
//! single-stream run and of the publisher once it has ended.

use morphoscope::lifecycle::{State, StreamObserver, StreamOutcome, StreamProgress, fps};
use morphoscope::publish::PublishReport;

use super::progress::Progress;

/// Shows a stream's progress on stderr (nothing with `--quiet`).
pub struct ProgressObserver {
    quiet: bool,
    shown: Option<Progress>,
    written: u64,
}

impl ProgressObserver {
    /// A display that appears with the first progress (when the expected total is known).
    pub fn new(quiet: bool) -> Self {
        Self {
            quiet,
            shown: None,
            written: 0,
        }
    }
}

impl StreamObserver for ProgressObserver {
    fn progress(&mut self, p: &StreamProgress) {
        self.written = p.written;
        let quiet = self.quiet;
        self.shown
            .get_or_insert_with(|| Progress::new(p.total, quiet))
            .update(p.written, &p.counters);
    }

    fn state(&mut self, state: State) {
        if state == State::Finishing
            && let Some(shown) = &mut self.shown
        {
            shown.finish(self.written);
        }
    }
}

/// The publisher's line of the summary: `publish URL: sent N | acknowledged N | dropped N`, and
/// why nothing arrived when the broker was never reached or refused the login.
pub fn print_publish_summary(r: &PublishReport) {
    let why = match (&r.refused, r.connected_ever) {
        (Some(reason), false) => format!(" | login refused: {reason}"),
        (None, false) => format!(
            " | broker never reached ({} failed attempt{})",
            r.errors,
            if r.errors == 1 { "" } else { "s" }
        ),
        (Some(reason), true) => format!(" | login refused at times: {reason}"),
        (None, true) => String::new(),
    };
    println!(
        "publish {}: sent {} | acknowledged {} | dropped {}{why}",
        r.broker, r.sent, r.acked, r.dropped
    );
}

/// The summary of a single-stream run (unchanged since before several streams existed).
pub fn print_single_summary(o: &StreamOutcome) {
    let c = &o.counters;
    println!("morphoscope run: {}", o.source);
    println!("backend: {}", o.backend);
    let in_flight = match c.in_flight() {
        0 => String::new(),
        n => format!(" | in flight {n}"),
    };
    println!(
        "frames: in {} | out {} | dropped {}{in_flight} | {:.1} s wall | {:.1} fps",
        c.frames_in,
        c.frames_out,
        c.dropped,
        o.wall_seconds,
        fps(c, o.wall_seconds)
    );
    if let Some(finished) = &o.finished {
        print!("{}", finished.timings.table());
        println!(
            "outputs in {}: {}",
            o.out.display(),
            finished.files.join(", ")
        );
    }
    if let Some(report) = &o.publish {
        print_publish_summary(report);
    }
}
