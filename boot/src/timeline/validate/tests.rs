use super::*;
use serde_json::json;

fn problems(trace: Value) -> Vec<String> {
    validate(&trace).expect_err("the trace is broken")
}

fn slice(tid: i64, ts: f64, dur: f64) -> Value {
    json!({"ph": "X", "name": "s", "pid": 1, "tid": tid, "ts": ts, "dur": dur})
}

#[test]
fn a_good_trace_is_counted() {
    let trace = json!({"traceEvents": [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 0, "ts": 0, "args": {"name": "CPU 0"}},
        slice(0, 1.0, 10.0),
        slice(0, 2.0, 3.0),
        slice(0, 5.0, 0.0),
        slice(1, 4.0, 2.0),
        {"ph": "B", "name": "b", "pid": 1, "tid": 1, "ts": 7.0},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 8.0},
        {"ph": "s", "id": 1, "name": "ipi", "pid": 1, "tid": 0, "ts": 2.0},
        {"ph": "f", "bp": "e", "id": 1, "name": "ipi", "pid": 1, "tid": 1, "ts": 4.0},
        {"ph": "i", "s": "t", "name": "INVLPGB", "pid": 1, "tid": 0, "ts": 3.0},
    ]});
    assert_eq!(
        validate(&trace),
        Ok(Counts {
            events: 10,
            slices: 5,
            flows: 1,
            instants: 1
        })
    );
}

#[test]
fn every_event_needs_ph_ts_pid_and_tid() {
    for missing in ["ph", "ts", "pid", "tid"] {
        let mut event = slice(0, 1.0, 1.0);
        event.as_object_mut().unwrap().remove(missing);
        let found = problems(json!([event]));
        assert!(
            found[0].contains("lacks one of ph, ts"),
            "{missing}: {found:?}"
        );
    }
    assert!(
        problems(json!([{"ph": "Q", "pid": 1, "tid": 0, "ts": 0}]))[0]
            .contains("unknown phase 'Q'")
    );
    assert!(problems(json!({"events": []}))[0].contains("no traceEvents"));
}

#[test]
fn slices_must_nest() {
    let found = problems(json!([slice(0, 1.0, 5.0), slice(0, 3.0, 5.0)]));
    assert_eq!(
        found,
        ["slices 0 and 1 overlap on one thread without nesting"]
    );
    // The same times on two threads are fine.
    assert!(validate(&json!([slice(0, 1.0, 5.0), slice(1, 3.0, 5.0)])).is_ok());
    assert!(problems(json!([slice(0, 1.0, -1.0)]))[0].contains("dur of at least 0"));
    let unclosed = json!([{"ph": "B", "name": "b", "pid": 1, "tid": 0, "ts": 1.0}]);
    assert!(problems(unclosed)[0].contains("never ended"));
    let stray_end = json!([{"ph": "E", "pid": 1, "tid": 0, "ts": 1.0}]);
    assert!(problems(stray_end)[0].contains("closes no begin"));
}

#[test]
fn flows_must_begin_and_end() {
    let start = |id: i64, ts: f64| json!({"ph": "s", "id": id, "pid": 1, "tid": 0, "ts": ts});
    let finish = |id: i64, ts: f64| json!({"ph": "f", "id": id, "pid": 1, "tid": 1, "ts": ts});
    assert_eq!(problems(json!([start(1, 1.0)])), ["flow 1 never finishes"]);
    assert_eq!(
        problems(json!([finish(2, 1.0)])),
        ["flow 2 finishes but never starts"]
    );
    assert_eq!(
        problems(json!([start(3, 5.0), finish(3, 1.0)])),
        ["flow 3 finishes before it starts"]
    );
    assert_eq!(
        problems(json!([start(4, 1.0), start(4, 2.0), finish(4, 3.0)])),
        ["flow 4 does not have exactly one start and one finish"]
    );
    assert!(problems(json!([{"ph": "s", "pid": 1, "tid": 0, "ts": 1.0}]))[0].contains("no id"));
}

#[test]
fn many_problems_are_cut_short() {
    let events: Vec<Value> = (0..30).map(|_| json!({"ph": "X"})).collect();
    let found = problems(Value::Array(events));
    assert_eq!(found.len(), MAX_PROBLEMS + 1);
    assert_eq!(found.last().unwrap(), "and 10 more problems");
}
