//! Reaching the host: the checkout, the running binary (which embeds the task bank), other
//! processes, files of other users, inherited descriptors.

use super::support::{lines, run};

/// A Python literal of `s`.
fn py(s: &str) -> String {
    format!("{s:?}")
}

#[test]
fn attack_the_checkout_and_the_running_binary_do_not_exist() {
    // The paths an attacker would try first: the trainer's executable and working directory,
    // found through /proc/<ppid>/ on the old sandbox, and the task bank in the checkout.
    let exe = std::env::current_exe().unwrap().display().to_string();
    let cwd = std::env::current_dir().unwrap().display().to_string();
    let bank = concat!(env!("CARGO_MANIFEST_DIR"), "/../tasks/bank/minmax.txt");
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let code = format!(
        "import os\nfor p in [{}, {}, {}, {}, '/proc/0/cmdline', '/proc/2', '/proc/self/cwd/..', '/work', '/root', '/home', '/etc/passwd', '/usr/local']:\n    try:\n        os.stat(p)\n        print('exists', p)\n    except OSError as e:\n        print('absent', e.errno)\nprint(os.readlink('/proc/1/exe'), open('/proc/1/cmdline').read().split(chr(0))[:2])\nprint(sorted(os.listdir('/')))\n",
        py(&exe),
        py(&cwd),
        py(bank),
        py(&home)
    );
    let out = run(&code);
    let l = lines(&out);
    assert_eq!(l.len(), 14, "{out:?}");
    // /proc/self/cwd/.. is the job's own root; every other path is absent (PID 0 is the
    // parent, outside the namespace; PID 2 would be a neighbour).
    for (i, line) in l[..12].iter().enumerate() {
        if i == 6 {
            assert_eq!(*line, "exists /proc/self/cwd/..", "{out:?}");
        } else {
            assert!(line.starts_with("absent"), "path #{i}: {out:?}");
        }
    }
    assert!(l[12].starts_with("/usr/bin/python3") && l[12].contains("['/usr/bin/python3', '-I']"), "PID 1 is the job: {out:?}");
    let top: Vec<&str> = l[13].trim_matches(['[', ']']).split(", ").map(|s| s.trim_matches('\'')).collect();
    for name in ["dev", "job", "proc", "tmp", "usr"] {
        assert!(top.contains(&name), "{name}: {out:?}");
    }
    // `opt` (the read-only pytest) and `repo` (a symlink to `/job/repo`) come with the shell.
    let allowed = ["bin", "dev", "etc", "job", "lib", "lib32", "lib64", "libx32", "opt", "proc", "repo", "sbin", "tmp", "usr"];
    assert!(top.iter().all(|t| allowed.contains(t)), "the whole root: {out:?}");
}

#[test]
fn attack_no_host_process_is_visible() {
    let out = run(
        "import os\npids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\nprint(pids)\nprint([open(f'/proc/{p}/cmdline').read().split(chr(0))[0] for p in pids])\nprint(all(l.endswith(':/') for l in open('/proc/self/cgroup').read().split()))\n",
    );
    let l = lines(&out);
    assert_eq!(l.first().copied(), Some("[1]"), "only the job itself: {out:?}");
    assert_eq!(l.get(1).copied(), Some("['/usr/bin/python3']"), "{out:?}");
    assert_eq!(l.get(2).copied(), Some("True"), "a cgroup namespace hides the host's cgroup path: {out:?}");
}

#[test]
fn attack_the_filesystem_holds_only_the_interpreter_and_it_is_read_only() {
    // Walk the whole root but /proc and /job: every file is one the interpreter needs (under
    // a bind the sandbox planned), or one of the three devices. Only /job is writable.
    let binds: Vec<String> = super::support::sandbox().root_binds().iter().map(|p| p.display().to_string()).collect();
    let code = format!(
        "import os\nbinds = {binds:?}\nn = 0\nfor d, dirs, files in os.walk('/'):\n    if d == '/':\n        dirs[:] = [x for x in dirs if x not in ('proc', 'job', 'tmp')]\n    for f in files:\n        r = os.path.realpath(os.path.join(d, f))\n        if not os.path.exists(r):\n            continue\n        n += 1\n        if r not in ('/dev/null', '/dev/zero', '/dev/urandom') and not any(r == b or r.startswith(b + '/') for b in binds):\n            print('stray', r)\nprint('files', n)\nfor p in ['/', '/usr', '/usr/bin', '/usr/lib', '/etc', '/dev', '/proc', '/job', '/tmp']:\n    try:\n        open(os.path.join(p, 'probe'), 'w').close()\n        print('writable', p)\n    except OSError:\n        pass\n"
    );
    let out = super::support::run_with(&code, arl_core::Limits { cpu_seconds: 5, ..arl_core::Limits::default() });
    let strays: Vec<&str> = lines(&out).into_iter().filter(|l| l.starts_with("stray ")).collect();
    assert!(strays.is_empty(), "files that are not the interpreter's (binds {binds:?}): {strays:?}");
    let files: usize = lines(&out).iter().find_map(|l| l.strip_prefix("files ")).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(files > 100, "the standard library is there: {out:?}");
    let writable: Vec<&str> = lines(&out).into_iter().filter_map(|l| l.strip_prefix("writable ")).collect();
    assert_eq!(writable, ["/job", "/tmp"], "{out:?}");
}

#[test]
fn attack_a_root_only_host_file_is_not_there() {
    let dir = std::env::temp_dir().join(format!("arl-secret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "TOP-SECRET").unwrap();
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let code = format!(
        "try:\n    print(open({}).read())\nexcept OSError as e:\n    print('refused', e.errno)\n",
        py(&secret.display().to_string())
    );
    let out = run(&code);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(out.stdout, "refused 2\n", "{out:?}");
}

#[test]
fn attack_no_inherited_descriptor_leads_outside() {
    // A directory descriptor of the host would let a job fchdir out of its root.
    let _held = std::fs::File::open(env!("CARGO_MANIFEST_DIR")).unwrap();
    let out = run("import os\nprint(sorted(os.listdir('/proc/self/fd')))\n");
    // 0–2, plus the descriptor listdir itself opened.
    assert_eq!(out.stdout, "['0', '1', '2', '3']\n", "{out:?}");
}
