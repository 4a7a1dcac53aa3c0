use std::process::ExitCode;

fn main() -> ExitCode {
    arl_plugins::link();
    let mut stdout = std::io::stdout().lock();
    match arl_cli::run(std::env::args_os(), &mut stdout) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => arl_cli::report(&err),
    }
}
