//! The docs hold together: every relative link in README.md and docs/ names a file that
//! exists, every `#anchor` a heading of its target, and every place the code cites a doc
//! (a path under docs/, or README.md, with a section in quotes or a `§N` after it) names a
//! file and a heading that exist. External links are not fetched (no network): they only
//! have to be well formed. Each problem is reported with its file, its line and the fix.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

use crate::common::repo;

/// One broken link or citation.
#[derive(Debug)]
struct Problem {
    file: String,
    line: usize,
    what: String,
    fix: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: {}\n    fix: {}",
            self.file, self.line, self.what, self.fix
        )
    }
}

/// The folders (and files) whose text may cite a doc, relative to the repository.
const CITING: [&str; 17] = [
    "src",
    "crates",
    "clippy.toml",
    "npm",
    "pyproject.toml",
    "tests",
    "bench",
    "benches",
    "examples",
    ".ci",
    "scripts",
    "fuzz",
    ".github",
    "docs",
    "README.md",
    "Cargo.toml",
    "action.yml",
];

/// What is never read for citations: reports the tests compare byte for byte, and this
/// file, whose own test quotes broken citations on purpose.
const NOT_CITING: [&str; 3] = ["tests/golden", "tests/reports/links.rs", "fuzz/target"];

/// The text with fenced code blocks and inline code spans blanked out (newlines kept, so
/// line numbers still hold): what is left is what Markdown renders as links and headings.
fn prose(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut fence: Option<&str> = None;
    for line in markdown.split_inclusive('\n') {
        match (fence, fence_of(line)) {
            (None, Some(f)) => {
                fence = Some(f);
                out.push_str(&blank(line));
            }
            (Some(f), Some(g)) if f == g => {
                fence = None;
                out.push_str(&blank(line));
            }
            (Some(_), _) => out.push_str(&blank(line)),
            (None, None) => out.push_str(line),
        }
    }
    blank_code_spans(&out)
}

/// The fence a line opens or closes (three backticks or three tildes), indented or not:
/// fences in list items are indented.
fn fence_of(line: &str) -> Option<&'static str> {
    let trimmed = line.trim_start();
    ["```", "~~~"].into_iter().find(|f| trimmed.starts_with(f))
}

fn blank(text: &str) -> String {
    text.chars()
        .map(|c| if c == '\n' { '\n' } else { ' ' })
        .collect()
}

/// Inline code (`` `x` ``, ``` `` x `` ```) blanked, as CommonMark matches backtick runs.
fn blank_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = chars.clone();
    let run_at = |i: usize| chars[i..].iter().take_while(|&&c| c == '`').count();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let n = run_at(i);
        let mut j = i + n;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let m = run_at(j);
                if m == n {
                    close = Some(j);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(j) => {
                for c in &mut out[i..j + n] {
                    if *c != '\n' {
                        *c = ' ';
                    }
                }
                i = j + n;
            }
            None => i += n,
        }
    }
    out.into_iter().collect()
}

/// The ATX headings (`# …` to `###### …`) outside code, with their line numbers.
fn headings(markdown: &str) -> Vec<(usize, String)> {
    static HEADING: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$").unwrap());
    // Fences only: a heading's text keeps its inline code, which its slug is made from.
    let mut fence: Option<&str> = None;
    let mut found = Vec::new();
    for (i, line) in markdown.lines().enumerate() {
        if let Some(f) = fence_of(line) {
            fence = match fence {
                None => Some(f),
                Some(g) if g == f => None,
                other => other,
            };
            continue;
        }
        if fence.is_none()
            && let Some(c) = HEADING.captures(line)
        {
            found.push((i + 1, c[1].to_string()));
        }
    }
    found
}

/// GitHub's anchor for a heading: lowercase, every character but letters, digits, spaces,
/// `-` and `_` dropped, each space a `-`.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every anchor a page has: its headings' slugs, a repeated one numbered as GitHub does
/// (`x`, `x-1`, `x-2`).
fn anchors(markdown: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut all = BTreeSet::new();
    for (_, h) in headings(markdown) {
        let s = slug(&h);
        let n = seen.entry(s.clone()).or_insert(0);
        all.insert(if *n == 0 { s } else { format!("{s}-{n}") });
        *n += 1;
    }
    all
}

