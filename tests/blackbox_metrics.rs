//! SPEC-0030 REQ-12 (with SPEC-0023 REQ-1, REQ-5, REQ-6) through the real binary: `/metrics`
//! is closed without the scrape token, shows budgets and charges as a Grafana user reads them,
//! keeps its labels bounded, and omits what it cannot compute instead of reporting 0. Also the
//! intake series (intake-capacity.md): the capacity gauge, intake refusals and owner clears.

mod support;

use serde_json::{Value, json};
use sqlx::Connection;
use std::collections::{BTreeMap, BTreeSet};
use support::{Client, Server, add_human, data_dir};

/// A scrape token of the minimum length or more (contract §1: at least 32 bytes).
const METRICS_TOKEN: &str = "scrape-token-for-the-metrics-tests-0123456789";
const STATUSES: [&str; 6] =
    ["admitted", "window_exhausted", "in_flight_full", "paused", "admission_unavailable", "shared_budget_exhausted"];
const REASONS: [&str; 5] =
    ["window_exhausted", "in_flight_full", "paused", "admission_unavailable", "shared_budget_exhausted"];
const ALLOWED_LABELS: [&str; 7] = ["queue", "status", "reason", "source", "outcome", "action", "collector"];

/// One sample line of the Prometheus text format.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Parses the sample lines of a scrape (comments skipped). Label values here never hold `"` or
/// `\`, but escapes are honoured so a surprise shows up as a failed assertion, not a bad parse.
fn parse(text: &str) -> Vec<Sample> {
    let mut samples = vec![];
    for line in text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("sample line without a value: {line}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad sample value: {line}"));
        let (name, labels) = match series.split_once('{') {
            None => (series.to_string(), BTreeMap::new()),
            Some((name, rest)) => {
                let body = rest.strip_suffix('}').unwrap_or_else(|| panic!("unterminated labels: {line}"));
                (name.to_string(), parse_labels(body, line))
            }
        };
        samples.push(Sample { name, labels, value });
    }
    samples
}

fn parse_labels(body: &str, line: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut rest = body;
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"").unwrap_or_else(|| panic!("bad label: {line}"));
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => value.extend(chars.next().map(|(_, escaped)| escaped)),
                '"' => {
                    end = Some(i);
                    break;
                }
                other => value.push(other),
            }
        }
        let end = end.unwrap_or_else(|| panic!("unterminated label value: {line}"));
        labels.insert(key.trim_start_matches(',').to_string(), value);
        rest = &after[end + 1..];
    }
    labels
}

/// The value of the one sample of `name` whose labels are exactly `labels`, if present.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let wanted: BTreeMap<String, String> = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let found: Vec<f64> = samples.iter().filter(|s| s.name == name && s.labels == wanted).map(|s| s.value).collect();
    assert!(found.len() <= 1, "{name}{labels:?} appears {} times", found.len());
    found.first().copied()
}

fn has_family(samples: &[Sample], name: &str) -> bool {
    samples.iter().any(|s| s.name == name)
}

/// A server with a scrape token on a fresh database, a human, and one endpoint draining `queues`.
struct Fixture {
    database: engine::testing::TestDatabase,
    _dir: tempfile::TempDir,
    _server: Server,
    client: Client,
    human: String,
    human_id: String,
    endpoint: Value,
}

impl Fixture {
    async fn start(queues: &[&str], env: &[(&str, &str)]) -> Fixture {
        let database = engine::testing::empty_database().await;
        let dir = data_dir();
        let mut env = env.to_vec();
        env.push(("SWITCHBOARD_METRICS_TOKEN", METRICS_TOKEN));
        let server = Server::start(&["--database-url", &database.url], &env, dir.path());
        let client = Client::new(&server.base);
        let (human_id, human) = add_human("grafana-reader", &["--database-url", database.url.as_str()]);
        let endpoint = client.vend(&human, json!({"name": "metrics worker", "queues": queues})).await;
        Fixture { database, _dir: dir, _server: server, client, human, human_id, endpoint }
    }

