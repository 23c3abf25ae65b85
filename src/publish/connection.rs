//! The publisher's connection: MQTT options (client id, login, keep-alive, TLS with system roots
//! or a CA file) and the thread that drives rumqttc's event loop. The thread counts what the
//! broker saw (publish packets written, PUBACKs received), reconnects with exponential backoff
//! after any failure, and reports each kind of trouble once: a broker that cannot be reached or a
//! lost connection as a warning, a refused login (CONNACK with a return code) as an error with
//! the reason. It never touches the queue's producers: while it is disconnected the queue fills
//! and [`super::StreamPublisher`] drops and counts.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rumqttc::{
    ConnectReturnCode, Connection, ConnectionError, Event, MqttOptions, NetworkOptions, Outgoing,
    Packet, TlsConfiguration, Transport,
};

use super::PublishError;
use super::settings::{BrokerUrl, PublishSettings, Secret};

/// Reconnection and packet limits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnectionTuning {
    /// First wait after a failure: short, so a broker restart costs little.
    pub first_backoff: Duration,
    /// Longest wait between attempts at an unreachable broker: bounds the time to notice it is back.
    pub max_backoff: Duration,
    /// Longest wait after a refused login: retrying faster only floods the broker's log.
    pub max_backoff_refused: Duration,
    /// Seconds to open TCP (and TLS) and get the CONNACK before the attempt counts as failed.
    pub connect_timeout_seconds: u64,
    /// Largest message sent (bytes): frame records with big tables fit; larger ones are dropped.
    pub max_message_bytes: usize,
    /// Largest packet accepted from the broker: only acknowledgements come back.
    pub max_incoming_bytes: usize,
}

/// The shipped limits.
pub(crate) const TUNING: ConnectionTuning = ConnectionTuning {
    first_backoff: Duration::from_millis(100),
    max_backoff: Duration::from_secs(5),
    max_backoff_refused: Duration::from_secs(30),
    connect_timeout_seconds: 5,
    max_message_bytes: 16 << 20,
    max_incoming_bytes: 64 << 10,
};

/// Counters shared by the producers, the connection thread and [`super::Publisher::finish`].
#[derive(Debug, Default)]
pub struct Shared {
    /// Messages asked to be published (frames and status, every stream).
    pub offered: AtomicU64,
    /// Messages the queue took.
    pub accepted: AtomicU64,
    /// Publish packets written to the broker (a retransmission after a reconnect counts again).
    pub sent: AtomicU64,
    /// PUBACKs received: messages the broker has.
    pub acked: AtomicU64,
    /// Failed connection attempts, lost connections and refused logins.
    pub errors: AtomicU64,
    /// A CONNACK was accepted at least once.
    pub connected_ever: AtomicBool,
    /// Connected now.
    pub connected: AtomicBool,
    /// The run is ending: producers drop what they are handed.
    pub finishing: AtomicBool,
    /// The connection thread must return.
    pub stop: AtomicBool,
    /// The broker's last refusal, in words.
    pub refusal: Mutex<Option<String>>,
}

