//! The workspace's one integration-test binary. Modules by area; helpers in `../lib.rs`.

mod chat;
mod cli;
mod config;
mod registry;
mod test_plugins;