    fn slug(&self) -> &str {
        self.endpoint["slug"].as_str().expect("slug")
    }

    fn key(&self) -> &str {
        self.endpoint["token"].as_str().expect("token")
    }

    fn scope(&self) -> String {
        format!("endpoint:{}", self.slug())
    }

    async fn set_policy(&self, queue: &str, policy: Value) {
        let (status, answer) = self.client.put_admission_policy(&self.human, &self.scope(), queue, policy).await;
        assert_eq!(status, 200, "PUT policy on {queue}: {answer}");
    }

    /// Pushes `count` todos; returns their ids.
    async fn push(&self, queue: &str, count: usize) -> Vec<String> {
        let mut ids = vec![];
        for n in 0..count {
            let body = json!({"scope": self.scope(), "queue": queue, "title": format!("{queue} #{n}")});
            let (status, pushed) = self.client.post("/api/v1/todos", &self.human, body).await;
            assert_eq!(status, 201, "push: {pushed}");
            ids.push(pushed["todo"]["id"].as_str().expect("todo id").to_string());
        }
        ids
    }

    /// `claim_next` on one queue; returns the claimed todo's id, or None when nothing was admitted.
    async fn claim_next(&self, queue: &str) -> Option<String> {
        let (is_error, answer) = self.client.tool(self.slug(), self.key(), "claim_next", json!({"queue": queue})).await;
        assert!(!is_error, "claim_next: {answer}");
        answer["todo"]["id"].as_str().map(str::to_string)
    }

    async fn scrape(&self) -> (String, Vec<Sample>) {
        let (status, text) = self.client.scrape_metrics(Some(METRICS_TOKEN)).await;
        assert_eq!(status, 200, "scrape: {text}");
        let samples = parse(&text);
        (text, samples)
    }
}

fn daily(max_claims: i64) -> Value {
    json!({"max_in_flight": null, "max_claims_per_window": max_claims,
           "window": {"period": "day", "tz": "UTC", "start": "00:00"}})
}

// SPEC-0030 REQ-12
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req12_metrics_refuse_every_scrape_without_the_scrape_token_and_reveal_nothing() {
    let database = engine::testing::empty_database().await;
    let args = ["--database-url", database.url.as_str()];
    let (_, human) = add_human("someone", &args);

    // Unset: closed to everyone, whatever they present.
    let closed_dir = data_dir();
    let closed = Server::start(&args, &[], closed_dir.path());
    let closed_client = Client::new(&closed.base);
    for token in [None, Some(METRICS_TOKEN), Some(human.as_str())] {
        assert_eq!(closed_client.scrape_metrics(token).await, (401, String::new()), "unset token, {token:?}");
    }

    // Too short: closed even to the exact configured value, and the operator is warned once.
    let short_token = "short-scrape-token-31-bytes-lng";
    assert_eq!(short_token.len(), 31);
    let short_dir = data_dir();
    let short = Server::start(&args, &[("SWITCHBOARD_METRICS_TOKEN", short_token)], short_dir.path());
    assert_eq!(Client::new(&short.base).scrape_metrics(Some(short_token)).await, (401, String::new()));
    let log = std::fs::read_to_string(&short.stderr_log).expect("server log");
    assert_eq!(log.matches("SWITCHBOARD_METRICS_TOKEN is shorter than 32 bytes").count(), 1, "{log}");

    // Set: only the exact token opens it; operator and endpoint credentials never do.
    let open_dir = data_dir();
    let open = Server::start(&args, &[("SWITCHBOARD_METRICS_TOKEN", METRICS_TOKEN)], open_dir.path());
    let client = Client::new(&open.base);
    let endpoint = client.vend(&human, json!({"name": "worker", "queues": ["inbox"]})).await;
    let mut wrong_last_byte = METRICS_TOKEN.to_string();
    wrong_last_byte.pop();
    wrong_last_byte.push('!');
    let refused = [
        None,
        Some(""),
        Some(&METRICS_TOKEN[..METRICS_TOKEN.len() - 1]),
        Some(wrong_last_byte.as_str()),
        Some(human.as_str()),
        endpoint["token"].as_str(),
    ];
    for token in refused {
        assert_eq!(client.scrape_metrics(token).await, (401, String::new()), "token {token:?}");
    }
    let basic = reqwest::Client::new()
        .get(open.url("/metrics"))
        .header("authorization", format!("Basic {METRICS_TOKEN}"))
        .send()
        .await
        .expect("GET /metrics");
    assert_eq!(basic.status().as_u16(), 401);
    assert_eq!(basic.text().await.expect("body"), "");

    let (status, text) = client.scrape_metrics(Some(METRICS_TOKEN)).await;
    assert_eq!(status, 200, "{text}");
    let samples = parse(&text);
    assert_eq!(
        value(&samples, "switchboard_metrics_collection_errors_total", &[("collector", "admission")]),
        Some(0.0),
        "the error counter is present at 0 from the first scrape:\n{text}"
    );
}

