//! `tuimon._core`: the compiled half of the block engine (`tuimon/engine/blocks.py`).
//!
//! It does, per block, what the Python engine does per line: which rule literals a
//! block holds (one Aho-Corasick pass for all of them), which lines hold them, and the
//! launcher prefix and leading stamp of each hit line.  The definitions stay in Python
//! (`parsers/prefix.py`, `parsers/timestamps.py`); `tests/test_core.py` holds the two
//! engines to the same answers.  Offsets in and out are character offsets, as Python
//! slices a `str`.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};
use std::collections::HashMap;
use std::sync::Mutex;

pub mod hf;
pub mod jsonline;
pub mod jsontext;
pub mod metrics;
mod fields;
mod memory;
mod numbers;
pub mod prefix;
pub mod records;
pub mod rolling;
pub mod scan;
pub mod stamp;
pub mod template;
#[cfg(test)]
mod testing;
pub mod text;
pub mod timers;

use std::sync::Arc;
use text::Cursor;

/// The index of the last block that is not ASCII (see `text::Index`), kept with the block itself:
/// every reader asks about the same block in turn, and a str is the same text while it lives.
static LAST_INDEX: Mutex<Option<(Py<PyString>, Arc<text::Index>)>> = Mutex::new(None);

/// `text`'s character index (None for ASCII, where characters are bytes), made once a block.
/// Whether it is ASCII the str says (`str.isascii` reads a flag; a scan of the block cost each
/// reader's call a pass over it).
fn index_of(text: &Bound<'_, PyString>) -> Option<Arc<text::Index>> {
    if ascii(text) {
        return None;
    }
    let (py, s) = (text.py(), text.to_str().ok()?);
    let mut last = LAST_INDEX.lock().expect("not poisoned");
    if let Some((kept, index)) = last.as_ref() {
        if kept.bind(py).is(text) {
            return Some(index.clone());
        }
    }
    let index = Arc::new(text::Index::build(s));
    *last = Some((text.clone().unbind(), index.clone()));
    Some(index)
}

/// Whether `text` is ASCII, as the str knows it (a failed call: scanned).
fn ascii(text: &Bound<'_, PyString>) -> bool {
    match text.call_method0("isascii").and_then(|r| r.is_truthy()) {
        Ok(answer) => answer,
        Err(_) => text.to_str().is_ok_and(str::is_ascii),
    }
}

/// Literals asked about a block at a time (`tuimon.engine.presence.Presence`'s question).
#[pyclass(frozen, module = "tuimon._core")]
struct Literals {
    scanner: scan::Scanner,
}

#[pymethods]
impl Literals {
    #[new]
    fn new(literals: Vec<String>) -> PyResult<Self> {
        let scanner = scan::Scanner::new(&literals).map_err(pyo3::exceptions::PyValueError::new_err)?;
        Ok(Literals { scanner })
    }

