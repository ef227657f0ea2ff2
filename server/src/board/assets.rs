//! The board's own stylesheet and script, compiled into the binary (no build step, no CDN, no
//! third-party code) and served under `/assets/` with cache headers. CSP stays
//! `default-src 'self'`, so nothing is inline: pages link these two files only.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

const CSS: &str = include_str!("../../assets/board.css");
const JS: &str = include_str!("../../assets/board.js");
/// An hour: long enough to spare reloads, short enough that an upgrade shows up the same day.
const CACHE_CONTROL: &str = "public, max-age=3600";

/// `GET /assets/{file}`: `board.css` or `board.js`; anything else is 404.
pub async fn serve(Path(file): Path<String>) -> Response {
    let (body, content_type) = match file.as_str() {
        "board.css" => (CSS, "text/css; charset=utf-8"),
        "board.js" => (JS, "text/javascript; charset=utf-8"),
        _ => return (StatusCode::NOT_FOUND, "not found\n").into_response(),
    };
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, CACHE_CONTROL)], body).into_response()
}
