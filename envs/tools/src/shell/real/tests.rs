//! `Bash` as real bash in the rlimit sandbox.

use serde_json::json;

use super::{MAX_FILES, parse};
use crate::counters as c;
use crate::testing::{Repo, failed, ok};

const SRC: &str = "/repo/count_positive.py";

#[test]
fn bash_is_a_real_shell_at_repo() {
    let mut repo = Repo::real();
    assert_eq!(ok(repo.bash("pwd")), "/repo\n");
    assert_eq!(ok(repo.bash("echo -n hi")), "hi");
    assert_eq!(ok(repo.bash("ls")), "count_positive.py\ntest_count_positive.py\n");
    assert_eq!(ok(repo.bash("grep -n 'def count_positive(' count_positive.py")), "1:def count_positive(values):\n");
    assert_eq!(ok(repo.bash("cat count_positive.py | head -n 1 | wc -c")), "28\n");
    assert_eq!(ok(repo.bash("X=3; echo $((X + 1)) $(echo sub) 2>/dev/null || echo no")), "4 sub\n");
    assert_eq!(ok(repo.bash("sed -n '5p' count_positive.py")), "        if v >= 0:\n");
    assert_eq!(ok(repo.bash("python --version")), "Python 3.11.2\n".replace("3.11.2", &python_version()));
    assert_eq!(ok(repo.bash("echo err >&2; false")), "err\nExit code 1");
    assert_eq!(ok(repo.bash("nosuchprogram")), "bash: line 1: nosuchprogram: command not found\nExit code 127");
    assert!(failed(repo.bash("   ")).contains("empty command"));
    assert_eq!(repo.counter(c::BASH_CALLS), 11);
    assert_eq!(repo.counter(c::BASH_UNSUPPORTED), 0);
}

fn python_version() -> String {
    let out = std::process::Command::new("/usr/bin/python3").arg("--version").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().trim_start_matches("Python ").to_string()
}

#[test]
fn real_pytest_runs_with_its_own_output() {
    let mut repo = Repo::real();
    assert!(
        ok(repo.bash("pytest -q"))
            .starts_with(".                                                                        [100%]\n1 passed in ")
    );
    let failing = "from count_positive import count_positive\n\ndef test_zero():\n    assert count_positive([0]) == 0\n";
    ok(repo.call("Write", json!({"file_path": "/repo/test_zero.py", "content": failing})));
    let text = ok(repo.bash("pytest -q"));
    assert!(text.contains("FAILED test_zero.py::test_zero - assert 1 == 0"), "{text}");
    assert!(
        text.contains("E       assert 1 == 0")
            && text.contains("=================================== FAILURES ==================================="),
        "{text}"
    );
    assert!(text.contains("1 failed, 1 passed in "), "{text}");
    assert!(text.ends_with("Exit code 1"), "{text}");
    let text = ok(repo.bash("python -m pytest -xvs"));
    assert!(text.contains("platform linux -- Python") && text.contains("pytest-9.0.1"), "{text}");
    assert!(text.contains("rootdir: /repo\n"), "{text}");
    assert!(text.contains("!!!!!!!!!!!!!!!!!!!!!!!!!! stopping after 1 failures !!!!!!!!!!!!!!!!!!!!!!!!!!!"), "{text}");
    let param = "import pytest\nfrom count_positive import count_positive\n\n@pytest.mark.parametrize('v,n', [([1], 1), ([0], 0)])\ndef test_p(v, n):\n    assert count_positive(v) == n\n";
    ok(repo.call("Write", json!({"file_path": "/repo/test_param.py", "content": param})));
    let text = ok(repo.bash("pytest test_param.py -q 2>&1 | tail -n 1"));
    assert!(text.starts_with("1 failed, 1 passed in "), "{text}");
    assert_eq!(ok(repo.bash("pytest --version")), "pytest 9.0.1\n");
    assert_eq!(repo.counter(c::TEST_RUNS), 5);
}

#[test]
fn files_the_command_writes_come_back_and_count_as_read() {
    let mut repo = Repo::real();
    assert_eq!(ok(repo.bash("sed -i 's/v >= 0/v > 0/' count_positive.py")), "(no output)");
    assert!(repo.source().contains("if v > 0:"), "{}", repo.source());
    // No Read needed before an Edit of a file the model wrote through the shell.
    ok(repo.call("Edit", json!({"file_path": SRC, "old_string": "count = 0", "new_string": "count = 0  # n"})));
    ok(repo.bash("mkdir -p sub && echo 'x = 1' > sub/new.py && echo more >> sub/new.py"));
    assert_eq!(repo.workspace.files["sub/new.py"], "x = 1\nmore\n");
    assert!(repo.workspace.read.contains("sub/new.py"));
    assert!(ok(repo.bash("pytest -q")).contains("1 passed"));
    ok(repo.bash("rm sub/new.py"));
    assert!(!repo.workspace.files.contains_key("sub/new.py"));
    ok(repo.bash("python -c \"open('gen.txt', 'w').write('made by python\\n')\""));
    assert_eq!(repo.workspace.files["gen.txt"], "made by python\n");
    assert!(!repo.workspace.files.keys().any(|k| k.contains("__pycache__")), "{:?}", repo.workspace.files.keys());
}

