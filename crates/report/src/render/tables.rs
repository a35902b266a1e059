//! Every table promptgauge shows, each defined once from the figures ([`crate::table`]
//! draws it in the terminal, summary.md, the HTML pages and CSV). A column one syntax leaves
//! out or heads differently says so here, beside the column.

use crate::compare::{Axis, Comparison, RunComparison, Verdict, ci_header};
use crate::history::{History, short_time, source_label, step_cell};
use crate::parts::PartFigures;
use crate::rows::RunRow;
use crate::table::{Cell, Column, Row, Syntax, Table};
use crate::{Summary, interval, millis, pct, usd};

/// The verdict's HTML class: its name in summary.json (`not_distinguishable`).
fn verdict_class(c: &Comparison) -> String {
    serde_json::to_value(c.verdict)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// Each variant's headline figure with its interval, its count, failures, latency, tokens
/// and cost. report.html shows latency and cost in tables of their own, beside their charts.
pub(crate) fn variants(s: &Summary) -> Table {
    let conf = (s.run.confidence * 100.0).round();
    let count = s.count_label();
    let (per_short, per_long) = s.cost_per_names();
    let mut t = Table::new(
        "variants",
        vec![
            Column::left("variant"),
            Column::right(s.measure()),
            Column::right(format!("{conf}% CI")).called(Syntax::Html, "interval"),
            Column::right(count.replace('/', " / "))
                .called(Syntax::Terminal, count)
                .drop(4),
            Column::right("failed"),
            Column::right("truncated").only_in(Syntax::Html),
            Column::right("cached").only_in(Syntax::Html),
            Column::right("TTFT p50").drop(7).not_in(Syntax::Html),
            Column::right("latency p50 / p90 / p99")
                .called(Syntax::Terminal, "latency p50/p90/p99")
                .drop(3)
                .not_in(Syntax::Html),
            Column::right("tok/s").drop(9).only_in(Syntax::Terminal),
            Column::right("tokens in / out")
                .called(Syntax::Terminal, "tokens in/out")
                .drop(6)
                .not_in(Syntax::Html),
            Column::right("cost").drop(5).not_in(Syntax::Html),
            Column::right(per_long)
                .called(Syntax::Terminal, per_short)
                .drop(8)
                .not_in(Syntax::Html),
        ],
    );
    for v in &s.variants {
        let (m, lo, hi) = v.headline();
        let est = if v.tokens.estimated { "~" } else { "" };
        t.push(
            Row::new([
                Cell::text(&v.name),
                Cell::figure(pct(m)).data(
                    "data-accuracy",
                    m.map(|a| a.to_string()).unwrap_or_default(),
                ),
                Cell::figure(interval(lo, hi)),
                Cell::figure(format!("{} / {}", v.correct, v.n)),
                Cell::figure(v.failed.to_string()),
                Cell::figure(v.truncated.to_string()),
                Cell::figure(v.cached.to_string()),
                Cell::figure(millis(v.ttft_ms.p50)),
                Cell::figure(format!(
                    "{} / {} / {}",
                    millis(v.latency_ms.p50),
                    millis(v.latency_ms.p90),
                    millis(v.latency_ms.p99)
                )),
                Cell::figure(
                    v.output_tokens_per_s
                        .map_or_else(|| "–".into(), |x| format!("{x:.0}")),
                ),
                Cell::figure(format!(
                    "{est}{} / {est}{}",
                    v.tokens.prompt, v.tokens.completion
                )),
                Cell::figure(usd(v.cost_usd)),
                Cell::figure(usd(s.cost_per(v))),
            ])
            .data("data-variant", &v.name)
            .baseline(v.baseline),
        );
    }
    t
}

/// Each variant against the baseline, case by case: the four counts, the difference, its
/// interval, the Holm-adjusted p and the verdict.
pub(crate) fn paired(s: &Summary) -> Table {
    let baseline = s.variants.first().map_or("baseline", |v| v.name.as_str());
    let mut t = Table::new(
        "verdicts",
        vec![
            Column::left("variant").called(Syntax::Terminal, format!("vs {baseline}")),
            Column::right("both right").drop(6),
            Column::right("only variant").drop(4),
            Column::right(format!("only {baseline}")).drop(4),
            Column::right("both wrong").drop(6),
            Column::right("difference"),
            Column::right(ci_header(&s.comparisons, s.run.confidence)),
            Column::right("p (Holm)").drop(3),
            Column::left("verdict"),
        ],
    );
    for c in &s.comparisons {
        t.push(verdict_row(c, false));
    }
    t
}

/// A comparison's row: the variant (and, when `against`, what it is compared with), the
/// four counts, the difference, its interval, the Holm-adjusted p and the verdict.
fn verdict_row(c: &Comparison, against: bool) -> Row {
    let [both, only_v, only_r, neither, difference, ci, p, verdict] = c.cells();
    let mut cells = vec![Cell::text(&c.variant)];
    if against {
        cells.push(Cell::text(&c.against));
    }
    cells.extend([
        Cell::figure(both),
        Cell::figure(only_v),
        Cell::figure(only_r),
        Cell::figure(neither),
        Cell::figure(difference),
        Cell::figure(ci),
        Cell::figure(p),
        Cell::figure(verdict).strong().class(verdict_class(c)),
    ]);
    Row::new(cells).data("data-variant", &c.variant)
}

/// A run of several endpoints' axes: its endpoints and its variants, each in run order.
fn grid_axes(s: &Summary) -> (Vec<&str>, Vec<&str>) {
    let mut endpoints: Vec<&str> = Vec::new();
    let mut variants: Vec<&str> = Vec::new();
    for v in &s.variants {
        if let (Some(e), Some(name)) = (v.endpoint.as_deref(), v.variant.as_deref()) {
            if !endpoints.contains(&e) {
                endpoints.push(e);
            }
            if !variants.contains(&name) {
                variants.push(name);
            }
        }
    }
    (endpoints, variants)
}

/// A run of several endpoints: each variant (a row) at each endpoint (a column), its
/// headline figure with its interval and its cost at that endpoint's price, the baseline
/// endpoint first. Tokens and latency per cell are in [`variants`], one row per cell
/// (`ENDPOINT/VARIANT`).
pub(crate) fn grid(s: &Summary) -> Table {
    let (endpoints, variants) = grid_axes(s);
    // Each endpoint's score with its interval, then (when any cell is priced) what its
    // answers cost at that endpoint's price; a narrow terminal gives up the costs first.
    let priced = s.variants.iter().any(|v| v.cost_usd.is_some());
    let mut columns = vec![Column::left("variant")];
    for e in &endpoints {
        columns.push(Column::right(*e));
        if priced {
            columns.push(Column::right(format!("{e} cost")).drop(5));
        }
    }
    let mut t = Table::new("grid", columns);
    for (i, name) in variants.iter().enumerate() {
        let mut cells = vec![Cell::text(*name)];
        for e in &endpoints {
            let arm = s
                .variants
                .iter()
                .find(|v| v.variant.as_deref() == Some(name) && v.endpoint.as_deref() == Some(e));
            cells.push(Cell::figure(arm.map_or_else(String::new, |v| {
                let (m, lo, hi) = v.headline();
                format!("{} {}", pct(m), interval(lo, hi))
            })));
            if priced {
                cells.push(Cell::figure(
                    arm.map_or_else(String::new, |v| usd(v.cost_usd)),
                ));
            }
        }
        t.push(Row::new(cells).data("data-variant", *name).baseline(i == 0));
    }
    t
}

/// A run of several endpoints: the verdicts on one axis, each against its own reference —
/// which prompt (each variant against the baseline variant at the same endpoint) or which
/// model (each endpoint against the baseline endpoint, for the same variant).
pub(crate) fn paired_axis(s: &Summary, axis: Axis) -> Table {
    let on_axis: Vec<&Comparison> = s
        .comparisons
        .iter()
        .filter(|c| c.family.as_ref().is_some_and(|f| f.axis == axis))
        .collect();
    let mut t = Table::new(
        match axis {
            Axis::Variants => "verdicts-prompt",
            Axis::Endpoints => "verdicts-model",
        },
        vec![
            Column::left("variant"),
            // The heading says against what; the sentences below name it.
            Column::left("against").drop(2),
            Column::right("both right").drop(6),
            Column::right("only variant").drop(4),
            Column::right("only against").drop(4),
            Column::right("both wrong").drop(6),
            Column::right("difference"),
            Column::right(ci_header(on_axis.iter().copied(), s.run.confidence)),
            Column::right("p (Holm)").drop(3),
            Column::left("verdict"),
        ],
    );
    for c in on_axis {
        t.push(verdict_row(c, true));
    }
    t
}

/// What the judge cost per variant and, once people labelled answers, how it fared against
/// them (a terminal leaves the label columns out until there are labels).
pub(crate) fn judge(s: &Summary) -> Table {
    let labelled = s.variants.iter().any(|v| v.labelled.is_some());
    let label_column = |c: Column| {
        if labelled {
            c
        } else {
            c.not_in(Syntax::Terminal)
        }
    };
    let mut t = Table::new(
        "judge",
        vec![
            Column::left("variant"),
            Column::right("calls"),
            Column::right("tokens in / out")
                .called(Syntax::Terminal, "tokens in/out")
                .drop(6),
            Column::right("cost").drop(5),
            Column::right("votes agree").drop(4),
            label_column(Column::right("labels").drop(3)),
            label_column(Column::right("agrees with people")),
            label_column(Column::right("κ").called(Syntax::Markdown, "kappa").drop(2)),
            label_column(
                Column::right("judge passes what people fail")
                    .called(Syntax::Markdown, "passes what people fail")
                    .drop(7),
            ),
            label_column(
                Column::right("judge fails what people pass")
                    .called(Syntax::Markdown, "fails what people pass")
                    .drop(7),
            ),
            label_column(Column::right(format!(
                "{} as people would score",
                s.measure()
            ))),
        ],
    );
    for v in &s.variants {
        let tokens = v.judge_tokens.unwrap_or_default();
        let l = v.labelled.as_ref();
        t.push(
            Row::new([
                Cell::text(&v.name),
                Cell::figure(v.judge_calls.to_string()),
                Cell::figure(format!("{} / {}", tokens.prompt, tokens.completion)),
                Cell::figure(usd(v.judge_cost_usd)),
                Cell::figure(pct(v.judge_agreement)),
                Cell::figure(l.map_or(0, |l| l.labels).to_string()),
                Cell::figure(l.map_or("–".into(), |l| {
                    format!(
                        "{} {}",
                        pct(l.agreement),
                        interval(l.agreement_low, l.agreement_high)
                    )
                })),
                Cell::figure(
                    l.and_then(|l| l.kappa)
                        .map_or("–".into(), |k| format!("{k:.2}")),
                ),
                Cell::figure(pct(l.and_then(|l| l.judge_passes_people_fail))),
                Cell::figure(pct(l.and_then(|l| l.judge_fails_people_pass))),
                Cell::figure(l.map_or("–".into(), |l| {
                    format!(
                        "{} {}",
                        pct(l.corrected),
                        interval(l.corrected_low, l.corrected_high)
                    )
                })),
            ])
            .data("data-variant", &v.name),
        );
    }
    t
}

/// Each tag's figure per variant, a row per tag and variant.
pub(crate) fn by_tag(s: &Summary) -> Table {
    let mut t = Table::new(
        "slices",
        vec![
            Column::left("tag"),
            Column::left("variant"),
            Column::right(s.measure()),
            Column::right("CI"),
            Column::right(s.count_label().replace('/', " / ")),
        ],
    );
    for sl in &s.slices {
        t.push(Row::new([
            Cell::text(&sl.tag),
            Cell::text(&sl.variant),
            Cell::figure(pct(sl.accuracy)),
            Cell::figure(interval(sl.ci_low, sl.ci_high)),
            Cell::figure(format!("{} / {}", sl.correct, sl.n)),
        ]));
    }
    t
}

/// Each tag's figure per variant, a row per tag and a column per variant: what a terminal
/// shows, with the intervals when they fit.
pub(crate) fn by_tag_across(s: &Summary, with_interval: bool) -> Table {
    let mut columns = vec![Column::left("tag")];
    columns.extend(s.variants.iter().map(|v| Column::left(v.name.clone())));
    let mut t = Table::new("slices", columns);
    for chunk in s.slices.chunks(s.variants.len().max(1)) {
        let mut cells = vec![Cell::text(&chunk[0].tag)];
        cells.extend(chunk.iter().map(|sl| {
            Cell::figure(if with_interval {
                format!(
                    "{} {} n={}",
                    pct(sl.accuracy),
                    interval(sl.ci_low, sl.ci_high),
                    sl.n
                )
            } else {
                format!("{} n={}", pct(sl.accuracy), sl.n)
            })
        }));
        t.push(Row::new(cells));
    }
    t
}

/// What a part's figure is: accuracy when every score of the part was 0 or 1, else the
/// mean score.
fn part_measure(p: &PartFigures) -> &'static str {
    if p.binary { "accuracy" } else { "mean score" }
}

