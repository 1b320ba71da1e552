//! The plain numbers of `parsers/numbers.py` (`to_float`, `to_int`): the fast, common
//! spellings, read exactly as Python reads them.  Anything else (`9,921`, `13.3TFLOPS`,
//! `inf`, non-ASCII) is `None` here, and the caller asks the Python definition.

/// Python's `str.isspace()` on ASCII (what `float()` and `str.strip()` skip, and `re`'s `\s`):
/// the C set and the four separators \x1c-\x1f.
pub fn py_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0x1c..=0x1f)
}

/// `text` without Python's white space at either end (ASCII text).
pub fn py_strip(text: &str) -> &str {
    text.trim_matches(|c: char| c.is_ascii() && py_space(c as u8))
}

/// `[+-]?(digits[.digits]|.digits)([eE][+-]?digits)?`: a number `float()` and Rust read alike.
fn plain_float(s: &[u8]) -> bool {
    let mut i = usize::from(matches!(s.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < s.len() && s[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    let mut mantissa = digits(&mut i);
    if i < s.len() && s[i] == b'.' {
        i += 1;
        mantissa += digits(&mut i);
    }
    if mantissa == 0 {
        return false;
    }
    if i < s.len() && matches!(s[i], b'e' | b'E') {
        i += 1;
        if i < s.len() && matches!(s[i], b'+' | b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == s.len()
}

/// The end of the exponent `[eE][-+]?digits` at `k` in `b`, or `k` where none starts there.
pub fn exponent_end(b: &[u8], k: usize) -> usize {
    if !matches!(b.get(k), Some(b'e' | b'E')) {
        return k;
    }
    let mut e = k + 1;
    if matches!(b.get(e), Some(b'-' | b'+')) {
        e += 1;
    }
    let digits = e;
    while e < b.len() && b[e].is_ascii_digit() {
        e += 1;
    }
    if e > digits { e } else { k }
}

/// `to_float(text)` where `float(text)` reads it; None: ask Python.
pub fn fast_float(text: &str) -> Option<f64> {
    if !text.is_ascii() {
        return None;
    }
    let s = py_strip(text);
    if plain_float(s.as_bytes()) { s.parse::<f64>().ok() } else { None }
}

/// `to_int(text)` for up to 18 plain digits; None: ask Python.
pub fn fast_int(text: &str) -> Option<i64> {
    if !text.is_ascii() {
        return None;
    }
    let s = py_strip(text);
    if !s.is_empty() && s.len() <= 18 && s.bytes().all(|b| b.is_ascii_digit()) { s.parse::<i64>().ok() } else { None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_numbers() {
        assert_eq!(fast_float(" 2500.5 "), Some(2500.5));
        assert_eq!(fast_float("1.052111E+01"), Some(10.52111));
        assert_eq!(fast_float(".5"), Some(0.5));
        assert_eq!(fast_float("5."), Some(5.0));
        assert_eq!(fast_float("1e309"), Some(f64::INFINITY));
        assert_eq!(fast_int("   0"), Some(0));
        assert_eq!(fast_int(" 1024 "), Some(1024));
    }

    #[test]
    fn others_go_to_python() {
        for text in ["9,921", "13.3TFLOPS", "inf", "nan", "1_000", "", " ", "e5", "1e", "+", "é1"] {
            assert_eq!(fast_float(text), None, "{text}");
        }
        for text in ["1.0", "-3", "+3", "1234567890123456789", "", "٣"] {
            assert_eq!(fast_int(text), None, "{text}");
        }
    }
}
