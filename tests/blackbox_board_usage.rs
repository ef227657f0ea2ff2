//! Issue #29: usage over time on a budgeted queue's page and the budget preview ("what-if"),
//! in a real browser (headless Chromium) against the real binary on real PostgreSQL.
//!
//! The preview's history is seeded the way it happens (real claims over MCP, completed), then
//! moved to known instants in the past with one SQL statement, so the expected answer can be
//! worked out by hand. Screenshots land in `target/board-screenshots/usage-*.png`.

mod board_support;
mod support;

use board_support::world::{World, claim_next, daily, fill};
use board_support::{Driver, Js};
use chrono::{DateTime, Duration, DurationRound, Utc};
use fantoccini::Locator;
use serde_json::{Value, json};

// Issue #29, item 5: the preview replays the last week's claims under the budget as typed and
// saves nothing; "Save budget" then saves what was previewed. JavaScript off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_preview_replays_the_last_week_and_saves_nothing() {
    let world = World::start(1).await;
    let ep = world.vend(&world.owner, "research", &["inbox"]).await;
    // Four real claims, completed, then placed three days ago at 10:00, 10:01, 10:02 and 10:03
    // UTC, each held for a minute.
    for n in 0..4 {
        world.create(&world.owner, &ep, "inbox", &format!("job {n}")).await;
        let id = claim_next(&world.api, &ep).await.expect("a claim");
        let (is_error, done) = world.api.tool(&ep.slug, &ep.key, "complete", json!({"id": id})).await;
        assert!(!is_error, "{done}");
    }
    let day = Utc::now().duration_trunc(Duration::days(1)).expect("midnight") - Duration::days(3);
    let ten = day + Duration::hours(10);
    let pool = sqlx::PgPool::connect(&world.db.url).await.expect("connect");
    let moved = sqlx::query(
        "WITH ordered AS (SELECT todo_id, seq, row_number() OVER (ORDER BY started_at) - 1 AS n FROM todo_attempts) \
         UPDATE todo_attempts a SET started_at = $1 + make_interval(mins => o.n::int), \
                                    ended_at = $1 + make_interval(mins => o.n::int + 1) \
         FROM ordered o WHERE a.todo_id = o.todo_id AND a.seq = o.seq",
    )
    .bind(ten)
    .execute(&pool)
    .await
    .expect("move the claims into the past");
    assert_eq!(moved.rows_affected(), 4);

    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::Off, 0).await;
    let budget = format!("/queues/endpoint:{}/inbox/budget", ep.id);
    browser.goto(&world.url(&budget)).await;
    fill(&browser, "max_claims_per_window", "3").await;
    fill(&browser, "tz", "UTC").await;
    fill(&browser, "start", "00:00").await;
    browser.press_button("Preview").await;
    browser.wait_for_element("#preview-deferred").await;
    browser.screenshot("usage-preview").await;

    // By hand: three fit the day; the fourth (10:03) waits for the next midnight, 13 h 57 min.
    let status = browser.text(".preview p[role=status]").await;
    assert!(status.contains("Of the 4 claims"), "the preview replayed the wrong history: {status}");
    assert_eq!(browser.text("#preview-deferred").await, "1");
    assert_eq!(browser.text("#preview-longest").await, "13 h 57 min");
    assert_eq!(browser.text("#preview-median").await, "13 h 57 min");
    assert_eq!(browser.text("#preview-exhausted-count").await, "1");
    let ran_out = browser
        .execute("return document.querySelector('#preview-windows time').getAttribute('datetime');", vec![])
        .await;
    let ran_out: DateTime<Utc> = ran_out.as_str().expect("datetime").parse().expect("RFC 3339");
    assert_eq!(ran_out, ten + Duration::minutes(2), "the day ran out at its third claim");

    // Nothing was saved; the form kept what was typed, and saving it saves the previewed budget.
    let (status, _) = world.admission(&world.owner, &ep, "inbox").await;
    assert_eq!(status, 404, "a preview saved a policy");
    let typed = browser.execute("return document.getElementById('max_claims_per_window').value;", vec![]).await;
    assert_eq!(typed, json!("3"));
    browser.press_button("Save budget").await;
    browser.wait_for_path(&format!("/queues/endpoint:{}/inbox", ep.id)).await;
    let (status, detail) = world.admission(&world.owner, &ep, "inbox").await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(detail["policy"], daily(3, "UTC"), "{detail}");

    // A budget the store refuses is refused by the preview too, naming its field.
    browser.goto(&world.url(&budget)).await;
    fill(&browser, "tz", "Mars/Olympus_Mons").await;
    browser.press_button("Preview").await;
    browser.wait_for_element("#tz-error").await;
    assert!(browser.client.find(Locator::Id("preview-deferred")).await.is_err(), "a refused budget was previewed");
    browser.close().await;
}

