//! What a stream is asked to do: its source, folder, settings, device and limits.

use std::path::PathBuf;
use std::time::Duration;

use crate::backend::Backend;
use crate::config::Settings;
use crate::publish::{Publisher, StreamPublisher};
use crate::source::SourceSpec;

use super::LiveSettings;

/// What one stream is asked to do.
pub struct StreamJob<'a> {
    /// The stream's number in its run (0 for a run of one), as its events name it.
    pub index: usize,
    /// The source.
    pub spec: SourceSpec,
    /// Its output folder (files an earlier run wrote there are replaced, with a warning).
    pub out: PathBuf,
    /// Settings (shared by every stream of a run).
    pub settings: &'a Settings,
    /// The backend of the stream's device (shared by every stream on that device).
    pub backend: &'a Backend,
    /// Frames to analyse at most.
    pub max_frames: Option<u64>,
    /// Write the overlay video.
    pub video: bool,
    /// Where the stream's frame records and status go besides its files (`run --publish`).
    pub publish: Option<StreamPublishing>,
    /// Where new analysis settings for the running stream come from.
    pub live: LiveSettings,
}

/// A stream's part of a run's broker connection: its handle and, when the stream is the run's
/// only one, the connection itself (finished by the stream, so that `timings.json` holds the
/// publisher's counts; with several streams the run finishes it after the last one).
pub struct StreamPublishing {
    /// This stream's topics.
    pub stream: StreamPublisher,
    /// The connection to finish when the stream ends, with how long to wait for the broker.
    pub finish: Option<(Publisher, Duration)>,
}
