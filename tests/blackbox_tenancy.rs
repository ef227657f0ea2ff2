//! The tenancy matrix (SPEC-0030 REQ-2, REQ-10, Security Requirements "Tenancy"): every admission
//! route and verb against a team queue, called by each kind of caller. A refused call must change
//! nothing and reveal nothing (its 404 is byte-for-byte the 404 of a queue that does not exist).

mod support;

use serde_json::{Value, json};
use support::{Client, Server, add_human, data_dir, run};

#[derive(Clone, Copy, PartialEq, Debug)]
enum Caller {
    Owner,
    OtherHuman,
    Member,
    Admin,
    EndpointWithoutGrant,
    EndpointWithGrant,
    Nobody,
}

const CALLERS: [Caller; 7] = [
    Caller::Owner,
    Caller::OtherHuman,
    Caller::Member,
    Caller::Admin,
    Caller::EndpointWithoutGrant,
    Caller::EndpointWithGrant,
    Caller::Nobody,
];

struct Tokens {
    owner: String,
    other: String,
    member: String,
    admin: String,
    plain: (String, String),
    granted: (String, String),
}

impl Tokens {
    fn bearer(&self, caller: Caller) -> &str {
        match caller {
            Caller::Owner => &self.owner,
            Caller::OtherHuman => &self.other,
            Caller::Member => &self.member,
            Caller::Admin => &self.admin,
            Caller::EndpointWithoutGrant => &self.plain.1,
            Caller::EndpointWithGrant => &self.granted.1,
            Caller::Nobody => "",
        }
    }
}

