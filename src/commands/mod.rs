//! The commands, each a walk down the pipeline:
//! build -> instrument -> run (a host) -> symbolize (inside instrument) -> profile -> report.
//!
//! `pipeline` holds the steps every command that runs a program shares (prepare and run in
//! the chosen host, decode, compensate, write the profile and the views); `test` is `test`
//! and `bench`, `run` is `run` (and the doc tests' runner), `serve` is `serve`, and `files` the commands that
//! work on files alone (`instrument`, `report`, `annotate`, `diff`). Each takes the plain
//! request its arguments became (`crate::cli::requests`), never clap's types.

mod files;
mod pipeline;
mod run;
#[cfg(unix)]
mod serve;
mod test;

use crate::build::Mode;
use crate::cli::{Cli, Command};
use crate::emscripten::Driver;
use crate::error::Error;

/// Runs the command `cli` names, its arguments turned into a plain request first.
pub fn run(cli: Cli) -> Result<(), Error> {
    let status = cli.command.ui().status();
    match cli.command {
        Command::Test(args) => test::test(args.to_request(Mode::Test), status),
        Command::Bench(args) => test::test(args.to_request(Mode::Bench), status),
        Command::Run(args) => run::run(args.to_request(), status),
        #[cfg(unix)]
        Command::Serve(args) => serve::serve(args.to_request(), status),
        #[cfg(not(unix))]
        Command::Serve(_) => Err(anyhow::anyhow!("`serve` needs a Unix host").into()),
        Command::Instrument(args) => files::instrument(args.to_request(), status),
        Command::Report(args) => files::report(args.to_request(), status),
        Command::Diff(args) => files::diff(args.to_request()),
        Command::Annotate(args) => files::annotate(args.to_request().map_err(anyhow::Error::msg)?),
        Command::Emcc(args) => pipeline::exit_with(crate::emcc::run(Driver::Cc, &args.args)?),
        Command::Emxx(args) => pipeline::exit_with(crate::emcc::run(Driver::Cxx, &args.args)?),
    }
}