    /// The indices of the literals `text` holds, in order.
    fn present(&self, py: Python<'_>, text: &Bound<'_, PyString>) -> PyResult<Vec<usize>> {
        let bytes = text.to_str()?.as_bytes();
        let count = self.scanner.count();
        Ok(py.detach(|| {
            let mut seen = vec![false; count];
            let mut left = count;
            for m in self.scanner.automaton().find_overlapping_iter(bytes) {
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

    /// The literals `text` holds, each with the starts of the lines holding it (character
    /// offsets, ascending, each once), in the literals' order (see `scan`).
    fn scan(&self, py: Python<'_>, text: &Bound<'_, PyString>) -> PyResult<Vec<(usize, Vec<usize>)>> {
        let s = text.to_str()?;
        let held = py.detach(|| self.scanner.lines(s.as_bytes()));
        let index = index_of(text);
        // (not ASCII: the starts in characters, a walk of the indexed cursor over each ascending list)
        Ok(held.starts(|bytes| match index.as_deref() {
            None => bytes.to_vec(),
            Some(index) => {
                let mut cursor = Cursor::indexed(s, Some(index));
                bytes.iter().map(|&b| cursor.char_of(b)).collect()
            }
        }))
    }
}

/// The framing readers a process is handed (`parsers.prefix.CORE`, `parsers.timestamps.CORE`):
/// each line's launcher prefix and leading stamp.  Only lines the core reads as Python
/// does come here: ASCII, without the separators \x1c-\x1f (which Python's `\s` holds).
#[pyclass(frozen, module = "tuimon._core")]
struct Framing {
    prefix: prefix::PrefixRules,
    stamp: stamp::StampRules,
}

/// Whether the core reads `line` as the Python definitions do (see `text::plain`).
fn plain(line: &str) -> bool {
    text::plain(line.as_bytes())
}

#[pymethods]
impl Framing {
    /// `prefix`: `pattern`, `starts`, `brackets`, `pad`; `stamp`: `shape` (see `stamp::StampShape`), `reach`.
    #[new]
    fn new(prefix: &Bound<'_, PyDict>, stamp: &Bound<'_, PyDict>) -> PyResult<Self> {
        Ok(Framing {
            prefix: prefix::PrefixRules::new(compile(&item::<String>(prefix, "pattern")?)?,
                                             item::<String>(prefix, "starts")?.into_bytes(), item(prefix, "brackets")?,
                                             item(prefix, "pad")?),
            stamp: stamp::StampRules { shape: stamp_shape(&item::<Bound<'_, PyDict>>(stamp, "shape")?)?,
                                       reach: item(stamp, "reach")? },
        })
    }

    /// For each distinct line start of `starts` (character offsets, ascending, repeats
    /// allowed): `(number, end, body, rank, local_rank, node, stamp)`, where `number` counts
    /// from `first_line`, `end` is the offset of the line's newline (or of the text's end)
    /// and `body` the offset where the line's text after its launcher prefix starts.  A line
    /// not read here (see `Framing`) has `body` None: the caller reads it with the Python definitions.
    fn frame<'py>(&self, py: Python<'py>, text: &Bound<'py, PyString>, starts: Vec<usize>, first_line: i64)
        -> PyResult<Vec<Bound<'py, PyTuple>>> {
        let s = text.to_str()?;
        let mut out = Vec::with_capacity(starts.len());
        let mut err = None;
        self.each_frame(s, index_of(text).as_deref(), &starts, first_line, |line| {
            let made = match line.read {
                None => (line.number, line.end, None::<usize>, None::<i64>, None::<i64>, None::<&str>, None::<f64>)
                    .into_pyobject(py),
                Some(r) => (line.number, line.end, Some(r.body), r.rank, r.local_rank, r.node, r.wall).into_pyobject(py),
            };
            match made {
                Ok(tuple) => out.push(tuple),
                Err(e) => err = Some(e),
            }
        });
        err.map_or(Ok(out), Err)
    }

    /// What `frame` gives, as columns: `(number, end, body, rank, local_rank, wall)` each the
    /// bytes of an int64 (float64 for `wall`) array, and `node` a list.  Where `frame` has
    /// None: -1 for `body`, the least int64 for `rank` and `local_rank`, NaN for `wall`
    /// (a stamp is never NaN).  A block's frequent lines cross as arrays, not a tuple each.
    fn frame_columns(&self, text: &Bound<'_, PyString>, starts: Vec<usize>, first_line: i64) -> PyResult<FrameColumns> {
        let s = text.to_str()?;
        let n = starts.len();
        let mut ints: [Vec<u8>; 5] = std::array::from_fn(|_| Vec::with_capacity(8 * n));
        let mut walls = Vec::with_capacity(8 * n);
        let mut nodes: Vec<Option<String>> = Vec::with_capacity(n);
        self.each_frame(s, index_of(text).as_deref(), &starts, first_line, |line| {
            let (body, rank, local, wall) = match &line.read {
                None => (-1, None, None, None),
                Some(r) => (r.body as i64, r.rank, r.local_rank, r.wall),
            };
            let values = [line.number, line.end as i64, body, rank.unwrap_or(i64::MIN), local.unwrap_or(i64::MIN)];
            for (column, value) in ints.iter_mut().zip(values) {
                column.extend_from_slice(&value.to_ne_bytes());
            }
            walls.extend_from_slice(&wall.unwrap_or(f64::NAN).to_ne_bytes());
            nodes.push(line.read.and_then(|r| r.node).map(str::to_string));
        });
        let [number, end, body, rank, local] = ints;
        Ok((number, end, body, rank, local, nodes, walls))
    }

    /// The prefix of one line, as `parsers.prefix.split_prefix` gives it: (body offset,
    /// rank, local rank, node); None for a line not read here.  (Tests compare the two.)
    fn split_prefix(&self, line: &str) -> Option<PrefixTuple> {
        if !plain(line) {
            return None;
        }
        let p = prefix::split(&self.prefix, line, &mut self.prefix.pattern.capture_locations());
        Some((p.body, p.rank, p.local_rank, p.node.map(|(a, z)| line[a..z].to_string())))
    }

    /// The leading stamp of one line's body, as `parsers.timestamps.line_stamp` gives it
    /// (None for a body not read here).
    fn line_stamp(&self, body: &str) -> Option<f64> {
        if plain(body) { stamp::line_stamp(&self.stamp, body.as_bytes()) } else { None }
    }
}

/// One framed line (see `Framing.frame`): `read` None for a line not read here.
struct FramedLine<'a> {
    number: i64,
    end: usize,
    read: Option<FrameRead<'a>>,
}

/// A framed line's prefix and stamp.
#[derive(Clone, Copy)]
struct FrameRead<'a> {
    body: usize,
    rank: Option<i64>,
    local_rank: Option<i64>,
    node: Option<&'a str>,
    wall: Option<f64>,
}

/// `Framing.frame_columns`' answer: five int64 columns, the nodes, the float64 stamps.
type FrameColumns = (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>, Vec<Option<String>>, Vec<u8>);

impl Framing {
    /// Each distinct start of `starts` (character offsets, ascending) framed, in order.
    fn each_frame<'a>(&self, s: &'a str, index: Option<&'a text::Index>, starts: &[usize], first_line: i64,
                      mut out: impl FnMut(FramedLine<'a>)) {
        let bytes = s.as_bytes();
        let mut cursor = Cursor::indexed(s, index);
        let (mut number, mut counted) = (first_line, 0usize);
        let mut last: Option<usize> = None;
        let mut prefixes = prefix::Splitter::new(&self.prefix);
        for &start in starts {
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
            if !plain(line) {
                out(FramedLine { number, end, read: None });
                continue;
            }
            let p = prefixes.split(line);
            let node = p.node.map(|(a, z)| &line[a..z]);
            let wall = stamp::line_stamp(&self.stamp, &line.as_bytes()[p.body..]);
            // ASCII: the body's character offset is its byte offset from the line's start
            out(FramedLine { number, end, read: Some(FrameRead { body: start + p.body, rank: p.rank,
                                                                 local_rank: p.local_rank, node, wall }) });
        }
    }
}

/// (body offset, rank, local rank, node)
type PrefixTuple = (usize, Option<i64>, Option<i64>, Option<String>);

/// What a record's raw key means (`parsers.megatron._spec_of`'s answer, asked once a key).
enum Spec {
    Skip,
    Loss(Py<PyString>),
    Int(Py<PyString>),
    Float(Py<PyString>, Option<f64>),
    /// a value with a unit: the definition's own reader of it (NeoX's `123.4TFLOPS`)
    Read(Py<PyString>, Py<PyAny>),
}

/// `text.split(sep)` for an ASCII separator, by memchr.
fn split_bytes(text: &str, sep: u8) -> impl Iterator<Item = &str> {
    let mut from = 0;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let rest = &text.as_bytes()[from..];
        let part = match memchr::memchr(sep, rest) {
            Some(i) => {
                let part = &text[from..from + i];
                from += i + 1;
                part
            }
            None => {
                done = true;
                &text[from..]
            }
        };
        Some(part)
    })
}

/// A raw key's meaning, and which of the declaration's vetoes its field is (if one).
struct Key {
    spec: Spec,
    veto: Option<usize>,
    /// the field's column among a block's (`Records.columns`), by its name
    col: usize,
}

const MAX_KEYS: usize = 4096; // raw keys remembered (as the Python definition's cache)

const MAX_PLACES: usize = 64; // a record's parts whose keys are remembered by place
const NO_KEY: usize = usize::MAX; // (a place whose part had no key)

/// The raw keys asked so far, and the last record's keys by place: a log's records repeat
/// their keys in the same order, so most keys are found by one comparison, without a hash.
#[derive(Default)]
struct KeyTable {
    index: HashMap<String, usize>,
    keys: Vec<Key>,
    last: Vec<(String, usize)>,
    /// the fields' names (what `spec_of` names them: a fixed few), each a column
    names: Vec<Py<PyString>>,
    columns: HashMap<String, usize>,
}

impl KeyTable {
    /// The column of the field `name`.
    fn col_of(&mut self, name: &Bound<'_, PyString>) -> PyResult<usize> {
        let text = name.to_str()?;
        if let Some(&c) = self.columns.get(text) {
            return Ok(c);
        }
        self.names.push(name.clone().unbind());
        self.columns.insert(text.to_string(), self.names.len() - 1);
        Ok(self.names.len() - 1)
    }
}

/// Where a record's fields go: a dict (`Records.record`), or a row of a block's columns
/// (`Records.columns`), each field by its column.
trait FieldSink<'py> {
    fn set(&mut self, name: &Bound<'py, PyString>, col: usize, value: Bound<'py, PyAny>) -> PyResult<()>;
}

impl<'py> FieldSink<'py> for Bound<'py, PyDict> {
    fn set(&mut self, name: &Bound<'py, PyString>, _col: usize, value: Bound<'py, PyAny>) -> PyResult<()> {
        self.set_item(name, value)
    }
}

/// A row's fields by column, in the record's order (a later part of a field replaces an earlier one
/// when the row joins the columns).
impl<'py> FieldSink<'py> for Vec<(usize, Bound<'py, PyAny>)> {
    fn set(&mut self, _name: &Bound<'py, PyString>, col: usize, value: Bound<'py, PyAny>) -> PyResult<()> {
        self.push((col, value));
        Ok(())
    }
}

/// The compiled readers of two record kinds, `|`-separated `key: value` lists:
/// `parsers.megatron.parse_record` (an iteration's fields) and `parsers.timers._pairs`
/// (timer lists).  The Python functions stay the definitions: the key table is asked
/// through `spec_of`, and every value but a plain number goes to `to_float`/`to_int`.
#[pyclass(frozen, module = "tuimon._core")]
struct Records {
    spec_of: Py<PyAny>,
    to_float: Py<PyAny>,
    to_int: Py<PyAny>,
    frozen_map: Py<PyAny>,
    rules: records::RecordRules,
    keys: Mutex<KeyTable>,
    /// the field of the losses (`rules.losses`), as a str
    losses_name: Py<PyString>,
}

/// What a record's values say to the line's checks, each by its last value (a later part
/// of the same field replaces an earlier one, as in the fields' dict).
struct Checks<'py> {
    /// per veto: whether its last value is over 0, or the value where Python compares it
    vetoes: Vec<Option<Result<bool, Bound<'py, PyAny>>>>,
    /// a loss was NaN (or a value Python reads): the losses are looked at again, as Python does
    odd_loss: bool,
    /// the record's losses, as its field holds them (None: it has none)
    losses: Option<Bound<'py, PyAny>>,
}

