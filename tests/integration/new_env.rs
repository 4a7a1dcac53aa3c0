//! `arl new env`: what it writes, and what it refuses (the crate is built and trained a step by
//! `scripts/out-of-tree-check.sh`, which CI runs after the tests).

use arl_tests::{arl, arl_status, scratch_dir};

#[test]
fn new_env_writes_a_crate_against_this_checkout() {
    let root = scratch_dir("new-env");
    let dir = root.join("my-env");
    let out = arl(&["new", "env", "my-env", "--out", dir.to_str().unwrap()]).unwrap();
    assert!(out.contains("binary `my-env-arl`"), "{out}");
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let checkout = std::fs::canonicalize(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).unwrap();
    assert!(manifest.contains(&format!("arl = {{ path = \"{}/apps/arl\" }}", checkout.display())), "{manifest}");
    assert!(manifest.contains("[profile.dev.package.arl-core]"), "arl's crates keep their own profile");
    let doc: toml::Table = manifest.parse().unwrap();
    assert_eq!(doc["bin"][0]["name"].as_str(), Some("my-env-arl"));
    // arl's patched upstream crates, so the plugin's binary runs the same burn as arl's.
    let ours: toml::Table = std::fs::read_to_string(checkout.join("Cargo.toml")).unwrap().parse().unwrap();
    let patches = ours["patch"]["crates-io"].as_table().unwrap();
    assert!(patches.contains_key("burn-flex") && patches.contains_key("burn-autodiff"), "{patches:?}");
    for (name, spec) in patches {
        let theirs = doc["patch"]["crates-io"][name]["path"].as_str().unwrap_or_else(|| panic!("{name} not patched: {manifest}"));
        assert_eq!(theirs, checkout.join(spec["path"].as_str().unwrap()).to_str().unwrap());
        assert!(std::path::Path::new(theirs).join("Cargo.toml").is_file(), "{theirs}");
    }
    assert!(std::fs::read_to_string(dir.join("src/main.rs")).unwrap().contains("use my_env as _;"));
    assert!(std::fs::read_to_string(dir.join("src/lib.rs")).unwrap().contains("name: \"my-env\""));
    assert_eq!(std::fs::read(dir.join("Cargo.lock")).unwrap(), std::fs::read(checkout.join("Cargo.lock")).unwrap());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn new_env_refuses_bad_names_and_places() {
    let root = scratch_dir("new-env-bad");
    std::fs::write(root.join("taken"), "x").unwrap();
    let root_s = root.to_str().unwrap();
    let cases = [
        (vec!["new", "env", "My_Env"], "`My_Env` is not a crate name"),
        (vec!["new", "env", "ok", "--out", root_s], "exists and is not empty"),
        (vec!["new", "env", "ok", "--arl", "/no/such"], "--arl /no/such: no such directory"),
        (vec!["new", "env", "ok", "--arl", root_s], "not an arl checkout"),
    ];
    for (args, says) in cases {
        let (code, result) = arl_status(&args);
        let err = result.expect_err("must fail");
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(says) && err.lines().count() == 1, "{err} (want {says})");
    }
    std::fs::remove_dir_all(&root).unwrap();
}
