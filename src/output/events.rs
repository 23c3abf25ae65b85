//! `events.jsonl`: one JSON object per change of a stream's life, each with the UTC time, the
//! stream's index and source, and the event's kind: `started`, `lost` (with its `cause`),
//! `attempt_failed` (`attempt`, `error`), `back` (`gap_seconds`, `attempts`) and `finished`
//! (`ended`); for a segmented stream also `segment_opened` and `segment_closed` (`segment`,
//! `frames`), `retention_deleted` (`segment`, `bytes`, `reason`) and `write_error` (`error`).
//! `frames.jsonl` stays one object per frame; this file says what happened between. The source
//! is shown as everywhere else: without its password ([`crate::redact`]).

use crate::source::reconnect::SourceChange;

/// One change of a stream's life.
#[derive(Clone, Debug, PartialEq)]
pub enum StreamEvent {
    /// The source opened and the folder was taken over.
    Started {
        /// Whether the source is live (it reconnects when lost).
        live: bool,
    },
    /// A live source was lost, failed to reopen, or came back.
    Source(SourceChange),
    /// A segment's folder was created.
    SegmentOpened {
        /// Its name (its start in UTC).
        segment: String,
    },
    /// A segment's files were finished.
    SegmentClosed {
        /// Its name.
        segment: String,
        /// Frames it holds.
        frames: u64,
    },
    /// Retention deleted a whole segment.
    RetentionDeleted {
        /// Its name.
        segment: String,
        /// The bytes it held.
        bytes: u64,
        /// `keep_hours`, `keep_gb` or `disk full`.
        reason: &'static str,
    },
    /// A file could not be written (the stream went on in a new segment).
    WriteError {
        /// The error, naming the file.
        error: String,
    },
    /// The stream ended; its files are finished.
    Finished {
        /// Why ("end of stream", "SIGINT", "error: …").
        ended: String,
    },
}

/// The `events.jsonl` object of `event`, stamped now.
#[must_use]
pub(crate) fn event_record(stream: usize, source: &str, event: &StreamEvent) -> serde_json::Value {
    let mut v = serde_json::json!({
        "time": jiff::Timestamp::now().to_string(),
        "stream": stream,
        "source": crate::redact::text(source),
    });
    let fields = match event {
        StreamEvent::Started { live } => serde_json::json!({"event": "started", "live": live}),
        StreamEvent::Source(SourceChange::Lost { cause }) => {
            serde_json::json!({"event": "lost", "cause": cause})
        }
        StreamEvent::Source(SourceChange::AttemptFailed { attempt, error }) => {
            serde_json::json!({"event": "attempt_failed", "attempt": attempt, "error": error})
        }
        StreamEvent::Source(SourceChange::Back {
            gap_seconds,
            attempts,
        }) => serde_json::json!({
            "event": "back",
            "gap_seconds": (gap_seconds * 1000.0).round() / 1000.0,
            "attempts": attempts,
        }),
        StreamEvent::SegmentOpened { segment } => {
            serde_json::json!({"event": "segment_opened", "segment": segment})
        }
        StreamEvent::SegmentClosed { segment, frames } => {
            serde_json::json!({"event": "segment_closed", "segment": segment, "frames": frames})
        }
        StreamEvent::RetentionDeleted {
            segment,
            bytes,
            reason,
        } => serde_json::json!({
            "event": "retention_deleted", "segment": segment, "bytes": bytes, "reason": reason,
        }),
        StreamEvent::WriteError { error } => {
            serde_json::json!({"event": "write_error", "error": crate::redact::text(error)})
        }
        StreamEvent::Finished { ended } => {
            serde_json::json!({"event": "finished", "ended": crate::redact::text(ended)})
        }
    };
    if let (Some(v), serde_json::Value::Object(f)) = (v.as_object_mut(), fields) {
        v.extend(f);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_has_its_time_stream_source_and_fields() {
        let r = event_record(
            2,
            "rtsp://admin:pw@cam/1",
            &StreamEvent::Source(SourceChange::Back {
                gap_seconds: 5.12345,
                attempts: 3,
            }),
        );
        assert_eq!(r["event"], "back");
        assert_eq!(r["stream"], 2);
        assert_eq!(r["source"], "rtsp://***@cam/1");
        assert_eq!(r["gap_seconds"], 5.123);
        assert_eq!(r["attempts"], 3);
        let time = r["time"].as_str().unwrap();
        assert!(
            time.ends_with('Z') && time.parse::<jiff::Timestamp>().is_ok(),
            "{time}"
        );
    }
}
