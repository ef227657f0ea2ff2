//! Issue #29, "Scale": the board's front page is a table of queues, filtered by status and name
//! and paged by keyset; a queue's todos are paged by keyset with exact counts, with no fixed
//! cap. In a real browser (headless Chromium, JavaScript off, following the pages' own links)
//! against the real binary on real PostgreSQL: 250 queues and 1,200 todos.

mod board_support;
mod support;

use board_support::world::World;
use board_support::{Browser, Driver, Js};
use fantoccini::Locator;
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// The `href` of the link whose text is `text`, if the page has one.
async fn link(browser: &Browser, text: &str) -> Option<String> {
    let xpath = format!("//a[normalize-space()='{text}']");
    let found = browser.client.find(Locator::XPath(&xpath)).await.ok()?;
    found.attr("href").await.expect("href")
}

/// The first cells' text of the page's table rows matching `css`.
async fn first_cells(browser: &Browser, css: &str) -> Vec<String> {
    let script = format!("return [...document.querySelectorAll('{css}')].map(r => r.cells[0].textContent.trim());");
    serde_json::from_value(browser.execute(&script, vec![]).await).expect("cell texts")
}

// Issue #29: 250 queues, 50 a page, every one listed exactly once in title order; the status
// filter and the search narrow the table and keep paging within it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_board_pages_250_queues_by_keyset_and_filters_by_status_and_name() {
    let world = World::start(1).await;
    let queues: Vec<String> = (0..250).map(|n| format!("q{n:03}")).collect();
    let names: Vec<&str> = queues.iter().map(String::as_str).collect();
    let ep = world.vend(&world.owner, "bulk", &names).await;
    let paused = json!({"max_in_flight": 0, "max_claims_per_window": null, "window": null});
    for queue in ["q007", "q123", "q201"] {
        world.policy(&world.owner, &ep, queue, paused.clone()).await;
    }
    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::Off, 0).await;

    browser.goto(&world.url("/")).await;
    assert_eq!(browser.text("#queue-summary").await, "Queues 1 to 50 of 250.");
    browser.screenshot("scale-board").await;
    let mut seen = Vec::new();
    loop {
        seen.extend(first_cells(&browser, "table.queues tbody tr").await);
        match link(&browser, "Next page").await {
            Some(next) => browser.goto(&world.url(&next)).await,
            None => break,
        }
        assert!(seen.len() <= 250, "paging never ended: {} rows", seen.len());
    }
    let expected: Vec<String> = queues.iter().map(|q| format!("bulk / {q}")).collect();
    assert_eq!(seen, expected, "every queue once, in title order, across the pages");
    assert_eq!(browser.text("#queue-summary").await, "Queues 201 to 250 of 250.");

    // The status filter: exactly the three paused queues.
    browser.goto(&world.url("/?status=paused")).await;
    assert_eq!(first_cells(&browser, "table.queues tbody tr").await, ["bulk / q007", "bulk / q123", "bulk / q201"]);
    assert!(browser.text("#queue-summary").await.contains("of 3 matching (of 250 in all)"));
    // The search, by the form: "q12" names q120 to q129, one page.
    browser.goto(&world.url("/")).await;
    let field = browser.client.find(Locator::Id("q")).await.expect("the search field");
    field.send_keys("q12").await.expect("type");
    browser.client.form(Locator::Css("form.filters")).await.expect("form").submit().await.expect("submit");
    browser.wait_for_element("#queue-summary").await;
    let found = first_cells(&browser, "table.queues tbody tr").await;
    let expected: Vec<String> = (120..130).map(|n| format!("bulk / q{n}")).collect();
    assert_eq!(found, expected);
    assert!(link(&browser, "Next page").await.is_none(), "ten matches fit one page");
    browser.close().await;
}

// Issue #29: 1,200 todos in one queue, created in two batches (so hundreds share a creation
// instant and only the id orders them): exact counts, 100 a page, every todo exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_of_1200_todos_pages_by_keyset_with_exact_counts() {
    let world = World::start(1).await;
    let ep = world.vend(&world.owner, "bulk", &["inbox"]).await;
    let mut created = BTreeSet::new();
    for batch in 0..2 {
        let todos: Vec<Value> = (0..600)
            .map(|n| json!({"scope": ep.scope, "queue": "inbox", "title": format!("job {batch}-{n:03}")}))
            .collect();
        let (status, answer) = world.api.post("/api/v1/todos", &world.owner, json!(todos)).await;
        assert_eq!(status, 201, "{answer}");
        for item in answer["todos"].as_array().expect("created") {
            created.insert(item["todo"]["id"].as_str().expect("id").to_string());
        }
    }
    assert_eq!(created.len(), 1200);

    let driver = Driver::start().await;
    let browser = world.owner_browser(&driver, Js::Off, 0).await;
    let queue = format!("/queues/endpoint:{}/inbox", ep.id);
    browser.goto(&world.url(&queue)).await;
    let counts = browser.text("#todo-counts").await;
    assert!(counts.starts_with("1200 todos: 1200 pending, 0 claimed"), "{counts}");
    assert!(browser.text(".live-header").await.contains("1200 pending"), "the header's exact pending count");
    let mut seen: Vec<String> = Vec::new();
    let mut pages = 0;
    loop {
        let ids = browser
            .execute(
                "return [...document.querySelectorAll('table.todos-table tbody tr td:first-child a')]\
                   .map(a => a.getAttribute('href').replace('/todos/', ''));",
                vec![],
            )
            .await;
        let ids: Vec<String> = serde_json::from_value(ids).expect("ids");
        assert!(ids.len() <= 100, "a page listed {}", ids.len());
        seen.extend(ids);
        pages += 1;
        match link(&browser, "Older todos").await {
            Some(older) => browser.goto(&world.url(&older)).await,
            None => break,
        }
        assert!(pages <= 12, "paging never ended");
    }
    assert_eq!(pages, 12);
    let unique: BTreeSet<String> = seen.iter().cloned().collect();
    assert_eq!(seen.len(), 1200, "a todo was listed twice or skipped");
    assert_eq!(unique, created, "the pages listed other todos than were created");
    // Newest first: the second batch's todos come before the first's.
    let last_page_titles = first_cells(&browser, "table.todos-table tbody tr").await;
    assert!(last_page_titles.iter().all(|t| t.starts_with("job 0-")), "the last page holds the oldest batch");
    browser.close().await;
}
