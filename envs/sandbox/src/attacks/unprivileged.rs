//! The unprivileged path: run as root (as CI does), this test runs the whole attack suite
//! again as `nobody`, where every job gets a user namespace instead of a uid of its own.
//! (Run as an ordinary user, the suite itself already takes that path.)

use std::os::unix::process::CommandExt;
use std::process::Command;

use super::support::is_root;

const NOBODY: u32 = 65534;

#[test]
fn the_attack_suite_passes_as_an_unprivileged_user_too() {
    if !is_root() {
        arl_core::testing::skip("already unprivileged, and the suite ran this way");
        return;
    }
    // A copy of this test binary that `nobody` may execute, in a directory it may enter.
    let dir = std::env::temp_dir().join(format!("arl-unprivileged-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let exe = dir.join("attacks");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = Command::new(&exe)
        .args(["attacks::", "--skip", "attacks::unprivileged", "--test-threads", "2"])
        .current_dir(&dir)
        .env_clear()
        .env("HOME", &dir)
        .env("PATH", "/usr/bin:/bin")
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the suite failed as nobody:\n{text}");
    let passed: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("test result: ok. ").and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok()))
        .unwrap_or(0);
    assert!(passed >= 20, "only {passed} attack tests ran as nobody:\n{text}");
    assert!(text.contains("a_plain_job_runs_and_reports_resources ... ok"), "{text}");
}
