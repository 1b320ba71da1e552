//! Hugging Face Trainer's metrics dicts (`parsers/hf_trainer.py`, `_on_dict`): the pairs of
//! `_PAIR`, `'([A-Za-z_/]+)': ([-+]?(?:\d[\d.]*(?:[eE][-+]?\d+)?|inf|nan))(?=[,}])`, found
//! as `re.findall` finds them on an ASCII line.  Each part of the pattern is followed by a
//! character its repeat cannot take (or by a lookahead only a separator meets), so no
//! shorter repeat can match where the longest fails: a match is found greedily or not at all.

use crate::numbers;

fn key_char(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b'/'
}

/// The end of the value starting at `j` (its sign included), with the lookahead met.
fn value_end(b: &[u8], j: usize) -> Option<usize> {
    let mut k = j;
    if k < b.len() && (b[k] == b'-' || b[k] == b'+') {
        k += 1;
    }
    let end = if b[k..].starts_with(b"inf") || b[k..].starts_with(b"nan") {
        k + 3
    } else if k < b.len() && b[k].is_ascii_digit() {
        k += 1;
        while k < b.len() && (b[k].is_ascii_digit() || b[k] == b'.') {
            k += 1;
        }
        let digits = k;
        k = numbers::exponent_end(b, k);
        // with the exponent, or without it (then the next is an e: no separator)
        if k > digits && !matches!(b.get(k), Some(b',' | b'}')) {
            digits
        } else {
            k
        }
    } else {
        return None;
    };
    matches!(b.get(end), Some(b',' | b'}')).then_some(end)
}

/// The `(key, value)` of every pair in `line`, in order.
pub fn pairs(line: &str) -> Vec<(&str, &str)> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(q) = memchr::memchr(b'\'', &b[i..]) {
        let start = i + q;
        let mut k = start + 1;
        while k < b.len() && key_char(b[k]) {
            k += 1;
        }
        if k > start + 1 && b[k..].starts_with(b"': ") {
            if let Some(end) = value_end(b, k + 3) {
                out.push((&line[start + 1..k], &line[k + 3..end]));
                i = end;
                continue;
            }
        }
        i = start + 1;
    }
    out
}

/// A dict line's pairs typed as `to_float` types them, where every value reads as Rust reads
/// it (else None: the hook reads the line).
pub fn typed(line: &str) -> Option<Vec<(&str, f64)>> {
    if !line.bytes().all(|b| b.is_ascii() && !(0x1c..=0x1f).contains(&b)) {
        return None;
    }
    pairs(line).into_iter().map(|(k, v)| numbers::fast_float(v).map(|x| (k, x))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_as_findall_finds_them() {
        let line = "{'loss': 2.9859, 'grad_norm': 0.97, 'learning_rate': 4.1e-05, 'epoch': 0.16}";
        assert_eq!(pairs(line), vec![("loss", "2.9859"), ("grad_norm", "0.97"), ("learning_rate", "4.1e-05"),
                                     ("epoch", "0.16")]);
        assert_eq!(pairs("{'a': 1e5x, 'b': -inf}"), vec![("b", "-inf")]);
        assert_eq!(pairs("{'a': 1.2e, 'b': 2}"), vec![("b", "2")]);
        assert_eq!(pairs("{'a': 1.2.3}"), vec![("a", "1.2.3")]);
        assert_eq!(pairs("{'x': 'y', 'a/b': 3}"), vec![("a/b", "3")]);
        assert_eq!(pairs("''': 1}"), vec![]);
        assert!(typed("{'loss': nan}").is_none());
        assert_eq!(typed("{'loss': 2.0}"), Some(vec![("loss", 2.0)]));
    }
}
