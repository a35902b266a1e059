//! What Cargo cannot check of the layers (docs/dev/architecture.md, "Layers"): between the
//! crates Cargo refuses an import up; inside the binary's crate, every `crate::` path (an
//! import, or a path written out) must run down the graph the doc draws under "Inside the
//! binary's crate"; inside every crate, no two files use each other round a circle
//! (`files.rs`), and no two types share a name (`names.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The graph, as the doc draws it: `module -> the modules it uses directly`.
fn graph(doc: &str) -> BTreeMap<String, BTreeSet<String>> {
    let section = doc
        .split("\n### Inside the binary's crate")
        .nth(1)
        .expect("docs/dev/architecture.md has an `### Inside the binary's crate` section");
    let block = section
        .split("```text\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("that section draws the graph in a ```text block");
    let mut graph = BTreeMap::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let (from, to) = line
            .split_once("->")
            .unwrap_or_else(|| panic!("a graph line is `module -> modules`: {line:?}"));
        graph.insert(
            from.trim().to_string(),
            to.split_whitespace().map(String::from).collect(),
        );
    }
    graph
}

/// Everything `module` may use: what it uses directly, and what those may use.
fn reach(graph: &BTreeMap<String, BTreeSet<String>>, module: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<&str> = graph
        .get(module)
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect();
    while let Some(m) = todo.pop() {
        if seen.insert(m.to_string()) {
            todo.extend(graph.get(m).into_iter().flatten().map(String::as_str));
        }
    }
    seen
}

/// The source folder of every crate of the workspace: `src/` (the binary's crate, cli and
/// app) and each `crates/*/src/`.
fn crate_sources() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = vec![root.join("src")];
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    crates.sort();
    sources.extend(crates);
    sources
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file under src/ belongs to (`src/report/html.rs` → `report`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// The top-level modules a file's code names through `crate::` (comments left out): in
/// `use crate::a::b;`, `use crate::{a, b::c};` (over several lines too) and `crate::a::f()`.
fn used_modules(code: &str) -> BTreeSet<String> {
    let mut text = String::new();
    for line in code.lines() {
        let line = match line.find("//") {
            // A `//` inside a string (a URL) is not a comment: keep lines that quote one.
            Some(i) if !line[..i].contains('"') => &line[..i],
            _ => line,
        };
        text.push_str(line);
        text.push('\n');
    }
    let mut used = BTreeSet::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        // `promptgauge_crate::` or `other_crate::` is not this crate.
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::{c, d}, e}`: the first segment of each top-level item.
            let mut depth = 0;
            let mut item = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        rest = &group[j..];
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => item = true,
                    c if item && (c.is_alphabetic() || c == '_') => {
                        let name: String = group[j..]
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        used.insert(name);
                        item = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                used.insert(name);
            }
        }
    }
    used
}

/// Every `crate::` edge that the graph does not allow, as `file: from -> to`.
fn violations(root: &Path) -> Vec<String> {
    let doc = std::fs::read_to_string(root.join("docs/dev/architecture.md")).unwrap();
    let graph = graph(&doc);
    let src = root.join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut wrong = Vec::new();
    for file in files {
        let from = module_of(&src, &file);
        // The crate root declares the modules; the binary and this test sit above them all.
        if ["lib", "main", "layering"].contains(&from.as_str()) {
            continue;
        }
        let Some(_) = graph.get(&from) else {
            wrong.push(format!(
                "{}: module `{from}` is not in the graph of docs/dev/architecture.md",
                file.display()
            ));
            continue;
        };
        let allowed = reach(&graph, &from);
        let code = std::fs::read_to_string(&file).unwrap();
        for to in used_modules(&code) {
            if to != from && !allowed.contains(&to) {
                wrong.push(format!(
                    "{}: {from} -> {to}",
                    file.strip_prefix(root).unwrap().display()
                ));
            }
        }
    }
    wrong
}

#[test]
fn every_module_uses_only_what_the_architecture_graph_lets_it_reach() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/dev/architecture.md")).unwrap();
    let graph = graph(&doc);
    // No circles: no module reaches itself.
    for module in graph.keys() {
        assert!(
            !reach(&graph, module).contains(module),
            "the graph has a circle through `{module}`"
        );
    }
    let wrong = violations(root);
    assert!(
        wrong.is_empty(),
        "imports that run back up a layer (move the shared type down instead):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_reader_sees_imports_in_every_shape() {
    let code = "use crate::a::B;\nuse crate::{c, d::{E, F}, g::H};\n// crate::comment\nfn f() { crate::i::j(); x_crate::k::l(); }\npub(crate) fn m() {}\n";
    let used: Vec<String> = used_modules(code).into_iter().collect();
    assert_eq!(used, ["a", "c", "d", "g", "i"]);
    let graph = graph(
        "x\n### Inside the binary's crate\n\n```text\napp -> report\nreport -> stats\nstats ->\n```\n",
    );
    assert_eq!(
        reach(&graph, "app").into_iter().collect::<Vec<_>>(),
        ["report", "stats"]
    );
    assert!(reach(&graph, "stats").is_empty());
}

#[test]
fn code_and_docs_cite_only_the_project_s_own_docs() {
    // A maintainer who clones the project sees docs/ and README.md, nothing beside them.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for src in crate_sources() {
        rust_files(&src, &mut files);
    }
    rust_files(&root.join("tests"), &mut files);
    for doc in ["docs", "docs/guide", "docs/dev"]
        .iter()
        .flat_map(|d| std::fs::read_dir(root.join(d)).unwrap())
    {
        files.push(doc.unwrap().path());
    }
    files.push(root.join("README.md"));
    let outside = ["DESIGN §", "DESIGN.md", "../shared"];
    let mut cited = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for (i, line) in text.lines().enumerate() {
            // This test names what it looks for.
            if file.ends_with("layering/mod.rs") && line.contains("let outside") {
                continue;
            }
            if outside.iter().any(|o| line.contains(o)) {
                cited.push(format!("{}:{}: {}", file.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(
        cited.is_empty(),
        "cites a document outside the repository:\n{}",
        cited.join("\n")
    );
}

mod files;
mod names;
