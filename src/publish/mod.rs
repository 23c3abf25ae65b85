//! Results on an MQTT broker. A [`Publisher`] holds one connection to the broker of
//! `[publish].url` (`mqtt://HOST:PORT/PREFIX`, `mqtts://…` over TLS) for every stream of a run;
//! [`Publisher::stream`] hands out a cheap [`StreamPublisher`] per stream, which sends each
//! analysed frame's record (the `frames.jsonl` line, as written) to `PREFIX/<id>/frames` and a
//! status message (fps, frame counters, drops) to `PREFIX/<id>/status`, both QoS 1 (`id`: the
//! stream's index for the streams of the command line, the id a service gave).
//!
//! Publishing never blocks the analysis: a message goes into a bounded queue
//! (`publish.queue_messages`) with a non-blocking send, and when the queue is full — the broker
//! is down, slow, or refused the login — it is dropped and counted. A connection thread drives
//! rumqttc's synchronous `Connection` (which keeps its own current-thread tokio runtime inside
//! that thread, so no runtime leaks into the rest of the program), reconnects with backoff and
//! counts what the broker acknowledged. [`Publisher::finish`] waits, up to a deadline, for the
//! broker to acknowledge what is queued, then disconnects and returns a [`PublishReport`]:
//! `dropped` is every message the broker did not acknowledge (refused by the full queue, lost
//! with a broken connection, or still queued at the deadline).
//!
//! A refused login (a CONNACK with a return code: bad user name or password, not authorised) is
//! logged once as an error naming the reason, counted, and kept for the report; the publisher
//! keeps retrying slowly, so a fixed broker account is picked up without a restart.

pub mod connection;
pub mod settings;
pub mod status;
pub mod topic;

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rumqttc::{Client, QoS};
use serde::Serialize;

use connection::{Shared, TUNING};
pub use settings::{BrokerUrl, PublishSettings, Secret};
pub use status::StatusClock;

/// Errors starting a publisher. Trouble after the start (an unreachable broker, a refused login)
/// is counted and reported in [`PublishReport`] instead.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The broker URL is malformed.
    #[error("invalid broker URL {url}: {reason}")]
    Url {
        /// The URL as given.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// Settings that cannot work together (a password without a user name).
    #[error("publish: {0}")]
    Config(String),
    /// TLS cannot be set up (no root certificates, a bad CA file).
    #[error("publish over TLS: {0}")]
    Tls(String),
    /// The connection thread could not be started.
    #[error("cannot start the publisher thread: {0}")]
    Thread(std::io::Error),
}

/// One status message's counters, from the run's point of view.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct StreamStatus {
    /// Frames analysed per second since the previous status.
    pub fps: f64,
    /// Frames the source delivered.
    pub frames_in: u64,
    /// Frames analysed and written.
    pub frames_out: u64,
    /// Frames dropped (live sources).
    pub dropped: u64,
    /// Errors of the stream (a source or analysis error ends it).
    pub errors: u64,
    /// The stream's live source is lost and being reopened.
    pub reconnecting: bool,
}

/// What was published, at the end of a run (also written to `timings.json`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PublishReport {
    /// The broker and prefix (no credentials).
    pub broker: String,
    /// Messages asked to be published.
    pub offered: u64,
    /// Publish packets written to the broker (retransmissions after a reconnect count again).
    pub sent: u64,
    /// Messages the broker acknowledged.
    pub acked: u64,
    /// Messages the broker did not acknowledge: refused by the full queue, lost with a broken
    /// connection or still queued at the deadline (`offered - acked`).
    pub dropped: u64,
    /// Failed connection attempts, lost connections and refused logins.
    pub errors: u64,
    /// The broker accepted a connection at least once.
    pub connected_ever: bool,
    /// Why the broker refused the login, when it did.
    pub refused: Option<String>,
}

/// How often [`Publisher::finish`] shows its caller the counts while it waits for the broker.
pub(crate) const FLUSH_TICK: Duration = Duration::from_millis(50);

