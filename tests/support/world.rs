//! A world for the black-box tests: one database on the throwaway cluster, one or more
//! `switchboard serve` processes on it, and the operator-API, webhook-ingest and MCP calls the
//! tests make against it. Answers keep their status, `Retry-After` header, text and JSON body.

use super::{Client, Server, add_human, data_dir};
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// One HTTP answer: status, `Retry-After`, the raw body and the body as JSON (Null if not JSON).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub retry_after: Option<String>,
    pub text: String,
    pub body: Value,
}

impl Reply {
    /// Reads a whole response.
    pub async fn read(response: reqwest::Response) -> Reply {
        let status = response.status().as_u16();
        let retry_after = response.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_string);
        let text = response.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Reply { status, retry_after, text, body }
    }
}

/// One request with a bearer and an optional JSON body.
pub async fn send(client: &Client, method: Method, path: &str, token: &str, body: Option<Value>) -> Reply {
    let mut request = reqwest::Client::new().request(method, format!("{}{path}", client.base)).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("HTTP request");
    Reply::read(response).await
}

/// A vended endpoint: its slug, its `sbk_` bearer and its scope string.
#[derive(Clone)]
pub struct Ep {
    pub slug: String,
    pub key: String,
    pub scope: String,
}

/// A registered webhook: the ingest path and its signing secret.
pub struct Hook {
    pub path: String,
    pub secret: String,
}

/// One database, one or more `switchboard serve` processes on it (each with its own log dir).
pub struct World {
    pub db: engine::testing::TestDatabase,
    pub servers: Vec<(Server, tempfile::TempDir)>,
    pub client: Client,
}

impl World {
    pub async fn start(args: &[&str], env: &[(&str, &str)]) -> World {
        let db = engine::testing::empty_database().await;
        let mut world = World { db, servers: vec![], client: Client::new("http://unused") };
        world.client = world.serve(args, env);
        world
    }

    /// Starts another server process on the same database; returns a client for it.
    pub fn serve(&mut self, args: &[&str], env: &[(&str, &str)]) -> Client {
        let dir = data_dir();
        let mut all = vec!["--database-url", self.db.url.as_str()];
        all.extend_from_slice(args);
        let server = Server::start(&all, env, dir.path());
        let client = Client::new(&server.base);
        self.servers.push((server, dir));
        client
    }

    pub fn log(&self, index: usize) -> String {
        std::fs::read_to_string(&self.servers[index].0.stderr_log).unwrap_or_default()
    }

    /// A human; returns (human_id, token).
    pub fn human(&self, name: &str) -> (String, String) {
        add_human(name, &["--database-url", &self.db.url])
    }

    /// An instance admin; returns the token.
    pub fn admin(&self, name: &str) -> String {
        add_human(name, &["--admin", "--database-url", &self.db.url]).1
    }

    pub async fn vend(&self, token: &str, body: Value) -> Ep {
        let endpoint = self.client.vend(token, body).await;
        let slug = endpoint["slug"].as_str().expect("slug").to_string();
        Ep { scope: format!("endpoint:{slug}"), slug, key: endpoint["token"].as_str().expect("token").to_string() }
    }

    pub async fn push(&self, token: &str, scope: &str, queue: &str, title: &str) -> String {
        let reply = push_on(&self.client, token, scope, queue, title).await;
        assert_eq!(reply.status, 201, "push {title}: {}", reply.text);
        id_of(&reply.body["todo"])
    }

    pub async fn todo(&self, token: &str, id: &str) -> Value {
        let (status, body) = self.client.get(&format!("/api/v1/todos/{id}"), token).await;
        assert_eq!(status, 200, "GET todo {id}: {body}");
        body["todo"].clone()
    }

    pub async fn state(&self, token: &str, id: &str) -> String {
        self.todo(token, id).await["state"].as_str().expect("state").to_string()
    }

    /// The ids of the pending todos of one queue identity.
    pub async fn pending(&self, token: &str, scope: &str, queue: &str) -> BTreeSet<String> {
        let path = format!("/api/v1/todos?scope={scope}&queue={queue}&state=pending&limit=200");
        let (status, body) = self.client.get(&path, token).await;
        assert_eq!(status, 200, "list pending: {body}");
        body["todos"].as_array().expect("todos").iter().map(id_of).collect()
    }