/// The Markdown links and images of a page: `[text](target)` and `![alt](target)`, with the
/// line the target is on. The text may run over several lines.
fn links(markdown: &str) -> Vec<(usize, String)> {
    static LINK: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#"\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+"[^"]*")?\s*\)"#)
            .unwrap()
    });
    let text = prose(markdown);
    LINK.captures_iter(&text)
        .map(|c| {
            let m = c.get(1).unwrap();
            let line = text[..m.start()].matches('\n').count() + 1;
            let target = m.as_str().trim_start_matches('<').trim_end_matches('>');
            (line, target.to_string())
        })
        .collect()
}

/// `a/b/../c` → `a/c`, without asking the file system (a target may not exist).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// A well-formed http(s) URL: a scheme, a host and no spaces. Not fetched.
fn well_formed_url(url: &str) -> bool {
    static URL: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^https?://[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::\d+)?(?:[/?#]\S*)?$").unwrap()
    });
    URL.is_match(url)
}

/// The problems of one Markdown page: `file` is its path relative to `root`, `text` its
/// content (given, so that a test can check a page that is not on disk).
fn check_page(root: &Path, file: &Path, text: &str) -> Vec<Problem> {
    let here = file.parent().unwrap_or(Path::new(""));
    let mut problems = Vec::new();
    let problem = |line, what: String, fix: String| Problem {
        file: file.display().to_string(),
        line,
        what,
        fix,
    };
    for (line, target) in links(text) {
        if target.is_empty() {
            problems.push(problem(
                line,
                "a link with no target".into(),
                "write the path or URL between the parentheses".into(),
            ));
            continue;
        }
        if target.starts_with("http://") || target.starts_with("https://") {
            if !well_formed_url(&target) {
                problems.push(problem(
                    line,
                    format!("`{target}` is not a well-formed URL"),
                    "write it as https://host/path, with no spaces".into(),
                ));
            }
            continue;
        }
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        if path.starts_with('/') {
            problems.push(problem(
                line,
                format!("`{target}` is an absolute path"),
                format!("link relative to {}", file.display()),
            ));
            continue;
        }
        let resolved = if path.is_empty() {
            file.to_path_buf()
        } else {
            normalize(&here.join(path))
        };
        let full = root.join(&resolved);
        if !path.is_empty() && !full.exists() {
            problems.push(problem(
                line,
                format!(
                    "`{target}` names {}, which does not exist",
                    resolved.display()
                ),
                "point the link at the file's place, relative to the linking file".into(),
            ));
            continue;
        }
        let Some(anchor) = anchor else { continue };
        let page = if path.is_empty() {
            text.to_string()
        } else {
            match std::fs::read_to_string(&full) {
                Ok(t) if resolved.extension().is_some_and(|e| e == "md") => t,
                _ => {
                    problems.push(problem(
                        line,
                        format!(
                            "`{target}` has an anchor, but {} is not a Markdown page",
                            resolved.display()
                        ),
                        "drop the #anchor".into(),
                    ));
                    continue;
                }
            }
        };
        let have = anchors(&page);
        if !have.contains(anchor) {
            let nearest = have
                .iter()
                .max_by(|a, b| {
                    strsim::jaro_winkler(a, anchor).total_cmp(&strsim::jaro_winkler(b, anchor))
                })
                .map(|a| format!("#{a}"))
                .unwrap_or_else(|| "no anchor (the page has no headings)".into());
            problems.push(problem(
                line,
                format!(
                    "`{target}`: {} has no heading whose anchor is #{anchor}",
                    resolved.display()
                ),
                format!("link to an anchor it has, such as {nearest}, or restore the heading"),
            ));
        }
    }
    problems
}

/// A heading as a citation names it: inline code and emphasis marks dropped, lowercase,
/// spaces collapsed, and a section number (`2.`, `3a.`) left off.
fn plain(heading: &str) -> String {
    static NUMBER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\d+[a-z]?\.\s+").unwrap());
    let text: String = heading
        .chars()
        .filter(|c| !matches!(c, '`' | '*'))
        .collect();
    let text = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    NUMBER.replace(&text, "").into_owned()
}

/// Whether `cited` names one of `page`'s headings: the heading itself, or its start (a
/// short name for a long heading: "Waves" for "Waves: both levers at once").
fn names_heading(page: &str, cited: &str) -> bool {
    let cited = plain(cited);
    headings(page).iter().any(|(_, h)| {
        let h = plain(h);
        h == cited
            || h.strip_prefix(&cited)
                .is_some_and(|rest| !rest.starts_with(|c: char| c.is_alphanumeric()))
    })
}

