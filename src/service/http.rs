//! The HTTP API of a service: one handler per endpoint (docs/service.md lists them).
//!
//! Every answer but `/metrics` is JSON; an error is `{"error": "…"}` with its status: 400 for
//! a malformed body or a bad setting, 401 without the token, 403 for a source the rule refuses,
//! 404 for an unknown stream or path, 409 for an id in use, 413 for a body over 64 KiB. A
//! handler never panics whatever the request; blocking work (starting a stream, finishing its
//! files) runs on tokio's blocking threads, never on the runtime's.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::publish::settings::Secret;

use super::ServiceError;
use super::metrics::Metrics;
use super::streams::{Origin, Streams};

/// The largest request body read.
pub(crate) const MAX_BODY_BYTES: usize = 64 * 1024;

/// How long a request body may take to arrive.
const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// What the handlers share.
pub(super) struct Api {
    pub streams: Arc<Streams>,
    pub metrics: Arc<Metrics>,
    /// The bearer token, when one is set.
    pub token: Option<Secret>,
    /// `/readyz`: a stream is ready when its last frame is this recent.
    pub ready_within: Duration,
}

type Shared = State<Arc<Api>>;

/// The routes.
pub(super) fn router(api: Arc<Api>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/streams", get(list).post(add))
        .route("/streams/{id}", get(one).delete(remove))
        .route(
            "/streams/{id}/settings",
            get(stream_settings).patch(change_stream_settings),
        )
        .route("/settings", get(settings).patch(change_settings))
        .fallback(unknown_path)
        .with_state(api)
}

/// An error answer.
fn error(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(json!({ "error": message }))).into_response()
}

impl IntoResponse for ServiceError {
    fn into_response(self) -> Response {
        let status = match &self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Refused(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::Config(_) | Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        error(status, &crate::redact::text(&self.to_string()))
    }
}

/// A request refused before its handler's work: the status and why.
struct Refusal(StatusCode, String);

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut r = error(self.0, &self.1);
        if self.0 == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
        }
        r
    }
}

/// `Err(401)` unless the request carries `Authorization: Bearer <token>` (when a token is set).
fn authorize(api: &Api, headers: &HeaderMap) -> Result<(), Refusal> {
    let Some(token) = &api.token else {
        return Ok(());
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if same(given.as_bytes(), token.expose().as_bytes()) {
        return Ok(());
    }
    Err(Refusal(
        StatusCode::UNAUTHORIZED,
        "a bearer token is required (Authorization: Bearer <service.token>)".into(),
    ))
}

/// `a == b` in a time that depends on their lengths only.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The body, at most [`MAX_BODY_BYTES`], within [`BODY_TIMEOUT`].
async fn read_body(body: Body) -> Result<Bytes, Refusal> {
    let too_large = || {
        Refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is over {MAX_BODY_BYTES} bytes"),
        )
    };
    // A Content-Length over the limit is refused before anything is read.
    if axum::body::HttpBody::size_hint(&body).lower() > MAX_BODY_BYTES as u64 {
        return Err(too_large());
    }
    match tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, MAX_BODY_BYTES)).await {
        Err(_) => Err(Refusal(
            StatusCode::REQUEST_TIMEOUT,
            "the request body did not arrive in time".into(),
        )),
        Ok(Err(e)) if e.to_string().contains("length limit") => Err(too_large()),
        Ok(Err(e)) => Err(Refusal(
            StatusCode::BAD_REQUEST,
            format!("cannot read the request body: {e}"),
        )),
        Ok(Ok(bytes)) => Ok(bytes),
    }
}

/// The body as JSON of type `T` (unknown keys refused where `T` says so).
async fn json_body<T: serde::de::DeserializeOwned>(body: Body) -> Result<T, Refusal> {
    let bytes = read_body(body).await?;
    serde_json::from_slice(&bytes)
        .map_err(|e| Refusal(StatusCode::BAD_REQUEST, format!("malformed JSON: {e}")))
}

/// Runs blocking work off the runtime's thread.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ServiceError> + Send + 'static,
) -> Result<T, ServiceError> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(ServiceError::Internal(format!("the request failed: {e}"))))
}

/// `GET /healthz`: the process serves (no token needed).
async fn healthz() -> Response {
    axum::Json(json!({ "status": "ok" })).into_response()
}

/// `GET /readyz`: 200 when every stream delivered a frame within `source.timeout_seconds`, else
/// 503 naming the ones that did not.
async fn readyz(State(api): Shared, headers: HeaderMap) -> Response {
    if let Err(r) = authorize(&api, &headers) {
        return r.into_response();
    }
    let unready = api.streams.unready(api.ready_within);
    if unready.is_empty() {
        return axum::Json(json!({ "ready": true })).into_response();
    }
    let streams: Vec<Value> = unready
        .into_iter()
        .map(|(id, why)| json!({ "id": id, "why": why }))
        .collect();
    (
        StatusCode::SERVICE_UNAVAILABLE,
        axum::Json(json!({ "ready": false, "streams": streams })),
    )
        .into_response()
}

/// `GET /metrics`: OpenMetrics when the scraper asks for it (Prometheus does), else Prometheus
/// text 0.0.4.
async fn metrics(State(api): Shared, headers: HeaderMap) -> Response {
    if let Err(r) = authorize(&api, &headers) {
        return r.into_response();
    }
    let openmetrics = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/openmetrics-text"));
    match api.metrics.encode(openmetrics) {
        Ok((text, kind)) => ([(header::CONTENT_TYPE, kind)], text).into_response(),
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("cannot encode the metrics: {e}"),
        ),
    }
}

