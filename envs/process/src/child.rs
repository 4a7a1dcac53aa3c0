//! The supervised env process: one request line out, one answer line back, within a deadline.
//!
//! A reader thread forwards stdout lines through a channel (so a silent process cannot block
//! the caller past its deadline), another keeps the last lines of stderr for error messages.
//! Any failure — the process exited, a line that is not JSON, an answer to another request, no
//! answer in time — kills the process; the next request starts a fresh one.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

/// Lines of the process's stderr kept for error messages.
const STDERR_TAIL: usize = 12;

/// How to start the env process.
#[derive(Clone, Debug)]
pub struct Spawn {
    /// A shell command line (`sh -c`).
    pub command: String,
    pub timeout: Duration,
}

struct Running {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<std::io::Result<String>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

/// The env process, started on first use and restarted after a failure; every start begins
/// with `hello` (the same parameters each time), so a restarted process is set up as the first.
pub struct EnvProcess {
    spawn: Spawn,
    hello: Value,
    running: Option<Running>,
    next_id: u64,
    /// How many times the process was (re)started.
    pub starts: u64,
    /// The last failure line (for tests and callers that log elsewhere).
    pub last_failure: Option<String>,
}

impl EnvProcess {
    pub fn new(spawn: Spawn, hello: Value) -> Self {
        Self { spawn, hello, running: None, next_id: 1, starts: 0, last_failure: None }
    }

    /// Start the process if it is not running; returns `hello`'s answer when it just started.
    fn start(&mut self) -> Result<Option<Value>, String> {
        if self.running.is_some() {
            return Ok(None);
        }
        {
            let mut child = Command::new("sh")
                .arg("-c")
                .arg(&self.spawn.command)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start `{}`: {e}", self.spawn.command))?;
            let stdin = child.stdin.take().expect("piped stdin");
            let stdout = child.stdout.take().expect("piped stdout");
            let stderr_pipe = child.stderr.take().expect("piped stderr");
            let (tx, lines) = channel();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            let stderr = Arc::new(Mutex::new(VecDeque::new()));
            let tail = Arc::clone(&stderr);
            std::thread::spawn(move || {
                for line in BufReader::new(stderr_pipe).lines().map_while(Result::ok) {
                    let mut t = tail.lock().expect("stderr tail");
                    if t.len() == STDERR_TAIL {
                        t.pop_front();
                    }
                    t.push_back(line);
                }
            });
            self.starts += 1;
            self.running = Some(Running { child, stdin, lines, stderr });
        }
        let hello = self.hello.clone();
        self.exchange("hello", hello).map(Some)
    }

    /// Start the process (if needed) and return `hello`'s answer.
    pub fn hello(&mut self) -> Result<Value, String> {
        self.kill();
        self.start().map(|a| a.expect("a fresh start answers hello")).map_err(|e| self.failed("hello", e))
    }

    /// Kill the process (a failed request leaves it in an unknown state).
    fn kill(&mut self) -> String {
        let Some(mut r) = self.running.take() else { return String::new() };
        let _ = r.child.kill();
        let _ = r.child.wait();
        // Give the stderr reader a moment to drain what the process wrote before it died.
        std::thread::sleep(Duration::from_millis(20));
        let tail: Vec<String> = r.stderr.lock().expect("stderr tail").iter().cloned().collect();
        if tail.is_empty() { String::new() } else { format!("; stderr: {}", tail.join(" | ")) }
    }

    /// One request and its answer on the running process.
    fn exchange(&mut self, method: &str, mut params: Value) -> Result<Value, String> {
        let id = self.next_id;
        self.next_id += 1;
        params["id"] = json!(id);
        params["method"] = json!(method);
        let timeout = self.spawn.timeout;
        let r = self.running.as_mut().expect("a running process");
        let line = serde_json::to_string(&params).expect("request serializes");
        writeln!(r.stdin, "{line}").and_then(|_| r.stdin.flush()).map_err(|e| format!("cannot write to the process: {e}"))?;
        let answer = match r.lines.recv_timeout(timeout) {
            Ok(Ok(line)) => line,
            Ok(Err(e)) => return Err(format!("reading its output: {e}")),
            Err(RecvTimeoutError::Timeout) => return Err(format!("no answer within {} s (env.options.timeout_s)", timeout.as_secs_f64())),
            Err(RecvTimeoutError::Disconnected) => {
                let status = r.child.wait().map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                return Err(format!("the process exited ({status})"));
            }
        };
        let mut v: Value =
            serde_json::from_str(&answer).map_err(|_| format!("answered with a line that is not JSON: {}", shorten(&answer)))?;
        if v.get("id") != Some(&json!(id)) {
            return Err(format!("answered request {} instead of {id}: {}", v.get("id").unwrap_or(&Value::Null), shorten(&answer)));
        }
        if let Some(e) = v.get("error") {
            return Err(format!("reported an error: {}", e.as_str().map(str::to_string).unwrap_or_else(|| e.to_string())));
        }
        if let Some(o) = v.as_object_mut() {
            o.remove("id");
        }
        Ok(v)
    }

    /// The failure line: the command, the method, what went wrong, the stderr tail; the
    /// process is killed.
    fn failed(&mut self, method: &str, e: String) -> String {
        let tail = self.kill();
        let line = format!("env process `{}`, `{method}`: {e}{tail}", self.spawn.command);
        self.last_failure = Some(line.clone());
        line
    }

    /// Send `{"id", "method", …params}` and return the answer's fields (without `id`), or an
    /// error line naming the method, what went wrong and the stderr tail.
    pub fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let outcome = self.start().and_then(|_| self.exchange(method, params));
        outcome.map_err(|e| self.failed(method, e))
    }
}

impl Drop for EnvProcess {
    /// Closing stdin asks the process to exit; it is killed if it has not after a moment.
    fn drop(&mut self) {
        if let Some(mut r) = self.running.take() {
            drop(r.stdin);
            for _ in 0..20 {
                if matches!(r.child.try_wait(), Ok(Some(_))) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = r.child.kill();
            let _ = r.child.wait();
        }
    }
}

fn shorten(s: &str) -> String {
    if s.chars().count() > 200 { format!("{}…", s.chars().take(200).collect::<String>()) } else { s.to_string() }
}
