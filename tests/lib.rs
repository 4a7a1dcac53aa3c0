//! Helpers shared by the integration tests in `integration/`.

use std::io::Write;

/// Run `arl ARGS…` in-process; Ok(stdout) or Err(the one-line error a user would see).
pub fn arl(args: &[&str]) -> Result<String, String> {
    arl_plugins::link();
    let mut out = Vec::new();
    let result = arl_cli::run(std::iter::once("arl").chain(args.iter().copied()), &mut out as &mut dyn Write);
    match result {
        Ok(()) => Ok(String::from_utf8(out).expect("utf-8 output")),
        Err(e) => Err(format!("{e:#}")),
    }
}
