//! Pytest's bytecode for the WASI CPython. `scripts/setup/pytest.sh` compiles the packages for
//! the host's CPython (3.11 for `rlimit`), whose `.pyc` files the WASI CPython (3.12) cannot
//! use, and jobs run with `-B`, so without this every `import pytest` compiled pytest, pluggy
//! and their imports from source again: ≈3 s of a job's 5 s of CPU, and, on a loaded host,
//! past the 10 s wall clock. Instead one job per interpreter and install (the first sandbox
//! made after either changes) compiles a copy of the packages in place, beside the original:
//! `<dir>/site-packages`, with `__pycache__/*.cpython-312.pyc` next to each source, and
//! `<dir>/complete` once it is whole. Jobs see that copy read-only at `/opt/arl/site-packages`
//! instead of the original, and run as before (`-B`: they read bytecode, never write it).
//! CPython checks each `.pyc` against its source's size and modification time, so a stale one
//! is ignored, never used. (Not `sys.pycache_prefix`: with it, CPython 3.12's
//! `cache_from_source` raises `IndexError` for a module in `/`, where a job's files are.)

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use arl_core::{Job, JobFile, Limits, PYTEST_AT, SandboxError};

/// The file that marks a finished directory.
const DONE: &str = "complete";

/// The compile job: every module of the packages, bytecode beside its source, errors on stderr.
const COMPILE: &str = "import compileall, sys\nsys.exit(0 if compileall.compile_dir(sys.argv[1], quiet=1) else 1)\n";

/// The compile job's limits: trusted code, but bounded all the same.
const COMPILE_LIMITS: Limits = Limits {
    wall_timeout: Duration::from_secs(600),
    cpu_seconds: 300,
    memory_bytes: 1 << 30,
    file_size_bytes: 1 << 20,
    output_bytes: 64 * 1024,
    processes: 0,
};

/// `<site-packages>/../wasm-pyc-<interpreter hash>-<install time>`: the directory of this
/// install (the modification time of its `pytest/__init__.py`, which `pytest.sh` rewrites)
/// for this interpreter.
pub fn dir_for(site_packages: &Path, wasm_hash: &str) -> PathBuf {
    let installed = std::fs::metadata(site_packages.join("pytest/__init__.py"))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    site_packages.parent().unwrap_or(Path::new(".")).join(format!("wasm-pyc-{wasm_hash}-{installed}"))
}

