//! The `harness` env (arl-env-harness): an agent program of the user's own runs in the `rlimit`
//! sandbox and samples every turn from the policy through arl-endpoint. The program here is
//! the example on the official `openai` SDK (examples/harness/agent.py, `scripts/setup/openai.sh`)
//! over the tiny random-weights model, with scripted turns where a test needs a known answer;
//! the episodes' policy tokens are checked against the ids the policy handed out, their
//! sampler log-probs against the trainer's scores, their rewards against the hidden tests.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arl_chat::HfChatCodec;
use arl_core::config::{EnvConfig, SandboxConfig};
use arl_core::message::MessageToolCall;
use arl_core::registry::{self, EnvPlugin, SandboxPlugin};
use arl_core::{AgentSampling, ChatCodec, Env, Message, Policy, ScoreParams, Split, Task, ToolCall};
use arl_tests::{Spy, openai_sdk, qwen3_tokenizer_dir};
use serde_json::json;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// What examples/harness/config.sh prints for `agent` (`openai` or `mini`): the run
/// configuration a user starts from, with the Python packages and the shared libraries their
/// compiled wheels link bound into jobs.
fn example_config(agent: &str) -> String {
    openai_sdk();
    let out = std::process::Command::new("bash").arg(repo_root().join("examples/harness/config.sh")).arg(agent).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The `harness` env over the `rlimit` sandbox, with the binds and `python_path` of `agent`'s
/// example configuration and `options` of the test's own.
fn harness_env_with(options: serde_json::Value, agent: &str) -> Box<dyn Env> {
    arl_plugins::link();
    let example: toml::Table = example_config(agent).parse().unwrap();
    let strings = |v: &toml::Value| -> Vec<String> { v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect() };
    let config = SandboxConfig {
        timeout_s: 120.0,
        cpu_s: 120,
        memory_mb: 2048,
        binds: strings(&example["sandbox"]["binds"]),
        ..SandboxConfig::default()
    };
    let sandbox = (registry::get::<SandboxPlugin>("rlimit").unwrap().build)(&config).unwrap_or_else(|e| panic!("{e}"));
    let mut options = options.as_object().unwrap().clone();
    options.insert("python_path".into(), json!(strings(&example["env"]["options"]["python_path"])));
    let config = EnvConfig { name: "harness".into(), options, ..EnvConfig::default() };
    (registry::get::<EnvPlugin>("harness").unwrap().build)(&config, sandbox).unwrap_or_else(|e| panic!("{e}"))
}

fn harness_env(options: serde_json::Value) -> Box<dyn Env> {
    harness_env_with(options, "openai")
}

fn sampling() -> AgentSampling {
    AgentSampling { temperature: 1.0, max_new_tokens: 24, max_turns: 8, max_calls_per_turn: 4, max_episode_tokens: 4096, seed: 3 }
}

fn codec() -> HfChatCodec {
    HfChatCodec::load(&qwen3_tokenizer_dir()).unwrap().with_enable_thinking(Some(false))
}

/// The ids of an assistant turn calling `name` with `arguments`, as the template renders it.
fn call_ids(codec: &dyn ChatCodec, name: &str, arguments: serde_json::Value) -> Vec<u32> {
    let mut turn = Message::assistant("");
    turn.tool_calls.push(MessageToolCall {
        kind: "function".into(),
        function: ToolCall { name: name.into(), arguments: arguments.as_object().unwrap().clone() },
    });
    codec.assistant_ids(&[Message::user("fix it")], &[], &turn).unwrap()
}

#[test]
fn the_example_agent_fixes_a_bug_through_the_endpoint_and_its_episode_is_the_sampled_ids() {
    let agent = repo_root().join("examples/harness/agent.py");
    let env = harness_env(json!({"command": "python3 /job/agent.py", "files": [agent], "parallel": 1, "timeout_s": 100}));
    let codec = codec();
    let task: Task = env.tasks(Split::Train).unwrap().remove(0);
    let file = format!("{}.py", task.data["function"].as_str().unwrap());
    let reference = task.data["reference"].as_str().unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    // Episode 0: write the reference fix, then answer. Episode 1: the tiny model's own turns.
    let script = VecDeque::from([
        Some(call_ids(&codec, "write_file", json!({"path": file, "content": reference}))),
        Some(codec.assistant_ids(&[Message::user("fix it")], &[], &Message::assistant("Done.")).unwrap()),
    ]);
    let mut spy = Spy { inner: arl_qwen3::QwenPolicy::load("tiny", &arl_qwen3::cpu()).unwrap(), script, log: log.clone() };
    let specs = vec![(task.clone(), 0), (task.clone(), 1)];
    let mut seen = Vec::new();
    let episodes = env
        .agent()
        .expect("harness is an agent env")
        .run_episodes(&specs, &mut spy, &codec, &sampling(), &mut |d, t| seen.push((d, t)))
        .unwrap();

    assert_eq!(episodes.len(), 2);
    assert_eq!((episodes[0].reward, episodes[1].reward), (1.0, 0.0), "{:?}", episodes.iter().map(|e| &e.stats).collect::<Vec<_>>());
    assert!(episodes.iter().all(|e| !e.stats.infra_failed && e.check().is_ok()));
    assert_eq!(seen.last(), Some(&(2, 2)));
    assert_trained_turns_are_the_sampled_ones(&episodes, &log.lock().unwrap());
    assert_eq!(episodes[0].stats.tool_calls, 1);
    assert_scores_are_the_sampler_logprobs(&spy.inner, &episodes);
}

/// The trainer's scores of every recorded stream (branches too) equal the sampler's
/// log-probs: the context around each turn is what the model saw when it sampled.
fn assert_scores_are_the_sampler_logprobs(policy: &arl_qwen3::QwenPolicy, episodes: &[arl_core::Episode]) {
    for e in episodes.iter().flat_map(|e| e.branch_episodes().chain([e.clone()])) {
        let positions: Vec<usize> = (0..e.ids.len()).filter(|&i| e.policy_mask[i]).collect();
        let scores = policy.score(std::slice::from_ref(&e.ids), Some(std::slice::from_ref(&positions)), ScoreParams::at(1.0)).unwrap();
        let all = scores.logprobs.into_data().to_vec::<f32>().unwrap();
        let gap = positions.iter().map(|&i| (all[i] - e.sampler_logprobs[i]).abs()).fold(0.0f32, f32::max);
        assert!(gap < 1e-3, "sampler-trainer gap {gap}");
    }
}

/// Each episode's policy tokens, turn by turn, against what the policy handed out, in order
/// (episodes one at a time): its earlier branches' turns, then its last branch's (`ids`), are
/// every turn it sampled, each trained once.
fn assert_trained_turns_are_the_sampled_ones(episodes: &[arl_core::Episode], handed: &[arl_core::Generation]) {
    let mut next = handed.iter();
    for e in episodes {
        assert!(e.check().is_ok());
        let mut streams: Vec<arl_core::Episode> = e.branch_episodes().collect();
        streams.push(e.clone());
        let mut trained = 0;
        for s in &streams {
            let n = s.turn_ids.iter().copied().max().map_or(0, |t| t + 1) as usize;
            for t in 0..n {
                let at: Vec<usize> = (0..s.ids.len()).filter(|&i| s.turn_ids[i] == t as i32).collect();
                assert!(at.iter().all(|&i| s.policy_mask[i]));
                let (ids, lps): (Vec<u32>, Vec<f32>) = at.iter().map(|&i| (s.ids[i], s.sampler_logprobs[i])).unzip();
                let g = next.next().expect("as many sampled turns as trained ones");
                assert_eq!((&ids, &lps), (&g.ids, &g.sampler_logprobs), "a trained turn differs from the sampled one");
                trained += 1;
            }
        }
        assert_eq!(trained, e.stats.counters["harness_requests"] as usize, "{:?}", e.stats);
        assert_eq!(e.stats.turns as usize, trained);
        assert_eq!(e.branches.is_empty(), !e.stats.counters.contains_key("harness_forks"), "{:?}", e.stats);
    }
    assert!(next.next().is_none(), "a sampled turn is not trained");
}

#[test]
fn smollm2_drives_the_example_agent_and_trains_on_what_it_sampled() {
    let dir = arl_tests::smollm2_dir();
    let agent = repo_root().join("examples/harness/agent.py");
    let env = harness_env(json!({"command": "AGENT_TURNS=2 python3 /job/agent.py", "files": [agent], "parallel": 1, "timeout_s": 100}));
    // As `arl run` loads it: SmolLM2's own template ignores tools, so arl's ChatML one shows them.
    let codec = HfChatCodec::load(&dir).unwrap();
    assert!(codec.ignores_tools().unwrap());
    let codec = codec.with_chatml_tools().unwrap().with_enable_thinking(Some(false));
    let log = Arc::new(Mutex::new(Vec::new()));
    let inner = arl_qwen3::QwenPolicy::load(dir.to_str().unwrap(), &arl_qwen3::cpu()).unwrap();
    let mut spy = Spy { inner, script: VecDeque::new(), log: log.clone() };
    let task: Task = env.tasks(Split::Train).unwrap().remove(0);
    let sampling = AgentSampling { max_new_tokens: 48, ..sampling() };
    let episodes = env.agent().unwrap().run_episodes(&[(task.clone(), 0), (task, 1)], &mut spy, &codec, &sampling, &mut |_, _| {}).unwrap();
    assert!(episodes.iter().all(|e| !e.stats.infra_failed && e.stats.counters["harness_requests"] >= 1), "{episodes:?}");
    // The tools the program sent reached the model's prompt.
    assert!(codec.decode(&episodes[0].ids).unwrap().contains("write_file"));
    // A program that stops after a turn cut at max_new_tokens ends a truncated episode, as the
    // gyms' rollout marks a last turn cut by a token budget (DAPO's overlong).
    for e in &episodes {
        let last = (0..e.ids.len()).rev().find(|&i| e.policy_mask[i]).unwrap();
        let cut = !codec.stop_ids().contains(&e.ids[last]);
        assert_eq!((e.stats.truncated, e.stats.finish == Some(arl_core::EpisodeFinish::Length)), (cut, cut), "{:?}", e.stats);
    }
    assert_trained_turns_are_the_sampled_ones(&episodes, &log.lock().unwrap());
    assert_scores_are_the_sampler_logprobs(&spy.inner, &episodes);
}

#[test]
fn mini_swe_agent_fixes_a_bug_through_the_endpoint() {
    let site = PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/arl/assets/mini-swe-agent/site-packages");
    assert!(
        site.join("minisweagent/__init__.py").is_file(),
        "no mini-swe-agent in {}; run scripts/setup/mini-swe-agent.sh",
        site.display()
    );
    let program = repo_root().join("examples/harness/mini_swe_agent.py");
    let options = json!({"command": "AGENT_TURNS=4 python3 /job/mini_swe_agent.py", "files": [program], "parallel": 1, "timeout_s": 100});
    let env = harness_env_with(options, "mini");
    let codec = codec();
    let task: Task = env.tasks(Split::Train).unwrap().remove(0);
    let file = format!("{}.py", task.data["function"].as_str().unwrap());
    let write = format!("cat > /repo/{file} <<'ARL_EOF'\n{}ARL_EOF", task.data["reference"].as_str().unwrap());
    let log = Arc::new(Mutex::new(Vec::new()));
    // Episode 0: mini-swe-agent's bash tool writes the fix, then submits as its prompt says.
    // Episode 1: the tiny model's own turns (no tool call: mini's format errors end it).
    let script = VecDeque::from([
        Some(call_ids(&codec, "bash", json!({"command": write}))),
        Some(call_ids(&codec, "bash", json!({"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}))),
    ]);
    let mut spy = Spy { inner: arl_qwen3::QwenPolicy::load("tiny", &arl_qwen3::cpu()).unwrap(), script, log: log.clone() };
    let specs = vec![(task.clone(), 0), (task, 1)];
    let episodes = env.agent().unwrap().run_episodes(&specs, &mut spy, &codec, &sampling(), &mut |_, _| {}).unwrap();
    assert_eq!((episodes[0].reward, episodes[1].reward), (1.0, 0.0), "{:?}", episodes.iter().map(|e| &e.stats).collect::<Vec<_>>());
    assert_eq!(episodes[0].stats.counters["harness_requests"], 2, "{:?}", episodes[0].stats);
    assert!(episodes[1].stats.counters["harness_requests"] >= 1 && !episodes[1].stats.infra_failed, "{:?}", episodes[1].stats);
    assert!(episodes[0].messages.iter().any(|m| m.content.contains("Please solve this issue")), "mini-swe-agent's own prompt");
    // mini-swe-agent drops a turn without a tool call from the history it re-sends (a format
    // error): each such turn is a branch of its own, and still trains.
    assert!(!episodes[1].branches.is_empty(), "{:?}", episodes[1].stats);
    assert_scores_are_the_sampler_logprobs(&spy.inner, &episodes);
    assert_trained_turns_are_the_sampled_ones(&episodes, &log.lock().unwrap());
}

#[test]
fn a_harness_job_reaches_its_own_session_and_nothing_else() {
    // The probe earns reward 1 (writes the fix) only if its own session answers and nothing
    // else does: another session id, no key, the host's loopback, the host's sockets.
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    host.set_nonblocking(true).unwrap();
    let dir = arl_tests::scratch_dir("harness-probe");
    let env0 = harness_env(json!({"command": "true"}));
    let task: Task = env0.tasks(Split::Train).unwrap().remove(0);
    let probe = dir.join("probe.py");
    std::fs::write(
        &probe,
        format!(
            r#"import os, socket, urllib.request, urllib.error
base = os.environ["OPENAI_BASE_URL"]
def status(url, key):
    request = urllib.request.Request(url, headers={{"Authorization": "Bearer " + key}} if key else {{}})
    try:
        return urllib.request.urlopen(request, timeout=10).status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0
own = status(base + "/models", os.environ["OPENAI_API_KEY"])
other = status(base + "/models", "arl-" + "0" * 32)
none = status(base + "/models", "")
by_path = status(base.replace("/v1", "/s/arl-" + "1" * 32 + "/v1") + "/models", os.environ["OPENAI_API_KEY"])
def reaches(addr, family=socket.AF_INET):
    s = socket.socket(family)
    s.settimeout(2)
    try:
        s.connect(addr); return True
    except OSError:
        return False
import glob
sockets = glob.glob({temp:?} + "/arl-harness-*/endpoint.sock") + ["/tmp/endpoint.sock"]
outside = [reaches(("127.0.0.1", {port})), reaches(("1.1.1.1", 80))] + [reaches(p, socket.AF_UNIX) for p in sockets]
print(own, other, none, by_path, outside)
if own == 200 and other == 401 and none == 401 and by_path == 401 and not any(outside):
    open({file:?}, "w").write({fix:?})
"#,
            port = host.local_addr().unwrap().port(),
            temp = std::env::temp_dir().display().to_string(),
            file = format!("/repo/{}.py", task.data["function"].as_str().unwrap()),
            fix = task.data["reference"].as_str().unwrap(),
        ),
    )
    .unwrap();
    let env = harness_env(json!({"command": "python3 /job/probe.py", "files": [probe], "timeout_s": 60}));
    let mut spy =
        Spy { inner: arl_qwen3::QwenPolicy::load("tiny", &arl_qwen3::cpu()).unwrap(), script: VecDeque::new(), log: Default::default() };
    let episodes = env.agent().unwrap().run_episodes(&[(task, 0)], &mut spy, &codec(), &sampling(), &mut |_, _| {}).unwrap();
    assert_eq!(episodes[0].reward, 1.0, "the probe reached something it must not, or not its own session: {:?}", episodes[0].stats);
    assert!(host.accept().is_err(), "the host's listener saw a connection");
}

#[test]
fn a_program_that_cannot_start_stops_the_run_in_one_line_and_the_sandbox_clock_is_named() {
    let env = harness_env(json!({"command": "no-such-agent --fix"}));
    let task: Task = env.tasks(Split::Train).unwrap().remove(0);
    let mut spy =
        Spy { inner: arl_qwen3::QwenPolicy::load("tiny", &arl_qwen3::cpu()).unwrap(), script: VecDeque::new(), log: Default::default() };
    let err = env
        .agent()
        .unwrap()
        .run_episodes(&[(task.clone(), 0), (task.clone(), 1)], &mut spy, &codec(), &sampling(), &mut |_, _| {})
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("failed before its first request in every episode") && msg.contains("command not found"), "{msg}");
    assert_eq!(msg.lines().count(), 1, "{msg}");
    // The env's own time limit above the sandbox's wall clock: a clear line, not a zero reward.
    arl_plugins::link();
    let sandbox =
        (registry::get::<SandboxPlugin>("rlimit").unwrap().build)(&SandboxConfig { timeout_s: 2.0, ..SandboxConfig::default() }).unwrap();
    let options = json!({"command": "sleep 30", "timeout_s": 20}).as_object().unwrap().clone();
    let env = (registry::get::<EnvPlugin>("harness").unwrap().build)(
        &EnvConfig { name: "harness".into(), options, ..EnvConfig::default() },
        sandbox,
    )
    .unwrap();
    let err = env.agent().unwrap().run_episodes(&[(task, 0)], &mut spy, &codec(), &sampling(), &mut |_, _| {}).unwrap_err();
    assert!(err.to_string().contains("raise sandbox.timeout_s"), "{err}");
}

#[test]
fn a_program_that_hangs_after_its_first_request_is_stopped_and_graded() {
    // After its first request the model has had its say: a hang is the model's doing, graded as
    // the repository stands (not masked), the episode truncated at the time limit.
    let dir = arl_tests::scratch_dir("harness-hang");
    let program = dir.join("hang.py");
    std::fs::write(
        &program,
        r#"import json, os, time, urllib.request
body = {"model": os.environ["ARL_MODEL"], "messages": [{"role": "user", "content": os.environ["ARL_TASK"]}], "max_tokens": 4}
request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
urllib.request.urlopen(request, timeout=30).read()
time.sleep(600)
"#,
    )
    .unwrap();
    let env = harness_env(json!({"command": "python3 /job/hang.py", "files": [program], "timeout_s": 4}));
    let task: Task = env.tasks(Split::Train).unwrap().remove(0);
    let mut spy =
        Spy { inner: arl_qwen3::QwenPolicy::load("tiny", &arl_qwen3::cpu()).unwrap(), script: VecDeque::new(), log: Default::default() };
    let t = std::time::Instant::now();
    let episodes = env.agent().unwrap().run_episodes(&[(task, 0)], &mut spy, &codec(), &sampling(), &mut |_, _| {}).unwrap();
    let s = &episodes[0].stats;
    assert!(t.elapsed().as_secs() < 60, "stopped at the env's time limit");
    assert_eq!((s.counters.get("agent_timeout"), s.counters.get("harness_requests")), (Some(&1), Some(&1)), "{s:?}");
    assert_eq!(
        (s.finish, s.truncated, s.infra_failed, episodes[0].reward),
        (Some(arl_core::EpisodeFinish::TimeLimit), true, false, 0.0),
        "{s:?}"
    );
}

#[test]
fn bad_harness_options_are_refused_in_one_line() {
    arl_plugins::link();
    let sandbox = |name: &str| {
        (registry::get::<SandboxPlugin>(name).unwrap().build)(&SandboxConfig { name: name.into(), ..SandboxConfig::default() })
    };
    let build = |options: serde_json::Value, sandbox: Arc<dyn arl_core::Sandbox>| {
        let config = EnvConfig { name: "harness".into(), options: options.as_object().unwrap().clone(), ..EnvConfig::default() };
        (registry::get::<EnvPlugin>("harness").unwrap().build)(&config, sandbox).err().map(|e| e.to_string()).unwrap_or_default()
    };
    let rlimit = sandbox("rlimit").unwrap();
    for (options, expected) in [
        (json!({}), "set env.options.command"),
        (json!({"command": " "}), "env.options.command is empty"),
        (json!({"command": "x", "parallel": 0}), "env.options.parallel: 0 is out of range; valid: 1 to 64"),
        (json!({"command": "x", "timeout_s": 0}), "env.options.timeout_s: 0 is out of range"),
        (json!({"command": "x", "files": ["/no/such/agent.py"]}), "/no/such/agent.py is not a file"),
        (json!({"command": "x", "model": "two words"}), "env.options.model"),
        (json!({"command": "x", "train_instances": 0}), "env.options.train_instances: 0 is out of range"),
        (json!({"command": "x", "extra": 1}), "unknown field `extra`"),
    ] {
        let msg = build(options.clone(), rlimit.clone());
        assert!(msg.contains(expected) && msg.lines().count() == 1, "{options}: {msg}");
    }
    if let Ok(wasm) = sandbox("wasm") {
        assert!(build(json!({"command": "x"}), wasm).contains("use --sandbox rlimit"));
    }
}

/// The run configuration examples/harness/config.sh prints for `agent`, written into `dir`.
fn run_config(dir: &Path, agent: &str) -> PathBuf {
    let path = dir.join("harness.toml");
    std::fs::write(&path, example_config(agent)).unwrap();
    path
}

#[test]
fn arl_run_trains_a_step_through_the_example_agent() {
    let dir = arl_tests::scratch_dir("harness-run");
    let config = run_config(&dir, "openai");
    let out = dir.join("run");
    let args = ["run", "--config", config.to_str().unwrap(), "--model", "tiny", "--steps", "1", "--prompts", "2", "--group-size", "2"];
    let quick = [
        "--max-new-tokens=16",
        "--set=env.options.command=\"AGENT_TURNS=2 python3 /job/agent.py\"",
        "--set=env.options.heldout_train_instances=0",
        "--set=eval.n=1",
        "--out",
        out.to_str().unwrap(),
    ];
    let printed = arl_tests::arl(&[&args[..], &quick].concat()).unwrap_or_else(|e| panic!("{e}"));
    assert!(printed.contains("pass@1 after − before, heldout"), "{printed}");
    let metrics: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(out.join("metrics.jsonl")).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!((metrics["episodes"].as_u64(), metrics["infra_failed"].as_u64()), (Some(4), Some(0)), "{metrics}");
    // The sampler–trainer gap reads as in the built-in gyms: the trainer scores the recorded ids.
    assert!(metrics["logprob_gap_max"].as_f64().unwrap() < 1e-3, "{metrics}");
    assert!(metrics["policy_tokens"].as_u64().unwrap() > 0 && metrics["generate_seconds"].as_f64().unwrap() > 0.0, "{metrics}");
    let results: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["config"]["env"]["name"], "harness");
    assert!(results["after"].is_object() && results["difference"].is_object(), "{results}");
}
