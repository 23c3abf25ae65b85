//! What a stream is asked to do: its source, where its results go, settings, device and limits.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::Sender;

use crate::analysis::AnalysedFrame;
use crate::backend::Backend;
use crate::config::Settings;
use crate::pipeline::Mailbox;
use crate::publish::{Publisher, StreamPublisher};
use crate::source::SourceSpec;

use super::LiveSettings;

/// What one stream is asked to do.
pub struct StreamJob<'a> {
    /// The stream's number in its run (0 for a run of one), as its events name it.
    pub index: usize,
    /// The source.
    pub spec: SourceSpec,
    /// Where its results go.
    pub output: StreamOutput,
    /// Settings (shared by every stream of a run).
    pub settings: &'a Settings,
    /// The backend of the stream's device (shared by every stream on that device).
    pub backend: &'a Backend,
    /// Frames to analyse at most.
    pub max_frames: Option<u64>,
    /// Where new analysis settings for the running stream come from.
    pub live: LiveSettings,
}

/// Where a stream's results go.
// One per stream, moved once into its state machine: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum StreamOutput {
    /// Every frame into a folder of files ([`crate::output::RunSink`]): a headless run, a
    /// service's stream.
    Folder {
        /// The folder (files an earlier run wrote there are replaced, with a warning).
        out: PathBuf,
        /// Write the overlay video.
        video: bool,
        /// Where the frame records and the status go besides the files (`run --publish`).
        publish: Option<StreamPublishing>,
    },
    /// The newest frame only, into a mailbox, its layers composed into an RGBA picture when the
    /// previous picture was taken (the viewer: composing follows the display rate); frames the
    /// analyses cannot keep up with are dropped before analysis, as from a live source. No
    /// files.
    Mailbox(Arc<Mailbox>),
    /// Every frame, in order, into a channel that a program reads frame by frame (Python's
    /// `morphoscope.open`); no picture is composed and no file written. A bounded channel that
    /// is full holds the stream up as a slow disk does: a file or a test pattern waits, a live
    /// source drops frames at the source (counted), as for [`StreamOutput::Folder`]. The
    /// channel disconnects once the stream has finished (its outcome is ready). A receiver
    /// dropped before then ends the stream at once: the frames in flight are discarded, and the
    /// stream ends as stopped, without an error (`ended`: the stop's cause, else `closed`).
    Channel {
        /// Where the frames go.
        frames: Sender<AnalysedFrame>,
        /// Hand each frame's layers over on the host ([`crate::pipeline::PictureWant::Layers`]):
        /// on CUDA they are read back from the device, a cost per frame.
        layers: bool,
    },
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