// Issue #29, item 4: a budgeted queue's page charts its windows against the limit, marks the
// one that ran out with the time it did, and counts the last 24 hours' claims by hour, in a data
// table beside each chart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_charts_show_windows_against_the_limit_and_claims_per_hour() {
    let world = World::start(1).await;
    let ep = world.vend(&world.owner, "research", &["inbox"]).await;
    world.policy(&world.owner, &ep, "inbox", daily(2, "UTC")).await;
    world.create_many(&world.owner, &ep, "inbox", "job", 3).await;
    let before = Utc::now() - Duration::seconds(1);
    assert!(claim_next(&world.api, &ep).await.is_some());
    assert!(claim_next(&world.api, &ep).await.is_some());
    let after = Utc::now() + Duration::seconds(1);
    assert_eq!(claim_next(&world.api, &ep).await, None, "the day's budget of 2 admitted a third");

    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::On, 0).await;
    browser.goto(&world.url(&format!("/queues/endpoint:{}/inbox", ep.id))).await;
    browser.wait_for_element("section.usage").await;
    browser.screenshot("usage-charts").await;
    let read: Value = browser
        .execute(
            "const tables = document.querySelectorAll('section.usage table');\
             const rows = t => [...t.querySelectorAll('tbody tr')].map(r => [...r.cells].map(c => c.textContent.trim()));\
             const time = tables[0].querySelector('time');\
             return {windows: rows(tables[0]), hours: rows(tables[1]),\
                     ran_out: time ? time.getAttribute('datetime') : null,\
                     full_bars: document.querySelectorAll('section.usage rect.full').length,\
                     bars: document.querySelectorAll('section.usage rect').length};",
            vec![],
        )
        .await;
    let windows = read["windows"].as_array().expect("window rows");
    assert_eq!(windows.len(), 1, "one window so far: {read}");
    assert_eq!(windows[0][1], "2 of 2", "{read}");
    let ran_out: DateTime<Utc> = read["ran_out"].as_str().expect("a ran-out time").parse().expect("RFC 3339");
    assert!(before <= ran_out && ran_out <= after, "ran out at {ran_out}, outside the second claim's span");
    assert_eq!(read["full_bars"], 1, "the full window is marked in the chart: {read}");
    assert_eq!(read["bars"], 1 + 24, "one bar per window and per hour: {read}");
    let hours = read["hours"].as_array().expect("hour rows");
    assert_eq!(hours.len(), 24);
    let claims: i64 = hours.iter().map(|row| row[1].as_str().expect("count").parse::<i64>().expect("number")).sum();
    assert_eq!(claims, 2, "the last 24 hours held two claims: {read}");
    let recent: i64 = hours[22..].iter().map(|row| row[1].as_str().expect("count").parse::<i64>().expect("n")).sum();
    assert_eq!(recent, 2, "both in the latest hours, where they were made: {read}");
    browser.close().await;
}

// Issue #52, item 4: a policy with several windows has a usage chart per window, the primary
// first, each with its data table; an additional window's usage comes from the charge ledger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ext52_every_window_of_a_policy_has_its_own_usage_chart() {
    let world = World::start(1).await;
    let ep = world.vend(&world.owner, "research", &["inbox"]).await;
    let mut policy = daily(5, "UTC");
    policy["additional_windows"] = json!([{"max_claims": 2, "window": {"period": "minute"}}]);
    world.policy(&world.owner, &ep, "inbox", policy).await;
    world.create_many(&world.owner, &ep, "inbox", "job", 2).await;
    assert!(claim_next(&world.api, &ep).await.is_some());
    assert!(claim_next(&world.api, &ep).await.is_some());

    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::Off, 0).await;
    browser.goto(&world.url(&format!("/queues/endpoint:{}/inbox", ep.id))).await;
    browser.wait_for_element("section.usage").await;
    browser.screenshot("usage-every-window").await;
    let read: Value = browser
        .execute(
            "const rows = t => [...t.querySelectorAll('tbody tr')].map(r => [...r.cells].map(c => c.textContent.trim()));\
             return {headings: [...document.querySelectorAll('section.usage h3')].map(h => h.textContent.trim()),\
                     tables: [...document.querySelectorAll('section.usage table')].map(rows),\
                     titles: [...document.querySelectorAll('section.usage svg title[id]')].map(t => t.id)};",
            vec![],
        )
        .await;
    assert_eq!(read["headings"], json!(["Claims per day from 00:00 UTC", "Claims per minute"]), "{read}");
    let tables = read["tables"].as_array().expect("tables");
    assert_eq!(tables.len(), 3, "the day's table, the minute's and the hours': {read}");
    assert_eq!(tables[0][0][1], "2 of 5", "{read}");
    let minutes = tables[1].as_array().expect("minute rows");
    assert_eq!(minutes.len(), 30, "the last 30 minutes, all inside the ledger: {read}");
    let used: i64 = minutes
        .iter()
        .map(|row| row[1].as_str().expect("used").split(" of ").next().expect("n").parse::<i64>().expect("n"))
        .sum();
    assert_eq!(used, 2, "the two claims, each charged to its minute: {read}");
    assert!(minutes.iter().all(|row| row[1].as_str().is_some_and(|used| used.ends_with(" of 2"))), "{read}");
    let ids: Vec<&str> = read["titles"].as_array().expect("ids").iter().filter_map(Value::as_str).collect();
    assert_eq!(ids, ["windows-chart-title-0", "windows-chart-title-1", "hours-chart-title"], "ids stay unique");
    browser.close().await;
}
