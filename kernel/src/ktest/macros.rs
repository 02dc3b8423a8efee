//! Assertion macros for in-kernel tests.
//!
//! Unlike `assert!`, these do not panic: they return a
//! [`TestFailure`](crate::framework::TestFailure) from the test function, so one failing
//! test does not end the run and the remaining tests still report.

/// Fails the test unless `condition` holds; an optional message follows.
#[macro_export]
macro_rules! check {
    ($condition:expr $(,)?) => {
        $crate::check!($condition, "{} was false", stringify!($condition))
    };
    ($condition:expr, $($message:tt)+) => {
        if !$condition {
            return Err($crate::framework::TestFailure {
                message: alloc::format!($($message)+),
                file: file!(),
                line: line!(),
            });
        }
    };
}

/// Fails the test unless `left == right`, showing both values.
#[macro_export]
macro_rules! check_eq {
    ($left:expr, $right:expr $(,)?) => {
        $crate::check_eq!($left, $right, "")
    };
    ($left:expr, $right:expr, $($context:tt)+) => {
        match (&$left, &$right) {
            (left, right) => $crate::check!(
                *left == *right,
                "{} == {}: left {:?}, right {:?} {}",
                stringify!($left),
                stringify!($right),
                left,
                right,
                alloc::format!($($context)+)
            ),
        }
    };
}

/// Evaluates to the value inside `Some`, or fails the test with the message.
#[macro_export]
macro_rules! require_some {
    ($option:expr, $($message:tt)+) => {
        match $option {
            Some(value) => value,
            None => {
                return Err($crate::framework::TestFailure {
                    message: alloc::format!($($message)+),
                    file: file!(),
                    line: line!(),
                })
            }
        }
    };
}

/// Evaluates to the value inside `Ok`, or fails the test with the error.
#[macro_export]
macro_rules! require_ok {
    ($result:expr) => {
        match $result {
            Ok(value) => value,
            Err(error) => {
                return Err($crate::framework::TestFailure {
                    message: alloc::format!("{} failed: {}", stringify!($result), error),
                    file: file!(),
                    line: line!(),
                })
            }
        }
    };
}
