//! The operator CLI's HTTP client: builds operator-API URLs, sends one request with the bearer,
//! and sorts every outcome into the three the contract distinguishes (ok, refused, usage), plus
//! "could not ask at all". It must never retry a write: a PUT or DELETE that timed out may have
//! landed, and the user is the one to decide whether to send it again.

use reqwest::{Method, StatusCode, Url};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// A CLI request that has not answered in this long is reported rather than waited on.
const REQUEST_TIMEOUT_SECONDS: u64 = 30;
/// Most characters of a non-JSON error body echoed back to the user.
const RAW_ERROR_ECHO_CHARS_MAX: usize = 200;

/// Why a command did not succeed, one variant per exit status the contract names.
#[derive(Debug, PartialEq)]
pub enum Failure {
    /// Exit 2: the command line or the environment is wrong; nothing was sent.
    Usage(String),
    /// Exit 1: the server answered non-2xx; printed `code: message`.
    Refused { code: String, message: String },
    /// Exit 1: the server could not be asked, or answered something that is not the API.
    Trouble(String),
}

/// The certificates of a `--ca-cert` PEM file: a private CA the CLI trusts besides the public roots.
pub struct CaFile {
    certificates: Vec<rustls::pki_types::CertificateDer<'static>>,
}

impl CaFile {
    /// Reads and parses the file; any problem is a usage error naming the flag and the path.
    pub fn read(path: &Path) -> Result<CaFile, Failure> {
        let problem =
            |what: String| Failure::Usage(format!("--ca-cert (SWITCHBOARD_CA_CERT) {}: {what}", path.display()));
        let pem = std::fs::read(path).map_err(|e| problem(format!("cannot be read ({e})")))?;
        let certificates = crate::tls::read_pem_certificates(&pem).map_err(problem)?;
        Ok(CaFile { certificates })
    }
}

/// The operator API at one base URL, with one bearer.
pub struct Api {
    http: reqwest::Client,
    base: Url,
    token: String,
}

impl Api {
    /// `base` is `--url`; `ca_certificates` the PEM text of `--ca-cert`, trusted besides the
    /// public roots (a private CA). https is verified as usual: name and chain, never skipped.
    pub fn new(base: &str, token: &str, ca_certificates: Option<&CaFile>) -> Result<Api, Failure> {
        let base = Url::parse(base).map_err(|e| {
            Failure::Usage(format!("--url (SWITCHBOARD_URL) {base:?} is not a URL ({e}); e.g. http://127.0.0.1:8080"))
        })?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(Failure::Usage(format!(
                "--url (SWITCHBOARD_URL) {base} must start with http:// or https://, not {}://",
                base.scheme()
            )));
        }
        if base.cannot_be_a_base() {
            return Err(Failure::Usage(format!("--url (SWITCHBOARD_URL) {base} cannot carry API paths")));
        }
        let extra_roots = ca_certificates.map(|file| file.certificates.as_slice()).unwrap_or_default();
        let tls = crate::tls::client_config(extra_roots)
            .map_err(|e| Failure::Usage(format!("--ca-cert (SWITCHBOARD_CA_CERT): {e}")))?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(REQUEST_TIMEOUT_SECONDS))
            .tls_backend_preconfigured(tls)
            .build()
            .map_err(|e| Failure::Trouble(format!("cannot set up the HTTP client: {e}")))?;
        Ok(Api { http, base, token: token.to_string() })
    }

    /// `base/api/v1/<segments…>?<query>`. Each segment is percent-encoded on its own, so a scope
    /// such as `endpoint:triage-bot` travels as written and nothing in it can change the route.
    pub fn url(&self, segments: &[&str], query: &[(&str, &str)]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(["api", "v1"]).extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    /// Sends one request; the body of a 2xx answer as text (empty for 204), or why not.
    pub async fn send(&self, method: Method, url: Url, body: Option<&Value>) -> Result<String, Failure> {
        let mut request = self.http.request(method.clone(), url.clone()).bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| unreachable_failure(&self.base, &method, &url, &e))?;
        let status = response.status();
        let retry_after =
            response.headers().get(reqwest::header::RETRY_AFTER).and_then(|v| v.to_str().ok()).map(str::to_string);
        let text = response
            .text()
            .await
            .map_err(|e| Failure::Trouble(format!("{method} {url}: the answer was cut off: {e}")))?;
        if status.is_success() { Ok(text) } else { Err(refusal(status, &text, retry_after.as_deref())) }
    }

    /// `send`, then prints the answer: with `--json` verbatim, as the server wrote it (never
    /// read, so a newer server's answer always prints); otherwise read as the wire type `T`
    /// (`crate::wire_types`) and drawn by `draw`.
    pub async fn send_and_show<T: serde::de::DeserializeOwned>(
        &self,
        (method, url, body): (Method, Url, Option<&Value>),
        json: bool,
        draw: impl FnOnce(T) -> String,
    ) -> Result<(), Failure> {
        let text = self.send(method.clone(), url.clone(), body).await?;
        if json {
            super::render::emit(&text);
            return Ok(());
        }
        super::render::emit(&draw(read_answer(&method, &url, &text)?));
        Ok(())
    }

    /// Sends one request and parses a JSON answer.
    pub async fn send_json(&self, method: Method, url: Url, body: Option<&Value>) -> Result<(String, Value), Failure> {
        self.send_and_read(method, url, body).await
    }

    /// The answer's text and the answer read as `T` (a wire type, or any JSON as `Value`).
    pub async fn send_and_read<T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        body: Option<&Value>,
    ) -> Result<(String, T), Failure> {
        let text = self.send(method.clone(), url.clone(), body).await?;
        let answer = read_answer(&method, &url, &text)?;
        Ok((text, answer))
    }
}

