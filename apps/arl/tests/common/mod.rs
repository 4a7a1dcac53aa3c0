//! What the child-process tests (`cluster.rs`, `resume.rs`) share: the `test-letters` env and
//! `arl` run as a child of the test binary.
//!
//! Each `arl` is a child process: the test binary re-executed to run only its `child` test,
//! which calls [`child`] and so `arl::run` with the arguments in [`ARGS_VAR`]. (Not
//! `CARGO_BIN_EXE_arl`: in a target directory shared by several worktrees that path is rebuilt
//! by whichever tree built last; the test binary is this tree's own.)

use std::process::{Command, Stdio};

/// The arguments of a child's `arl`, as JSON.
pub const ARGS_VAR: &str = "ARL_TEST_CHILD_ARGS";
/// In a child: an episode's end (`step` or `finish`) blocks forever after this many episodes
/// have ended, waiting for the parent's SIGKILL. (Counted at the end, not at `reset`: start-up
/// checks reset tasks too.)
pub const BLOCK_VAR: &str = "ARL_TEST_BLOCK_AFTER_EPISODES";

/// `arl_core::testing::Letters` (a random model's episodes differ in reward, so every step has
/// advantages, gradients and optimizer moments to get right), each episode's end blocking as
/// [`BLOCK_VAR`] says. Registered in the test binaries that include this module only.
mod letters {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use arl_core::config::EnvConfig;
    use arl_core::testing::Letters;
    use arl_core::{AssistantTurn, Env, EnvError, EnvSession, Message, Outcome, PluginError, Sandbox, Split, Step, Task, ToolSchema};

    struct Blocking;

    impl Env for Blocking {
        fn tasks(&self, split: Split) -> Result<Vec<Task>, EnvError> {
            Letters.tasks(split)
        }
        fn tools(&self) -> Vec<ToolSchema> {
            vec![]
        }
        fn reset(&self, task: &Task) -> Result<Box<dyn EnvSession>, EnvError> {
            Ok(Box::new(Session(Letters.reset(task)?)))
        }
    }

    fn end_of_episode() {
        static EPISODES: AtomicUsize = AtomicUsize::new(0);
        let ended = EPISODES.fetch_add(1, Ordering::SeqCst);
        if let Some(limit) = std::env::var(super::BLOCK_VAR).ok().and_then(|v| v.parse::<usize>().ok())
            && ended >= limit
        {
            loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        }
    }

    struct Session(Box<dyn EnvSession>);

    impl EnvSession for Session {
        fn messages(&self) -> &[Message] {
            self.0.messages()
        }
        fn step(&mut self, turn: &AssistantTurn) -> Result<Step, EnvError> {
            end_of_episode();
            self.0.step(turn)
        }
        fn finish(&mut self) -> Result<Outcome, EnvError> {
            end_of_episode();
            self.0.finish()
        }
    }

    fn letters_env(_: &EnvConfig, _: Arc<dyn Sandbox>) -> Result<Box<dyn Env>, PluginError> {
        Ok(Box::new(Blocking))
    }

    arl_core::register!(EnvPlugin { name: "test-letters", about: "test stand-in", build: letters_env });
}

/// This test binary running `arl ARGS` as a child.
pub fn arl_child(args: &[String]) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "child", "--nocapture", "--test-threads", "1", "-q"])
        .env(ARGS_VAR, serde_json::to_string(args).unwrap())
        .stdin(Stdio::null());
    c
}

/// The body of a test binary's `child` test: `arl` with the arguments in [`ARGS_VAR`], its
/// rollout workers started the same way; a no-op in a normal test run.
pub fn child() {
    let Ok(args) = std::env::var(ARGS_VAR) else { return };
    arl_plugins::link();
    arl::set_self_command(arl_child);
    let args: Vec<String> = serde_json::from_str(&args).unwrap();
    let mut stdout = std::io::stdout();
    if let Err(err) = arl::run(std::iter::once("arl".to_string()).chain(args), &mut stdout) {
        let code = arl::exit_code(&err);
        arl::report(&err);
        std::process::exit(code.into());
    }
}
