//! `[publish]`: where results go (a broker URL `mqtt://HOST:PORT/PREFIX` or `mqtts://…`), how
//! many messages may wait for it, and how to log in. Credentials come from the config file or,
//! winning over it, from `MORPHOSCOPE_MQTT_USERNAME` / `MORPHOSCOPE_MQTT_PASSWORD`; they are never
//! taken from the command line (a URL with `user:password@` is refused) and never shown: the
//! password is a [`Secret`], whose `Debug` says `<redacted>` and which is never serialised (the
//! viewer's saved settings do not carry it).

use serde::{Deserialize, Serialize};

use super::PublishError;

/// Environment variable with the broker user name (wins over `publish.username`).
pub(crate) const USERNAME_ENV: &str = "MORPHOSCOPE_MQTT_USERNAME";
/// Environment variable with the broker password (wins over `publish.password`).
pub(crate) const PASSWORD_ENV: &str = "MORPHOSCOPE_MQTT_PASSWORD";

/// Port of `mqtt://` URLs without one (IANA).
pub(crate) const MQTT_PORT: u16 = 1883;
/// Port of `mqtts://` URLs without one (IANA).
pub(crate) const MQTTS_PORT: u16 = 8883;
/// Topic prefix of URLs without a path.
pub(crate) const DEFAULT_PREFIX: &str = "morphoscope";

/// A password: compared and read by the publisher, never printed or serialised.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a password.
    #[must_use]
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// True when no password is set.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The password itself, for the MQTT CONNECT packet only.
    #[must_use]
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            f.write_str("\"\"")
        } else {
            f.write_str("<redacted>")
        }
    }
}

/// `[publish]`: results on an MQTT broker (`run --publish URL` sets `url`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PublishSettings {
    /// Broker and topic prefix, `mqtt://HOST[:PORT][/PREFIX]` or `mqtts://…` (TLS); empty: off.
    pub url: String,
    /// Messages that may wait for the broker (all streams together); past it they are dropped.
    pub queue_messages: usize,
    /// PEM file of the CA that signed the broker's certificate (mqtts); empty: system roots.
    pub ca_file: String,
    /// Broker user name (`MORPHOSCOPE_MQTT_USERNAME` wins); empty: anonymous.
    pub username: String,
    /// Broker password (`MORPHOSCOPE_MQTT_PASSWORD` wins). Never written back by the viewer.
    #[serde(skip_serializing)]
    pub password: Secret,
    /// MQTT client id, unique per broker; empty: `morphoscope-<host>-<pid>`.
    pub client_id: String,
    /// Seconds between keep-alive pings when nothing else is sent, 1..=65535.
    pub keep_alive_seconds: u16,
    /// Seconds the end of a run waits for the broker to acknowledge what is queued, 0..=600.
    pub flush_seconds: u32,
}

impl Default for PublishSettings {
    fn default() -> Self {
        Self {
            url: String::new(),
            queue_messages: 1000,
            ca_file: String::new(),
            username: String::new(),
            password: Secret::default(),
            client_id: String::new(),
            keep_alive_seconds: 30,
            flush_seconds: 5,
        }
    }
}

impl PublishSettings {
    /// Range checks: `(key, message)` of the first bad value.
    pub fn validate(&self) -> Result<(), (String, String)> {
        let bad = |key: &str, message: String| Err((format!("publish.{key}"), message));
        if !(1..=1_000_000).contains(&self.queue_messages) {
            return bad("queue_messages", "must be 1..=1000000".into());
        }
        if self.keep_alive_seconds == 0 {
            return bad("keep_alive_seconds", "must be 1..=65535".into());
        }
        if self.flush_seconds > 600 {
            return bad("flush_seconds", "must be 0..=600".into());
        }
        if !self.url.is_empty()
            && let Err(e) = BrokerUrl::parse(&self.url)
        {
            return bad("url", e.to_string());
        }
        Ok(())
    }

    /// The user name and password to log in with: the environment's (read through `env`) win
    /// over the file's. `None`: anonymous. A password without a user name is an error (MQTT
    /// 3.1.1 sends a password only after a user name).
    pub(crate) fn credentials(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<(String, Secret)>, PublishError> {
        let username = env(USERNAME_ENV)
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| self.username.clone());
        let password = env(PASSWORD_ENV)
            .filter(|p| !p.is_empty())
            .map_or_else(|| self.password.clone(), Secret::new);
        match (username.is_empty(), password.is_empty()) {
            (true, true) => Ok(None),
            (true, false) => Err(PublishError::Config(format!(
                "a broker password is set but no user name (publish.username or {USERNAME_ENV})"
            ))),
            (false, _) => Ok(Some((username, password))),
        }
    }