/// An answer's text read as `T`: any JSON, or a wire type of `crate::wire_types`.
fn read_answer<T: serde::de::DeserializeOwned>(method: &Method, url: &Url, text: &str) -> Result<T, Failure> {
    serde_json::from_str(text).map_err(|e| {
        Failure::Trouble(format!("{method} {url}: the answer is not what this CLI reads ({e}); is this switchboard?"))
    })
}

fn unreachable_failure(base: &Url, method: &Method, url: &Url, error: &reqwest::Error) -> Failure {
    // A refused certificate is not a server that is down: say so, and how to trust a private CA.
    if let Some(problem) = crate::tls::tls_problem(error) {
        Failure::Trouble(format!(
            "TLS with switchboard at {base} failed: {problem}; if its certificate is signed by a \
             private CA, pass that CA with --ca-cert PATH (or SWITCHBOARD_CA_CERT)"
        ))
    } else if error.is_connect() {
        Failure::Trouble(format!(
            "cannot reach switchboard at {base}: is `switchboard serve` running there? \
             (set SWITCHBOARD_URL to its address; {error})"
        ))
    } else if error.is_timeout() {
        Failure::Trouble(format!(
            "{method} {url}: no answer within {REQUEST_TIMEOUT_SECONDS} s; a write may still have \
             been applied, so check with `show` before repeating it"
        ))
    } else {
        Failure::Trouble(format!("{method} {url}: {error}"))
    }
}

