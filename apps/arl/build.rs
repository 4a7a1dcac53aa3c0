// With the `tch` feature, give the binaries (and test binaries) an rpath to libtorch's
// library directory, so they run without LD_LIBRARY_PATH. The directory is the one torch-sys
// builds against: `$LIBTORCH/lib`, or `torch/lib` of the `python3` on PATH
// (LIBTORCH_USE_PYTORCH=1; scripts/with-libtorch.sh sets that up). Shared with tests/build.rs.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
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
