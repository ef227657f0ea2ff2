//! The producer's data: todo titles and payloads, and webhook delivery bodies, from the `fake`
//! crate (names, companies, places, job titles, lorem, in English and in other scripts: Chinese,
//! Japanese, French, German, Arabic, Persian), so the stores, the dedup and the trace meet the
//! text real producers send rather than `p17`. Most titles are short and ordinary, some are in
//! another script, a few are long, within a few characters of `TITLE_LENGTH_MAX`. Payloads are
//! small JSON documents of several shapes (an order, a list of contacts, nested arrays, a
//! multilingual note), or none.
//!
//! Exists apart from `workload` so the shapes are chosen in one place and checked on their own:
//! every title passes `validate_title`, no string holds a NUL, one seed gives one stream. `fake`
//! draws only from the ChaCha8 generator seeded here from the workload's own `Rng`, never from a
//! thread or OS generator, so a seed still reproduces its run.

use crate::rng::Rng;
use fake::faker::address::raw::{CityName, CountryName, StreetName, ZipCode};
use fake::faker::company::raw::{BsAdj, BsNoun, BsVerb, CatchPhrase, CompanyName};
use fake::faker::internet::raw::{SafeEmail, Username};
use fake::faker::job::raw::Title as JobTitle;
use fake::faker::lorem::raw::{Sentence, Word, Words};
use fake::faker::name::raw::Name;
use fake::faker::phone_number::raw::PhoneNumber;
use fake::locales::{AR_SA, DE_DE, EN, FA_IR, FR_FR, JA_JP, ZH_CN, ZH_TW};
use fake::rand::rngs::ChaCha8Rng;
use fake::rand::{RngExt, SeedableRng};
use fake::{Dummy, Fake};
use models::todo::TITLE_LENGTH_MAX;
use serde_json::{Value, json};

/// How close to `TITLE_LENGTH_MAX` a long title comes: its length is drawn from this many
/// characters below the limit up to the limit itself.
const LONG_TITLE_SLACK: usize = 40;

/// Webhook event names a delivery carries (the provider's vocabulary, not generated text).
const EVENTS: [&str; 5] = ["order.created", "order.updated", "invoice.paid", "ticket.opened", "build.failed"];

/// A seeded source of realistic titles and payloads.
pub struct FakeData {
    rng: ChaCha8Rng,
}

impl FakeData {
    /// A stream seeded from one draw of `rng`: the same `rng` state gives the same data.
    pub fn new(rng: &mut Rng) -> FakeData {
        FakeData { rng: ChaCha8Rng::seed_from_u64(rng.next_u64()) }
    }

    /// One value of a `fake` faker, drawn from this stream.
    fn fake<T: Dummy<F>, F>(&mut self, faker: F) -> T {
        faker.fake_with_rng(&mut self.rng)
    }

    /// `n` in `0..100`, for choosing among shapes by percentage.
    fn percent(&mut self) -> u32 {
        self.rng.random_range(0..100)
    }

    /// A todo title: always non-blank, single-line and within `TITLE_LENGTH_MAX` characters.
    /// About 45% ordinary English work items, 25% in another script, 23% lorem sentences and 7%
    /// long titles near the limit.
    pub fn title(&mut self) -> String {
        let title = match self.percent() {
            0..45 => self.work_item(),
            45..70 => self.foreign_item(),
            70..93 => self.fake(Sentence(EN, 3..12)),
            _ => self.long_title(),
        };
        fit_title(&title)
    }

    fn work_item(&mut self) -> String {
        match self.rng.random_range(0..6) {
            0 => {
                let (verb, adjective, noun): (String, String, String) =
                    (self.fake(BsVerb(EN)), self.fake(BsAdj(EN)), self.fake(BsNoun(EN)));
                format!("{} {adjective} {noun}", capitalised(&verb))
            }
            1 => {
                format!("Call {} about: {}", self.fake::<String, _>(Name(EN)), self.fake::<String, _>(CatchPhrase(EN)))
            }
            2 => format!(
                "Invoice {} for order #{}",
                self.fake::<String, _>(CompanyName(EN)),
                self.fake::<u32, _>(10_000..99_999)
            ),
            3 => format!(
                "Ship {} parcels to {}, {}",
                self.fake::<u8, _>(1..20),
                self.fake::<String, _>(StreetName(EN)),
                self.fake::<String, _>(CityName(EN))
            ),
            4 => format!("Interview {} ({})", self.fake::<String, _>(Name(EN)), self.fake::<String, _>(JobTitle(EN))),
            _ => format!("Review: {}", self.fake::<String, _>(CatchPhrase(EN))),
        }
    }