/// Whether `page` has a heading numbered `n` (`## 3a. …` for §3a).
fn has_section(page: &str, n: &str) -> bool {
    headings(page).iter().any(|(_, h)| {
        h.strip_prefix(n)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with(' '))
    })
}

/// A line as a comment continues it: without its comment marks.
fn continued(line: &str) -> &str {
    let line = line.trim_start();
    let line = ["//!", "///", "//", "#", "*"]
        .into_iter()
        .find_map(|m| line.strip_prefix(m))
        .unwrap_or(line);
    line.trim_start()
}

/// The problems of the citations in one file of code (or prose): every `docs/….md` (or
/// `.json`) path must exist, and a section named after a doc's path — `, "Section"`,
/// `'s "Section"` or ` §N` — must be a heading of that doc. A section may run on to the
/// next line of a comment.
fn check_citations(root: &Path, file: &Path, text: &str) -> Vec<Problem> {
    static PATH: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"(?:^|[^\w./-])((?:docs/[\w./-]*\.(?:md|json))|README\.md)").unwrap()
    });
    static SECTION: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#"^(?:(?:'s|,)\s+\(?"([^"]+)"|(?:'s|,)?\s*§\s*(\d+[a-z]?))"#).unwrap()
    });
    let lines: Vec<&str> = text.lines().collect();
    let mut problems = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        for c in PATH.captures_iter(line) {
            let m = c.get(1).unwrap();
            let cited = m.as_str().trim_end_matches('.');
            let problem = |what: String, fix: String| Problem {
                file: file.display().to_string(),
                line: i + 1,
                what,
                fix,
            };
            let Ok(page) = std::fs::read_to_string(root.join(cited)) else {
                problems.push(problem(
                    format!("cites {cited}, which does not exist"),
                    "cite the doc at its place (user pages are in docs/guide/, developer pages in docs/dev/)".into(),
                ));
                continue;
            };
            let mut after = line[m.end()..].to_string();
            if let Some(next) = lines.get(i + 1) {
                after.push(' ');
                after.push_str(continued(next));
            }
            let Some(s) = SECTION.captures(&after) else {
                continue;
            };
            if let Some(section) = s.get(1) {
                let section = section.as_str();
                if !names_heading(&page, section) {
                    let nearest = headings(&page)
                        .into_iter()
                        .map(|(_, h)| h)
                        .max_by(|a, b| {
                            strsim::jaro_winkler(&plain(a), &plain(section))
                                .total_cmp(&strsim::jaro_winkler(&plain(b), &plain(section)))
                        })
                        .unwrap_or_default();
                    problems.push(problem(
                        format!("cites {cited}, \"{section}\", but {cited} has no such heading"),
                        format!("name a heading it has (the nearest is \"{nearest}\"), or restore the heading"),
                    ));
                }
            } else if let Some(n) = s.get(2) {
                let n = n.as_str();
                if !has_section(&page, n) {
                    problems.push(problem(
                        format!("cites {cited} §{n}, but {cited} has no heading numbered {n}"),
                        "cite the section by its number or its heading as the doc now has it"
                            .into(),
                    ));
                }
            }
        }
    }
    problems
}

fn files_under(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
    if NOT_CITING.iter().any(|n| rel == Path::new(n)) {
        return;
    }
    let full = root.join(rel);
    if full.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(&full)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        entries.sort();
        for name in entries {
            files_under(root, &rel.join(name), out);
        }
    } else if full.is_file() {
        out.push(rel.to_path_buf());
    }
}

fn report(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_relative_link_and_anchor_in_the_docs_resolves() {
    let root = repo();
    let mut pages = vec![PathBuf::from("README.md")];
    files_under(&root, Path::new("docs"), &mut pages);
    pages.retain(|p| p.extension().is_some_and(|e| e == "md"));
    assert!(pages.len() > 10, "the docs are found: {pages:?}");
    let mut problems = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(root.join(page)).unwrap();
        problems.extend(check_page(&root, page, &text));
    }
    assert!(
        problems.is_empty(),
        "broken links in the docs:\n{}",
        report(&problems)
    );
}

#[test]
fn every_citation_of_a_doc_names_a_file_and_a_heading_that_exist() {
    let root = repo();
    let mut files = Vec::new();
    for place in CITING {
        files_under(&root, Path::new(place), &mut files);
    }
    let mut problems = Vec::new();
    let mut read = 0;
    for file in &files {
        // Text only: fixtures include archives and pictures.
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue;
        };
        read += 1;
        problems.extend(check_citations(&root, file, &text));
    }
    assert!(read > 100, "the code is found ({read} files read)");
    assert!(
        problems.is_empty(),
        "citations of docs that do not hold:\n{}",
        report(&problems)
    );
}