#[test]
fn the_working_directory_persists_and_variables_do_not() {
    let mut repo = Repo::real();
    assert_eq!(ok(repo.bash("mkdir sub && cd sub && export X=1 && touch here.txt")), "(no output)");
    assert_eq!(ok(repo.bash("pwd; echo ${X:-unset}; ls")), "/repo/sub\nunset\nhere.txt\n");
    assert_eq!(ok(repo.bash("cd .. && pwd")), "/repo\n");
    assert_eq!(ok(repo.bash("cd /tmp && mkdir -p gone && cd gone")), "(no output)");
    // /tmp is the job's own; the next job has no /tmp/gone, so the shell starts at /repo again.
    assert_eq!(ok(repo.bash("pwd")), "/repo\nShell cwd was reset to /repo\n");
}

#[test]
fn over_the_copy_back_limits_is_an_observation() {
    let mut repo = Repo::real();
    let text = ok(repo.bash("for i in $(seq 1 40); do echo $i > f$i.txt; done"));
    assert!(text.contains("[not copied back to /repo:") && text.contains("at most 32 files"), "{text}");
    assert_eq!(repo.workspace.files.keys().filter(|k| k.starts_with('f')).count(), MAX_FILES);
    let text = ok(repo.bash("head -c 70000 /dev/zero | tr '\\0' a > big.txt; printf '\\xff\\xfe' > bin.dat"));
    assert!(text.contains("big.txt: 70000 bytes") && text.contains("bin.dat: not UTF-8 text"), "{text}");
    assert!(!repo.workspace.files.contains_key("big.txt") && !repo.workspace.files.contains_key("bin.dat"));
    let text = ok(repo.bash("ln -s /etc/hostname link"));
    assert!(text.contains("link: not a regular file"), "{text}");
    // Thousands of files: the report stays small and says how many more there were.
    let text = ok(repo.bash("mkdir many && cd many && seq 1 2000 | xargs touch"));
    assert!(text.contains("(1948 more changed files): not listed"), "{text}");
    assert!(text.len() < 4000, "{}", text.len());
    assert_eq!(repo.counter(c::BASH_NOT_COPIED), 4);
}

#[test]
fn runaway_commands_are_stopped_and_reported() {
    let mut repo = Repo::real();
    // An infinite loop: killed at the call's timeout; what it wrote before still comes back.
    let text = ok(repo.call("Bash", json!({"command": "echo started > note.txt; while true; do :; done", "timeout": 1000})));
    assert!(text.ends_with("Command timed out after 1000 ms\n"), "{text}");
    assert_eq!(repo.workspace.files["note.txt"], "started\n");
    // A fork bomb: the process limit holds it, and the timeout or the leader's exit (which ends
    // the job's PID namespace, and every fork in it) ends it; either way the call returns.
    let t0 = std::time::Instant::now();
    let text = ok(repo.call("Bash", json!({"command": ":(){ :|:& };:", "timeout": 2000})));
    assert!(text.contains("Command timed out after 2000 ms") || text.contains("fork") || text == "(no output)", "{text}");
    assert!(t0.elapsed() < std::time::Duration::from_secs(10), "{:?}", t0.elapsed());
    // A huge write: the file-size limit stops it.
    let text = ok(repo.bash("yes > flood.txt"));
    assert!(text.contains("File size limit exceeded") && text.contains("flood.txt: 1048576 bytes"), "{text}");
    assert!(!repo.workspace.files.contains_key("flood.txt"));
    // An output flood: cut at 30000 characters.
    assert_eq!(ok(repo.bash("yes | head -n 2")), "y\ny\n", "SIGPIPE ends `yes` quietly, as in a terminal");
    let text = ok(repo.bash("yes | head -n 1000000"));
    assert!(text.contains("[output truncated: ") && text.chars().count() < 31_000, "{}", text.len());
    // And the shell still works.
    assert_eq!(ok(repo.bash("echo ok")), "ok\n");
}

/// A Bash call reaches nothing of the host: no file of the checkout or the binary (which
/// hold the bank), only its own processes.
#[test]
fn bash_reaches_nothing_but_its_own_job() {
    let mut repo = Repo::real();
    let text = ok(repo.bash("grep -rl --exclude-dir=proc --exclude-dir=sys count_positive / 2>/dev/null; echo end"));
    for line in text.lines().filter(|l| *l != "end") {
        assert!(line.starts_with("/repo/") || line.starts_with("/job/repo/"), "{text}");
    }
    assert!(text.ends_with("end\n"), "{text}");
    let text = ok(repo.bash("ls /proc | grep -cE '^[0-9]+$'; ls / | tr '\\n' ' '"));
    let procs: usize = text.lines().next().unwrap().parse().unwrap();
    assert!(procs <= 6, "{text}");
    assert!(!text.contains("root ") && !text.contains("work "), "{text}");
    let checkout = std::env::current_dir().unwrap();
    let text = ok(repo.bash(&format!("ls {} 2>&1; cat /proc/1/cmdline | tr '\\0' ' '", checkout.display())));
    assert!(text.contains("No such file or directory") && text.contains("arl_bash.py"), "{text}");
}