    /// A title in another script (or with accents): the glue words are fixed, the names, places
    /// and phrases are `fake`'s.
    fn foreign_item(&mut self) -> String {
        match self.rng.random_range(0..6) {
            0 => format!(
                "{}：{}",
                self.fake::<String, _>(Name(ZH_TW)),
                chinese_sentence(self.fake(Sentence(ZH_CN, 4..10)))
            ),
            1 => format!(
                "{}さんと{}の面談",
                self.fake::<String, _>(Name(JA_JP)),
                self.fake::<String, _>(JobTitle(JA_JP))
            ),
            2 => format!(
                "Relancer {} à {} ({})",
                self.fake::<String, _>(Name(FR_FR)),
                self.fake::<String, _>(CityName(FR_FR)),
                self.fake::<String, _>(StreetName(FR_FR))
            ),
            3 => format!(
                "Lieferung nach {} prüfen – {}",
                self.fake::<String, _>(CityName(DE_DE)),
                self.fake::<String, _>(Name(DE_DE))
            ),
            4 => format!("{} — {}", self.fake::<String, _>(Name(AR_SA)), self.fake::<String, _>(CatchPhrase(FA_IR))),
            _ => chinese_sentence(self.fake(Sentence(ZH_CN, 6..16))),
        }
    }

    /// A title of `TITLE_LENGTH_MAX - LONG_TITLE_SLACK ..= TITLE_LENGTH_MAX` characters (fewer
    /// by any trailing space the cut leaves), in English lorem, Chinese lorem or French names.
    fn long_title(&mut self) -> String {
        let target = self.rng.random_range(TITLE_LENGTH_MAX - LONG_TITLE_SLACK..=TITLE_LENGTH_MAX);
        let kind = self.rng.random_range(0..3);
        let mut title = String::new();
        while title.chars().count() < target {
            let part = match kind {
                0 => self.fake(Sentence(EN, 6..14)),
                1 => chinese_sentence(self.fake(Sentence(ZH_CN, 8..20))),
                _ => format!("{} ({}),", self.fake::<String, _>(Name(FR_FR)), self.fake::<String, _>(CityName(FR_FR))),
            };
            if !title.is_empty() && kind != 1 {
                title.push(' ');
            }
            title.push_str(&part);
        }
        title.chars().take(target).collect()
    }

    /// A todo's payload: none (15%), an order (40%), a list of contacts (20%), nested arrays
    /// (15%) or a multilingual note (10%).
    pub fn payload(&mut self) -> Option<Value> {
        let payload = match self.percent() {
            0..15 => return None,
            15..55 => self.order(),
            55..75 => self.contacts(),
            75..90 => self.nested(),
            _ => self.note(),
        };
        debug_assert!(models::storable::check_value("payload", &payload).is_ok());
        Some(payload)
    }

    /// A webhook delivery's body (what ingest keeps as the payload): a fake title, an event
    /// name, a sequence number and a payload as `data` (`null` when there is none).
    pub fn delivery_body(&mut self, sequence: usize) -> Value {
        let title = self.title();
        let event = EVENTS[self.rng.random_range(0..EVENTS.len())];
        json!({"title": title, "event": event, "sequence": sequence, "data": self.payload()})
    }

    fn person(&mut self) -> Value {
        json!({
            "name": self.fake::<String, _>(Name(EN)),
            "email": self.fake::<String, _>(SafeEmail(EN)),
            "phone": self.fake::<String, _>(PhoneNumber(EN)),
        })
    }

    fn order(&mut self) -> Value {
        let lines: Vec<Value> = (0..self.rng.random_range(1..5))
            .map(|_| {
                let word: String = self.fake(Word(EN));
                json!({
                    "sku": format!("{}-{}", word.to_uppercase(), self.fake::<u16, _>(100..999)),
                    "qty": self.fake::<u8, _>(1..12),
                    "unit_price_cents": self.fake::<u32, _>(99..250_000),
                })
            })
            .collect();
        json!({
            "order": self.fake::<u32, _>(10_000..99_999),
            "customer": self.person(),
            "ship_to": {
                "street": self.fake::<String, _>(StreetName(EN)),
                "city": self.fake::<String, _>(CityName(EN)),
                "zip": self.fake::<String, _>(ZipCode(EN)),
                "country": self.fake::<String, _>(CountryName(EN)),
            },
            "lines": lines,
            "gift": self.rng.random_bool(0.2),
            "company": self.fake::<String, _>(CompanyName(EN)),
        })
    }