// SPEC-0030 REQ-12 scenario "A budget shows up in Grafana"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req12_a_budget_shows_up_in_grafana() {
    let fixture = Fixture::start(&["investigations"], &[]).await;
    fixture.set_policy("investigations", daily(1)).await;
    fixture.push("investigations", 31).await;
    assert!(fixture.claim_next("investigations").await.is_some(), "the day's one unit is admitted");
    assert_eq!(fixture.claim_next("investigations").await, None, "the budget is exhausted");

    let (text, samples) = fixture.scrape().await;
    let exhausted = value(
        &samples,
        "switchboard_admission_policies",
        &[("queue", "investigations"), ("status", "window_exhausted")],
    );
    assert!(exhausted.is_some_and(|policies| policies >= 1.0), "{text}");
    assert_eq!(
        value(
            &samples,
            "switchboard_admission_deferred_todos",
            &[("queue", "investigations"), ("reason", "window_exhausted")]
        ),
        Some(30.0),
        "{text}"
    );
}

// SPEC-0030 REQ-12 scenario "Charges match claims"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req12_charges_match_claims() {
    let fixture = Fixture::start(&["lane-m"], &[]).await;
    fixture.set_policy("lane-m", daily(100)).await;
    let (_, before) = fixture.scrape().await;
    let charged = |samples: &[Sample]| {
        value(samples, "switchboard_admission_charged_total", &[("queue", "lane-m")]).unwrap_or(0.0)
    };
    let claimed =
        |samples: &[Sample]| value(samples, "switchboard_todos_claimed_total", &[("queue", "lane-m")]).unwrap_or(0.0);

    let claims = 40;
    fixture.push("lane-m", claims).await;
    for _ in 0..claims {
        assert!(fixture.claim_next("lane-m").await.is_some(), "within budget, every claim is admitted");
    }

    let (text, after) = fixture.scrape().await;
    assert_eq!(charged(&after) - charged(&before), claims as f64, "{text}");
    assert_eq!(claimed(&after) - claimed(&before), claims as f64, "{text}");
}

// SPEC-0030 REQ-12: zero values for every status of every policy queue
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req12_every_status_and_reason_of_a_policy_queue_is_reported_even_at_zero() {
    let fixture = Fixture::start(&["quiet", "stopped", "unbudgeted"], &[]).await;
    fixture.set_policy("quiet", daily(10)).await;
    fixture.set_policy("stopped", json!({"max_in_flight": 0, "max_claims_per_window": null})).await;
    fixture.push("stopped", 2).await;
    fixture.push("unbudgeted", 1).await;

    let (text, samples) = fixture.scrape().await;
    for status in STATUSES {
        let quiet = value(&samples, "switchboard_admission_policies", &[("queue", "quiet"), ("status", status)]);
        assert_eq!(quiet, Some(if status == "admitted" { 1.0 } else { 0.0 }), "quiet/{status}:\n{text}");
        let stopped = value(&samples, "switchboard_admission_policies", &[("queue", "stopped"), ("status", status)]);
        assert_eq!(stopped, Some(if status == "paused" { 1.0 } else { 0.0 }), "stopped/{status}:\n{text}");
    }
    for reason in REASONS {
        let quiet = value(&samples, "switchboard_admission_deferred_todos", &[("queue", "quiet"), ("reason", reason)]);
        assert_eq!(quiet, Some(0.0), "quiet/{reason}:\n{text}");
        let stopped =
            value(&samples, "switchboard_admission_deferred_todos", &[("queue", "stopped"), ("reason", reason)]);
        assert_eq!(stopped, Some(if reason == "paused" { 2.0 } else { 0.0 }), "stopped/{reason}:\n{text}");
    }
    // A queue without a policy has no admission gauges at all: there is no status to report.
    let gauges = ["switchboard_admission_policies", "switchboard_admission_deferred_todos"];
    assert!(!samples.iter().any(|s| gauges.contains(&s.name.as_str()) && s.labels["queue"] == "unbudgeted"), "{text}");
}

