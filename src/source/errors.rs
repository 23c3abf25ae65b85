//! From GStreamer's bus errors to one message that says what happened.
//!
//! A failing source usually posts several errors: the element that failed (souphttpsrc: "File
//! not found"), then each element whose stream stopped because of it ("Internal data stream
//! error", typefind's "Stream doesn't contain enough data"). [`pick`] keeps the most specific
//! (resource errors first, the generic flow error last). Some causes are in no message at all:
//! souphttpsrc reports a refused connection or a server that never answers only as a stopped
//! stream, so for network URIs [`describe`] asks the network itself ([`diagnose`]: resolve the
//! host, connect). A built-in file or URI source whose decoded pads could not link to the video
//! converter has no video stream (an audio-only file).

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use gstreamer as gst;
use gstreamer::prelude::*;

use super::{SourceError, SourceSpec};

/// One error message taken off the bus.
#[derive(Clone, Debug)]
pub(super) struct BusError {
    /// Name of the element that posted it.
    pub element: String,
    /// GStreamer's message.
    pub message: String,
    /// GStreamer's debug detail (where it was raised, then the cause).
    pub debug: Option<String>,
    /// How specific it is: 0 resource errors, 1 other errors, 2 the generic flow error.
    pub vagueness: u8,
}

impl BusError {
    /// Reads an error message.
    pub(crate) fn from_message(e: &gst::message::Error) -> Self {
        let err = e.error();
        let vagueness = if err.kind::<gst::ResourceError>().is_some() {
            0
        } else if err.matches(gst::StreamError::Failed) {
            2
        } else {
            1
        };
        Self {
            element: e
                .src()
                .map(|s| s.name().to_string())
                .unwrap_or_else(|| "pipeline".into()),
            message: crate::redact::text(&err.to_string().replace('\n', " ")),
            debug: e.debug().map(|d| crate::redact::text(&d)),
            vagueness,
        }
    }

    /// The last line of the debug detail: GStreamer puts the cause there (e.g. "File not found
    /// (404), URL: …"), after the source location and element path.
    fn cause(&self) -> Option<&str> {
        let last = self.debug.as_deref()?.lines().last()?.trim();
        (!last.is_empty() && !last.starts_with("streaming stopped") && !last.contains("gst_"))
            .then_some(last)
    }

    fn mentions(&self, needle: &str) -> bool {
        self.debug.as_deref().is_some_and(|d| d.contains(needle))
    }
}

/// The most specific of the errors (the first among equals).
pub(super) fn pick(errors: Vec<BusError>) -> Option<BusError> {
    let best = errors.iter().map(|e| e.vagueness).min()?;
    errors.into_iter().find(|e| e.vagueness == best)
}

/// What to tell the user about `error` from the pipeline of `spec`. `found_streams` lists the
/// kinds of stream decodebin exposed (`audio`, …), `waited` how long the source had been
/// trying, `timeout` the configured one.
pub(super) fn describe(
    spec: &SourceSpec,
    error: BusError,
    found_streams: &[String],
    waited: Duration,
    timeout: Duration,
) -> SourceError {
    let builtin = matches!(spec, SourceSpec::File(_) | SourceSpec::Uri(_));
    if builtin
        && (error.mentions("delayed linking") || error.mentions("not-linked"))
        && !found_streams.iter().any(|s| s == "video")
    {
        let found = (!found_streams.is_empty()).then(|| found_streams.join(" and "));
        return SourceError::NoVideo {
            source_name: spec.to_string(),
            found,
        };
    }
    if let SourceSpec::Uri(url) = spec
        && let Some(reason) = network_reason(url, &error, waited, timeout)
    {
        return SourceError::Network {
            url: crate::redact::url(url),
            reason,
        };
    }
    let message = match error.cause() {
        Some(cause) if !error.message.contains(cause) => {
            format!("{} ({})", error.message.trim_end_matches('.'), cause)
        }
        _ => error.message.clone(),
    };
    SourceError::Stream {
        source_name: error.element,
        message,
        debug: None,
    }
}

