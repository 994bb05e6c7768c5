//! `cargo wasmprof`: the thin entry point; everything lives in the library.

use cargo_wasmprof::{cli::Cli, commands, status};

fn main() {
    let cli = Cli::parse_args(std::env::args_os());
    let code = match commands::run(cli) {
        Ok(()) => 0,
        Err(error) => {
            if !error.is_silent() {
                status::error(&error);
            }
            error.exit_code()
        }
    };
    std::process::exit(code);
}