impl Shared {
    /// The last refusal, if any.
    pub fn refusal(&self) -> Option<String> {
        self.refusal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_refusal(&self, reason: String) {
        *self.refusal.lock().unwrap_or_else(PoisonError::into_inner) = Some(reason);
    }
}

/// rumqttc options for `url` with these settings and credentials.
pub(crate) fn mqtt_options(
    url: &BrokerUrl,
    settings: &PublishSettings,
    credentials: Option<(String, Secret)>,
) -> Result<MqttOptions, PublishError> {
    // rumqttc joins host and port as `host:port`: an IPv6 address needs its brackets there
    // (over TLS an IPv6 literal is not a valid server name; use a host name).
    let host = if url.host.contains(':') {
        format!("[{}]", url.host)
    } else {
        url.host.clone()
    };
    let mut options = MqttOptions::new(settings.client_id_or_default(), host, url.port);
    options
        .set_keep_alive(Duration::from_secs(u64::from(
            settings.keep_alive_seconds.max(1),
        )))
        // A new session each connection: the broker keeps nothing for a run that has ended.
        .set_clean_session(true)
        .set_max_packet_size(TUNING.max_incoming_bytes, TUNING.max_message_bytes);
    if let Some((user, password)) = credentials {
        options.set_credentials(user, password.expose());
    }
    if url.tls {
        let config = tls_config(&settings.ca_file)?;
        options.set_transport(Transport::tls_with_config(TlsConfiguration::Rustls(
            Arc::new(config),
        )));
    }
    Ok(options)
}

/// Network options of the event loop.
pub(crate) fn network_options() -> NetworkOptions {
    let mut n = NetworkOptions::new();
    n.set_connection_timeout(TUNING.connect_timeout_seconds);
    n.set_tcp_nodelay(true);
    n
}

/// A rustls client configuration (ring provider) trusting `ca_file`'s certificates, or the
/// system's roots when it is empty.
fn tls_config(ca_file: &str) -> Result<rustls::ClientConfig, PublishError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let tls = |m: String| PublishError::Tls(m);
    let mut roots = rustls::RootCertStore::empty();
    if ca_file.is_empty() {
        let found = rustls_native_certs::load_native_certs();
        for e in &found.errors {
            log::debug!("system root certificates: {e}");
        }
        let (added, _) = roots.add_parsable_certificates(found.certs);
        if added == 0 {
            return Err(tls(
                "no system root certificates found (install ca-certificates, or set publish.ca_file)"
                    .into(),
            ));
        }
    } else {
        let certs = CertificateDer::pem_file_iter(ca_file)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| tls(format!("publish.ca_file {ca_file}: {e}")))?;
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(tls(format!(
                "publish.ca_file {ca_file}: no certificate in the file"
            )));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// Why a broker refused a login, in words.
#[must_use]
pub(crate) fn refusal_reason(code: ConnectReturnCode) -> &'static str {
    match code {
        ConnectReturnCode::BadUserNamePassword => {
            "bad user name or password (check publish.username/password or MORPHOSCOPE_MQTT_USERNAME/PASSWORD)"
        }
        ConnectReturnCode::NotAuthorized => {
            "not authorised (wrong or missing user name or password?)"
        }
        ConnectReturnCode::BadClientId => "client id rejected (set publish.client_id)",
        ConnectReturnCode::ServiceUnavailable => "service unavailable",
        ConnectReturnCode::RefusedProtocolVersion => "the broker does not speak MQTT 3.1.1",
        ConnectReturnCode::Success => "no reason given",
    }
}

