//! Every test stays on this host: refusals are decided before any connection, and the
//! receivers are real axum servers on 127.0.0.1, reached under `AllowPrivate`.

use super::*;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::sync::{Arc, Mutex};

const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

struct Call {
    path: String,
    headers: axum::http::HeaderMap,
    body: Bytes,
}

type Calls = Arc<Mutex<Vec<Call>>>;

/// Records every request; the path chooses the answer.
async fn receive(State(calls): State<Calls>, uri: Uri, headers: axum::http::HeaderMap, body: Bytes) -> Response {
    calls.lock().unwrap().push(Call { path: uri.path().to_string(), headers, body });
    match uri.path() {
        "/fail" => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        "/redirect" => (StatusCode::FOUND, [(header::LOCATION, "/other")]).into_response(),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(60)).await;
            StatusCode::OK.into_response()
        }
        _ => StatusCode::OK.into_response(),
    }
}

async fn receiver() -> (SocketAddr, Calls) {
    let calls = Calls::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let router = Router::new().fallback(receive).with_state(calls.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });
    (address, calls)
}

fn paths(calls: &Calls) -> Vec<String> {
    calls.lock().unwrap().iter().map(|call| call.path.clone()).collect()
}

fn now_seconds() -> i64 {
    chrono::Utc::now().timestamp()
}

