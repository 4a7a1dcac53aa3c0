//! Which interpreter jobs run under, and what of the host it needs in the job's root.
//!
//! The interpreter must be readable and executable by the unprivileged uid jobs drop to, so
//! a pyenv or venv under `/root` will not do. What it needs is found by running it once on
//! the host (our script, not a job's): its `sys.path` (the standard library, `lib-dynload`),
//! and every file it maps after importing each of its extension modules (shared libraries,
//! the locale it loads). Those, its ELF loader and `/etc/ld.so.cache` are the root.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// System interpreters, in order of preference.
pub const CANDIDATES: [&str; 3] = ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"];

/// The first candidate that exists and is world-executable, or a one-line error naming the fix.
pub fn find_python() -> Result<PathBuf, String> {
    for candidate in CANDIDATES {
        let path = Path::new(candidate);
        if let Ok(meta) = std::fs::metadata(path)
            && meta.is_file()
            && meta.permissions().mode() & 0o001 != 0
        {
            return Ok(path.to_path_buf());
        }
    }
    Err(format!(
        "no system python3 readable by an unprivileged user (looked at {}); install one with `apt-get install -y python3` (scripts/setup/python3.sh)",
        CANDIDATES.join(", ")
    ))
}

/// Runs on the host, once: prints `path\t<sys.path entry>` and `map\t<mapped file>` lines.
const DISCOVER: &str = r#"
import os, sys
from importlib.machinery import EXTENSION_SUFFIXES
for p in sys.path:
    print("path\t" + p)
for d in sys.path:
    if os.path.isdir(d):
        for name in sorted(os.listdir(d)):
            if name.endswith(tuple(EXTENSION_SUFFIXES)):
                try:
                    __import__(name.split(".")[0])
                except BaseException:
                    pass
with open("/proc/self/maps") as f:
    for line in f:
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/") and not parts[5].rstrip().endswith("(deleted)"):
            print("map\t" + parts[5].rstrip("\n"))
"#;

/// The host paths the interpreter needs: its own path, its ELF loader, `sys.path`, what it
/// maps (with the symlinks in the same directories that name those files, as the loader
/// looks libraries up by soname), and the loader's cache.
pub fn interpreter_binds(python: &Path) -> Result<Vec<PathBuf>, String> {
    let out = Command::new(python)
        .args(["-I", "-S", "-B", "-c", DISCOVER])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| {
            format!(
                "cannot run the interpreter {}: {e}; install python3 (scripts/setup/python3.sh) or point the sandbox at one",
                python.display()
            )
        })?;
    if !out.status.success() {
        return Err(format!("{} failed to describe itself ({}); is it a working CPython 3?", python.display(), out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let real = std::fs::canonicalize(python).map_err(|e| format!("{}: {e}", python.display()))?;
    let mut binds = vec![python.to_path_buf()];
    if let Some(loader) = crate::elf::interpreter(&real)? {
        binds.push(loader);
    }
    let mut mapped = Vec::new();
    for line in text.lines() {
        match line.split_once('\t') {
            Some(("path", p)) if p.starts_with('/') && Path::new(p).exists() => binds.push(PathBuf::from(p)),
            Some(("map", p)) if Path::new(p).is_file() => mapped.push(PathBuf::from(p)),
            _ => {}
        }
    }
    mapped.sort();
    mapped.dedup();
    binds.extend(soname_links(&mapped));
    binds.extend(mapped);
    let cache = Path::new("/etc/ld.so.cache");
    if cache.is_file() {
        binds.push(cache.to_path_buf());
    }
    Ok(binds)
}

/// Symlinks in the directories of `files` that resolve to one of them (`libz.so.1 ->
/// libz.so.1.2.13`).
pub(crate) fn soname_links(files: &[PathBuf]) -> Vec<PathBuf> {
    let wanted: std::collections::HashSet<PathBuf> = files.iter().filter_map(|f| std::fs::canonicalize(f).ok()).collect();
    let mut dirs: Vec<&Path> = files.iter().filter_map(|f| f.parent()).collect();
    dirs.sort();
    dirs.dedup();
    let mut links = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_symlink()) && std::fs::canonicalize(&path).is_ok_and(|r| wanted.contains(&r)) {
                links.push(path);
            }
        }
    }
    links.sort();
    links
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interpreter_needs_its_library_its_loader_and_libc_and_nothing_of_ours() {
        let python = find_python().unwrap();
        let binds = interpreter_binds(&python).unwrap();
        let has = |f: &dyn Fn(&str) -> bool| binds.iter().any(|b| f(&b.to_string_lossy()));
        assert!(has(&|b| b.ends_with("/os.py") || Path::new(b).join("os.py").is_file()), "the standard library: {binds:?}");
        assert!(has(&|b| b.contains("/libc.so")), "libc: {binds:?}");
        assert!(has(&|b| b.contains("ld-linux") || b.contains("ld-musl")), "the loader: {binds:?}");
        let cwd = std::env::current_dir().unwrap();
        let exe = std::env::current_exe().unwrap();
        assert!(binds.iter().all(|b| !cwd.starts_with(b) && !exe.starts_with(b)), "{binds:?}");
    }
}
