use std::process::ExitCode;

use clap::Parser;
use promptgauge::app::{self, Env};
use promptgauge::cli::{Cli, Command};

fn main() -> ExitCode {
    // Started by promptgauge to watch a program it runs (a tool, an MCP server, a scorer):
    // that alone, never a command.
    if let Some(exit) = promptgauge::process::watchdog() {
        return exit;
    }
    promptgauge::memory::map_large_blocks();
    promptgauge::process::watch_children();
    let mut cli = Cli::parse();
    let env = Env::capture();
    // What the flags leave to the environment (`--shard auto`), before anything runs.
    match app::resolve_shard(&mut cli, &env) {
        Ok(said) => {
            for s in said {
                eprintln!("{}", promptgauge::report::terminal_safe(&s));
            }
        }
        Err(e) => {
            let failure = promptgauge::error::Failure::from(e);
            eprintln!(
                "error: {}",
                promptgauge::report::terminal_safe(&failure.to_string())
            );
            return ExitCode::from(failure.exit() as u8);
        }
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    // A file-size limit (`ulimit -f`) would kill the process with SIGXFSZ mid-write, with no
    // report and no resume hint. Caught, the write fails with EFBIG instead, handled as a
    // full disk is (exit 3, what fits written, the resume command).
    #[cfg(unix)]
    runtime.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let _ = signal(SignalKind::from_raw(libc::SIGXFSZ));
    });
    let result = runtime.block_on(async {
        match &cli.command {
            Command::Init(args) => app::init(args),
            Command::Import(args) => app::import(args),
            Command::ImportResults(args) => app::import_results(args, &env).await,
            Command::Run(args) => app::run(args, &env).await,
            Command::Check(args) => app::check(args, &env).await,
            Command::Plan(args) => app::plan(args),
            Command::Compare(args) => app::compare(args, &env).await,
            Command::Merge(args) => app::merge(args, &env).await,
            Command::Report(args) => app::report(args),
            Command::Label(args) => app::label(args),
            Command::Mock(args) => app::mock(args).await,
            Command::History(args) => app::history(args, &env).await,
            Command::Runs(args) => app::runs(args, &env).await,
            Command::Index(args) => app::index(args, &env).await,
            Command::View(args) => app::view(args, &env).await,
            Command::Schema(args) => app::schema(args),
            Command::Completions(args) => app::completions(args),
            Command::Man(args) => app::man(args),
        }
    });
    // Dropping the runtime would wait for tasks stuck on dead sockets; the work is done.
    runtime.shutdown_background();
    match result {
        Ok(exit) => ExitCode::from(exit as u8),
        // The failure's type says whether anything was sent (docs/guide/resume.md, "Exit codes").
        Err(failure) => {
            // A failure may quote a server: shown, never obeyed.
            eprintln!(
                "error: {}",
                promptgauge::report::terminal_safe(&failure.to_string())
            );
            ExitCode::from(failure.exit() as u8)
        }
    }
}
