//! The streams of a service: added and removed while it runs, each a [`crate::lifecycle`]
//! stream on its own thread, with its own folder `OUT/<id>/`, topics `PREFIX/<id>/…`, metrics
//! labelled `stream="<id>"` and analysis settings that change from its next frame.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::analysis::{AnalysedFrame, OpSettings};
use crate::backend::Backend;
use crate::config::{Settings, change_ops};
use crate::lifecycle::{
    self, LiveSettings, REMOVED, State, StopRequest, StreamJob, StreamObserver, StreamOutcome,
    StreamOutput, StreamProgress, StreamPublishing, StreamStatus,
};
use crate::output::RunSink;
use crate::publish::topic::MAX_STREAM_ID_BYTES;
use crate::publish::{Publisher, StreamPublisher};
use crate::source::SourceSpec;
use crate::stats::CounterSnapshot;

use super::ServiceError;
use super::admission::Admission;
use super::metrics::{Metrics, StreamMetrics};

/// Who asks for a stream: the operator (the command line: any SOURCE) or a client over HTTP
/// (the [`Admission`] rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The command line.
    Operator,
    /// `POST /streams`.
    Client,
}

/// What every stream of a service shares.
pub struct StreamsConfig {
    /// The settings new streams start with (their analysis settings change with
    /// `Streams::change_settings`).
    pub settings: Settings,
    /// One backend per device; stream `index` runs on `backends[index % len]`.
    pub backends: Vec<Backend>,
    /// The folder of every stream's folder.
    pub out: PathBuf,
    /// Write each stream's overlay video.
    pub video: bool,
    /// Frames each stream analyses at most.
    pub max_frames: Option<u64>,
    /// The run's broker connection.
    pub publisher: Option<Publisher>,
}

/// A stream as `GET /streams` lists it.
#[derive(Clone, Debug, Serialize)]
pub struct StreamRow {
    /// Its id (folder, topic level, metric label).
    pub id: String,
    /// The source, secrets masked.
    pub source: String,
    /// starting, running, reconnecting, finishing or finished.
    pub state: &'static str,
    /// `cpu` or `cuda:N`.
    pub device: String,
    /// Frames written per second over the last second.
    pub fps: f64,
    /// Frames the source delivered.
    pub frames_in: u64,
    /// Frames analysed and written.
    pub frames_out: u64,
    /// Frames dropped before analysis.
    pub dropped: u64,
    /// Its folder.
    pub folder: PathBuf,
    /// Why it ended, once finished.
    pub ended: Option<String>,
    /// Its error, if it failed.
    pub error: Option<String>,
}

/// A removed stream, as `DELETE /streams/{id}` answers.
#[derive(Clone, Debug, Serialize)]
pub struct StreamSummary {
    /// Its id.
    pub id: String,
    /// The source, secrets masked.
    pub source: String,
    /// `cpu` or `cuda:N`.
    pub device: String,
    /// Why it ended (`removed` when the removal stopped it).
    pub ended: String,
    /// Its error, if it failed.
    pub error: Option<String>,
    /// Frames the source delivered.
    pub frames_in: u64,
    /// Frames analysed and written.
    pub frames_out: u64,
    /// Frames dropped before analysis.
    pub dropped: u64,
    /// Seconds it ran.
    pub wall_seconds: f64,
    /// Its folder.
    pub folder: PathBuf,
    /// The files it holds.
    pub files: Vec<String>,
}

/// A finished stream of a service that ends: its id, device and outcome.
pub struct FinishedStream {
    /// Its id.
    pub id: String,
    /// `cpu` or `cuda:N`.
    pub device: String,
    /// How it ended.
    pub outcome: StreamOutcome,
}

/// What the HTTP thread and the stream's thread both see of a stream.
#[derive(Clone, Debug)]
struct View {
    state: State,
    counters: CounterSnapshot,
    fps: f64,
    added: Instant,
    last_frame: Option<Instant>,
    ended: Option<String>,
    error: Option<String>,
}

