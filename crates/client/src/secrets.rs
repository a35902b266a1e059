//! Secrets: the API key and any password in a base URL. They are sent where they must be
//! and scrubbed from every string a server may echo back before it reaches a file or the
//! terminal. This module is their one owner.

use std::borrow::Cow;

/// What replaces a secret wherever it would be shown.
pub const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are not scrubbed from text: replacing every `abc` in every
/// answer would corrupt the answers, and a key that short protects nothing.
pub(crate) const MIN_SCRUBBED_LEN: usize = 8;

/// The strings to scrub, with what replaces each.
#[derive(Clone, Default)]
pub(crate) struct Secrets {
    needles: Vec<(String, String)>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secrets({} redacted)", self.needles.len())
    }
}

impl Secrets {
    /// The key's value and the userinfo of each base URL.
    pub(crate) fn new(api_key: Option<&str>, base_urls: &[String]) -> Secrets {
        let mut s = Secrets::default();
        if let Some(key) = api_key {
            s.add(key, REDACTED);
        }
        for url in base_urls {
            if let Some(userinfo) = userinfo(url) {
                // The whole `user:password` first, then the password alone (it may be
                // echoed without the user name), as written and percent-decoded, and the
                // Basic authorization it is sent as.
                s.add(userinfo, REDACTED);
                let decoded = percent_decode(userinfo);
                s.add(&decoded, REDACTED);
                if let Some((_, password)) = userinfo.split_once(':') {
                    s.add(password, REDACTED);
                    s.add(&percent_decode(password), REDACTED);
                }
                let basic = if decoded.contains(':') {
                    decoded.clone()
                } else {
                    format!("{decoded}:")
                };
                s.add(&base64(basic.as_bytes()), REDACTED);
            }
            for (name, value) in query_secrets(url) {
                s.add(value, REDACTED);
                s.add(&percent_decode(value), REDACTED);
                // A short value is scrubbed where it stands beside its name (`;token=abc`
                // echoed in a 404's path, `code=AB+CD==` decoded in an error): specific
                // enough never to touch an answer.
                let (shown, named) = match name {
                    Some(n) => (format!("{n}={REDACTED}"), format!("{n}=")),
                    None => (format!(";{REDACTED}"), ";".to_string()),
                };
                s.add_exact(&format!("{named}{value}"), &shown);
                s.add_exact(&format!("{named}{}", percent_decode(value)), &shown);
            }
        }
        s
    }

    /// Scrubs `value` too (a header read from a variable), as a key is.
    pub(crate) fn hide(&mut self, value: &str) {
        self.add(value, REDACTED);
    }

    fn add(&mut self, secret: &str, replacement: &str) {
        if secret.len() < MIN_SCRUBBED_LEN && !secret.contains(':') {
            return;
        }
        self.add_exact(secret, replacement);
    }

    /// [`Secrets::add`] whatever its length (for a form specific enough, `name=value`).
    fn add_exact(&mut self, secret: &str, replacement: &str) {
        if secret.is_empty() {
            return;
        }
        if self.needles.iter().any(|(n, _)| n == secret) {
            return;
        }
        // JSON escapes it differently if it holds `"` or `\`; scrub that form too.
        let escaped = serde_json::to_string(secret).unwrap_or_default();
        let escaped = escaped.trim_matches('"');
        self.needles
            .push((secret.to_string(), replacement.to_string()));
        if escaped != secret && !escaped.is_empty() {
            self.needles
                .push((escaped.to_string(), replacement.to_string()));
        }
        // Longest first, so a secret that contains another is replaced whole.
        self.needles
            .sort_by_key(|(n, _)| std::cmp::Reverse(n.len()));
    }

    /// Whether there is anything to scrub.
    pub(crate) fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    /// `text` with every secret replaced.
    pub(crate) fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for (needle, replacement) in &self.needles {
            if out.contains(needle.as_str()) {
                out = Cow::Owned(out.replace(needle.as_str(), replacement));
            }
        }
        out
    }

    /// Scrubs a string in place.
    pub(crate) fn scrub_in_place(&self, text: &mut String) {
        if let Cow::Owned(clean) = self.scrub(text) {
            *text = clean;
        }
    }
}

