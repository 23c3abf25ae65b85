//! The folder of a stream that never ran (a SOURCE that does not parse or open, a stop while it
//! opened): it gets the same files as a stream that ran — an empty `frames.jsonl` and
//! `tracks.csv` (its header), `events.jsonl` with the `finished` event and a complete
//! `timings.json` saying why it ended — so every stream's folder looks the same whatever
//! ended it, and a reused folder never keeps an earlier run's results beside the new error.

use std::path::Path;

use crate::config::EncoderChoice;
use crate::output::{OutputError, RunEnd, RunSink, SinkOptions};
use crate::stats::CounterSnapshot;

/// Writes the files of stream `index` (SOURCE `source`, as shown) that ended before it ran
/// (`ended`: `error: …` or the stop's name) into `out`; the first write error, if any.
pub fn record_not_started(
    index: usize,
    source: &str,
    out: &Path,
    ended: &str,
) -> Option<OutputError> {
    let opts = SinkOptions {
        stream: index,
        video: false,
        video_kbps: 1,
        encoder: EncoderChoice::Auto,
        source: source.to_owned(),
        backend: String::new(),
        segments: Default::default(),
    };
    let sink = match RunSink::create(out, opts) {
        Ok((sink, _)) => sink,
        Err(e) => return Some(e),
    };
    sink.finish(&RunEnd {
        counters: CounterSnapshot::default(),
        wall_seconds: 0.0,
        ended: ended.to_owned(),
    })
    .error
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_that_never_ran_leaves_the_files_of_one_that_did() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("overlay.mkv"), b"an earlier run's video").unwrap();
        let error = "error: rtsp://***@cam/x: connection refused";
        assert!(record_not_started(3, "rtsp://admin:pw@cam/x", dir.path(), error).is_none());
        assert!(
            !dir.path().join("overlay.mkv").exists(),
            "an earlier run's result stays"
        );
        let t: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("timings.json")).unwrap())
                .unwrap();
        assert_eq!(t["complete"], true);
        assert_eq!(t["ended"], error);
        assert_eq!(t["frames_out"], 0);
        assert_eq!(t["source"], "rtsp://***@cam/x");
        let events = std::fs::read_to_string(dir.path().join("events.jsonl")).unwrap();
        let finished: serde_json::Value = serde_json::from_str(events.trim()).unwrap();
        assert_eq!(
            (finished["event"].as_str(), finished["stream"].as_u64()),
            (Some("finished"), Some(3))
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("frames.jsonl")).unwrap(),
            ""
        );
        let tracks = std::fs::read_to_string(dir.path().join("tracks.csv")).unwrap();
        assert!(tracks.starts_with("frame,id,"));
    }
}
