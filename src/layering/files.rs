//! The layering test inside each module: the files of `src/` and the paths between them
//! (`use` trees, `crate::`/`super::`/`self::` paths written out, a child module's or an
//! imported name's path, glob imports) form a graph with no circles (docs/dev/architecture.md,
//! "Files inside a module"). A re-export is
//! followed to the file that defines the name, so a folder's `mod.rs` that hands names on
//! ties no knot; a type two files share lives in a third below them both.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One file of `src/`, read as far as its paths go.
#[derive(Default, Debug)]
struct File {
    /// `src/report/html.rs` → `["report", "html"]`.
    module: Vec<String>,
    /// Child modules it declares (`mod html;`).
    children: BTreeSet<String>,
    /// Names it defines at its top level (`fn`, `struct`, `enum`, `trait`, `type`, `const`,
    /// `static`, `macro_rules!`, inline `mod`).
    defined: BTreeSet<String>,
    /// Names its top-level `use` items bring in: name → the path, as written.
    aliases: BTreeMap<String, Vec<String>>,
    /// Its top-level glob imports (`use x::*;`), as written.
    globs: Vec<Vec<String>>,
    /// Every path it writes, in `use` items at any depth and in code.
    paths: Vec<Vec<String>>,
}

/// `code` with comments, string and character literals, and items under `#[cfg(test)]`
/// blanked to spaces, every line break kept: what is left is the code's shape, line for
/// line with the file (tests live beside the code; what they reach is not the code's
/// structure). The files' graph and the types' names read it.
pub(super) fn code_only(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut i = 0;
    while i < code.len() {
        let rest = &code[i..];
        let skip = if rest.starts_with("//") {
            rest.find('\n').unwrap_or(rest.len())
        } else if rest.starts_with("/*") {
            rest.find("*/").map_or(rest.len(), |e| e + 2)
        } else if let Some(hashes) = raw_string_start(rest) {
            let close = format!("\"{}", "#".repeat(hashes));
            let body = rest.find('"').unwrap_or(0) + 1;
            rest[body..]
                .find(&close)
                .map_or(rest.len(), |e| body + e + close.len())
        } else if rest.starts_with('"') {
            let b = rest.as_bytes();
            let mut j = 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            (j + 1).min(rest.len())
        } else if rest.starts_with('\'')
            && let Some(n) = char_literal_len(rest)
        {
            n
        } else if let Some(item) = rest.strip_prefix("#[cfg(test)]") {
            "#[cfg(test)]".len() + item_len(&code_only(item))
        } else {
            0
        };
        if skip == 0 {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        } else {
            let end = (i + skip).min(code.len());
            out.extend(
                code[i..end]
                    .chars()
                    .map(|c| if c == '\n' { '\n' } else { ' ' }),
            );
            i = end;
        }
    }
    out
}

/// `r"…"`, `r#"…"#`, `br"…"`: how many `#` the raw string opens with.
fn raw_string_start(s: &str) -> Option<usize> {
    let s = s.strip_prefix('b').unwrap_or(s);
    let s = s.strip_prefix('r')?;
    let hashes = s.len() - s.trim_start_matches('#').len();
    s[hashes..].starts_with('"').then_some(hashes)
}

/// `'x'`, `'\n'`, `'\u{1F600}'`: the literal's length; `None` for a lifetime (`'a`).
fn char_literal_len(s: &str) -> Option<usize> {
    let mut chars = s.char_indices().skip(1);
    let (_, c) = chars.next()?;
    if c == '\\' {
        return s[2..].find('\'').map(|e| e + 3);
    }
    let (j, close) = chars.next()?;
    (close == '\'').then_some(j + 1)
}

/// The length of the item that starts `s` (after an attribute): up to its `;` or the brace
/// that closes its body, whichever ends it.
pub(super) fn item_len(s: &str) -> usize {
    let mut depth = 0usize;
    for (j, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return j + 1;
                }
            }
            ';' if depth == 0 => return j + 1,
            _ => {}
        }
    }
    s.len()
}

pub(super) fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The path that starts at byte `i` of `text`: `a::b::C` → `["a", "b", "C"]`.
fn path_at(text: &str, i: usize) -> Vec<String> {
    let mut segs = Vec::new();
    let mut rest = &text[i..];
    loop {
        let name: String = rest.chars().take_while(|c| is_ident(*c)).collect();
        if name.is_empty() {
            break;
        }
        rest = &rest[name.len()..];
        segs.push(name);
        match rest.strip_prefix("::") {
            Some(r) if r.starts_with(|c: char| is_ident(c)) => rest = r,
            _ => break,
        }
    }
    segs
}

