//! One name per concept: no two types, traits or type aliases of the workspace's crates
//! seen beyond their own file (`pub`, `pub(crate)`, `pub(super)`) share a name, so a name
//! read anywhere in the code means one thing (docs/dev/CONTRIBUTING.md, "One name per concept"). Code under
//! `#[cfg(test)]` is left out.

use std::collections::BTreeMap;
use std::path::Path;

/// The types a file shows beyond itself: `pub struct Name`, `pub(crate) enum Name`, …
fn shown_types(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in code.lines() {
        let rest = line.trim_start();
        let Some(rest) = rest.strip_prefix("pub") else {
            continue;
        };
        let rest = match rest.strip_prefix('(') {
            Some(r) => match r.find(')') {
                Some(end) => &r[end + 1..],
                None => continue,
            },
            None => rest,
        };
        let mut words = rest.split_whitespace();
        let (Some(kind), Some(name)) = (words.next(), words.next()) else {
            continue;
        };
        if ["struct", "enum", "trait", "type", "union"].contains(&kind) {
            let name: String = name
                .chars()
                .take_while(|&c| super::files::is_ident(c))
                .collect();
            if !name.is_empty() {
                found.push(name);
            }
        }
    }
    found
}

#[test]
fn no_two_types_of_the_workspace_share_a_name() {
    let mut files = Vec::new();
    for src in super::crate_sources() {
        super::rust_files(&src, &mut files);
    }
    files.sort();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for path in files {
        let Ok(code) = std::fs::read_to_string(&path) else {
            continue;
        };
        let file = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .display()
            .to_string();
        for name in shown_types(&super::files::code_only(&code)) {
            by_name.entry(name).or_default().push(file.clone());
        }
    }
    let told: Vec<String> = by_name
        .iter()
        .filter(|(_, files)| files.len() > 1)
        .map(|(name, files)| format!("{name}: {}", files.join(", ")))
        .collect();
    assert!(
        told.is_empty(),
        "types of the same name in different files (give each its own):\n{}",
        told.join("\n")
    );
}

#[test]
fn the_type_reader_sees_every_visibility() {
    let code = "pub struct A;\npub(crate) enum B { X }\n  pub(super) trait C {}\n\
                pub(crate) type D<T> = Vec<T>;\npub fn e() {}\nstruct F;\npub(in crate::x) struct G;\n";
    assert_eq!(shown_types(code), ["A", "B", "C", "D", "G"]);
}
