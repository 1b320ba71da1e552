//! The stamp a line starts with, read by the declaration `parsers/timestamps.py` hands over
//! (`CORE`; its `line_stamp` is the definition), for ASCII lines without the separators
//! \x1c-\x1f (where the pattern's `\s` means what it means to Python), as POSIX seconds read as UTC.

use crate::numbers::py_space;
use regex::Regex;

/// A leading stamp reader's declaration (`parsers.timestamps.CORE`): the pattern (its first
/// group the stamp, `YYYY-MM-DD HH:MM:SS[.fraction]`), the bracket a stamped line may open
/// with, and how far into the line the stamp's first dash may lie.
pub struct StampRules {
    pub pattern: Regex,
    pub opener: u8,
    pub reach: usize,
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

/// `YYYY-MM-DD?HH:MM:SS`, then nothing or one separator and 1 to 9 fraction digits: the form
/// the declaration's stamp group has (anything else a changed declaration captured is no stamp).
fn iso_shaped(stamp: &[u8]) -> bool {
    const DIGITS: [usize; 14] = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18];
    stamp.len() >= 19
        && DIGITS.iter().all(|&i| stamp[i].is_ascii_digit())
        && (stamp.len() == 19 || (stamp.len() <= 29 && stamp.len() > 20 && stamp[20..].iter().all(u8::is_ascii_digit)))
}

/// The stamp an ASCII line's body starts with (its first dash within `reach` characters).
/// `locs`: the pattern's capture slots, reused from line to line.
pub fn line_stamp(rules: &StampRules, body: &[u8], locs: &mut regex::CaptureLocations) -> Option<f64> {
    let mut head = body.first().copied();
    if head == Some(b' ') {
        head = body.get(1).copied();
    }
    match head {
        Some(c) if c == rules.opener || c.is_ascii_digit() || py_space(c) => {}
        _ => return None, // after white space, a leading stamp starts with its opener or a digit
    }
    // a stamp starts "YYYY-" within the first `reach` characters
    let window = &body[..body.len().min(rules.reach)];
    let dash = (4..window.len()).find(|&i| window[i] == b'-' && window[i - 4..i].iter().all(u8::is_ascii_digit));
    dash?;
    let text = std::str::from_utf8(body).ok()?;
    rules.pattern.captures_read(locs, text)?;
    let (a, z) = locs.get(1)?;
    let stamp = &text.as_bytes()[a..z];
    if !iso_shaped(stamp) {
        return None;
    }
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

    // test data: the shape of parsers.timestamps.CORE (the Python module is the definition)
    fn line_stamp(body: &[u8]) -> Option<f64> {
        let rules = StampRules {
            pattern: Regex::new(concat!(
                r"^[\t\n\x0B\x0C\r \x1C-\x1F]*(?:\[[^\]0-9]{1,16}\][\t\n\x0B\x0C\r \x1C-\x1F]*)?\[?",
                r"([0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]{1,9})?)",
            ))
            .unwrap(),
            opener: b'[',
            reach: 40,
        };
        let mut locs = rules.pattern.capture_locations();
        super::line_stamp(&rules, body, &mut locs)
    }

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
