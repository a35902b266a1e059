//! The live progress line (`indicatif`): jobs done of total, in flight, retries, 429s,
//! failures, ETA and each variant's running accuracy. It only listens to run events, is
//! hidden when stderr is not a terminal or under CI, and is cleared before the final table.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use promptgauge_runner::{JobStatus, Listener, RunEvent};

pub struct Progress {
    bar: Option<ProgressBar>,
    variants: Vec<String>,
    scores: Vec<(u64, u64)>,
    failed: u64,
    retries: u64,
    throttled: u64,
    /// `--batch`: each batch's last known state and counts (done, failed, total), by name.
    batches: Vec<(String, String, [u64; 3])>,
    in_flight: usize,
    /// `--best`: the decisions as they are reached, and the arms out so far.
    search: Option<(promptgauge_runner::sequential::Decisions, Vec<String>)>,
    /// `--best`: the arms the leader set aside (sent no cases while it leads).
    aside: Vec<String>,
    /// Jobs planned for each arm in this session: an arm out takes what it has left off
    /// the bar's length, so the ETA counts only what will still be sent.
    per_arm: u64,
}

/// A `--best` decision as a line: an arm out, or the answer.
pub fn search_line(d: &promptgauge_runner::sequential::Decided) -> Option<String> {
    let name = crate::visible(&d.variant, 80);
    let unit = if d.unit.is_some() { "groups" } else { "cases" };
    match d.verdict.as_str() {
        "eliminated" => Some(format!(
            "{name} out after {} {unit}: below {}",
            d.cases,
            crate::visible(d.against.as_deref().unwrap_or("another arm"), 80)
        )),
        "best" => Some(format!(
            "{name}: the best, or within ε of it, after {} {unit}",
            d.cases
        )),
        "set_aside" => Some(format!(
            "{name} set aside after {} {unit}: {} leads and is shown no more than ε behind it",
            d.cases,
            crate::visible(d.against.as_deref().unwrap_or("the leader"), 80)
        )),
        "back" => Some(format!(
            "{name} sent cases again after {} {unit}: {} leads now",
            d.cases,
            crate::visible(d.against.as_deref().unwrap_or("another arm"), 80)
        )),
        "one_of" => Some(format!(
            "{name}: one of the arms the bench's {unit} cannot separate, after {}",
            d.cases
        )),
        _ => None,
    }
}

