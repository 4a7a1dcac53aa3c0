//! Load a model (directory, preset or cached repo id) and save it in the HF layout, so the
//! fixture script can check that HF transformers loads what arl writes:
//!
//!     cargo run -p arl-qwen3 --example resave -- tests/fixtures/qwen3/qwen3-a /tmp/arl-resaved

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [src, dst] = args.as_slice() else {
        return Err("usage: resave SRC DST".into());
    };
    let model = arl_qwen3::load(src, &arl_qwen3::cpu())?;
    model.save_dir(std::path::Path::new(dst))?;
    println!("saved {src} to {dst}");
    Ok(())
}