    /// The client id: `client_id`, else `morphoscope-<host>-<pid>` (unique per process, so two
    /// runs on one host do not take each other's session).
    #[must_use]
    pub(crate) fn client_id_or_default(&self) -> String {
        if !self.client_id.is_empty() {
            return self.client_id.clone();
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "host".to_owned());
        format!("morphoscope-{host}-{}", std::process::id())
    }
}

/// A parsed broker URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerUrl {
    /// `mqtts://`: TLS.
    pub tls: bool,
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Topic prefix, without leading or trailing `/` (may hold inner `/`).
    pub prefix: String,
}

impl BrokerUrl {
    /// Parses `mqtt://HOST[:PORT][/PREFIX]` or `mqtts://…`; IPv6 hosts in brackets
    /// (`mqtt://[::1]:1883/p`). Credentials in the URL are refused (they would show in the
    /// process list and shell history); the prefix follows the rules of [`super::topic`].
    pub fn parse(url: &str) -> Result<Self, PublishError> {
        let bad = |why: &str| PublishError::Url {
            url: shortened(&crate::redact::url(url)),
            reason: why.to_owned(),
        };
        let (tls, rest) = if let Some(r) = url.strip_prefix("mqtt://") {
            (false, r)
        } else if let Some(r) = url.strip_prefix("mqtts://") {
            (true, r)
        } else {
            return Err(bad("expected mqtt://HOST[:PORT][/PREFIX] or mqtts://…"));
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.contains('@') {
            return Err(bad(
                "credentials do not go in the URL: set publish.username/password in the config \
                 file or MORPHOSCOPE_MQTT_USERNAME/MORPHOSCOPE_MQTT_PASSWORD",
            ));
        }
        let default_port = if tls { MQTTS_PORT } else { MQTT_PORT };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (host, after) = v6.split_once(']').ok_or_else(|| bad("unclosed '['"))?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| bad("junk after ']'"))?),
            };
            (host, port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let port = match port {
            None => default_port,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => n,
                _ => return Err(bad("the port must be 1..=65535")),
            },
        };
        let prefix = path.trim_matches('/');
        super::topic::check_prefix(prefix).map_err(|why| bad(&why))?;
        let prefix = if prefix.is_empty() {
            DEFAULT_PREFIX
        } else {
            prefix
        };
        Ok(Self {
            tls,
            host: host.to_owned(),
            port,
            prefix: prefix.to_owned(),
        })
    }
}

/// `url` for a message: whole, or its first 80 characters (escaped) when it is longer.
fn shortened(url: &str) -> String {
    const HEAD: usize = 80;
    if url.chars().count() <= HEAD {
        return url.escape_debug().to_string();
    }
    let head: String = url.chars().take(HEAD).collect();
    format!("{}…", head.escape_debug())
}

