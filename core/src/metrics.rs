//! Metric lines of `key: value` pairs (`parsers/torchtitan.py`'s `metric_values`, declared in
//! `torchtitan.CORE_METRICS`): colour codes (`common.ANSI`, `\x1b\[[0-9;]*m`) taken out, lines
//! holding the declaration's `skip` left, then from its `start` on the pairs of a lowercase key,
//! a colon, white space and a number (or `nan`, `inf`), with the declaration's unit right after
//! it (`torchtitan.METRIC`), found as Python's `findall` finds them, by hand: the regex crate's
//! captures cost more than Python's own regex here.  The row is the declaration's keys' values.
//! Only ASCII text without \x1c-\x1f comes here (where `\s` and `\d` mean what they mean to
//! Python); tests/test_core.py holds the two to the same answers.

use crate::numbers;
use crate::text::space;

/// `text` without its SGR colour codes (`\x1b[` then digits and `;`, then `m`).
pub fn strip_sgr(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut i, mut kept) = (0, 0);
    while i < b.len() {
        if b[i] == 0x1b && b.get(i + 1) == Some(&b'[') {
            let mut j = i + 2;
            while j < b.len() && (b[j].is_ascii_digit() || b[j] == b';') {
                j += 1;
            }
            if b.get(j) == Some(&b'm') {
                out.push_str(&text[kept..i]);
                i = j + 1;
                kept = i;
                continue;
            }
        }
        i += 1;
    }
    out.push_str(&text[kept..]);
    out
}

fn key_char(c: u8) -> bool {
    c.is_ascii_lowercase() || c == b'_'
}

/// The end of the value starting at `j`, if one does.
fn value_end(b: &[u8], j: usize) -> Option<usize> {
    let mut k = j;
    if k < b.len() && (b[k] == b'-' || b[k] == b'+') {
        k += 1;
    }
    let digits = k;
    while k < b.len() && (b[k].is_ascii_digit() || b[k] == b'.' || b[k] == b',') {
        k += 1;
    }
    if k > digits {
        return Some(numbers::exponent_end(b, k));
    }
    for word in [&b"nan"[..], &b"inf"[..]] {
        if b[j..].starts_with(word) {
            return Some(j + 3);
        }
    }
    None
}

/// The most keys a row has (checked where a declaration is handed over).
pub const MAX_KEYS: usize = 16;

/// A metric-line reader's declaration.
pub struct MetricRules {
    /// a line holding one of these gives nothing (a validation line)
    pub skip: Vec<String>,
    /// where the pairs start (the text from its first place; not there: the last character)
    pub start: String,
    /// the keys of a row, in its order: the step (an integer) and the loss first, the unit's key last
    pub keys: Vec<String>,
    /// the unit a value may carry (read on the last key alone)
    pub unit: String,
}

/// The `(key, value, unit)` of every pair in `text`, in order (`unit` where the value carries it).
pub fn pairs<'t>(text: &'t str, unit: &str) -> Vec<(&'t str, &'t str, bool)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut p = 0;
    while p < b.len() {
        if !key_char(b[p]) {
            p += 1;
            continue;
        }
        let mut r = p;
        while r < b.len() && key_char(b[r]) {
            r += 1;
        }
        // a match starts here or nowhere in this run: from inside it the same colon is needed
        if r < b.len() && b[r] == b':' && r + 1 < b.len() && space(b[r + 1]) {
            let mut j = r + 1;
            while j < b.len() && space(b[j]) {
                j += 1;
            }
            if let Some(end) = value_end(b, j) {
                let has_unit = !unit.is_empty() && b[end..].starts_with(unit.as_bytes());
                let stop = if has_unit { end + unit.len() } else { end };
                out.push((&text[p..r], &text[j..end], has_unit));
                p = stop;
                continue;
            }
        }
        p = r;
    }
    out
}

/// A metrics line typed: (step, loss, the middle keys' values, the last key's value in the unit).
pub type MetricRow = (i64, f64, [Option<f64>; MAX_KEYS], Option<f64>);

/// What `MetricLines.rows` makes of a line.
#[allow(clippy::large_enum_variant)] // a row is made and read once a line: a box would cost an allocation each
pub enum Typed {
    Nothing,
    Hook,
    Row(MetricRow),
}

/// `to_float` of a pair's value where it reads as Rust does: a plain number, or digits with
/// thousands separators (`70,593`: `to_float` finds it whole and drops the commas); else None.
fn value(text: &str) -> Option<f64> {
    if let Some(v) = numbers::fast_float(text) {
        return Some(v);
    }
    let b = text.as_bytes();
    let int_end = b.iter().position(|&c| !(c.is_ascii_digit() || c == b',')).unwrap_or(b.len());
    let frac = &b[int_end..];
    let frac_ok = frac.is_empty() || (frac[0] == b'.' && frac[1..].iter().all(u8::is_ascii_digit));
    if !b.is_empty() && b[0].is_ascii_digit() && frac_ok {
        return text.replace(',', "").parse::<f64>().ok();
    }
    None
}

