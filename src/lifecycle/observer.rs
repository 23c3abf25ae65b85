//! What a stream shows its driver as it goes: frames, a status every second, progress, states.

use std::sync::Arc;

use crossbeam_channel::Sender;

use crate::analysis::AnalysedFrame;
use crate::pipeline::Command;
use crate::stats::{CounterSnapshot, Counters};

use super::State;

/// A stream's state once a second.
#[derive(Clone, Debug)]
pub struct StreamStatus {
    /// Counters now (`frames_out`: frames written).
    pub counters: CounterSnapshot,
    /// Frames written per second over the last status period.
    pub fps: f64,
}

/// How far a running stream is, after each frame and whenever it waits for one.
#[derive(Clone, Copy, Debug)]
pub struct StreamProgress {
    /// Frames written.
    pub written: u64,
    /// Counters now.
    pub counters: CounterSnapshot,
    /// The frames expected (a file's estimate, the frame limit), when known.
    pub total: Option<u64>,
}

/// Sees what a stream produces as it is produced. Called on the stream's own thread; it must
/// not block (queue and return). Every method does nothing unless overridden.
pub trait StreamObserver: Send {
    /// A frame was written to the stream's folder (its `frames.jsonl` object is
    /// [`crate::output::frame_record`] of it), or is about to be handed to its channel.
    fn frame(&mut self, _frame: &AnalysedFrame) {}
    /// The stream's counters, every second while it runs, and once more when its files are
    /// finished.
    fn status(&mut self, _status: &StreamStatus) {}
    /// Progress, often (cheap calls only).
    fn progress(&mut self, _progress: &StreamProgress) {}
    /// The stream entered `state`.
    fn state(&mut self, _state: State) {}
    /// The pipeline runs: its command channel (styles, pause, step for a viewer), its counters
    /// and its backend's description. Called once, right after the running state is entered.
    fn started(&mut self, _commands: &Sender<Command>, _counters: &Arc<Counters>, _backend: &str) {}
}
