//! The stamp a line starts with (`parsers/timestamps.py`'s `line_stamp`, the definition),
//! for ASCII lines, as POSIX seconds read as UTC.

use crate::numbers::py_space;
use regex::Regex;
use std::sync::OnceLock;

fn leading() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    // LEADING, spelled for ASCII with Python's `\s` (which holds \x1c-\x1f, Rust's does not)
    RE.get_or_init(|| {
        Regex::new(concat!(
            r"^[\t\n\x0B\x0C\r \x1C-\x1F]*(?:\[[^\]0-9]{1,16}\][\t\n\x0B\x0C\r \x1C-\x1F]*)?\[?",
            r"([0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]{1,9})?)",
        ))
        .expect("the stamp pattern compiles")
    })
}

fn num(s: &[u8]) -> i64 {
    s.iter().fold(0, |n, &d| n * 10 + i64::from(d - b'0'))
}

/// Days from 1970-01-01 to the first of `month` of `year` (proleptic Gregorian), as
/// `datetime.date(y, m, 1).toordinal()` minus the epoch's; None for year 0.
fn days_to_month(year: i64, month: i64) -> Option<i64> {
    if year < 1 {
        return None;
    }
    let (y, m) = if month <= 2 { (year - 1, month + 9) } else { (year, month - 3) };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

/// `calendar.timegm` of a stamp's fields, None where `_to_epoch` gives None.
fn epoch(s: &[u8]) -> Option<f64> {
    let (y, mo, d) = (num(&s[0..4]), num(&s[5..7]), num(&s[8..10]));
    let (h, mi, sec) = (num(&s[11..13]), num(&s[14..16]), num(&s[17..19]));
    if !((1..=12).contains(&mo) && (1..=31).contains(&d) && h < 24 && mi < 60 && sec < 62) {
        return None;
    }
    // timegm counts days from the month's first: the 31st of February is the 3rd of March
    let days = days_to_month(y, mo)? + d - 1;
    Some((((days * 24 + h) * 60 + mi) * 60 + sec) as f64)
}

/// The stamp an ASCII line's body starts with (within its first 40 characters).
pub fn line_stamp(body: &[u8]) -> Option<f64> {
    let mut head = body.first().copied();
    if head == Some(b' ') {
        head = body.get(1).copied();
    }
    match head {
        Some(b'[') => {}
        Some(c) if c.is_ascii_digit() || py_space(c) => {}
        _ => return None, // after white space, a leading stamp starts with "[" or a digit
    }
    // a stamp starts "YYYY-" within the first 40 characters
    let window = &body[..body.len().min(40)];
    let dash = (4..window.len()).find(|&i| window[i] == b'-' && window[i - 4..i].iter().all(u8::is_ascii_digit));
    dash?;
    let text = std::str::from_utf8(body).ok()?;
    let stamp = leading().captures(text)?.get(1)?.as_str().as_bytes();
    let base = epoch(&stamp[..19])?;
    Some(if stamp.len() > 20 {
        let frac = &stamp[20..];
        base + num(frac) as f64 / 10f64.powi(frac.len() as i32)
    } else {
        base
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_stamps() {
        assert_eq!(line_stamp(b"[2024-05-01 00:00:01,250] x"), Some(1714521601.25));
        assert_eq!(line_stamp(b"[titan] 2026-05-19 23:02:48,804 - root"), Some(1779231768.804));
        assert_eq!(line_stamp(b" [2026-04-15 11:19:02.524672] iteration"), Some(1776251942.0 + 524672.0 / 1e6));
        assert_eq!(line_stamp(b"2021-05-27T21:42:11 x"), Some(1622151731.0));
    }

    #[test]
    fn not_stamps() {
        assert_eq!(line_stamp(b"iteration 5"), None);
        assert_eq!(line_stamp(b"[2024-13-01 00:00:01] bad month"), None);
        assert_eq!(line_stamp(b"[0000-01-01 00:00:01] year 0"), None);
        assert_eq!(line_stamp(b""), None);
        // the dash lies beyond the first 40 characters
        assert_eq!(line_stamp(b"                                         2024-05-01 00:00:01"), None);
    }

    #[test]
    fn february_31st_is_march_3rd() {
        assert_eq!(line_stamp(b"2023-02-31 00:00:00"), line_stamp(b"2023-03-03 00:00:00"));
    }
}
