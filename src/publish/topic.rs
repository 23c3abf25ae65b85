//! The rules a topic prefix must follow, checked when the broker URL is parsed (before anything
//! is sent), so that every topic the publisher builds from it, `PREFIX/<stream>/frames` and
//! `PREFIX/<stream>/status`, is one the broker takes as it was meant:
//!
//! - no wildcard (`+`, `#`): they are for subscriptions, a broker refuses them in a publish;
//! - no control character (tab, newline, NUL, C1 controls) and no Unicode non-character: MQTT
//!   forbids or discourages them and mosquitto drops the connection on them;
//! - no leading `$`: those topics belong to the broker (`$SYS/…`), which does not deliver a
//!   client's messages there;
//! - at most `MAX_TOPIC_BYTES` for the whole topic: MQTT writes a topic's length on 16 bits,
//!   a longer one wraps and the broker reads the rest as payload; the prefix leaves room for the
//!   longest suffix (`LONGEST_SUFFIX_BYTES`);
//! - at most `MAX_TOPIC_LEVELS` levels for the whole topic (mosquitto's limit; a deeper topic
//!   is refused).
//!
//! Topics are UTF-8 by construction (a Rust string; `run --publish` refuses an argument that is
//! not UTF-8).

/// MQTT's limit on a topic name, bytes (its length is a 16-bit number).
pub(crate) const MAX_TOPIC_BYTES: usize = 65_535;

/// The longest stream id, bytes (a stream's topic level: its index, or the id a service gave).
pub(crate) const MAX_STREAM_ID_BYTES: usize = 64;

/// The longest suffix the publisher appends to the prefix: `/<stream id>/status` with the
/// longest id.
pub(crate) const LONGEST_SUFFIX_BYTES: usize = 1 + MAX_STREAM_ID_BYTES + "/status".len();

/// Topic levels mosquitto accepts at most in a topic (its `TOPIC_HIERARCHY_LIMIT`).
pub(crate) const MAX_TOPIC_LEVELS: usize = 200;

/// Levels the publisher appends to the prefix (`<stream>/status`).
const SUFFIX_LEVELS: usize = 2;

/// The longest prefix, bytes.
pub(crate) const MAX_PREFIX_BYTES: usize = MAX_TOPIC_BYTES - LONGEST_SUFFIX_BYTES;

/// The most levels a prefix may have.
pub(crate) const MAX_PREFIX_LEVELS: usize = MAX_TOPIC_LEVELS - SUFFIX_LEVELS;

/// Checks a topic prefix (without leading or trailing `/`); the error names the rule broken and
/// shows the prefix as typed (escaped, and shortened when long).
pub(crate) fn check_prefix(prefix: &str) -> Result<(), String> {
    let shown = shown(prefix);
    let bad = |rule: String| Err(format!("the topic prefix {shown} {rule}"));
    if prefix.contains(['+', '#']) {
        return bad("holds a wildcard ('+' or '#'), which only subscriptions may use".into());
    }
    if let Some(c) = prefix
        .chars()
        .find(|&c| c.is_control() || is_non_character(c))
    {
        return bad(format!(
            "holds the character {:?} (U+{:04X}): control characters (tab, newline, NUL, …) and \
             Unicode non-characters are not allowed in MQTT topics",
            c, c as u32
        ));
    }
    if prefix.starts_with('$') {
        return bad(
            "starts with '$': topics beginning with '$' belong to the broker ($SYS/…), which does \
             not deliver messages published there"
                .into(),
        );
    }
    if prefix.len() > MAX_PREFIX_BYTES {
        return bad(format!(
            "is {} bytes: at most {MAX_PREFIX_BYTES}, so that PREFIX/<stream>/status fits in \
             MQTT's {MAX_TOPIC_BYTES} bytes",
            prefix.len()
        ));
    }
    let levels = prefix.split('/').count();
    if levels > MAX_PREFIX_LEVELS {
        return bad(format!(
            "has {levels} levels: at most {MAX_PREFIX_LEVELS}, so that PREFIX/<stream>/status \
             has at most {MAX_TOPIC_LEVELS} (the broker refuses deeper topics)"
        ));
    }
    Ok(())
}

/// A Unicode non-character (U+FDD0..=U+FDEF, and the last two code points of every plane).
fn is_non_character(c: char) -> bool {
    let u = c as u32;
    (0xFDD0..=0xFDEF).contains(&u) || u & 0xFFFE == 0xFFFE
}

/// The prefix for a message: quoted with escapes (a tab shows as `\t`), its first 40 characters
/// only when it is longer.
fn shown(prefix: &str) -> String {
    const HEAD: usize = 40;
    let count = prefix.chars().count();
    if count <= HEAD {
        return format!("`{}`", prefix.escape_debug());
    }
    let head: String = prefix.chars().take(HEAD).collect();
    format!("`{}…` ({count} characters)", head.escape_debug())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_prefixes_pass() {
        for p in ["morphoscope", "site1/cams", "a//b", "caméra/1", "a$b"] {
            assert_eq!(check_prefix(p), Ok(()), "{p}");
        }
        assert_eq!(check_prefix(&"a".repeat(MAX_PREFIX_BYTES)), Ok(()));
        assert_eq!(
            check_prefix(&vec!["a"; MAX_PREFIX_LEVELS].join("/")),
            Ok(())
        );
    }

    #[test]
    fn each_rule_is_named_with_the_prefix() {
        for (p, says) in [
            ("a/+/b", "wildcard"),
            ("a/#", "wildcard"),
            ("a\tb", "'\\t'"),
            ("a\nb", "control characters"),
            ("a\u{0}b", "control characters"),
            ("a\u{85}b", "control characters"),
            ("a\u{FFFF}", "non-characters"),
            ("$SYS/x", "starts with '$'"),
        ] {
            let e = check_prefix(p).unwrap_err();
            assert!(e.contains(says), "{p:?}: `{e}` does not say {says}");
            assert!(e.contains(&p.escape_debug().to_string()), "{p:?}: {e}");
        }
        let e = check_prefix(&"c".repeat(MAX_PREFIX_BYTES + 1)).unwrap_err();
        assert!(
            e.contains("65535") && e.contains("bytes") && e.len() < 300,
            "{e}"
        );
        let e = check_prefix(&vec!["a"; 700].join("/")).unwrap_err();
        assert!(e.contains("700 levels"), "{e}");
    }

    #[test]
    fn the_longest_topic_fits() {
        let id = "i".repeat(MAX_STREAM_ID_BYTES);
        let topic = format!("{}/{id}/status", "a".repeat(MAX_PREFIX_BYTES));
        assert_eq!(topic.len(), MAX_TOPIC_BYTES);
        assert!(
            usize::MAX.to_string().len() <= MAX_STREAM_ID_BYTES,
            "an index fits too"
        );
    }
}
