//! Paths of the in-memory repository. The model sees it at [`ROOT`] (`/repo`); the
//! [`Workspace`](arl_core::Workspace) keys files by their path relative to it (`fn.py`,
//! `sub/x.py`). Directories exist only as prefixes of file paths.

pub const ROOT: &str = "/repo";

/// A path the tools cannot use, with the message the model sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathError(pub String);

/// Resolve a file tool's `file_path`: it must be absolute and inside `/repo`. Returns the
/// workspace key (`""` for `/repo` itself). `.` and `..` components are resolved.
pub fn resolve_absolute(path: &str) -> Result<String, PathError> {
    if !path.starts_with('/') {
        return Err(PathError(format!(
            "file_path must be an absolute path, not a relative one: use {ROOT}/{}",
            path.trim_start_matches("./")
        )));
    }
    normalize(path).ok_or_else(|| PathError(format!("{path} is outside the repository; files live under {ROOT}/")))
}

/// Resolve a path given to a shell command, relative to the working directory `/repo`.
pub fn resolve_shell(path: &str) -> Result<String, PathError> {
    let absolute = if path.starts_with('/') { path.to_string() } else { format!("{ROOT}/{path}") };
    normalize(&absolute).ok_or_else(|| PathError(format!("{path}: outside the repository ({ROOT})")))
}

/// `/repo/a/../b.py` → `b.py`; `None` when the path leaves `/repo`.
fn normalize(absolute: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for part in absolute.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    if parts.first() != Some(&"repo") {
        return None;
    }
    Some(parts[1..].join("/"))
}

/// The path the model sees for a workspace key.
pub fn display(key: &str) -> String {
    if key.is_empty() { ROOT.to_string() } else { format!("{ROOT}/{key}") }
}

/// Whether `key` names a directory of the workspace (a proper prefix of some file's key).
pub fn is_dir<'a>(files: impl IntoIterator<Item = &'a String>, key: &str) -> bool {
    if key.is_empty() {
        return true;
    }
    let prefix = format!("{key}/");
    files.into_iter().any(|f| f.starts_with(&prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_paths_resolve_inside_the_repository_only() {
        assert_eq!(resolve_absolute("/repo/f.py"), Ok("f.py".into()));
        assert_eq!(resolve_absolute("/repo/./sub/../f.py"), Ok("f.py".into()));
        assert_eq!(resolve_absolute("/repo"), Ok("".into()));
        assert!(resolve_absolute("f.py").unwrap_err().0.contains("use /repo/f.py"));
        assert!(resolve_absolute("/etc/passwd").unwrap_err().0.contains("outside the repository"));
        assert!(resolve_absolute("/repo/../etc/passwd").is_err());
        assert!(resolve_absolute("/repository/f.py").is_err());
    }

    #[test]
    fn shell_paths_are_relative_to_the_repository() {
        assert_eq!(resolve_shell("f.py"), Ok("f.py".into()));
        assert_eq!(resolve_shell("./sub/f.py"), Ok("sub/f.py".into()));
        assert_eq!(resolve_shell("."), Ok("".into()));
        assert_eq!(resolve_shell("/repo/f.py"), Ok("f.py".into()));
        assert!(resolve_shell("../x").is_err());
    }
}
