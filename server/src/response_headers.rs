//! Headers every response carries, on the operator API, MCP and the board alike, and the error
//! envelope on a body the framework refused before any handler ran.
//!
//! Its own module so both routers (`app` and `board`) can layer it without either depending on
//! the other. It must not look at requests or decide anything but headers and that one envelope.

use crate::state::BODY_LIMIT_BYTES;
use crate::wire::ApiError;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use models::error::{Code, Error};

/// Headers every response carries, and the error envelope on bodies the framework refused
/// before a handler ran (an oversized body is 413 `payload_too_large`).
pub(crate) async fn security_headers(response: Response) -> Response {
    let mut response = if response.status() == StatusCode::PAYLOAD_TOO_LARGE && !is_json(&response) {
        ApiError(Error::new(Code::PayloadTooLarge, format!("request body exceeds {BODY_LIMIT_BYTES} bytes")))
            .into_response()
    } else {
        response
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'self'; frame-ancestors 'none'"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}

fn is_json(response: &Response) -> bool {
    response.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/json"))
}