async fn http(method: reqwest::Method, url: String, token: &str, body: Option<Value>) -> (u16, String) {
    let mut request = reqwest::Client::new().request(method, url);
    if !token.is_empty() {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("request");
    (response.status().as_u16(), response.text().await.unwrap_or_default())
}

fn json_admin(args: &[&str]) -> Value {
    let (code, stdout, stderr) = run(args, &[]);
    assert_eq!(code, 0, "{args:?}: {stderr}");
    serde_json::from_str(stdout.trim()).expect("json")
}

/// The matrix's world: a server, a team queue `lane` with a policy, one bearer per caller, and
/// the 404 of a queue that does not exist to compare refusals against. Fields drop in order:
/// the server stops before its data dir and database go.
struct Matrix {
    server: Server,
    client: Client,
    tokens: Tokens,
    /// `/api/v1/admission/team:{slug}/lane` on the server.
    one: String,
    policy: Value,
    unknown_404: (u16, String),
    _dir: tempfile::TempDir,
    _db: engine::testing::TestDatabase,
}

impl Matrix {
    async fn start() -> Matrix {
        let db = engine::testing::empty_database().await;
        let dir = data_dir();
        let server = Server::start(&["--database-url", &db.url], &[], dir.path());
        let client = Client::new(&server.base);
        let database = ["--database-url", db.url.as_str()];
        let owner = add_human("owner", &database).1;
        let other = add_human("other", &database).1;
        let member = add_human("member", &database).1;
        let admin = add_human("admin", &database).1;
        let team = json_admin(&["admin", "team", "add", "core", "--owner", "owner", "--database-url", &db.url]);
        let team_slug = team["slug"].as_str().expect("slug").to_string();
        json_admin(&[
            "admin",
            "team",
            "member",
            "add",
            &team_slug,
            "member",
            "--role",
            "member",
            "--database-url",
            &db.url,
        ]);
        json_admin(&[
            "admin",
            "team",
            "member",
            "add",
            &team_slug,
            "admin",
            "--role",
            "admin",
            "--database-url",
            &db.url,
        ]);
        let lane = format!("team:{team_slug}/lane");
        let vend = |verbs: Value| {
            let (client, owner, lane, team_slug) = (client.clone(), owner.clone(), lane.clone(), team_slug.clone());
            async move {
                let endpoint = client
                    .vend(&owner, json!({"name": "team bot", "team": team_slug, "queues": [lane], "verbs": verbs}))
                    .await;
                (
                    endpoint["slug"].as_str().expect("slug").to_string(),
                    endpoint["token"].as_str().expect("token").to_string(),
                )
            }
        };
        let plain = vend(json!(["claim_next", "claim", "list_todos"])).await;
        let granted = vend(json!(["claim_next", "set_admission_policy", "clear_admission_policy"])).await;
        let tokens = Tokens { owner, other, member, admin, plain, granted };

        let scope = format!("team:{team_slug}");
        let one = format!("{}/api/v1/admission/{scope}/lane", server.base);
        let policy = json!({"max_in_flight": 4, "max_claims_per_window": null, "window": null});
        let (status, _) = http(reqwest::Method::PUT, one.clone(), &tokens.owner, Some(policy.clone())).await;
        assert_eq!(status, 200);
        let unknown_404 = http(
            reqwest::Method::GET,
            format!("{}/api/v1/admission/team:no-such-team/lane", server.base),
            &tokens.owner,
            None,
        )
        .await;
        assert_eq!(unknown_404.0, 404);
        Matrix { server, client, tokens, one, policy, unknown_404, _dir: dir, _db: db }
    }

    /// The team queue's policy as the owner reads it.
    async fn baseline(&self) -> String {
        http(reqwest::Method::GET, self.one.clone(), &self.tokens.owner, None).await.1
    }

    /// `GET /api/v1/admission`: the owner and a team admin see the queue, other humans do not.
    async fn list_cell(&self, route: &str, caller: Caller) -> String {
        let bearer = self.tokens.bearer(caller);
        let (status, body) =
            http(reqwest::Method::GET, format!("{}/api/v1/admission", self.server.base), bearer, None).await;
        let sees = body.contains("\"lane\"");
        match (status, caller) {
            (200, Caller::Owner | Caller::Admin) => assert!(sees, "{caller:?} manages the team queue"),
            (200, Caller::OtherHuman | Caller::Member) => {
                assert!(!sees, "{caller:?} must not see it: {body}")
            }
            (401, Caller::EndpointWithoutGrant | Caller::EndpointWithGrant | Caller::Nobody) => {}
            other => panic!("{route} by {caller:?}: {other:?}"),
        }
        if status == 200 { format!("200 {}", if sees { "listed" } else { "not listed" }) } else { status.to_string() }
    }

    /// One queue's routes: the manager is served, another human gets the unknown queue's 404.
    async fn queue_route_cell(&self, route: &str, caller: Caller) -> String {
        let (one, policy, bearer) = (&self.one, &self.policy, self.tokens.bearer(caller));
        let (method, url, body) = match route {
            "GET one" => (reqwest::Method::GET, one.clone(), None),
            "GET audit" => (reqwest::Method::GET, format!("{one}/audit"), None),
            "PUT" => (reqwest::Method::PUT, one.clone(), Some(policy.clone())),
            _ => (reqwest::Method::DELETE, one.clone(), None),
        };
        let (status, text) = http(method, url, bearer, body).await;
        let expected = match caller {
            Caller::Owner | Caller::Admin => {
                if route == "DELETE" {
                    204
                } else {
                    200
                }
            }
            Caller::OtherHuman | Caller::Member => 404,
            _ => 401,
        };
        assert_eq!(status, expected, "{route} by {caller:?}: {text}");
        if status == 404 {
            assert_eq!(text, self.unknown_404.1, "{route} by {caller:?} reveals more than an unknown queue");
        }
        if route == "DELETE" && status == 204 {
            // Put it back for the next caller, exactly as it was.
            assert_eq!(http(reqwest::Method::PUT, one.clone(), &self.tokens.owner, Some(policy.clone())).await.0, 200);
        }
        status.to_string()
    }

    /// The MCP tools: only an endpoint may call them, and setting a policy needs the grant.
    async fn mcp_cell(&self, route: &str, caller: Caller) -> String {
        let (tokens, bearer) = (&self.tokens, self.tokens.bearer(caller));
        let (slug, key) = match caller {
            Caller::EndpointWithoutGrant => tokens.plain.clone(),
            Caller::EndpointWithGrant => tokens.granted.clone(),
            _ => (tokens.plain.0.clone(), bearer.to_string()),
        };
        let (tool, arguments) = if route == "MCP set_admission_policy" {
            ("set_admission_policy", json!({"queue": "lane", "policy": self.policy}))
        } else {
            ("admission_status", json!({"queue": "lane"}))
        };
        let (status, answer) =
            self.client.rpc(&slug, &key, "tools/call", json!({"name": tool, "arguments": arguments})).await;
        let result = &answer["result"];
        let cell = if status != 200 {
            status.to_string()
        } else if result["isError"] == true {
            result["structuredContent"]["code"].as_str().unwrap_or("?").to_string()
        } else {
            "ok".to_string()
        };
        let expected = match (route, caller) {
            (_, Caller::Nobody) => "401",
            (_, Caller::Owner | Caller::OtherHuman | Caller::Member | Caller::Admin) => "401",
            ("MCP set_admission_policy", Caller::EndpointWithoutGrant) => "forbidden",
            _ => "ok",
        };
        assert_eq!(cell, expected, "{route} by {caller:?}: {answer}");
        cell
    }
}

// SPEC-0030 REQ-10, REQ-2: the tenancy matrix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req10_tenancy_matrix_every_route_and_verb_by_every_caller() {
    let matrix = Matrix::start().await;
    let before = matrix.baseline().await;

    let mut table: Vec<(String, Vec<String>)> = Vec::new();
    let routes =
        ["GET /admission", "GET one", "GET audit", "PUT", "DELETE", "MCP set_admission_policy", "MCP admission_status"];
    for route in routes {
        let mut row = Vec::new();
        for caller in CALLERS {
            let outcome = match route {
                "GET /admission" => matrix.list_cell(route, caller).await,
                "GET one" | "GET audit" | "PUT" | "DELETE" => matrix.queue_route_cell(route, caller).await,
                _ => matrix.mcp_cell(route, caller).await,
            };
            // Whatever was refused changed nothing (allowed writes re-set the same policy).
            let now = matrix.baseline().await;
            assert_eq!(strip_times(&now), strip_times(&before), "{route} by {caller:?} changed the policy");
            row.push(outcome);
        }
        table.push((route.to_string(), row));
    }
    eprintln!(
        "\n| route \\ caller | owner | another human | team member | team admin | endpoint without grant | endpoint with grant | no credential |"
    );
    eprintln!("|---|---|---|---|---|---|---|---|");
    for (route, row) in &table {
        eprintln!("| {route} | {} |", row.join(" | "));
    }
}

/// The policy and limits, without timestamps and the audit that allowed writes extend.
fn strip_times(body: &str) -> Value {
    let value: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    json!({ "policy": value["policy"], "max_in_flight": value["status"]["max_in_flight"] })
}
