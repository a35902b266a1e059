//! Text someone else wrote, escaped for the syntax it is drawn in: HTML and Markdown.

/// Escapes text for HTML content and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Text a server, a model or a file wrote, as Markdown that renders it literally: no markup,
/// no HTML, no links or images, no @mentions (a zero-width space after `@`), control
/// characters shown. summary.md becomes a pull request comment: what an error body says
/// must not become a link, an image or a mention there.
pub(crate) fn md_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '#' | '!' | '~' => {
                out.push('\\');
                out.push(c);
            }
            '@' => {
                out.push('@');
                if chars.peek().is_some_and(|n| n.is_alphanumeric()) {
                    out.push('\u{200b}');
                }
            }
            '\n' => out.push(' '),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}
