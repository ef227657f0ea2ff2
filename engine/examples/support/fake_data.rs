//! Seeded realistic todos for the benchmarks (issue #14 item 6): titles and payloads from the
//! `fake` crate (names, companies, places, lorem, some in other scripts, a few titles near the
//! length limit), generated before anything is timed. A fixed seed per benchmark keeps runs
//! comparable: the same titles and payloads every run, on every machine.
//!
//! Included by each benchmark with `#[path = "support/fake_data.rs"] mod fake_data;` (cargo
//! takes only `examples/*.rs` as examples, so this file is not one).

use fake::faker::address::raw::{CityName, StreetName};
use fake::faker::company::raw::{CatchPhrase, CompanyName};
use fake::faker::internet::raw::SafeEmail;
use fake::faker::job::raw::Title as JobTitle;
use fake::faker::lorem::raw::{Sentence, Words};
use fake::faker::name::raw::Name;
use fake::locales::{EN, FR_FR, JA_JP, ZH_CN, ZH_TW};
use fake::rand::rngs::ChaCha8Rng;
use fake::rand::{RngExt, SeedableRng};
use fake::{Dummy, Fake};
use models::todo::TITLE_LENGTH_MAX;
use serde_json::{Value, json};

/// One todo's generated text.
pub struct Sample {
    pub title: String,
    pub payload: Value,
}

/// `count` samples from `seed`: the same list for the same arguments.
pub fn samples(seed: u64, count: usize) -> Vec<Sample> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..count).map(|_| Sample { title: title(&mut rng), payload: payload(&mut rng) }).collect()
}

fn fake<T: Dummy<F>, F>(rng: &mut ChaCha8Rng, faker: F) -> T {
    faker.fake_with_rng(rng)
}

/// Mostly short English work items, a fifth in another script, one in twenty near the limit.
fn title(rng: &mut ChaCha8Rng) -> String {
    let title = match rng.random_range(0..100) {
        0..40 => {
            format!("Call {} about: {}", fake::<String, _>(rng, Name(EN)), fake::<String, _>(rng, CatchPhrase(EN)))
        }
        40..75 => fake(rng, Sentence(EN, 3..12)),
        75..85 => {
            format!("{}：{}", fake::<String, _>(rng, Name(ZH_TW)), fake::<String, _>(rng, Sentence(ZH_CN, 4..10)))
        }
        85..90 => {
            format!("{}さんと{}の面談", fake::<String, _>(rng, Name(JA_JP)), fake::<String, _>(rng, JobTitle(JA_JP)))
        }
        90..95 => {
            format!("Relancer {} à {}", fake::<String, _>(rng, Name(FR_FR)), fake::<String, _>(rng, CityName(FR_FR)))
        }
        _ => {
            let target = rng.random_range(TITLE_LENGTH_MAX - 40..=TITLE_LENGTH_MAX);
            let mut long = String::new();
            while long.chars().count() < target {
                long.push_str(&fake::<String, _>(rng, Sentence(EN, 6..14)));
                long.push(' ');
            }
            long.chars().take(target).collect()
        }
    };
    let title: String = title.chars().take(TITLE_LENGTH_MAX).collect();
    title.trim().to_string()
}

/// An order-like object or a list of contacts, a few hundred bytes of JSON.
fn payload(rng: &mut ChaCha8Rng) -> Value {
    if rng.random_bool(0.7) {
        json!({
            "order": fake::<u32, _>(rng, 10_000..99_999),
            "customer": {"name": fake::<String, _>(rng, Name(EN)), "email": fake::<String, _>(rng, SafeEmail(EN))},
            "ship_to": {"street": fake::<String, _>(rng, StreetName(EN)), "city": fake::<String, _>(rng, CityName(EN))},
            "lines": (0..rng.random_range(1..4))
                .map(|_| json!({"qty": fake::<u8, _>(rng, 1..12), "unit_price_cents": fake::<u32, _>(rng, 99..250_000)}))
                .collect::<Vec<_>>(),
            "tags": fake::<Vec<String>, _>(rng, Words(EN, 0..4)),
            "company": fake::<String, _>(rng, CompanyName(EN)),
        })
    } else {
        let contacts: Vec<Value> = (0..rng.random_range(1..4))
            .map(|_| json!({"name": fake::<String, _>(rng, Name(FR_FR)), "email": fake::<String, _>(rng, SafeEmail(EN))}))
            .collect();
        Value::Array(contacts)
    }
}