/// What the parts' figure column is headed, and whether each part must say its own (some
/// parts are scored 0 or 1, others not).
pub(crate) fn parts_measure(s: &Summary) -> (&'static str, bool) {
    let binary = s.parts.iter().filter(|p| p.binary).count();
    if binary == s.parts.len() {
        ("accuracy", false)
    } else if binary == 0 {
        ("mean score", false)
    } else {
        ("accuracy or mean score", true)
    }
}

/// The columns of [`parts`]: the part and the cases it scored, the arm (and in a grid what
/// it is against), its figure, interval and count, and its comparison.
fn parts_columns(s: &Summary) -> Vec<Column> {
    let conf = (s.run.confidence * 100.0).round();
    let (measure, _) = parts_measure(s);
    let mut columns = vec![
        Column::left("part"),
        Column::right("cases"),
        Column::left("variant"),
    ];
    if s.is_grid() {
        columns.push(Column::left("against"));
    }
    columns.extend([
        Column::right(measure),
        Column::right(format!("{conf}% CI")).called(Syntax::Html, "interval"),
        Column::right("n"),
        Column::right("difference"),
        Column::right(ci_header(
            s.parts.iter().flat_map(|p| &p.comparisons),
            s.run.confidence,
        )),
        Column::right("p (Holm)").drop(3),
        Column::left("verdict"),
    ]);
    columns
}

