//! JSON numbers read as JSON Schema reads them: an integer is any number whose fractional part
//! is zero, so `7952.0` is the integer 7952 (JSON Schema 2020-12, "integer").
//!
//! Exists because serde_json keeps `7952.0` as a float, and every surface that takes an integer
//! (the API's bodies, the MCP tools' arguments, an admission policy) must accept what the
//! OpenAPI document and the tools' input schemas call valid; one reading, shared, so no surface
//! refuses what another accepts.

use serde_json::Number;

/// 2^63: the first float past `i64::MAX` (and `-2^63` is `i64::MIN` exactly).
const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;

/// The number as an `i64`, when it is an integer (`7`, `7.0`, `7e3`) that fits one; None for a
/// fraction or a number out of range.
pub fn integer(number: &Number) -> Option<i64> {
    if let Some(exact) = number.as_i64() {
        return Some(exact);
    }
    let float = number.as_f64()?;
    // In range and whole, the cast is exact.
    (float.fract() == 0.0 && (-TWO_POW_63..TWO_POW_63).contains(&float)).then_some(float as i64)
}

#[cfg(test)]
mod tests {
    use super::integer;
    use serde_json::{Number, json};

    fn number(text: &str) -> Number {
        serde_json::from_str(text).expect("a JSON number")
    }

    #[test]
    fn a_whole_float_is_the_integer_it_names() {
        assert_eq!(integer(&number("7952")), Some(7952));
        assert_eq!(integer(&number("7952.0")), Some(7952));
        assert_eq!(integer(&number("7.952e3")), Some(7952));
        assert_eq!(integer(&number("-3.0")), Some(-3));
        assert_eq!(integer(&number("8521333042241664.0")), Some(8_521_333_042_241_664));
        assert_eq!(integer(&number("-9223372036854775808.0")), Some(i64::MIN));
    }

    #[test]
    fn a_fraction_or_a_number_past_i64_is_not_an_integer() {
        assert_eq!(integer(&number("0.5")), None);
        assert_eq!(integer(&number("7952.25")), None);
        assert_eq!(integer(&number("9223372036854775808")), None, "u64 past i64::MAX");
        assert_eq!(integer(&number("9223372036854775808.0")), None, "2^63 as a float");
        assert_eq!(integer(&number("1e300")), None);
        assert_eq!(json!(1.5).as_number().and_then(integer), None);
    }
}
