//! The numbers the guide gives from a simulation are that simulation's: every table of
//! docs/guide/statistics.md with a `where` column names, per row, a part and a row of the
//! committed output the section cites (`tests/fixtures/…_sim.txt`), and every number of its
//! `measured` cell is a value of that row (a share as a percentage, rounded as written) or
//! the sum of two of its shares. A number copied from an older run fails here with the file,
//! the line and the row it should come from.

use std::sync::LazyLock;

use regex::Regex;

use crate::common::repo;

static NUMBER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d+(?:\.\d+)?").unwrap());
static SIM: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"tests/fixtures/([a-z_]+_sim\.txt)").unwrap());
static WHERE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"^part (\d+), (?:"([^"]+)"( rows)?|same row)$"#).unwrap());

/// The lines of part `part` of a simulation's output (from `== part.` to the next `==`).
fn part(text: &str, part: &str) -> Vec<String> {
    let head = format!("== {part}.");
    text.lines()
        .skip_while(|l| !l.starts_with(&head))
        .skip(1)
        .take_while(|l| !l.starts_with("=="))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

/// Whether `number` (as written, with its decimals) is a value of one of `lines`.
fn found(number: &str, lines: &[String]) -> bool {
    let x: f64 = number.parse().unwrap();
    let decimals = number.split('.').nth(1).map_or(0, str::len) as i32;
    let close = |v: f64| (v - x).abs() <= 0.5 * 10f64.powi(-decimals) + 1e-9;
    lines.iter().any(|line| {
        let values: Vec<f64> = line
            .split([' ', '(', ')', '%'])
            .filter_map(|t| t.parse().ok())
            .collect();
        let shares: Vec<f64> = values.iter().copied().filter(|v| *v <= 1.0).collect();
        values
            .iter()
            .any(|&v| close(v) || (v <= 1.0 && close(100.0 * v)))
            || shares
                .iter()
                .enumerate()
                .any(|(i, a)| shares[i + 1..].iter().any(|b| close(100.0 * (a + b))))
    })
}

#[test]
fn the_guide_s_simulated_numbers_are_the_committed_output_s() {
    let doc = "docs/guide/statistics.md";
    let text = std::fs::read_to_string(repo().join(doc)).unwrap();
    let mut sim: Option<(String, String)> = None;
    let mut columns: Option<(usize, usize)> = None;
    let mut previous: Vec<String> = Vec::new();
    let (mut rows, mut problems) = (0, Vec::new());
    for (at, line) in text.lines().enumerate() {
        if let Some(m) = SIM.captures_iter(line).last() {
            let name = m[1].to_string();
            let path = repo().join("tests/fixtures").join(&name);
            let body = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{doc}:{}: {}: {e}", at + 1, path.display()));
            sim = Some((name, body));
        }
        if !line.starts_with('|') {
            columns = None;
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if let (Some(m), Some(w)) = (
            cells.iter().position(|c| *c == "measured"),
            cells.iter().position(|c| *c == "where"),
        ) {
            columns = Some((m, w));
            continue;
        }
        let (Some((m, w)), Some((name, body))) = (columns, &sim) else {
            continue;
        };
        if cells[m].starts_with("---") {
            continue;
        }
        let Some(place) = WHERE.captures(cells[w]) else {
            problems.push(format!(
                "{doc}:{}: the `where` cell {:?} does not say `part N, \"row\"`, `part N, \"row …\" rows` or `part N, same row`",
                at + 1,
                cells[w]
            ));
            continue;
        };
        let lines = part(body, &place[1]);
        let matched: Vec<String> = match place.get(2) {
            Some(label) => {
                let pieces: Vec<String> = label
                    .as_str()
                    .split('…')
                    .map(|p| regex::escape(&p.split_whitespace().collect::<Vec<_>>().join(" ")))
                    .collect();
                let pattern = Regex::new(&pieces.join(".*")).unwrap();
                let all: Vec<String> = lines
                    .iter()
                    .filter(|l| pattern.is_match(l))
                    .cloned()
                    .collect();
                if place.get(3).is_some() {
                    all
                } else {
                    all.into_iter().take(1).collect()
                }
            }
            None => previous.clone(),
        };
        if matched.is_empty() {
            problems.push(format!(
                "{doc}:{}: no row {:?} in part {} of tests/fixtures/{name}",
                at + 1,
                cells[w],
                &place[1]
            ));
            continue;
        }
        for number in NUMBER.find_iter(cells[m]) {
            if !found(number.as_str(), &matched) {
                problems.push(format!(
                    "{doc}:{}: {} is not in {:?} of tests/fixtures/{name}, part {}: {matched:?}\n    fix: copy the number from that row, or rerun the script and commit its output",
                    at + 1,
                    number.as_str(),
                    cells[w],
                    &place[1]
                ));
            }
        }
        previous = matched;
        rows += 1;
    }
    assert!(
        problems.is_empty(),
        "{} numbers not from their simulation:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(
        rows >= 8,
        "{rows} rows checked: the table of sequential stopping is gone"
    );
}

#[test]
fn a_number_from_another_run_is_caught() {
    let lines = vec!["(ii) +10 points np 10000 0.8176 0.0002 0.1820".to_string()];
    assert!(found("81.8", &lines));
    assert!(found("18.2", &lines));
    assert!(!found("83.5", &lines));
    assert!(!found("82.0", &lines));
}