/// Each named part's figure per arm — accuracy for a part scored 0 or 1, the mean score
/// otherwise — with its interval and count, and each arm against its baseline paired by
/// case: the difference, its interval, the Holm-adjusted p and the verdict (Holm within
/// each part). A row per part and arm; in a grid a row per comparison (an arm is compared
/// on both axes), against what in a column of its own.
pub(crate) fn parts(s: &Summary) -> Table {
    let grid = s.is_grid();
    let (_, mixed) = parts_measure(s);
    let mut t = Table::new("parts", parts_columns(s));
    for p in &s.parts {
        for (k, v) in p.variants.iter().enumerate() {
            let against: Vec<&Comparison> = p
                .comparisons
                .iter()
                .filter(|c| c.variant == v.name)
                .collect();
            let shown: Vec<Option<&Comparison>> = if against.is_empty() {
                vec![None]
            } else {
                against.into_iter().map(Some).collect()
            };
            for (j, c) in shown.into_iter().enumerate() {
                let first_of_part = k == 0 && j == 0;
                let mut part = Cell::text(if first_of_part { p.name.as_str() } else { "" });
                if first_of_part && mixed {
                    part = part.aside(Some(part_measure(p)));
                }
                let cases = if first_of_part {
                    p.cases.to_string()
                } else {
                    String::new()
                };
                let mut cells = vec![
                    part,
                    Cell::figure(cases),
                    Cell::text(if j == 0 { v.name.as_str() } else { "" })
                        .aside((j == 0 && k == 0).then_some("baseline")),
                ];
                if grid {
                    cells.push(Cell::text(c.map_or("", |c| c.against.as_str())));
                }
                let figure = |text: String| Cell::figure(if j == 0 { text } else { String::new() });
                cells.extend([
                    figure(pct(v.mean)),
                    figure(interval(v.ci_low, v.ci_high)),
                    figure(v.n.to_string()),
                ]);
                match c {
                    Some(c) => {
                        let [.., difference, ci, p_holm, verdict] = c.cells();
                        cells.extend([
                            Cell::figure(difference),
                            Cell::figure(ci),
                            Cell::figure(p_holm),
                            Cell::figure(verdict).strong().class(verdict_class(c)),
                        ]);
                    }
                    None => cells.extend((0..4).map(|_| Cell::figure(""))),
                }
                t.push(
                    Row::new(cells)
                        .data("data-part", &p.name)
                        .data("data-variant", &v.name),
                );
            }
        }
    }
    t
}

