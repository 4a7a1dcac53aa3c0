//! A real shell in the job's root: `bash`, `sh` and the command-line tools models use
//! ([`TOOLS`]), each with the shared libraries its ELF loader resolves on the host
//! (`LD_TRACE_LOADED_OBJECTS`, what `ldd` does; only for dynamic ELF files, so nothing of
//! the tool itself runs), plus a read-only pytest if `scripts/setup/pytest.sh` installed one.
//! Found once on the host; tools the host lacks are left out (in the job they are
//! `command not found`, as on a machine without them).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Programs put in the job's root when the host has them (in `/usr/bin` or `/bin`).
pub const TOOLS: &[&str] = &[
    "bash",
    "sh",
    "ls",
    "cat",
    "head",
    "tail",
    "grep",
    "egrep",
    "fgrep",
    "sed",
    "awk",
    "find",
    "wc",
    "sort",
    "uniq",
    "cut",
    "tr",
    "diff",
    "cmp",
    "xargs",
    "tee",
    "mkdir",
    "rmdir",
    "rm",
    "cp",
    "mv",
    "touch",
    "ln",
    "chmod",
    "env",
    "true",
    "false",
    "sleep",
    "seq",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "date",
    "stat",
    "printf",
    "echo",
    "expr",
    "timeout",
    "nl",
    "od",
    "tac",
    "comm",
    "paste",
    "fold",
    "md5sum",
    "sha256sum",
    "base64",
    "which",
    "uname",
    "id",
    "du",
    "test",
    "yes",
];

/// Where the job's root has the installed pytest (read-only), and where it is on the host.
pub use arl_core::{PYTEST_AT, pytest_dir};

/// Where the job's `repo/` directory is also seen.
pub const REPO: &str = "/repo";

/// The host paths of the shell and its tools, with their libraries; `None` without bash.
pub fn shell_binds() -> Option<(PathBuf, Vec<PathBuf>)> {
    let find = |name: &str| ["/usr/bin", "/bin"].iter().map(|d| Path::new(d).join(name)).find(|p| p.is_file());
    let bash = find("bash")?;
    let mut binds = Vec::new();
    let mut libs = Vec::new();
    for tool in TOOLS {
        let Some(path) = find(tool) else { continue };
        let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if let Ok(Some(loader)) = crate::elf::interpreter(&real) {
            binds.push(loader);
            libs.extend(libraries(&real));
        }
        binds.push(path);
    }
    // Scripts name `#!/bin/bash` and `#!/bin/sh` (where /bin is a symlink, it comes along).
    binds.extend(["/bin/bash", "/bin/sh"].iter().map(PathBuf::from).filter(|p| p.is_file()));
    libs.sort();
    libs.dedup();
    binds.extend(crate::python::soname_links(&libs));
    binds.extend(libs);
    Some((bash, binds))
}

/// The shared libraries a dynamic ELF executable loads, as its loader resolves them.
fn libraries(exe: &Path) -> Vec<PathBuf> {
    let Ok(out) = Command::new(exe).env_clear().env("LD_TRACE_LOADED_OBJECTS", "1").stdin(Stdio::null()).stderr(Stdio::null()).output()
    else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let path = match line.split_once("=> ") {
                Some((_, rest)) => rest,
                None => line,
            };
            let path = path.split(" (").next()?.trim();
            (path.starts_with('/') && Path::new(path).is_file()).then(|| PathBuf::from(path))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_brings_bash_its_tools_and_their_libraries() {
        let (bash, binds) = shell_binds().expect("bash on the host");
        assert!(bash.ends_with("bash"));
        let has = |f: &dyn Fn(&str) -> bool| binds.iter().any(|b| f(&b.to_string_lossy()));
        assert!(has(&|b| b.ends_with("/grep")) && has(&|b| b.ends_with("/sed")), "{binds:?}");
        assert!(has(&|b| b.contains("/libc.so")), "libc: {binds:?}");
        let cwd = std::env::current_dir().unwrap();
        assert!(binds.iter().all(|b| !cwd.starts_with(b)), "{binds:?}");
    }
}