impl Progress {
    /// `enabled` is false when stderr is not a terminal, under CI, or with --quiet.
    pub fn new(total: usize, already_done: usize, variants: Vec<String>, enabled: bool) -> Self {
        let bar = enabled.then(|| {
            let bar = ProgressBar::with_draw_target(
                Some(total as u64),
                ProgressDrawTarget::stderr_with_hz(8),
            );
            let style = ProgressStyle::with_template(
                // `wide_msg` takes what the terminal has left and cuts the rest: one line,
                // never wrapped, at any width.
                "{bar:20.cyan/blue} {pos}/{len} · ETA {eta} · {wide_msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("█▉▊▋▌▍▎▏ ");
            bar.set_style(style);
            bar.set_position(already_done as u64);
            bar
        });
        let variants_len = variants.len();
        Progress {
            bar,
            scores: vec![(0, 0); variants.len()],
            variants,
            failed: 0,
            retries: 0,
            throttled: 0,
            batches: Vec::new(),
            in_flight: 0,
            search: None,
            aside: Vec::new(),
            per_arm: (total.saturating_sub(already_done) / variants_len.max(1)) as u64,
        }
    }

    /// `--best`: says each arm out above the line as it goes, and marks it in the line.
    pub fn follow(&mut self, decisions: promptgauge_runner::sequential::Decisions) {
        self.search = Some((decisions, Vec::new()));
    }

    /// The decisions reached by this event (the journal writes them at the next).
    fn heard_decisions(&mut self) {
        let Some((queue, out)) = &mut self.search else {
            return;
        };
        let new: Vec<promptgauge_runner::sequential::Decided> =
            queue.lock().map(|q| q.clone()).unwrap_or_default();
        for d in &new {
            let Some(bar) = &self.bar else { continue };
            if d.verdict == "set_aside" {
                self.aside.push(d.variant.clone());
            } else if d.verdict == "back" {
                self.aside.retain(|v| *v != d.variant);
            } else if d.verdict == "eliminated" {
                out.push(d.variant.clone());
                // What the arm had left is not sent.
                let heard = self
                    .variants
                    .iter()
                    .position(|v| *v == d.variant)
                    .map_or(0, |i| self.scores[i].1);
                let left = self.per_arm.saturating_sub(heard);
                let length = bar.length().unwrap_or(0);
                bar.set_length(length.saturating_sub(left).max(bar.position()));
            } else if d.verdict == "best" || d.verdict == "one_of" {
                // The answer: only the jobs in flight are left.
                bar.set_length(bar.position() + self.in_flight as u64);
            }
            if let Some(line) = search_line(d) {
                bar.println(line);
            }
        }
    }

    pub(crate) fn update(&mut self, event: &RunEvent<'_>) {
        if let RunEvent::Batch(b) = event {
            let at = match self.batches.iter().position(|(n, ..)| *n == b.name) {
                Some(i) => i,
                None => {
                    self.batches.push((b.name.clone(), String::new(), [0; 3]));
                    self.batches.len() - 1
                }
            };
            let entry = &mut self.batches[at];
            if let Some(status) = &b.status {
                // The provider's word: shown as text, never as terminal control.
                entry.1 = crate::visible(status, 40);
            } else if entry.1.is_empty() {
                entry.1 = "submitted".into();
            }
            if let Some(c) = b.counts {
                entry.2 = c;
            }
            if let Some(bar) = &self.bar {
                bar.set_message(self.message(self.in_flight));
            }
            return;
        }
        let RunEvent::JobFinished {
            record, in_flight, ..
        } = event
        else {
            return;
        };
        self.in_flight = *in_flight;
        self.retries += record.attempts.len().saturating_sub(1) as u64;
        self.throttled += record
            .attempts
            .iter()
            .filter(|a| a.status == Some(429))
            .count() as u64;
        match record.status {
            JobStatus::Failed => self.failed += 1,
            JobStatus::Filtered => {}
            JobStatus::Graded => {
                let name = record.arm();
                let arm = self.variants.iter().position(|v| *v == name);
                if let Some(i) = arm {
                    self.scores[i].1 += 1;
                    self.scores[i].0 += u64::from(record.score() == Some(1.0));
                }
            }
        }
        self.heard_decisions();
        if let Some(bar) = &self.bar {
            bar.inc(1);
            bar.set_message(self.message(*in_flight));
        }
    }

    fn message(&self, in_flight: usize) -> String {
        let accuracy: Vec<String> = self
            .variants
            .iter()
            .zip(&self.scores)
            .filter(|(_, (_, n))| *n > 0)
            .map(|(v, (c, n))| {
                let out = self.search.as_ref().is_some_and(|(_, out)| out.contains(v));
                let mark = if out {
                    " out"
                } else if self.aside.contains(v) {
                    " aside"
                } else {
                    ""
                };
                format!("{v} {:.0}%{mark}", *c as f64 * 100.0 / *n as f64)
            })
            .collect();
        if !self.batches.is_empty() {
            // Batches: how many in each state, and their requests done of all.
            let mut states: Vec<(&str, usize)> = Vec::new();
            let (mut done, mut total) = (0, 0);
            for (_, status, [completed, failed, all]) in &self.batches {
                match states.iter_mut().find(|(s, _)| s == status) {
                    Some((_, n)) => *n += 1,
                    None => states.push((status, 1)),
                }
                done += completed + failed;
                total += all;
            }
            let states: Vec<String> = states.iter().map(|(s, n)| format!("{n} {s}")).collect();
            return format!(
                "batches: {} · {done}/{total} requests done · {} failed · {}",
                states.join(", "),
                self.failed,
                accuracy.join(" ")
            );
        }
        if self.search.is_some() {
            // A search's arms come first: which are out is what a narrow line keeps.
            return format!(
                "{} · {in_flight} in flight · {} retries · {} 429s · {} failed",
                accuracy.join(" "),
                self.retries,
                self.throttled,
                self.failed
            );
        }
        format!(
            "{in_flight} in flight · {} retries · {} 429s · {} failed · {}",
            self.retries,
            self.throttled,
            self.failed,
            accuracy.join(" ")
        )
    }

    /// Removes the line so the final table starts on a clean screen.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Listener for Progress {
    fn on(&mut self, event: &RunEvent<'_>) -> std::io::Result<()> {
        self.update(event);
        Ok(())
    }
}