/// Waits `d`, returning early when `stop` is set.
fn pause(shared: &Shared, d: Duration) {
    let until = Instant::now() + d;
    while !shared.stop.load(Ordering::Relaxed) {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// Drives the event loop until [`Shared::stop`], a DISCONNECT written, or every producer gone.
/// `broker` names the broker in log lines; `queue` is the queue's bound (for the messages).
pub(crate) fn drive(mut connection: Connection, shared: &Shared, broker: &str, queue: usize) {
    let mut backoff = TUNING.first_backoff;
    let mut outage_logged = false;
    let mut refusal_logged = None;
    while !shared.stop.load(Ordering::Relaxed) {
        // A closed request channel (every client handle dropped) ends the iteration.
        let Ok(event) = connection.recv() else { break };
        match event {
            Ok(Event::Incoming(Packet::ConnAck(_))) => {
                shared.connected.store(true, Ordering::Relaxed);
                if !shared.connected_ever.swap(true, Ordering::Relaxed) {
                    log::info!("publishing to {broker}");
                } else if outage_logged || refusal_logged.is_some() {
                    log::warn!("{broker}: connected again");
                }
                outage_logged = false;
                refusal_logged = None;
                backoff = TUNING.first_backoff;
            }
            Ok(Event::Incoming(Packet::PubAck(_))) => {
                shared.acked.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Event::Outgoing(Outgoing::Publish(_))) => {
                shared.sent.fetch_add(1, Ordering::Relaxed);
            }
            Ok(Event::Outgoing(Outgoing::Disconnect)) => break,
            Ok(_) => {}
            Err(ConnectionError::ConnectionRefused(code)) => {
                shared.errors.fetch_add(1, Ordering::Relaxed);
                shared.connected.store(false, Ordering::Relaxed);
                let reason = refusal_reason(code);
                if refusal_logged != Some(code) {
                    log::error!(
                        "{broker}: the broker refused the login: {reason}; nothing is published \
                         (retrying every {} s; messages queue up to {queue}, then are dropped)",
                        TUNING.max_backoff_refused.as_secs()
                    );
                    refusal_logged = Some(code);
                }
                shared.set_refusal(reason.to_owned());
                pause(shared, TUNING.max_backoff_refused);
            }
            Err(e) => {
                shared.errors.fetch_add(1, Ordering::Relaxed);
                let was_connected = shared.connected.swap(false, Ordering::Relaxed);
                if !outage_logged {
                    let what = if was_connected {
                        "connection lost"
                    } else {
                        "cannot connect"
                    };
                    log::warn!(
                        "{broker}: {what} ({e}); retrying (messages queue up to {queue}, then \
                         are dropped and counted)"
                    );
                    outage_logged = true;
                }
                if was_connected {
                    backoff = TUNING.first_backoff;
                }
                pause(shared, backoff);
                backoff = (backoff * 2).min(TUNING.max_backoff);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_or_empty_ca_file_is_a_clear_error() {
        let e = tls_config("/nonexistent/ca.pem").unwrap_err().to_string();
        assert!(e.contains("/nonexistent/ca.pem"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("empty.pem");
        std::fs::write(&p, "not a certificate\n").unwrap();
        let e = tls_config(p.to_str().unwrap()).unwrap_err().to_string();
        assert!(e.contains("no certificate"), "{e}");
    }

    #[test]
    fn options_carry_the_broker_the_login_and_the_limits() {
        let settings = PublishSettings {
            client_id: "cam-1".into(),
            keep_alive_seconds: 7,
            ..PublishSettings::default()
        };
        let url = BrokerUrl::parse("mqtt://[::1]:2000/p").unwrap();
        let login = Some(("u".to_owned(), Secret::new("pw")));
        let o = mqtt_options(&url, &settings, login).unwrap();
        assert_eq!(o.broker_address(), ("[::1]".to_owned(), 2000));
        assert_eq!(o.client_id(), "cam-1");
        assert_eq!(o.keep_alive(), Duration::from_secs(7));
        assert_eq!(o.max_packet_size(), TUNING.max_incoming_bytes);
        let login = o.credentials().unwrap();
        assert_eq!(
            (login.username.as_str(), login.password.as_str()),
            ("u", "pw")
        );
        let url = BrokerUrl::parse("mqtt://broker").unwrap();
        let o = mqtt_options(&url, &settings, None).unwrap();
        assert_eq!(o.broker_address(), ("broker".to_owned(), 1883));
        assert!(o.credentials().is_none());
    }

    #[test]
    fn refusals_are_named() {
        assert!(refusal_reason(ConnectReturnCode::BadUserNamePassword).contains("password"));
        assert!(refusal_reason(ConnectReturnCode::NotAuthorized).contains("not authorised"));
    }

    #[test]
    fn a_pause_ends_at_stop() {
        let shared = Shared::default();
        shared.stop.store(true, Ordering::Relaxed);
        let t = Instant::now();
        pause(&shared, Duration::from_secs(10));
        assert!(t.elapsed() < Duration::from_secs(1));
    }
}
