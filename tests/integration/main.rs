//! The workspace's one integration-test binary. Modules by area; helpers in `../lib.rs`.

mod answer_key;
mod bad_input;
mod chat;
mod cli;
mod config;
mod crosscheck;
mod envs;
mod fuzz;
mod gguf;
mod help;
mod lm_head;
mod losses;
mod qwen3;
mod registry;
mod sampler;
mod test_plugins;
mod tools;
mod trainer;