/// A stream in the table.
struct Entry {
    index: usize,
    source: String,
    device: String,
    folder: PathBuf,
    stop: StopRequest,
    live: LiveSettings,
    ops: OpSettings,
    view: Arc<Mutex<View>>,
    /// `None` once a removal took it (the stream is finishing).
    thread: Option<JoinHandle<StreamOutcome>>,
}

/// The streams of a service.
pub struct Streams {
    backends: Vec<Backend>,
    out: PathBuf,
    video: bool,
    max_frames: Option<u64>,
    publisher: Mutex<Option<Publisher>>,
    settings: Mutex<Settings>,
    metrics: Arc<Metrics>,
    admission: Admission,
    table: Mutex<BTreeMap<String, Entry>>,
    next_index: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Streams {
    /// No streams yet; `metrics` gets their series, `admission` judges clients' sources.
    pub fn new(config: StreamsConfig, metrics: Arc<Metrics>, admission: Admission) -> Self {
        Self {
            backends: config.backends,
            out: config.out,
            video: config.video,
            max_frames: config.max_frames,
            publisher: Mutex::new(config.publisher),
            settings: Mutex::new(config.settings),
            metrics,
            admission,
            table: Mutex::default(),
            next_index: AtomicUsize::new(0),
        }
    }

    /// Starts a stream of `source` with id `id` (else the lowest free number) and returns the
    /// id. It runs with the service's settings, into `OUT/<id>/`.
    pub fn add(
        &self,
        source: &str,
        id: Option<&str>,
        origin: Origin,
    ) -> Result<String, ServiceError> {
        let spec = match origin {
            Origin::Client => self.admission.admit(source)?,
            Origin::Operator => {
                SourceSpec::parse(source).map_err(|e| ServiceError::BadRequest(e.to_string()))?
            }
        };
        // The service's settings before the table: `change_settings` locks them in this order.
        let settings = lock(&self.settings).clone();
        let mut table = lock(&self.table);
        let id = match id {
            Some(id) => {
                check_id(id)?;
                if table.contains_key(id) {
                    return Err(ServiceError::Conflict(format!(
                        "a stream `{id}` exists (DELETE /streams/{id} first)"
                    )));
                }
                id.to_owned()
            }
            None => (0..)
                .map(|n: usize| n.to_string())
                .find(|n| !table.contains_key(n))
                .unwrap_or_default(),
        };
        let folder = self.out.join(&id);
        RunSink::prepare(&folder).map_err(|e| ServiceError::Internal(e.to_string()))?;
        let index = self.next_index.fetch_add(1, Ordering::SeqCst);
        let backend = self.backends[index % self.backends.len().max(1)].clone();
        let device = backend.device_label();
        let publish = lock(&self.publisher).as_ref().map(|p| StreamPublishing {
            stream: p.stream(index, &id),
            finish: None,
        });
        let view = Arc::new(Mutex::new(View {
            state: State::Starting,
            counters: CounterSnapshot::default(),
            fps: 0.0,
            added: Instant::now(),
            last_frame: None,
            ended: None,
            error: None,
        }));
        let stop = StopRequest::new();
        let live = LiveSettings::new();
        let mut watcher = Watcher {
            view: Arc::clone(&view),
            metrics: self.metrics.stream(&id),
            publisher: publish.as_ref().map(|p| p.stream.clone()),
        };
        let ops = settings.ops.clone();
        let run = {
            let (stop, live, folder, id) = (stop.clone(), live.clone(), folder.clone(), id.clone());
            let (max_frames, video) = (self.max_frames, self.video);
            move || {
                crate::stream_label::set(format!("stream {id}"));
                let job = StreamJob {
                    index,
                    spec,
                    output: StreamOutput::Folder {
                        out: folder,
                        video,
                        publish,
                    },
                    settings: &settings,
                    backend: &backend,
                    max_frames,
                    live,
                };
                let outcome = lifecycle::run(job, &stop, &mut watcher);
                let mut v = lock(&watcher.view);
                v.ended = Some(outcome.ended.clone());
                v.error.clone_from(&outcome.error);
                drop(v);
                outcome
            }
        };
        let thread = std::thread::Builder::new()
            .name(format!("morphoscope-stream-{index}"))
            .spawn(run)
            .map_err(|e| {
                ServiceError::Internal(format!("cannot start the stream's thread: {e}"))
            })?;
        log::info!(
            "stream {id} added: {} on {device} into {}",
            crate::redact::url(source.trim()),
            folder.display()
        );
        table.insert(
            id.clone(),
            Entry {
                index,
                source: crate::redact::url(source.trim()),
                device,
                folder,
                stop,
                live,
                ops,
                view,
                thread: Some(thread),
            },
        );
        Ok(id)
    }

    /// Every stream, in id order.
    #[must_use]
    pub fn list(&self) -> Vec<StreamRow> {
        lock(&self.table).iter().map(|(id, e)| row(id, e)).collect()
    }

    /// Stops stream `id` as Ctrl+C would (the frames it took are written, its files finished),
    /// removes it and its metrics, and says how it ended. Blocks until its files are finished.
    pub fn remove(&self, id: &str) -> Result<StreamSummary, ServiceError> {
        let (thread, source, device, folder) = {
            let mut table = lock(&self.table);
            let entry = table
                .get_mut(id)
                .ok_or_else(|| ServiceError::NotFound(format!("no stream `{id}`")))?;
            let thread = entry
                .thread
                .take()
                .ok_or_else(|| ServiceError::Conflict(format!("stream `{id}` is being removed")))?;
            entry.stop.ask(REMOVED);
            (
                thread,
                entry.source.clone(),
                entry.device.clone(),
                entry.folder.clone(),
            )
        };
        let outcome = thread.join().unwrap_or_else(|_| {
            StreamOutcome::not_started(
                source.clone(),
                folder.clone(),
                "the stream's thread panicked".into(),
            )
        });
        lock(&self.table).remove(id);
        self.metrics.forget(id);
        log::info!(
            "stream {id} removed ({}): {} frames written",
            outcome.ended,
            outcome.counters.frames_out
        );
        let c = outcome.counters;
        Ok(StreamSummary {
            id: id.to_owned(),
            source,
            device,
            ended: outcome.ended,
            error: outcome.error,
            frames_in: c.frames_in,
            frames_out: c.frames_out,
            dropped: c.dropped,
            wall_seconds: outcome.wall_seconds,
            folder,
            files: outcome.finished.map(|f| f.files).unwrap_or_default(),
        })
    }

    /// The streams that did not deliver a frame within `within`, each with why.
    #[must_use]
    pub(crate) fn unready(&self, within: Duration) -> Vec<(String, String)> {
        lock(&self.table)
            .iter()
            .filter_map(|(id, e)| {
                let v = lock(&e.view).clone();
                let why = match (v.state, v.last_frame) {
                    (State::Finishing | State::Finished, _) => Some(format!(
                        "ended: {}",
                        v.ended.as_deref().unwrap_or(state_name(v.state))
                    )),
                    (_, Some(t)) if t.elapsed() <= within => None,
                    (State::Reconnecting, _) => Some("reconnecting to its source".to_owned()),
                    (_, Some(t)) => {
                        Some(format!("no frame for {:.1} s", t.elapsed().as_secs_f64()))
                    }
                    (_, None) => Some(format!(
                        "no frame yet ({} for {:.1} s)",
                        state_name(v.state),
                        v.added.elapsed().as_secs_f64()
                    )),
                };
                why.map(|w| (id.clone(), w))
            })
            .collect()
    }

    /// The settings new streams start with.
    #[must_use]
    pub fn settings(&self) -> Settings {
        lock(&self.settings).clone()
    }

    /// Changes analysis settings of the service and of every stream (`section.key` to a value,
    /// checked as `--set` is): applied from each stream's next frame, and to streams added
    /// later. Nothing changes when one change is refused.
    pub(crate) fn change_settings(
        &self,
        changes: &[(String, toml::Value)],
    ) -> Result<OpSettings, ServiceError> {
        let mut settings = lock(&self.settings);
        let mut table = lock(&self.table);
        let bad = |e: crate::config::ConfigError| ServiceError::BadRequest(e.to_string());
        let ops = change_ops(&settings.ops, changes).map_err(bad)?;
        let mut per_stream = Vec::with_capacity(table.len());
        for (id, e) in table.iter() {
            let changed = change_ops(&e.ops, changes)
                .map_err(|err| ServiceError::BadRequest(format!("stream `{id}`: {err}")))?;
            per_stream.push(changed);
        }
        for (e, changed) in table.values_mut().zip(per_stream) {
            e.live.set(changed.clone());
            e.ops = changed;
        }
        settings.ops = ops.clone();
        Ok(ops)
    }

    /// Changes the analysis settings of stream `id` only, from its next frame.
    pub(crate) fn change_stream_settings(
        &self,
        id: &str,
        changes: &[(String, toml::Value)],
    ) -> Result<OpSettings, ServiceError> {
        let mut table = lock(&self.table);
        let e = table
            .get_mut(id)
            .ok_or_else(|| ServiceError::NotFound(format!("no stream `{id}`")))?;
        let ops =
            change_ops(&e.ops, changes).map_err(|e| ServiceError::BadRequest(e.to_string()))?;
        e.live.set(ops.clone());
        e.ops = ops.clone();
        Ok(ops)
    }

    /// The analysis settings stream `id` runs with now.
    pub(crate) fn stream_settings(&self, id: &str) -> Result<OpSettings, ServiceError> {
        lock(&self.table)
            .get(id)
            .map(|e| e.ops.clone())
            .ok_or_else(|| ServiceError::NotFound(format!("no stream `{id}`")))
    }

    /// Samples the memory in use on each CUDA device into the metrics.
    pub fn sample_devices(&self) {
        for b in &self.backends {
            if let Backend::Cuda(g) = b {
                match g.cuda().mem_get_info() {
                    Ok((free, total)) => self
                        .metrics
                        .set_gpu_memory_used(&b.device_label(), (total - free.min(total)) as u64),
                    Err(e) => log::debug!("{}: cannot read its memory: {e}", b.device_label()),
                }
            }
        }
    }

    /// Asks every stream to stop for `cause` (a signal number); [`Streams::finish`] waits.
    pub(crate) fn stop_all(&self, cause: i32) {
        for e in lock(&self.table).values() {
            e.stop.ask(cause);
        }
    }

    /// Waits for every stream to end (after `Streams::stop_all`), in the order they were
    /// added, and for removals in progress, then hands back the broker connection for the
    /// caller to finish.
    pub fn finish(&self) -> (Vec<FinishedStream>, Option<Publisher>) {
        let mut taken: Vec<(
            usize,
            String,
            String,
            JoinHandle<StreamOutcome>,
            String,
            PathBuf,
        )> = lock(&self.table)
            .iter_mut()
            .filter_map(|(id, e)| {
                e.thread.take().map(|t| {
                    (
                        e.index,
                        id.clone(),
                        e.device.clone(),
                        t,
                        e.source.clone(),
                        e.folder.clone(),
                    )
                })
            })
            .collect();
        taken.sort_by_key(|t| t.0);
        let finished = taken
            .into_iter()
            .map(|(_, id, device, thread, source, folder)| {
                let outcome = thread.join().unwrap_or_else(|_| {
                    StreamOutcome::not_started(
                        source,
                        folder,
                        "the stream's thread panicked".into(),
                    )
                });
                FinishedStream {
                    id,
                    device,
                    outcome,
                }
            })
            .collect::<Vec<FinishedStream>>();
        {
            let mut table = lock(&self.table);
            for f in &finished {
                table.remove(&f.id);
            }
        }
        // A removal still finishing its stream's files (its request came just before the
        // stop) is waited for too: it takes the stream out of the table when done.
        while !lock(&self.table).is_empty() {
            std::thread::sleep(Duration::from_millis(20));
        }
        (finished, lock(&self.publisher).take())
    }
}

/// A stream id: 1 to `MAX_STREAM_ID_BYTES` ASCII letters, digits, `_`, `-`, `.`, not starting
/// with `.` or `-` (a folder name and an MQTT topic level as they are).
pub fn check_id(id: &str) -> Result<(), ServiceError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_STREAM_ID_BYTES
        && !id.starts_with(['.', '-'])
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(ServiceError::BadRequest(format!(
            "invalid stream id {:?}: 1 to {MAX_STREAM_ID_BYTES} ASCII letters, digits, `_`, `-` \
             or `.`, not starting with `.` or `-`",
            id
        )))
    }
}

