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

/// 10^0..=10^22: every one a float exactly
const POW10: [f64; 23] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                          1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22];

/// `[+-]?digits[.digits]([eE][+-]?digits)?` of at most 19 digits whose value is at most 2^53 and
/// whose scale is 10^-22..=10^22, read in one pass (Clinger's fast path: the digits and the power
/// of ten are floats exactly, so one multiplication or division, rounded once, is the correctly
/// rounded value `float()` and Rust's parser give); None for anything else (white space included).
fn short_decimal(s: &[u8]) -> Option<f64> {
    let negative = matches!(s.first(), Some(b'-'));
    let mut i = usize::from(matches!(s.first(), Some(b'+' | b'-')));
    let (mut mantissa, mut digits, mut scale) = (0u64, 0u32, 0i32);
    let mut read = |i: &mut usize, fraction: bool| {
        while let Some(&b) = s.get(*i) {
            if !b.is_ascii_digit() {
                break;
            }
            mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(b - b'0'));
            digits += 1;
            scale -= i32::from(fraction);
            *i += 1;
        }
    };
    read(&mut i, false);
    if s.get(i) == Some(&b'.') {
        i += 1;
        read(&mut i, true);
    }
    if digits == 0 || digits > 19 || mantissa > 1 << 53 {
        return None;
    }
    if matches!(s.get(i), Some(b'e' | b'E')) {
        let end = exponent_end(s, i);
        if end == i || end - i > 7 {
            return None;
        }
        scale += std::str::from_utf8(&s[i + 1..end]).ok()?.parse::<i32>().ok()?;
        i = end;
    }
    if i != s.len() || !(-22..=22).contains(&scale) {
        return None;
    }
    let m = mantissa as f64;
    let value = if scale >= 0 { m * POW10[scale as usize] } else { m / POW10[(-scale) as usize] };
    Some(if negative { -value } else { value })
}

/// `to_float(text)` where `float(text)` reads it; None: ask Python.
pub fn fast_float(text: &str) -> Option<f64> {
    let b = text.as_bytes();
    let start = b.iter().position(|&c| !py_space(c)).unwrap_or(b.len());
    let end = b.iter().rposition(|&c| !py_space(c)).map_or(start, |k| k + 1);
    if let Some(value) = short_decimal(&b[start..end]) {
        return Some(value);
    }
    if !text.is_ascii() {
        return None;
    }
    let s = py_strip(text);
    if plain_float(s.as_bytes()) { s.parse::<f64>().ok() } else { None }
}

/// `to_int(text)` for up to 18 plain digits; None: ask Python.
pub fn fast_int(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if !b.is_empty() && b.len() <= 18 && b.iter().all(u8::is_ascii_digit) {  // (the common case: read at once)
        return Some(b.iter().fold(0, |n, &d| n * 10 + i64::from(d - b'0')));
    }
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
        assert_eq!(fast_float("\t-7.25\x1f\r\n"), Some(-7.25));
        assert_eq!(fast_float("1.052111E+01"), Some(10.52111));
        assert_eq!(fast_float(".5"), Some(0.5));
        assert_eq!(fast_float("5."), Some(5.0));
        assert_eq!(fast_float("1e309"), Some(f64::INFINITY));
        assert_eq!(fast_int("   0"), Some(0));
        assert_eq!(fast_int(" 1024 "), Some(1024));
    }

    /// Drawn decimals (digits, a point, an exponent, signs, leading and trailing zeros) read by the
    /// fast path bit for bit as Rust's correctly rounded parser reads them (as `float()` does).
    #[test]
    fn short_decimals_are_read_as_the_full_parser_reads_them() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut fast = 0;
        for _ in 0..400_000 {
            let mut text = String::new();
            match next(4) {
                0 => text.push('-'),
                1 => text.push('+'),
                _ => {}
            }
            let whole = next(12) as usize;
            for k in 0..whole {
                text.push(char::from(b'0' + if k == 0 && next(3) == 0 { 0 } else { next(10) as u8 }));
            }
            if next(3) > 0 {
                text.push('.');
                for _ in 0..next(14) {
                    text.push(char::from(b'0' + next(10) as u8));
                }
            }
            if next(4) == 0 {
                text.push(if next(2) == 0 { 'e' } else { 'E' });
                match next(3) {
                    0 => text.push('-'),
                    1 => text.push('+'),
                    _ => {}
                }
                text.push_str(&next(40).to_string());
            }
            let full = if plain_float(text.as_bytes()) { text.parse::<f64>().ok() } else { None };
            let got = short_decimal(text.as_bytes());
            if let Some(v) = got {
                fast += 1;
                assert_eq!(Some(v.to_bits()), full.map(f64::to_bits), "{text}");
            }
            assert_eq!(fast_float(&text).map(f64::to_bits), full.map(f64::to_bits), "{text}");
        }
        assert!(fast > 200_000, "the fast path took {fast}");
        for text in ["9007199254740993", "1e23", "0.1e-22", "12345678901234567890", "1e-400", " 1.5"] {
            assert_eq!(short_decimal(text.as_bytes()), None, "{text}");
        }
        assert_eq!(short_decimal(b"-0.0").map(f64::to_bits), Some((-0.0f64).to_bits()));
        assert_eq!(short_decimal(b"9007199254740992"), Some(9007199254740992.0));
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
