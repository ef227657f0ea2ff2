//! The black-box harness: runs the real `switchboard` binary and talks to it over HTTP only.
//! A test either gives the server a database on the throwaway cluster, or lets it start its own
//! embedded PostgreSQL in a data dir. [`world`] holds a database shared by one or more servers
//! and request helpers that keep status, `Retry-After` and body; [`intake`] the queue-capacity
//! helpers.

#![allow(dead_code)]

pub mod intake;
pub mod world;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_switchboard");

/// Runs `switchboard ARGS` to completion and returns (exit code, stdout, stderr).
pub fn run(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = Command::new(BIN);
    command.args(args).env_remove("DATABASE_URL").env("RUST_LOG", "warn");
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("run switchboard");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `switchboard admin human add NAME` against `database` args; returns (human_id, token).
pub fn add_human(name: &str, database: &[&str]) -> (String, String) {
    let mut args = vec!["admin", "human", "add", name];
    args.extend_from_slice(database);
    let (code, stdout, stderr) = run(&args, &[]);
    assert_eq!(code, 0, "admin human add failed: {stderr}");
    let answer: Value = serde_json::from_str(stdout.trim()).expect("admin human add prints JSON");
    (answer["human_id"].as_str().expect("human_id").into(), answer["token"].as_str().expect("token").into())
}

/// A data dir the `postgres` OS user can reach when tests run as root (tempdirs are 0700).
pub fn data_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new().prefix("sbdata-").tempdir_in("/tmp").expect("tempdir");
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    dir
}

/// A running `switchboard serve`, stopped with SIGTERM on drop.
pub struct Server {
    child: Option<Child>,
    pub base: String,
    pub stderr_log: PathBuf,
}

impl Server {
    /// Starts the server on a free port with `extra` arguments and waits for its listening line.
    pub fn start(extra: &[&str], env: &[(&str, &str)], log_dir: &Path) -> Server {
        let stderr_log = log_dir.join(format!("serve-{}.log", std::process::id()));
        let stderr = std::fs::OpenOptions::new().create(true).append(true).open(&stderr_log).expect("log file");
        let mut command = Command::new(BIN);
        command
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra)
            .env_remove("DATABASE_URL")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr);
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command.spawn().expect("spawn switchboard serve");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(address) = line.strip_prefix("switchboard listening on ") {
                    let _ = tx.send(address.to_string());
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(base) => Server { child: Some(child), base, stderr_log },
            Err(_) => {
                let _ = child.kill();
                panic!("server did not start; log:\n{}", std::fs::read_to_string(&stderr_log).unwrap_or_default());
            }
        }
    }

    /// SIGTERM, then wait for a clean exit; returns the exit code.
    pub fn stop(&mut self) -> i32 {
        let Some(mut child) = self.child.take() else { return 0 };
        let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
        for _ in 0..300 {
            if let Ok(Some(status)) = child.try_wait() {
                return status.code().unwrap_or(-1);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        panic!("server did not stop within 30 s of SIGTERM");
    }

    /// SIGKILL: the process dies mid-work, as in a crash.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.stop();
        }
    }
}

/// A thin HTTP client for the operator API and MCP.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    pub base: String,
}

impl Client {
    pub fn new(base: &str) -> Client {
        Client { http: reqwest::Client::new(), base: base.to_string() }
    }

    /// POSTs JSON with a bearer; returns (status, body as JSON or Null).
    pub async fn post(&self, path: &str, token: &str, body: Value) -> (u16, Value) {
        let response =
            self.http.post(format!("{}{path}", self.base)).bearer_auth(token).json(&body).send().await.expect("POST");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    pub async fn get(&self, path: &str, token: &str) -> (u16, Value) {
        let response = self.http.get(format!("{}{path}", self.base)).bearer_auth(token).send().await.expect("GET");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    pub async fn delete_json(&self, path: &str, token: &str) -> (u16, Value) {
        let response =
            self.http.delete(format!("{}{path}", self.base)).bearer_auth(token).send().await.expect("DELETE");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Vends an endpoint; returns the 201 body (id, slug, token, mcp_url, …).
    pub async fn vend(&self, human_token: &str, body: Value) -> Value {
        let (status, answer) = self.post("/api/v1/endpoints", human_token, body).await;
        assert_eq!(status, 201, "vend: {answer}");
        answer
    }

    /// One JSON-RPC call on `/mcp/{slug}`; returns (HTTP status, whole JSON-RPC answer).
    pub async fn rpc(&self, slug: &str, token: &str, method: &str, params: Value) -> (u16, Value) {
        self.post(
            &format!("/mcp/{slug}"),
            token,
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}),
        )
        .await
    }

    /// `tools/call`; returns (isError, structuredContent). Every answer's text content is
    /// checked against its structured content (contract §5): the same JSON on success,
    /// `code: message` on error.
    pub async fn tool(&self, slug: &str, token: &str, name: &str, arguments: Value) -> (bool, Value) {
        let (status, answer) = self.rpc(slug, token, "tools/call", json!({"name": name, "arguments": arguments})).await;
        assert_eq!(status, 200, "tools/call {name}: {answer}");
        let result = &answer["result"];
        let (is_error, structured) = (result["isError"].as_bool().expect("isError"), &result["structuredContent"]);
        assert_eq!(result["content"][0]["type"], "text", "tools/call {name}: {answer}");
        let text = result["content"][0]["text"].as_str().expect("text content");
        if is_error {
            let code = structured["code"].as_str().expect("error code");
            assert!(text.starts_with(&format!("{code}: ")), "tools/call {name}: text {text} for {structured}");
        } else {
            let parsed: Value = serde_json::from_str(text).expect("text content is JSON");
            assert_eq!(&parsed, structured, "tools/call {name}: text and structured content differ");
        }
        (is_error, structured.clone())
    }
}

/// Helpers for the `/metrics` black-box tests (SPEC-0030 REQ-12).
impl Client {
    /// `GET /metrics` with an optional bearer; returns (status, body as text).
    pub async fn scrape_metrics(&self, token: Option<&str>) -> (u16, String) {
        let mut request = self.http.get(format!("{}/metrics", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("GET /metrics");
        let status = response.status().as_u16();
        (status, response.text().await.expect("metrics body"))
    }

    /// `PUT /api/v1/admission/{scope}/{queue}` with a full policy; returns (status, body).
    pub async fn put_admission_policy(&self, token: &str, scope: &str, queue: &str, policy: Value) -> (u16, Value) {
        let response = self
            .http
            .put(format!("{}/api/v1/admission/{scope}/{queue}", self.base))
            .bearer_auth(token)
            .json(&policy)
            .send()
            .await
            .expect("PUT admission policy");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }
}

/// Headers of a delivery signed per Standard Webhooks with `secret`, as a provider sends it.
pub fn sign(secret: &str, delivery_id: &str, body: &str) -> reqwest::header::HeaderMap {
    let timestamp = chrono::Utc::now().timestamp();
    let signature = standardwebhooks::Webhook::new(secret)
        .expect("webhook secret")
        .sign(delivery_id, timestamp, body.as_bytes())
        .expect("sign");
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("webhook-id", delivery_id.parse().expect("header"));
    headers.insert("webhook-timestamp", timestamp.to_string().parse().expect("header"));
    headers.insert("webhook-signature", signature.parse().expect("header"));
    headers.insert("content-type", "application/json".parse().expect("header"));
    headers
}
