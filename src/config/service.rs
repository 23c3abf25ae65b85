//! `[service]`: the HTTP endpoint beside a headless run (`run --listen` sets `listen`).

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::publish::settings::Secret;

/// Environment variable with the bearer token (wins over `service.token`).
pub(crate) const TOKEN_ENV: &str = "MORPHOSCOPE_SERVICE_TOKEN";

/// Connections the endpoint serves at once; more wait in the listen backlog.
pub(crate) const MAX_CONNECTIONS_LIMIT: usize = 4096;

/// `[service]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServiceSettings {
    /// `ADDR:PORT` of the HTTP endpoint; empty: no endpoint.
    pub listen: String,
    /// Bearer token every endpoint but `/healthz` asks for (`MORPHOSCOPE_SERVICE_TOKEN` wins);
    /// required off loopback. Never taken from the command line, never logged or saved.
    #[serde(skip_serializing)]
    pub token: Secret,
    /// The folder whose files `POST /streams` may open; empty: no file over HTTP.
    pub media_root: String,
    /// Accept GStreamer pipeline descriptions over HTTP (they can read and write any file the
    /// process can).
    pub allow_pipelines: bool,
    /// Connections served at once, 1..=4096.
    pub max_connections: usize,
}

impl Default for ServiceSettings {
    fn default() -> Self {
        Self {
            listen: String::new(),
            token: Secret::default(),
            media_root: String::new(),
            allow_pipelines: false,
            max_connections: 64,
        }
    }
}

impl ServiceSettings {
    /// Range checks: `(key, message)` of the first bad value.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if !self.listen.is_empty() {
            self.address()?;
        }
        if !(1..=MAX_CONNECTIONS_LIMIT).contains(&self.max_connections) {
            return Err((
                "service.max_connections".into(),
                format!("must be 1..={MAX_CONNECTIONS_LIMIT}"),
            ));
        }
        Ok(())
    }

    /// The address to listen on (`listen` parsed).
    pub fn address(&self) -> Result<SocketAddr, (String, String)> {
        self.listen.trim().parse().map_err(|_| {
            (
                "service.listen".into(),
                format!(
                    "`{}` is not ADDR:PORT (e.g. 127.0.0.1:9900, [::1]:9900)",
                    self.listen.escape_debug()
                ),
            )
        })
    }

    /// The token: `env(TOKEN_ENV)` when set and not empty, else `token`; `None` when neither.
    pub fn token(&self, env: impl Fn(&str) -> Option<String>) -> Option<Secret> {
        env(TOKEN_ENV)
            .filter(|t| !t.is_empty())
            .map(Secret::new)
            .or_else(|| (!self.token.is_empty()).then(|| self.token.clone()))
    }

    /// The media root, when set.
    #[must_use]
    pub fn media_root(&self) -> Option<PathBuf> {
        (!self.media_root.is_empty()).then(|| PathBuf::from(&self.media_root))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_must_be_an_address_and_connections_a_bounded_count() {
        let mut s = ServiceSettings::default();
        assert!(s.validate().is_ok(), "empty: off");
        s.listen = "127.0.0.1:9900".into();
        assert_eq!(s.address().map(|a| a.port()), Ok(9900));
        s.listen = "localhost".into();
        assert_eq!(s.validate().unwrap_err().0, "service.listen");
        s.listen = "[::1]:0".into();
        s.max_connections = 0;
        assert_eq!(s.validate().unwrap_err().0, "service.max_connections");
    }

    #[test]
    fn the_environment_wins_over_the_file_and_empty_is_none() {
        let mut s = ServiceSettings::default();
        assert!(s.token(|_| None).is_none());
        assert!(s.token(|_| Some(String::new())).is_none());
        s.token = Secret::new("from-file");
        assert_eq!(s.token(|_| None).unwrap().expose(), "from-file");
        let env = |k: &str| (k == TOKEN_ENV).then(|| "from-env".to_owned());
        assert_eq!(s.token(env).unwrap().expose(), "from-env");
    }
}