/// The per-stream drop counters, shared by every handle of a stream.
type StreamDrops = Mutex<BTreeMap<usize, Arc<AtomicU64>>>;

/// A connection to one broker, shared by every stream of a run.
pub struct Publisher {
    client: Client,
    shared: Arc<Shared>,
    stream_drops: Arc<StreamDrops>,
    url: BrokerUrl,
    thread: Option<JoinHandle<()>>,
}

impl Publisher {
    /// Parses the URL, sets up TLS and the login (the environment's credentials win over the
    /// file's) and starts the connection thread. Returns at once: the broker is reached in the
    /// background, and messages queue until it is.
    pub fn start(settings: &PublishSettings) -> Result<Self, PublishError> {
        let url = BrokerUrl::parse(&settings.url)?;
        let credentials = settings.credentials(|k| std::env::var(k).ok())?;
        let options = connection::mqtt_options(&url, settings, credentials)?;
        let (client, mut conn) = Client::new(options, settings.queue_messages);
        conn.eventloop
            .set_network_options(connection::network_options());
        let shared = Arc::new(Shared::default());
        let thread_shared = Arc::clone(&shared);
        let broker = url.to_string();
        let queue = settings.queue_messages;
        let thread = std::thread::Builder::new()
            .name("mqtt-publish".into())
            .spawn(move || connection::drive(conn, &thread_shared, &broker, queue))
            .map_err(PublishError::Thread)?;
        Ok(Self {
            client,
            shared,
            stream_drops: Arc::default(),
            url,
            thread: Some(thread),
        })
    }

    /// The broker and topic prefix (no credentials).
    #[must_use]
    pub fn broker(&self) -> &BrokerUrl {
        &self.url
    }

