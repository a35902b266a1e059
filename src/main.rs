use std::process::ExitCode;

use clap::Parser;
use promptgauge::cli::{Cli, Command, Env};
use promptgauge::commands;
use promptgauge::error::BeforeSend;

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
    // Commands that send nothing fail before sending: their errors are input errors.
    let nothing_sent = |r: anyhow::Result<promptgauge::Exit>| r.before_send();
    let result = runtime.block_on(async {
        match &cli.command {
            Command::Run(args) => commands::run(args, &env).await,
            Command::Check(args) => nothing_sent(commands::check(args, &env)),
            Command::Compare(args) => nothing_sent(commands::compare_runs(args)),
            Command::Merge(args) => nothing_sent(commands::merge(args)),
            Command::Report(args) => commands::rebuild_report(args),
            Command::Mock(args) => nothing_sent(commands::mock(args).await),
        }
    });
    // Dropping the runtime would wait for tasks stuck on dead sockets; the work is done.
    runtime.shutdown_background();
    match result {
        Ok(exit) => ExitCode::from(exit as u8),
        // The failure's type says whether anything was sent (DESIGN §6).
        Err(failure) => {
            eprintln!("error: {failure}");
            ExitCode::from(failure.exit() as u8)
        }
    }
}
