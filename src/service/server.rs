//! The HTTP server thread: a current-thread tokio runtime that accepts connections and serves
//! each with hyper's HTTP/1 (no request parsing of our own).
//!
//! Limits keep a misbehaving client from taking the service down: at most `max_connections`
//! connections at once (the next ones wait in the listen backlog), request headers within 10 s
//! and 16 KiB (431 past it; the same timeout closes an idle keep-alive connection), bodies
//! within 10 s and 64 KiB (the handlers read them).

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::{Semaphore, oneshot};

use super::ServiceError;

/// How long a client may take to send a request's headers (and to start the next one).
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest request head read (hyper's read buffer; at least 8 KiB).
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// How long the connections still open get to finish when the server stops.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// A running server.
pub(super) struct Server {
    address: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Binds `address` (port 0: any free port) now, so that a bind error is the caller's, and
    /// serves `router` on its own thread.
    pub(super) fn start(
        address: SocketAddr,
        router: Router,
        max_connections: usize,
    ) -> Result<Self, ServiceError> {
        let cannot =
            |e: std::io::Error| ServiceError::Config(format!("cannot listen on {address}: {e}"));
        let listener = std::net::TcpListener::bind(address).map_err(cannot)?;
        listener.set_nonblocking(true).map_err(cannot)?;
        let address = listener.local_addr().map_err(cannot)?;
        let (shutdown, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("morphoscope-http".into())
            .spawn(move || serve(listener, router, max_connections, stopped))
            .map_err(|e| ServiceError::Internal(format!("cannot start the HTTP thread: {e}")))?;
        Ok(Self {
            address,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// The address it listens on.
    pub(super) fn address(&self) -> SocketAddr {
        self.address
    }

    /// Stops accepting, gives open connections a second, and joins the thread.
    pub(super) fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            log::error!("the HTTP thread panicked");
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// The thread's body: accept, serve, until `stopped`.
fn serve(
    listener: std::net::TcpListener,
    router: Router,
    max_connections: usize,
    stopped: oneshot::Receiver<()>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            log::error!("cannot start the HTTP runtime: {e}; the service endpoint is off");
            return;
        }
    };
    runtime.block_on(accept_loop(listener, router, max_connections, stopped));
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
}

async fn accept_loop(
    listener: std::net::TcpListener,
    router: Router,
    max_connections: usize,
    mut stopped: oneshot::Receiver<()>,
) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            log::error!("cannot serve HTTP: {e}; the service endpoint is off");
            return;
        }
    };
    let permits = Arc::new(Semaphore::new(max_connections));
    loop {
        let permit = tokio::select! {
            _ = &mut stopped => return,
            p = Arc::clone(&permits).acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => return,
            },
        };
        let tcp = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    // Out of file descriptors, a connection reset before accept: wait, go on.
                    log::warn!("HTTP accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(MAX_HEAD_BYTES);
            if let Err(e) = http.serve_connection(TokioIo::new(tcp), service).await {
                log::debug!("HTTP connection: {e}");
            }
        });
    }
}
