//! How the reports write what they show: percentages, intervals, durations and dollars;
//! words a shell reads back as they were; text a terminal shows and never obeys.

/// `1 case`, `3 cases`: a count with its noun.
pub fn count(n: impl TryInto<u64>, one: &str, many: &str) -> String {
    let n = n.try_into().unwrap_or(u64::MAX);
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `72.5%`
pub fn pct(x: Option<f64>) -> String {
    x.map_or_else(|| "–".into(), |x| format!("{:.1}%", x * 100.0))
}

/// `[63.1, 80.2]`
pub fn interval(lo: Option<f64>, hi: Option<f64>) -> String {
    match (lo, hi) {
        (Some(lo), Some(hi)) => format!("[{:.1}, {:.1}]", lo * 100.0, hi * 100.0),
        _ => "–".into(),
    }
}

/// `840 ms` or `2.31 s`
pub fn millis(x: Option<f64>) -> String {
    match x {
        None => "–".into(),
        Some(x) if x < 1000.0 => format!("{x:.0} ms"),
        Some(x) => format!("{:.2} s", x / 1000.0),
    }
}

/// Dollars with three significant digits for small amounts: `$12.40`, `$0.0123`, `$0.0000125`.
pub fn usd(x: Option<f64>) -> String {
    match x {
        None => "–".into(),
        Some(x) if x >= 1.0 => format!("${x:.2}"),
        Some(x) if x <= 0.0 => "$0".into(),
        Some(x) => {
            let decimals = (2 - x.log10().floor() as i32).clamp(2, 12) as usize;
            format!("${x:.decimals$}")
        }
    }
}

/// A word for a POSIX shell: as it is when it holds only characters no shell treats
/// specially, else in single quotes (a `'` inside written `'\''`). A printed command is
/// pasted: a folder `my reports` or a bench named `b $(touch PWNED)` must arrive as one
/// argument, never run.
///
/// A word holding control characters (a folder named with an escape sequence) is written
/// in ANSI-C quotes, `$'…\x1b…'` (bash, zsh, ksh, dash ≥ 0.5.12): pasted, it names the same
/// folder, and printed, it holds nothing a terminal obeys.
pub(crate) fn shell_quote(word: &str) -> std::borrow::Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return std::borrow::Cow::Borrowed(word);
    }
    if word.chars().any(obeyed) {
        let mut out = String::from("$'");
        for c in word.chars() {
            match c {
                '\'' => out.push_str("\\'"),
                '\\' => out.push_str("\\\\"),
                c if obeyed(c) || c == '\n' || c == '\t' => {
                    let mut buf = [0u8; 4];
                    for b in c.encode_utf8(&mut buf).bytes() {
                        out.push_str(&format!("\\x{b:02x}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('\'');
        return std::borrow::Cow::Owned(out);
    }
    std::borrow::Cow::Owned(format!("'{}'", word.replace('\'', "'\\''")))
}

/// A path as a shell word: see [`shell_quote`]. A relative path that starts with `-` is
/// written `./-…`, so the command it is pasted into does not take it for a flag.
pub fn shell_path(path: &std::path::Path) -> String {
    let shown = path.display().to_string();
    if shown.starts_with('-') {
        return shell_quote(&format!("./{shown}")).into_owned();
    }
    shell_quote(&shown).into_owned()
}

/// Whether a terminal would obey `c` instead of showing it: control characters (ESC, BEL, a
/// carriage return, backspace, the C1 controls such as U+009B CSI), the bidirectional
/// overrides and marks that make a line read differently from what it holds (U+202A–202E,
/// U+2066–2069, U+200E/200F, U+061C), and the line and paragraph separators some terminals
/// break lines at (U+2028/2029).
fn obeyed(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            c,
            '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{061c}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// Text fit for a terminal: what a server or a model wrote (an error body, an echoed model
/// name, an answer) may hold escape sequences — an OSC 52 clipboard write, a window title, a
/// clear screen, a carriage return that overwrites a line. Every such character is shown as
/// `\u{1b}`, never obeyed; newlines and tabs stay. Everything promptgauge prints passes
/// through here.
pub fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(obeyed) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if obeyed(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Text a model or a server wrote, fit for one line of a report: line breaks shown as `⏎`,
/// other control characters (escapes a terminal would obey) as `\u{1b}`, cut to `max`
/// characters with `…`.
pub fn visible(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in text.trim().chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        match c {
            '\n' => out.push('⏎'),
            c if obeyed(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_paths_paste_back_as_the_same_argument() {
        let words = [
            "reports/run 1",
            "b $(touch PWNED)",
            "it's",
            "esc\u{1b}]0;title\u{7}\\back'q",
        ];
        for word in words {
            let quoted = shell_quote(word);
            assert!(!quoted.chars().any(obeyed), "{quoted}");
            let out = std::process::Command::new("bash")
                .args(["-c", &format!("printf '%s' {quoted}")])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), word, "{quoted}");
        }
        assert_eq!(shell_path(std::path::Path::new("-dash/b")), "./-dash/b");
        assert_eq!(shell_path(std::path::Path::new("/abs/-x")), "/abs/-x");
    }

    #[test]
    fn formats() {
        assert_eq!(usd(Some(12.4)), "$12.40");
        assert_eq!(usd(Some(0.0123)), "$0.0123");
        assert_eq!(usd(Some(0.0000125)), "$0.0000125");
        assert_eq!(usd(None), "–");
        assert_eq!(pct(Some(0.875)), "87.5%");
        assert_eq!(interval(Some(0.772), Some(0.935)), "[77.2, 93.5]");
        assert_eq!(millis(Some(2310.0)), "2.31 s");
    }
}