impl std::fmt::Display for BrokerUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.tls { "mqtts" } else { "mqtt" };
        if self.host.contains(':') {
            write!(
                f,
                "{scheme}://[{}]:{}/{}",
                self.host, self.port, self.prefix
            )
        } else {
            write!(f, "{scheme}://{}:{}/{}", self.host, self.port, self.prefix)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> BrokerUrl {
        BrokerUrl::parse(s).unwrap()
    }

    #[test]
    fn urls_parse_with_their_defaults() {
        assert_eq!(
            url("mqtt://broker.local:1884/site1/cams"),
            BrokerUrl {
                tls: false,
                host: "broker.local".into(),
                port: 1884,
                prefix: "site1/cams".into()
            }
        );
        let u = url("mqtts://broker");
        assert!(u.tls);
        assert_eq!((u.port, u.prefix.as_str()), (MQTTS_PORT, DEFAULT_PREFIX));
        let u = url("mqtt://10.0.0.2/ms/");
        assert_eq!((u.port, u.prefix.as_str()), (MQTT_PORT, "ms"));
        let u = url("mqtt://[::1]:2000/p");
        assert_eq!((u.host.as_str(), u.port), ("::1", 2000));
        assert_eq!(u.to_string(), "mqtt://[::1]:2000/p");
        assert_eq!(url("mqtt://[fe80::1]").port, MQTT_PORT);
    }

    #[test]
    fn bad_urls_say_why() {
        for (u, why) in [
            ("http://broker/x", "expected mqtt://"),
            (
                "mqtt://user:pw@broker/x",
                "credentials do not go in the URL",
            ),
            ("mqtt://:1883/x", "no host"),
            ("mqtt://broker:0/x", "port"),
            ("mqtt://broker:99999/x", "port"),
            ("mqtt://broker:abc/x", "port"),
            ("mqtt://broker/a/+/b", "'+'"),
            ("mqtt://broker/a/#", "'+'"),
            ("mqtt://[::1/x", "unclosed"),
            ("mqtt://broker/a\tb", "control characters"),
            ("mqtt://broker/$SYS/x", "'$'"),
        ] {
            let e = BrokerUrl::parse(u).unwrap_err().to_string();
            assert!(e.contains(why), "{u}: `{e}` does not say {why}");
            assert!(!e.contains("pw@"), "the error repeats the password: {e}");
        }
    }

    #[test]
    fn the_password_is_never_shown_or_saved() {
        let s = PublishSettings {
            username: "cam".into(),
            password: Secret::new("hunter2"),
            ..PublishSettings::default()
        };
        let debug = format!("{s:?}");
        assert!(
            !debug.contains("hunter2") && debug.contains("<redacted>"),
            "{debug}"
        );
        let toml = toml::to_string(&s).unwrap();
        assert!(
            !toml.contains("hunter2") && !toml.contains("password"),
            "{toml}"
        );
        assert!(toml.contains("username = \"cam\""), "{toml}");
        let back: PublishSettings = toml::from_str("password = \"pw\"").unwrap();
        assert_eq!(back.password.expose(), "pw");
        assert_eq!(format!("{:?}", Secret::default()), "\"\"");
    }

    #[test]
    fn the_environment_wins_over_the_file() {
        let file = PublishSettings {
            username: "file-user".into(),
            password: Secret::new("file-pw"),
            ..PublishSettings::default()
        };
        let none = |_: &str| None;
        let (u, p) = file.credentials(none).unwrap().unwrap();
        assert_eq!((u.as_str(), p.expose()), ("file-user", "file-pw"));
        let env = |k: &str| match k {
            USERNAME_ENV => Some("env-user".to_owned()),
            PASSWORD_ENV => Some("env-pw".to_owned()),
            _ => None,
        };
        let (u, p) = file.credentials(env).unwrap().unwrap();
        assert_eq!((u.as_str(), p.expose()), ("env-user", "env-pw"));
        let only_pw = |k: &str| (k == PASSWORD_ENV).then(|| "env-pw".to_owned());
        let (u, p) = file.credentials(only_pw).unwrap().unwrap();
        assert_eq!((u.as_str(), p.expose()), ("file-user", "env-pw"));
        assert!(
            PublishSettings::default()
                .credentials(none)
                .unwrap()
                .is_none()
        );
        let e = PublishSettings::default()
            .credentials(only_pw)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no user name") && !e.contains("env-pw"), "{e}");
    }

    #[test]
    fn ranges_are_checked_with_the_key_named() {
        assert!(PublishSettings::default().validate().is_ok());
        for (s, key) in [
            (
                PublishSettings {
                    queue_messages: 0,
                    ..Default::default()
                },
                "publish.queue_messages",
            ),
            (
                PublishSettings {
                    keep_alive_seconds: 0,
                    ..Default::default()
                },
                "publish.keep_alive_seconds",
            ),
            (
                PublishSettings {
                    url: "tcp://x".into(),
                    ..Default::default()
                },
                "publish.url",
            ),
        ] {
            assert_eq!(s.validate().unwrap_err().0, key);
        }
    }

    #[test]
    fn the_default_client_id_is_unique_per_process() {
        let id = PublishSettings::default().client_id_or_default();
        assert!(
            id.starts_with("morphoscope-") && id.ends_with(&std::process::id().to_string()),
            "{id}"
        );
        let set = PublishSettings {
            client_id: "cam-7".into(),
            ..Default::default()
        };
        assert_eq!(set.client_id_or_default(), "cam-7");
    }
}
