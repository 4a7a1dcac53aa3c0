//! The attack suite: each test is one thing a policy (or a bug) might do from inside a job.
//! Every one must be contained, and none may hang. Forged *result* lines are the grader's
//! business and are tested in `arl-tasks` (grade.rs).

use std::sync::OnceLock;
use std::time::Duration;

use arl_core::{Job, JobFile, JobOutcome, Limits, Sandbox};

use crate::{RlimitSandbox, RlimitSettings};

fn sandbox() -> &'static RlimitSandbox {
    static SANDBOX: OnceLock<RlimitSandbox> = OnceLock::new();
    SANDBOX.get_or_init(|| RlimitSandbox::new(RlimitSettings::default()).expect("sandbox starts"))
}

fn run_with(code: &str, limits: Limits) -> JobOutcome {
    let job = Job { limits, ..Job::python("main.py", vec![JobFile { path: "main.py".into(), contents: code.into() }]) };
    sandbox().run(&job).expect("the sandbox runs the job")
}

/// Short limits so the suite stays quick: 3 s wall, 1 s CPU.
fn run(code: &str) -> JobOutcome {
    run_with(code, Limits { wall_timeout: Duration::from_secs(3), cpu_seconds: 1, ..Limits::default() })
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

#[test]
fn a_plain_job_runs_and_reports_resources() {
    let out = run("import sys\nprint('hi')\nprint('err', file=sys.stderr)\nsys.exit(3)\n");
    assert_eq!((out.exit_code, out.signal, out.timed_out), (Some(3), None, false), "{out:?}");
    assert_eq!((out.stdout.as_str(), out.stderr.as_str()), ("hi\n", "err\n"));
    assert!(out.max_rss_kb.unwrap() > 0 && out.cpu_ms.is_some());
}

#[test]
fn stdin_reaches_the_job_and_files_sit_beside_it() {
    let job = Job {
        stdin: Some("41".into()),
        ..Job::python(
            "main.py",
            vec![
                JobFile { path: "main.py".into(), contents: "import os, sys\nsys.path.insert(0, os.getcwd())  # -I keeps the script's directory off sys.path\nimport helper\nprint(helper.inc(int(input())))\n".into() },
                JobFile { path: "helper.py".into(), contents: "def inc(x):\n    return x + 1\n".into() },
            ],
        )
    };
    let out = sandbox().run(&job).unwrap();
    assert_eq!(out.stdout, "42\n", "{out:?}");
}

#[test]
fn the_job_runs_unprivileged_in_its_own_directory_which_is_removed() {
    let out = run("import os\nprint(os.getuid(), os.getgid(), os.getcwd() == os.environ['HOME'])\nprint(os.getcwd())\n");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{out:?}");
    let ids: Vec<&str> = lines[0].split(' ').collect();
    if is_root() {
        assert_ne!(ids[0], "0", "dropped root");
        assert_ne!(ids[1], "0");
    }
    assert_eq!(ids[2], "True");
    assert!(!std::path::Path::new(lines[1]).exists(), "temp dir {} left behind", lines[1]);
}

#[test]
fn attack_fork_is_refused() {
    let out = run("import os\ntry:\n    pid = os.fork()\n    print('forked', pid)\nexcept OSError as e:\n    print('refused', e.errno)\n");
    assert!(out.stdout.starts_with("refused"), "{out:?}");
}

#[test]
fn attack_a_ten_billion_element_list_hits_the_memory_limit() {
    let out = run("x = [0] * 10**10\nprint('allocated')\n");
    assert!(!out.stdout.contains("allocated"), "{out:?}");
    assert!(out.stderr.contains("MemoryError"), "{out:?}");
}

#[test]
fn attack_an_infinite_loop_hits_the_cpu_limit() {
    let out = run("while True:\n    pass\n");
    assert!(!out.success(), "{out:?}");
    assert!(out.signal == Some(libc::SIGXCPU) || out.signal == Some(libc::SIGKILL), "{out:?}");
    assert!(!out.timed_out, "the CPU limit (1 s) fires before the wall clock (3 s): {out:?}");
}

#[test]
fn attack_sleeping_past_the_timeout_is_killed() {
    let limits = Limits { wall_timeout: Duration::from_millis(700), ..Limits::default() };
    let out = run_with("import time\ntime.sleep(60)\nprint('woke')\n", limits);
    assert!(out.timed_out && out.signal == Some(libc::SIGKILL), "{out:?}");
    assert!(out.stdout.is_empty());
    assert!(out.wall_ms < 5_000, "killed promptly, took {} ms", out.wall_ms);
}

#[test]
fn attack_a_large_file_is_capped_at_the_file_size_limit() {
    let code = "import os\ntry:\n    with open('big', 'wb') as f:\n        f.write(b'x' * (8 << 20))\nexcept OSError as e:\n    print('refused', e.errno)\nprint(os.path.getsize('big'))\n";
    let out = run(code);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines.first().is_some_and(|l| l.starts_with("refused")), "{out:?}");
    assert!(lines[1].parse::<u64>().unwrap() <= 1 << 20, "{out:?}");
}

