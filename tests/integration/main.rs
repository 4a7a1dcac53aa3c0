//! The workspace's one integration-test binary. Modules by area; helpers in `../lib.rs`.

mod answer_key;
mod bad_input;
mod bash_fidelity;
mod chat;
mod cli;
mod config;
mod crosscheck;
mod dataset;
mod envs;
mod fuzz;
mod gguf;
mod help;
mod lora;
mod losses;
mod new_env;
mod own_loop;
mod process_env;
mod qwen3;
mod registry;
mod replay;
mod report;
mod sft;
mod test_plugins;
mod tools;
mod trainer;
mod transcripts;
