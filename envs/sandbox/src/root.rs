//! The job's minimal root, planned once on the host: which directories, symlinks and
//! read-only bind mounts make up the filesystem a job sees.
//!
//! A path to bind is *materialized*: every directory on the way becomes an empty directory
//! of the new root, every symlink on the way is recreated as the same symlink and followed,
//! and the real file or directory at the end is bound read-only at the same path. So
//! `/usr/bin/python3 -> python3.11` gives the root a `/usr/bin` holding exactly `python3`
//! (a symlink) and `python3.11` (a bind of the host's file), and the ELF interpreter
//! `/lib64/ld-linux-x86-64.so.2` brings its chain of symlinks along. Nothing that is not
//! on such a path exists in the root.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Paths the sandbox itself places in the root; a bind may not land on or under them.
pub const RESERVED: [&str; 5] = ["/job", "/tmp", "/proc", "/dev", "/oldroot"];

/// One entry of the root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    Dir,
    Symlink(PathBuf),
    /// A read-only bind of the host's file or directory at the same path.
    Bind {
        dir: bool,
        noexec: bool,
    },
}

/// The planned root: entries by path (a `BTreeMap`, so parents come before children).
#[derive(Clone, Debug, Default)]
pub struct RootPlan {
    entries: BTreeMap<PathBuf, Entry>,
    /// Binds whose host source is elsewhere than their place in the root ([`RootPlan::bind_at`]).
    sources: BTreeMap<PathBuf, PathBuf>,
}

/// Symlink chains longer than this are refused (as the kernel refuses ELOOP).
const MAX_LINKS: usize = 40;

impl RootPlan {
    /// Add `path` (absolute) to the root, following symlinks on the way.
    pub fn bind(&mut self, path: &Path) -> Result<(), String> {
        if !path.is_absolute() {
            return Err(format!("bind path `{}` must be absolute", path.display()));
        }
        self.materialize(path, 0)
    }

    fn materialize(&mut self, path: &Path, links: usize) -> Result<(), String> {
        if links > MAX_LINKS {
            return Err(format!("too many symlinks resolving `{}`", path.display()));
        }
        let parts: Vec<Component> = path.components().collect();
        let mut cur = PathBuf::from("/");
        for (i, part) in parts.iter().enumerate() {
            match part {
                Component::RootDir | Component::CurDir => continue,
                Component::ParentDir => {
                    // `cur` holds no symlinks (they were followed), so `..` is lexical here.
                    cur.pop();
                    continue;
                }
                Component::Prefix(_) => unreachable!("no prefixes on unix"),
                Component::Normal(name) => cur.push(name),
            }
            if self.covered(&cur) {
                return Ok(());
            }
            reserved(&cur)?;
            let meta = std::fs::symlink_metadata(&cur).map_err(|e| format!("cannot bind `{}`: {e}", cur.display()))?;
            let rest: PathBuf = parts[i + 1..].iter().collect();
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&cur).map_err(|e| format!("reading the symlink `{}`: {e}", cur.display()))?;
                self.put(&cur, Entry::Symlink(target.clone()))?;
                let base = cur.parent().unwrap_or(Path::new("/"));
                let resolved = if target.is_absolute() { target } else { base.join(target) };
                return self.materialize(&resolved.join(rest), links + 1);
            }
            let last = parts[i + 1..].iter().all(|c| matches!(c, Component::CurDir));
            if last {
                let entry = Entry::Bind { dir: meta.is_dir(), noexec: noexec(&cur) };
                self.put(&cur, entry)?;
                // Entries planned under a directory bind are hidden by it (and already in it).
                let under: Vec<PathBuf> = self.entries.keys().filter(|p| p.starts_with(&cur) && **p != cur).cloned().collect();
                for p in under {
                    self.entries.remove(&p);
                }
                return Ok(());
            }
            if !meta.is_dir() {
                return Err(format!("cannot bind `{}`: `{}` is not a directory", path.display(), cur.display()));
            }
            if !self.entries.contains_key(&cur) {
                self.entries.insert(cur.clone(), Entry::Dir);
            }
        }
        Ok(())
    }

    /// Whether a directory bind already holds `path`.
    fn covered(&self, path: &Path) -> bool {
        path.ancestors().skip(1).any(|a| matches!(self.entries.get(a), Some(Entry::Bind { dir: true, .. })))
    }

    fn put(&mut self, path: &Path, entry: Entry) -> Result<(), String> {
        match self.entries.get(path) {
            None => {
                self.entries.insert(path.to_path_buf(), entry);
                Ok(())
            }
            Some(old) if *old == entry => Ok(()),
            // A directory planned on the way, then bound itself: the bind wins.
            Some(Entry::Dir) if matches!(entry, Entry::Bind { dir: true, .. }) => {
                self.entries.insert(path.to_path_buf(), entry);
                Ok(())
            }
            Some(old) => Err(format!("`{}` is needed both as {old:?} and as {entry:?}", path.display())),
        }
    }

    /// Bind the host directory `host` (resolved) read-only at `target` in the root, whose
    /// parents become plain directories (so where `host` lies on the host does not show).
    pub fn bind_at(&mut self, host: &Path, target: &Path) -> Result<(), String> {
        let host = std::fs::canonicalize(host).map_err(|e| format!("cannot bind `{}`: {e}", host.display()))?;
        if !host.is_dir() || !target.is_absolute() {
            return Err(format!("cannot bind `{}` at `{}`: needs a directory and an absolute place", host.display(), target.display()));
        }
        reserved(target)?;
        for dir in target.ancestors().skip(1).filter(|a| *a != Path::new("/")).collect::<Vec<_>>().into_iter().rev() {
            if self.covered(dir) {
                return Err(format!("cannot bind at `{}`: `{}` is a bind already", target.display(), dir.display()));
            }
            match self.entries.get(dir) {
                None => {
                    self.entries.insert(dir.to_path_buf(), Entry::Dir);
                }
                Some(Entry::Dir) => {}
                Some(other) => return Err(format!("cannot bind at `{}`: `{}` is {other:?}", target.display(), dir.display())),
            }
        }
        self.put(target, Entry::Bind { dir: true, noexec: noexec(&host) })?;
        self.sources.insert(target.to_path_buf(), host);
        Ok(())
    }

    /// The host path bound at `path` in the root.
    pub fn source<'a>(&'a self, path: &'a Path) -> &'a Path {
        self.sources.get(path).map_or(path, PathBuf::as_path)
    }

    /// Add the symlink `path -> target` (`path` absolute, its parent `/`).
    pub fn symlink(&mut self, path: &Path, target: &Path) -> Result<(), String> {
        reserved(path)?;
        self.put(path, Entry::Symlink(target.to_path_buf()))
    }

    pub fn entries(&self) -> impl Iterator<Item = (&Path, &Entry)> {
        self.entries.iter().map(|(p, e)| (p.as_path(), e))
    }

    /// Host paths bound (for messages and checks).
    pub fn bound(&self) -> impl Iterator<Item = &Path> {
        self.entries.iter().filter(|(_, e)| matches!(e, Entry::Bind { .. })).map(|(p, _)| self.source(p))
    }
}