/// Whether a part scored fewer cases than the run has (cases with scorers of their own, an
/// imported promptfoo config's asserts; failed jobs): a terminal's parts table then says
/// each part's cases (summary.md's and report.html's always do).
fn some_cases(s: &Summary) -> bool {
    s.parts.iter().any(|p| p.cases < s.run.cases as u64)
}

/// The parts for a terminal: a row per part and a column per variant, each figure with
/// (when `with_interval`) its interval, and ▲/▼ where the variant is significantly
/// better/worse than the baseline.
pub(crate) fn parts_across(s: &Summary, with_interval: bool) -> Table {
    let (_, mixed) = parts_measure(s);
    let some = some_cases(s);
    let mut columns = vec![Column::left("part")];
    if some {
        columns.push(Column::right("cases"));
    }
    columns.extend(s.variants.iter().map(|v| Column::left(v.name.clone())));
    let mut t = Table::new("parts", columns);
    for p in &s.parts {
        let part = Cell::text(&p.name).aside((mixed && !p.binary).then_some("mean score"));
        let mut cells = vec![part];
        if some {
            cells.push(Cell::figure(p.cases.to_string()));
        }
        cells.extend(
            s.variants
                .iter()
                .map(|arm| part_figure(p, &arm.name, with_interval)),
        );
        t.push(Row::new(cells));
    }
    t
}

/// A grid's parts for a terminal, as its whole score's [`grid`]: a row per part and
/// variant, a column per endpoint, each cell's figure (with its interval when
/// `with_interval`) marked ▲/▼ where it is significantly better/worse than the baseline
/// variant at its endpoint.
pub(crate) fn parts_grid(s: &Summary, with_interval: bool) -> Table {
    let (_, mixed) = parts_measure(s);
    let (endpoints, variants) = grid_axes(s);
    let some = some_cases(s);
    let mut columns = vec![Column::left("part")];
    if some {
        columns.push(Column::right("cases"));
    }
    columns.push(Column::left("variant"));
    columns.extend(endpoints.iter().map(|e| Column::left(*e)));
    let mut t = Table::new("parts", columns);
    for p in &s.parts {
        for (i, name) in variants.iter().enumerate() {
            let (part, cases) = if i == 0 {
                (
                    Cell::text(&p.name).aside((mixed && !p.binary).then_some("mean score")),
                    p.cases.to_string(),
                )
            } else {
                (Cell::text(""), String::new())
            };
            let mut cells = vec![part];
            if some {
                cells.push(Cell::figure(cases));
            }
            cells.push(Cell::text(*name));
            cells.extend(endpoints.iter().map(|e| {
                let arm = s.variants.iter().find(|v| {
                    v.variant.as_deref() == Some(name) && v.endpoint.as_deref() == Some(e)
                });
                arm.map_or_else(
                    || Cell::figure("–"),
                    |arm| part_figure(p, &arm.name, with_interval),
                )
            }));
            t.push(Row::new(cells));
        }
    }
    t
}