#[test]
fn forbidden_address_table() {
    let refused = [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "cloud metadata"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("fd00:ec2::254", "cloud metadata"),
        ("fd12:3456::1", "private"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:169.254.169.254", "cloud metadata"),
        ("::127.0.0.1", "loopback"),
        ("64:ff9b::a00:1", "private"),
        ("2002:c0a8:101::1", "private"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("100.64.0.1", "shared (CGNAT)"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("255.255.255.255", "broadcast"),
        ("192.0.2.1", "documentation"),
        ("2001:db8::1", "documentation"),
        ("198.18.0.1", "benchmarking"),
        ("240.0.0.1", "reserved"),
    ];
    for (ip, reason) in refused {
        assert_eq!(forbidden_address(ip.parse().unwrap()), Some(reason), "{ip}");
    }
    for ip in ["93.184.216.34", "2606:4700::1", "::ffff:93.184.216.34", "64:ff9b::5db8:d822", "8.8.8.8"] {
        assert_eq!(forbidden_address(ip.parse().unwrap()), None, "{ip}");
    }
}

#[test]
fn policy_reads_the_operator_setting() {
    for setting in ["1", "true", "yes", "TRUE", " yes "] {
        assert_eq!(AddressPolicy::from_setting(Some(setting)), AddressPolicy::AllowPrivate, "{setting}");
    }
    for setting in [None, Some(""), Some("0"), Some("false"), Some("no"), Some("on")] {
        assert_eq!(AddressPolicy::from_setting(setting), AddressPolicy::PublicOnly, "{setting:?}");
    }
}

#[test]
fn check_url_refuses_bad_syntax() {
    let long = format!("http://example.com/{}", "a".repeat(URL_LENGTH_MAX_BYTES));
    for (url, problem) in [
        ("ftp://example.com/hook", "http or https"),
        ("file:///etc/passwd", "http or https"),
        ("http://", "empty host"),
        ("http://user:pass@example.com/", "user name or password"),
        ("http://user@example.com/", "user name or password"),
        ("not a url", "does not parse"),
        (long.as_str(), "2048"),
    ] {
        let error = check_url(url).unwrap_err();
        assert_eq!(error.code, models::error::Code::InvalidArgument, "{url}");
        assert_eq!(error.extras.get("field"), Some(&json!("url")), "{url}");
        assert!(error.message.contains(problem), "{url}: {}", error.message);
    }
    assert_eq!(check_url("https://example.com:8443/hook?x=1").unwrap().as_str(), "https://example.com:8443/hook?x=1");
}

#[tokio::test]
async fn resolve_checked_refuses_private_targets_under_public_only() {
    // IP literals need no lookup; `localhost` resolves locally (/etc/hosts) to loopback.
    for (url, reason) in [
        ("http://127.0.0.1/", "loopback"),
        ("http://10.0.0.1/", "private"),
        ("http://169.254.169.254/latest/meta-data", "cloud metadata"),
        ("http://[::1]:8080/", "loopback"),
        ("http://localhost:9/", "loopback"),
    ] {
        let error = resolve_checked(&check_url(url).unwrap(), AddressPolicy::PublicOnly).await.unwrap_err();
        assert_eq!(error.extras.get("field"), Some(&json!("url")), "{url}");
        assert!(error.message.contains(reason) && error.message.contains("which hooks may not call"), "{url}");
    }
}

#[tokio::test]
async fn allow_private_still_refuses_metadata_link_local_and_unspecified() {
    for url in ["http://169.254.169.254/", "http://169.254.1.1/", "http://0.0.0.0:80/", "http://[fd00:ec2::254]/"] {
        assert!(resolve_checked(&check_url(url).unwrap(), AddressPolicy::AllowPrivate).await.is_err(), "{url}");
    }
    let loopback = resolve_checked(&check_url("http://127.0.0.1:9/").unwrap(), AddressPolicy::AllowPrivate).await;
    assert_eq!(loopback.unwrap(), vec![SocketAddr::from(([127, 0, 0, 1], 9))]);
}

#[tokio::test]
async fn public_only_send_to_loopback_is_refused_and_never_arrives() {
    let (address, calls) = receiver().await;
    let outcome =
        send(&format!("http://{address}/hook"), SECRET, "msg_1", now_seconds(), &json!({}), AddressPolicy::PublicOnly)
            .await;
    assert!(matches!(&outcome, Outcome::Refused { reason } if reason.contains("loopback")), "{outcome:?}");
    assert!(paths(&calls).is_empty());
}

#[tokio::test]
async fn delivered_post_is_signed_and_carries_the_body() {
    let (address, calls) = receiver().await;
    let body = json!({ "event": "work.ready", "queue": "triage", "pending": 3 });
    let outcome =
        send(&format!("http://{address}/hook"), SECRET, "msg_42", now_seconds(), &body, AddressPolicy::AllowPrivate)
            .await;
    assert_eq!(outcome, Outcome::Delivered { status: 200 });
    let calls = calls.lock().unwrap();
    assert_eq!(calls.len(), 1);
    let call = &calls[0];
    assert_eq!(call.path, "/hook");
    standardwebhooks::Webhook::new(SECRET).unwrap().verify(&call.body, &call.headers).unwrap();
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&call.body).unwrap(), body);
    assert_eq!(call.headers["webhook-id"], "msg_42");
    assert_eq!(call.headers[header::CONTENT_TYPE], "application/json");
    assert_eq!(call.headers[header::USER_AGENT], USER_AGENT);
    assert!(USER_AGENT.starts_with("switchboard-hooks/"));
}

#[tokio::test]
async fn the_client_connects_to_the_pinned_address_without_resolving() {
    // `hooks.invalid` can never resolve; delivery proves the client used the pinned address
    // and did no lookup of its own.
    let (address, calls) = receiver().await;
    let url = check_url(&format!("http://hooks.invalid:{}/pinned", address.port())).unwrap();
    let headers = signed_headers(SECRET, "msg_pin", now_seconds(), b"{}").unwrap();
    let outcome = post_pinned(&url, &[address], headers, b"{}".to_vec(), HOOK_TIMEOUT).await;
    assert_eq!(outcome, Outcome::Delivered { status: 200 });
    assert_eq!(paths(&calls), ["/pinned"]);
}

/// Names each ClientHello asked for (its SNI), in arrival order.
type ServerNames = Arc<Mutex<Vec<Option<String>>>>;

/// A TLS receiver on 127.0.0.1 that records the server name each ClientHello carries, then
/// answers with a self-signed certificate for `name` (which no public root vouches for).
async fn tls_receiver(name: &str) -> (SocketAddr, ServerNames) {
    let certified = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certified.signing_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key)
        .unwrap();
    let config = Arc::new(config);
    let names = ServerNames::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let seen = names.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), stream);
            let Ok(start) = acceptor.await else { continue };
            seen.lock().unwrap().push(start.client_hello().server_name().map(str::to_string));
            // The client refuses the certificate; the handshake's end is not this test's business.
            let _ = start.into_stream(config.clone()).await;
        }
    });
    (address, names)
}

#[tokio::test]
async fn the_guard_accepts_https_hooks_and_checks_their_addresses_like_http() {
    let public = check_url("https://93.184.216.34/hook").unwrap();
    let pinned = resolve_checked(&public, AddressPolicy::PublicOnly).await.unwrap();
    assert_eq!(pinned, vec![SocketAddr::from(([93, 184, 216, 34], 443))], "https pins port 443 by default");
    let private = check_url("https://10.0.0.1:8443/hook").unwrap();
    let error = resolve_checked(&private, AddressPolicy::PublicOnly).await.unwrap_err();
    assert!(error.message.contains("private"), "{}", error.message);
}

