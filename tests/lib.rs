//! Helpers shared by the integration tests in `integration/`.

use std::collections::VecDeque;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use arl_core::{FinishReason, Generation, PolicyError, SamplingParams, ScoreParams, Scores};

/// Run `arl ARGS…` in-process; Ok(stdout) or Err(the one-line error a user would see).
pub fn arl(args: &[&str]) -> Result<String, String> {
    arl_status(args).1
}

/// Run `arl ARGS…` in-process: the exit status `arl` would end with, and Ok(stdout) or
/// Err(the error line it would print; clap's usage errors are printed as clap renders them).
pub fn arl_status(args: &[&str]) -> (u8, Result<String, String>) {
    arl_plugins::link();
    let mut out = Vec::new();
    let result = arl::run(std::iter::once("arl").chain(args.iter().copied()), &mut out as &mut dyn Write);
    match result {
        Ok(()) => (0, Ok(String::from_utf8(out).expect("utf-8 output"))),
        Err(e) => {
            let shown = match e.downcast_ref::<clap::Error>() {
                Some(c) => c.to_string(),
                None => arl::message(&e),
            };
            (arl::exit_code(&e), Err(shown))
        }
    }
}

/// The real Qwen3 tokenizer files, fetched by `scripts/setup/qwen3-tokenizer.sh`
/// (`ARL_QWEN3_TOKENIZER_DIR` overrides the place).
pub fn qwen3_tokenizer_dir() -> std::path::PathBuf {
    let dir = match std::env::var_os("ARL_QWEN3_TOKENIZER_DIR") {
        Some(dir) => std::path::PathBuf::from(dir),
        None => std::path::PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/arl/assets/qwen3-tokenizer"),
    };
    assert!(dir.join("tokenizer.json").is_file(), "no Qwen3 tokenizer in {}; run scripts/setup/qwen3-tokenizer.sh", dir.display());
    dir
}

/// A fresh, empty scratch directory for one test, removed when the test passes (kept when it
/// panics, to look at). Before this, every run left its checkpoints behind: 540 directories,
/// 10 GB of a CI machine's `/tmp`.
pub fn scratch_dir(name: &str) -> ScratchDir {
    let dir = std::env::temp_dir().join(format!("arl-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    ScratchDir(dir)
}

/// See [`scratch_dir`]; derefs to its path.
#[derive(Debug)]
pub struct ScratchDir(std::path::PathBuf);

impl std::ops::Deref for ScratchDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl AsRef<std::path::Path> for ScratchDir {
    fn as_ref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// SmolLM2-135M-Instruct as an HF directory: the GGUF fetched by `scripts/setup/smollm2.sh`,
/// converted on first use into arl's cache (the `smollm2-135m` preset).
/// Resolved once per test binary, so parallel tests never convert at the same time.
pub fn smollm2_dir() -> std::path::PathBuf {
    static DIR: std::sync::OnceLock<Result<std::path::PathBuf, String>> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| match arl_gguf::known::resolve("smollm2-135m") {
        Ok(Some(dir)) => Ok(dir),
        Ok(None) => Err("smollm2-135m is not a known model".into()),
        Err(e) => Err(e.to_string()),
    });
    dir.clone().unwrap_or_else(|e| panic!("{e}"))
}

/// The tiny model, except that scripted turns are forced (their log-probs still the model's,
/// scored at the sampling temperature); every turn it hands out is logged.
pub struct Spy {
    pub inner: arl_qwen3::QwenPolicy,
    pub script: VecDeque<Option<Vec<u32>>>,
    pub log: Arc<Mutex<Vec<Generation>>>,
}

impl arl_core::Policy for Spy {
    fn generate(&mut self, prompts: &[Vec<u32>], params: &SamplingParams) -> Result<Vec<Generation>, PolicyError> {
        assert_eq!((prompts.len(), params.top_k, params.top_p), (1, None, None), "one row, no truncation");
        let out = match self.script.pop_front().flatten() {
            None => self.inner.generate(prompts, params)?,
            Some(ids) => {
                let sequence = [prompts[0].clone(), ids.clone()].concat();
                let positions: Vec<usize> = (prompts[0].len()..sequence.len()).collect();
                let scores = self.inner.score(&[sequence], Some(std::slice::from_ref(&positions)), ScoreParams::at(params.temperature))?;
                let all = scores.logprobs.into_data().to_vec::<f32>().unwrap();
                let sampler_logprobs = positions.iter().map(|&t| all[t]).collect();
                vec![Generation { ids, sampler_logprobs, finish: FinishReason::Stop }]
            }
        };
        self.log.lock().unwrap().extend(out.iter().cloned());
        Ok(out)
    }

    fn score(&self, sequences: &[Vec<u32>], positions: Option<&[Vec<usize>]>, params: ScoreParams) -> Result<Scores, PolicyError> {
        self.inner.score(sequences, positions, params)
    }
}

/// The interpreter and site-packages `scripts/setup/openai.sh` installed.
pub fn openai_sdk() -> (PathBuf, PathBuf) {
    let dir = PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/arl/assets/openai");
    let python = std::fs::read_to_string(dir.join("python")).unwrap_or_default();
    assert!(
        dir.join("site-packages/openai/__init__.py").is_file() && !python.trim().is_empty(),
        "no openai SDK in {}; run scripts/setup/openai.sh",
        dir.display()
    );
    (PathBuf::from(python.trim()), dir.join("site-packages"))
}
