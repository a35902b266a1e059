//! `completions` and `man`: the shell's completion script and the manual pages, built from
//! the same definitions as `--help` ([`crate::cli::Cli`]), so neither can fall behind a flag.

use std::path::Path;

use anyhow::Context;
use clap::CommandFactory;

use super::{Exit, Failure, print_verbatim};
use crate::cli::{Cli, CompletionsArgs, ManArgs};
use crate::error::BeforeSend;

/// The name every script and page is written for: the binary's.
const BIN: &str = "promptgauge";

/// `completions SHELL`: prints the shell's completion script.
pub fn completions(args: &CompletionsArgs) -> Result<Exit, Failure> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), BIN, &mut script);
    print_verbatim(&script)?;
    Ok(Exit::Success)
}

/// `man [--out DIR]`: prints promptgauge(1), or writes every command's page into DIR.
pub fn man(args: &ManArgs) -> Result<Exit, Failure> {
    match &args.out {
        None => print_verbatim(&page(Cli::command())?)?,
        Some(dir) => {
            let written = write_pages(dir)?;
            note!("wrote {written} manual pages into {}", dir.display());
        }
    }
    Ok(Exit::Success)
}

/// One command's page, as roff.
fn page(cmd: clap::Command) -> Result<Vec<u8>, Failure> {
    let mut roff = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut roff)
        .context("cannot render the manual page")
        .before_send()?;
    Ok(roff)
}

/// Writes promptgauge.1 and promptgauge-COMMAND.1 for each command into `dir`; returns how
/// many pages it wrote.
fn write_pages(dir: &Path) -> Result<usize, Failure> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create {}", dir.display()))
        .before_send()?;
    // Built once, so each command's page names it `promptgauge-run`, as `man` looks it up.
    let mut top = Cli::command().disable_help_subcommand(true);
    top.build();
    let mut pages = vec![(format!("{BIN}.1"), page(top.clone())?)];
    for sub in top.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_display_name().unwrap_or(sub.get_name());
        pages.push((format!("{name}.1"), page(sub.clone())?));
    }
    for (name, roff) in &pages {
        let path = dir.join(name);
        promptgauge_base::files::write_atomically(&path, roff)
            .with_context(|| format!("cannot write {}", path.display()))
            .before_send()?;
    }
    Ok(pages.len())
}