/// `%41` → `A`: userinfo as a server sees it.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).and_then(|&b| hex(b)),
                bytes.get(i + 2).and_then(|&b| hex(b)),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Standard base64 with padding (RFC 4648), as HTTP Basic authorization encodes.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> shift & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Replaces the userinfo, query values and fragment of every URL in `text` (a bench file, an
/// error message) with `[redacted]`, as [`redact_url`] does.
pub fn redact_urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '/' | '?' | '#' | '`'))
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) => {
                out.push_str(REDACTED);
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        // The path, query and fragment, to the end of the URL: their values go too.
        let after = &tail[end..];
        let mut url_end = after
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`'))
            .unwrap_or(after.len());
        // A URL written in parentheses, as the HTTP client writes "(url: …)", keeps the
        // closing one outside it: a `)` with no `(` before it in the URL is not the URL's.
        if after[..url_end].ends_with(')') && !after[..url_end].contains('(') {
            url_end -= 1;
        }
        out.push_str(&redact_query(&after[..url_end]));
        rest = &after[url_end..];
    }
    out.push_str(rest);
    out
}

/// Query parameters known to carry nothing secret, shown and stored with their values:
/// Azure OpenAI's `api-version`, and PostgreSQL's connection settings. Every other value —
/// `?code=` (Azure Functions keys), `?pwd=`, `?jwt=`, `?bearer=`, names nobody listed — is
/// replaced: a list of secret names is always one name short.
const HARMLESS_PARAMETERS: [&str; 5] = [
    "api-version",
    "sslmode",
    "connect_timeout",
    "application_name",
    "target_session_attrs",
];

fn is_harmless_parameter(name: &str) -> bool {
    HARMLESS_PARAMETERS
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h))
}

/// The values a URL's query, fragment and `;name=value` path parameters hold that are not
/// known to be harmless.
fn query_secrets(url: &str) -> Vec<(Option<&str>, &str)> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let (before_fragment, fragment) = match rest.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (rest, None),
    };
    let (path, query) = match before_fragment.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (before_fragment, None),
    };
    fn secret(param: &str) -> Option<(Option<&str>, &str)> {
        match param.split_once('=') {
            Some((name, value)) if !is_harmless_parameter(name) && !value.is_empty() => {
                Some((Some(name), value))
            }
            Some(_) => None,
            None => Some((None, param)).filter(|(_, p)| !p.is_empty()),
        }
    }
    let path_params = path.split('/').flat_map(|s| s.split(';').skip(1));
    let query_params = query.into_iter().flat_map(|q| q.split('&'));
    let fragment_params = fragment.into_iter().flat_map(|f| f.split('&'));
    fragment
        .into_iter()
        .map(|f| (None, f))
        .chain(
            path_params
                .chain(query_params)
                .chain(fragment_params)
                .filter_map(secret),
        )
        .collect()
}

/// One `name=value` (or bare `value`) parameter as shown: the value replaced by
/// `[redacted]` unless the name is known to be harmless.
fn redact_parameter(param: &str) -> String {
    match param.split_once('=') {
        Some((name, value)) if is_harmless_parameter(name) || value.is_empty() => param.to_string(),
        Some((name, _)) => format!("{name}={REDACTED}"),
        None if param.is_empty() => String::new(),
        None => REDACTED.to_string(),
    }
}

/// A URL's path, query and fragment as shown: every query value, every `;name=value` path
/// parameter and the fragment replaced by `[redacted]`, except the values of parameters known
/// to be harmless (`api-version`).
fn redact_query(path_and_query: &str) -> String {
    let (before_fragment, fragment) = match path_and_query.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (path_and_query, None),
    };
    let (path, query) = match before_fragment.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (before_fragment, None),
    };
    let path: Vec<String> = path
        .split('/')
        .map(|segment| {
            let mut parts = segment.split(';');
            let head = parts.next().unwrap_or_default().to_string();
            parts.fold(head, |acc, p| format!("{acc};{}", redact_parameter(p)))
        })
        .collect();
    let mut out = path.join("/");
    if let Some(q) = query {
        let params: Vec<String> = q.split('&').map(redact_parameter).collect();
        out.push('?');
        out.push_str(&params.join("&"));
    }
    if let Some(f) = fragment {
        out.push('#');
        if !f.is_empty() {
            out.push_str(REDACTED);
        }
    }
    out
}

/// The `user:password` part of `scheme://user:password@host/…`, if any.
fn userinfo(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    authority.rfind('@').map(|at| &authority[..at])
}

/// A URL fit to show and store: userinfo, the fragment and every query value except those
/// known to be harmless (`api-version`), replaced by `[redacted]`.
pub fn redact_url(url: &str) -> String {
    let shown = match userinfo(url) {
        Some(info) => {
            let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
            let host_and_path = &rest[info.len() + 1..];
            format!("{scheme}://{REDACTED}@{host_and_path}")
        }
        None => url.to_string(),
    };
    redact_query(&shown)
}

/// Checks an API key read from `env`: surrounding whitespace (a trailing newline from
/// `$(cat key.txt)`) is trimmed with a warning; anything that cannot go in an HTTP header
/// is an error that names the variable, never the value.
pub fn clean_api_key(key: &str, env: &str) -> Result<(String, Option<String>), String> {
    let trimmed = key.trim();
    if trimmed.is_empty() {
        return Err(format!("${env} is set but empty"));
    }
    if let Some(bad) = trimmed.chars().find(|c| !c.is_ascii_graphic()) {
        let what = match bad {
            ' ' | '\t' => "a space or tab".to_string(),
            c if c.is_control() => format!("a control character (U+{:04X})", c as u32),
            _ => "a non-ASCII character".to_string(),
        };
        return Err(format!(
            "${env} contains {what} inside the key, which cannot be sent in an HTTP header"
        ));
    }
    let warning = (trimmed.len() != key.len()).then(|| {
        format!(
            "${env} has leading or trailing whitespace (a newline from a file?); it was trimmed"
        )
    });
    Ok((trimmed.to_string(), warning))
}

/// `{base}{path}` with the path appended to the URL's path, keeping any query
/// (`…/openai/deployments/x?api-version=2024-06-01`).
pub(crate) fn join_path(base: &str, path: &str) -> String {
    let split = base.find(['?', '#']).unwrap_or(base.len());
    let (head, tail) = base.split_at(split);
    format!(
        "{}/{}{tail}",
        head.trim_end_matches('/'),
        path.trim_start_matches('/')
    )
}

/// The URL's path, without query or fragment.
pub fn path_of(url: &str) -> &str {
    &url[..url.find(['?', '#']).unwrap_or(url.len())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrubs_keys_and_url_passwords_in_every_form() {
        let s = Secrets::new(
            Some("sk-live-0123456789"),
            &["http://alice:hunter2hunter2@h/v1".into()],
        );
        assert_eq!(
            s.scrub("bad key Bearer sk-live-0123456789!"),
            "bad key Bearer [redacted]!"
        );
        assert_eq!(
            s.scrub("GET http://alice:hunter2hunter2@h/v1 failed; pw hunter2hunter2"),
            "GET http://[redacted]@h/v1 failed; pw [redacted]"
        );
        assert!(matches!(s.scrub("nothing here"), Cow::Borrowed(_)));
        let quoted = Secrets::new(Some("ab\"cdefghij"), &[]);
        assert_eq!(
            quoted.scrub(r#"{"k":"ab\"cdefghij"}"#),
            r#"{"k":"[redacted]"}"#
        );
        assert!(Secrets::new(Some("short"), &[]).is_empty());
    }

    #[test]
    fn basic_authorization_and_percent_encoded_forms_are_scrubbed() {
        let s = Secrets::new(None, &["http://alice:hunter2hunter2@h/v1".into()]);
        assert_eq!(
            s.scrub("Authorization: Basic YWxpY2U6aHVudGVyMmh1bnRlcjI="),
            "Authorization: Basic [redacted]"
        );
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"abc"), "YWJj");
        let s = Secrets::new(None, &["http://bob:p%40ss-word-99@h/v1".into()]);
        assert_eq!(s.scrub("pw p@ss-word-99"), "pw [redacted]");
        assert_eq!(
            redact_urls_in("base_url: \"http://bob:swordfish99@h:8/v1\" and https://x/y"),
            "base_url: \"http://[redacted]@h:8/v1\" and https://x/y"
        );
    }

    #[test]
    fn urls_are_shown_without_userinfo() {
        assert_eq!(
            redact_url("http://u:p@host:8/v1?x=1"),
            "http://[redacted]@host:8/v1?x=[redacted]"
        );
        assert_eq!(redact_url("http://host/v1"), "http://host/v1");
        assert_eq!(
            redact_url("http://host/v1?email=a@b"),
            "http://host/v1?email=[redacted]"
        );
        // Every query value goes, whatever its name; harmless names keep theirs.
        assert_eq!(
            redact_url("postgres://h:5432/db?user=pg&password=topsecret&sslmode=require"),
            "postgres://h:5432/db?user=[redacted]&password=[redacted]&sslmode=require"
        );
        assert_eq!(
            redact_url("http://u:pw@h/v1?api_key=sekrit123#x"),
            "http://[redacted]@h/v1?api_key=[redacted]#[redacted]"
        );
        assert_eq!(
            redact_urls_in("url: http://h/v1?Access_Token=abc other: https://x/?q=1"),
            "url: http://h/v1?Access_Token=[redacted] other: https://x/?q=[redacted]"
        );
    }

    #[test]
    fn urls_keep_no_query_value_or_fragment_except_harmless_names() {
        // Secrets under names no list of secret names has.
        let hostile = [
            (
                "https://f.azurewebsites.net/api/chat?code=AzFuncKey0123456789&api-version=2024-02-01",
                "https://f.azurewebsites.net/api/chat?code=[redacted]&api-version=2024-02-01",
                "AzFuncKey0123456789",
            ),
            (
                "http://h/v1?pwd=hunter2hunter2",
                "http://h/v1?pwd=[redacted]",
                "hunter2hunter2",
            ),
            (
                "http://h/v1?jwt=eyJhbGciOi.x.y",
                "http://h/v1?jwt=[redacted]",
                "eyJhbGciOi.x.y",
            ),
            (
                "http://h/v1?bearer=abcdefgh1234",
                "http://h/v1?bearer=[redacted]",
                "abcdefgh1234",
            ),
            (
                "http://h/v1;token=semicolon99/chat",
                "http://h/v1;token=[redacted]/chat",
                "semicolon99",
            ),
            (
                "http://h/v1#token=fragment1234",
                "http://h/v1#[redacted]",
                "fragment1234",
            ),
            (
                "http://h/v1?bare-secret-value",
                "http://h/v1?[redacted]",
                "bare-secret-value",
            ),
        ];
        for (url, shown, secret) in hostile {
            assert_eq!(redact_url(url), shown, "{url}");
            assert_eq!(
                redact_urls_in(&format!("failed at {url} (500)")),
                format!("failed at {shown} (500)")
            );
            assert_eq!(
                redact_urls_in(&format!("error sending request (url: {url})")),
                format!("error sending request (url: {shown})")
            );
            // And echoed back by a server, the value is scrubbed from what it wrote.
            let secrets = Secrets::new(None, &[url.to_string()]);
            assert_eq!(
                secrets.scrub(&format!("you sent {secret}!")),
                "you sent [redacted]!",
                "{url}"
            );
        }
        // Short values, and values a server echoes decoded, go where they stand beside
        // their names: a 404 that quotes the path, an error that quotes the decoded query.
        let secrets = Secrets::new(
            None,
            &[
                "http://h/x;token=SEC4/v1?code=AB%2BCD%3D%3D".to_string(),
                "http://h/v1;SEC9/chat".to_string(),
            ],
        );
        assert_eq!(
            secrets.scrub("no route for POST /x;token=SEC4/v1/chat/completions"),
            "no route for POST /x;token=[redacted]/v1/chat/completions"
        );
        assert_eq!(
            secrets.scrub("bad query code=AB+CD== (decoded)"),
            "bad query code=[redacted] (decoded)"
        );
        assert_eq!(
            secrets.scrub("no route for /v1;SEC9/chat; SEC9 is kept in prose"),
            "no route for /v1;[redacted]/chat; SEC9 is kept in prose"
        );
        assert_eq!(
            redact_url("https://r.openai.azure.com/openai?API-Version=2024-06-01"),
            "https://r.openai.azure.com/openai?API-Version=2024-06-01"
        );
    }

    #[test]
    fn paths_are_appended_before_the_query() {
        assert_eq!(
            join_path(
                "https://x.openai.azure.com/openai/deployments/d?api-version=2024-06-01",
                "chat/completions"
            ),
            "https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-06-01"
        );
        assert_eq!(
            join_path("http://h/v1/", "/chat/completions"),
            "http://h/v1/chat/completions"
        );
        assert_eq!(path_of("http://h/v1?a=b"), "http://h/v1");
    }

    #[test]
    fn keys_are_trimmed_or_refused_by_name() {
        assert_eq!(
            clean_api_key("sk-abc\n", "K").unwrap().0,
            "sk-abc".to_string()
        );
        assert!(clean_api_key("sk-abc\n", "K").unwrap().1.is_some());
        assert!(clean_api_key("sk-abc", "K").unwrap().1.is_none());
        let e = clean_api_key("sk a", "MY_KEY").unwrap_err();
        assert!(e.contains("$MY_KEY") && !e.contains("sk a"), "{e}");
        assert!(
            clean_api_key("sk\u{7}a", "K")
                .unwrap_err()
                .contains("control")
        );
    }
}
