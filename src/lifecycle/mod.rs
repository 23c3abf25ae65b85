//! One stream's life, from its SOURCE to its finished files, the same for every program that
//! runs streams: the `run` command, a service adding and removing streams at run time
//! ([`crate::service`]) and the viewer drive the same code.
//!
//! ```text
//!                       +--source lost--> reconnecting --first frame again--+
//!                       |                      |  (stop, give up)           |
//!                       |                      v                            |
//! starting --opened--> running <---------------+----------------------------+
//!    |                  | ended / failed / stopped
//!    |                  v
//!    +-------------> finishing --> finished
//!  could not open,
//!  or stopped while opening
//! ```
//!
//! [`run`] takes a [`StreamJob`] through these [`State`]s on the caller's thread: *starting*
//! opens the source and its pipeline ([`crate::pipeline`]) and takes over the output folder
//! ([`crate::output::RunSink`]) — or, for the viewer, a mailbox that holds the newest frame,
//! or, for a program reading frame by frame (Python's `morphoscope.open`), a channel that gets
//! every frame ([`StreamOutput`]); *running* writes every analysed frame as it arrives (hands
//! it to the channel) and shows it to a [`StreamObserver`]; *reconnecting* is a live source
//! lost and being reopened with backoff ([`crate::source::reconnect`]: the analyses, the
//! tracker's id sequence and the files stay, the counters stand still, `events.jsonl`,
//! `timings.json` and the broker's status say so); *finishing* is the one path every end goes
//! through — end of stream, the frame limit, a [`StopRequest`] (Ctrl+C, SIGTERM), a source or
//! write error, a channel's reader gone, a source that never opened: it ends the pipeline,
//! finishes every file, waits for the broker when the stream owns the run's connection, and
//! returns a [`StreamOutcome`].
//!
//! A [`StopRequest`] is honoured in every state: it interrupts a source that is still opening
//! (a server that accepts and never answers), ends the input of a running stream gracefully
//! (the frames already taken are analysed and written), and, when it arrives while finishing
//! waits for the broker, ends that wait (what is unacknowledged counts as dropped). New
//! analysis settings ([`LiveSettings`]) reach a running stream's analyses the same way, from
//! any thread.

mod job;
mod live;
mod observer;
mod outcome;
mod stop;
mod stream;
mod unstarted;

pub use job::{StreamJob, StreamOutput, StreamPublishing};
pub use live::LiveSettings;
pub use observer::{StreamObserver, StreamProgress, StreamStatus};
pub use outcome::{StreamOutcome, fps, login_refused};
pub use stop::{CLOSED, REMOVED, StopRequest, cause_name};
pub use stream::run;
pub use unstarted::record_not_started;

/// Where a stream is in its life (see the module's diagram).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Opening the source and the pipeline, taking over the folder.
    Starting,
    /// Writing frames as they arrive.
    Running,
    /// The live source is lost and being reopened.
    Reconnecting,
    /// Ending the pipeline, finishing the files, waiting for the broker.
    Finishing,
    /// Done: the outcome is final.
    Finished,
}
