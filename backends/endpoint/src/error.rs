//! Errors as OpenAI sends them: an HTTP status and `{"error": {"message", "type", "param",
//! "code"}}`, one line naming the problem and the fix.

use serde_json::{Value, json};

/// One refused request. The server answers it and goes on.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub status: u16,
    /// OpenAI's `type`: `invalid_request_error`, `authentication_error`, `not_found_error`,
    /// `server_error`.
    pub kind: &'static str,
    /// A machine-readable code (`model_not_found`, `session_ended`, `context_length_exceeded`, …).
    pub code: &'static str,
    pub message: String,
    pub param: Option<String>,
}

impl ApiError {
    fn new(status: u16, kind: &'static str, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, kind, code, message: message.into(), param: None }
    }

    /// A request the client must change.
    pub fn invalid(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(400, "invalid_request_error", code, message)
    }

    pub fn with_param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    pub fn unknown_session(id: &str) -> Self {
        Self::new(
            401,
            "authentication_error",
            "unknown_session",
            format!("no session `{id}` is open on this endpoint; use the base URL (…/s/<session>/v1) or API key you were given"),
        )
    }

    pub fn no_session() -> Self {
        Self::new(
            401,
            "authentication_error",
            "missing_session",
            "no session id: use a base URL of the form http://<host>/s/<session>/v1 or pass the session id as the API key",
        )
    }

    pub fn session_ended(id: &str) -> Self {
        Self::new(410, "invalid_request_error", "session_ended", format!("session `{id}` has ended; its episode is over, start a new one"))
    }

    pub fn model_not_found(asked: &str, served: &str) -> Self {
        Self::new(
            404,
            "invalid_request_error",
            "model_not_found",
            format!("model `{asked}` is not served here; this endpoint serves `{served}`"),
        )
        .with_param("model")
    }

    pub fn not_found(method: &str, path: &str) -> Self {
        Self::new(
            404,
            "not_found_error",
            "unknown_route",
            format!("no route {method} {path}; this endpoint serves POST /v1/chat/completions and GET /v1/models"),
        )
    }

    pub fn server(message: impl Into<String>) -> Self {
        Self::new(500, "server_error", "internal_error", message)
    }

    /// The body OpenAI's SDKs parse.
    pub fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, self.code, self.message)
    }
}

impl std::error::Error for ApiError {}