// SPEC-0030 REQ-12 (SPEC-0023 REQ-5): no owner, endpoint, team, todo or human label
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req12_no_series_carries_an_owner_endpoint_team_todo_or_human_label() {
    let fixture = Fixture::start(&["inbox", "held"], &[]).await;
    fixture.set_policy("inbox", daily(5)).await;
    fixture.set_policy("held", json!({"max_in_flight": 0, "max_claims_per_window": null})).await;
    let mut todo_ids = fixture.push("inbox", 3).await;
    todo_ids.extend(fixture.push("held", 1).await);
    let first = fixture.claim_next("inbox").await.expect("claim");
    let second = fixture.claim_next("inbox").await.expect("claim");
    let (is_error, answer) = fixture.client.tool(fixture.slug(), fixture.key(), "complete", json!({"id": first})).await;
    assert!(!is_error, "{answer}");
    let (is_error, answer) = fixture.client.tool(fixture.slug(), fixture.key(), "fail", json!({"id": second})).await;
    assert!(!is_error, "{answer}");
    let (is_error, _) =
        fixture.client.tool(fixture.slug(), fixture.key(), "claim", json!({"id": todo_ids[3].clone()})).await;
    assert!(is_error, "a claim in a paused queue is refused");

    let (text, samples) = fixture.scrape().await;
    assert!(value(&samples, "switchboard_todos_completed_total", &[("queue", "inbox"), ("outcome", "fail")]).is_some());
    for sample in &samples {
        for label in sample.labels.keys() {
            assert!(ALLOWED_LABELS.contains(&label.as_str()), "{} carries label {label}:\n{text}", sample.name);
        }
    }
    let endpoint_id = fixture.endpoint["id"].as_str().expect("endpoint id");
    let identifiers = [endpoint_id, fixture.slug(), fixture.human_id.as_str(), "grafana-reader", "metrics worker"];
    for identifier in identifiers.into_iter().chain(todo_ids.iter().map(String::as_str)) {
        assert!(!text.contains(identifier), "the scrape names {identifier}:\n{text}");
    }
    for prefix in ["ep_", "hu_", "tm_", "td_", "ap_", "sbh_", "sbk_"] {
        assert!(!text.contains(prefix), "the scrape carries an id or token prefix {prefix}:\n{text}");
    }
}

