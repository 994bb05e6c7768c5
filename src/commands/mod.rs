//! The commands, each a walk down the pipeline:
//! build -> instrument -> run (a host) -> symbolize (inside instrument) -> profile -> report.
//!
//! `pipeline` holds the steps every command that runs a program shares (prepare and run in
//! the chosen host, decode, compensate, write the profile and the views); `test` is `test`
//! and `bench`, `run` is `run`, and `files` the commands that work on files alone
//! (`instrument`, `report`, `diff`).

mod files;
mod pipeline;
mod run;
mod test;

use crate::build::Mode;
use crate::cli::{Cli, Command};
use crate::emscripten::Driver;
use crate::error::Error;
use crate::status::Status;

/// Runs the command `cli` names.
pub fn run(cli: Cli) -> Result<(), Error> {
    let ui = cli.command.ui();
    let status = Status::new(ui.color, ui.quiet);
    match cli.command {
        Command::Test(args) => test::test(*args, Mode::Test, status),
        Command::Bench(args) => test::test(*args, Mode::Bench, status),
        Command::Run(args) => run::run(args, status),
        Command::Instrument(args) => files::instrument(args, status),
        Command::Report(args) => files::report(args, status),
        Command::Diff(args) => files::diff(args),
        Command::Annotate(args) => files::annotate(args),
        Command::Emcc(args) => pipeline::exit_with(crate::emcc::run(Driver::Cc, &args.args)?),
        Command::Emxx(args) => pipeline::exit_with(crate::emcc::run(Driver::Cxx, &args.args)?),
    }
}
