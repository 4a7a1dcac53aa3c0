//! A job's fresh host directory (the guest's `/`), removed on drop.

use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use arl_core::{Job, SandboxError};

pub struct JobDir(pub PathBuf);

impl JobDir {
    pub fn create(job: &Job) -> Result<Self, SandboxError> {
        let mut template = std::env::temp_dir().join("arl-wasm-XXXXXX").into_os_string().into_encoded_bytes();
        template.push(0);
        // SAFETY: `template` is a NUL-terminated buffer that mkdtemp rewrites in place.
        let made = unsafe { libc::mkdtemp(template.as_mut_ptr().cast()) };
        if made.is_null() {
            return Err(SandboxError::io(&format!("mkdtemp in {}", std::env::temp_dir().display()), std::io::Error::last_os_error()));
        }
        template.pop();
        // SAFETY: mkdtemp only replaced the X's with ASCII characters.
        let dir = JobDir(PathBuf::from(unsafe { std::ffi::OsString::from_encoded_bytes_unchecked(template) }));
        let io = |e: std::io::Error| SandboxError::io(&format!("writing the job directory {}", dir.0.display()), e);
        std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o700)).map_err(io)?;
        for file in &job.files {
            let rel = Path::new(&file.path);
            if rel.as_os_str().is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
                return Err(SandboxError::Setup(format!("job file path `{}` must be relative, without `..`", file.path)));
            }
            let target = dir.0.join(rel);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(io)?;
            }
            std::fs::write(&target, &file.contents).map_err(io)?;
        }
        Ok(dir)
    }
}

impl Drop for JobDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