/// A part's figure for the arm named `arm`, with its interval when `with_interval`, and
/// ▲/▼ when the arm is significantly better/worse than what it is compared with (in a
/// grid, the baseline variant at its endpoint).
fn part_figure(p: &PartFigures, arm: &str, with_interval: bool) -> Cell {
    let Some(v) = p.variant(arm) else {
        return Cell::figure("–");
    };
    // A grid compares the prompts first: an arm's first comparison is on that axis when
    // it has one there.
    let verdict = p
        .comparison(arm)
        .filter(|c| c.family.as_ref().is_none_or(|f| f.axis == Axis::Variants))
        .map(|c| c.verdict);
    let mark = match verdict {
        Some(Verdict::Better) => " ▲",
        Some(Verdict::Worse) => " ▼",
        _ => "",
    };
    Cell::figure(if with_interval {
        format!("{} {}{mark}", pct(v.mean), interval(v.ci_low, v.ci_high))
    } else {
        format!("{}{mark}", pct(v.mean))
    })
}

/// How each replica of a load-balanced endpoint fared.
pub(crate) fn replicas(s: &Summary) -> Table {
    let mut t = Table::new(
        "replicas",
        vec![
            Column::left("base URL"),
            Column::right("attempts"),
            Column::right("answered"),
            Column::right("failed"),
            Column::right("latency p50"),
            Column::right("p90"),
        ],
    );
    for r in &s.replicas {
        t.push(Row::new([
            Cell::text(&r.base_url),
            Cell::figure(r.attempts.to_string()),
            Cell::figure(r.answered.to_string()),
            Cell::figure(r.failed.to_string()),
            Cell::figure(millis(r.latency_ms.p50)),
            Cell::figure(millis(r.latency_ms.p90)),
        ]));
    }
    t
}

/// Two runs side by side, per variant: both figures, the paired difference and its verdict,
/// latency and cost.
pub(crate) fn comparison(c: &RunComparison) -> Table {
    // Partial scores: the figure is the mean score (docs/guide/compare.md).
    let scored = c
        .variants
        .iter()
        .any(|v| v.a.mean_score.is_some() || v.b.mean_score.is_some());
    let measure = if scored { "score" } else { "accuracy" };
    let mut t = Table::new(
        "compare",
        vec![
            Column::left("variant"),
            Column::right(format!("{measure} A")),
            Column::right(format!("{measure} B")),
            Column::right("B − A"),
            Column::right(ci_header(
                c.variants.iter().map(|v| &v.comparison),
                c.confidence,
            )),
            Column::right("p (Holm)").drop(3),
            Column::left("verdict"),
            Column::right("latency p50 A / B").drop(4),
            Column::right("p90 A / B").drop(6).not_in(Syntax::Html),
            Column::right("cost A / B").drop(5),
        ],
    )
    .elsewhere("compare.md has every column");
    for v in &c.variants {
        let [.., difference, ci, p, verdict] = v.comparison.cells();
        let pair = |a: String, b: String| Cell::figure(format!("{a} / {b}"));
        t.push(
            Row::new([
                Cell::text(&v.name),
                Cell::figure(headline(&v.a)),
                Cell::figure(headline(&v.b)),
                Cell::figure(difference),
                Cell::figure(ci),
                Cell::figure(p),
                Cell::figure(verdict)
                    .strong()
                    .class(verdict_class(&v.comparison)),
                pair(millis(v.a.latency_ms.p50), millis(v.b.latency_ms.p50)),
                pair(millis(v.a.latency_ms.p90), millis(v.b.latency_ms.p90)),
                pair(usd(v.a.cost_usd), usd(v.b.cost_usd)),
            ])
            .data("data-variant", &v.name),
        );
    }
    t
}

/// A variant's headline figure and its interval: accuracy, or (partial scores) the mean
/// score.
pub fn headline(v: &crate::summary::VariantSummary) -> String {
    let (x, lo, hi) = v.headline();
    format!("{} {}", pct(x), interval(lo, hi))
}

