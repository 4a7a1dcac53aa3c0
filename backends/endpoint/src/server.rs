//! The server: a listener (loopback TCP or a unix socket), one thread per connection, the
//! sessions, and the routes.
//!
//! Routes, under `/s/<session>` or with the session id as the API key (`Authorization:
//! Bearer <session>`): `POST /v1/chat/completions`, `GET /v1/models`, `GET /v1/models/<name>`.
//! Sessions are opened and ended by the owner of the [`Endpoint`], never over HTTP: a client
//! reaches only a session it was given.

use std::collections::{HashMap, HashSet};
use std::io::{self, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arl_core::{ChatCodec, Policy};
use serde_json::{Value, json};

use crate::http::{ReadError, Request, read_request, write_events, write_json};
use crate::record::SessionRecord;
use crate::session::Session;
use crate::{ApiError, api, reply};

/// How the endpoint samples, for every session.
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointConfig {
    /// The model name clients must ask for (`model` in the request, `GET /v1/models`).
    pub model: String,
    /// The run's sampling temperature; no top-k/top-p, whatever the request says.
    pub temperature: f64,
    /// New tokens per turn at most (a request's `max_tokens` may ask for fewer).
    pub max_new_tokens: usize,
    /// `<tool_call>` blocks per turn that become calls; the rest are malformed.
    pub max_calls_per_turn: usize,
}

/// One episode's limits.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionConfig {
    /// Tokens in a branch's stream, prompt and every turn: a request that leaves no room for
    /// a new token is refused (`context_length_exceeded`).
    pub max_episode_tokens: usize,
    /// Sampled turns (every branch).
    pub max_turns: usize,
    /// Seeds the session's turns (turn `n` samples with a seed mixed from this and `n`).
    pub seed: u64,
}

/// The policy, the codec and how to sample: shared by every connection.
pub(crate) struct Engine {
    pub policy: Mutex<Box<dyn Policy + Send>>,
    pub codec: Arc<dyn ChatCodec>,
    pub config: EndpointConfig,
}

struct Shared {
    engine: Engine,
    sessions: Mutex<HashMap<String, Arc<Mutex<Session>>>>,
    ended: Mutex<HashSet<String>>,
    stop: AtomicBool,
}

enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

/// Where the endpoint listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

/// A running endpoint. Dropping it stops accepting connections.
pub struct Endpoint {
    shared: Arc<Shared>,
    address: Address,
    accept: Option<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Endpoint {
    /// Serve on a TCP address (`127.0.0.1:0` picks a free loopback port).
    pub fn serve_tcp(
        addr: impl ToSocketAddrs,
        policy: Box<dyn Policy + Send>,
        codec: Arc<dyn ChatCodec>,
        config: EndpointConfig,
    ) -> io::Result<Self> {
        let listener = TcpListener::bind(addr)?;
        let address = Address::Tcp(listener.local_addr()?);
        Ok(Self::start(Listener::Tcp(listener), address, Engine { policy: Mutex::new(policy), codec, config }))
    }

    /// Serve on a unix socket at `path` (which must not exist).
    pub fn serve_unix(path: &Path, policy: Box<dyn Policy + Send>, codec: Arc<dyn ChatCodec>, config: EndpointConfig) -> io::Result<Self> {
        let listener = UnixListener::bind(path)?;
        let address = Address::Unix(path.to_path_buf());
        Ok(Self::start(Listener::Unix(listener), address, Engine { policy: Mutex::new(policy), codec, config }))
    }

    fn start(listener: Listener, address: Address, engine: Engine) -> Self {
        let shared = Arc::new(Shared {
            engine,
            sessions: Mutex::new(HashMap::new()),
            ended: Mutex::new(HashSet::new()),
            stop: AtomicBool::new(false),
        });
        let accept = {
            let shared = shared.clone();
            std::thread::spawn(move || accept_loop(listener, shared))
        };
        Self { shared, address, accept: Some(accept) }
    }

    pub fn address(&self) -> &Address {
        &self.address
    }

    /// The base URL a client of `session` uses (TCP only): `http://<addr>/s/<session>/v1`.
    pub fn base_url(&self, session: &str) -> Option<String> {
        match &self.address {
            Address::Tcp(addr) => Some(format!("http://{addr}/s/{session}/v1")),
            Address::Unix(_) => None,
        }
    }

    /// Open a session. Ids are URL path segments: letters, digits, `-`, `_`, `.`; each id is
    /// used once per endpoint.
    pub fn open_session(&self, id: &str, config: SessionConfig) -> Result<(), String> {
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
            return Err(format!("session id {id:?} must be letters, digits, '-', '_' or '.'"));
        }
        let mut sessions = lock(&self.shared.sessions);
        if sessions.contains_key(id) || lock(&self.shared.ended).contains(id) {
            return Err(format!("session `{id}` was already opened on this endpoint; use a fresh id per episode"));
        }
        sessions.insert(id.to_string(), Arc::new(Mutex::new(Session::new(id.to_string(), config))));
        Ok(())
    }

    /// The recording so far, the session still open.
    pub fn record(&self, id: &str) -> Option<SessionRecord> {
        let session = lock(&self.shared.sessions).get(id).cloned()?;
        Some(lock(&session).record())
    }

