//! Captured CUDA graphs: a long, fixed launch sequence enqueued once and replayed per frame.
//!
//! An op that launches hundreds of small kernels per frame with the same arguments every frame
//! (the segmentation's rounds: 7–10 launches a round, 20–30 rounds a frame) costs the host a few
//! microseconds per launch and, once ~1000 launches are queued, blocks the enqueueing thread
//! until the GPU catches up. Recorded once with stream capture (`cuStreamBeginCapture`, thread-
//! local mode, so other threads' CUDA calls are unaffected) and instantiated, the same sequence
//! is one `cuGraphLaunch`: microseconds on the host, and less launch overhead between the
//! nodes on the GPU.
//!
//! [`GraphCache`] keeps the few most recently used graphs keyed by everything their launches
//! depend on (the caller's key: buffer addresses, frame size, parameters, round counts, and the
//! stream, since a graph replays on the stream it was captured on). A new key is captured
//! afresh; the least recently used graph is dropped beyond the capacity. The enqueue closure
//! must only launch kernels with plain arguments on the capturing stream, or on streams that
//! wait on an event recorded on it and are joined back by events before it returns (parallel
//! branches of the graph): no allocation, no synchronisation, no event tracking (raw device
//! pointers), no timer events.
//!
//! Thread-local capture mode is not enough when another thread enqueues on the same device
//! during the capture (the collector composing a finished frame while the worker captured the
//! next one's segmentation invalidated the capture on the H100). A capture is rare — once per
//! new key — so it takes the exclusive side of its device's lock
//! (`super::capture_lock`), and the threads that enqueue on that device hold the shared side
//! ([`super::capture_exclusion`]): they never wait for each other, only for a capture.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use cudarc::driver::safe::CudaGraph;
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};

use super::error::GpuError;

/// An instantiated graph owned by one cache.
struct OwnedGraph(CudaGraph);

// SAFETY: a CUDA graph and its executable may be used from any thread as long as calls on it are
// serialised (CUDA driver API, "Graph object thread safety"). The cache owns each graph
// exclusively and only touches it through `&mut self`, so moving the cache to another thread
// (the pipeline's worker) cannot make two threads call into the same graph at once.
unsafe impl Send for OwnedGraph {}

/// The most recently used captured graphs, by key.
pub struct GraphCache<K> {
    entries: Vec<(K, OwnedGraph)>,
    capacity: usize,
    captures: u64,
}

impl<K> std::fmt::Debug for GraphCache<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphCache")
            .field("graphs", &self.entries.len())
            .field("capacity", &self.capacity)
            .field("captures", &self.captures)
            .finish()
    }
}

impl<K: PartialEq> GraphCache<K> {
    /// An empty cache holding at most `capacity` (at least 1) graphs.
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: Vec::new(),
            capacity: capacity.max(1),
            captures: 0,
        }
    }

    /// Drops every graph (call when the buffers the graphs point into are freed).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// How many graphs were captured so far (a key seen before is replayed, not captured).
    #[must_use]
    pub fn captures(&self) -> u64 {
        self.captures
    }

    /// Launches the graph of `key` on `stream`, capturing it first from `enqueue` (which must
    /// launch the sequence on `stream`) when the cache does not hold it.
    pub fn launch(
        &mut self,
        stream: &Arc<CudaStream>,
        key: K,
        enqueue: impl FnOnce() -> Result<(), GpuError>,
    ) -> Result<(), GpuError> {
        match self.entries.iter().position(|(k, _)| *k == key) {
            Some(i) => {
                let hit = self.entries.remove(i);
                self.entries.insert(0, hit);
            }
            None => {
                let graph = capture(stream, enqueue)?;
                self.captures += 1;
                self.entries.insert(0, (key, OwnedGraph(graph)));
                self.entries.truncate(self.capacity);
            }
        }
        match self.entries.first() {
            Some((_, g)) => Ok(g.0.launch()?),
            None => Err(GpuError::Unsupported(
                "graph cache lost its newest entry".into(),
            )),
        }
    }
}

/// Records what `enqueue` launches on `stream` into an instantiated graph. The capture is ended
/// even when `enqueue` fails (the stream must not stay in capture mode).
fn capture(
    stream: &Arc<CudaStream>,
    enqueue: impl FnOnce() -> Result<(), GpuError>,
) -> Result<CudaGraph, GpuError> {
    let _exclusive = super::capture_lock::capture_guard(stream.context().ordinal());
    stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
    let enqueued = enqueue();
    let graph = stream.end_capture(CUgraphInstantiate_flags(0));
    enqueued?;
    graph?.ok_or_else(|| GpuError::Unsupported("stream capture produced no graph".into()))
}