/// `history`: a row per run and variant, with the step from the run before. `link` gives a
/// run's report page, for HTML.
pub(crate) fn history(h: &History, link: &dyn Fn(&RunRow) -> Option<String>) -> Table {
    let scored = h.runs.iter().any(|r| r.run.scored);
    let mut t = Table::new(
        "history",
        vec![
            // The run id holds its start time: `started` goes first when narrow.
            Column::left("started").drop(7),
            Column::left("run"),
            Column::left("source").drop(3),
            Column::left("model").drop(2),
            Column::left("variant"),
            Column::right(if scored { "mean score" } else { "accuracy" })
                .called(Syntax::Terminal, if scored { "score" } else { "accuracy" }),
            Column::right("interval").called(Syntax::Terminal, "CI"),
            Column::right("n").drop(4),
            Column::right("step"),
            Column::right("cost").drop(5),
            Column::right("p90").drop(6),
        ],
    )
    .elsewhere("--json has every column");
    for r in &h.runs {
        for (k, v) in r.variants.iter().enumerate() {
            let first = k == 0;
            let on_first = |text: String| if first { text } else { String::new() };
            let (x, lo, hi) = v.result.shown();
            let step = v.step.as_ref().map_or("", |s| match s.verdict {
                Verdict::Better => "better",
                Verdict::Worse => "worse",
                _ => "",
            });
            t.push(
                Row::new([
                    Cell::figure(on_first(short_time(&r.run.started_at))),
                    Cell::text(on_first(r.run.run_id.clone()))
                        .class("text")
                        .link(if first { link(&r.run) } else { None })
                        .aside((first && !r.run.complete).then_some("incomplete")),
                    Cell::text(on_first(source_label(&r.run))).class("text"),
                    // A grid's cell says the model that answered it, on every row.
                    Cell::text(match &v.result.model {
                        Some(m) => m.clone(),
                        None => on_first(r.run.model.clone()),
                    })
                    .class("text"),
                    Cell::text(&v.result.variant).class("text"),
                    Cell::figure(pct(x)),
                    Cell::figure(interval(lo, hi)),
                    Cell::figure(v.result.n.to_string()),
                    Cell::figure(step_cell(v.step.as_ref())).class(step),
                    Cell::figure(usd(v.result.cost_usd.or(v.result.spent_usd))),
                    Cell::figure(millis(v.result.latency_p90_ms)),
                ])
                .data("data-run", &r.run.run_id)
                .data("data-variant", &v.result.variant),
            );
        }
    }
    t
}

/// `runs`: one row per stored run, newest last.
pub(crate) fn runs(runs: &[RunRow]) -> Table {
    let mut t = Table::new(
        "runs",
        vec![
            Column::left("started").drop(8),
            Column::left("run"),
            Column::left("bench"),
            Column::left("model").drop(2),
            Column::left("source").drop(3),
            Column::left("kind").drop(4),
            Column::left("status"),
            Column::right("jobs").drop(5),
            Column::right("cost").drop(6),
            Column::left("folder").drop(7),
        ],
    )
    .elsewhere("--json has every column");
    for r in runs {
        let missing = (r.jobs_planned - r.jobs_finished).max(0);
        let status = if r.complete {
            "complete".to_string()
        } else if let Some(s) = &r.stopped {
            format!("stopped: {s}")
        } else if missing > 0 {
            format!("incomplete: {missing} not run, {} failed", r.jobs_failed)
        } else {
            format!("{} failed", r.jobs_failed)
        };
        t.push(
            Row::new([
                Cell::figure(short_time(&r.started_at)),
                Cell::text(&r.run_id),
                Cell::text(&r.bench),
                Cell::text(&r.model),
                Cell::text(source_label(r)),
                Cell::figure(r.kind.to_string()),
                Cell::text(status),
                Cell::figure(format!("{}/{}", r.jobs_finished, r.jobs_planned)),
                Cell::figure(usd(r.cost_usd)),
                Cell::text(&r.folder),
            ])
            .data("data-run", &r.run_id),
        );
    }
    t
}

/// A row per variant of figures (report.html's latency and cost tables).
fn per_variant<'a>(
    id: &'static str,
    columns: Vec<Column>,
    rows: impl Iterator<Item = (&'a str, Vec<String>)>,
) -> Table {
    let mut t = Table::new(id, columns);
    for (name, figures) in rows {
        let mut cells = vec![Cell::text(name)];
        cells.extend(figures.into_iter().map(Cell::figure));
        t.push(Row::new(cells).data("data-variant", name));
    }
    t
}

/// Latency percentiles per variant, from the request being sent.
pub(crate) fn latency(s: &Summary) -> Table {
    let columns = named(&[
        "TTFT p50",
        "p90",
        "p99",
        "end to end p50",
        "p90",
        "p99",
        "output tok/s",
    ]);
    per_variant(
        "latency",
        columns,
        s.variants.iter().map(|v| {
            (
                v.name.as_str(),
                vec![
                    millis(v.ttft_ms.p50),
                    millis(v.ttft_ms.p90),
                    millis(v.ttft_ms.p99),
                    millis(v.latency_ms.p50),
                    millis(v.latency_ms.p90),
                    millis(v.latency_ms.p99),
                    v.output_tokens_per_s
                        .map_or("–".into(), |x| format!("{x:.0}")),
                ],
            )
        }),
    )
}