#[test]
fn a_garbled_report_brings_nothing_back() {
    assert_eq!(parse("no report"), None);
    assert_eq!(parse("ARL-BASH-REPORT 1\ncwd\t/repo\nfile\tx\t99\nab\nend\n"), None);
    let report = parse("junk\nARL-BASH-REPORT 1\ncwd\t/repo/s\nreset\t\nfile\ta.py\t3\nx\ny\ndeleted\tb.py\nend\n").unwrap();
    assert_eq!(report.files, [("a.py".to_string(), "x\ny".to_string())]);
    assert_eq!((report.cwd.as_str(), report.deleted.len(), report.reset), ("/repo/s", 1, false));
}

/// A report forged by hand can only do what Write can: paths outside /repo, clashes and
/// oversized files are refused (the report's integrity does not rest on this alone: see
/// `the_command_cannot_write_the_runners_report`).
#[test]
fn a_forged_report_cannot_leave_the_repository() {
    let mut repo = Repo::real();
    let report = super::Report {
        cwd: "/repo".into(),
        files: vec![
            ("../../etc/x".into(), "x".into()),
            ("/etc/passwd".into(), "x".into()),
            ("count_positive.py/inner.py".into(), "x".into()),
            ("huge.py".into(), "x".repeat(crate::files::MAX_FILE_BYTES + 1)),
        ],
        ..Default::default()
    };
    let sandbox = repo.sandbox.clone();
    let mut ctx =
        arl_core::ToolContext { task: &repo.task, workspace: &mut repo.workspace, sandbox: sandbox.as_ref(), stats: &mut repo.stats };
    let mut output = String::new();
    super::apply(&mut ctx, report, &mut output);
    assert_eq!(repo.workspace.files.len(), 2, "{output}");
    for note in ["../../etc/x: not a path", "/etc/passwd: not a path", "inner.py: clashes", "huge.py: 65537 bytes"] {
        assert!(output.contains(note), "{note}: {output}");
    }
}

/// Issue #50, hole 7: the command runs as the runner's uid, and took the runner's stderr (the
/// report pipe) with `pidfd_getfd`, or reopened it through /proc/1/fd/2, and wrote the report
/// itself. The runner is not dumpable and the sandbox refuses `pidfd_getfd`: a forged report
/// of an in-repository file never arrives.
#[test]
fn the_command_cannot_write_the_runners_report() {
    let mut repo = Repo::real();
    let forged = "ARL-BASH-REPORT 1\ncwd\t/repo\nreset\t\nfile\tforged.py\t6\nforged\nend\n";
    let text = ok(repo.bash(&format!("printf '{forged}' > /proc/1/fd/2 && echo sent || echo refused")));
    assert!(text.contains("Permission denied") && text.contains("refused"), "{text}");
    let steal = format!(
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\npidfd = libc.syscall({open}, 1, 0)\nfd = libc.syscall({getfd}, pidfd, 2, 0)\nif fd < 0:\n    print('refused', ctypes.get_errno())\nelse:\n    os.write(fd, {forged:?}.encode())\n    print('sent')\n",
        // pidfd_open and pidfd_getfd: 434 and 438 on every architecture.
        open = 434,
        getfd = 438,
    );
    ok(repo.call("Write", json!({"file_path": "/repo/steal.py", "content": steal})));
    let text = ok(repo.bash("python steal.py"));
    assert_eq!(text, "refused 1\n", "EPERM");
    assert!(!repo.workspace.files.contains_key("forged.py"), "{:?}", repo.workspace.files.keys());
}

/// Issue #50, hole 6: the copy-back held each call to 32 files but not the repository to
/// Write's 64: three calls made 98 files. Files the repository has no room for stay behind,
/// named in the observation; deleting makes room again.
#[test]
fn the_copy_back_keeps_the_repository_within_writes_file_limit() {
    let mut repo = Repo::real();
    for round in 0..3 {
        ok(repo.bash(&format!("for i in $(seq 1 30); do echo $i > r{round}_$i.txt; done")));
    }
    assert_eq!(repo.workspace.files.len(), crate::files::MAX_FILES, "{:?}", repo.workspace.files.keys());
    let text = ok(repo.bash("echo x > one_more.txt"));
    assert!(text.contains("one_more.txt: the repository already holds 64 files"), "{text}");
    assert!(!repo.workspace.files.contains_key("one_more.txt"));
    // Write refuses alike, and a deletion makes room for a file in the same call.
    assert!(failed(repo.call("Write", json!({"file_path": "/repo/w.txt", "content": "x"}))).contains("64 files"));
    ok(repo.bash("rm r0_1.txt && echo y > swapped.txt"));
    assert_eq!(repo.workspace.files.get("swapped.txt").map(String::as_str), Some("y\n"));
    assert_eq!(repo.workspace.files.len(), crate::files::MAX_FILES);
}