#[tokio::test]
async fn an_https_hook_connects_to_the_pinned_address_and_keeps_the_url_host_for_tls() {
    // `hooks.invalid` can never resolve, so reaching the receiver proves the pin; the server name
    // in the ClientHello proves TLS still names (and checks the certificate of) the URL's host.
    let (address, names) = tls_receiver("hooks.invalid").await;
    let url = check_url(&format!("https://hooks.invalid:{}/pinned", address.port())).unwrap();
    let headers = signed_headers(SECRET, "msg_tls", now_seconds(), b"{}").unwrap();
    let outcome = post_pinned(&url, &[address], headers, b"{}".to_vec(), HOOK_TIMEOUT).await;
    assert_eq!(*names.lock().unwrap(), [Some("hooks.invalid".to_string())]);
    // A self-signed certificate is not in the public roots: refused, and the reason says why.
    assert!(
        matches!(&outcome, Outcome::Failed { reason } if reason.contains("TLS") && reason.contains("UnknownIssuer")),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn an_unpinned_name_is_never_resolved_by_the_client() {
    use reqwest::dns::Resolve;
    assert!(PinnedOnly.resolve("localhost".parse().unwrap()).await.is_err());
    // A pin with no address leaves nothing to connect to, rather than falling back to DNS.
    let url = check_url("http://localhost:9/").unwrap();
    let headers = signed_headers(SECRET, "msg_unpinned", now_seconds(), b"{}").unwrap();
    let outcome = post_pinned(&url, &[], headers, b"{}".to_vec(), HOOK_TIMEOUT).await;
    assert!(matches!(outcome, Outcome::Failed { .. }), "{outcome:?}");
}

#[tokio::test]
async fn a_500_answer_is_a_failure_without_the_body() {
    let (address, calls) = receiver().await;
    let outcome = send(
        &format!("http://{address}/fail"),
        SECRET,
        "msg_2",
        now_seconds(),
        &json!({}),
        AddressPolicy::AllowPrivate,
    )
    .await;
    assert_eq!(outcome, Outcome::Failed { reason: "HTTP 500".to_string() });
    assert_eq!(paths(&calls), ["/fail"]);
}

#[tokio::test]
async fn a_redirect_is_a_failure_and_is_not_followed() {
    let (address, calls) = receiver().await;
    let url = format!("http://{address}/redirect");
    let outcome = send(&url, SECRET, "msg_3", now_seconds(), &json!({}), AddressPolicy::AllowPrivate).await;
    assert!(matches!(&outcome, Outcome::Failed { reason } if reason.contains("302")), "{outcome:?}");
    assert_eq!(paths(&calls), ["/redirect"], "the redirect target must not be called");
}

#[tokio::test]
async fn a_receiver_slower_than_the_timeout_is_a_failure() {
    let (address, calls) = receiver().await;
    let url = format!("http://{address}/slow");
    let outcome = send_within(
        &url,
        SECRET,
        "msg_4",
        now_seconds(),
        &json!({}),
        AddressPolicy::AllowPrivate,
        Duration::from_millis(200),
    )
    .await;
    assert!(matches!(&outcome, Outcome::Failed { reason } if reason.contains("timed out")), "{outcome:?}");
    assert_eq!(paths(&calls), ["/slow"]);
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_without_a_request() {
    let (address, calls) = receiver().await;
    let body = json!({ "padding": "x".repeat(HOOK_BODY_MAX_BYTES) });
    let outcome =
        send(&format!("http://{address}/hook"), SECRET, "msg_5", now_seconds(), &body, AddressPolicy::AllowPrivate)
            .await;
    assert!(matches!(&outcome, Outcome::Refused { reason } if reason.contains("4096")), "{outcome:?}");
    assert!(paths(&calls).is_empty());
}

#[tokio::test]
async fn bad_urls_secrets_and_ids_are_refused_without_a_request() {
    let (address, calls) = receiver().await;
    let url = format!("http://{address}/hook");
    let policy = AddressPolicy::AllowPrivate;
    for outcome in [
        send("ftp://127.0.0.1/hook", SECRET, "msg_6", now_seconds(), &json!({}), policy).await,
        send(&url, "whsec_", "msg_6", now_seconds(), &json!({}), policy).await,
        send(&url, "whsec_not base64!", "msg_6", now_seconds(), &json!({}), policy).await,
        send(&url, SECRET, "", now_seconds(), &json!({}), policy).await,
        send(&url, SECRET, "msg\n6", now_seconds(), &json!({}), policy).await,
    ] {
        assert!(matches!(outcome, Outcome::Refused { .. }), "{outcome:?}");
    }
    assert!(paths(&calls).is_empty());
}