/// Tokens and what they cost, per variant.
pub(crate) fn tokens_and_cost(s: &Summary) -> Table {
    let (_, per) = s.cost_per_names();
    let columns = named(&["prompt", "completion", "cached", "reasoning", "cost", per]);
    per_variant(
        "cost",
        columns,
        s.variants.iter().map(|v| {
            let est = if v.tokens.estimated { "~" } else { "" };
            (
                v.name.as_str(),
                vec![
                    format!("{est}{}", v.tokens.prompt),
                    format!("{est}{}", v.tokens.completion),
                    v.tokens.cached.to_string(),
                    v.tokens.reasoning.to_string(),
                    usd(v.cost_usd),
                    usd(s.cost_per(v)),
                ],
            )
        }),
    )
}

/// Latency of each variant in A beside B.
pub(crate) fn compare_latency(c: &RunComparison) -> Table {
    let columns = named(&[
        "TTFT p50 A / B",
        "TTFT p90 A / B",
        "end to end p50 A / B",
        "p90 A / B",
        "p99 A / B",
    ]);
    let pair = |a: Option<f64>, b: Option<f64>| format!("{} / {}", millis(a), millis(b));
    per_variant(
        "compare-latency",
        columns,
        c.variants.iter().map(|v| {
            (
                v.name.as_str(),
                vec![
                    pair(v.a.ttft_ms.p50, v.b.ttft_ms.p50),
                    pair(v.a.ttft_ms.p90, v.b.ttft_ms.p90),
                    pair(v.a.latency_ms.p50, v.b.latency_ms.p50),
                    pair(v.a.latency_ms.p90, v.b.latency_ms.p90),
                    pair(v.a.latency_ms.p99, v.b.latency_ms.p99),
                ],
            )
        }),
    )
}

/// Tokens and cost of each variant in A beside B.
pub(crate) fn compare_cost(c: &RunComparison) -> Table {
    let columns = named(&[
        "tokens in A / B",
        "tokens out A / B",
        "cost A / B",
        "spent A / B",
    ]);
    per_variant(
        "compare-cost",
        columns,
        c.variants.iter().map(|v| {
            (
                v.name.as_str(),
                vec![
                    format!("{} / {}", v.a.tokens.prompt, v.b.tokens.prompt),
                    format!("{} / {}", v.a.tokens.completion, v.b.tokens.completion),
                    format!("{} / {}", usd(v.a.cost_usd), usd(v.b.cost_usd)),
                    format!("{} / {}", usd(v.a.spent_usd), usd(v.b.spent_usd)),
                ],
            )
        }),
    )
}

/// Whether each variant's answers changed between A and B, and which cases flipped.
pub(crate) fn compare_outputs(c: &RunComparison) -> Table {
    let columns = named(&["same text", "different text", "fixed in B", "broken in B"]);
    per_variant(
        "compare-outputs",
        columns,
        c.variants.iter().map(|v| {
            let fixed = v.flipped.iter().filter(|f| f.direction == "fixed").count();
            (
                v.name.as_str(),
                vec![
                    v.identical_outputs.to_string(),
                    v.different_outputs.to_string(),
                    fixed.to_string(),
                    (v.flipped.len() - fixed).to_string(),
                ],
            )
        }),
    )
}