    /// The publisher of stream `index` (its drops are counted apart: an index is never reused
    /// in a run), whose topics are `PREFIX/<id>/…` (`id`: the index itself for the streams of
    /// the command line, the id a service gave; at most `topic::MAX_STREAM_ID_BYTES`, checked
    /// by whoever names the stream).
    #[must_use]
    pub fn stream(&self, index: usize, id: &str) -> StreamPublisher {
        let drops = Arc::clone(
            self.stream_drops
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(index)
                .or_default(),
        );
        let prefix = &self.url.prefix;
        StreamPublisher {
            client: self.client.clone(),
            shared: Arc::clone(&self.shared),
            index,
            id: id.into(),
            frames_topic: format!("{prefix}/{id}/frames").into(),
            status_topic: format!("{prefix}/{id}/status").into(),
            drops,
            started: Instant::now(),
            oversize_logged: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The counters now (`dropped`: what is not acknowledged yet, queued messages included).
    #[must_use]
    pub fn report(&self) -> PublishReport {
        let s = &self.shared;
        let offered = s.offered.load(Ordering::Relaxed);
        let acked = s.acked.load(Ordering::Relaxed);
        PublishReport {
            broker: self.url.to_string(),
            offered,
            sent: s.sent.load(Ordering::Relaxed),
            acked,
            dropped: offered.saturating_sub(acked),
            errors: s.errors.load(Ordering::Relaxed),
            connected_ever: s.connected_ever.load(Ordering::Relaxed),
            refused: s.refusal(),
        }
    }

    /// Stops taking messages, waits up to `deadline` for the broker to acknowledge the queued
    /// ones, disconnects and reports. Returns by the deadline (plus a moment for the thread to
    /// notice) whatever the broker does; a thread stuck in a connection attempt is left to end
    /// with the process. While it waits, `waiting` sees the counts every
    /// `FLUSH_TICK`; when it answers [`ControlFlow::Break`] (a stop signal) the wait ends at
    /// once and what is not acknowledged counts as dropped.
    pub fn finish(
        mut self,
        deadline: Duration,
        waiting: &mut dyn FnMut(&PublishReport) -> ControlFlow<()>,
    ) -> PublishReport {
        let s = Arc::clone(&self.shared);
        s.finishing.store(true, Ordering::Relaxed);
        let until = Instant::now() + deadline;
        let mut disconnect_asked = false;
        let mut ticked = Instant::now();
        while let Some(thread) = &self.thread {
            if thread.is_finished() {
                break;
            }
            let all_acked = s.acked.load(Ordering::Relaxed) >= s.accepted.load(Ordering::Relaxed);
            let connected = s.connected.load(Ordering::Relaxed);
            if !disconnect_asked && connected && all_acked {
                // Queued behind nothing: the DISCONNECT goes out and ends the thread.
                disconnect_asked = self.client.try_disconnect().is_ok();
            }
            if Instant::now() >= until {
                break;
            }
            if ticked.elapsed() >= FLUSH_TICK {
                ticked = Instant::now();
                if waiting(&self.report()).is_break() {
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.stop_thread();
        self.report()
    }

    /// Asks the connection thread to end and gives it a moment.
    fn stop_thread(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        // Wakes an event loop waiting for requests (refused when the queue is full: the thread
        // then wakes on its own traffic, or ends with the process).
        let _ = self.client.try_disconnect();
        if let Some(thread) = self.thread.take() {
            let grace = Instant::now() + Duration::from_millis(200);
            while !thread.is_finished() && Instant::now() < grace {
                std::thread::sleep(Duration::from_millis(5));
            }
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop_thread();
        }
    }
}

/// Publishes one stream's messages; cheap to clone, `Send`. Never blocks.
#[derive(Clone)]
pub struct StreamPublisher {
    client: Client,
    shared: Arc<Shared>,
    index: usize,
    id: Arc<str>,
    frames_topic: Arc<str>,
    status_topic: Arc<str>,
    drops: Arc<AtomicU64>,
    started: Instant,
    oversize_logged: Arc<AtomicBool>,
}

impl StreamPublisher {
    /// The stream's index in its run.
    #[must_use]
    pub fn index(&self) -> usize {
        self.index
    }

    /// The stream's id (the topic level after the prefix).
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Messages of this stream dropped so far at the queue (full, oversize, or after the end).
    #[must_use]
    pub fn dropped(&self) -> u64 {
        self.drops.load(Ordering::Relaxed)
    }

    /// Queues one frame's record (a JSON object, the `frames.jsonl` line without its newline)
    /// for `PREFIX/<id>/frames`.
    pub fn frame(&self, record_json: String) {
        self.offer(&self.frames_topic, record_json.into_bytes());
    }

    /// Queues a status message for `PREFIX/<id>/status`: `status`'s fields plus `stream` (the
    /// index), `id`,
    /// `unix_ms` (wall clock), `uptime_seconds` and `publish_dropped` (this stream's messages
    /// dropped so far, this one excluded).
    pub fn status(&self, status: &StreamStatus) {
        let unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let doc = serde_json::json!({
            "stream": self.index,
            "id": &*self.id,
            "unix_ms": unix_ms,
            "uptime_seconds": (self.started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
            "fps": (status.fps * 1000.0).round() / 1000.0,
            "frames_in": status.frames_in,
            "frames_out": status.frames_out,
            "dropped": status.dropped,
            "errors": status.errors,
            "publish_dropped": self.dropped(),
            "reconnecting": status.reconnecting,
        });
        self.offer(&self.status_topic, doc.to_string().into_bytes());
    }

    fn offer(&self, topic: &str, payload: Vec<u8>) {
        let s = &self.shared;
        s.offered.fetch_add(1, Ordering::Relaxed);
        if s.finishing.load(Ordering::Relaxed) {
            self.drops.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if payload.len() > TUNING.max_message_bytes {
            if !self.oversize_logged.swap(true, Ordering::Relaxed) {
                log::warn!(
                    "{topic}: a message of {} bytes exceeds the {} byte limit; dropped (and any later ones)",
                    payload.len(),
                    TUNING.max_message_bytes
                );
            }
            self.drops.fetch_add(1, Ordering::Relaxed);
            return;
        }
        match self
            .client
            .try_publish(topic, QoS::AtLeastOnce, false, payload)
        {
            Ok(()) => {
                s.accepted.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                self.drops.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port on 127.0.0.1 where nothing listens (bound, then released).
    fn closed_port() -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }

    fn to_nowhere(queue: usize) -> PublishSettings {
        PublishSettings {
            url: format!("mqtt://127.0.0.1:{}/t", closed_port()),
            queue_messages: queue,
            ..PublishSettings::default()
        }
    }

    #[test]
    fn a_full_queue_drops_and_counts_without_blocking() {
        let publisher = Publisher::start(&to_nowhere(3)).unwrap();
        let a = publisher.stream(0, "0");
        let b = publisher.stream(1, "1");
        let t = Instant::now();
        for i in 0..10 {
            a.frame(format!("{{\"index\":{i}}}"));
        }
        b.status(&StreamStatus::default());
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "publishing blocked"
        );
        // Three fit in the queue (the broker is not there to take them), the rest are dropped.
        assert_eq!(a.dropped() + b.dropped(), 8);
        assert_eq!(
            publisher.stream(0, "0").dropped(),
            a.dropped(),
            "handles share a stream's count"
        );
        let t = Instant::now();
        let report = publisher.finish(Duration::from_millis(300), &mut |_| {
            ControlFlow::Continue(())
        });
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "finish overran its deadline"
        );
        assert_eq!(report.offered, 11);
        assert_eq!((report.sent, report.acked, report.dropped), (0, 0, 11));
        assert!(!report.connected_ever);
        assert!(report.errors >= 1, "{report:?}");
        assert!(report.refused.is_none());
    }

    #[test]
    fn messages_after_the_end_are_dropped() {
        let publisher = Publisher::start(&to_nowhere(10)).unwrap();
        let s = publisher.stream(2, "2");
        let report = publisher.finish(Duration::ZERO, &mut |_| ControlFlow::Continue(()));
        assert_eq!(report.offered, 0);
        s.frame("{}".into());
        assert_eq!(s.dropped(), 1);
    }

    #[test]
    fn a_wait_for_the_broker_ends_when_the_caller_breaks_it() {
        let publisher = Publisher::start(&to_nowhere(10)).unwrap();
        publisher.stream(0, "0").frame("{}".into());
        let t = Instant::now();
        let mut seen = 0;
        let report = publisher.finish(Duration::from_secs(60), &mut |r| {
            seen += 1;
            assert_eq!(r.offered, 1);
            if seen == 3 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "the wait was not cut short"
        );
        assert_eq!(seen, 3);
        assert_eq!(
            (report.acked, report.dropped),
            (0, 1),
            "unacknowledged is dropped"
        );
    }

    #[test]
    fn handles_go_to_other_threads() {
        fn shared_across_threads<T: Send + Sync>() {}
        shared_across_threads::<Publisher>();
        shared_across_threads::<StreamPublisher>();
        shared_across_threads::<StatusClock>();
    }

    #[test]
    fn topics_carry_the_prefix_and_the_stream() {
        let publisher = Publisher::start(&to_nowhere(1)).unwrap();
        let s = publisher.stream(7, "7");
        assert_eq!(&*s.frames_topic, "t/7/frames");
        assert_eq!(&*s.status_topic, "t/7/status");
        assert_eq!((s.index(), s.id()), (7, "7"));
        let door = publisher.stream(8, "door-1");
        assert_eq!(&*door.status_topic, "t/door-1/status");
        assert_eq!((door.index(), door.id()), (8, "door-1"));
    }

    #[test]
    fn a_bad_url_or_login_is_refused_at_start() {
        let e = Publisher::start(&PublishSettings {
            url: "mqtt://u:secret@h/x".into(),
            ..PublishSettings::default()
        })
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("credentials") && !e.contains("secret@"), "{e}");
        let e = Publisher::start(&PublishSettings {
            url: "mqtt://h/x".into(),
            password: Secret::new("pw"),
            ..PublishSettings::default()
        })
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("no user name"), "{e}");
    }
}