// SPEC-0030 REQ-12 (SPEC-0023 REQ-5): queue capped, with overflow as __other__
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req12_queue_label_is_capped_with_overflow_as_other() {
    let fixture =
        Fixture::start(&["alpha", "bravo", "charlie"], &[("SWITCHBOARD_METRICS_QUEUE_LABELS_MAX", "2")]).await;
    for queue in ["alpha", "bravo", "charlie"] {
        fixture.set_policy(queue, daily(100)).await;
    }
    fixture.push("alpha", 1).await;
    fixture.push("bravo", 2).await;
    fixture.push("charlie", 3).await;

    let queue_labels = |samples: &[Sample]| -> BTreeSet<String> {
        samples.iter().filter_map(|s| s.labels.get("queue").cloned()).collect()
    };
    let (text, first) = fixture.scrape().await;
    let labels = queue_labels(&first);
    assert_eq!(labels.len(), 3, "two queue names and __other__:\n{text}");
    assert!(labels.contains("__other__"), "{text}");
    // Names are admitted in sorted order when they first appear together.
    assert_eq!(labels, BTreeSet::from(["__other__".to_string(), "alpha".into(), "bravo".into()]), "{text}");
    let created = |samples: &[Sample], queue: &str| {
        value(samples, "switchboard_todos_created_total", &[("queue", queue), ("source", "human")])
    };
    assert_eq!(created(&first, "__other__"), Some(3.0), "{text}");
    assert_eq!(
        value(&first, "switchboard_admission_policies", &[("queue", "__other__"), ("status", "admitted")]),
        Some(1.0),
        "every family goes through the same limiter:\n{text}"
    );

    // Stable across scrapes: the same queue keeps the same label, a new one cannot displace it.
    fixture.push("charlie", 1).await;
    let (text, second) = fixture.scrape().await;
    assert_eq!(queue_labels(&second), labels, "{text}");
    assert_eq!(created(&second, "__other__"), Some(4.0), "{text}");
}

// SPEC-0030 REQ-12 (SPEC-0023 REQ-6): omission, never zero, when the collector cannot compute
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req12_admission_gauges_are_omitted_when_the_collector_fails() {
    let fixture = Fixture::start(&["inbox"], &[]).await;
    fixture.set_policy("inbox", daily(10)).await;
    fixture.push("inbox", 2).await;
    let gauges = ["switchboard_admission_policies", "switchboard_admission_deferred_todos"];
    let errors = |samples: &[Sample]| {
        value(samples, "switchboard_metrics_collection_errors_total", &[("collector", "admission")])
    };

    let (text, healthy) = fixture.scrape().await;
    assert!(gauges.iter().all(|g| has_family(&healthy, g)), "{text}");
    assert_eq!(errors(&healthy), Some(0.0), "{text}");

    let mut sql = sqlx::PgConnection::connect(&fixture.database.url).await.expect("direct connection");
    sqlx::query("ALTER TABLE admission_policies RENAME TO admission_policies_hidden_by_test")
        .execute(&mut sql)
        .await
        .expect("hide the policies");
    let (status, text) = fixture.client.scrape_metrics(Some(METRICS_TOKEN)).await;
    sqlx::query("ALTER TABLE admission_policies_hidden_by_test RENAME TO admission_policies")
        .execute(&mut sql)
        .await
        .expect("restore the policies");
    assert_eq!(status, 200, "{text}");
    let failed = parse(&text);
    assert!(!gauges.iter().any(|g| has_family(&failed, g)), "the gauges are absent, not zero:\n{text}");
    assert!(!text.contains("switchboard_admission_policies"), "{text}");
    assert_eq!(errors(&failed), Some(1.0), "{text}");
    assert_eq!(
        value(&failed, "switchboard_todos_created_total", &[("queue", "inbox"), ("source", "human")]),
        Some(2.0),
        "counters are always present:\n{text}"
    );

    let (text, recovered) = fixture.scrape().await;
    assert!(gauges.iter().all(|g| has_family(&recovered, g)), "{text}");
    assert_eq!(errors(&recovered), Some(1.0), "the error count is a counter:\n{text}");
}