/// A column of variant names, then columns of figures.
fn named(figures: &[&str]) -> Vec<Column> {
    std::iter::once(Column::left("variant"))
        .chain(figures.iter().map(|&h| Column::right(h)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Exporter;

    /// The golden run with parts (tests/golden/parts): a `fields` bench of three variants.
    fn with_parts() -> Summary {
        serde_json::from_str(include_str!("../../../../tests/golden/parts/summary.json"))
            .expect("the golden summary reads")
    }

    #[test]
    fn part_names_are_data_and_render_literally() {
        let mut s = with_parts();
        s.parts[0].name = "<b>x</b>|*y* @octocat".into();
        let md = parts(&s).markdown();
        assert!(
            md.contains("| &lt;b&gt;x&lt;/b&gt;\\|\\*y\\* @\u{200b}octocat (accuracy) |"),
            "{md}"
        );
        assert!(!md.contains("<b>"), "{md}");
        let html = parts(&s).html();
        assert!(
            html.contains("data-part=\"&lt;b&gt;x&lt;/b&gt;|*y* @octocat\""),
            "{html}"
        );
        assert!(!html.contains("<b>x"), "{html}");
    }

    #[test]
    fn each_part_says_its_measure_only_when_the_parts_differ() {
        let mut s = with_parts();
        assert!(parts(&s).markdown().starts_with(
            "| part | cases | variant | accuracy or mean score | 95% CI | n | difference | CI (Holm) | p (Holm) | verdict |"
        ));
        s.parts.retain(|p| p.binary);
        let md = parts(&s).markdown();
        assert!(
            md.starts_with("| part | cases | variant | accuracy | 95% CI |"),
            "{md}"
        );
        assert!(
            md.contains("| category | 120 | plain (baseline) | 96.7% |"),
            "{md}"
        );
        assert!(
            md.contains("|  |  | hasty | 81.7% | [73.8, 87.6] | 120 | -15.0 | [-23.7, -5.2] | <0.001 | **worse** |"),
            "{md}"
        );
    }

    #[test]
    fn in_a_grid_each_comparison_is_a_row_saying_what_it_is_against() {
        let mut s = with_parts();
        s.run.endpoints = vec![s.run.provider.clone(), s.run.provider.clone()];
        let part = &mut s.parts[0];
        for (v, name) in part
            .variants
            .iter_mut()
            .zip(["a/plain", "a/careful", "b/plain"])
        {
            v.name = name.into();
        }
        let mut by_model = part.comparisons[1].clone();
        (by_model.variant, by_model.against) = ("b/plain".into(), "a/plain".into());
        part.comparisons[0].variant = "a/careful".into();
        part.comparisons[0].against = "a/plain".into();
        let mut twice = part.comparisons[0].clone();
        twice.against = "b/careful".into();
        part.comparisons = vec![part.comparisons[0].clone(), twice, by_model];
        s.parts.truncate(1);
        let md = parts(&s).markdown();
        let rows: Vec<&str> = md.lines().skip(2).collect();
        assert_eq!(rows.len(), 4, "{md}");
        assert!(
            rows[0].starts_with("| category | 120 | a/plain (baseline) |  | 96.7% |"),
            "{md}"
        );
        assert!(
            rows[1].starts_with("|  |  | a/careful | a/plain | 100.0% |"),
            "{md}"
        );
        assert!(
            rows[2].starts_with("|  |  |  | b/careful |  |  |  | +3.3 |"),
            "{md}"
        );
        assert!(
            rows[3].starts_with("|  |  | b/plain | a/plain | 81.7% |"),
            "{md}"
        );
    }

    #[test]
    fn a_grid_s_parts_in_a_terminal_are_its_variants_by_its_endpoints() {
        use crate::compare::Family;
        let mut s = with_parts();
        s.run.endpoints = vec![s.run.provider.clone(), s.run.provider.clone()];
        for (v, (e, name)) in
            s.variants
                .iter_mut()
                .zip([("a", "plain"), ("a", "careful"), ("b", "plain")])
        {
            (v.endpoint, v.variant, v.name) =
                (Some(e.into()), Some(name.into()), format!("{e}/{name}"));
        }
        s.parts.truncate(1);
        let part = &mut s.parts[0];
        for (v, name) in part
            .variants
            .iter_mut()
            .zip(["a/plain", "a/careful", "b/plain"])
        {
            v.name = name.into();
        }
        let [by_prompt, by_model] = &mut part.comparisons[..] else {
            panic!("two comparisons");
        };
        (by_prompt.variant, by_prompt.against) = ("a/careful".into(), "a/plain".into());
        by_prompt.family = Some(Family::variants_at("a"));
        by_prompt.verdict = Verdict::Better;
        (by_model.variant, by_model.against) = ("b/plain".into(), "a/plain".into());
        by_model.family = Some(Family::endpoints_for("plain"));
        let drawn = parts_grid(&s, false).terminal(None);
        let rows: Vec<Vec<&str>> = drawn
            .lines()
            .filter(|l| l.starts_with('│'))
            .map(|l| {
                l.split(['│', '┆'])
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .collect()
            })
            .collect();
        assert_eq!(rows[0], ["part", "variant", "a", "b"], "{drawn}");
        // The prompt axis is marked; b/plain, worse than a/plain, is on the model axis.
        assert_eq!(rows[1], ["category", "plain", "96.7%", "81.7%"], "{drawn}");
        assert_eq!(rows[2], ["careful", "100.0% ▲", "–"], "{drawn}");
    }

    #[test]
    fn summary_md_has_a_parts_section_that_says_when_its_verdicts_are_descriptions() {
        let mut s = with_parts();
        let md = crate::markdown::Markdown.render(&s).unwrap();
        assert!(
            md.contains("\n### Parts\n\nPer-part figures of the same answers"),
            "{md}"
        );
        assert!(!md.contains("fixed-sample"), "{md}");
        s.sequential = Some(
            serde_json::from_value(serde_json::json!({
                "detect": 5.0, "power": 0.8, "min_cases": 20, "max_cases": 120, "seed": 1,
                "variants": [], "jobs_not_needed": 0
            }))
            .unwrap(),
        );
        let md = crate::markdown::Markdown.render(&s).unwrap();
        assert!(
            md.contains("These part verdicts are fixed-sample tests on the cases measured, descriptions only: when to stop was decided on the whole score."),
            "{md}"
        );
        s.parts.clear();
        let md = crate::markdown::Markdown.render(&s).unwrap();
        assert!(!md.contains("Parts"), "{md}");
    }
}
