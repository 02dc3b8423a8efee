//! Waiting for a run to end, within its limits.
//!
//! Every run ends one of three ways: the emulator's session says it ended
//! (QEMU exited, Bochs printed the kernel's closing line or died), the run
//! outlived [`Config::timeout`], or the kernel, once entered, stayed silent
//! for [`Config::stall_timeout`]. The last two are judged here, the same for
//! every emulator; a run waiting for a debugger (`gdb`) has neither limit.

use std::time::{Duration, Instant};

use super::{Config, Outcome, serial::Serial};

/// How often the limits are checked.
const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Waits until `wait` reports how the run ended, or a limit of `config`
/// ends it. `wait` waits up to the interval it is given for the emulator
/// to end the run; `start` is when the emulator started. The caller stops
/// the emulator afterwards, whichever way the run ended.
pub fn watch(
    config: &Config,
    start: Instant,
    serial: &Serial,
    mut wait: impl FnMut(Duration) -> Option<Outcome>,
) -> Outcome {
    loop {
        if let Some(outcome) = wait(POLL_INTERVAL) {
            return outcome;
        }
        if config.gdb {
            continue;
        }
        if start.elapsed() >= config.timeout {
            return Outcome::Timeout(config.timeout);
        }
        if let (Some(limit), Some(silence)) = (config.stall_timeout, serial.silence())
            && silence >= limit
        {
            return Outcome::Stalled(limit);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::Echo;

    /// A session that never ends the run by itself.
    fn never(_: Duration) -> Option<Outcome> {
        None
    }

    #[test]
    fn the_session_ending_the_run_wins() {
        let config = Config::default().timeout(Duration::ZERO);
        let serial = Serial::new(Instant::now(), Echo::Nothing);
        let outcome = watch(&config, Instant::now(), &serial, |_| Some(Outcome::Failure));
        assert_eq!(outcome, Outcome::Failure);
    }

    #[test]
    fn a_run_past_its_timeout_is_ended() {
        let config = Config::default().timeout(Duration::ZERO);
        let serial = Serial::new(Instant::now(), Echo::Nothing);
        let outcome = watch(&config, Instant::now(), &serial, never);
        assert_eq!(outcome, Outcome::Timeout(Duration::ZERO));
    }

    #[test]
    fn silence_ends_a_run_only_after_the_kernel_entered() {
        let config = Config::default().stall_timeout(Duration::ZERO);
        let serial = Serial::new(Instant::now(), Echo::Nothing);
        let mut polls = 0;
        let outcome = watch(&config, Instant::now(), &serial, |_| {
            polls += 1;
            if polls == 3 {
                serial.push(b"shootdown: kernel entered\n");
            }
            None
        });
        assert_eq!((outcome, polls), (Outcome::Stalled(Duration::ZERO), 3));
    }

    #[test]
    fn a_run_waiting_for_a_debugger_has_no_limits() {
        let config = Config {
            gdb: true,
            ..Config::default().timeout(Duration::ZERO)
        };
        let serial = Serial::new(Instant::now(), Echo::Nothing);
        let mut polls = 0;
        let outcome = watch(&config, Instant::now(), &serial, |_| {
            polls += 1;
            (polls == 5).then_some(Outcome::Success)
        });
        assert_eq!((outcome, polls), (Outcome::Success, 5));
    }
}
