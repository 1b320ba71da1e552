//! Key-table reports (`parsers/megatron.py`'s memory reports, `_on_memory`, declared in
//! `megatron.CORE_MEMORY`): a line holding one match of the declaration's pattern (group 1 an
//! optional rank tag's digits, group 2 the report's moment; found by the `regex` crate,
//! leftmost-first as `re` finds it), and the `key: value` parts after it, keys as `norm_key`
//! spells them, kept where the declaration's key table names them.  Anything the hook reads
//! otherwise (two reports on one line, a rank tag outside the match, a value only `to_float`
//! reads) is None: the hook reads that line.

use crate::numbers;

/// A report reader's declaration, compiled.
pub struct ReportRules {
    pub pattern: regex::Regex,
    /// the values kept, in the row's order, as `norm_key` spells them
    pub keys: Vec<String>,
    /// a rank tag's anchor: a line holding one outside the match goes to the hook
    pub rank_anchor: String,
}

/// One report: its tag's rank, its moment, and its values in the key table's order (None
/// where it names none).
pub struct Report<'a> {
    pub tag: Option<i64>,
    pub label: &'a str,
    pub values: Vec<Option<f64>>,
}

/// `norm_key(raw)`: `raw` lowered, each run of characters but `[a-z0-9/]` one space,
/// stripped of spaces.
fn norm_key(raw: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut gap = false;
    for b in raw.bytes().map(|b| b.to_ascii_lowercase()) {
        if b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'/' {
            if gap && !out.is_empty() {
                out.push(b' ');
            }
            gap = false;
            out.push(b);
        } else {
            gap = true;
        }
    }
    out
}

/// The report of an ASCII line, or None: the hook reads it.
pub fn typed<'a>(rules: &ReportRules, line: &'a str) -> Option<Report<'a>> {
    let mut found = rules.pattern.captures_iter(line);
    let m = found.next()?;
    if found.next().is_some() {
        return None; // reports of several ranks on one line
    }
    let tag = match m.get(1) {
        Some(digits) => Some(numbers::fast_int(digits.as_str())?),
        None if line.contains(rules.rank_anchor.as_str()) => return None, // a tag elsewhere: the hook reads it
        None => None,
    };
    let label = m.get(2)?.as_str();
    let mut values = vec![None; rules.keys.len()];
    for seg in line[m.get(0)?.end()..].split('|') {
        let (raw, value) = seg.split_once(':').unwrap_or((seg, ""));
        let key = norm_key(raw);
        if let Some(k) = rules.keys.iter().position(|known| known.as_bytes() == key.as_slice()) {
            values[k] = Some(numbers::fast_float(value)?);
        }
    }
    Some(Report { tag, label, values })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMORY: &str = concat!(
        r"(?:\[Rank (\d+)\] )?\(?(after \d+ iterations|(?:before|after) save_checkpoint for iteration \d+)\)?",
        r" memory \(MB\) \| "
    );

    // test data: the shape of megatron.CORE_MEMORY
    fn typed(line: &str) -> Option<Report<'_>> {
        let rules = ReportRules {
            pattern: regex::Regex::new(MEMORY).expect("valid"),
            keys: ["allocated", "max allocated", "reserved", "max reserved"].map(String::from).to_vec(),
            rank_anchor: "[Rank".into(),
        };
        super::typed(&rules, line)
    }

    #[test]
    fn reads_one_report() {
        let r = typed("[Rank 3] (after 10 iterations) memory (MB) | allocated: 15382.8 | max allocated: 19070.7 | \
                       reserved: 26762.0 | max reserved: 26762.0").expect("read");
        assert_eq!((r.tag, r.label), (Some(3), "after 10 iterations"));
        assert_eq!(r.values, [Some(15382.8), Some(19070.7), Some(26762.0), Some(26762.0)]);
        let r = typed("after 007 iterations memory (MB) | Max_Allocated: 2 | other: n/a").expect("read");
        assert_eq!((r.tag, r.label, r.values), (None, "after 007 iterations", vec![None, Some(2.0), None, None]));
        let r = typed("[Rank 0] (after save_checkpoint for iteration 50) memory (MB) | max reserved: 53392.00").expect("read");
        assert_eq!((r.tag, r.label), (Some(0), "after save_checkpoint for iteration 50"));
        assert_eq!(r.values, [None, None, None, Some(53392.0)]);
    }

    #[test]
    fn leaves_the_rest_to_the_hook() {
        let two = "[Rank 0] (after 1 iterations) memory (MB) | allocated: 1.0[Rank 1] (after 1 iterations) memory (MB) | allocated: 2.0";
        assert!(typed(two).is_none());
        assert!(typed("x [Rank 5] y after 1 iterations memory (MB) | allocated: 1").is_none());
        assert!(typed("after 1 iterations memory (MB) | allocated: 1,024").is_none());
        assert!(typed("after 1 iterations memory (MB) | allocated").is_none());
        assert!(typed("memory (MB) | allocated: 1").is_none());
    }
}
