//! A sandbox that cannot be set up says so at start-up, in one line naming the cause and the
//! fix — never a silent weaker mode.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use super::support::is_root;
use crate::{RlimitSandbox, RlimitSettings};

fn one_line(e: impl std::fmt::Display) -> String {
    let text = e.to_string();
    assert!(!text.contains('\n'), "not one line: {text}");
    text
}

#[test]
fn a_missing_interpreter_is_one_line_naming_the_fix() {
    let settings = RlimitSettings { python: Some("/nonexistent/python3".into()), ..RlimitSettings::default() };
    let err = one_line(RlimitSandbox::new(settings).err().expect("no interpreter there"));
    assert!(err.contains("/nonexistent/python3") && err.contains("scripts/setup/python3.sh"), "{err}");
}

#[test]
fn an_extra_bind_that_is_missing_or_reserved_is_one_line() {
    for (bind, says) in [("/nonexistent/bash", "No such file"), ("/tmp", "the sandbox's own"), ("bin/bash", "absolute")] {
        let settings = RlimitSettings { binds: vec![PathBuf::from(bind)], ..RlimitSettings::default() };
        let err = one_line(RlimitSandbox::new(settings).err().expect("refused"));
        assert!(err.contains(says), "{bind}: {err}");
    }
}

#[test]
fn an_extra_bind_appears_read_only_in_the_root() {
    // What issue #18 needs for bash: one more entry in the list of read-only binds.
    let Some(sh) = ["/bin/sh", "/usr/bin/sh"].into_iter().find(|p| std::path::Path::new(p).exists()) else { return };
    let settings = RlimitSettings { binds: vec![PathBuf::from(sh)], shell: false, ..RlimitSettings::default() };
    let sandbox = RlimitSandbox::new(settings).unwrap();
    let job = arl_core::Job::python(
        "main.py",
        vec![arl_core::JobFile {
            path: "main.py".into(),
            contents: format!("import os\nprint(os.path.exists({sh:?}), os.access({sh:?}, os.W_OK), os.path.exists('/bin/ls'))\n"),
        }],
    );
    let out = arl_core::Sandbox::run(&sandbox, &job).unwrap();
    assert_eq!(out.stdout, "True False False\n", "{out:?}");
}

/// Run `test` (an ignored test of this binary) as `nobody` in a user namespace whose
/// `user.max_user_namespaces` is 0: a kernel that refuses this user new user namespaces.
fn run_without_user_namespaces(test: &str) -> std::process::Output {
    let dir = std::env::temp_dir().join(format!("arl-no-userns-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let exe = dir.join("attacks");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    // The child enters a user namespace; the parent (root) maps uids 0–65535 into it; the
    // child, root there, sets the limit to 0, becomes nobody, and runs the test.
    let helper = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
ready_r, ready_w = os.pipe()
go_r, go_w = os.pipe()
pid = os.fork()
if pid == 0:
    if libc.unshare(0x10000000) != 0:
        os._exit(90)
    os.write(ready_w, b"x")
    os.read(go_r, 1)
    with open("/proc/sys/user/max_user_namespaces", "w") as f:
        f.write("0")
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)
    os.execv(sys.argv[1], sys.argv[1:])
os.read(ready_r, 1)
for name in ("uid_map", "gid_map"):
    with open(f"/proc/{pid}/{name}", "w") as f:
        f.write("0 0 65536")
os.write(go_w, b"x")
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"#;
    let out = Command::new("/usr/bin/python3")
        .args(["-c", helper])
        .arg(&exe)
        .args(["--exact", test, "--include-ignored", "--nocapture"])
        .current_dir(&dir)
        .env_clear()
        .env("HOME", &dir)
        .env("PATH", "/usr/bin:/bin")
        .process_group(0)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    out
}

#[test]
fn a_kernel_that_refuses_user_namespaces_is_one_line_suggesting_wasm() {
    if !is_root() {
        arl_core::testing::skip("making a kernel refuse user namespaces takes root");
        return;
    }
    let out = run_without_user_namespaces("attacks::startup::without_user_namespaces_the_sandbox_refuses_to_start");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("{text}");
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
}

#[test]
#[ignore = "run by a_kernel_that_refuses_user_namespaces_is_one_line_suggesting_wasm, as nobody"]
fn without_user_namespaces_the_sandbox_refuses_to_start() {
    assert!(!is_root());
    let err = one_line(RlimitSandbox::new(RlimitSettings::default()).err().expect("no user namespaces, no sandbox"));
    eprintln!("the one line: {err}");
    assert!(err.contains("user namespace") && err.contains("--sandbox wasm"), "{err}");
    assert!(err.contains("clone into new namespaces"), "names what failed: {err}");
}

/// Graded code (a job that asks for no process) keeps the plain root even when the sandbox
/// has a shell root: no bash, no pytest, no `/repo`. A job that asks for processes gets them.
#[test]
fn only_jobs_that_ask_for_processes_get_the_shell_root() {
    let _serial = super::support::SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let sandbox = RlimitSandbox::new(RlimitSettings::default()).unwrap();
    let Some(shell) = arl_core::Sandbox::shell(&sandbox).cloned() else { return };
    let code = "import os\nprint([os.path.lexists(p) for p in ['/usr/bin/bash', '/bin/bash', '/repo', '/opt']])\n\
                try:\n    os.fork() or os._exit(0)\n    print('forked')\nexcept OSError as e:\n    print('no fork', e.errno)\n";
    let job = |processes| arl_core::Job {
        limits: arl_core::Limits { processes, ..arl_core::Limits::default() },
        ..arl_core::Job::python("main.py", vec![arl_core::JobFile { path: "main.py".into(), contents: code.into() }])
    };
    let plain = arl_core::Sandbox::run(&sandbox, &job(0)).unwrap();
    assert_eq!(plain.stdout, "[False, False, False, False]\nno fork 11\n", "{plain:?}");
    let shelled = arl_core::Sandbox::run(&sandbox, &job(4)).unwrap();
    // `/opt` holds the pytest of `scripts/setup/pytest.sh`, where this user has one.
    let opt = if shell.python_path.is_empty() { "False" } else { "True" };
    assert_eq!(shelled.stdout, format!("[True, True, True, {opt}]\nforked\n"), "{shelled:?}");
    assert_eq!(shell.repo, "/repo");
}