    pub async fn clear(&self, token: &str, scope: &str, queue: &str) -> Reply {
        send(&self.client, Method::POST, &format!("/api/v1/queues/{scope}/{queue}/clear"), token, None).await
    }

    pub async fn remove(&self, token: &str, scope: &str, queue: &str, id: &str) -> Reply {
        send(&self.client, Method::DELETE, &format!("/api/v1/queues/{scope}/{queue}/todos/{id}"), token, None).await
    }

    pub async fn edit(&self, token: &str, id: &str, body: Value) -> Reply {
        send(&self.client, Method::PATCH, &format!("/api/v1/todos/{id}"), token, Some(body)).await
    }

    pub async fn webhook(&self, token: &str, targets: &[(&str, &str)]) -> Hook {
        let targets: Vec<Value> =
            targets.iter().map(|(scope, queue)| json!({"scope": scope, "queue": queue})).collect();
        let (status, hook) =
            self.client.post("/api/v1/webhooks", token, json!({"name": "provider", "targets": targets})).await;
        assert_eq!(status, 201, "webhook: {hook}");
        let url = hook["ingest_url"].as_str().expect("ingest_url");
        let path = url.split_once("/ingest/").map(|(_, id)| format!("/ingest/{id}")).expect("ingest path");
        Hook { path, secret: hook["secret"].as_str().expect("secret").to_string() }
    }

    pub async fn deliver(&self, hook: &Hook, delivery_id: &str, body: &str) -> Reply {
        deliver_on(&self.client, hook, delivery_id, body).await
    }
}

pub async fn push_on(client: &Client, token: &str, scope: &str, queue: &str, title: &str) -> Reply {
    let body = json!({"scope": scope, "queue": queue, "title": title});
    send(client, Method::POST, "/api/v1/todos", token, Some(body)).await
}

pub fn id_of(todo: &Value) -> String {
    todo["id"].as_str().unwrap_or_else(|| panic!("no id in {todo}")).to_string()
}

pub async fn deliver_on(client: &Client, hook: &Hook, delivery_id: &str, body: &str) -> Reply {
    let response = reqwest::Client::new()
        .post(format!("{}{}", client.base, hook.path))
        .headers(super::sign(&hook.secret, delivery_id, body))
        .body(body.to_string())
        .send()
        .await
        .expect("POST ingest");
    Reply::read(response).await
}

/// `claim_next` over MCP; the claimed todo's id, or None when empty.
pub async fn claim_next(client: &Client, ep: &Ep, arguments: Value) -> Option<String> {
    let (is_error, answer) = client.tool(&ep.slug, &ep.key, "claim_next", arguments).await;
    assert!(!is_error, "claim_next: {answer}");
    answer["todo"]["id"].as_str().map(str::to_string)
}

pub async fn tool_names(client: &Client, ep: &Ep) -> Vec<String> {
    let (status, listed) = client.rpc(&ep.slug, &ep.key, "tools/list", json!({})).await;
    assert_eq!(status, 200, "{listed}");
    listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_string())
        .collect()
}

/// Polls (bounded) until the todo is in `state`.
pub async fn wait_for_state(world: &World, token: &str, id: &str, state: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let now = world.state(token, id).await;
        if now == state {
            return;
        }
        assert!(Instant::now() < deadline, "todo {id} still {now}, not {state}, after {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The value of `name{labels}` in a Prometheus text scrape, if present (labels in any order).
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let wanted: BTreeMap<&str, &str> = labels.iter().copied().collect();
    text.lines().filter(|l| !l.starts_with('#')).find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (series_name, rest) = series.split_once('{').unwrap_or((series, "}"));
        if series_name != name {
            return None;
        }
        let body = rest.strip_suffix('}')?;
        let found: BTreeMap<&str, &str> = body
            .split(',')
            .filter(|p| !p.is_empty())
            .filter_map(|pair| pair.split_once('=').map(|(k, v)| (k, v.trim_matches('"'))))
            .collect();
        (found == wanted).then(|| value.parse().expect("sample value"))
    })
}