/// A `use` tree, `a::{b, c::{D as E, self}, f::*}`, as its leaves: (path, the name it binds).
/// A glob's leaf ends in `*` and binds nothing.
fn use_leaves(tree: &str, prefix: &[String], out: &mut Vec<(Vec<String>, Option<String>)>) {
    let tree = tree.trim();
    let mut path = prefix.to_vec();
    let mut rest = tree;
    loop {
        rest = rest.trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            let inner = group.strip_suffix('}').unwrap_or(group);
            for part in split_top(inner) {
                use_leaves(part, &path, out);
            }
            return;
        }
        if rest.starts_with('*') {
            path.push("*".into());
            out.push((path, None));
            return;
        }
        let name: String = rest.chars().take_while(|c| is_ident(*c)).collect();
        if name.is_empty() {
            return;
        }
        rest = rest[name.len()..].trim_start();
        if let Some(r) = rest.strip_prefix("::") {
            path.push(name);
            rest = r;
            continue;
        }
        let bound = match rest.strip_prefix("as") {
            Some(r) => r.trim().to_string(),
            None if name == "self" => path.last().cloned().unwrap_or_default(),
            None => name.clone(),
        };
        if name != "self" {
            path.push(name);
        }
        out.push((path, (bound != "_").then_some(bound)));
        return;
    }
}

/// `a, b::{c, d}, e` split at its top-level commas.
fn split_top(s: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (j, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..j]);
                start = j + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// The keywords that open a named item.
const ITEMS: [&str; 9] = [
    "fn",
    "struct",
    "enum",
    "trait",
    "type",
    "const",
    "static",
    "union",
    "macro_rules!",
];