impl Records {
    fn float<'py>(&self, py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
        match numbers::fast_float(text) {
            Some(v) => Ok(PyFloat::new(py, v).into_any()),
            None => self.to_float.bind(py).call1((text,)),
        }
    }

    /// An iteration line's counter and total, its fields into `fields`; None for a line the hook
    /// reads (`fields` may then hold some of its fields: the caller drops them).
    fn iteration<'py>(&self, py: Python<'py>, body: &str, locs: &mut template::Groups,
                      keys: &mut KeyTable, fields: &mut impl FieldSink<'py>) -> PyResult<Option<(i64, i64)>> {
        let Some((it, total)) = self.rules.one_mark(body, locs) else { return Ok(None) };
        let checks = self.read(py, body, keys, fields)?;
        for veto in checks.vetoes.into_iter().flatten() {
            match veto {
                Ok(true) => return Ok(None),
                Ok(false) => {}
                Err(n) => {
                    if !n.is_none() && n.gt(0)? {
                        return Ok(None);
                    }
                }
            }
        }
        if checks.odd_loss {
            if let Some(losses) = &checks.losses {
                for v in losses.call_method0("values")?.try_iter()? {
                    let v = v?;
                    if v.ne(&v)? {
                        return Ok(None);
                    }
                }
            }
        }
        Ok(Some((it, total)))
    }

    /// The meaning of the `place`th key of a record, `raw` (asked of `spec_of` once, remembered in
    /// `table` while they are few).
    fn key<'k>(&self, py: Python<'_>, table: &'k mut KeyTable, place: usize, raw: &str, once: &'k mut Option<Key>)
        -> PyResult<&'k Key> {
        if let Some((last, k)) = table.last.get(place) {
            if *k != NO_KEY && last == raw {
                return Ok(&table.keys[*k]);
            }
        }
        let k = match table.index.get(raw) {
            Some(&k) => k,
            None => {
                let key = self.ask(py, raw, table)?;
                if table.keys.len() >= MAX_KEYS {
                    return Ok(once.insert(key));
                }
                table.keys.push(key);
                table.index.insert(raw.to_string(), table.keys.len() - 1);
                table.keys.len() - 1
            }
        };
        if place < MAX_PLACES {
            if table.last.len() <= place {
                table.last.resize(place + 1, (String::new(), NO_KEY));
            }
            let slot = &mut table.last[place];
            slot.0.clear();
            slot.0.push_str(raw);
            slot.1 = k;
        }
        Ok(&table.keys[k])
    }

    fn ask(&self, py: Python<'_>, raw: &str, table: &mut KeyTable) -> PyResult<Key> {
        let answer = self.spec_of.bind(py).call1((raw,))?;
        let (name, kind): (Option<Bound<'_, PyString>>, Bound<'_, PyAny>) = answer.extract()?;
        let veto = match &name {
            Some(n) => {
                let n = n.to_str()?;
                self.rules.vetoes.iter().position(|v| v == n)
            }
            None => None,
        };
        let spec = match name {
            None => Spec::Skip,
            Some(n) if n.to_str()? == self.rules.loss_tag => Spec::Loss(kind.cast_into::<PyString>()?.unbind()),
            Some(n) if kind.is_instance_of::<PyString>() && kind.extract::<String>()? == "int" => Spec::Int(n.unbind()),
            Some(n) if kind.is_callable() => Spec::Read(n.unbind(), kind.unbind()),
            Some(n) => Spec::Float(n.unbind(), if kind.is_instance_of::<PyFloat>() { Some(kind.extract()?) } else { None }),
        };
        let veto = if matches!(spec, Spec::Loss(_)) { None } else { veto };
        let col = match &spec {
            Spec::Int(n) | Spec::Float(n, _) | Spec::Read(n, _) => table.col_of(n.bind(py))?,
            Spec::Skip | Spec::Loss(_) => usize::MAX,
        };
        Ok(Key { spec, veto, col })
    }

    /// `parse_record(record)`'s fields, and what they say to the line's checks.
    fn read<'py>(&self, py: Python<'py>, record: &str, keys: &mut KeyTable, out: &mut impl FieldSink<'py>)
        -> PyResult<Checks<'py>> {
        let losses = PyDict::new(py);
        let mut checks = Checks { vetoes: (0..self.rules.vetoes.len()).map(|_| None).collect(), odd_loss: false,
                                  losses: None };
        for (place, seg) in split_bytes(record, b'|').enumerate() {
            let bytes = seg.as_bytes();
            let Some(at) = memchr::memchr(b':', bytes).or_else(|| memchr::memchr(b'=', bytes)) else { continue };
            let (raw, value) = (&seg[..at], &seg[at + 1..]);
            let mut once = None;
            let key = self.key(py, keys, place, raw, &mut once)?;
            let v = match &key.spec {
                Spec::Skip => continue,
                Spec::Loss(name) => {
                    match numbers::fast_float(value) {
                        Some(v) => {
                            checks.odd_loss |= v.is_nan();
                            losses.set_item(name, PyFloat::new(py, v))?;
                        }
                        None => {
                            let v = self.to_float.bind(py).call1((value,))?;
                            if !v.is_none() {
                                checks.odd_loss = true;
                                losses.set_item(name, v)?;
                            }
                        }
                    }
                    continue;
                }
                Spec::Int(name) => {
                    let v = match numbers::fast_int(value) {
                        Some(n) => (n.into_pyobject(py)?.into_any(), Ok(n > 0)),
                        None => {
                            let n = self.to_int.bind(py).call1((value,))?;
                            (n.clone(), Err(n))
                        }
                    };
                    out.set(name.bind(py), key.col, v.0)?;
                    v.1
                }
                Spec::Read(name, read) => {
                    let v = read.bind(py).call1((value,))?;
                    out.set(name.bind(py), key.col, v.clone())?;
                    Err(v)
                }
                Spec::Float(name, scale) => match numbers::fast_float(value) {
                    Some(f) => {
                        let v = f * scale.unwrap_or(1.0);
                        out.set(name.bind(py), key.col, PyFloat::new(py, v).into_any())?;
                        Ok(v > 0.0)
                    }
                    None => {  // (what only Python's to_float reads: Python compares it too)
                        let v = self.to_float.bind(py).call1((value,))?;
                        let v = match scale {
                            Some(k) if !v.is_none() => PyFloat::new(py, v.extract::<f64>()? * k).into_any(),
                            _ => v,
                        };
                        out.set(name.bind(py), key.col, v.clone())?;
                        Err(v)
                    }
                },
            };
            if let Some(k) = key.veto {
                checks.vetoes[k] = Some(v);
            }
        }
        if !losses.is_empty() {
            let frozen = self.frozen_map.bind(py).call1((losses,))?;
            let name = self.losses_name.bind(py);
            out.set(name, keys.col_of(name)?, frozen.clone())?;
            checks.losses = Some(frozen);
        }
        Ok(checks)
    }
}

#[pymethods]
impl Records {
    /// `declaration`: the reader's (`parsers.megatron.CORE_RECORD`): `mark` (a pattern: the
    /// counter and total its groups 1 and 2), `skip` (line starts left to the hook), `vetoes`
    /// (integer fields whose value over 0 leaves the line to the hook), `loss_field` (the field of
    /// the losses) and `loss_tag` (what `spec_of` names a loss key with).
    #[new]
    fn new(spec_of: Py<PyAny>, to_float: Py<PyAny>, to_int: Py<PyAny>, frozen_map: Py<PyAny>,
           declaration: &Bound<'_, PyDict>) -> PyResult<Self> {
        let rules = records::RecordRules::new(
            compile(&item::<String>(declaration, "mark")?)?,
            match (item::<Option<String>>(declaration, "epoch_start")?, item::<Option<String>>(declaration, "epoch_mark")?) {
                (Some(start), Some(mark)) => Some(records::EpochRule { start, pattern: compile(&mark)? }),
                _ => None,
            },
            item(declaration, "vetoes")?,
            item(declaration, "loss_field")?,
            item(declaration, "loss_tag")?,
        );
        let losses_name = PyString::new(declaration.py(), &rules.losses).unbind();
        Ok(Records { spec_of, to_float, to_int, frozen_map, rules, keys: Mutex::new(KeyTable::default()), losses_name })
    }

