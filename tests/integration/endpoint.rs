//! The OpenAI-compatible endpoint (arl-endpoint) driven by a real client: the official
//! `openai` Python SDK (`scripts/setup/openai.sh`) over the tiny random-weights model, with a
//! tool call, a tool result, a streamed turn, a fork and the refusals; the recording is
//! checked against the ids the policy sampled and against a gym's `Conversation`.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use arl_chat::HfChatCodec;
use arl_core::message::MessageToolCall;
use arl_core::{
    ChatCodec, Conversation, FinishReason, Generation, Message, Policy, PolicyError, SamplingParams, ScoreParams, Scores, ToolCall,
    ToolSchema,
};
use arl_endpoint::{Endpoint, EndpointConfig, SessionConfig};
use arl_tests::{Spy, openai_sdk, qwen3_tokenizer_dir};
use serde_json::{Value, json};

fn weather() -> ToolSchema {
    ToolSchema {
        name: "get_weather".into(),
        description: "The weather in a city.".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    }
}

fn call(city: &str) -> MessageToolCall {
    let arguments = json!({"city": city}).as_object().unwrap().clone();
    MessageToolCall { kind: "function".into(), function: ToolCall { name: "get_weather".into(), arguments } }
}

/// One raw HTTP exchange (what no SDK would send): the status and the JSON body.
fn raw(addr: &str, request: &str) -> (u16, Value) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let status = reply[9..12].parse().unwrap();
    let body = reply.split_once("\r\n\r\n").unwrap().1;
    (status, serde_json::from_str(body).unwrap())
}

fn system_user() -> Vec<Message> {
    vec![Message::system("You are a helpful agent."), Message::user("What is the weather in Paris?")]
}