/// A metrics body (ASCII) typed as the hook types it (see `MetricLines.rows`).
pub fn typed(rules: &MetricRules, body: &str) -> Typed {
    if !crate::text::plain(body.as_bytes()) {
        return Typed::Hook;
    }
    let text = strip_sgr(body);
    if rules.skip.iter().any(|s| text.contains(s.as_str())) {
        return Typed::Nothing;
    }
    let start = text.find(rules.start.as_str()).unwrap_or(text.len().saturating_sub(1));
    // the last of a key wins, as in the dict the hook builds
    let n = rules.keys.len().min(MAX_KEYS);
    let mut found: [Option<(&str, bool)>; MAX_KEYS] = [None; MAX_KEYS];
    for (key, v, unit) in pairs(&text[start..], &rules.unit) {
        if let Some(k) = rules.keys[..n].iter().position(|name| name == key) {
            found[k] = Some((v, unit));
        }
    }
    let (Some((step, _)), Some((loss, _))) = (found[0], found[1]) else {
        return Typed::Nothing; // no step, or no loss: the hook gives nothing
    };
    let Some(step) = numbers::fast_int(step) else { return Typed::Hook };
    let Some(loss) = value(loss) else { return Typed::Hook };
    let mut middle = [None; MAX_KEYS];
    for (k, slot) in middle[..n - 3].iter_mut().enumerate() {
        if let Some((v, _)) = found[2 + k] {
            match value(v) {
                Some(x) => *slot = Some(x),
                None => return Typed::Hook,
            }
        }
    }
    let last = match found[n - 1] {
        Some((v, true)) => match value(v) {
            Some(x) => Some(x),
            None => return Typed::Hook,
        },
        _ => None,
    };
    Typed::Row((step, loss, middle, last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_codes_go_and_others_stay() {
        assert_eq!(strip_sgr("\x1b[31mstep: 1\x1b[38;2;1;2;3m x\x1b[0"), "step: 1 x\x1b[0");
        assert_eq!(strip_sgr("\x1b\x1b[m"), "\x1b");
    }

    // test data: the shape of torchtitan.CORE_METRICS
    fn rules() -> MetricRules {
        MetricRules {
            skip: vec!["validate step".into()],
            start: "step:".into(),
            keys: ["step", "loss", "tflops", "tps", "wps", "mfu", "memory"].map(String::from).to_vec(),
            unit: "GiB".into(),
        }
    }

    fn typed(body: &str) -> Typed {
        super::typed(&rules(), body)
    }

    fn pairs(text: &str) -> Vec<(&str, &str, &str)> {
        super::pairs(text, "GiB").into_iter().map(|(k, v, u)| (k, v, if u { "GiB" } else { "" })).collect()
    }

    #[test]
    fn metrics_lines_typed() {
        let row = |body| match typed(body) {
            Typed::Row(r) => Some(r),
            _ => None,
        };
        let line = "step: 10  loss: 11.78140  memory: 29.11GiB(92.83%)  tps: 70,593  tflops: 47.97  mfu: 15.38%";
        let (step, loss, middle, last) = row(line).expect("a row");
        assert_eq!((step, loss, &middle[..4], last), (10, 11.7814, &[Some(47.97), Some(70593.0), None, Some(15.38)][..],
                                                      Some(29.11)));
        assert!(matches!(typed("validate step: 10  loss: 1.0"), Typed::Nothing));
        assert!(matches!(typed("step: 10  tps: 1"), Typed::Nothing));
        assert!(matches!(typed("step: 10  loss: nan"), Typed::Hook));
        assert!(matches!(typed("step: 1.5  loss: 1.0"), Typed::Hook));
        assert!(matches!(typed("step: 10  loss: 1.0  tps: 1.2.3"), Typed::Hook));
        assert_eq!(value("1,2.5"), Some(12.5));
        assert_eq!(value("1,"), Some(1.0));
        assert_eq!(value("-1,000"), None);
    }

    #[test]
    fn pairs_as_findall_finds_them() {
        let line = "step: 10  loss: 11.78140  memory: 29.11GiB(92.83%)  tps: 70,593  mfu: 15.38%";
        assert_eq!(pairs(line), vec![("step", "10", ""), ("loss", "11.78140", ""), ("memory", "29.11", "GiB"),
                                     ("tps", "70,593", ""), ("mfu", "15.38", "")]);
        // a match may begin where the last one ended inside a run of letters (after nan)
        assert_eq!(pairs("a: nanb: 2"), vec![("a", "nan", ""), ("b", "2", "")]);
        assert_eq!(pairs("x: 1e5y: 2e"), vec![("x", "1e5", ""), ("y", "2", "")]);
        assert_eq!(pairs("ab:  -x  c: +"), vec![]);
    }
}
