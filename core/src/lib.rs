//! `tuimon._core`: the compiled half of the block engine (`tuimon/engine/blocks.py`).
//!
//! It does, per block, what the Python engine does per line: which rule literals a
//! block holds (one Aho-Corasick pass for all of them), which lines hold them, and the
//! launcher prefix and leading stamp of each hit line.  The definitions stay in Python
//! (`parsers/prefix.py`, `parsers/timestamps.py`); `tests/test_core.py` holds the two
//! engines to the same answers.  Offsets in and out are character offsets, as Python
//! slices a `str`.

use aho_corasick::{AhoCorasick, MatchKind};
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

pub mod prefix;
pub mod stamp;
pub mod text;

use text::Cursor;

/// Literals asked about a block at a time (`tuimon.engine.presence.Presence`'s question).
#[pyclass(frozen, module = "tuimon._core")]
struct Literals {
    automaton: AhoCorasick,
    count: usize,
}

#[pymethods]
impl Literals {
    #[new]
    fn new(literals: Vec<String>) -> PyResult<Self> {
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .build(&literals)
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
        Ok(Literals { automaton, count: literals.len() })
    }

    /// The indices of the literals `text` holds, in order.
    fn present(&self, py: Python<'_>, text: &Bound<'_, PyString>) -> PyResult<Vec<usize>> {
        let bytes = text.to_str()?.as_bytes();
        let count = self.count;
        Ok(py.detach(|| {
            let mut seen = vec![false; count];
            let mut left = count;
            for m in self.automaton.find_overlapping_iter(bytes) {
                let k = m.pattern().as_usize();
                if !seen[k] {
                    seen[k] = true;
                    left -= 1;
                    if left == 0 {
                        break;
                    }
                }
            }
            (0..count).filter(|&k| seen[k]).collect()
        }))
    }

    /// For each literal `text` holds, in order of the literals: `(index, line starts)`,
    /// the character offsets of the starts of the lines holding it, ascending, each once.
    fn scan(&self, py: Python<'_>, text: &Bound<'_, PyString>) -> PyResult<Vec<(usize, Vec<usize>)>> {
        let s = text.to_str()?;
        let bytes = s.as_bytes();
        let count = self.count;
        let found = py.detach(|| {
            let mut starts: Vec<Vec<usize>> = vec![Vec::new(); count];
            let mut line_end = vec![0usize; count]; // per literal: the end of the last line it was seen on
            for m in self.automaton.find_overlapping_iter(bytes) {
                let k = m.pattern().as_usize();
                if m.start() < line_end[k] {
                    continue;
                }
                starts[k].push(memchr::memrchr(b'\n', &bytes[..m.start()]).map_or(0, |i| i + 1));
                line_end[k] = memchr::memchr(b'\n', &bytes[m.start()..]).map_or(bytes.len(), |i| m.start() + i + 1);
            }
            starts
        });
        let ascii = s.is_ascii();
        Ok(found
            .into_iter()
            .enumerate()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| {
                if ascii {
                    (k, v)
                } else {
                    let mut cursor = Cursor::new(s);
                    (k, v.into_iter().map(|b| cursor.char_of(b)).collect())
                }
            })
            .collect())
    }
}

/// For each distinct line start of `starts` (character offsets, ascending, repeats
/// allowed): `(number, end, body, rank, local_rank, node, stamp)`, where `number` counts
/// from `first_line`, `end` is the offset of the line's newline (or of the text's end)
/// and `body` the offset where the line's text after its launcher prefix starts.  A line
/// that is not ASCII has `body` None: the caller reads it with the Python definitions.
#[pyfunction]
fn frame<'py>(py: Python<'py>, text: &Bound<'py, PyString>, starts: Vec<usize>, first_line: i64)
    -> PyResult<Vec<Bound<'py, PyTuple>>> {
    let s = text.to_str()?;
    let bytes = s.as_bytes();
    let mut cursor = Cursor::new(s);
    let mut out = Vec::with_capacity(starts.len());
    let (mut number, mut counted) = (first_line, 0usize);
    let mut last: Option<usize> = None;
    for start in starts {
        if last == Some(start) {
            continue;
        }
        last = Some(start);
        let b = cursor.byte_of(start);
        number += memchr::memchr_iter(b'\n', &bytes[counted.min(b)..b]).count() as i64;
        counted = counted.max(b);
        let e = memchr::memchr(b'\n', &bytes[b..]).map_or(bytes.len(), |i| b + i);
        let line = &s[b..e];
        let end = cursor.char_of(e);
        if !line.is_ascii() {
            out.push((number, end, None::<usize>, None::<i64>, None::<i64>, None::<&str>, None::<f64>)
                .into_pyobject(py)?);
            continue;
        }
        let p = prefix::split(line);
        let node = p.node.map(|(a, z)| &line[a..z]);
        let wall = stamp::line_stamp(&line.as_bytes()[p.body..]);
        // ASCII: the body's character offset is its byte offset from the line's start
        out.push((number, end, start + p.body, p.rank, p.local_rank, node, wall).into_pyobject(py)?);
    }
    Ok(out)
}

/// (body offset, rank, local rank, node)
type PrefixTuple = (usize, Option<i64>, Option<i64>, Option<String>);

/// The prefix of one line, as `parsers.prefix.split_prefix` gives it: (body offset,
/// rank, local rank, node); None for a line that is not ASCII.  (Tests compare the two.)
#[pyfunction]
fn split_prefix(line: &str) -> Option<PrefixTuple> {
    if !line.is_ascii() {
        return None;
    }
    let p = prefix::split(line);
    Some((p.body, p.rank, p.local_rank, p.node.map(|(a, z)| line[a..z].to_string())))
}

/// The leading stamp of one ASCII line body, as `parsers.timestamps.line_stamp` gives it.
#[pyfunction]
fn line_stamp(body: &str) -> Option<f64> {
    if body.is_ascii() { stamp::line_stamp(body.as_bytes()) } else { None }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Literals>()?;
    m.add_function(wrap_pyfunction!(frame, m)?)?;
    m.add_function(wrap_pyfunction!(split_prefix, m)?)?;
    m.add_function(wrap_pyfunction!(line_stamp, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