    /// `parse_record(record)`: an iteration record's fields.
    fn record<'py>(&self, py: Python<'py>, record: &str) -> PyResult<Bound<'py, PyDict>> {
        let mut keys = self.keys.lock().expect("not poisoned");
        let mut out = PyDict::new(py);
        self.read(py, record, &mut keys, &mut out)?;
        Ok(out)
    }

    /// Record lines, `(body start, end)` of `text` (character offsets, ASCII bodies), read as
    /// `MegatronParser._on_iteration` reads a line holding one record and no NaN, into columns:
    /// `(found, counters, totals, fields)`: whether each line was read (not: a line the hook
    /// reads: no mark, two or more (ranks writing at once), a `skip` start, a NaN loss or a veto
    /// over 0 (its failure event), a counter past i64); each read line's counter and total (as
    /// the line writes it); and each field a read line had, by name, a list of one value a read
    /// line (None where a line has none).  A dict a line cost more than reading it did.
    #[allow(clippy::type_complexity)]
    fn columns<'py>(&self, py: Python<'py>, text: &Bound<'py, PyString>, lines: Vec<(usize, usize)>)
        -> PyResult<(Vec<bool>, Vec<i64>, Vec<i64>, Bound<'py, PyDict>)> {
        let mut locs = self.rules.mark.groups();
        let mut keys = self.keys.lock().expect("not poisoned");
        let index = index_of(text);
        let bodies = text::slices(text.to_str()?, index.as_deref(), lines);
        let (mut found, mut counters, mut totals) = (Vec::with_capacity(bodies.len()), Vec::new(), Vec::new());
        let mut columns: Vec<Vec<Option<Bound<'py, PyAny>>>> = Vec::new();
        let mut row: Vec<(usize, Bound<'py, PyAny>)> = Vec::new();
        for body in bodies {
            row.clear();
            let Some((it, total)) = self.iteration(py, body, &mut locs, &mut keys, &mut row)? else {
                found.push(false);
                continue;
            };
            found.push(true);
            let r = counters.len();
            counters.push(it);
            totals.push(total);
            for (col, value) in row.drain(..) {
                if columns.len() <= col {
                    columns.resize_with(col + 1, Vec::new);
                }
                let column = &mut columns[col];
                if column.len() == r + 1 {
                    column[r] = Some(value); // (a later part of the field: its value, as a dict's)
                } else {
                    column.resize(r, None);
                    column.push(Some(value));
                }
            }
        }
        let fields = PyDict::new(py);
        for (col, mut column) in columns.into_iter().enumerate() {
            if column.is_empty() {
                continue;
            }
            column.resize(counters.len(), None);
            fields.set_item(keys.names[col].bind(py), column)?;
        }
        Ok((found, counters, totals, fields))
    }

    /// `_pairs(text)`: a timer list's `name: value` pairs (the last colon of each part),
    /// at most 256.
    fn pairs<'py>(&self, py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for seg in text.split('|') {
            let (name, value) = match seg.rsplit_once(':') {
                Some(pair) => pair,
                None => continue,
            };
            let v = self.float(py, value)?;
            let name: Bound<'_, PyAny> = if name.is_ascii() {
                PyString::new(py, numbers::py_strip(name)).into_any()
            } else {
                PyString::new(py, name).call_method0("strip")?
            };
            if !v.is_none() && name.len()? > 0 && out.len() < 256 {
                out.set_item(name, v)?;
            }
        }
        Ok(out)
    }
}

/// A user format's line regex, run by the `regex` crate (linear in the line: no input
/// makes it backtrack).  It reads ASCII lines without the separators \x1c-\x1f, where
/// its classes (`\w`, `\s`, `\d`, `\b`, case folding) mean what they mean to Python's
/// `re`; any other line is left to the Python regex (`tuimon.engine.user_regex`).
#[pyclass(frozen, module = "tuimon._core")]
struct LineRegex {
    /// the regex, and its template where it is a plain sequence (a line's body read without the regex)
    pattern: template::Templated,
}

/// (whether the line was read here, the group spans of the first match: None for a group
/// that took no part; None for no match)
type Searched = (bool, Option<Vec<Option<(usize, usize)>>>);

#[pymethods]
impl LineRegex {
    #[new]
    fn new(pattern: &str) -> PyResult<Self> {
        compile_line(pattern).map(|re| LineRegex { pattern: template::Templated::of_line(re) })
    }

    /// (name, number) of the named groups, in order (numbered as `re` numbers them: by their
    /// opening parenthesis), as `re.Pattern.groupindex` lists them.
    fn group_index(&self) -> Vec<(String, usize)> {
        self.pattern.regex.capture_names().enumerate().filter_map(|(k, name)| name.map(|n| (n.to_string(), k))).collect()
    }

    /// The first match in `hay[..end]` at or after `start` (byte offsets: the caller passes
    /// an ASCII text, or one line of another), as `re`'s `search(hay, start, end)` finds it:
    /// what lies before `start` is seen by `^` and `\b`, and `end` is the text's end.  Not
    /// read here (false) when the characters from just before `start` to `end` are not all
    /// ASCII without \x1c-\x1f.
    fn search(&self, py: Python<'_>, hay: &str, start: usize, end: usize) -> Searched {
        let end = end.min(hay.len());
        if start > end {
            return (true, None);
        }
        let seen = &hay.as_bytes()[start.saturating_sub(1)..end];
        if !text::plain(seen) {
            return (false, None);
        }
        let hay = &hay[..end];
        let found = py.detach(|| {
            let mut locs = self.pattern.regex.capture_locations();
            self.pattern.regex.captures_read_at(&mut locs, hay, start).map(|_| (0..locs.len()).map(|g| locs.get(g)).collect())
        });
        (true, found)
    }

    /// Of the lines starting at `starts` (character offsets, ascending), those holding a
    /// match in their text up to and including their newline, as `re`'s `search(text, start,
    /// end + 1)` finds it (a hook's trigger over its candidate lines); and those not read
    /// here (from the character before them to their newline, not ASCII or holding
    /// \x1c-\x1f), for the Python regex.
    fn lines(&self, py: Python<'_>, text: &Bound<'_, PyString>, starts: Vec<usize>) -> PyResult<(Vec<usize>, Vec<usize>)> {
        let s = text.to_str()?;
        let bytes = s.as_bytes();
        let index = index_of(text);
        let mut cursor = Cursor::indexed(s, index.as_deref());
        let at: Vec<usize> = starts.iter().map(|&c| cursor.byte_of(c)).collect();
        Ok(py.detach(|| {
            let (mut kept, mut unread) = (Vec::new(), Vec::new());
            for (&start, &b) in starts.iter().zip(&at) {
                let end = memchr::memchr(b'\n', &bytes[b..]).map_or(bytes.len(), |i| b + i + 1);
                if !text::plain(&bytes[b.saturating_sub(1)..end]) {
                    unread.push(start);
                } else if self.pattern.regex.find_at(&s[..end], b).is_some() {
                    kept.push(start);
                }
            }
            (kept, unread)
        }))
    }