/// `GET /streams`.
async fn list(State(api): Shared, headers: HeaderMap) -> Response {
    if let Err(r) = authorize(&api, &headers) {
        return r.into_response();
    }
    axum::Json(api.streams.list()).into_response()
}

/// `GET /streams/{id}`.
async fn one(State(api): Shared, headers: HeaderMap, Path(id): Path<String>) -> Response {
    if let Err(r) = authorize(&api, &headers) {
        return r.into_response();
    }
    match api.streams.list().into_iter().find(|r| r.id == id) {
        Some(row) => axum::Json(row).into_response(),
        None => ServiceError::NotFound(format!("no stream `{id}`")).into_response(),
    }
}

/// The body of `POST /streams`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddRequest {
    source: String,
    id: Option<String>,
}

/// `POST /streams` `{"source": "…", "id": "…"}`: 201 with the id.
async fn add(State(api): Shared, headers: HeaderMap, body: Body) -> Response {
    if let Err(r) = authorize(&api, &headers) {
        return r.into_response();
    }
    let request: AddRequest = match json_body(body).await {
        Ok(r) => r,
        Err(r) => return r.into_response(),
    };
    let streams = Arc::clone(&api.streams);
    let added =
        blocking(move || streams.add(&request.source, request.id.as_deref(), Origin::Client)).await;
    match added {
        Ok(id) => (StatusCode::CREATED, axum::Json(json!({ "id": id }))).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `DELETE /streams/{id}`: its files finished as on Ctrl+C, then 200 with its summary.
async fn remove(State(api): Shared, headers: HeaderMap, Path(id): Path<String>) -> Response {
    if let Err(r) = authorize(&api, &headers) {
        return r.into_response();
    }
    let streams = Arc::clone(&api.streams);
    match blocking(move || streams.remove(&id)).await {
        Ok(summary) => axum::Json(summary).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /settings`: every setting of the service (secrets left out).
async fn settings(State(api): Shared, headers: HeaderMap) -> Response {
    if let Err(r) = authorize(&api, &headers) {
        return r.into_response();
    }
    match serde_json::to_value(api.streams.settings()) {
        Ok(mut settings) => {
            masked(&mut settings);
            axum::Json(settings).into_response()
        }
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("cannot write the settings: {e}"),
        ),
    }
}

/// Every string of `v` with its secrets masked (a login in `source.default`, `publish.url`);
/// the password and the token are never serialised at all.
fn masked(v: &mut Value) {
    match v {
        Value::String(s) => *s = crate::redact::text(s),
        Value::Array(items) => items.iter_mut().for_each(masked),
        Value::Object(map) => map.values_mut().for_each(masked),
        _ => {}
    }
}

/// `GET /streams/{id}/settings`: the analysis settings the stream runs with.
async fn stream_settings(
    State(api): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(r) = authorize(&api, &headers) {
        return r.into_response();
    }
    match api.streams.stream_settings(&id) {
        Ok(ops) => axum::Json(ops).into_response(),
        Err(e) => e.into_response(),
    }
}

/// A `PATCH` body: `{"section.key": value, …}`, the keys of `--set`.
async fn changes(body: Body) -> Result<Vec<(String, toml::Value)>, Refusal> {
    let map: serde_json::Map<String, Value> = json_body(body).await?;
    if map.is_empty() {
        return Err(Refusal(
            StatusCode::BAD_REQUEST,
            "no settings given: {\"section.key\": value, …}".into(),
        ));
    }
    map.into_iter()
        .map(|(key, value)| match toml::Value::try_from(&value) {
            Ok(v) => Ok((key, v)),
            Err(_) => Err(Refusal(
                StatusCode::BAD_REQUEST,
                format!("invalid value for {key}: {value} is not a settings value"),
            )),
        })
        .collect()
}

/// `PATCH /settings`: analysis settings of every stream and of streams added later, from the
/// next frame.
async fn change_settings(State(api): Shared, headers: HeaderMap, body: Body) -> Response {
    if let Err(r) = authorize(&api, &headers) {
        return r.into_response();
    }
    let changes = match changes(body).await {
        Ok(c) => c,
        Err(r) => return r.into_response(),
    };
    match api.streams.change_settings(&changes) {
        Ok(ops) => axum::Json(ops).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `PATCH /streams/{id}/settings`: analysis settings of one stream, from its next frame.
async fn change_stream_settings(
    State(api): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    if let Err(r) = authorize(&api, &headers) {
        return r.into_response();
    }
    let changes = match changes(body).await {
        Ok(c) => c,
        Err(r) => return r.into_response(),
    };
    match api.streams.change_stream_settings(&id, &changes) {
        Ok(ops) => axum::Json(ops).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Any other path.
async fn unknown_path(State(api): Shared, headers: HeaderMap) -> Response {
    if let Err(r) = authorize(&api, &headers) {
        return r.into_response();
    }
    error(
        StatusCode::NOT_FOUND,
        "no such endpoint (/healthz, /readyz, /metrics, /streams, /settings)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_shown_have_their_logins_masked() {
        let mut v = json!({"source": {"default": "rtsp://admin:pw@cam/x"}, "n": 3});
        masked(&mut v);
        assert_eq!(
            v,
            json!({"source": {"default": "rtsp://***@cam/x"}, "n": 3})
        );
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
        assert!(!same(b"", b"a"));
    }
}
