//! How a stream ended: its counters, why, its files and its error, for summaries and exit codes.

use std::path::PathBuf;

use crate::output::Finished;
use crate::publish::PublishReport;
use crate::source::{SourceSpec, StreamInfo};
use crate::stats::CounterSnapshot;

/// How a stream ended.
pub struct StreamOutcome {
    /// The source, as it is shown (the parsed spec, or the string given when it did not parse).
    pub source: String,
    /// The output folder.
    pub out: PathBuf,
    /// The backend description (empty when the stream never started).
    pub backend: String,
    /// Final counters (`frames_out`: frames written).
    pub counters: CounterSnapshot,
    /// Seconds from the first frame asked to the end.
    pub wall_seconds: f64,
    /// Why it ended: "end of stream", "--max-frames", "SIGINT", "error: …".
    pub ended: String,
    /// The files written, with the timing table (`None`: the stream never started).
    pub finished: Option<Finished>,
    /// The cause of the stop request that stopped it (a signal number), if one did.
    pub stopped_by: Option<i32>,
    /// The stream's error on one line, if it failed.
    pub error: Option<String>,
    /// The publisher's counts, when this stream finished the run's broker connection.
    pub publish: Option<PublishReport>,
}

impl StreamOutcome {
    /// A stream that could not start.
    #[must_use]
    pub fn not_started(source: String, out: PathBuf, error: String) -> Self {
        let error = crate::redact::text(&error);
        Self {
            source: crate::redact::url(&source),
            out,
            backend: String::new(),
            counters: CounterSnapshot::default(),
            wall_seconds: 0.0,
            ended: format!("error: {error}"),
            finished: None,
            stopped_by: None,
            error: Some(error),
            publish: None,
        }
    }
}

/// The error of a run whose broker never accepted its login (the files are written all the same).
#[must_use]
pub fn login_refused(r: &PublishReport) -> Option<String> {
    match &r.refused {
        Some(reason) if !r.connected_ever => Some(format!(
            "the broker {} refused the login: {reason}; nothing was published (the files are written)",
            r.broker
        )),
        _ => None,
    }
}

/// Frames written per second of wall time.
#[must_use]
pub fn fps(c: &CounterSnapshot, wall_seconds: f64) -> f64 {
    if wall_seconds > 0.0 {
        c.frames_out as f64 / wall_seconds
    } else {
        0.0
    }
}

/// How a stream that ended by itself went, for [`end_of_stream_error`].
pub(super) struct SelfEnded<'a> {
    pub spec: &'a SourceSpec,
    pub stream: &'a StreamInfo,
    pub written: u64,
    pub estimate: Option<u64>,
    pub limit_reached: bool,
    pub limited: bool,
}

/// The error of a stream that ended by itself, if its end is one: a live source that ends, a
/// file that ends far short of its length, or a source that gave nothing.
pub(super) fn end_of_stream_error(e: &SelfEnded<'_>) -> Option<String> {
    let (spec, written) = (e.spec, e.written);
    if e.stream.live && !e.limit_reached {
        return Some(format!(
            "live source {spec} ended after {written} frames (camera unplugged, server gone or stream closed?); outputs hold the frames analysed"
        ));
    }
    let file_like =
        matches!(spec, SourceSpec::File(_) | SourceSpec::Uri(_)) && !e.stream.live && !e.limited;
    if let Some(n) = e
        .estimate
        .filter(|&n| file_like && n > 0 && written * 100 < n * 95)
    {
        return Some(format!(
            "stream ended early: {written} of ~{n} frames (truncated or damaged file?); outputs hold the frames decoded"
        ));
    }
    if written == 0 {
        return Some("the source produced no frames".to_owned());
    }
    None
}