/// For a network URL: the server's own answer when the error carries one (HTTP status), else
/// what connecting to it shows. `None` for local URIs.
fn network_reason(
    url: &str,
    error: &BusError,
    waited: Duration,
    timeout: Duration,
) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme == "file" {
        return None;
    }
    if error.vagueness == 0 {
        // souphttpsrc: "File not found (404), URL: http://…, Redirect to: (NULL)".
        let cause = error
            .cause()
            .map(|c| c.split(", URL:").next().unwrap_or(c).to_owned());
        return Some(cause.unwrap_or_else(|| error.message.clone()));
    }
    let default_port = match scheme {
        "http" => 80,
        "https" => 443,
        "rtsp" | "rtsps" => 554,
        "rtmp" => 1935,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    Some(diagnose(host_port, default_port).unwrap_or_else(|| {
        if waited + Duration::from_millis(500) >= timeout {
            format!(
                "no answer within {} s (timeout; `--set source.timeout_seconds=N` to wait longer)",
                timeout.as_secs()
            )
        } else {
            error.message.clone()
        }
    }))
}

/// Connects to `host[:port]`; what went wrong, or `None` when the server accepts connections.
pub(super) fn diagnose(host_port: &str, default_port: u16) -> Option<String> {
    let with_port = if host_port
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        && !host_port.ends_with(']')
    {
        host_port.to_owned()
    } else {
        format!("{host_port}:{default_port}")
    };
    let addrs = match with_port.to_socket_addrs() {
        Ok(a) => a.collect::<Vec<_>>(),
        Err(e) => return Some(format!("cannot resolve the host ({e})")),
    };
    let mut last = None;
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, CONNECT_PROBE) {
            Ok(_) => return None,
            Err(e) => last = Some(e),
        }
    }
    Some(match last {
        Some(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            format!("connection refused by {with_port}")
        }
        Some(e) if e.kind() == std::io::ErrorKind::TimedOut => {
            format!("connection to {with_port} timed out")
        }
        Some(e) => format!("cannot connect to {with_port} ({e})"),
        None => format!("{with_port} resolves to no address"),
    })
}

/// How long the diagnosis waits for a TCP connection.
const CONNECT_PROBE: Duration = Duration::from_secs(3);

#[cfg(test)]
mod tests {
    use super::*;

    fn err(message: &str, debug: &str, vagueness: u8) -> BusError {
        BusError {
            element: "source".into(),
            message: message.into(),
            debug: Some(debug.into()),
            vagueness,
        }
    }

    #[test]
    fn the_specific_error_wins_over_the_flow_errors_it_causes() {
        let e = pick(vec![
            err("Internal data stream error.", "gstbasesrc.c(3132): gst_base_src_loop (): /x:\nstreaming stopped, reason error (-5)", 2),
            err("File not found", "gstsouphttpsrc.c(1683): parse (): /x:\nFile not found (404), URL: http://h/x.mp4, Redirect to: (NULL)", 0),
        ])
        .unwrap();
        assert_eq!(e.message, "File not found");
        let spec = SourceSpec::Uri("http://127.0.0.1:9/x.mp4".into());
        let d = describe(&spec, e, &[], Duration::ZERO, Duration::from_secs(5)).to_string();
        assert_eq!(d, "http://127.0.0.1:9/x.mp4: File not found (404)");
    }

    #[test]
    fn unlinked_pads_of_a_file_mean_no_video() {
        let spec = SourceSpec::File("a.wav".into());
        let e = pick(vec![err("Internal data stream error.", "grammar.y(853): no_more_pads (): /x:\nfailed delayed linking some pad of uridecodebin0", 2)]).unwrap();
        let d = describe(
            &spec,
            e,
            &["audio".into()],
            Duration::ZERO,
            Duration::from_secs(5),
        )
        .to_string();
        assert_eq!(d, "a.wav: no video stream (it holds audio)");
    }

    #[test]
    fn a_file_that_is_not_a_video_is_not_called_audio() {
        let spec = SourceSpec::File("notes.mp4".into());
        let e = pick(vec![
            err(
                "Internal data stream error.",
                "x:\nstreaming stopped, reason not-linked (-1)",
                2,
            ),
            err(
                "This appears to be a text file.",
                "gstdecodebin2.c(4719): type_found (): /x",
                1,
            ),
        ])
        .unwrap();
        let d = describe(&spec, e, &[], Duration::ZERO, Duration::from_secs(5)).to_string();
        assert!(d.contains("text file"), "{d}");
    }

    #[test]
    fn a_closed_port_is_a_refused_connection() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let d = diagnose(&format!("127.0.0.1:{port}"), 80).unwrap();
        assert!(d.starts_with("connection refused by 127.0.0.1:"), "{d}");
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert_eq!(diagnose(&l.local_addr().unwrap().to_string(), 80), None);
        assert!(
            diagnose("no-such-host.invalid", 80)
                .unwrap()
                .starts_with("cannot resolve")
        );
    }
}
