//! A real mosquitto broker on 127.0.0.1 for the tests (a free port, a generated config, an
//! optional password file made by `mosquitto_passwd`, an optional TLS listener with a
//! certificate signed by a CA made by `openssl`), and a subscriber that records every message it
//! receives.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rumqttc::{Client, Event, MqttOptions, Packet, QoS};

/// The mosquitto binary, or `None` (the test skips) when it is not installed; a failure when
/// `MORPHOSCOPE_REQUIRE_MQTT=1`, as in CI.
pub fn mosquitto() -> Option<PathBuf> {
    let found = ["/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .or_else(|| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join("mosquitto"))
                    .find(|p| p.is_file())
            })
        });
    if found.is_none() {
        assert!(
            std::env::var("MORPHOSCOPE_REQUIRE_MQTT").as_deref() != Ok("1"),
            "mosquitto is not installed (scripts/setup.sh installs it)"
        );
        eprintln!("mosquitto is not installed (scripts/setup.sh); skipped");
    }
    found
}

/// A port of 127.0.0.1 nothing listens on (bound, then released).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Starts mosquitto with `dir`'s `mosquitto.conf`, appending to its `mosquitto.log`.
fn spawn(binary: &Path, dir: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("mosquitto.log"))
        .unwrap();
    Command::new(binary)
        .arg("-c")
        .arg(dir.join("mosquitto.conf"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

/// A mosquitto process, killed when dropped.
pub struct Broker {
    child: Child,
    binary: PathBuf,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// The user and password it accepts (`None`: anonymous).
    pub login: Option<(String, String)>,
    /// With [`Broker::start_tls`]: the TLS listener's port and the CA's PEM file.
    pub tls: Option<(u16, PathBuf)>,
    dir: tempfile::TempDir,
}

/// Runs `openssl` with `args` in `dir`; false when it is missing or fails.
fn openssl(dir: &Path, args: &[&str]) -> bool {
    Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Makes `ca.pem` and a server certificate for 127.0.0.1 (`server.pem`, `server.key`) signed
/// by it in `dir`; false when openssl is missing.
fn make_certificates(dir: &Path) -> bool {
    std::fs::write(
        dir.join("san.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    let steps: [&[&str]; 3] = [
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=morphoscope test CA",
        ],
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=localhost",
        ],
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "san.ext",
        ],
    ];
    steps.iter().all(|args| openssl(dir, args))
}

impl Broker {
    /// Starts mosquitto: anonymous, or only `login` (a password file) when given. Waits until it
    /// accepts connections.
    pub fn start(binary: &Path, login: Option<(&str, &str)>) -> Self {
        Self::start_with(binary, login, false).unwrap()
    }

    /// Starts an anonymous mosquitto with a second listener, over TLS (certificate for
    /// 127.0.0.1 signed by a fresh CA: [`Broker::tls`]); `None` when openssl is missing.
    pub fn start_tls(binary: &Path) -> Option<Self> {
        Self::start_with(binary, None, true)
    }

    fn start_with(binary: &Path, login: Option<(&str, &str)>, tls: bool) -> Option<Self> {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut conf = format!(
            "listener {port} 127.0.0.1\npersistence false\nlog_dest stderr\n\
             # As root, mosquitto would switch to its own user, which cannot read this folder.\n\
             user root\n"
        );
        match login {
            None => conf.push_str("allow_anonymous true\n"),
            Some((user, password)) => {
                let file = dir.path().join("passwords");
                let status = Command::new("mosquitto_passwd")
                    .args(["-c", "-b"])
                    .arg(&file)
                    .args([user, password])
                    .status()
                    .expect("mosquitto_passwd (package mosquitto)");
                assert!(status.success(), "mosquitto_passwd failed");
                conf.push_str(&format!(
                    "allow_anonymous false\npassword_file {}\n",
                    file.display()
                ));
            }
        }
        let mut tls_listener = None;
        if tls {
            if !make_certificates(dir.path()) {
                eprintln!("openssl is missing or failed: TLS test skipped");
                return None;
            }
            let tls_port = free_port();
            let d = dir.path().display();
            conf.push_str(&format!(
                "listener {tls_port} 127.0.0.1\ncafile {d}/ca.pem\ncertfile {d}/server.pem\n\
                 keyfile {d}/server.key\n"
            ));
            tls_listener = Some((tls_port, dir.path().join("ca.pem")));
        }
        let conf_path = dir.path().join("mosquitto.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = spawn(binary, dir.path());
        let mut broker = Self {
            child,
            binary: binary.to_owned(),
            port,
            login: login.map(|(u, p)| (u.to_owned(), p.to_owned())),
            tls: tls_listener,
            dir,
        };
        broker.wait_until_listening();
        Some(broker)
    }

    fn wait_until_listening(&mut self) {
        let until = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("mosquitto exited ({status}): {}", self.log());
            }
            assert!(
                Instant::now() < until,
                "mosquitto does not listen: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the broker (its clients see the connection drop).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the broker again on the same port, with the same settings.
    pub fn restart(&mut self) {
        self.kill();
        self.child = spawn(&self.binary, self.dir.path());
        self.wait_until_listening();
    }

    /// What mosquitto logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("mosquitto.log")).unwrap_or_default()
    }

    /// Subscribes to `filter` (QoS 1) with the broker's login; returns once the broker
    /// acknowledged the subscription.
    pub fn subscribe(&self, filter: &str) -> Subscriber {
        let mut options =
            MqttOptions::new(format!("test-sub-{}", self.port), "127.0.0.1", self.port);
        options.set_max_packet_size(16 << 20, 64 << 10);
        if let Some((user, password)) = &self.login {
            options.set_credentials(user, password);
        }
        let (client, mut connection) = Client::new(options, 64);
        client.subscribe(filter, QoS::AtLeastOnce).unwrap();
        let messages = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (subscribed_tx, subscribed_rx) = std::sync::mpsc::channel();
        let (m, s) = (Arc::clone(&messages), Arc::clone(&stop));
        std::thread::spawn(move || {
            for event in connection.iter() {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                match event {
                    Ok(Event::Incoming(Packet::SubAck(_))) => {
                        let _ = subscribed_tx.send(());
                    }
                    Ok(Event::Incoming(Packet::Publish(p))) => {
                        let text = String::from_utf8(p.payload.to_vec()).unwrap();
                        m.lock().unwrap().push((p.topic, text));
                    }
                    Ok(_) => {}
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        });
        subscribed_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("no SUBACK from mosquitto");
        Subscriber {
            _client: client,
            messages,
            stop,
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Messages received on a subscription, in arrival order.
pub struct Subscriber {
    _client: Client,
    messages: Arc<Mutex<Vec<(String, String)>>>,
    stop: Arc<AtomicBool>,
}

impl Subscriber {
    /// The (topic, payload) pairs received so far.
    pub fn messages(&self) -> Vec<(String, String)> {
        self.messages.lock().unwrap().clone()
    }

    /// Waits up to `timeout` for `count` messages on `topic`; returns those received.
    pub fn wait_for(&self, topic: &str, count: usize, timeout: Duration) -> Vec<String> {
        let until = Instant::now() + timeout;
        loop {
            let got: Vec<String> = self
                .messages()
                .into_iter()
                .filter(|(t, _)| t == topic)
                .map(|(_, m)| m)
                .collect();
            if got.len() >= count || Instant::now() >= until {
                return got;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
