//! Stamps the converter with a hash of its own source (`ARL_GGUF_CONVERTER`), so that a
//! conversion cached by an older build is redone rather than trusted (arl_gguf::known).

fn main() {
    println!("cargo:rerun-if-changed=src");
    let mut paths: Vec<_> = std::fs::read_dir("src").expect("src/").map(|e| e.expect("entry").path()).collect();
    paths.sort();
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for path in paths {
        for b in path.file_name().unwrap().as_encoded_bytes().iter().chain(&std::fs::read(&path).expect("source file")) {
            hash = (hash ^ *b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    println!("cargo:rustc-env=ARL_GGUF_CONVERTER={hash:016x}");
}
