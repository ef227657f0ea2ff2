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

// SPEC-0030 REQ-10, REQ-2: the tenancy matrix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req10_tenancy_matrix_every_route_and_verb_by_every_caller() {
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
    json_admin(&["admin", "team", "member", "add", &team_slug, "admin", "--role", "admin", "--database-url", &db.url]);
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
    let baseline = || async { http(reqwest::Method::GET, one.clone(), &tokens.owner, None).await.1 };
    let before = baseline().await;
    let unknown_404 = http(
        reqwest::Method::GET,
        format!("{}/api/v1/admission/team:no-such-team/lane", server.base),
        &tokens.owner,
        None,
    )
    .await;
    assert_eq!(unknown_404.0, 404);

    let mut table: Vec<(String, Vec<String>)> = Vec::new();
    let routes =
        ["GET /admission", "GET one", "GET audit", "PUT", "DELETE", "MCP set_admission_policy", "MCP admission_status"];
    for route in routes {
        let mut row = Vec::new();
        for caller in CALLERS {
            let bearer = tokens.bearer(caller);
            let outcome = match route {
                "GET /admission" => {
                    let (status, body) =
                        http(reqwest::Method::GET, format!("{}/api/v1/admission", server.base), bearer, None).await;
                    let sees = body.contains("\"lane\"");
                    match (status, caller) {
                        (200, Caller::Owner | Caller::Admin) => assert!(sees, "{caller:?} manages the team queue"),
                        (200, Caller::OtherHuman | Caller::Member) => {
                            assert!(!sees, "{caller:?} must not see it: {body}")
                        }
                        (401, Caller::EndpointWithoutGrant | Caller::EndpointWithGrant | Caller::Nobody) => {}
                        other => panic!("{route} by {caller:?}: {other:?}"),
                    }
                    if status == 200 {
                        format!("200 {}", if sees { "listed" } else { "not listed" })
                    } else {
                        status.to_string()
                    }
                }
                "GET one" | "GET audit" | "PUT" | "DELETE" => {
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
                        assert_eq!(text, unknown_404.1, "{route} by {caller:?} reveals more than an unknown queue");
                    }
                    if route == "DELETE" && status == 204 {
                        // Put it back for the next caller, exactly as it was.
                        assert_eq!(
                            http(reqwest::Method::PUT, one.clone(), &tokens.owner, Some(policy.clone())).await.0,
                            200
                        );
                    }
                    status.to_string()
                }
                _ => {
                    let (slug, key) = match caller {
                        Caller::EndpointWithoutGrant => tokens.plain.clone(),
                        Caller::EndpointWithGrant => tokens.granted.clone(),
                        _ => (tokens.plain.0.clone(), bearer.to_string()),
                    };
                    let (tool, arguments) = if route == "MCP set_admission_policy" {
                        ("set_admission_policy", json!({"queue": "lane", "policy": policy}))
                    } else {
                        ("admission_status", json!({"queue": "lane"}))
                    };
                    let (status, answer) =
                        client.rpc(&slug, &key, "tools/call", json!({"name": tool, "arguments": arguments})).await;
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
            };
            // Whatever was refused changed nothing (allowed writes re-set the same policy).
            let now = baseline().await;
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
