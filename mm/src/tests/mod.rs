//! Unit tests that drive several CPUs of one [`TlbSystem`] from a single thread, with a
//! recording fake of the hardware (`fake.rs`). IPIs are delivered synchronously, so every
//! decision (who was interrupted, which flush ran, what CR3 load happened) is checked
//! exactly. Concurrency is the job of the host model in `mm/tests/`.

mod fake;

mod batching;
mod flushing;
mod global;
mod invlpgb_sequence;
mod lazy;
mod switching;

/// The kernel keeps these in statics and passes requests between CPUs.
#[test]
fn shared_types_are_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    shared::<crate::TlbSystem<'static>>();
    shared::<crate::AddressSpaceTlb>();
    shared::<crate::CpuTlbState>();
    shared::<crate::FlushRequest<'static>>();
    shared::<crate::AtomicCpuSet>();
}