/// A non-2xx answer as `code: message`, from the error envelope `{error, code, ...extras}`.
/// The offending field and the wait before a retry are extras worth a user's eyes.
fn refusal(status: StatusCode, text: &str, retry_after: Option<&str>) -> Failure {
    let envelope: Option<Value> = serde_json::from_str(text).ok();
    let field = |name: &str| envelope.as_ref().and_then(|e| e.get(name)).and_then(Value::as_str).map(str::to_string);
    let Some(code) = field("code") else {
        let reason = status.canonical_reason().unwrap_or("error");
        let echoed: String = text.trim().chars().take(RAW_ERROR_ECHO_CHARS_MAX).collect();
        let message = if echoed.is_empty() { reason.to_string() } else { format!("{reason}: {echoed}") };
        return Failure::Refused { code: format!("http_{}", status.as_u16()), message };
    };
    let mut message = field("error").unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_string());
    if let Some(name) = field("field").filter(|name| !message.contains(name.as_str())) {
        message = format!("{name}: {message}");
    }
    if let Some(state) = field("state") {
        message = format!("{message} (state {state})");
    }
    if let Some(seconds) = retry_after {
        message = format!("{message} (retry after {seconds} s)");
    }
    Failure::Refused { code, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(base: &str) -> Api {
        match Api::new(base, "sbh_test", None) {
            Ok(api) => api,
            Err(failure) => panic!("{failure:?}"),
        }
    }

    #[test]
    fn urls_keep_the_scope_as_written_and_encode_only_what_must_be() {
        let api = api("http://127.0.0.1:8080");
        let url = api.url(&["admission", "endpoint:triage-bot", "inbox"], &[]);
        assert_eq!(url.as_str(), "http://127.0.0.1:8080/api/v1/admission/endpoint:triage-bot/inbox");
        let url = api.url(&["todos", "td_1/claim?x"], &[("scope", "team:ops"), ("state", "pending")]);
        assert_eq!(url.as_str(), "http://127.0.0.1:8080/api/v1/todos/td_1%2Fclaim%3Fx?scope=team%3Aops&state=pending");
    }

    #[test]
    fn a_base_url_with_a_path_prefix_keeps_it() {
        let api = api("http://example.test/switchboard/");
        assert_eq!(api.url(&["admission"], &[]).as_str(), "http://example.test/switchboard/api/v1/admission");
    }

    #[test]
    fn https_urls_are_accepted_and_other_schemes_are_usage_errors_naming_the_flag() {
        assert_eq!(
            api("https://example.test/sb").url(&["todos"], &[]).as_str(),
            "https://example.test/sb/api/v1/todos"
        );
        for base in ["ftp://example.test", "file:///tmp/sock", "not a url"] {
            let Err(Failure::Usage(message)) = Api::new(base, "t", None) else { panic!("{base} was accepted") };
            assert!(message.contains("--url (SWITCHBOARD_URL)"), "{base}: {message}");
        }
    }

    #[test]
    fn a_ca_file_that_is_missing_or_not_pem_is_a_usage_error_naming_the_flag() {
        let directory = tempfile::tempdir().unwrap();
        let missing = directory.path().join("missing.pem");
        let not_pem = directory.path().join("key.txt");
        std::fs::write(&not_pem, "hello").unwrap();
        for path in [missing, not_pem] {
            let Err(Failure::Usage(message)) = CaFile::read(&path) else { panic!("{} was accepted", path.display()) };
            assert!(message.starts_with("--ca-cert (SWITCHBOARD_CA_CERT)"), "{message}");
        }
    }

    #[test]
    fn refusals_read_code_colon_message_with_the_field() {
        let body = r#"{"error": "\"Mars/Base\" is not a known IANA time zone", "code": "invalid_argument", "field": "window.tz"}"#;
        assert_eq!(
            refusal(StatusCode::BAD_REQUEST, body, None),
            Failure::Refused {
                code: "invalid_argument".into(),
                message: "window.tz: \"Mars/Base\" is not a known IANA time zone".into()
            }
        );
        let limited =
            refusal(StatusCode::TOO_MANY_REQUESTS, r#"{"error": "slow down", "code": "rate_limited"}"#, Some("3"));
        assert_eq!(
            limited,
            Failure::Refused { code: "rate_limited".into(), message: "slow down (retry after 3 s)".into() }
        );
        let proxy = refusal(StatusCode::BAD_GATEWAY, "<html>bad gateway</html>", None);
        assert_eq!(
            proxy,
            Failure::Refused { code: "http_502".into(), message: "Bad Gateway: <html>bad gateway</html>".into() }
        );
    }
}
