//! A read-only temp dir at start-up: `wasm` (whose job dirs live there) refuses in one line
//! naming the fix; `rlimit` (whose job dirs are tmpfs mounts of their own) does not care.

use std::process::Command;

use arl_core::{Job, JobFile, Sandbox};

use crate::{WasmSandbox, WasmSettings};

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn a_read_only_temp_dir_is_one_line_for_wasm_and_no_matter_for_rlimit() {
    if !is_root() {
        arl_core::testing::skip("mounting a read-only /tmp takes root");
        return;
    }
    // A private mount namespace where /tmp is a read-only tmpfs, then this binary's inner test.
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", "mount -t tmpfs -o ro tmpfs /tmp && exec \"$0\" \"$@\""])
        .arg(&exe)
        .args(["--exact", "attacks::startup::with_a_read_only_tmp", "--include-ignored", "--nocapture"])
        .env("TMPDIR", "/tmp")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("{text}");
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
}

#[test]
#[ignore = "run by a_read_only_temp_dir_is_one_line_for_wasm_and_no_matter_for_rlimit, under a read-only /tmp"]
fn with_a_read_only_tmp() {
    assert!(std::fs::create_dir(std::env::temp_dir().join("probe")).is_err(), "/tmp is read-only here");
    let err = WasmSandbox::new(WasmSettings::default()).err().expect("no job dirs, no sandbox").to_string();
    eprintln!("the one line: {err}");
    assert!(!err.contains('\n') && err.contains("TMPDIR") && err.contains("Read-only file system"), "{err}");
    let rlimit = arl_sandbox::RlimitSandbox::new(arl_sandbox::RlimitSettings::default()).unwrap();
    let out = rlimit.run(&Job::python("main.py", vec![JobFile { path: "main.py".into(), contents: "print('fine')\n".into() }])).unwrap();
    assert_eq!(out.stdout, "fine\n", "{out:?}");
}