    /// Of the lines starting at `starts` (character offsets, ascending): the first match in
    /// each line's body (its text after its launcher prefix, without the newline), as `re`'s
    /// `search(body)` finds it, as (start, the text of each of `groups`) for the lines that
    /// hold one (a block's pair lines); and the lines not read here (not ASCII, or holding
    /// \x1c-\x1f), for the Python regex.
    #[allow(clippy::type_complexity)]
    fn bodies(&self, py: Python<'_>, text: &Bound<'_, PyString>, starts: Vec<usize>, groups: Vec<usize>,
              framing: PyRef<'_, Framing>) -> PyResult<(Vec<(usize, Vec<Option<String>>)>, Vec<usize>)> {
        let rules = &framing.prefix;
        let s = text.to_str()?;
        let bytes = s.as_bytes();
        let index = index_of(text);
        let mut cursor = Cursor::indexed(s, index.as_deref());
        let at: Vec<usize> = starts.iter().map(|&c| cursor.byte_of(c)).collect();
        Ok(py.detach(|| {
            let (mut found, mut unread) = (Vec::new(), Vec::new());
            let mut found_groups = self.pattern.groups();
            let mut prefixes = prefix::Splitter::new(rules);
            for (&start, &b) in starts.iter().zip(&at) {
                let end = memchr::memchr(b'\n', &bytes[b..]).map_or(bytes.len(), |i| b + i);
                let line = &s[b..end];
                if !plain(line) {
                    unread.push(start);
                    continue;
                }
                let body = &line[prefixes.split(line).body..];
                let texts: Option<Vec<Option<String>>> = self.pattern.captures_at(body, 0, &mut found_groups).map(|_| {
                    groups.iter().map(|&g| found_groups.get(g).map(|(a, z)| body[a..z].to_string())).collect()
                });
                if let Some(texts) = texts {
                    found.push((start, texts));
                }
            }
            (found, unread)
        }))
    }
}

/// TorchTitan's metrics line read into its `key: value` pairs (`core/src/metrics.rs`):
/// `parsers.torchtitan.metric_values`, whose definition stays there.  A line that is not
/// ASCII, or holds the separators \x1c-\x1f (where `\s` means more to Python), goes to it.
#[pyclass(frozen, module = "tuimon._core")]
struct MetricLines {
    fallback: Py<PyAny>,
    rules: metrics::MetricRules,
}

#[pymethods]
impl MetricLines {
    /// `declaration`: the reader's (`parsers.torchtitan.CORE_METRICS`): `skip` (what makes a
    /// line give nothing), `start` (where its pairs start), `keys` (a row's: the step, the loss,
    /// then the others, the last one the value `unit` is read on), `unit`.
    #[new]
    fn new(fallback: Py<PyAny>, declaration: &Bound<'_, PyDict>) -> PyResult<Self> {
        let rules = metrics::MetricRules {
            skip: item(declaration, "skip")?,
            start: item(declaration, "start")?,
            keys: item(declaration, "keys")?,
            unit: item(declaration, "unit")?,
        };
        if rules.keys.len() < 3 || rules.keys.len() > metrics::MAX_KEYS {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "a metric row needs a step, a loss and a unit's key, and at most 16 keys"));
        }
        Ok(MetricLines { fallback, rules })
    }

    /// Metrics lines, `(body start, end)` of `text` (character offsets, ASCII bodies), typed
    /// as `TorchTitanParser._on_metrics` types them: per line 0 (nothing: a `skip` line, no
    /// step or no loss), 1 (the hook reads it: a value only Python's `to_float`/`to_int`
    /// reads, a separator \x1c-\x1f) or 3 (read); and per line read, a tuple of the
    /// declaration's keys' values in their order (the step an int, the loss a float, the
    /// others floats or None where the line has none, the last one's in the unit).
    fn rows<'py>(&self, py: Python<'py>, text: &Bound<'py, PyString>, lines: Vec<(usize, usize)>)
        -> PyResult<(Vec<u8>, Vec<Bound<'py, PyTuple>>)> {
        let (mut verdicts, mut rows) = (Vec::with_capacity(lines.len()), Vec::new());
        for body in text::slices(text.to_str()?, index_of(text).as_deref(), lines) {
            match metrics::typed(&self.rules, body) {
                metrics::Typed::Nothing => verdicts.push(0),
                metrics::Typed::Hook => verdicts.push(1),
                metrics::Typed::Row((step, loss, middle, last)) => {
                    verdicts.push(3);
                    let mut items: Vec<Bound<'py, PyAny>> = Vec::with_capacity(middle.len() + 3);
                    items.push(step.into_pyobject(py)?.into_any());
                    items.push(PyFloat::new(py, loss).into_any());
                    for v in middle[..self.rules.keys.len() - 3].iter().chain(std::iter::once(&last)) {
                        items.push(match v {
                            Some(x) => PyFloat::new(py, *x).into_any(),
                            None => py.None().into_bound(py),
                        });
                    }
                    rows.push(PyTuple::new(py, items)?);
                }
            }
        }
        Ok((verdicts, rows))
    }

    /// `metric_values(body)`: {key: (value, unit)} of the pairs from `step:` on, the last of
    /// a key winning; None for a validation line.
    fn read<'py>(&self, py: Python<'py>, body: &str) -> PyResult<Bound<'py, PyAny>> {
        if !plain(body) {
            return self.fallback.bind(py).call1((body,));
        }
        let text = metrics::strip_sgr(body);
        let rules = &self.rules;
        if rules.skip.iter().any(|s| text.contains(s.as_str())) {
            return Ok(py.None().into_bound(py));
        }
        // as Python's text[text.find(start):] (not found: the last character)
        let start = text.find(rules.start.as_str()).unwrap_or(text.len().saturating_sub(1));
        let out = PyDict::new(py);
        for (key, value, unit) in metrics::pairs(&text[start..], &rules.unit) {
            out.set_item(key, (value, if unit { rules.unit.as_str() } else { "" }))?;
        }
        Ok(out.into_any())
    }
}

/// Timer lines read into columns (`core/src/timers.rs`; the definitions are
/// `parsers/timers.py`'s hooks, whose `(min, max)` and comms-logger patterns these are).
#[pyclass(frozen, module = "tuimon._core")]
struct TimerLines {
    rules: timers::TimerRules,
}

/// (per line: 0 nothing, 1 to the hook, 2 timers; per timer line: its rank tag, how many
/// timers and whether it is a comms-logger op; the names met, each once; per timer: its
/// name's index and its ms)
/// A block's timer names, numbered in order of first report.  The names last seen at each place
/// of a list are kept (a few: logs alternate a few kinds of lists, each repeating its names in the
/// same order), so most are found by a comparison or two, without a hash.
#[derive(Default)]
struct Names<'t> {
    index: HashMap<&'t str, u32>,
    by_place: Vec<[(&'t str, u32); PLACE_WAYS]>,
}

const PLACE_WAYS: usize = 4;
const PLACES: usize = 64;

impl<'t> Names<'t> {
    /// The number of `name`, the `place`th of its list (a new one goes into `names`).
    fn id(&mut self, names: &mut Vec<String>, place: usize, name: &'t str) -> u32 {
        if let Some(ways) = self.by_place.get(place) {
            if let Some(&(_, id)) = ways.iter().find(|(seen, id)| *id != u32::MAX && *seen == name) {
                return id;
            }
        }
        let next = self.index.len() as u32;
        let id = *self.index.entry(name).or_insert_with(|| {
            names.push(name.to_string());
            next
        });
        if place < PLACES {
            if self.by_place.len() <= place {
                self.by_place.resize(place + 1, [("", u32::MAX); PLACE_WAYS]);
            }
            let ways = &mut self.by_place[place];
            ways.rotate_right(1);  // (the oldest goes)
            ways[0] = (name, id);
        }
        id
    }
}

type TimerColumns = (Vec<u8>, Vec<Option<i64>>, Vec<u32>, Vec<u8>, Vec<String>, Vec<u32>, Vec<f64>);
/// `TimerColumns` as `TimerLines.read` hands them over: the counts (uint32), name indexes (uint32)
/// and ms (float64) as the bytes of arrays.
type TimerBytes = (Vec<u8>, Vec<Option<i64>>, Vec<u8>, Vec<u8>, Vec<String>, Vec<u8>, Vec<u8>);

/// A stamp shape's declaration (`parsers.timestamps.STAMP_SHAPE`).
fn stamp_shape(shape: &Bound<'_, PyDict>) -> PyResult<stamp::StampShape> {
    stamp::StampShape::new(&item::<String>(shape, "opener")?, &item::<String>(shape, "closer")?, item(shape, "label")?,
                           &item::<String>(shape, "between")?, &item::<String>(shape, "fraction")?,
                           item(shape, "digits")?)
        .map_err(pyo3::exceptions::PyValueError::new_err)
}

/// A format's line regex, compiled as the engine compiles them (multi-line: ^ and $ at every
/// line's ends), within bounds a user's regex cannot make the core pass.
fn compile_line(pattern: &str) -> PyResult<regex::Regex> {
    regex::RegexBuilder::new(pattern)
        .multi_line(true)
        .size_limit(8 << 20)
        .dfa_size_limit(8 << 20)
        .build()
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

fn compile(p: &str) -> PyResult<regex::Regex> {
    regex::Regex::new(p).map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))
}

