//! `label RUN_DIR`: a person scores a random sample of judged answers (seeded; shown without
//! the judge's verdict), or imports labels from a file, into the run folder's
//! `labels.jsonl`; then the reports are rebuilt to show the judge against people.

use std::collections::HashSet;
use std::io::{BufRead, Write};

use anyhow::Context;

use super::finish::in_use;
use super::{Exit, Failure};
use crate::cli::{LabelArgs, ReportArgs};
use crate::error::BeforeSend;
use crate::error::UsageError;
use promptgauge_report::labels::{self, Label};
use promptgauge_runner::RunDir;
use promptgauge_runner::journal::JobRecord;

/// Reads one answer: 1/0, yes/no, a score in [0, 1]; `None` to skip; `Err` to stop.
fn ask(input: &mut dyn BufRead, out: &mut dyn Write) -> std::io::Result<Result<Option<f64>, ()>> {
    loop {
        write!(
            out,
            "Is the answer right? [y]es / [n]o / a score from 0 to 1 / [s]kip / [q]uit: "
        )?;
        out.flush()?;
        let mut line = String::new();
        if input.read_line(&mut line)? == 0 {
            return Ok(Err(()));
        }
        match line.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" | "1" => return Ok(Ok(Some(1.0))),
            "n" | "no" | "0" => return Ok(Ok(Some(0.0))),
            "s" | "skip" | "" => return Ok(Ok(None)),
            "q" | "quit" => return Ok(Err(())),
            other => match other.parse::<f64>() {
                Ok(x) if (0.0..=1.0).contains(&x) => return Ok(Ok(Some(x))),
                _ => writeln!(
                    out,
                    "  `{other}`: answer y, n, a number from 0 to 1, s or q"
                )?,
            },
        }
    }
}

pub fn label(args: &LabelArgs) -> Result<Exit, Failure> {
    let dir = RunDir::at(&args.run);
    let lock = dir.lock().map_err(in_use)?;
    let record = dir
        .read_record()
        .map_err(|e| UsageError(format!("{e:#}")))?;
    let keys = record.plan_keys();
    let mut judged = Vec::new();
    let (_, _) = dir
        .replay(&keys, |r| {
            if !r.judge.is_empty() && r.score.is_some() {
                judged.push(r);
            }
        })
        .with_context(|| format!("cannot read {}", dir.journal_path().display()))
        .before_send()?;
    if judged.is_empty() {
        return Err(UsageError::with_fix(
            format!("{} has no judged answers to label", args.run.display()),
            "label a run whose bench scores with `kind: judge`",
        )
        .into());
    }
    let path = dir.labels();
    let (mut appender, already, note) = labels::Appender::open(&path).map_err(|e| match e {
        labels::AppendError::Unreadable(m) => Failure::from(UsageError::with_fix(
            m,
            "fix or remove the line in labels.jsonl",
        )),
        e => Failure::Input(e.into()),
    })?;
    if let Some(note) = note {
        note!("note: {note}");
    }
    let mut write = |l: &Label| -> Result<(), Failure> { appender.append(l).before_send() };
    let added = match &args.from {
        Some(from) => import_labels(from, &judged, &mut write)?,
        None => ask_labels(
            labels::sample(judged, &already, args.seed, args.sample),
            &mut write,
        )?,
    };
    note!("{added} label(s) added to {}", path.display());
    drop(lock);
    super::report(&ReportArgs {
        run: args.run.clone(),
        jobs_csv: None,
    })
}

/// `--from FILE`: people's labels from a file, every line checked against this run's
/// judged answers before any is written (a bad file adds nothing). How many were added.
fn import_labels(
    from: &std::path::Path,
    judged: &[JobRecord],
    write: &mut dyn FnMut(&Label) -> Result<(), Failure>,
) -> Result<usize, Failure> {
    let mut added = 0usize;
    let known: HashSet<_> = judged.iter().map(JobRecord::key).collect();
    let imported = labels::read_numbered(from).map_err(|m| {
        UsageError::with_fix(
            m,
            "one JSON object per line: {\"case\": \"c-1\", \"variant\": \"plain\", \"repeat\": 0, \"score\": 1}",
        )
    })?;
    // Every line is checked before any is written: a bad file adds nothing.
    for (line, l) in &imported {
        if !known.contains(&l.key()) {
            return Err(UsageError::with_fix(
                format!(
                    "{}:{line}: ({}, {}, repeat {}) is not a judged answer of this run",
                    from.display(),
                    l.case,
                    l.variant,
                    l.repeat
                ),
                "label answers of this run that a judge scored (case id, variant name, repeat from 0); nothing was imported",
            )
            .into());
        }
    }
    for (_, l) in &imported {
        write(l)?;
        added += 1;
    }
    Ok(added)
}

/// The sample of judged answers, asked one by one in the terminal (the judge's verdict not
/// shown). How many were labelled.
fn ask_labels(
    judged: Vec<JobRecord>,
    write: &mut dyn FnMut(&Label) -> Result<(), Failure>,
) -> Result<usize, Failure> {
    let mut added = 0usize;
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut out = std::io::stdout();
    let total = judged.len();
    for (i, r) in judged.iter().enumerate() {
        let shown = format!(
            "\n── {} of {total} ── case {} · variant {} · repeat {}\nQuestion:\n  {}\nExpected:\n  {}\nAnswer:\n  {}\n",
            i + 1,
            r.case_id,
            r.arm(),
            r.repeat,
            labels::question(r).replace('\n', "\n  "),
            r.expected.join("\n  "),
            r.output.replace('\n', "\n  ")
        );
        // The answer is the model's: shown, never obeyed.
        let _ = writeln!(out, "{}", promptgauge_report::terminal_safe(&shown));
        match ask(&mut input, &mut out).before_send()? {
            Ok(Some(score)) => {
                write(&labels::label_of(r, score))?;
                added += 1;
            }
            Ok(None) => {}
            Err(()) => break,
        }
    }
    Ok(added)
}
