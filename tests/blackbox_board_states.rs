//! The board's less common states in a real browser (issue #12; SPEC-0030 REQ-9 and REQ-11;
//! intake capacity's board page): the capacity settings form saves without JavaScript and the
//! queue headers then say "P pending of C" and "at capacity"; a bad value is named next to its
//! field and changes nothing; a capacity locked by the environment is shown as locked and cannot
//! be changed from the board; a policy row that cannot be evaluated shows the queue as
//! unavailable, in words and as an alarm.

mod board_support;
mod support;

use board_support::world::{Ep, World, read_row};
use board_support::{BROWSER_WAIT, Browser, Driver, Js};
use fantoccini::Locator;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::intake::{CAPACITY_ENV, CAPACITY_PATH};
use support::{Client, Server, data_dir, run};

/// Adds instance admin `name` to the world's database.
fn add_admin(world_db: &str, name: &str) {
    let (code, _, stderr) = run(&["admin", "human", "add", name, "--admin", "--database-url", world_db], &[]);
    assert_eq!(code, 0, "admin human add --admin: {stderr}");
}

/// The effective capacity the API reports: (max_pending_per_queue, locked).
async fn effective_capacity(api: &Client, token: &str) -> (i64, bool) {
    let (status, body) = api.get(CAPACITY_PATH, token).await;
    assert_eq!(status, 200, "{body}");
    let effective = &body["effective"];
    (effective["max_pending_per_queue"].as_i64().expect("effective"), effective["locked"] == json!(true))
}

