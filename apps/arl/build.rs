// 1. Embed the commit this binary is built from (`ARL_GIT_COMMIT`, recorded in results.json),
//    read from the source tree's own git checkout — not from wherever the binary later runs —
//    and rebuilt when HEAD moves. With uncommitted changes to what is compiled (anything
//    tracked but results/ and Markdown), the commit is followed by `-dirty`, so a result
//    never names a commit whose code it did not run.
// 2. With the `tch` feature, give the binaries (and test binaries) an rpath to libtorch's
//    library directory, so they run without LD_LIBRARY_PATH. The directory is the one
//    torch-sys builds against: `$LIBTORCH/lib`, or `torch/lib` of the `python3` on PATH
//    (LIBTORCH_USE_PYTORCH=1; scripts/with-libtorch.sh sets that up). Shared with tests/build.rs.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string()).filter(|s| !s.is_empty())
}

/// Tracked files outside results/ and the Markdown docs that differ from HEAD.
const COMPILED: [&str; 3] = [":(top)", ":(top,exclude)results", ":(top,exclude,glob)**/*.md"];

fn embed_commit() {
    let Some(commit) = git(&["rev-parse", "HEAD"]) else { return };
    let mut status = vec!["status", "--porcelain", "--untracked-files=no", "--"];
    status.extend(COMPILED);
    let dirty = if git(&status).is_some() { "-dirty" } else { "" };
    println!("cargo:rustc-env=ARL_GIT_COMMIT={commit}{dirty}");
    println!(
        "cargo:rustc-env=ARL_VERSION_LINE={} ({}{dirty})",
        std::env::var("CARGO_PKG_VERSION").unwrap_or_default(),
        &commit[..12.min(commit.len())]
    );
    // HEAD itself (a checkout), the branch it points at (a commit) and packed refs.
    let mut watch = vec![git(&["rev-parse", "--path-format=absolute", "--git-path", "HEAD"])];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.push(git(&["rev-parse", "--path-format=absolute", "--git-path", &branch]));
    }
    watch.push(git(&["rev-parse", "--path-format=absolute", "--git-path", "packed-refs"]));
    // The index (a commit or `git add`) and the sources, for `-dirty` (cargo scans a
    // directory's files for changes).
    watch.push(git(&["rev-parse", "--path-format=absolute", "--git-path", "index"]));
    let top = git(&["rev-parse", "--show-toplevel"]);
    for dir in ["apps", "backends", "core", "envs", "examples", "losses", "plugins", "tests", "third_party", "Cargo.toml", "Cargo.lock"] {
        watch.push(top.as_ref().map(|t| format!("{t}/{dir}")));
    }
    // (A path that does not exist would make cargo rerun this script on every build.)
    for path in watch.into_iter().flatten().filter(|p| std::path::Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={path}");
    }
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    embed_commit();
    println!("cargo:rerun-if-env-changed=LIBTORCH");
    println!("cargo:rerun-if-env-changed=LIBTORCH_USE_PYTORCH");
    println!("cargo:rerun-if-env-changed=LIBTORCH_LIB");
    if std::env::var_os("CARGO_FEATURE_TCH").is_none() {
        return;
    }
    let dir = if let Ok(lib) = std::env::var("LIBTORCH_LIB") {
        format!("{lib}/lib")
    } else if let (Ok(root), Err(_)) = (std::env::var("LIBTORCH"), std::env::var("LIBTORCH_USE_PYTORCH")) {
        format!("{root}/lib")
    } else {
        let python = if std::env::var_os("VIRTUAL_ENV").is_some() { "python" } else { "python3" };
        let out = std::process::Command::new(python)
            .args(["-W", "ignore", "-c", "import os, torch; print(os.path.join(os.path.dirname(torch.__file__), 'lib'))"])
            .output();
        match out {
            Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
            _ => {
                println!("cargo:warning=--features tch: no torch found by `{python}`; build through scripts/with-libtorch.sh");
                return;
            }
        }
    };
    println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
}