/// The compiled copy of `site_packages` in `dir` (`<dir>/site-packages`), made first if
/// missing: copied, then compiled by `compile`, which runs the job with the copy preopened
/// read-write at [`PYTEST_AT`]. A failure is a warning and `None`: jobs still run, on the
/// original packages, compiling pytest from source as before.
pub fn ensure(
    dir: &Path,
    site_packages: &Path,
    compile: impl FnOnce(&Job, &Path) -> Result<arl_core::JobOutcome, SandboxError>,
) -> Option<PathBuf> {
    let packages = |d: &Path| d.join("site-packages");
    // One compile per process at a time; the others then find it done. Processes race only
    // to rename their own temporary directory into place.
    static MAKING: Mutex<()> = Mutex::new(());
    let _making = MAKING.lock().unwrap_or_else(|p| p.into_inner());
    if dir.join(DONE).is_file() {
        return Some(packages(dir));
    }
    let warn = |why: String| {
        eprintln!("warning: sandbox `wasm`: no bytecode for pytest ({why}); each pytest run compiles it again (≈3 s)");
        None
    };
    let tmp = dir.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    if let Err(e) = copy_tree(site_packages, &packages(&tmp)) {
        let _ = std::fs::remove_dir_all(&tmp);
        return warn(format!("copying {} into {}: {e}", site_packages.display(), tmp.display()));
    }
    eprintln!("sandbox `wasm`: compiling pytest's bytecode for the WASI CPython into {} (once, ≈9 s)", dir.display());
    let mut job = Job::python("compile.py", vec![JobFile { path: "compile.py".into(), contents: COMPILE.into() }]);
    job.args = vec![PYTEST_AT.into()];
    job.limits = COMPILE_LIMITS;
    let failed = match compile(&job, &packages(&tmp)) {
        Ok(o) if o.exit_code == Some(0) => None,
        Ok(o) => Some(format!("the compile job ended with {:?}/{:?}: {}", o.exit_code, o.signal, o.stderr.lines().last().unwrap_or(""))),
        Err(e) => Some(e.to_string()),
    };
    if let Some(why) = failed {
        let _ = std::fs::remove_dir_all(&tmp);
        return warn(why);
    }
    if let Err(e) = std::fs::write(tmp.join(DONE), "") {
        let _ = std::fs::remove_dir_all(&tmp);
        return warn(format!("writing {}: {e}", tmp.join(DONE).display()));
    }
    // The rename fails where another process finished first: its directory is as good.
    if std::fs::rename(&tmp, dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    if dir.join(DONE).is_file() { Some(packages(dir)) } else { warn(format!("cannot rename it to {}", dir.display())) }
}

/// Copy the files and directories under `from` into a new `to`, but for `__pycache__`
/// directories (symbolic links are skipped too: the packages have none), each writable by this
/// user so that the copy can be compiled and later removed.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() && entry.file_name() == "__pycache__" {
            // The host CPython's bytecode, of no use to this one.
        } else if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::write(&target, std::fs::read(entry.path())?)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arl_core::JobOutcome;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    /// A scratch root holding a read-only `site-packages` (a package, its host bytecode and a
    /// top-level module), and where its compiled copy goes: `(root, site-packages, dir)`.
    fn fixture(name: &str) -> (PathBuf, PathBuf, PathBuf) {
        let root = crate::scratch_dir(&format!("bytecode-{name}"));
        let sp = root.join("site-packages");
        std::fs::create_dir_all(sp.join("pkg/__pycache__")).unwrap();
        std::fs::write(sp.join("pkg/__init__.py"), "x = 1\n").unwrap();
        std::fs::write(sp.join("pkg/__pycache__/__init__.cpython-311.pyc"), "host").unwrap();
        std::fs::write(sp.join("mod.py"), "y = 2\n").unwrap();
        for p in [sp.join("pkg/__init__.py"), sp.join("mod.py")] {
            let mut perms = std::fs::metadata(&p).unwrap().permissions();
            perms.set_readonly(true);
            std::fs::set_permissions(&p, perms).unwrap();
        }
        let dir = root.join("wasm-pyc-x");
        (root, sp, dir)
    }

    #[test]
    fn a_compiled_copy_is_made_once_and_then_reused() {
        let (root, sp, dir) = fixture("once");
        let made = ensure(&dir, &sp, |job, copy| {
            assert_eq!((job.entry.as_str(), job.args.as_slice()), ("compile.py", &[PYTEST_AT.to_string()][..]));
            assert_eq!(entries(copy), ["mod.py", "pkg"]);
            assert_eq!(entries(&copy.join("pkg")), ["__init__.py"], "the host's bytecode is left behind");
            std::fs::create_dir(copy.join("pkg/__pycache__")).unwrap();
            std::fs::write(copy.join("pkg/__pycache__/__init__.cpython-312.pyc"), "code").unwrap();
            Ok(JobOutcome { exit_code: Some(0), ..JobOutcome::default() })
        });
        assert_eq!(made, Some(dir.join("site-packages")));
        assert_eq!(entries(&dir), ["complete", "site-packages"]);
        assert_eq!(std::fs::read_to_string(dir.join("site-packages/mod.py")).unwrap(), "y = 2\n");
        assert_eq!(entries(&root), ["site-packages", "wasm-pyc-x"], "no temporary directory is left");
        let again = ensure(&dir, &sp, |_, _| panic!("a finished directory is not compiled again"));
        assert_eq!(again, Some(dir.join("site-packages")));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_failed_compile_or_copy_leaves_nothing_and_jobs_go_without() {
        let (root, sp, dir) = fixture("failed");
        for outcome in [
            Ok(JobOutcome { exit_code: Some(1), stderr: "SyntaxError".into(), ..JobOutcome::default() }),
            Ok(JobOutcome { timed_out: true, signal: Some(9), ..JobOutcome::default() }),
            Err(SandboxError::Setup("no interpreter".into())),
        ] {
            let made = ensure(&dir, &sp, |_, copy| {
                std::fs::write(copy.join("half.pyc"), "code").unwrap();
                outcome
            });
            assert_eq!(made, None);
            assert_eq!(entries(&root), ["site-packages"]);
        }
        let missing = ensure(&dir, &root.join("nowhere"), |_, _| panic!("nothing to compile"));
        assert_eq!(missing, None);
        assert_eq!(entries(&root), ["site-packages"]);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn another_process_finishing_first_is_used() {
        let (root, sp, dir) = fixture("race");
        let made = ensure(&dir, &sp, |_, copy| {
            // The other process renames its finished directory into place while this one compiles.
            std::fs::create_dir_all(dir.join("site-packages")).unwrap();
            std::fs::write(dir.join("site-packages/theirs.py"), "").unwrap();
            std::fs::write(dir.join(DONE), "").unwrap();
            std::fs::write(copy.join("ours.py"), "").unwrap();
            Ok(JobOutcome { exit_code: Some(0), ..JobOutcome::default() })
        });
        assert_eq!(made, Some(dir.join("site-packages")));
        assert_eq!(entries(&dir.join("site-packages")), ["theirs.py"]);
        assert_eq!(entries(&root), ["site-packages", "wasm-pyc-x"]);
        let _ = std::fs::remove_dir_all(&root);
    }
}
