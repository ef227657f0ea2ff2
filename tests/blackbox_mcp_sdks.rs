//! Every MCP client connects (issue #50): the official MCP SDKs that agent hosts embed, the
//! TypeScript SDK (from npm) and the Python SDK (from PyPI), each pinned and installed at test
//! set-up into `target/`, drive the real binary on real PostgreSQL through their own transports.
//!
//! Each SDK's script (`tests/mcp_sdk/`) initializes with every protocol revision the SDK offers,
//! lists the tools, calls every tool the endpoint is granted and checks the answers, receives a
//! doorbell, the `reopen` ring of a paused queue that reopens and a clock-in digest through the
//! SDK's notification handling, gets back a doorbell lost to a cut connection through the SDK's
//! own reconnect with `Last-Event-ID`, and ends the session with `DELETE`. This test provides the
//! server, the owner and the endpoint, runs the script, and fails with its output if any check
//! in it fails.

mod support;

use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::{Client, Server, add_human, data_dir};

/// The TypeScript SDK release the check runs (pinned, so a new release cannot turn CI red
/// overnight; bump it on purpose).
const TYPESCRIPT_SDK_VERSION: &str = "1.32.2";
/// The Python SDK and what it installs with, pinned.
const PYTHON_REQUIREMENTS: &str = "tests/mcp_sdk/python-requirements.txt";
/// Every verb an endpoint can be granted: the checks call every tool.
const EVERY_VERB: [&str; 14] = [
    "list_todos",
    "get_todo",
    "claim",
    "claim_next",
    "complete",
    "fail",
    "heartbeat",
    "release",
    "create_todo",
    "admission_status",
    "set_admission_policy",
    "clear_admission_policy",
    "discard_todo",
    "clear_queue",
];

/// The workspace root (where `tests/mcp_sdk/` is) and the target dir the binary was built in.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

fn target_dir() -> PathBuf {
    let binary = Path::new(env!("CARGO_BIN_EXE_switchboard"));
    binary.ancestors().nth(2).expect("target/<profile>/switchboard").to_path_buf()
}

fn run_checked(command: &mut Command, what: &str) -> Output {
    let output = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The README's `mcpServers` entry (the JSON block after its `connect-an-agent` marker) with this
/// endpoint's URL and bearer in place of the example's, as a host's configuration would hold it.
fn readme_mcp_servers_entry(url: &str, token: &str) -> String {
    let readme = std::fs::read_to_string(workspace().join("README.md")).expect("read README.md");
    let after = readme.split("<!-- connect-an-agent: mcpServers").nth(1).expect("README's connect-an-agent marker");
    let block = after.split("```json\n").nth(1).and_then(|rest| rest.split("```").next()).expect("its JSON block");
    let mut config: serde_json::Value = serde_json::from_str(block).expect("the README's mcpServers entry is JSON");
    let server = &mut config["mcpServers"]["switchboard"];
    assert!(server["url"].as_str().is_some_and(|u| u.contains("/mcp/")), "the entry's url: {server}");
    assert!(server["headers"]["Authorization"].as_str().is_some_and(|h| h.starts_with("Bearer sbk_")), "{server}");
    server["url"] = json!(url);
    server["headers"]["Authorization"] = json!(format!("Bearer {token}"));
    config.to_string()
}

/// `target/mcp-sdk-typescript/`, holding the pinned SDK, installed with npm on first use.
fn typescript_sdk() -> PathBuf {
    let prefix = target_dir().join("mcp-sdk-typescript");
    let manifest = prefix.join("node_modules/@modelcontextprotocol/sdk/package.json");
    let installed = std::fs::read_to_string(&manifest)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .is_some_and(|package| package["version"] == TYPESCRIPT_SDK_VERSION);
    if !installed {
        std::fs::create_dir_all(&prefix).expect("create the SDK's npm prefix");
        run_checked(
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--no-save", "--prefix"])
                .arg(&prefix)
                .arg(format!("@modelcontextprotocol/sdk@{TYPESCRIPT_SDK_VERSION}")),
            "npm install @modelcontextprotocol/sdk (is npm installed? .ci/run installs it)",
        );
    }
    prefix
}

/// `target/mcp-sdk-python/`, a venv holding the pinned SDK, rebuilt when the pins change.
fn python_sdk() -> PathBuf {
    let venv = target_dir().join("mcp-sdk-python");
    let requirements = workspace().join(PYTHON_REQUIREMENTS);
    let wanted = std::fs::read_to_string(&requirements).expect("read the Python SDK's pins");
    let stamp = venv.join("installed-requirements.txt");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(wanted.as_str()) {
        let _ = std::fs::remove_dir_all(&venv);
        run_checked(
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
            "python3 -m venv (is python3-venv installed? .ci/run installs it)",
        );
        run_checked(
            Command::new(venv.join("bin/pip"))
                .args(["install", "--quiet", "--disable-pip-version-check", "--requirement"])
                .arg(&requirements),
            "pip install the MCP Python SDK",
        );
        std::fs::write(&stamp, wanted).expect("stamp the venv");
    }
    venv.join("bin/python")
}

/// A server with a reaper every second, an owner, and an endpoint granted every verb on three
/// queues; runs `script` with the environment the SDK scripts read, and answers its output.
async fn run_sdk_script(program: &Path, script: &str, extra_env: &[(&str, &Path)]) -> String {
    let db = engine::testing::empty_database().await;
    let dir = data_dir();
    let server = Server::start(&["--database-url", &db.url, "--reaper-interval", "1"], &[], dir.path());
    let api = Client::new(&server.base);
    let (_, owner) = add_human("owner", &["--database-url", &db.url]);
    let endpoint =
        api.vend(&owner, json!({"name": "sdk-host", "queues": ["inbox", "gated", "spare"], "verbs": EVERY_VERB})).await;
    let slug = endpoint["slug"].as_str().expect("slug");
    let token = endpoint["token"].as_str().expect("token");

    let mut command = Command::new(program);
    command
        .arg(workspace().join(script))
        .env("SB_MCP_URL", server.url(&format!("/mcp/{slug}")))
        .env("SB_MCP_TOKEN", token)
        .env("SB_MCP_CONFIG", readme_mcp_servers_entry(&server.url(&format!("/mcp/{slug}")), token))
        .env("SB_API", &server.base)
        .env("SB_HUMAN_TOKEN", &owner)
        .env("SB_SCOPE", format!("endpoint:{slug}"));
    for (key, value) in extra_env {
        command.env(key, value);
    }
    let output = tokio::task::spawn_blocking(move || command.output()).await.expect("join").expect("run the script");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{script} failed ({}):\n{stdout}\n{}\nserver log:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr),
        std::fs::read_to_string(&server.stderr_log).unwrap_or_default()
    );
    stdout
}

