//! Which interpreter jobs run under. It must be readable and executable by the
//! unprivileged uid jobs drop to, so a pyenv or venv under `/root` will not do.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

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
