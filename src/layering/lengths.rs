//! No function of `src/` runs over [`MAX_LINES`] lines (docs/dev/CONTRIBUTING.md, "Short
//! functions"): a function that long does several things, and each deserves a name. Code
//! under `#[cfg(test)]` is left out.

use std::path::Path;

/// The most lines a function may take, from its `fn` line to its closing brace.
const MAX_LINES: usize = 80;

/// Every function of `code` (already `code_only`) with a body: its name and its length in
/// lines, from the line of `fn` to the line of the brace that closes it.
fn function_lengths(code: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    let mut at = 0;
    while let Some(k) = code[at..].find("fn ") {
        let start = at + k;
        at = start + 3;
        let word_start = start == 0 || !super::files::is_ident(bytes[start - 1] as char);
        if !word_start {
            continue;
        }
        let name: String = code[at..]
            .trim_start()
            .chars()
            .take_while(|&c| super::files::is_ident(c))
            .collect();
        if name.is_empty() {
            continue;
        }
        // The body: the first `{` before any `;` (a declaration without one has none).
        let Some(open) = body_start(&code[at..]).map(|o| at + o) else {
            continue;
        };
        let len = super::files::item_len(&code[open..]);
        let lines = code[start..open + len].matches('\n').count() + 1;
        found.push((name, lines));
    }
    found
}

/// Where a function's body opens in `s` (its signature onwards): the first `{` outside
/// brackets, or `None` when a `;` ends a declaration first (`[u8; 4]` is inside brackets).
fn body_start(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (j, c) in s.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            '{' if depth == 0 => return Some(j),
            ';' if depth == 0 => return None,
            _ => {}
        }
    }
    None
}

/// Every function of `src/` over [`MAX_LINES`]: its file (from the crate's root), its name
/// and its length.
fn long_functions(src: &Path) -> Vec<(String, String, usize)> {
    let mut files = Vec::new();
    super::rust_files(src, &mut files);
    files.sort();
    let root = src.parent().unwrap_or(src);
    let mut long = Vec::new();
    for path in files {
        let Ok(code) = std::fs::read_to_string(&path) else {
            continue;
        };
        let name = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .display()
            .to_string();
        for (function, lines) in function_lengths(&super::files::code_only(&code)) {
            if lines > MAX_LINES {
                long.push((name.clone(), function, lines));
            }
        }
    }
    long
}

#[test]
fn no_function_runs_over_eighty_lines() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let told: Vec<String> = long_functions(&src)
        .into_iter()
        .map(|(file, function, lines)| {
            format!(
                "{file}: fn {function} is {lines} lines (at most {MAX_LINES}): split it into \
                 steps that each have a name"
            )
        })
        .collect();
    assert!(told.is_empty(), "{}", told.join("\n"));
}

#[test]
fn the_length_reader_counts_bodies_only_and_skips_what_is_not_code() {
    let code = "fn short() {\n    let s = \"fn fake() {\";\n}\n\
                // fn commented() {\n\
                fn declared();\n\
                pub(crate) async fn long<T>(x: T) -> T where T: Copy {\n    let c = '{';\n\n\n    x\n}\n\
                #[cfg(test)]\nmod tests {\n    fn hidden() {\n\n    }\n}\n\
                fn after() { r#\"}\"#; }\n\
                fn array(x: [u8; 4]) {\n}\n";
    let found = function_lengths(&super::files::code_only(code));
    assert_eq!(
        found,
        vec![
            ("short".to_string(), 3),
            ("long".to_string(), 6),
            ("after".to_string(), 1),
            ("array".to_string(), 2),
        ]
    );
    assert_eq!(
        super::files::code_only(code).matches('\n').count(),
        code.matches('\n').count()
    );
}