// SPEC-0030 REQ-7 and REQ-8 through the official TypeScript SDK (issue #50).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req8_the_typescript_sdk_connects_calls_every_granted_tool_and_receives_every_kind_of_ring() {
    let sdk = typescript_sdk();
    let stdout =
        run_sdk_script(Path::new("node"), "tests/mcp_sdk/typescript_client.mjs", &[("SB_TS_SDK_DIR", &sdk)]).await;
    eprintln!("{stdout}");
    for step in [
        "offered 2025-11-25: negotiated 2025-11-25",
        "offered 2024-11-05: negotiated 2024-11-05",
        "stream resumed after a cut",
        "reopen ring received",
        "session ended with DELETE",
        "all checks passed",
    ] {
        assert!(stdout.contains(step), "the TypeScript check did not report {step:?}:\n{stdout}");
    }
}

// SPEC-0030 REQ-7 and REQ-8 through the official Python SDK (issue #50).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req8_the_python_sdk_connects_calls_every_granted_tool_and_receives_every_kind_of_ring() {
    let python = python_sdk();
    let stdout = run_sdk_script(&python, "tests/mcp_sdk/python_client.py", &[]).await;
    eprintln!("{stdout}");
    for step in [
        "offered 2025-11-25: negotiated 2025-11-25",
        "offered 2024-11-05: negotiated 2024-11-05",
        "the default Client negotiated",
        "stream resumed after a cut",
        "reopen ring received",
        "session ended with DELETE",
        "all checks passed",
    ] {
        assert!(stdout.contains(step), "the Python check did not report {step:?}:\n{stdout}");
    }
}

// Streamable HTTP's own refusals (issue #50 item 4, the 2025-06-18 and 2025-11-25 revisions): a
// page of another site is refused (403), a revision the server does not speak is refused (400)
// and names the header, and DELETE ends only a session the endpoint has (404 otherwise).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req7_the_mcp_transport_refuses_other_sites_unknown_revisions_and_unknown_sessions() {
    let db = engine::testing::empty_database().await;
    let dir = data_dir();
    let server = Server::start(&["--database-url", &db.url], &[], dir.path());
    let api = Client::new(&server.base);
    let (_, owner) = add_human("owner", &["--database-url", &db.url]);
    let endpoint = api.vend(&owner, json!({"name": "transport", "queues": ["inbox"]})).await;
    let url = server.url(&format!("/mcp/{}", endpoint["slug"].as_str().expect("slug")));
    let token = endpoint["token"].as_str().expect("token");
    let http = reqwest::Client::new();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                            "params": {"protocolVersion": "2025-11-25", "capabilities": {}}});

    let host = url.trim_start_matches("http://").split('/').next().expect("host").to_string();
    for (origin, status) in [("http://evil.example", 403), (&*format!("http://{host}"), 200), ("null", 200)] {
        let answer =
            http.post(&url).bearer_auth(token).header("origin", origin).json(&initialize).send().await.expect("POST");
        assert_eq!(answer.status().as_u16(), status, "Origin {origin}");
    }

    let answer = http
        .post(&url)
        .bearer_auth(token)
        .header("mcp-protocol-version", "1999-01-01")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .send()
        .await
        .expect("POST");
    assert_eq!(answer.status().as_u16(), 400);
    let body: serde_json::Value = answer.json().await.expect("error envelope");
    assert_eq!(
        (body["code"].as_str(), body["field"].as_str()),
        (Some("invalid_argument"), Some("MCP-Protocol-Version"))
    );

    let opened = http.post(&url).bearer_auth(token).json(&initialize).send().await.expect("initialize");
    let session = opened.headers()["mcp-session-id"].to_str().expect("session id").to_string();
    let body: serde_json::Value = opened.json().await.expect("initialize answer");
    assert_eq!(body["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(body["result"]["capabilities"]["experimental"]["claude/channel"], json!({}));
    let end = |session: String| http.delete(&url).bearer_auth(token).header("mcp-session-id", session).send();
    assert_eq!(end(session.clone()).await.expect("DELETE").status().as_u16(), 204);
    assert_eq!(end(session).await.expect("DELETE again").status().as_u16(), 404);
    assert_eq!(end("ms_nobody".into()).await.expect("DELETE unknown").status().as_u16(), 404);
}