/// A declaration's entry, typed; a missing one is a ValueError naming it.
fn item<'py, T: FromPyObjectOwned<'py>>(declaration: &Bound<'py, PyDict>, key: &str) -> PyResult<T> {
    match declaration.get_item(key)? {
        Some(v) => v.extract().map_err(Into::into),
        None => Err(pyo3::exceptions::PyValueError::new_err(format!("the declaration has no {key:?}"))),
    }
}

#[pymethods]
impl TimerLines {
    /// `declaration`: the reader's (`parsers.timers.CORE`): `list_anchor`, `minmax_shape`, `comm_op`,
    /// `to_hook`, `announce`, `rank_anchor` and `rank_tag` (see `timers::TimerRules`).
    #[new]
    fn new(declaration: &Bound<'_, PyDict>) -> PyResult<Self> {
        let rules = timers::TimerRules {
            list_anchor: item(declaration, "list_anchor")?,
            minmax: {
                let shape: std::collections::HashMap<String, String> = item(declaration, "minmax_shape")?;
                let part = |k: &str| shape.get(k).map(String::as_str).ok_or_else(|| {
                    pyo3::exceptions::PyValueError::new_err(format!("the minmax shape has no {k:?}"))
                });
                timers::MinMaxShape::new(part("leader")?, part("after")?, part("open")?, part("comma")?, part("close")?)
                    .map_err(pyo3::exceptions::PyValueError::new_err)?
            },
            comm_op: compile(&item::<String>(declaration, "comm_op")?)?,
            to_hook: item(declaration, "to_hook")?,
            announce: item(declaration, "announce")?,
            rank_anchor: item(declaration, "rank_anchor")?,
            rank_tag: compile(&item::<String>(declaration, "rank_tag")?)?,
        };
        Ok(TimerLines { rules })
    }

    /// The lines `(body start, end, kind)` of `text` (character offsets, ascending; kind 0
    /// a `time (ms)` line, 1 a `(min, max)` line), read as the hooks read them;
    /// `offload_said`: the run's offloading was announced (the first line of offloading
    /// timers goes to the hook, which announces it).
    fn read(&self, py: Python<'_>, text: &Bound<'_, PyString>, lines: Vec<(usize, usize, u8)>, offload_said: bool)
        -> PyResult<TimerBytes> {
        let index = index_of(text);
        let bodies = text::slices(text.to_str()?, index.as_deref(), lines.iter().map(|&(a, z, _)| (a, z)));
        let (verdicts, ranks, counts, comm, names, name_index, ms) = py.detach(|| {
            let mut out: TimerColumns = Default::default();
            let mut names = Names::default();
            let mut said = offload_said;
            for (body, &(_, _, kind)) in bodies.iter().zip(&lines) {
                let read = if kind == 0 {
                    self.rules.time_line(body, &mut said)
                } else {
                    self.rules.minmax_line(body, &mut said)
                };
                match read {
                    timers::Read::Nothing => out.0.push(0),
                    timers::Read::Hook => out.0.push(1),
                    timers::Read::Timers(pairs, rank) => {
                        out.0.push(2);
                        out.1.push(rank);
                        out.2.push(pairs.len() as u32);
                        out.3.push(0);
                        for (place, (name, ms)) in pairs.into_iter().enumerate() {
                            let id = names.id(&mut out.4, place, name);
                            out.5.push(id);
                            out.6.push(ms);
                        }
                    }
                    timers::Read::CommOp(op, ms, rank) => {
                        out.0.push(2);
                        out.1.push(rank);
                        out.2.push(1);
                        out.3.push(1);
                        let id = names.id(&mut out.4, 0, op);
                        out.5.push(id);
                        out.6.push(ms);
                    }
                }
            }
            out
        });
        // the frequent columns as the bytes of numpy arrays (a Python int or float each was most of a call)
        Ok((verdicts, ranks, ne_bytes(&counts, u32::to_ne_bytes), comm, names, ne_bytes(&name_index, u32::to_ne_bytes),
            ne_bytes(&ms, f64::to_ne_bytes)))
    }
}

/// `values` as the bytes of an array of them, in the machine's order.
fn ne_bytes<T: Copy, const N: usize>(values: &[T], bytes_of: fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| bytes_of(v)).collect()
}

/// Hugging Face Trainer's metrics dicts, `(body start, end)` of `text` (character offsets,
/// ASCII bodies), read as `HFTrainerParser._on_dict` reads them (`core/src/hf.rs`): per line
/// 1 (the hook reads it: a value only Python's `to_float` reads, a separator \x1c-\x1f) or
/// 3 (read); and per line read, its pairs as a dict of floats.
#[pyfunction]
fn hf_dicts<'py>(py: Python<'py>, text: &Bound<'py, PyString>, lines: Vec<(usize, usize)>)
    -> PyResult<(Vec<u8>, Vec<Bound<'py, PyDict>>)> {
    let (mut verdicts, mut rows) = (Vec::with_capacity(lines.len()), Vec::new());
    for body in text::slices(text.to_str()?, index_of(text).as_deref(), lines) {
        match hf::typed(body) {
            None => verdicts.push(1),
            Some(pairs) => {
                let dict = PyDict::new(py);
                for (k, v) in pairs {
                    dict.set_item(k, v)?;
                }
                verdicts.push(3);
                rows.push(dict);
            }
        }
    }
    Ok((verdicts, rows))
}

/// `json.dumps(obj, indent=indent)`'s text from the compact text of `json.dumps(obj,
/// separators=(",", ":"))` (`core/src/jsontext.rs`): Python encodes with an indent in pure Python.
#[pyfunction]
fn json_indent(py: Python<'_>, compact: &str, indent: usize) -> String {
    py.detach(|| jsontext::indent(compact, indent))
}

/// How deep a value of an event may nest and still be written here (an event's maps are one deep).
const JSON_DEPTH: usize = 16;