/// Waits (up to [`BROWSER_WAIT`]) until the API reports `expected`. The form's redirect lands on
/// the path it was sent from, so the browser's path cannot say the save is done; the setting can.
async fn until_effective_capacity(api: &Client, token: &str, expected: (i64, bool)) {
    let deadline = Instant::now() + BROWSER_WAIT;
    loop {
        let now = effective_capacity(api, token).await;
        if now == expected {
            return;
        }
        assert!(Instant::now() < deadline, "the effective capacity stayed {now:?}, expected {expected:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Submits the capacity form as a person would: types the value and presses Save.
async fn save_capacity(browser: &Browser, value: &str) {
    let field = browser.client.find(Locator::Id("max_pending_per_queue")).await.expect("the capacity field");
    field.clear().await.expect("clear");
    field.send_keys(value).await.expect("type");
    let form = browser.client.form(Locator::Css("form.stacked")).await.expect("the capacity form");
    form.submit().await.expect("submit");
}

/// The text of the board table's row of the queue titled `title`.
async fn header(browser: &Browser, world: &World, title: &str) -> String {
    browser.goto(&world.url("/")).await;
    let row = read_row(browser, title).await;
    assert!(!row.is_null(), "no row {title}");
    row["text"].as_str().expect("row text").to_string()
}

// intake-capacity "Board": the settings page (admins), and the header's "P pending of C".
// SPEC-0030 REQ-11 (the header shows intake beside the budget)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req11_the_capacity_form_saves_without_javascript_and_headers_show_pending_of_capacity() {
    let world = World::start(1).await;
    add_admin(&world.db.url, "boss");
    let ep: Ep = world.vend(&world.owner, "worker", &["inbox"]).await;
    world.create(&world.owner, &ep, "inbox", "first").await;

    let driver = Driver::start().await;
    let boss = driver.session(Js::Off).await;
    boss.sign_in(world.base(0), &world.db.url, "boss").await;
    boss.goto(&world.url("/settings/capacity")).await;
    save_capacity(&boss, "2").await;
    until_effective_capacity(&world.api, &world.owner, (2, false)).await;

    let owner = world.owner_browser(&driver, Js::Off, 0).await;
    let title = "worker / inbox";
    let one = header(&owner, &world, title).await;
    assert!(one.contains("1 pending of 2") && !one.contains("at capacity"), "{one}");
    world.create(&world.owner, &ep, "inbox", "second").await;
    let full = header(&owner, &world, title).await;
    assert!(full.contains("2 pending of 2 · at capacity"), "{full}");

    // A value the store refuses is named next to its field, and the setting stays as it was.
    boss.goto(&world.url("/settings/capacity")).await;
    save_capacity(&boss, "-3").await;
    // The refusal answers on the same path: wait for its page, not for the old one.
    boss.wait_for_element("#max_pending_per_queue-error").await;
    let described = boss
        .execute(
            "const f = document.getElementById('max_pending_per_queue');\
             const e = document.getElementById('max_pending_per_queue-error');\
             return [f.getAttribute('aria-invalid'), f.getAttribute('aria-describedby'), e ? e.textContent : null];",
            vec![],
        )
        .await;
    assert_eq!(described[0], json!("true"), "{described}");
    assert_eq!(described[1], json!("max_pending_per_queue-error"), "{described}");
    assert!(described[2].as_str().is_some_and(|text| text.contains("max_pending_per_queue")), "{described}");
    assert_eq!(effective_capacity(&world.api, &world.owner).await, (2, false));
    boss.close().await;
    owner.close().await;
}

// intake-capacity "Board": a capacity locked by the environment is shown as such.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req11_a_capacity_locked_by_the_environment_is_shown_locked_and_cannot_be_changed() {
    let db = engine::testing::empty_database().await;
    let dir = data_dir();
    let server = Server::start(&["--database-url", &db.url], &[(CAPACITY_ENV, "5")], dir.path());
    add_admin(&db.url, "boss");
    let token = support::add_human("reader", &["--database-url", &db.url]).1;
    let api = Client::new(&server.base);

    let driver = Driver::start().await;
    let boss = driver.session(Js::On).await;
    boss.sign_in(&server.base, &db.url, "boss").await;
    boss.goto(&server.url("/settings/capacity")).await;
    let page: Value = boss.execute("return document.getElementById('main').innerText;", vec![]).await;
    let page = page.as_str().expect("text");
    assert!(page.contains(&format!("Locked by {CAPACITY_ENV}")), "{page}");
    assert!(page.contains("5 pending todos per queue"), "{page}");
    let forms = boss.execute("return document.querySelectorAll('#main form').length;", vec![]).await;
    assert_eq!(forms, json!(0), "a locked setting offers no form");

    // Posting the form anyway (with a valid token) changes nothing.
    let csrf = boss.execute("return document.querySelector('form.signout input[name=csrf]').value;", vec![]).await;
    let cookie = boss.session_cookie().await.expect("session");
    let web = board_support::world::Web::new(&server.base, &cookie);
    let answer = web
        .post("/settings/capacity", &format!("csrf={}&max_pending_per_queue=50", csrf.as_str().expect("csrf")))
        .await;
    assert_ne!(answer.status, 303, "a locked capacity must not save: {answer:?}");
    assert_eq!(effective_capacity(&api, &token).await, (5, true));
    boss.close().await;
}

// SPEC-0030 REQ-9: "MUST be shown on the queue's board header".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req9_a_policy_that_cannot_be_evaluated_shows_the_queue_unavailable_on_the_board() {
    let world = World::start(1).await;
    let ep = world.vend(&world.owner, "worker", &["metered"]).await;
    world.policy(&world.owner, &ep, "metered", board_support::world::daily(10, "America/Los_Angeles")).await;
    world.create(&world.owner, &ep, "metered", "waits").await;
    // The zone database no longer knows the stored zone (REQ-9's scenario), written past the API.
    let pool = sqlx::PgPool::connect(&world.db.url).await.expect("connect");
    sqlx::query("UPDATE admission_policies SET window_tz = 'Mars/Olympus_Mons'")
        .execute(&pool)
        .await
        .expect("damage the policy row");
    pool.close().await;

    let driver = Driver::start().await;
    let owner = world.owner_browser(&driver, Js::On, 0).await;
    owner.goto(&world.url("/")).await;
    let row = read_row(&owner, "worker / metered").await;
    assert_eq!(row["status"], "unavailable", "{row}");
    let alarm = owner
        .execute(
            "return [...document.querySelectorAll('tr.live-header')].filter(r => r.innerText.includes('worker / metered'))\
               .map(r => r.classList.contains('alarm'));",
            vec![],
        )
        .await;
    assert_eq!(alarm, json!([true]), "an unavailable queue is marked as an alarm");
    owner.goto(&world.url(&format!("/queues/endpoint:{}/metered", ep.id))).await;
    let text = owner.execute("return document.querySelector('.live-header').textContent;", vec![]).await;
    assert!(text.as_str().is_some_and(|t| t.contains("status: unavailable")), "{text}");
    owner.close().await;
}

// SPEC-0030 REQ-11 Accessibility: "a change to exhausted, paused or unavailable is announced".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req11_a_queue_turning_exhausted_is_announced_in_the_polite_live_region() {
    let world = World::start(1).await;
    let ep = world.vend(&world.owner, "worker", &["metered"]).await;
    world.policy(&world.owner, &ep, "metered", board_support::world::daily(1, "America/Los_Angeles")).await;
    world.create_many(&world.owner, &ep, "metered", "job", 2).await;

    let driver = Driver::start().await;
    let owner = world.owner_browser(&driver, Js::On, 0).await;
    owner.goto(&world.url("/")).await;
    let polite = owner.execute("return document.getElementById('announcer').getAttribute('aria-live');", vec![]).await;
    assert_eq!(polite, json!("polite"));
    let before = owner.execute("return document.getElementById('announcer').textContent;", vec![]).await;
    assert_eq!(before, json!(""), "nothing announced before the change");

    // The agent spends the day's only claim: the open board's header turns exhausted and says so.
    assert!(board_support::world::claim_next(&world.api, &ep).await.is_some(), "the first claim is admitted");
    let deadline = std::time::Instant::now() + board_support::BROWSER_WAIT;
    loop {
        let said = owner.execute("return document.getElementById('announcer').textContent;", vec![]).await;
        if said == json!("metered is now exhausted") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never announced; the live region says {said}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    owner.close().await;
}
