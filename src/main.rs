use std::process::ExitCode;

use clap::Parser;
use promptgauge::cli::{Cli, Command, Env};
use promptgauge::commands;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let env = Env::capture();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(async {
        match &cli.command {
            Command::Run(args) => commands::run(args, &env).await,
            Command::Check(args) => commands::check(args, &env),
            Command::Compare(args) => commands::compare_runs(args),
            Command::Merge(args) => commands::merge(args),
            Command::Report(args) => commands::rebuild_report(args),
            Command::Mock(args) => commands::mock(args).await,
        }
    });
    // Dropping the runtime would wait for tasks stuck on dead sockets; the work is done.
    runtime.shutdown_background();
    match result {
        Ok(exit) => ExitCode::from(exit as u8),
        // Errors surface before or outside a run (bad input, bad flags, unwritable folders):
        // nothing was sent, so they are all usage errors.
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(promptgauge::Exit::Input as u8)
        }
    }
}