#[test]
fn the_checks_report_what_is_broken_and_where() {
    let root = repo();
    // A page that is not on disk, beside the guide's real pages.
    let page = Path::new("docs/guide/broken-example.md");
    let text = "# A page\n\n## Its section\n\n\
        [fine](files.md#the-bench) and [fine too](#its-section) and [home](../../README.md)\n\
        [gone](no-such-page.md)\n\
        [bad anchor](files.md#the-benches)\n\
        [no heading here](#nowhere)\n\
        ```\n[in code](not-checked.md)\n```\n\
        `[in a span](not-checked.md)` ![picture](view/view-runs.png)\n\
        [a link whose text\nruns on](also-gone.md)\n\
        [web](https://example.com/a?b=c#d) [broken web](https://)\n";
    let problems = check_page(&root, page, text);
    let found: Vec<(usize, &str)> = problems.iter().map(|p| (p.line, p.what.as_str())).collect();
    assert_eq!(problems.len(), 5, "{}", report(&problems));
    assert!(
        found[0].0 == 6 && found[0].1.contains("no-such-page.md"),
        "{found:?}"
    );
    assert!(
        found[1].0 == 7 && found[1].1.contains("#the-benches"),
        "{found:?}"
    );
    assert!(
        problems[1].fix.contains("#the-bench"),
        "the fix names the nearest anchor"
    );
    assert!(
        found[2].0 == 8 && found[2].1.contains("#nowhere"),
        "{found:?}"
    );
    assert!(
        found[3].0 == 14 && found[3].1.contains("also-gone.md"),
        "{found:?}"
    );
    assert!(
        found[4].0 == 15 && found[4].1.contains("not a well-formed URL"),
        "{found:?}"
    );
    assert!(
        problems[0]
            .to_string()
            .starts_with("docs/guide/broken-example.md:6: ")
    );

    // Citations in code, with the paths built here so that this file cites nothing.
    let (guide, dev) = ("docs/guide", "docs/dev");
    let code = format!(
        "//! Fine ({guide}/client.md, \"The client's rules\"), ({guide}/batch.md, \"Waves\"),\n\
         //! {dev}/statistics.md §3a and ({guide}/client.md, \"Hostile\n\
         //! streams\").\n\
         /// Gone: ({guide}/gone.md, \"Anything\").\n\
         /// A heading that moved: ({guide}/client.md, \"Hostile streamers\").\n\
         /// A section number it lacks: {dev}/statistics.md §42.\n\
         let doc = std::fs::read_to_string(root.join(\"{dev}/architecture.md\"));\n"
    );
    let problems = check_citations(&root, Path::new("src/example.rs"), &code);
    let found: Vec<(usize, &str)> = problems.iter().map(|p| (p.line, p.what.as_str())).collect();
    assert_eq!(problems.len(), 3, "{}", report(&problems));
    assert!(
        found[0].0 == 4 && found[0].1.contains("gone.md"),
        "{found:?}"
    );
    assert!(
        found[1].0 == 5 && found[1].1.contains("Hostile streamers"),
        "{found:?}"
    );
    assert!(
        problems[1].fix.contains("\"Hostile streams\""),
        "{}",
        problems[1].fix
    );
    assert!(found[2].0 == 6 && found[2].1.contains("§42"), "{found:?}");
}

#[test]
fn slugs_follow_github() {
    assert_eq!(slug("The client's rules"), "the-clients-rules");
    assert_eq!(
        slug("Scorers in your own language: `kind: command`"),
        "scorers-in-your-own-language-kind-command"
    );
    assert_eq!(
        slug("6. `run --until-decided` — sequential stopping (`sequential.rs`)"),
        "6-run---until-decided--sequential-stopping-sequentialrs"
    );
    assert_eq!(
        slug("3a. Accuracy with repeats (`cluster.rs` `clustered_wilson`)"),
        "3a-accuracy-with-repeats-clusterrs-clustered_wilson"
    );
    let page = "# A\n## Tests\n```\n# not a heading\n```\n## Tests\n";
    assert_eq!(
        anchors(page).into_iter().collect::<Vec<_>>(),
        ["a", "tests", "tests-1"]
    );
}
