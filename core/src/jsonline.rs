//! The pieces of a JSON line as Python's `json` module writes them (`ensure_ascii`, the
//! separators `", "` and `": "`): a float as `float.__repr__` writes it, a string as
//! `json.encoder.encode_basestring_ascii` escapes it.  `tuimon events` writes a line an event,
//! and Python's encoder (a dict a line, a repr a float) was most of its time: 11 us an event
//! against 2 us for the parse.

use std::fmt::Write;

/// `repr(v)` of a finite float: the shortest digits that read back as `v` (Rust's `{:e}` and
/// Python's `repr` both write those), laid out as Python lays them out: positional from 1e-4
/// up to 1e16 (`0.0001`, `1234567890123456.0`, a `.0` where there is no fraction), else
/// scientific with a signed exponent of two digits at least (`1e-05`, `1.5e+16`, `5e-324`).
pub fn float_repr(v: f64, out: &mut String) {
    if v == 0.0 {
        out.push_str(if v.is_sign_negative() { "-0.0" } else { "0.0" });
        return;
    }
    if v.is_sign_negative() {
        out.push('-');
    }
    let mut sci = String::with_capacity(24);
    let _ = write!(sci, "{:e}", v.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let mut digits = [0u8; 24];
    let mut n = 0;
    for &c in mantissa.as_bytes() {
        if c != b'.' && n < digits.len() {
            digits[n] = c;
            n += 1;
        }
    }
    even_on_a_tie(v.abs(), &mut digits[..n], exponent);
    let digits = &digits[..n];
    let point = exponent + 1; // digits d1 d2 ... read as 0.d1d2... x 10^point (CPython's decpt)
    if point <= -4 || point > 16 {
        out.push_str(text(&digits[..1]));
        if digits.len() > 1 {
            out.push('.');
            out.push_str(text(&digits[1..]));
        }
        let _ = write!(out, "e{}{:02}", if exponent < 0 { '-' } else { '+' }, exponent.unsigned_abs());
    } else if point <= 0 {
        out.push_str("0.");
        for _ in 0..-point {
            out.push('0');
        }
        out.push_str(text(digits));
    } else {
        let point = point as usize;
        if point >= digits.len() {
            out.push_str(text(digits));
            for _ in digits.len()..point {
                out.push('0');
            }
            out.push_str(".0");
        } else {
            out.push_str(text(&digits[..point]));
            out.push('.');
            out.push_str(text(&digits[point..]));
        }
    }
}

/// Where `v` lies exactly halfway between the shortest `digits` (x 10^`exponent`, read as
/// d.ddd) and the same with the last digit one less or one more, and that one also reads back
/// as `v`, the one whose last digit is even: Python's repr takes a tie to even, Rust's shortest
/// digits take it up (-1113178120592002.25 is `...002.2` in Python, `...002.3` in Rust).
fn even_on_a_tie(v: f64, digits: &mut [u8], exponent: i32) {
    let n = digits.len();
    let last = digits[n - 1];
    if (last - b'0').is_multiple_of(2) {
        return;
    }
    for other in [last - 1, last + 1] {
        if other > b'9' {
            continue;
        }
        digits[n - 1] = last.min(other);
        let tie = is_exactly(v, digits, exponent);
        digits[n - 1] = other;
        if tie && format!("{}.{}e{}", text(&digits[..1]), text(&digits[1..]), exponent).parse::<f64>() == Ok(v) {
            return; // (the even one: `other`)
        }
        digits[n - 1] = last;
    }
}

/// Whether `v` (positive) is exactly `low` followed by a 5 (x 10^`exponent`, read as d.ddd5).
/// `v` is m 2^e with m odd; its exact decimal digits are those of m 5^-e (e < 0), at least
/// 0.69 (-e) of them, or of m 2^e (e > 0), at least 0.3 e: past 18 digits (e < -25, e > 60)
/// it is no number of 18 digits or fewer, as a halfway point between two of 17 or fewer is.
fn is_exactly(v: f64, low: &[u8], exponent: i32) -> bool {
    let bits = v.to_bits();
    let (mut m, biased) = (bits & ((1u64 << 52) - 1), ((bits >> 52) & 0x7ff) as i32);
    let mut e = if biased == 0 { -1074 } else { m |= 1u64 << 52; biased - 1075 };
    if m == 0 || low.len() > 17 {
        return false;
    }
    let zeros = m.trailing_zeros();
    m >>= zeros;
    e += zeros as i32;
    if !(-25..=60).contains(&e) {
        return false;
    }
    let halfway = low.iter().fold(0u128, |n, &d| n * 10 + u128::from(d - b'0')) * 10 + 5;
    let k = exponent - low.len() as i32; // v = halfway x 10^k, if a tie
    // m 2^max(e, 0) 10^max(-k, 0) == halfway 10^max(k, 0) 2^max(-e, 0), in integers
    let lhs = 10u128.checked_pow((-k).max(0) as u32).and_then(|p| (u128::from(m) << e.max(0)).checked_mul(p));
    let rhs = 10u128.checked_pow(k.max(0) as u32).and_then(|p| halfway.checked_mul(p))
        .and_then(|r| r.checked_mul(1u128 << (-e).max(0)));
    matches!((lhs, rhs), (Some(a), Some(b)) if a == b)
}

/// ASCII digits as text.
fn text(digits: &[u8]) -> &str {
    std::str::from_utf8(digits).unwrap_or("")
}

/// `s` as a JSON string, quoted, as `encode_basestring_ascii` writes it: `"` and `\` escaped,
/// `\b \f \n \r \t` by name, every other character below a space or past `~` as `\u00XX`
/// (lowercase hex), past U+FFFF as its UTF-16 surrogate pair.  Log text is never written raw.
pub fn string(s: &str, out: &mut String) {
    out.push('"');
    let mut plain = 0; // start of the run of characters written as they are
    for (at, c) in s.char_indices() {
        let named = match c {
            '"' => "\\\"",
            '\\' => "\\\\",
            '\u{8}' => "\\b",
            '\u{c}' => "\\f",
            '\n' => "\\n",
            '\r' => "\\r",
            '\t' => "\\t",
            ' '..='~' => continue,
            _ => "",
        };
        out.push_str(&s[plain..at]);
        plain = at + c.len_utf8();
        if !named.is_empty() {
            out.push_str(named);
            continue;
        }
        let mut units = [0u16; 2];
        for unit in c.encode_utf16(&mut units) {
            let _ = write!(out, "\\u{:04x}", unit);
        }
    }
    out.push_str(&s[plain..]);
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr(v: f64) -> String {
        let mut s = String::new();
        float_repr(v, &mut s);
        s
    }

    #[test]
    fn floats_read_as_python_writes_them() {
        // (what CPython 3.11's repr gives for each)
        let cases = [
            (1.0, "1.0"), (-2.5, "-2.5"), (0.1, "0.1"), (1e16, "1e+16"), (1e15, "1000000000000000.0"),
            (1234567890123456.0, "1234567890123456.0"), (12345678901234567.0, "1.2345678901234568e+16"),
            (0.0001, "0.0001"), (0.00001, "1e-05"), (1.5e-7, "1.5e-07"), (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"), (2501.1, "2501.1"), (1e100, "1e+100"),
            (-0.0, "-0.0"), (0.0, "0.0"), (-(1113178120592002.0 + 0.25), "-1113178120592002.2"), (123.456, "123.456"), (3e-4, "0.0003"), (1714521601.001, "1714521601.001"),
        ];
        for (v, want) in cases {
            assert_eq!(repr(v), want, "{v:e}");
        }
    }

    #[test]
    fn strings_are_escaped_as_python_escapes_them() {
        let mut s = String::new();
        string("a\"b\\c\n\t\u{1b}[31mé€😀\u{7f} ~", &mut s);
        assert_eq!(s, "\"a\\\"b\\\\c\\n\\t\\u001b[31m\\u00e9\\u20ac\\ud83d\\ude00\\u007f ~\"");
    }
}