    /// End a session: later requests get `410 session_ended`. Waits for a request in flight.
    pub fn end_session(&self, id: &str) -> Option<SessionRecord> {
        let session = lock(&self.shared.sessions).remove(id)?;
        lock(&self.shared.ended).insert(id.to_string());
        Some(lock(&session).record())
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the blocked accept. Where that fails (the socket file already removed), the
        // accept thread is left blocked rather than the owner: it ends with the process.
        let woken = match &self.address {
            Address::Tcp(addr) => TcpStream::connect_timeout(addr, Duration::from_secs(1)).is_ok(),
            Address::Unix(path) => UnixStream::connect(path).is_ok(),
        };
        if let Some(accept) = self.accept.take().filter(|_| woken) {
            let _ = accept.join();
        }
        if let Address::Unix(path) = &self.address {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A connection is dropped after this long without a request.
const IDLE: Duration = Duration::from_secs(600);

fn accept_loop(listener: Listener, shared: Arc<Shared>) {
    loop {
        let stream: io::Result<Box<dyn Connection>> = match &listener {
            Listener::Tcp(l) => l.accept().map(|(s, _)| Box::new(s) as Box<dyn Connection>),
            Listener::Unix(l) => l.accept().map(|(s, _)| Box::new(s) as Box<dyn Connection>),
        };
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let shared = shared.clone();
        std::thread::spawn(move || serve_connection(stream, &shared));
    }
}

trait Connection: Read + Write + Send {
    fn split(&self) -> io::Result<Box<dyn Connection>>;
    fn set_idle(&self, idle: Duration) -> io::Result<()>;
}

impl Connection for TcpStream {
    fn split(&self) -> io::Result<Box<dyn Connection>> {
        Ok(Box::new(self.try_clone()?))
    }
    fn set_idle(&self, idle: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(idle))
    }
}

impl Connection for UnixStream {
    fn split(&self) -> io::Result<Box<dyn Connection>> {
        Ok(Box::new(self.try_clone()?))
    }
    fn set_idle(&self, idle: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(idle))
    }
}

fn serve_connection(stream: Box<dyn Connection>, shared: &Shared) {
    let Ok(mut writer) = stream.split() else { return };
    let _ = stream.set_idle(IDLE);
    let mut reader = BufReader::new(stream);
    loop {
        let request = match read_request(&mut reader, &mut writer) {
            Ok(request) => request,
            Err(ReadError::Closed) => return,
            Err(ReadError::Bad(e)) => {
                let _ = write_json(&mut writer, e.status, &e.body(), true);
                return;
            }
        };
        let close = request.wants_close();
        let written = match route(&request, shared) {
            Ok(Reply::Json(body)) => write_json(&mut writer, 200, &body, close),
            Ok(Reply::Events(events)) => write_events(&mut writer, &events, close),
            Err(e) => write_json(&mut writer, e.status, &e.body(), close),
        };
        if written.is_err() || close || shared.stop.load(Ordering::SeqCst) {
            return;
        }
    }
}

enum Reply {
    Json(Value),
    Events(Vec<Value>),
}

/// `/s/<id>/rest` → (Some(id), rest); anything else → (None, path).
fn session_path(path: &str) -> (Option<&str>, &str) {
    match path.strip_prefix("/s/").and_then(|p| p.split_once('/')) {
        Some((id, _)) => (Some(id), &path[3 + id.len()..]),
        None => (None, path),
    }
}

fn route(request: &Request, shared: &Shared) -> Result<Reply, ApiError> {
    let (in_path, rest) = session_path(&request.path);
    let id = in_path.or(request.bearer()).ok_or_else(ApiError::no_session)?;
    let session = match lock(&shared.sessions).get(id) {
        Some(s) => s.clone(),
        None if lock(&shared.ended).contains(id) => return Err(ApiError::session_ended(id)),
        None => return Err(ApiError::unknown_session(id)),
    };
    let model = &shared.engine.config.model;
    let created = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let model_json = || json!({"id": model, "object": "model", "created": created, "owned_by": "arl"});
    match (request.method.as_str(), rest.trim_end_matches('/')) {
        ("GET", "/v1/models") => Ok(Reply::Json(json!({"object": "list", "data": [model_json()]}))),
        ("GET", name) if name.strip_prefix("/v1/models/").is_some() => match name.strip_prefix("/v1/models/") {
            Some(asked) if asked == model => Ok(Reply::Json(model_json())),
            Some(asked) => Err(ApiError::model_not_found(asked, model)),
            None => unreachable!("guarded"),
        },
        ("POST", "/v1/chat/completions") => {
            let mut session = lock(&session);
            let result = chat(request, shared, &mut session, created);
            if result.is_err() {
                session.stats.refused += 1;
            }
            result
        }
        (method, "/v1/chat/completions" | "/v1/models") => Err(ApiError {
            status: 405,
            ..ApiError::invalid(
                "method_not_allowed",
                format!("{method} {} is not served; use POST for chat completions, GET for models", request.path),
            )
        }),
        (method, _) => Err(ApiError::not_found(method, &request.path)),
    }
}

fn chat(request: &Request, shared: &Shared, session: &mut Session, created: u64) -> Result<Reply, ApiError> {
    let completion = api::parse(&request.body)?;
    let model = &shared.engine.config.model;
    if &completion.model != model {
        return Err(ApiError::model_not_found(&completion.model, model));
    }
    let turn = session.complete(&completion, &shared.engine)?;
    Ok(match completion.stream {
        false => Reply::Json(reply::completion(&turn, model, created)),
        true => Reply::Events(reply::chunks(&turn, model, created, completion.stream_usage)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_comes_from_the_path() {
        assert_eq!(session_path("/s/ep-1/v1/chat/completions"), (Some("ep-1"), "/v1/chat/completions"));
        assert_eq!(session_path("/v1/models"), (None, "/v1/models"));
        assert_eq!(session_path("/s/x"), (None, "/s/x"));
    }
}