// SPEC-0030 REQ-12 (SPEC-0023 REQ-6): a collector that does not answer in time is omitted too
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req12_admission_gauges_are_omitted_when_the_collector_times_out() {
    let fixture = Fixture::start(&["inbox"], &[]).await;
    fixture.set_policy("inbox", daily(10)).await;
    fixture.push("inbox", 1).await;

    let mut sql = sqlx::PgConnection::connect(&fixture.database.url).await.expect("direct connection");
    let mut lock = sql.begin().await.expect("begin");
    sqlx::query("LOCK TABLE admission_policies IN ACCESS EXCLUSIVE MODE").execute(&mut *lock).await.expect("lock");
    let started = std::time::Instant::now();
    let (status, text) = fixture.client.scrape_metrics(Some(METRICS_TOKEN)).await;
    let waited = started.elapsed();
    lock.rollback().await.expect("release the lock");
    assert_eq!(status, 200, "{text}");
    assert!(waited < std::time::Duration::from_secs(10), "the scrape waited {waited:?}");
    let blocked = parse(&text);
    assert!(!has_family(&blocked, "switchboard_admission_policies"), "{text}");
    assert!(!has_family(&blocked, "switchboard_admission_deferred_todos"), "{text}");
    assert_eq!(
        value(&blocked, "switchboard_metrics_collection_errors_total", &[("collector", "admission")]),
        Some(1.0),
        "{text}"
    );
    assert!(has_family(&blocked, "switchboard_todos_created_total"), "{text}");

    let (text, recovered) = fixture.scrape().await;
    assert!(has_family(&recovered, "switchboard_admission_policies"), "{text}");
}

// intake-capacity.md, Metrics: the capacity gauge, intake refusals by source, clears by action
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intake_capacity_refusals_and_clears_show_up_in_metrics() {
    let fixture = Fixture::start(&["capped"], &[]).await;
    let capacity = |samples: &[Sample]| value(samples, "switchboard_queue_capacity_max", &[]);
    let refusals = |samples: &[Sample]| {
        value(samples, "switchboard_intake_refusals_total", &[("queue", "capped"), ("source", "human")]).unwrap_or(0.0)
    };
    let cleared = |samples: &[Sample]| {
        value(samples, "switchboard_todos_discarded_total", &[("queue", "capped"), ("action", "clear")]).unwrap_or(0.0)
    };

    let (text, before) = fixture.scrape().await;
    assert_eq!(capacity(&before), Some(0.0), "the built-in default, unlimited:\n{text}");
    assert_eq!(
        value(&before, "switchboard_metrics_collection_errors_total", &[("collector", "capacity")]),
        Some(0.0),
        "the capacity collector's error counter is present at 0 from the first scrape:\n{text}"
    );

    // An instance admin sets the capacity; the gauge is the effective value at scrape time.
    let (_, admin) = add_human("capacity-admin", &["--admin", "--database-url", fixture.database.url.as_str()]);
    let response = reqwest::Client::new()
        .patch(format!("{}/api/v1/system/queue-capacity", fixture.client.base))
        .bearer_auth(&admin)
        .json(&json!({"max_pending_per_queue": 2}))
        .send()
        .await
        .expect("PATCH queue-capacity");
    assert_eq!(response.status().as_u16(), 200);
    let answer: Value = response.json().await.expect("capacity body");
    assert_eq!(answer["effective"]["max_pending_per_queue"], 2, "{answer}");

    // The queue fills up to the capacity; the next todo is refused as queue_full.
    fixture.push("capped", 2).await;
    let body = json!({"scope": fixture.scope(), "queue": "capped", "title": "one too many"});
    let (status, refused) = fixture.client.post("/api/v1/todos", &fixture.human, body).await;
    assert_eq!((status, refused["code"].as_str()), (429, Some("queue_full")), "{refused}");

    let (text, full) = fixture.scrape().await;
    assert_eq!(capacity(&full), answer["effective"]["max_pending_per_queue"].as_f64(), "{text}");
    assert_eq!(refusals(&full) - refusals(&before), 1.0, "{text}");

    // The owner clears the queue: both pending todos are discarded, counted under `clear`.
    let path = format!("/api/v1/queues/{}/capped/clear", fixture.scope());
    let (status, removed) = fixture.client.post(&path, &fixture.human, json!({})).await;
    assert_eq!((status, removed), (200, json!({"removed": 2})));

    let (text, after) = fixture.scrape().await;
    assert_eq!(cleared(&after) - cleared(&before), 2.0, "{text}");
    assert_eq!(refusals(&after), refusals(&full), "a clear is not an intake refusal:\n{text}");
    for sample in &after {
        for label in sample.labels.keys() {
            assert!(ALLOWED_LABELS.contains(&label.as_str()), "{} carries label {label}:\n{text}", sample.name);
        }
    }
}
