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
mod losses;
mod qwen3;
mod registry;
mod test_plugins;
mod tools;
mod trainer;