/// `value` as Python's `json` module writes what `parsers.events._jsonable` makes of it: None,
/// an exact str, bool or int, a float (numpy's float64 too: a subclass) with NaN and the
/// infinities as the strings `"nan"`, `"inf"`, `"-inf"`, a dict of str keys, a tuple or list.
/// False, with `out` part-written, for anything else (the caller writes the event in Python).
fn json_value(value: &Bound<'_, PyAny>, out: &mut String, depth: usize) -> PyResult<bool> {
    use std::fmt::Write;
    if value.is_none() {
        out.push_str("null");
    } else if value.is_exact_instance_of::<PyString>() {
        match value.cast::<PyString>()?.to_str() {
            Ok(text) => jsonline::string(text, out),
            Err(_) => return Ok(false), // (a lone surrogate: Python's escapes say it)
        }
    } else if value.is_exact_instance_of::<PyBool>() {
        out.push_str(if value.is_truthy()? { "true" } else { "false" });
    } else if value.is_exact_instance_of::<PyInt>() {
        match value.extract::<i64>() {
            Ok(n) => {
                let _ = write!(out, "{n}");
            }
            Err(_) => out.push_str(value.str()?.to_str()?), // (past 64 bits: int's own digits)
        }
    } else if let Ok(number) = value.cast::<PyFloat>() {
        let v = number.value();
        if v.is_nan() {
            out.push_str("\"nan\"");
        } else if v.is_infinite() {
            out.push_str(if v > 0.0 { "\"inf\"" } else { "\"-inf\"" });
        } else {
            jsonline::float_repr(v, out);
        }
    } else if depth >= JSON_DEPTH {
        return Ok(false);
    } else if let Ok(map) = value.cast::<PyDict>() {
        out.push('{');
        for (k, (key, item)) in map.iter().enumerate() {
            if !key.is_exact_instance_of::<PyString>() {
                return Ok(false); // (json writes other keys its own way)
            }
            if k > 0 {
                out.push_str(", ");
            }
            match key.cast::<PyString>()?.to_str() {
                Ok(text) => jsonline::string(text, out),
                Err(_) => return Ok(false),
            }
            out.push_str(": ");
            if !json_value(&item, out, depth + 1)? {
                return Ok(false);
            }
        }
        out.push('}');
    } else if value.cast::<PyTuple>().is_ok() || value.cast::<PyList>().is_ok() {
        out.push('[');
        for (k, item) in value.try_iter()?.enumerate() {
            if k > 0 {
                out.push_str(", ");
            }
            if !json_value(&item?, out, depth + 1)? {
                return Ok(false);
            }
        }
        out.push(']');
    } else {
        return Ok(false);
    }
    Ok(true)
}