fn reserved(path: &Path) -> Result<(), String> {
    match RESERVED.iter().find(|r| path.starts_with(r)) {
        Some(r) => Err(format!("cannot bind `{}`: `{r}` is the sandbox's own", path.display())),
        None => Ok(()),
    }
}

/// Whether the host mount holding `path` is `noexec` (a read-only remount must keep that).
fn noexec(path: &Path) -> bool {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: statvfs is plain data, valid all zero.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and an out-parameter of the right type.
    unsafe { libc::statvfs(c.as_ptr(), &mut st) == 0 && st.f_flag & libc::ST_NOEXEC != 0 }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn tree() -> PathBuf {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Not under the temp dir: `/tmp` is reserved in the root.
        let exe = std::env::current_exe().unwrap();
        let d = exe.parent().unwrap().join(format!("arl-rootplan-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("usr/bin")).unwrap();
        std::fs::create_dir_all(d.join("usr/lib/x")).unwrap();
        std::fs::write(d.join("usr/bin/py3.11"), "elf").unwrap();
        symlink("py3.11", d.join("usr/bin/py3")).unwrap();
        std::fs::write(d.join("usr/lib/x/ld.so"), "ld").unwrap();
        symlink("usr/lib", d.join("lib")).unwrap();
        std::fs::create_dir_all(d.join("usr/lib64")).unwrap();
        symlink(d.join("lib/x/ld.so"), d.join("usr/lib64/ld.so")).unwrap();
        symlink("usr/lib64", d.join("lib64")).unwrap();
        d
    }

    fn plan(root: &Path, paths: &[&str]) -> Vec<(String, Entry)> {
        let mut p = RootPlan::default();
        for path in paths {
            p.bind(&root.join(path)).unwrap();
        }
        p.entries()
            .filter(|(k, _)| k.starts_with(root) && *k != root)
            .map(|(k, e)| (k.strip_prefix(root).unwrap().display().to_string(), e.clone()))
            .collect()
    }

    fn bind(dir: bool) -> Entry {
        Entry::Bind { dir, noexec: false }
    }

    #[test]
    fn a_symlinked_binary_brings_its_link_and_its_target_only() {
        let d = tree();
        let got = plan(&d, &["usr/bin/py3"]);
        assert_eq!(
            got,
            [
                ("usr".into(), Entry::Dir),
                ("usr/bin".into(), Entry::Dir),
                ("usr/bin/py3".into(), Entry::Symlink("py3.11".into())),
                ("usr/bin/py3.11".into(), bind(false))
            ]
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_chain_of_absolute_and_relative_links_is_recreated() {
        let d = tree();
        let got = plan(&d, &["lib64/ld.so"]);
        let names: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["lib", "lib64", "usr", "usr/lib", "usr/lib/x", "usr/lib/x/ld.so", "usr/lib64", "usr/lib64/ld.so"]);
        assert_eq!(got[1].1, Entry::Symlink("usr/lib64".into()));
        assert_eq!(got[5].1, bind(false));
    }

    #[test]
    fn a_directory_bind_swallows_what_lies_under_it() {
        let d = tree();
        let got = plan(&d, &["lib64/ld.so", "usr/lib"]);
        assert!(got.contains(&("usr/lib".into(), bind(true))), "{got:?}");
        assert!(!got.iter().any(|(k, _)| k.starts_with("usr/lib/")), "{got:?}");
        // Binding something inside it afterwards adds nothing.
        let mut p = RootPlan::default();
        p.bind(&d.join("usr/lib")).unwrap();
        let before = p.entries().count();
        p.bind(&d.join("usr/lib/x/ld.so")).unwrap();
        assert_eq!(p.entries().count(), before);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn missing_relative_and_reserved_paths_are_refused() {
        let mut p = RootPlan::default();
        assert!(p.bind(Path::new("usr/bin")).unwrap_err().contains("absolute"));
        assert!(p.bind(Path::new("/nonexistent/arl")).unwrap_err().contains("No such file"));
        assert!(p.bind(Path::new("/tmp")).unwrap_err().contains("the sandbox's own"));
        assert!(p.bind(Path::new("/proc/self")).unwrap_err().contains("the sandbox's own"));
    }
}