#[test]
fn the_openai_sdk_drives_a_session_and_the_recording_is_the_sampled_ids() {
    let (python, site) = openai_sdk();
    let codec: Arc<dyn ChatCodec> = Arc::new(HfChatCodec::load(&qwen3_tokenizer_dir()).unwrap().with_enable_thinking(Some(false)));
    let tools = vec![weather()];
    let mut tool_turn = Message::assistant("");
    tool_turn.tool_calls.push(call("Paris"));
    let scripted_call = codec.assistant_ids(&system_user(), &tools, &tool_turn).unwrap();
    let bad = Message::assistant("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\": 1}}\n</tool_call>");
    let scripted_bad = codec.assistant_ids(&system_user(), &tools, &bad).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let spy = Spy {
        inner: arl_qwen3::QwenPolicy::load("tiny", &arl_qwen3::cpu()).unwrap(),
        script: VecDeque::from([Some(scripted_call.clone()), None, None, None, Some(scripted_bad), Some(scripted_call.clone())]),
        log: log.clone(),
    };
    let config = EndpointConfig { model: "tiny".into(), temperature: 1.0, max_new_tokens: 64, max_calls_per_turn: 4 };
    let endpoint = Endpoint::serve_tcp("127.0.0.1:0", Box::new(spy), codec.clone(), config).unwrap();
    let session = |max_episode_tokens| SessionConfig { max_episode_tokens, max_turns: 16, seed: 7 };
    endpoint.open_session("ep-a", session(4096)).unwrap();
    endpoint.open_session("ep-ended", session(4096)).unwrap();
    endpoint.open_session("ep-small", session(8)).unwrap();
    assert!(endpoint.end_session("ep-ended").unwrap().branches.is_empty());
    assert!(endpoint.open_session("ep-a", session(1)).unwrap_err().contains("already opened"));

    // A body that is not JSON: one 400 with OpenAI's error shape; the session goes on below.
    let addr = endpoint.base_url("x").unwrap()["http://".len()..].split('/').next().unwrap().to_string();
    let (status, body) =
        raw(&addr, "POST /s/ep-a/v1/chat/completions HTTP/1.1\r\nContent-Length: 9\r\nConnection: close\r\n\r\n{\"model\":");
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(body["error"]["message"].as_str().unwrap().starts_with("the request body is not valid JSON"), "{body}");

    let out = std::process::Command::new(&python)
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/endpoint/openai_client.py"))
        .args([
            endpoint.base_url("ep-a").unwrap(),
            endpoint.base_url("ep-ended").unwrap(),
            endpoint.base_url("ep-small").unwrap(),
            endpoint.base_url("ep-nobody").unwrap(),
            "tiny".into(),
        ])
        .env("PYTHONPATH", &site)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the openai client failed:\n{stderr}");
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();

    assert_eq!(seen["models"], json!(["tiny"]));
    for (case, status, code) in [
        ("wrong_model", 404, "model_not_found"),
        ("ended", 410, "session_ended"),
        ("over_budget", 400, "context_length_exceeded"),
        ("unknown", 401, "unknown_session"),
    ] {
        assert_eq!((seen[case]["status"].as_u64(), seen[case]["code"].as_str()), (Some(status), Some(code)), "{case}: {}", seen[case]);
    }
    assert!(seen["wrong_model"]["message"].as_str().unwrap().contains("serves `tiny`"));

    let record = endpoint.end_session("ep-a").unwrap();
    let samples = log.lock().unwrap().clone();
    assert_eq!(samples.len(), 6);
    assert_eq!(samples[0].ids, scripted_call);
    let s = &record.stats;
    assert_eq!((s.requests, s.harness_forks, s.tool_calls, s.malformed_calls, s.refused), (6, 2, 2, 1, 2), "{s:?}");
    assert_eq!(s.generated_tokens, samples.iter().map(|g| g.ids.len() as u64).sum::<u64>());

    // The log-probs the client got are the sampler's (the stop token's excluded).
    let got: Vec<f64> = seen["turn0_logprobs"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_eq!(got.len(), scripted_call.len() - 1);
    for (g, r) in got.iter().zip(&samples[0].sampler_logprobs) {
        assert!((g - *r as f64).abs() < 1e-6, "{g} vs {r}");
    }

    // Every policy token of the recording is a sampled id, each sample exactly once, in order.
    let mut runs: Vec<(Vec<u32>, Vec<f32>)> = Vec::new();
    for b in &record.branches {
        assert_eq!(
            (b.stream.policy_mask.len(), b.stream.sampler_logprobs.len(), b.stream.turn_ids.len()),
            (b.stream.ids.len(), b.stream.ids.len(), b.stream.ids.len())
        );
        for t in 0..b.stream.ids.len() {
            if b.stream.policy_mask[t] {
                if t == 0 || !b.stream.policy_mask[t - 1] || b.stream.turn_ids[t - 1] != b.stream.turn_ids[t] {
                    runs.push((Vec::new(), Vec::new()));
                }
                let run = runs.last_mut().unwrap();
                run.0.push(b.stream.ids[t]);
                run.1.push(b.stream.sampler_logprobs[t]);
            }
        }
    }
    let sampled: Vec<(Vec<u32>, Vec<f32>)> = samples.iter().map(|g| (g.ids.clone(), g.sampler_logprobs.clone())).collect();
    assert_eq!(runs, sampled, "the recording's policy tokens are not the sampled turns");

    // The first branch is what a gym's Conversation grows from the same turns: the prompt
    // rendered once, sampled ids as sampled, observations as the template's suffix.
    assert_eq!(record.branches.len(), 3);
    let text = |k: &str| seen[k].as_str().unwrap().to_string();
    let mut conv = Conversation::start(codec.as_ref(), system_user(), tools.clone()).unwrap();
    conv.push_assistant(codec.as_ref(), &samples[0].ids, &samples[0].sampler_logprobs).unwrap();
    conv.push_observations(codec.as_ref(), vec![Message::tool("Sunny, 21 C.")]).unwrap();
    assert_eq!(conv.push_assistant(codec.as_ref(), &samples[1].ids, &samples[1].sampler_logprobs).unwrap(), text("turn1_text"));
    conv.push_observations(codec.as_ref(), vec![Message::user("Thanks. And tomorrow?")]).unwrap();
    conv.push_assistant(codec.as_ref(), &samples[2].ids, &samples[2].sampler_logprobs).unwrap();
    let first = &record.branches[0];
    assert_eq!(
        (&first.stream.ids, &first.stream.policy_mask, &first.stream.sampler_logprobs),
        (&conv.ids, &conv.policy_mask, &conv.sampler_logprobs)
    );
    assert_eq!(first.messages[2].tool_calls, vec![call("Paris")]);

    // Training from the recording: the trainer's scores of its policy tokens (the same tiny
    // weights, at the sampling temperature) are the sampler's log-probs, as in the gyms.
    let scorer = arl_qwen3::QwenPolicy::load("tiny", &arl_qwen3::cpu()).unwrap();
    let episode = first.clone().into_episode("t".into(), 0, 0.0, Default::default());
    episode.check().unwrap();
    let positions: Vec<usize> = (1..episode.ids.len()).filter(|&t| episode.policy_mask[t]).collect();
    let scores = scorer.score(std::slice::from_ref(&episode.ids), Some(std::slice::from_ref(&positions)), ScoreParams::at(1.0)).unwrap();
    let all = scores.logprobs.into_data().to_vec::<f32>().unwrap();
    let gap = positions.iter().map(|&t| (all[t] - episode.sampler_logprobs[t]).abs()).fold(0.0f32, f32::max);
    assert!(gap <= 1e-5, "sampler–trainer gap {gap} on the recording (the project's tolerance is 1e-5)");

    // The fork reuses the prompt and the first turn's ids exactly (as context: they train in
    // the first branch), and renders the changed tool result as the template's suffix.
    let shared = codec.prompt_ids(&system_user(), &tools).unwrap().len() + samples[0].ids.len();
    let fork = &record.branches[1];
    assert_eq!(fork.stream.ids[..shared], first.stream.ids[..shared]);
    assert!(fork.stream.policy_mask[..shared].iter().all(|m| !m));
    let mut history = system_user();
    history.push(first.messages[2].clone());
    let changed = vec![Message::tool("{\"sky\": \"sunny\", \"celsius\": 21}")];
    let suffix = codec.observation_ids(&history, &changed, &tools, samples[0].ids.last().copied()).unwrap();
    assert_eq!(fork.stream.ids[shared..shared + suffix.len()], suffix[..]);
    assert!(text("turn4_text").contains("\"town\": 1"));
    let third = &record.branches[2];
    assert_eq!(third.stream.ids[..shared - samples[0].ids.len()], first.stream.ids[..shared - samples[0].ids.len()]);
    assert_eq!(seen["after_errors"], "tool_calls");
}

/// A toy template, one id per character: `[role:content]` per message, `>` as the generation
/// prompt, `|` (id 124) ends a turn, `\n` after a stopped turn.
struct Chars;

fn chars(s: &str) -> Vec<u32> {
    s.chars().map(|c| c as u32).collect()
}

fn render(m: &Message) -> String {
    let calls: String = m.tool_calls.iter().map(|c| format!("<{}>", c.function.name)).collect();
    format!("[{:?}:{}{calls}]", m.role, m.content).to_lowercase()
}

impl ChatCodec for Chars {
    fn prompt_ids(&self, messages: &[Message], tools: &[ToolSchema]) -> Result<Vec<u32>, arl_core::ChatError> {
        let tools: String = tools.iter().map(|t| format!("{{{}}}", t.name)).collect();
        Ok(chars(&format!("{tools}{}>", messages.iter().map(render).collect::<String>())))
    }
    fn observation_ids(
        &self,
        _: &[Message],
        obs: &[Message],
        _: &[ToolSchema],
        stop: Option<u32>,
    ) -> Result<Vec<u32>, arl_core::ChatError> {
        let head = if stop.is_some() { "\n" } else { "|\n" };
        Ok(chars(&format!("{head}{}>", obs.iter().map(render).collect::<String>())))
    }
    fn assistant_ids(&self, _: &[Message], _: &[ToolSchema], a: &Message) -> Result<Vec<u32>, arl_core::ChatError> {
        Ok(chars(&format!("{}|", a.content)))
    }
    fn decode(&self, ids: &[u32]) -> Result<String, arl_core::ChatError> {
        Ok(ids.iter().map(|&i| char::from_u32(i).unwrap()).collect())
    }
    fn stop_ids(&self) -> &[u32] {
        &[124]
    }
    fn self_check(&self) -> Result<String, arl_core::ChatError> {
        Ok("toy".into())
    }
}

/// Answers each call with the next scripted text, a stop id after it; log-prob −0.5 a token.
struct Scripted(VecDeque<&'static str>);

impl Policy for Scripted {
    fn generate(&mut self, _: &[Vec<u32>], params: &SamplingParams) -> Result<Vec<Generation>, PolicyError> {
        let mut ids = chars(self.0.pop_front().expect("a scripted turn"));
        let finish = if ids.len() >= params.max_new_tokens { FinishReason::Length } else { FinishReason::Stop };
        ids.truncate(params.max_new_tokens.saturating_sub(1));
        if finish == FinishReason::Stop {
            ids.push(124);
        } else {
            ids.push('~' as u32);
        }
        Ok(vec![Generation { sampler_logprobs: vec![-0.5; ids.len()], ids, finish }])
    }
    fn score(&self, _: &[Vec<u32>], _: Option<&[Vec<usize>]>, _: ScoreParams) -> Result<Scores, PolicyError> {
        unreachable!("the endpoint never scores")
    }
}

/// One request over the unix socket: the status and the JSON body.
fn unix(path: &std::path::Path, method: &str, target: &str, headers: &str, body: &Value) -> (u16, Value) {
    let body = if body.is_null() { String::new() } else { body.to_string() };
    let mut s = std::os::unix::net::UnixStream::connect(path).unwrap();
    write!(s, "{method} {target} HTTP/1.1\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n{body}", body.len()).unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    (reply[9..12].parse().unwrap(), serde_json::from_str(reply.split_once("\r\n\r\n").unwrap().1).unwrap())
}

/// The endpoint and its scratch folder; bind them in this order, so that the endpoint is
/// dropped (and stops) before its socket's folder goes.
fn toy_endpoint(name: &str, script: &[&'static str]) -> (arl_tests::ScratchDir, Endpoint) {
    let dir = arl_tests::scratch_dir(name);
    let config = EndpointConfig { model: "toy".into(), temperature: 1.0, max_new_tokens: 8, max_calls_per_turn: 4 };
    let endpoint =
        Endpoint::serve_unix(&dir.join("endpoint.sock"), Box::new(Scripted(script.iter().copied().collect())), Arc::new(Chars), config)
            .unwrap();
    endpoint.open_session("s", SessionConfig { max_episode_tokens: 200, max_turns: 8, seed: 0 }).unwrap();
    (dir, endpoint)
}

fn chat(dir: &std::path::Path, messages: Value) -> (u16, Value) {
    unix(&dir.join("endpoint.sock"), "POST", "/s/s/v1/chat/completions", "", &json!({"model": "toy", "messages": messages}))
}

fn stream(ids: &[u32]) -> String {
    ids.iter().map(|&i| char::from_u32(i).unwrap()).collect()
}

fn mask(b: &arl_endpoint::RecordedBranch) -> String {
    b.stream.policy_mask.iter().map(|&m| if m { 'p' } else { '.' }).collect()
}

#[test]
fn endpoint_turns_grow_in_place_and_every_change_is_a_fork() {
    let (dir, endpoint) = toy_endpoint("endpoint-forks", &["a", "b", "c", "d", "e"]);
    let q = json!({"role": "user", "content": "q"});
    let a = json!({"role": "assistant", "content": "a"});
    let r = json!({"role": "tool", "content": "r"});
    assert_eq!(chat(&dir, json!([q])).1["choices"][0]["message"]["content"], "a");
    assert_eq!(chat(&dir, json!([q, a, r])).1["choices"][0]["message"]["content"], "b");
    let rec = endpoint.record("s").unwrap();
    assert_eq!((rec.branches.len(), rec.stats.harness_forks), (1, 0));
    assert_eq!(stream(&rec.branches[0].stream.ids), "[user:q]>a|\n[tool:r]>b|");
    assert_eq!(mask(&rec.branches[0]), ".........pp..........pp");

    // A retried request: the prefix is reused, the new turn is a second branch.
    assert_eq!(chat(&dir, json!([q, a, r])).1["choices"][0]["message"]["content"], "c");
    // The harness edited the model's turn: the prompt is reused, its text is the template's.
    chat(&dir, json!([q, {"role": "assistant", "content": "A!"}, r]));
    // Other tools: nothing matches, the whole request is one prompt.
    let tools = json!([{"type": "function", "function": {"name": "f"}}]);
    let sock = dir.join("endpoint.sock");
    let (status, _) = unix(&sock, "POST", "/s/s/v1/chat/completions", "", &json!({"model": "toy", "messages": [q, a, r], "tools": tools}));
    assert_eq!(status, 200);
    let rec = endpoint.end_session("s").unwrap();
    let streams: Vec<String> = rec.branches.iter().map(|b| stream(&b.stream.ids)).collect();
    assert_eq!(
        streams,
        ["[user:q]>a|\n[tool:r]>b|", "[user:q]>a|\n[tool:r]>c|", "[user:q]>A!|\n[tool:r]>d|", "{f}[user:q][assistant:a][tool:r]>e|"]
    );
    let masks: Vec<String> = rec.branches.iter().map(mask).collect();
    let policy_last = |context: usize| format!("{}pp", ".".repeat(context));
    assert_eq!(masks[1], policy_last(21), "the reused turn trains once, in the branch that sampled it");
    assert_eq!(masks[2], policy_last(22));
    assert_eq!(masks[3], policy_last(33));
    assert_eq!((rec.stats.requests, rec.stats.harness_forks), (5, 3));
    assert_eq!(rec.branches[2].stream.turn_ids.iter().filter(|&&t| t >= 0).count(), 2);
}

#[test]
fn endpoint_refusals_are_one_error_each_and_the_server_goes_on() {
    let (dir, endpoint) = toy_endpoint("endpoint-refusals", &["abcdefghijkl", "x"]);
    let sock = dir.join("endpoint.sock");
    let q = json!([{"role": "user", "content": "q"}]);
    let check = |(status, body): (u16, Value), want: u16, code: &str| {
        assert_eq!(status, want, "{body}");
        assert_eq!(body["error"]["code"], code, "{body}");
        assert!(body["error"]["message"].as_str().is_some_and(|m| !m.contains('\n')), "{body}");
    };
    // The session id as the API key; a route that is not served; a method that is not.
    let (status, models) = unix(&sock, "GET", "/v1/models", "Authorization: Bearer s\r\n", &Value::Null);
    assert_eq!((status, &models["data"][0]["id"]), (200, &json!("toy")));
    check(unix(&sock, "GET", "/v1/models", "", &Value::Null), 401, "missing_session");
    check(unix(&sock, "GET", "/s/s/v1/embeddings", "", &Value::Null), 404, "unknown_route");
    check(unix(&sock, "GET", "/s/s/v1/chat/completions", "", &Value::Null), 405, "method_not_allowed");
    check(unix(&sock, "POST", "/s/s/v1/chat/completions", "", &json!({"model": "toy", "messages": q, "n": 3})), 400, "unsupported_n");
    check(unix(&sock, "POST", "/s/s/v1/chat/completions", "", &json!({"model": "big", "messages": q})), 404, "model_not_found");
    // A turn cut at max_new_tokens reports `length`.
    let (_, body) = unix(&sock, "POST", "/s/s/v1/chat/completions", "", &json!({"model": "toy", "messages": q, "max_tokens": 3}));
    assert_eq!((&body["choices"][0]["finish_reason"], &body["usage"]["completion_tokens"]), (&json!("length"), &json!(3)));
    // Over the session's token budget.
    let long = json!([{"role": "user", "content": "q".repeat(300)}]);
    check(chat(&dir, long), 400, "context_length_exceeded");
    assert_eq!(chat(&dir, q.clone()).0, 200);
    let rec = endpoint.end_session("s").unwrap();
    // Refused chat completions of the session (not the requests that never reached it).
    assert_eq!((rec.stats.requests, rec.stats.refused), (2, 3));
    check(chat(&dir, q), 410, "session_ended");
}
