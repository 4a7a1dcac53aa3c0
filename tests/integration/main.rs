//! The workspace's one integration-test binary. Modules by area; helpers in `../lib.rs`.

mod chat;
mod cli;
mod config;
mod crosscheck;
mod losses;
mod envs;
mod qwen3;
mod registry;
mod test_plugins;
mod trainer;
mod tools;
