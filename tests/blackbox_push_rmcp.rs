//! SPEC-0030 REQ-8 push with a real MCP client: the official Rust SDK (`rmcp`) attaches to the
//! real binary over streamable HTTP, receives the doorbell through its own notification handling
//! (`ClientHandler::on_custom_notification`, the SDK's hook for methods outside the MCP schema),
//! and claims the todo the doorbell names. Nothing here reads the stream by hand: if the SDK
//! could not parse or route the server's events, the test would not see them.

mod support;

use rmcp::model::{CallToolRequestParams, ClientConfig, CustomNotification, ProtocolVersion};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use std::time::Duration;
use support::{Client, Server, add_human, data_dir};
use tokio::sync::mpsc;

/// The method doorbells arrive as (contract §5).
const DOORBELL_METHOD: &str = "notifications/claude/channel";
/// How long a doorbell may take: the dispatch loop runs every second, the reaper every second here.
const DOORBELL_WAIT: Duration = Duration::from_secs(10);

/// An MCP client that forwards every custom notification the SDK hands it.
struct Doorbells {
    received: mpsc::UnboundedSender<CustomNotification>,
}

impl ClientHandler for Doorbells {
    /// The server speaks the 2025-06-18 revision (initialize + `Mcp-Session-Id`); the SDK's own
    /// default is a later, session-less revision.
    fn get_info(&self) -> ClientConfig {
        ClientConfig::default().with_protocol_version(ProtocolVersion::V_2025_06_18)
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.received.send(notification);
    }
}

/// One tool call through the SDK; returns (isError, structuredContent).
async fn call(client: &RunningService<RoleClient, Doorbells>, name: &'static str, arguments: Value) -> (bool, Value) {
    let Value::Object(arguments) = arguments else { panic!("tool arguments must be an object") };
    let result = client
        .call_tool(CallToolRequestParams::new(name).with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("tools/call {name}: {e}"));
    (result.is_error.unwrap_or(false), result.structured_content.unwrap_or(Value::Null))
}

// SPEC-0030 REQ-8: an agent attached with a stock MCP client is rung for new work in its queue
// and claims exactly the todo it was rung for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req8_an_rmcp_client_attaches_receives_the_doorbell_and_claims_the_todo() {
    let db = engine::testing::empty_database().await;
    let dir = data_dir();
    let server = Server::start(&["--database-url", &db.url, "--reaper-interval", "1"], &[], dir.path());
    let api = Client::new(&server.base);
    let (_, alice) = add_human("alice", &["--database-url", &db.url]);
    let endpoint = api.vend(&alice, json!({"name": "rmcp-worker", "queues": ["inbox"]})).await;
    let slug = endpoint["slug"].as_str().expect("slug").to_string();
    let key = endpoint["token"].as_str().expect("token").to_string();

    let (received, mut doorbells) = mpsc::unbounded_channel();
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp/{slug}", server.base)).auth_header(key);
    let client = Doorbells { received }
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .unwrap_or_else(|e| panic!("rmcp initialize against /mcp/{slug}: {e}"));

    let info = client.peer_info().expect("the server answered initialize");
    assert_eq!(info.server_info.as_ref().map(|s| s.name.as_str()), Some("switchboard"));
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    for expected in ["claim", "claim_next", "clock_in", "clock_out", "presence"] {
        assert!(names.contains(&expected), "tools/list lacks {expected}: {names:?}");
    }

    // The SDK opens its GET stream right after initialize; give it a moment to attach so the
    // ring finds it. Should it attach late, its reconnect digest names the queue instead.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, created) = api
        .post(
            "/api/v1/todos",
            &alice,
            json!({"scope": format!("endpoint:{slug}"), "queue": "inbox", "title": "ring me"}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let todo_id = created["todo"]["id"].as_str().expect("todo id").to_string();

    let deadline = tokio::time::Instant::now() + DOORBELL_WAIT;
    let meta = loop {
        let notification = tokio::time::timeout_at(deadline, doorbells.recv())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no doorbell within {DOORBELL_WAIT:?}; server log:\n{}",
                    std::fs::read_to_string(&server.stderr_log).unwrap_or_default()
                )
            })
            .expect("the client is still running");
        assert_eq!(notification.method, DOORBELL_METHOD, "{notification:?}");
        let meta = notification.params.as_ref().and_then(|p| p.get("meta")).cloned().unwrap_or(Value::Null);
        let names_the_todo = meta["todo_id"] == json!(todo_id);
        let digest_for_the_queue = meta["kind"] == "digest"
            && meta["queues"].as_str().is_some_and(|q| q.split(',').any(|name| name == "inbox"));
        if names_the_todo || digest_for_the_queue {
            break meta;
        }
    };
    eprintln!("rung through rmcp's on_custom_notification: {meta}");
    if meta["kind"] != "digest" {
        assert_eq!(meta["queue"], "inbox", "{meta}");
        assert_eq!(meta["source"], "human", "{meta}");
        assert!(meta["ring_id"].as_str().is_some_and(|id| !id.is_empty()), "{meta}");
    }

    let (is_error, claimed) = call(&client, "claim", json!({"id": todo_id})).await;
    assert!(!is_error, "claim refused: {claimed}");
    assert_eq!(claimed["todo"]["id"], json!(todo_id), "{claimed}");
    assert_eq!(claimed["todo"]["state"], "claimed", "{claimed}");

    let _ = client.cancel().await;
}