/// `tuimon events`' lines (`commands.cli._json_lines`): each event whose type is one of `flat`
/// (those whose JSON is their fields, `parsers.events._to_dict`) as
/// `json.JSONEncoder(allow_nan=False, check_circular=False).encode({"schema_version": version,
/// **event.to_dict()})` and a newline, the same text; any other event, or one holding a value
/// `json_value` leaves, as `one(event)` writes it.
#[pyfunction]
fn json_lines(events: &Bound<'_, PyList>, version: i64, flat: &Bound<'_, PyTuple>, one: &Bound<'_, PyAny>)
    -> PyResult<String> {
    use std::fmt::Write;
    let py = events.py();
    // each type's keys, `, "name": ` a field (None: written by `one`); a few types a call
    let mut keys_of: Vec<(Bound<'_, PyType>, Option<Vec<String>>)> = Vec::new();
    let mut out = String::with_capacity(events.len() * 512);
    for event in events.iter() {
        let start = out.len();
        let kind = event.get_type();
        let at = match keys_of.iter().position(|(t, _)| t.is(&kind)) {
            Some(at) => at,
            None => {
                let mut keys = None;
                if flat.iter().any(|t| t.is(&kind)) {
                    let names: Vec<String> = kind.getattr(pyo3::intern!(py, "_fields"))?.extract()?;
                    // (a field named as a key written before it would replace that key's value in the dict)
                    if !names.iter().any(|n| n == "type" || n == "schema_version") {
                        keys = Some(names.iter().map(|n| {
                            let mut key = String::from(", ");
                            jsonline::string(n, &mut key);
                            key.push_str(": ");
                            key
                        }).collect());
                    }
                }
                keys_of.push((kind, keys));
                keys_of.len() - 1
            }
        };
        let mut written = false;
        if let (Some(keys), Ok(fields)) = (&keys_of[at].1, event.cast::<PyTuple>()) {
            let name = event.getattr(pyo3::intern!(py, "type"))?;
            if name.is_exact_instance_of::<PyString>() && fields.len() == keys.len() {
                let _ = write!(out, "{{\"schema_version\": {version}, \"type\": ");
                written = json_value(&name, &mut out, 0)?;
                for (key, value) in keys.iter().zip(fields.iter()) {
                    if !written {
                        break;
                    }
                    out.push_str(key);
                    written = json_value(&value, &mut out, 0)?;
                }
                out.push_str("}\n");
            }
        }
        if !written {
            out.truncate(start);
            out.push_str(one.call1((&event,))?.cast::<PyString>()?.to_str()?);
        }
    }
    Ok(out)
}

/// A report read: its tag's rank, its moment (`after N iterations`), and its values in the
/// declaration's key order.
type MemoryRow = (Option<i64>, String, Vec<Option<f64>>);

/// Key-table reports (Megatron's memory reports), by the declaration (`parsers.megatron.CORE_MEMORY`).
#[pyclass(frozen, module = "tuimon._core")]
struct MemoryLines {
    rules: memory::ReportRules,
}

#[pymethods]
impl MemoryLines {
    /// `declaration`: `pattern` (group 1 a rank tag's digits, group 2 the moment), `keys` (the
    /// values kept, as `norm_key` spells them, in the row's order), `rank_anchor`.
    #[new]
    fn new(declaration: &Bound<'_, PyDict>) -> PyResult<Self> {
        let rules = memory::ReportRules {
            pattern: compile(&item::<String>(declaration, "pattern")?)?,
            keys: item(declaration, "keys")?,
            rank_anchor: item(declaration, "rank_anchor")?,
        };
        Ok(MemoryLines { rules })
    }

    /// The lines `(body start, end)` of `text` (character offsets, ASCII bodies), read as
    /// `MegatronParser._on_memory` reads a line holding one report (`core/src/memory.rs`): per
    /// line 1 (the hook reads it) or 3 (read); per line read, its report.
    fn read(&self, text: &Bound<'_, PyString>, lines: Vec<(usize, usize)>) -> PyResult<(Vec<u8>, Vec<MemoryRow>)> {
        let (mut verdicts, mut rows) = (Vec::with_capacity(lines.len()), Vec::new());
        for body in text::slices(text.to_str()?, index_of(text).as_deref(), lines) {
            match memory::typed(&self.rules, body) {
                None => verdicts.push(1),
                Some(r) => {
                    verdicts.push(3);
                    rows.push((r.tag, r.label.to_string(), r.values));
                }
            }
        }
        Ok((verdicts, rows))
    }
}

/// Per line a verdict, and the values of each line read.
type FieldRows = (Vec<u8>, Vec<Vec<Option<fields::Value>>>);

/// Lines read by a declared regex into numbers (`parsers.megatron.CORE_EFFECTIVE`, `CORE_NUMWORKERS`,
/// `parsers.deepspeed.CORE_STEP`, ...): the rule kind "a line whose pattern's groups are numbers"
/// (see `fields`); everything it looks for is the declaration's.
#[pyclass(frozen, module = "tuimon._core")]
struct FieldLines {
    fields: fields::Fields,
}

/// A declaration's `pattern` and `groups` (`ints`: those of them read as ints).
fn reading(declaration: &Bound<'_, PyDict>) -> PyResult<fields::Reading> {
    let source = item::<String>(declaration, "pattern")?;
    let lines = optional::<bool>(declaration, "line")?.unwrap_or(false);
    let pattern = if lines { compile_line(&source)? } else { compile(&source)? };
    let numbers: Vec<usize> = item(declaration, "groups")?;
    let ints: Vec<usize> = optional(declaration, "ints")?.unwrap_or_default();
    let si: Vec<usize> = optional(declaration, "si")?.unwrap_or_default();
    if let Some(&g) = numbers.iter().chain(&ints).chain(&si).find(|&&g| g == 0 || g >= pattern.captures_len()) {
        return Err(pyo3::exceptions::PyValueError::new_err(format!("the pattern has no group {g}")));
    }
    let kind = |number: &usize| if ints.contains(number) { fields::Kind::Int }
                                else if si.contains(number) { fields::Kind::Si } else { fields::Kind::Float };
    let groups = numbers.iter().map(|number| fields::Group { number: *number, kind: kind(number) }).collect();
    Ok(if lines { fields::Reading::of_line(pattern, groups) } else { fields::Reading::new(pattern, groups) })
}

/// A declaration's optional entry, typed.
fn optional<'py, T: FromPyObjectOwned<'py>>(declaration: &Bound<'py, PyDict>, key: &str) -> PyResult<Option<T>> {
    match declaration.get_item(key)? {
        Some(v) if !v.is_none() => v.extract().map(Some).map_err(Into::into),
        _ => Ok(None),
    }
}

#[pymethods]
impl FieldLines {
    /// `declaration`: `pattern` (searched in a line's body, as `re.search` does; with `line`, a
    /// format's line regex, multi-line, searched in the whole line by `read_lines`) and `groups` (the
    /// numbers of the groups read, each as `to_float` reads it; those in `ints` as `to_int` does, those
    /// in `si` as a format's `si` type does); optionally `once` (a line holding a second match after
    /// the first is the hook's), `hook_if` (a pattern: a line it is found in goes to the hook), `tag` (a pattern
    /// whose group 1, an int, is read after the groups; None where it is not found) and `then` (a
    /// declaration of `pattern` and `groups` searched from the end of the match; its values come
    /// last, None where it is not found).
    #[new]
    fn new(declaration: &Bound<'_, PyDict>) -> PyResult<Self> {
        let main = reading(declaration)?;
        let hook_if = optional::<String>(declaration, "hook_if")?.map(|p| compile(&p)).transpose()?;
        let tag = optional::<String>(declaration, "tag")?.map(|p| compile(&p)).transpose()?;
        if tag.as_ref().is_some_and(|t| t.captures_len() < 2) {
            return Err(pyo3::exceptions::PyValueError::new_err("the tag has no group 1"));
        }
        let tag = tag.map(|pattern| fields::Reading::new(pattern, Vec::new()));
        let then = optional::<Bound<'_, PyDict>>(declaration, "then")?.map(|d| reading(&d)).transpose()?;
        let once = optional::<bool>(declaration, "once")?.unwrap_or(false);
        Ok(FieldLines { fields: fields::Fields { main, once, hook_if, tag, then } })
    }

    /// The lines `(body start, end)` of `text` (character offsets, plain ASCII bodies): per line
    /// 0 (no match: nothing), 1 (a value only Python reads: the hook reads the line) or 3 (read);
    /// per line read, its values (floats and ints; None: a group that took no part).
    fn read(&self, text: &Bound<'_, PyString>, lines: Vec<(usize, usize)>) -> PyResult<FieldRows> {
        let (mut verdicts, mut rows) = (Vec::with_capacity(lines.len()), Vec::new());
        let f = &self.fields;
        let mut scratches = f.scratches();
        for body in text::slices(text.to_str()?, index_of(text).as_deref(), lines) {
            match f.read(body, &mut scratches) {
                fields::Verdict::Nothing => verdicts.push(0),
                fields::Verdict::Hook => verdicts.push(1),
                fields::Verdict::Read(values) => {
                    verdicts.push(3);
                    rows.push(values);
                }
            }
        }
        Ok((verdicts, rows))
    }

    /// The lines starting at `starts` (character offsets of `text`, ascending), each searched to
    /// its newline (a data rule's lines: `tuimon.engine.data_rows`): per line 0 (no match), 1 (a
    /// value only Python reads, or a line that is not ASCII or holds \x1c-\x1f: Python's regex
    /// reads it) or 3 (read); and the values of the lines read, a column a value (as `read`
    /// orders a line's).
    fn read_lines(&self, py: Python<'_>, text: &Bound<'_, PyString>, starts: Vec<usize>) -> PyResult<FieldColumns> {
        let s = text.to_str()?;
        let bytes = s.as_bytes();
        let index = index_of(text);
        let mut cursor = Cursor::indexed(s, index.as_deref());
        let at: Vec<usize> = starts.iter().map(|&c| cursor.byte_of(c)).collect();
        let f = &self.fields;
        Ok(py.detach(|| {
            let mut verdicts = Vec::with_capacity(at.len());
            let mut columns: Vec<Vec<Option<fields::Value>>> = vec![Vec::new(); f.width()];
            let mut scratches = f.scratches();
            for &b in &at {
                let end = memchr::memchr(b'\n', &bytes[b..]).map_or(bytes.len(), |i| b + i);
                let line = &s[b..end];
                if !plain(line) {
                    verdicts.push(1);
                    continue;
                }
                match f.read(line, &mut scratches) {
                    fields::Verdict::Nothing => verdicts.push(0),
                    fields::Verdict::Hook => verdicts.push(1),
                    fields::Verdict::Read(values) => {
                        verdicts.push(3);
                        for (column, value) in columns.iter_mut().zip(values) {
                            column.push(value);
                        }
                    }
                }
            }
            (verdicts, columns)
        }))
    }
}

type FieldColumns = (Vec<u8>, Vec<Vec<Option<fields::Value>>>);

/// The median of each window of `window` values of `values` (the bytes of float64s, finite), and
/// with `mad` its median absolute deviation, as numpy's `np.median` gives them
/// (`core/src/rolling.rs`): bytes of float64s, one a window (`tuimon/figures/alerts.py`).
#[pyfunction]
fn rolling_median(py: Python<'_>, values: &[u8], window: usize, mad: bool) -> PyResult<(Vec<u8>, Vec<u8>)> {
    if !values.len().is_multiple_of(8) {
        return Err(pyo3::exceptions::PyValueError::new_err("values must be float64s"));
    }
    let numbers: Vec<f64> = values.chunks_exact(8).map(|b| f64::from_ne_bytes(b.try_into().expect("8 bytes"))).collect();
    let (meds, mads) = py.detach(|| rolling::rolling(&numbers, window, mad));
    let bytes = |v: Vec<f64>| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
    Ok((bytes(meds), bytes(mads)))
}

// A pyclass's Rust value lives inline in its Python object, whose memory Python's allocator
// aligns to 16 bytes: a field that asks for more (memchr's AVX2 finders hold 32-byte vectors) would
// be read by an aligned load from a misaligned address (a SIGSEGV met in template.rs).  Checked here
// when the core is built, not found in a crash.
const _: () = {
    const fn fits<T>() -> bool {
        std::mem::align_of::<T>() <= 16
    }
    assert!(fits::<Literals>() && fits::<Framing>() && fits::<Records>() && fits::<LineRegex>()
            && fits::<MetricLines>() && fits::<TimerLines>() && fits::<MemoryLines>() && fits::<FieldLines>(),
            "a pyclass holds a value aligned to more than 16 bytes: keep it behind a Box or a Vec");
};

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Literals>()?;
    m.add_class::<Records>()?;
    m.add_class::<LineRegex>()?;
    m.add_class::<TimerLines>()?;
    m.add_class::<MetricLines>()?;
    m.add_class::<MemoryLines>()?;
    m.add_class::<FieldLines>()?;
    m.add_class::<Framing>()?;
    m.add_function(wrap_pyfunction!(hf_dicts, m)?)?;
    m.add_function(wrap_pyfunction!(json_indent, m)?)?;
    m.add_function(wrap_pyfunction!(json_lines, m)?)?;
    m.add_function(wrap_pyfunction!(rolling_median, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // the sources it was built from (build.rs): a checkout's Python compares them with its core/src
    m.add("SOURCES", env!("TUIMON_CORE_SOURCES"))?;
    // `tuimon --version` names the build: a debug core reads several times slower
    m.add("BUILD", if cfg!(debug_assertions) { "debug" } else { "release" })?;
    Ok(())
}
