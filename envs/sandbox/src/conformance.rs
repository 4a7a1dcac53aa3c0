//! Attacks every [`Sandbox`](arl_core::Sandbox) must contain, written once over a runner of the
//! sandbox under test, as burn's backend test suites are written once over the backend:
//! `rlimit`'s attack suite (`attacks/`) and arl-sandbox-wasm's each call them with their own
//! runner, which also checks what that sandbox promises once a job has ended (nothing of it
//! outlived it). What a sandbox does its own way stays in its own suite.

use arl_core::{JobOutcome, Limits};

/// Runs `code` as a job's `main.py` in the sandbox under test, with the suite's short limits.
pub type Run<'a> = &'a dyn Fn(&str) -> JobOutcome;
/// As [`Run`], under `limits`.
pub type RunWith<'a> = &'a dyn Fn(&str, Limits) -> JobOutcome;

/// A plain job: its exit code, both streams, and the resources it used.
pub fn a_plain_job_runs_and_reports_resources(run: Run<'_>) {
    let out = run("import sys\nprint('hi')\nprint('err', file=sys.stderr)\nsys.exit(3)\n");
    assert_eq!((out.exit_code, out.signal, out.timed_out), (Some(3), None, false), "{out:?}");
    assert_eq!((out.stdout.as_str(), out.stderr.as_str()), ("hi\n", "err\n"));
    assert!(out.max_rss_kb.unwrap() > 0 && out.cpu_ms.is_some());
}

/// Megabytes on both streams: each kept to `output_bytes`, marked truncated, and the job
/// still ends (the sandbox drains what it does not keep).
pub fn flooding_stdout_is_capped_without_deadlock(run_with: RunWith<'_>) {
    let limits = Limits { output_bytes: 4096, ..Limits::default() };
    let out = run_with("import sys\nfor _ in range(2000):\n    sys.stdout.write('x' * 10000)\nsys.stderr.write('e' * 100000)\n", limits);
    assert!(out.success(), "{out:?}");
    assert_eq!((out.stdout.len(), out.stdout_truncated), (4096, true));
    assert_eq!((out.stderr.len(), out.stderr_truncated), (4096, true));
}

/// Output that never ends ends at the wall clock (or the CPU limit), with what was kept.
pub fn an_endless_flood_ends_at_the_timeout(run_with: RunWith<'_>) {
    let limits = Limits { wall_timeout: std::time::Duration::from_millis(800), cpu_seconds: 5, ..Limits::default() };
    let out = run_with("import os\nwhile True:\n    os.write(1, b'y' * 65536)\n", limits);
    assert!(out.timed_out || out.signal.is_some(), "{out:?}");
    assert!(out.stdout_truncated && out.stdout.len() == 64 * 1024);
}

/// No connection to a server on the host's loopback or to anything outside; a sandbox
/// without sockets at all (WASI) fails the import, which counts as refused.
pub fn a_network_connection_is_impossible(run: Run<'_>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let code = format!(
        "try:\n    import socket\nexcept ImportError as e:\n    print('refused import'); print('refused import')\nelse:\n    for addr in [('127.0.0.1', {port}), ('1.1.1.1', 80)]:\n        try:\n            socket.create_connection(addr, timeout=1).close()\n            print('connected', addr)\n        except Exception as e:\n            print('refused', type(e).__name__, getattr(e, 'errno', ''))\n"
    );
    let out = run(&code);
    assert!(!out.stdout.contains("connected"), "{out:?}");
    assert_eq!(out.stdout.lines().filter(|l| l.starts_with("refused")).count(), 2, "{out:?}");
    assert!(listener.accept().is_err(), "the host listener saw a connection");
}

/// Every attack above as a `#[test]` of the calling crate, with `run` ([`Run`]) and `run_with`
/// ([`RunWith`]) the suite's runners: `arl_sandbox::conformance_tests!(run, run_with);`.
#[macro_export]
macro_rules! conformance_tests {
    ($run:path, $run_with:path) => {
        #[test]
        fn conformance_a_plain_job_runs_and_reports_resources() {
            $crate::conformance::a_plain_job_runs_and_reports_resources(&$run);
        }

        #[test]
        fn conformance_flooding_stdout_is_capped_without_deadlock() {
            $crate::conformance::flooding_stdout_is_capped_without_deadlock(&$run_with);
        }

        #[test]
        fn conformance_an_endless_flood_ends_at_the_timeout() {
            $crate::conformance::an_endless_flood_ends_at_the_timeout(&$run_with);
        }

        #[test]
        fn conformance_a_network_connection_is_impossible() {
            $crate::conformance::a_network_connection_is_impossible(&$run);
        }
    };
}
