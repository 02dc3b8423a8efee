//! Checks a trace against the Chrome Trace Event Format, as far as the
//! viewers rely on it, so that a file the runner writes opens as drawn:
//!
//! - the trace is an object with a `traceEvents` array (or that array);
//! - every event has `ph` (a phase this checker knows), a numeric `ts`, and
//!   integer `pid` and `tid`;
//! - a complete event (`X`) has a `name` and a `dur` of at least 0; a
//!   begin (`B`) is closed by an end (`E`) on its thread, in order;
//! - slices on one thread nest: two that overlap, one holds the other;
//! - every flow has one start (`s`) and one finish (`f`) with the same
//!   `id`, the finish not before the start.
//!
//! It reads JSON, not this crate's types, so it checks what was written.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// What a valid trace holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub events: usize,
    pub slices: usize,
    pub flows: usize,
    pub instants: usize,
}

/// The phases the checker knows: complete, begin, end, instant (both
/// spellings), flow start, step and finish, metadata, counter.
const PHASES: [&str; 10] = ["X", "B", "E", "i", "I", "s", "t", "f", "M", "C"];

/// Checks `trace`; the error lists every problem found (at most 20, then
/// how many more).
pub fn validate(trace: &Value) -> Result<Counts, Vec<String>> {
    let events = match trace {
        Value::Array(events) => events,
        Value::Object(object) => match object.get("traceEvents") {
            Some(Value::Array(events)) => events,
            _ => return Err(vec!["the object has no traceEvents array".to_string()]),
        },
        _ => return Err(vec!["a trace is an object or an array".to_string()]),
    };
    let mut checker = Checker::default();
    for (index, event) in events.iter().enumerate() {
        checker.event(index, event);
    }
    checker.finish();
    if checker.problems.is_empty() {
        Ok(checker.counts)
    } else {
        let more = checker.problems.len().saturating_sub(MAX_PROBLEMS);
        checker.problems.truncate(MAX_PROBLEMS);
        if more > 0 {
            checker.problems.push(format!("and {more} more problems"));
        }
        Err(checker.problems)
    }
}

const MAX_PROBLEMS: usize = 20;

/// A slice on a thread: begin and end in microseconds, and its event.
type Span = (f64, f64, usize);

/// A thread of the trace: its pid and tid.
type Thread = (i64, i64);

#[derive(Default)]
struct Checker {
    counts: Counts,
    problems: Vec<String>,
    /// Per (pid, tid): complete slices, and the open begins.
    spans: HashMap<Thread, Vec<Span>>,
    open: HashMap<Thread, Vec<(f64, usize)>>,
    /// Per flow id: starts and finishes, with their times.
    flow_starts: HashMap<String, Vec<f64>>,
    flow_finishes: HashMap<String, Vec<f64>>,
}

impl Checker {
    fn event(&mut self, index: usize, event: &Value) {
        self.counts.events += 1;
        let Some(object) = event.as_object() else {
            self.problems
                .push(format!("event {index} is not an object"));
            return;
        };
        let phase = object.get("ph").and_then(Value::as_str);
        let ts = object.get("ts").and_then(Value::as_f64);
        let pid = object.get("pid").and_then(Value::as_i64);
        let tid = object.get("tid").and_then(Value::as_i64);
        let (Some(phase), Some(ts), Some(pid), Some(tid)) = (phase, ts, pid, tid) else {
            self.problems.push(format!(
                "event {index} lacks one of ph, ts (a number), pid, tid (integers): {event}"
            ));
            return;
        };
        if !PHASES.contains(&phase) {
            self.problems
                .push(format!("event {index} has the unknown phase '{phase}'"));
            return;
        }
        let thread = (pid, tid);
        match phase {
            "X" => self.complete(index, object, thread, ts),
            "B" => self.open.entry(thread).or_default().push((ts, index)),
            "E" => self.end(index, thread, ts),
            "s" | "f" => match object.get("id").map(flow_id) {
                Some(id) => {
                    let flows = if phase == "s" {
                        &mut self.flow_starts
                    } else {
                        &mut self.flow_finishes
                    };
                    flows.entry(id).or_default().push(ts);
                }
                None => self.problems.push(format!("flow event {index} has no id")),
            },
            "i" | "I" => self.counts.instants += 1,
            _ => {}
        }
    }

    /// A complete event: a slice from `ts` for its `dur`.
    fn complete(&mut self, index: usize, object: &Map<String, Value>, thread: Thread, ts: f64) {
        let dur = object.get("dur").and_then(Value::as_f64);
        match dur {
            Some(dur) if dur >= 0.0 && object.get("name").is_some_and(Value::is_string) => {
                self.spans
                    .entry(thread)
                    .or_default()
                    .push((ts, ts + dur, index));
                self.counts.slices += 1;
            }
            _ => self.problems.push(format!(
                "complete event {index} needs a name and a dur of at least 0"
            )),
        }
    }

    /// An end event: the slice from its thread's innermost open begin.
    fn end(&mut self, index: usize, thread: Thread, ts: f64) {
        match self.open.entry(thread).or_default().pop() {
            Some((begin, begin_index)) if begin <= ts => {
                self.spans
                    .entry(thread)
                    .or_default()
                    .push((begin, ts, begin_index));
                self.counts.slices += 1;
            }
            Some((_, begin_index)) => self.problems.push(format!(
                "end event {index} comes before its begin (event {begin_index})"
            )),
            None => self
                .problems
                .push(format!("end event {index} closes no begin on its thread")),
        }
    }

    fn finish(&mut self) {
        for (thread, open) in &self.open {
            for (_, index) in open {
                self.problems.push(format!(
                    "begin event {index} on pid {} tid {} is never ended",
                    thread.0, thread.1
                ));
            }
        }
        for spans in self.spans.values_mut() {
            check_nesting(spans, &mut self.problems);
        }
        self.check_flows();
    }

    fn check_flows(&mut self) {
        for (id, starts) in &self.flow_starts {
            match (
                starts.as_slice(),
                self.flow_finishes.get(id).map(Vec::as_slice),
            ) {
                ([start], Some([finish])) if start <= finish => self.counts.flows += 1,
                ([_], Some([_])) => self
                    .problems
                    .push(format!("flow {id} finishes before it starts")),
                ([_], None) => self.problems.push(format!("flow {id} never finishes")),
                _ => self.problems.push(format!(
                    "flow {id} does not have exactly one start and one finish"
                )),
            }
        }
        for id in self.flow_finishes.keys() {
            if !self.flow_starts.contains_key(id) {
                self.problems
                    .push(format!("flow {id} finishes but never starts"));
            }
        }
    }
}

/// A flow's id as text (the format allows numbers and strings).
fn flow_id(id: &Value) -> String {
    match id {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Slices of one thread must nest: sorted by begin (longest first), each
/// lies inside every slice still open at its begin.
fn check_nesting(spans: &mut [Span], problems: &mut Vec<String>) {
    spans.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
    let mut open: Vec<Span> = Vec::new();
    for &span in spans.iter() {
        while open.last().is_some_and(|outer| outer.1 <= span.0) {
            open.pop();
        }
        if let Some(outer) = open.last()
            && span.1 > outer.1
        {
            problems.push(format!(
                "slices {} and {} overlap on one thread without nesting",
                outer.2, span.2
            ));
        }
        open.push(span);
    }
}

#[cfg(test)]
mod tests;