    fn contacts(&mut self) -> Value {
        let contacts: Vec<Value> = (0..self.rng.random_range(1..6))
            .map(|_| match self.rng.random_range(0..4) {
                0 => json!({"name": self.fake::<String, _>(Name(JA_JP)), "username": self.fake::<String, _>(Username(EN))}),
                1 => json!({"name": self.fake::<String, _>(Name(FR_FR)), "city": self.fake::<String, _>(CityName(FR_FR))}),
                _ => self.person(),
            })
            .collect();
        Value::Array(contacts)
    }

    fn nested(&mut self) -> Value {
        let matrix: Vec<Vec<i64>> = (0..self.rng.random_range(0..4))
            .map(|_| (0..self.rng.random_range(0..5)).map(|_| self.fake(-1_000_000..1_000_000)).collect())
            .collect();
        json!({
            "matrix": matrix,
            "tags": self.fake::<Vec<String>, _>(Words(EN, 0..5)),
            "flags": [self.rng.random_bool(0.5), self.rng.random_bool(0.5)],
            "empty": {},
            "missing": null,
            "deep": {"a": [{"b": [[], [self.fake::<String, _>(Word(EN))]]}]},
        })
    }

    fn note(&mut self) -> Value {
        let (language, body) = match self.rng.random_range(0..3) {
            0 => ("zh", chinese_sentence(self.fake(Sentence(ZH_CN, 10..30)))),
            1 => (
                "ja",
                format!("{}様へ：{}", self.fake::<String, _>(Name(JA_JP)), self.fake::<String, _>(JobTitle(JA_JP))),
            ),
            _ => ("fa", self.fake::<String, _>(CatchPhrase(FA_IR))),
        };
        json!({"language": language, "body": body, "author": self.person(), "subject": self.title()})
    }
}

/// `text` made a valid title: one line, no NUL, at most `TITLE_LENGTH_MAX` characters, no
/// surrounding spaces, never blank.
fn fit_title(text: &str) -> String {
    let line = text.replace(['\0', '\n', '\r'], " ");
    let clipped: String = line.chars().take(TITLE_LENGTH_MAX).collect();
    let trimmed = clipped.trim();
    if trimmed.is_empty() { "untitled".to_string() } else { trimmed.to_string() }
}

/// A `fake` Chinese lorem sentence as Chinese is written: without spaces, with a full stop.
fn chinese_sentence(sentence: String) -> String {
    format!("{}。", sentence.trim_end_matches('.').replace(' ', ""))
}

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map(|first| first.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use models::storable::check_value;
    use models::todo::validate_title;

    #[test]
    fn every_title_is_valid_and_every_payload_storable() {
        let (mut long, mut non_ascii, mut none) = (0, 0, 0);
        for seed in 0..20 {
            let mut data = FakeData::new(&mut Rng::new(seed));
            for index in 0..200 {
                let title = data.title();
                validate_title(&title).unwrap_or_else(|e| panic!("{title:?}: {e:?}"));
                assert_eq!(title, title.trim(), "{title:?}");
                assert!(!title.contains(['\n', '\r', '\0']), "{title:?}");
                long += usize::from(title.chars().count() > TITLE_LENGTH_MAX - LONG_TITLE_SLACK - 5);
                non_ascii += usize::from(!title.is_ascii());
                match data.payload() {
                    Some(payload) => check_value("payload", &payload).expect("storable payload"),
                    None => none += 1,
                }
                let body = data.delivery_body(index);
                check_value("body", &body).expect("storable delivery");
                validate_title(body["title"].as_str().expect("a title")).expect("valid delivery title");
            }
        }
        // 4,000 titles: about 7% long and over a fifth not ASCII; about 15% without a payload.
        assert!((100..500).contains(&long), "{long} long titles");
        assert!((600..2000).contains(&non_ascii), "{non_ascii} non-ASCII titles");
        assert!((300..1000).contains(&none), "{none} todos without a payload");
    }

    #[test]
    fn one_seed_gives_one_stream() {
        let draw = |seed| {
            let mut data = FakeData::new(&mut Rng::new(seed));
            (0..50).map(|i| (data.title(), data.payload(), data.delivery_body(i))).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
    }
}
