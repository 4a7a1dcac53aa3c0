//! Leaving things behind: files in the host's world-writable directories, a job dir renamed
//! out from under the cleanup, inodes or bytes exhausted for the jobs after it.

use std::path::{Path, PathBuf};

use super::support::{lines, run, sandbox};
use crate::{JOB_INODES, JOB_ROOM_FILES};

/// The host's world-writable directories (sticky or not) under the usual roots, two levels
/// deep: /tmp, /var/tmp, /dev/shm, /run/lock and whatever else this host has.
fn world_writable_host_dirs() -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack: Vec<(PathBuf, u32)> =
        ["/tmp", "/var", "/run", "/dev", "/srv", "/opt", "/home"].iter().map(|r| (PathBuf::from(r), 0)).collect();
    while let Some((dir, depth)) = stack.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&dir) else { continue };
        if !meta.is_dir() {
            continue;
        }
        if std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o002 != 0 {
            found.push(dir.clone());
        }
        if depth < 2
            && let Ok(entries) = std::fs::read_dir(&dir)
        {
            stack.extend(entries.flatten().map(|e| (e.path(), depth + 1)));
        }
    }
    found.sort();
    found
}

fn marker_files(dirs: &[PathBuf], marker: &str) -> Vec<PathBuf> {
    dirs.iter().map(|d| d.join(marker)).filter(|p| p.exists()).collect()
}

#[test]
fn attack_files_left_in_world_writable_host_dirs_never_land() {
    let dirs = world_writable_host_dirs();
    for expected in ["/tmp", "/dev/shm"] {
        assert!(dirs.iter().any(|d| d == Path::new(expected)) || !Path::new(expected).exists(), "{expected} in {dirs:?}");
    }
    let marker = format!("arl-leftover-{}", std::process::id());
    let list: Vec<String> = dirs
        .iter()
        .chain([PathBuf::from("/run/lock"), PathBuf::from("/var/lock"), PathBuf::from("/var/tmp")].iter())
        .map(|d| format!("{:?}", d.display().to_string()))
        .collect();
    let code = format!(
        "import os\nfor d in [{}]:\n    try:\n        with open(os.path.join(d, {marker:?}), 'w') as f:\n            f.write('x')\n        print('wrote', d)\n    except OSError as e:\n        print('refused', d, e.errno)\n",
        list.join(", ")
    );
    let out = run(&code);
    // Writing "into /tmp" lands in the job's own tmpfs; nothing lands on the host.
    let wrote: Vec<&str> = lines(&out).into_iter().filter(|l| l.starts_with("wrote")).collect();
    assert!(wrote.iter().all(|l| *l == "wrote /tmp"), "{out:?}");
    let mut all = dirs.clone();
    all.extend(["/run/lock", "/var/lock", "/var/tmp"].map(PathBuf::from));
    assert_eq!(marker_files(&all, &marker), Vec::<PathBuf>::new(), "files landed on the host");
}

#[test]
fn attack_renaming_the_job_dir_leaves_nothing_on_the_host() {
    let marker = format!("arl-renamed-{}", std::process::id());
    let code = format!(
        "import os\nopen({marker:?}, 'w').write('x')\nfor src, dst in [('/job', '/job2'), ('/job', '/tmp/x'), ('.', '../elsewhere')]:\n    try:\n        os.rename(src, dst)\n        print('renamed', src)\n    except OSError as e:\n        print('refused', src, e.errno)\nos.mkdir('sub')\nos.rename('sub', 'sub2')\nprint('own subdirs rename fine', os.path.isdir('sub2'))\n"
    );
    let out = run(&code);
    assert_eq!(lines(&out).iter().filter(|l| l.starts_with("refused")).count(), 3, "{out:?}");
    assert!(out.stdout.ends_with("own subdirs rename fine True\n"), "{out:?}");
    // The job dir never was on the host: nothing with the marker is under the temp dir.
    let tmp = std::env::temp_dir();
    let mut hits = Vec::new();
    for entry in std::fs::read_dir(&tmp).unwrap().flatten() {
        if entry.path().join(&marker).exists() || entry.file_name().to_string_lossy().contains(&marker) {
            hits.push(entry.path());
        }
    }
    assert!(hits.is_empty(), "{hits:?}");
}

#[test]
fn attack_exhausting_inodes_hits_the_jobs_own_limit_and_the_next_job_runs() {
    let out = run(
        "import os\nn = 0\ntry:\n    while n < 100000:\n        open(f'f{n}', 'w').close()\n        n += 1\nexcept OSError as e:\n    print('stopped', e.errno)\nprint(n)\n",
    );
    let l = lines(&out);
    assert_eq!(l.first().copied(), Some(format!("stopped {}", libc::ENOSPC).as_str()), "{out:?}");
    let made: u64 = l[1].parse().unwrap();
    assert!((JOB_INODES - 16..=JOB_INODES + 16).contains(&made), "{made} files before ENOSPC");
    assert_eq!(run("print('next')\n").stdout, "next\n");
}

#[test]
fn attack_filling_the_job_dir_hits_its_byte_limit() {
    // Many files each under the 1 MiB per-file limit still stop at the tmpfs size.
    let out = run(
        "import os\nn = 0\ntry:\n    while n < 200:\n        open(f'f{n}', 'wb').write(b'x' * (900 << 10))\n        n += 1\nexcept OSError as e:\n    print('stopped', e.errno)\nprint(n)\n",
    );
    let l = lines(&out);
    assert_eq!(l.first().copied(), Some(format!("stopped {}", libc::ENOSPC).as_str()), "{out:?}");
    let made: u64 = l[1].parse().unwrap();
    let room = JOB_ROOM_FILES * 1024 / 900;
    assert!(made <= room + 1 && made >= room - 2, "{made} files of 900 KiB (room for ≈{room})");
    assert!(sandbox().root_binds().iter().all(|b| !b.starts_with("/job")));
}
