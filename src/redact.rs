//! Secrets never leave the process: one rule, applied to every text that does (log lines,
//! errors, summaries, `timings.json`, the element's bus messages).
//!
//! A secret is
//! - the user-info of a URL (`rtsp://admin:secret@cam/x` shows as `rtsp://***@cam/x`), whatever
//!   the scheme: sources, broker URLs, and URLs GStreamer quotes in its own messages;
//! - the value of a password property in a pipeline description (`user-pw=…`, `proxy-pw=…`,
//!   `password=…` show as `user-pw=***`);
//! - the value of a secret settings key (`is_secret_key`: `publish.password`, `service.token`), which config
//!   errors never quote (see `crate::config`).
//!
//! [`url`] masks one URL as the user typed it (with or without a scheme); [`text`] masks every
//! URL and password property inside free text. Both are idempotent.

/// What a secret is replaced with.
pub(crate) const MASK: &str = "***";

/// Settings keys (`section.key`) whose values are secrets.
const SECRET_KEYS: &[&str] = &["publish.password", "service.token"];

/// True when the settings key `section.key` holds a secret (its value is never shown).
#[must_use]
pub(crate) fn is_secret_key(key: &str) -> bool {
    SECRET_KEYS.contains(&key.trim())
}

/// `u` (one URL as given, `scheme://` optional) with its user-info (`user:password@`) replaced
/// by `***@`.
#[must_use]
pub fn url(u: &str) -> String {
    match u.find("://") {
        Some(_) => text(u),
        None => {
            // No scheme: the authority is everything before the first '/'.
            let end = u.find('/').unwrap_or(u.len());
            match u[..end].rfind('@') {
                Some(at) => format!("{MASK}{}", &u[at..]),
                None => u.to_owned(),
            }
        }
    }
}

/// `t` with every secret in it masked: the user-info of each `scheme://user:pw@host` URL and
/// the value of each password property (`user-pw=…`, `proxy-pw=…`, `password=…`).
#[must_use]
pub fn text(t: &str) -> String {
    mask_properties(&mask_userinfo(t))
}

/// Characters that end a URL's authority inside free text.
fn ends_authority(c: char) -> bool {
    c.is_whitespace() || "/?#\"'`<>()[]{},;|\\".contains(c)
}

/// Masks the user-info of every `scheme://…@host` in `t`.
fn mask_userinfo(t: &str) -> String {
    let mut out = String::with_capacity(t.len());
    let mut rest = t;
    while let Some(sep) = rest.find("://") {
        let start = sep + 3;
        out.push_str(&rest[..start]);
        let after = &rest[start..];
        let end = after.find(ends_authority).unwrap_or(after.len());
        match after[..end].rfind('@') {
            Some(at) if &after[..at] != MASK => {
                out.push_str(MASK);
                rest = &after[at..];
            }
            _ => rest = after,
        }
    }
    out.push_str(rest);
    out
}

/// True for the name of a property whose value is a password (`user-pw`, `proxy-pw`,
/// `password`, `passwd`, any case).
fn is_password_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.ends_with("-pw") || n.ends_with("_pw") || n.ends_with("password") || n.ends_with("passwd")
}

/// Masks the value of every `NAME=VALUE` whose NAME is a password's (a quoted value up to its
/// closing quote, else up to white space).
fn mask_properties(t: &str) -> String {
    let mut out = String::with_capacity(t.len());
    let mut rest = t;
    while let Some(eq) = rest.find('=') {
        let before = rest[..eq].trim_end();
        let name_start = before
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .map_or(0, |i| i + 1);
        let name = &before[name_start..];
        out.push_str(&rest[..=eq]);
        let after = &rest[eq + 1..];
        if name.is_empty() || !is_password_name(name) {
            rest = after;
            continue;
        }
        let value_start = after.len() - after.trim_start().len();
        let value = &after[value_start..];
        let value_len = match value.chars().next() {
            Some(q @ ('"' | '\'')) => value[1..].find(q).map_or(value.len(), |i| i + 2),
            _ => value.find(char::is_whitespace).unwrap_or(value.len()),
        };
        out.push_str(&after[..value_start]);
        if value_len > 0 {
            out.push_str(MASK);
        }
        rest = &value[value_len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_user_info_is_masked_in_urls_and_in_text() {
        for (given, shown) in [
            ("rtsp://admin:secret@cam/x", "rtsp://***@cam/x"),
            ("http://u:p@host:8080/x.mp4", "http://***@host:8080/x.mp4"),
            ("mqtt://u:pw@h:1/x@y", "mqtt://***@h:1/x@y"),
            ("u:pw@broker/x", "***@broker/x"),
            ("rtsp://cam/x", "rtsp://cam/x"),
            ("test:ball", "test:ball"),
            ("rtsp://a:b@c:d@host/x", "rtsp://***@host/x"),
        ] {
            assert_eq!(url(given), shown, "{given}");
            assert_eq!(url(&url(given)), shown, "{given} twice");
        }
        assert_eq!(
            text("could not open http://u:p@h/a.mp4 (404), URL: \"rtsp://x:y@z\""),
            "could not open http://***@h/a.mp4 (404), URL: \"rtsp://***@z\""
        );
        assert_eq!(text("a@b and c://d/e@f"), "a@b and c://d/e@f");
    }

    #[test]
    fn password_properties_are_masked() {
        assert_eq!(
            text("rtspsrc location=rtsp://cam/x user-id=admin user-pw=s3cret ! fakesink"),
            "rtspsrc location=rtsp://cam/x user-id=admin user-pw=*** ! fakesink"
        );
        assert_eq!(
            text("souphttpsrc proxy-pw=\"a b\" password = 'x y' threshold=3"),
            "souphttpsrc proxy-pw=*** password = *** threshold=3"
        );
        assert_eq!(text("user-pw="), "user-pw=");
    }

    #[test]
    fn only_the_password_key_is_secret() {
        assert!(is_secret_key("publish.password"));
        assert!(!is_secret_key("publish.username"));
    }
}