#[test]
fn attack_a_network_connection_is_impossible() {
    // A server on the host's loopback: the job must not reach it (nor anything else).
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let code = format!(
        "import socket\nfor addr in [('127.0.0.1', {port}), ('1.1.1.1', 80)]:\n    try:\n        socket.create_connection(addr, timeout=1).close()\n        print('connected', addr)\n    except OSError as e:\n        print('refused', e.errno)\n"
    );
    let out = run(&code);
    if sandbox().net_isolation().starts_with("none") {
        eprintln!("skipping: this kernel refused a network namespace");
        return;
    }
    assert!(!out.stdout.contains("connected"), "{out:?}");
    assert_eq!(out.stdout.lines().filter(|l| l.starts_with("refused")).count(), 2, "{out:?}");
    assert!(listener.accept().is_err(), "the host listener saw a connection");
}

#[test]
fn attack_the_parents_environment_is_out_of_reach() {
    let code = "import os\nprint(sorted(os.environ))\ntry:\n    print(open(f'/proc/{os.getppid()}/environ', 'rb').read()[:40])\nexcept OSError as e:\n    print('refused', e.errno)\n";
    let out = run(code);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines[0] == "['HOME', 'LANG', 'PATH']" || lines[0] == "['HOME', 'LANG', 'LC_CTYPE', 'PATH']", "{out:?}");
    if is_root() {
        assert!(lines[1].starts_with("refused"), "{out:?}");
    }
}

#[test]
fn attack_a_root_only_file_outside_the_directory_is_unreadable() {
    if !is_root() {
        eprintln!("skipping: not root, so no uid drop to test");
        return;
    }
    let dir = std::env::temp_dir().join(format!("arl-secret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "TOP-SECRET").unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let code =
        format!("try:\n    print(open({:?}).read())\nexcept OSError as e:\n    print('refused', e.errno)\n", secret.display().to_string());
    let out = run(&code);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(!out.stdout.contains("TOP-SECRET") && out.stdout.starts_with("refused"), "{out:?}");
}

#[test]
fn attack_flooding_stdout_is_capped_without_deadlock() {
    let limits = Limits { output_bytes: 4096, ..Limits::default() };
    let out = run_with("import sys\nfor _ in range(2000):\n    sys.stdout.write('x' * 10000)\nsys.stderr.write('e' * 100000)\n", limits);
    assert!(out.success(), "{out:?}");
    assert_eq!((out.stdout.len(), out.stdout_truncated), (4096, true));
    assert_eq!((out.stderr.len(), out.stderr_truncated), (4096, true));
}

#[test]
fn attack_an_endless_flood_ends_at_the_timeout() {
    let limits = Limits { wall_timeout: Duration::from_millis(800), cpu_seconds: 5, ..Limits::default() };
    let out = run_with("import os\nwhile True:\n    os.write(1, b'y' * 65536)\n", limits);
    assert!(out.timed_out || out.signal.is_some(), "{out:?}");
    assert!(out.stdout_truncated && out.stdout.len() == 64 * 1024);
}

/// Without root there is no uid drop, and a job could signal every process of the user
/// (the test runner included): those attacks only run as root, as on CI.
fn skip_unless_root(what: &str) -> bool {
    if !is_root() {
        eprintln!("skipping {what}: not root, so jobs keep our uid and could signal us");
    }
    !is_root()
}

#[test]
fn attack_signalling_the_parent_is_refused() {
    if skip_unless_root("the signal attack") {
        return;
    }
    let code = "import os, signal\nfor pid in [os.getppid(), 1]:\n    try:\n        os.kill(pid, signal.SIGKILL)\n        print('sent', pid)\n    except OSError as e:\n        print('refused', e.errno)\n";
    let out = run(code);
    assert_eq!(out.stdout.lines().filter(|l| l.starts_with("refused")).count(), 2, "{out:?}");
    // And we are still here: a job cannot take the trainer down.
}

#[test]
fn attack_killing_every_process_it_can_reach_spares_other_jobs() {
    // kill(-1) reaches every process of the caller's uid; each job has a uid of its own, so a
    // job running alongside (and the trainer) is untouched.
    if skip_unless_root("kill(-1)") {
        return;
    }
    std::thread::scope(|scope| {
        let neighbour = scope.spawn(|| run("import time\ntime.sleep(0.6)\nprint('fine')\n"));
        std::thread::sleep(Duration::from_millis(100));
        let out = run("import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('done')\n");
        assert!(out.stdout == "done\n" || out.signal == Some(libc::SIGKILL), "{out:?}");
        let neighbour = neighbour.join().unwrap();
        assert_eq!(neighbour.stdout, "fine\n", "{neighbour:?}");
    });
}
