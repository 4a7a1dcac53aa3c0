//! Finding `python.wasm` and caching its compiled form.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use arl_core::SandboxError;
use sha2::{Digest, Sha256};
use wasmtime::{Engine, Module};

/// The script that fetches the interpreter.
pub const SETUP_SCRIPT: &str = "scripts/setup/python-wasm.sh";

/// Where the setup script puts the interpreter: `$HOME/.cache/arl/assets/python-wasm/python.wasm`.
pub fn default_python_wasm() -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/root"));
    home.join(".cache/arl/assets/python-wasm/python.wasm")
}

/// Read the interpreter, or a one-line error naming the setup script.
pub fn read_wasm(path: &Path) -> Result<Vec<u8>, SandboxError> {
    std::fs::read(path).map_err(|e| {
        SandboxError::Setup(format!("cannot read the WASI CPython {} ({e}); fetch it with `bash {SETUP_SCRIPT}`", path.display()))
    })
}

/// The compiled module: from the cache beside `wasm_path` when one fits this engine,
/// else compiled (slow: Cranelift over ~26 MB) and written to the cache. `hash` is the
/// interpreter's [`wasm_hash`].
pub fn load_module(engine: &Engine, wasm_path: &Path, wasm: &[u8], hash: &str) -> Result<Module, SandboxError> {
    let cache = cache_path(engine, wasm_path, hash);
    if cache.is_file() {
        // SAFETY: the file was written by `Module::serialize` of an engine with the same
        // compatibility hash (it is in the name), in a directory only this user writes;
        // `deserialize_file` still checks the header and refuses a mismatch.
        match unsafe { Module::deserialize_file(engine, &cache) } {
            Ok(module) => return Ok(module),
            Err(e) => eprintln!("warning: sandbox `wasm`: ignoring the compiled cache {}: {e}", cache.display()),
        }
    }
    let module = Module::new(engine, wasm).map_err(|e| SandboxError::Setup(format!("compiling {}: {e}", wasm_path.display())))?;
    if let Ok(bytes) = module.serialize() {
        // Written under a temporary name and renamed, so a concurrent reader never sees half.
        let tmp = cache.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, &cache).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    Ok(module)
}

/// The first 8 bytes of the interpreter's sha256, in hex: what names its caches.
pub fn wasm_hash(wasm: &[u8]) -> String {
    Sha256::digest(wasm).iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// `<dir>/python-<wasm sha256 prefix>-wasmtime-48.0.8-<engine hash>.cwasm`.
fn cache_path(engine: &Engine, wasm_path: &Path, wasm_hash: &str) -> PathBuf {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    let dir = wasm_path.parent().unwrap_or(Path::new("."));
    dir.join(format!("python-{wasm_hash}-wasmtime-{WASMTIME}-{:016x}.cwasm", hasher.finish()))
}

/// The pinned wasmtime (root Cargo.toml).
const WASMTIME: &str = "48.0.8";
