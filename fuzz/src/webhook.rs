//! Target `webhook`: the ingest route's headers and signature check (`POST /ingest/{id}`,
//! contract §4), and `standardwebhooks` verification under the server's own timestamp guard.
//!
//! The first byte picks the mode; the rest is split at newlines into `webhook-id`,
//! `webhook-timestamp`, `webhook-signature` and the body:
//! - 0: all four as given (the fuzzer forges a delivery);
//! - 1: the body and id as given, timestamped now and signed with the webhook's secret (a
//!   genuine delivery with arbitrary content and delivery id);
//! - 2: as 1, then the fuzzed signature line appended to the real one, and the fuzzed timestamp
//!   used when it parses (replays, stale and future deliveries);
//! - 3: `Webhook::verify` alone on the same headers, timestamps limited as `ingest` limits them
//!   (the library subtracts unchecked, which `ingest` guards against before calling it).
//!
//! Laws: never 5xx; a forged signature is never accepted (modes 0 and 3 succeed only with a
//! signature that really is the secret's); a genuine delivery (mode 1) is always accepted (2xx),
//! whatever its content (issue #14: a verified delivery is never refused for what it says).

use crate::world::{WEBHOOK_SECRET, World, assert_not_server_error};
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Request};
use standardwebhooks::Webhook;

/// What `ingest` tolerates between the sender's clock and ours; the library's own is the same.
const TOLERANCE_SECONDS: i64 = 5 * 60;

pub fn run(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    let mut lines = rest.splitn(4, |&b| b == b'\n');
    let (id, timestamp, signature) =
        (lines.next().unwrap_or(b""), lines.next().unwrap_or(b""), lines.next().unwrap_or(b""));
    let body = lines.next().unwrap_or(b"");
    let verifier = Webhook::new(WEBHOOK_SECRET).unwrap_or_else(|e| panic!("harness: secret: {e}"));
    let now = chrono::Utc::now().timestamp();
    let genuine = |id: &str, at: i64| verifier.sign(id, at, body).ok();

    let mut headers = HeaderMap::new();
    let mut set = |name: &'static str, value: &[u8]| {
        if let Ok(value) = HeaderValue::from_bytes(value) {
            headers.insert(name, value);
        }
    };
    match mode % 4 {
        0 | 3 => {
            set("webhook-id", id);
            set("webhook-timestamp", timestamp);
            set("webhook-signature", signature);
        }
        1 => {
            set("webhook-id", id);
            set("webhook-timestamp", now.to_string().as_bytes());
            let id_text = String::from_utf8_lossy(id);
            if let Some(signed) = genuine(&id_text, now) {
                set("webhook-signature", signed.as_bytes());
            }
        }
        _ => {
            let at = std::str::from_utf8(timestamp).ok().and_then(|t| t.parse::<i64>().ok()).unwrap_or(now);
            set("webhook-id", id);
            set("webhook-timestamp", at.to_string().as_bytes());
            let signed = genuine(&String::from_utf8_lossy(id), at).unwrap_or_default();
            set("webhook-signature", [signed.as_bytes(), b" ", signature].concat().as_slice());
        }
    }
    let forged = |headers: &HeaderMap| !signed_by_secret(&verifier, headers, body);

    if mode % 4 == 3 {
        let fresh = header_text(&headers, "webhook-timestamp")
            .and_then(|t| t.parse::<i64>().ok())
            .is_some_and(|sent| now.checked_sub(sent).is_some_and(|skew| skew.abs() <= TOLERANCE_SECONDS));
        if fresh && verifier.verify(body, &headers).is_ok() {
            assert!(!forged(&headers), "verify accepted a signature the secret did not make");
        }
        return;
    }

    let world = World::new();
    let mut request = Request::post(format!("/ingest/{}", world.webhook_id))
        .body(Body::from(body.to_vec()))
        .unwrap_or_else(|e| panic!("harness: request: {e}"));
    *request.headers_mut() = headers.clone();
    let answer = world.send(request);
    let what = format!("ingest (mode {})", mode % 4);
    assert_not_server_error(&what, &answer);
    if answer.status.is_success() {
        assert!(!forged(&headers), "{what} accepted a forged delivery: {}", answer.status);
    }
    // Standard Webhooks headers are visible ASCII; anything else cannot be read back as text by
    // any receiver, so such an id is a forgery of the format, not a genuine delivery.
    let well_formed =
        HeaderValue::from_bytes(id).is_ok_and(|id| id.to_str().is_ok()) && std::str::from_utf8(body).is_ok();
    if mode % 4 == 1 && well_formed {
        assert!(
            answer.status.is_success(),
            "{what}: a genuine delivery was refused with {}: {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        );
    }
}

fn header_text<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether one of the `v1,` signatures in the headers is the secret's over (id, timestamp, body):
/// the oracle, computed with `sign` rather than `verify`.
fn signed_by_secret(verifier: &Webhook, headers: &HeaderMap, body: &[u8]) -> bool {
    let (Some(id), Some(timestamp), Some(signatures)) = (
        header_text(headers, "webhook-id"),
        header_text(headers, "webhook-timestamp").and_then(|t| t.parse::<i64>().ok()),
        header_text(headers, "webhook-signature"),
    ) else {
        return false;
    };
    let Ok(expected) = verifier.sign(id, timestamp, body) else { return false };
    signatures.split(' ').any(|candidate| candidate == expected)
}
