//! A service: streams added and removed while the process runs, watched and steered over
//! HTTP (`run --listen ADDR:PORT`, docs/service.md).
//!
//! ```text
//!  HTTP client ──> server thread (tokio, hyper) ──> handlers ──> Streams ──> a thread per stream
//!  Prometheus  ──>   GET /metrics ──> Metrics (registry) <── updated by each stream's thread
//! ```
//!
//! [`Service::start`] binds the endpoint (loopback unless a token is set), then serves it on
//! its own thread beside the streams, never in their path: handlers read the metrics and the
//! streams' views, and send commands — add ([`Streams::add`]), remove ([`Streams::remove`],
//! which finishes the stream's files exactly as Ctrl+C does), new analysis settings
//! (`Streams::change_settings`, from each stream's next frame). Each stream is a
//! [`crate::lifecycle`] stream: the same state machine, reconnection and finishing path as the
//! streams of the command line.

mod admission;
mod http;
pub mod metrics;
mod server;
mod streams;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::config::service::{ServiceSettings, TOKEN_ENV};
pub use admission::Admission;
pub use metrics::Metrics;
pub use streams::{
    FinishedStream, Origin, StreamRow, StreamSummary, Streams, StreamsConfig, check_id,
};

use crate::publish::Publisher;

/// What a request or a start can fail with; each maps to an HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The request is malformed or names a bad setting (400).
    #[error("{0}")]
    BadRequest(String),
    /// The rule refuses the source (403).
    #[error("{0}")]
    Refused(String),
    /// No such stream (404).
    #[error("{0}")]
    NotFound(String),
    /// The id is in use (409).
    #[error("{0}")]
    Conflict(String),
    /// The service cannot start as configured.
    #[error("{0}")]
    Config(String),
    /// Something failed on this side (500).
    #[error("{0}")]
    Internal(String),
}

/// A running service.
pub struct Service {
    streams: Arc<Streams>,
    server: server::Server,
}

impl Service {
    /// Binds `config.settings.service.listen` and starts serving, with no streams yet. Off
    /// loopback a token is required (`service.token` or `MORPHOSCOPE_SERVICE_TOKEN`).
    pub fn start(config: StreamsConfig) -> Result<Self, ServiceError> {
        let service = config.settings.service.clone();
        let address = service
            .address()
            .map_err(|(key, why)| ServiceError::Config(format!("invalid setting {key}: {why}")))?;
        let token = service.token(|k| std::env::var(k).ok());
        if token.is_none() && !address.ip().is_loopback() {
            return Err(ServiceError::Config(format!(
                "{address} is not a loopback address: set a token first (service.token in the \
                 config file, or {})",
                TOKEN_ENV
            )));
        }
        let admission = Admission::new(&service).map_err(ServiceError::Config)?;
        let devices: Vec<(String, String)> = config
            .backends
            .iter()
            .map(|b| (b.name().to_owned(), b.device_label()))
            .collect();
        let metrics = Arc::new(Metrics::new(&devices));
        let ready_within = Duration::from_secs(u64::from(config.settings.source.timeout_seconds));
        let streams = Arc::new(Streams::new(config, Arc::clone(&metrics), admission));
        streams.sample_devices();
        let api = Arc::new(http::Api {
            streams: Arc::clone(&streams),
            metrics,
            token,
            ready_within,
        });
        let server = server::Server::start(address, http::router(api), service.max_connections)?;
        Ok(Self { streams, server })
    }

    /// The address the endpoint listens on (the port chosen when `listen` gave 0).
    #[must_use]
    pub fn address(&self) -> SocketAddr {
        self.server.address()
    }

    /// The streams (to add the command line's).
    #[must_use]
    pub fn streams(&self) -> &Streams {
        &self.streams
    }

    /// Stops the endpoint, asks every stream to stop for `cause` (a signal number), waits for
    /// their files, and hands back their outcomes and the broker connection to finish.
    pub fn finish(self, cause: i32) -> (Vec<FinishedStream>, Option<Publisher>) {
        self.server.stop();
        self.streams.stop_all(cause);
        self.streams.finish()
    }
}