/// Reads one file's code (already [`code_only`]).
fn read(module: Vec<String>, code: &str) -> File {
    let mut file = File {
        module,
        ..File::default()
    };
    let words: Vec<(usize, &str)> = word_starts(code);
    let mut in_use = Vec::new();
    let mut depth = 0usize;
    let mut depth_at = vec![0usize; code.len() + 1];
    for (j, c) in code.char_indices() {
        depth_at[j] = depth;
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    for (k, &(at, word)) in words.iter().enumerate() {
        let top = depth_at[at] == 0;
        let next = words.get(k + 1).map(|w| w.1);
        if top && word == "mod" {
            if let Some(name) = next {
                let after = code[at + 3..].trim_start()[name.len()..].trim_start();
                if after.starts_with(';') {
                    file.children.insert(name.to_string());
                } else {
                    file.defined.insert(name.to_string());
                }
            }
        } else if top && ITEMS.contains(&word) {
            if let Some(name) = next.filter(|n| *n != "fn" && *n != "mut") {
                file.defined.insert(name.to_string());
            }
        } else if word == "use" {
            let end = code[at..].find(';').map_or(code.len(), |e| at + e);
            in_use.push(at..end);
            let mut leaves = Vec::new();
            use_leaves(&code[at + 3..end], &[], &mut leaves);
            // A re-export (`pub use`) hands a name on; the file's own code does not use it.
            let before = code[..at].trim_end();
            let reexport = before.ends_with("pub")
                || (before.ends_with(')')
                    && before.rfind("pub(").is_some_and(|p| before.len() - p < 16));
            for (path, bound) in leaves {
                if top {
                    match (path.last().map(String::as_str), bound) {
                        (Some("*"), _) => file.globs.push(path[..path.len() - 1].to_vec()),
                        (_, Some(name)) => {
                            file.aliases.insert(name, path.clone());
                        }
                        _ => {}
                    }
                }
                if !reexport {
                    file.paths.push(path);
                }
            }
        }
    }
    // Paths written out in code: `crate::a::b`, `super::x`, `self::y`, and `m::f` where `m`
    // is a child module or a name a `use` brought in.
    for &(at, word) in &words {
        if (at >= 2 && &code[at - 2..at] == "::") || in_use.iter().any(|r| r.contains(&at)) {
            continue;
        }
        let path = path_at(code, at);
        let leads = ["crate", "super", "self"].contains(&word)
            || file.children.contains(word)
            || file.aliases.contains_key(word);
        if leads && path.len() > 1 {
            file.paths.push(path);
        }
    }
    file
}

/// Where each word of `code` starts.
fn word_starts(code: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (j, c) in code.char_indices().chain([(code.len(), ' ')]) {
        match (start, is_ident(c) || (c == '!' && start.is_some())) {
            (None, true) if !c.is_ascii_digit() => start = Some(j),
            (Some(s), false) => {
                let word = &code[s..j];
                // `macro_rules!` is one word; every other `!` ends a macro's name.
                let word = word
                    .strip_suffix('!')
                    .filter(|w| *w != "macro_rules")
                    .unwrap_or(word);
                out.push((s, word));
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// Every file of `src/` (but the layering test's own), read, by its module path.
struct Tree {
    files: Vec<(PathBuf, File)>,
    by_module: BTreeMap<Vec<String>, usize>,
}

impl Tree {
    fn read(src: &Path) -> Tree {
        let mut paths = Vec::new();
        super::rust_files(src, &mut paths);
        paths.sort();
        let mut files = Vec::new();
        for path in paths {
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut module: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            // The binary is a crate of its own (it reaches the library by name); the
            // layering test is not the code's structure.
            if path.ends_with("src/main.rs") || module.first().is_some_and(|m| m == "layering") {
                continue;
            }
            if module.last().is_some_and(|m| m == "mod" || m == "lib") {
                module.pop();
            }
            let code = code_only(&std::fs::read_to_string(&path).unwrap());
            files.push((path, read(module, &code)));
        }
        let by_module = files
            .iter()
            .enumerate()
            .map(|(i, (_, f))| (f.module.clone(), i))
            .collect();
        Tree { files, by_module }
    }

    /// The file that defines what `path` names, written in the module `from`; `None` for
    /// another crate's path.
    fn resolve(&self, from: &[String], path: &[String], hops: usize) -> Option<usize> {
        if hops > 16 || path.is_empty() {
            return None;
        }
        let mut module = from.to_vec();
        let mut rest = path;
        match path[0].as_str() {
            "crate" => {
                module.clear();
                rest = &path[1..];
            }
            "self" => rest = &path[1..],
            "super" => {
                while rest.first().is_some_and(|s| s == "super") {
                    module.pop();
                    rest = &rest[1..];
                }
            }
            first => {
                let file = &self.files[*self.by_module.get(&module)?].1;
                if !file.children.contains(first)
                    && !file.defined.contains(first)
                    && !file.aliases.contains_key(first)
                {
                    return None;
                }
            }
        }
        self.walk(module, rest, hops)
    }

    /// From the module `module`, down the segments of `rest`.
    fn walk(&self, mut module: Vec<String>, rest: &[String], hops: usize) -> Option<usize> {
        for (k, seg) in rest.iter().enumerate() {
            let at = *self.by_module.get(&module)?;
            let file = &self.files[at].1;
            if file.children.contains(seg) {
                module.push(seg.clone());
                continue;
            }
            if file.defined.contains(seg) || seg == "*" {
                return Some(at);
            }
            if let Some(target) = file.aliases.get(seg) {
                // A name another crate defines, handed on: no file of this crate.
                if target.first().is_some_and(|t| {
                    !["crate", "self", "super"].contains(&t.as_str())
                        && !file.children.contains(t)
                        && !file.defined.contains(t)
                        && !file.aliases.contains_key(t)
                }) {
                    return None;
                }
                let mut longer = target.clone();
                longer.extend(rest[k + 1..].iter().cloned());
                return self.resolve(&module, &longer, hops + 1).or(Some(at));
            }
            for glob in &file.globs {
                let mut longer = glob.clone();
                longer.extend(rest[k..].iter().cloned());
                if let Some(found) = self.resolve(&module, &longer, hops + 1) {
                    return Some(found);
                }
            }
            return Some(at);
        }
        self.by_module.get(&module).copied()
    }

    /// `file → the files it takes names from, with the names`.
    fn edges(&self) -> Vec<BTreeMap<usize, BTreeSet<String>>> {
        let mut edges = vec![BTreeMap::new(); self.files.len()];
        for (i, (_, file)) in self.files.iter().enumerate() {
            for path in &file.paths {
                if let Some(to) = self.resolve(&file.module, path, 0).filter(|to| *to != i) {
                    let name = path.last().cloned().unwrap_or_default();
                    edges[i]
                        .entry(to)
                        .or_insert_with(BTreeSet::new)
                        .insert(name);
                }
            }
        }
        edges
    }

    fn name(&self, i: usize) -> String {
        let path = &self.files[i].0;
        path.strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .unwrap_or(path)
            .display()
            .to_string()
    }
}

/// The circles of a graph: its strongly connected parts of more than one node (Tarjan).
fn circles(edges: &[BTreeMap<usize, BTreeSet<String>>]) -> Vec<Vec<usize>> {
    struct Walk<'a> {
        edges: &'a [BTreeMap<usize, BTreeSet<String>>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on_stack: Vec<bool>,
        next: usize,
        found: Vec<Vec<usize>>,
    }
    impl Walk<'_> {
        fn visit(&mut self, v: usize) {
            self.index[v] = Some(self.next);
            self.low[v] = self.next;
            self.next += 1;
            self.stack.push(v);
            self.on_stack[v] = true;
            for &w in self.edges[v].keys() {
                match self.index[w] {
                    None => {
                        self.visit(w);
                        self.low[v] = self.low[v].min(self.low[w]);
                    }
                    Some(iw) if self.on_stack[w] => self.low[v] = self.low[v].min(iw),
                    Some(_) => {}
                }
            }
            if Some(self.low[v]) == self.index[v] {
                let mut part = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack[w] = false;
                    part.push(w);
                    if w == v {
                        break;
                    }
                }
                if part.len() > 1 {
                    part.sort();
                    self.found.push(part);
                }
            }
        }
    }
    let n = edges.len();
    let mut walk = Walk {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        stack: Vec::new(),
        on_stack: vec![false; n],
        next: 0,
        found: Vec::new(),
    };
    for v in 0..n {
        if walk.index[v].is_none() {
            walk.visit(v);
        }
    }
    walk.found
}

#[test]
fn no_two_files_of_a_crate_use_each_other_round_a_circle() {
    let mut told = Vec::new();
    for src in super::crate_sources() {
        told.extend(circles_told(&Tree::read(&src)));
    }
    assert!(
        told.is_empty(),
        "files that use each other (move what both need into a file below them):\n{}",
        told.join("\n")
    );
}

/// Each circle of a crate's files, with what each file takes from the next.
fn circles_told(tree: &Tree) -> Vec<String> {
    let edges = tree.edges();
    let mut told = Vec::new();
    for circle in circles(&edges) {
        let names: Vec<String> = circle.iter().map(|&i| tree.name(i)).collect();
        let mut lines = vec![format!(
            "a circle of {} files: {}",
            circle.len(),
            names.join(", ")
        )];
        for &a in &circle {
            for (b, names) in &edges[a] {
                if circle.contains(b) {
                    let names: Vec<&str> = names.iter().map(String::as_str).collect();
                    lines.push(format!(
                        "  {} -> {}: {}",
                        tree.name(a),
                        tree.name(*b),
                        names.join(", ")
                    ));
                }
            }
        }
        told.push(lines.join("\n"));
    }
    told
}

#[test]
fn the_file_reader_follows_every_shape_of_path() {
    let code = code_only(
        "//! x\nmod child;\nmod other;\npub use child::{A, b::{C as D, self}};\nuse super::super::up::*;\n\
         use crate::far::E;\nfn f() { let s = \"crate::no\"; other::g(); crate::x::y::Z::new(); '{'; }\n\
         #[cfg(test)]\nmod tests { use crate::t::T; }\nconst K: u8 = 1;\n",
    );
    let file = read(vec!["m".into(), "n".into()], &code);
    assert_eq!(
        file.children,
        BTreeSet::from(["child".into(), "other".into()])
    );
    assert!(
        file.defined.contains("f") && file.defined.contains("K"),
        "{:?}",
        file.defined
    );
    assert_eq!(file.aliases["D"], ["child", "b", "C"]);
    assert_eq!(file.aliases["b"], ["child", "b"]);
    assert_eq!(
        file.globs,
        [vec!["super".to_string(), "super".into(), "up".into()]]
    );
    let paths: BTreeSet<String> = file.paths.iter().map(|p| p.join("::")).collect();
    for want in [
        "crate::far::E",
        "other::g",
        "crate::x::y::Z::new",
        "super::super::up::*",
    ] {
        assert!(paths.contains(want), "{want} not in {paths:?}");
    }
    // `pub use child::{…}` hands names on: the file's own code uses none of them.
    assert!(!paths.iter().any(|p| p.starts_with("child")), "{paths:?}");
    assert!(
        !paths
            .iter()
            .any(|p| p.contains("no") || p.starts_with("crate::t")),
        "{paths:?}"
    );

    // A knot of two and a line of three: one circle.
    let mut edges = vec![BTreeMap::new(); 4];
    edges[0].insert(1, BTreeSet::new());
    edges[1].insert(0, BTreeSet::new());
    edges[1].insert(2, BTreeSet::new());
    edges[2].insert(3, BTreeSet::new());
    assert_eq!(circles(&edges), [vec![0, 1]]);
}
