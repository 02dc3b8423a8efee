//! Unit tests that drive several CPUs of one [`TlbSystem`] from a single thread, with a
//! recording fake of the hardware (`fake.rs`). IPIs are delivered synchronously, so every
//! decision (who was interrupted, which flush ran, what CR3 load happened) is checked
//! exactly. Concurrency is the job of the host model in `mm/tests/`.

mod fake;

mod batching;
mod flushing;
mod global;
mod switching;