/// The name of a state in the API.
fn state_name(state: State) -> &'static str {
    match state {
        State::Starting => "starting",
        State::Running => "running",
        State::Reconnecting => "reconnecting",
        State::Finishing => "finishing",
        State::Finished => "finished",
    }
}

fn row(id: &str, e: &Entry) -> StreamRow {
    let v = lock(&e.view).clone();
    StreamRow {
        id: id.to_owned(),
        source: e.source.clone(),
        state: state_name(v.state),
        device: e.device.clone(),
        fps: (v.fps * 10.0).round() / 10.0,
        frames_in: v.counters.frames_in,
        frames_out: v.counters.frames_out,
        dropped: v.counters.dropped,
        folder: e.folder.clone(),
        ended: v.ended,
        error: v.error,
    }
}

/// Sees a stream's frames, counters and states: the metrics and the view.
struct Watcher {
    view: Arc<Mutex<View>>,
    metrics: StreamMetrics,
    publisher: Option<StreamPublisher>,
}

impl Watcher {
    fn publish_dropped(&self) -> u64 {
        self.publisher.as_ref().map_or(0, StreamPublisher::dropped)
    }
}

impl StreamObserver for Watcher {
    fn frame(&mut self, frame: &AnalysedFrame) {
        self.metrics.frame(frame);
        lock(&self.view).last_frame = Some(Instant::now());
    }

    fn status(&mut self, status: &StreamStatus) {
        let dropped = self.publish_dropped();
        self.metrics.counters(&status.counters, dropped);
        let mut v = lock(&self.view);
        v.counters = status.counters;
        v.fps = status.fps;
    }

    fn progress(&mut self, progress: &StreamProgress) {
        let dropped = self.publish_dropped();
        self.metrics.counters(&progress.counters, dropped);
        lock(&self.view).counters = progress.counters;
    }

    fn state(&mut self, state: State) {
        match state {
            State::Running => self.metrics.set_up(true),
            State::Reconnecting => self.metrics.reconnecting(),
            _ => self.metrics.set_up(false),
        }
        lock(&self.view).state = state;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_folder_names_and_topic_levels() {
        for good in [
            "0",
            "door-1",
            "cam_2.north",
            &"a".repeat(MAX_STREAM_ID_BYTES),
        ] {
            assert!(check_id(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "-x",
            "a/b",
            "a+b",
            "#",
            "é",
            "a b",
            &"a".repeat(MAX_STREAM_ID_BYTES + 1),
        ] {
            assert!(
                matches!(check_id(bad), Err(ServiceError::BadRequest(_))),
                "{bad:?}"
            );
        }
    }
}
