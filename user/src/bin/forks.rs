//! What `fork` promises, case by case: `forks`.
//!
//! Prints `PASS <case>` or `FAIL <case>: <what went wrong>` for each and
//! exits with the number of failures (0: all passed). Each case forks a
//! child that checks its side and reports through its exit code (0: as
//! expected) or through a `MAP_SHARED` page, while the parent checks its
//! own.

#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU64, Ordering};

use user::{
    Errno,
    abi::{MAX_PROCESSES, PAGE_SIZE, Prot, advice},
    println, sys, thread,
};

user::entry!(main);

const PAGE: usize = PAGE_SIZE as usize;

/// One case: `Err` says what went wrong.
type Case = fn() -> Result<(), &'static str>;

/// A page of this process, viewed as `u64`s.
#[derive(Clone, Copy)]
struct Page(*mut u8);

impl Page {
    fn private() -> Self {
        Self(sys::mmap_anonymous(PAGE, Prot::READ | Prot::WRITE).expect("mmap a private page"))
    }

    fn shared() -> Self {
        Self(sys::mmap_shared(PAGE, Prot::READ | Prot::WRITE).expect("mmap a shared page"))
    }

    /// The `index`th word. Pages made by this program stay mapped and are
    /// only ever used through these atomics.
    fn word(self, index: usize) -> &'static AtomicU64 {
        assert!(index < PAGE / 8);
        // SAFETY: an aligned word of a live mapping of ours (see above);
        // every bit pattern is a valid `AtomicU64`.
        unsafe { &*self.0.cast::<AtomicU64>().add(index) }
    }

    fn get(self) -> u64 {
        self.word(0).load(Ordering::Acquire)
    }

    fn set(self, value: u64) {
        self.word(0).store(value, Ordering::Release);
    }

    fn madvise(self, advice: u64) -> Result<(), Errno> {
        // SAFETY: the page holds only test values, which may be discarded
        // or paged out at any time.
        unsafe { sys::madvise(self.0, PAGE, advice) }
    }
}

/// Forks a child that runs `child` and exits with what it returns; returns
/// the child's pid to the parent.
fn fork_child(child: impl FnOnce() -> i32) -> u64 {
    // SAFETY: the cases fork from the main thread; a child touches only its
    // own copies and shared pages, never something another thread of the
    // parent was in the middle of.
    match unsafe { sys::fork() } {
        Ok(0) => sys::exit(child()),
        Ok(pid) => pid,
        Err(error) => panic!("fork failed: {error:?}"),
    }
}

/// Waits for `pid`, expecting exit code 0.
fn child_ok(pid: u64) -> Result<(), &'static str> {
    match sys::wait(pid) {
        Ok(0) => Ok(()),
        Ok(_) => Err("the child saw something wrong (non-zero exit code)"),
        Err(_) => Err("wait failed"),
    }
}

/// Spins (yielding) until `word` holds `value`.
fn await_value(word: &AtomicU64, value: u64) {
    while word.load(Ordering::Acquire) != value {
        let _ = sys::yield_now();
    }
}

fn returns_pid_and_zero() -> Result<(), &'static str> {
    let me = sys::getpid().map_err(|_| "getpid")?;
    let pid = fork_child(|| 42);
    if pid == 0 || pid == me {
        return Err("the parent did not get a new pid");
    }
    match sys::wait(pid) {
        Ok(42) => Ok(()),
        _ => Err("wait did not return the child's exit code 42"),
    }
}

fn child_sees_a_copy() -> Result<(), &'static str> {
    let page = Page::private();
    page.set(7);
    let pid = fork_child(|| {
        if page.get() != 7 {
            return 1;
        }
        page.set(8);
        i32::from(page.get() != 8)
    });
    child_ok(pid)?;
    if page.get() != 7 {
        return Err("the child's write reached the parent");
    }
    Ok(())
}

fn parent_writes_stay_in_the_parent() -> Result<(), &'static str> {
    let page = Page::private();
    let sync = Page::shared();
    page.set(1);
    let pid = fork_child(|| {
        await_value(sync.word(0), 1);
        i32::from(page.get() != 1)
    });
    page.set(2);
    sync.set(1);
    child_ok(pid)?;
    if page.get() != 2 {
        return Err("the parent lost its own write");
    }
    Ok(())
}

fn shared_pages_are_shared() -> Result<(), &'static str> {
    let pages = sys::mmap_shared(2 * PAGE, Prot::READ | Prot::WRITE).map_err(|_| "mmap")?;
    let touched = Page(pages);
    let untouched = Page(pages.wrapping_add(PAGE));
    touched.set(5);
    let pid = fork_child(|| {
        if touched.get() != 5 {
            return 1;
        }
        touched.set(6);
        // First touched after the fork, by the child.
        untouched.set(9);
        0
    });
    child_ok(pid)?;
    if touched.get() != 6 {
        return Err("the child's write to a shared page did not reach the parent");
    }
    if untouched.get() != 9 {
        return Err("a shared page first touched by the child is not the parent's");
    }
    Ok(())
}

fn swapped_pages_are_copied() -> Result<(), &'static str> {
    let page = Page::private();
    page.set(11);
    page.madvise(advice::PAGEOUT)
        .map_err(|_| "PAGEOUT of a private page")?;
    let pid = fork_child(|| {
        if page.get() != 11 {
            return 1;
        }
        page.set(12);
        0
    });
    child_ok(pid)?;
    if page.get() != 11 {
        return Err("the parent's swapped page changed");
    }
    Ok(())
}

fn paging_out_a_copy_on_write_page_keeps_both_copies() -> Result<(), &'static str> {
    let page = Page::private();
    let sync = Page::shared();
    page.set(21);
    let pid = fork_child(|| {
        await_value(sync.word(0), 1);
        if page.get() != 21 {
            return 1;
        }
        page.set(22);
        0
    });
    // Still shared with the child: it stays resident, and the call works.
    page.madvise(advice::PAGEOUT)
        .map_err(|_| "PAGEOUT of a copy-on-write page failed")?;
    page.set(23);
    sync.set(1);
    child_ok(pid)?;
    if page.get() != 23 {
        return Err("the parent's page changed");
    }
    Ok(())
}

/// A `MAP_SHARED` page that the child maps too stays resident when the
/// parent pages it out, and both keep seeing each other's writes; once the
/// child is gone it goes to swap, and a child forked then reads it back.
fn paging_out_shared_memory_keeps_it_shared() -> Result<(), &'static str> {
    let page = Page::shared();
    let sync = Page::shared();
    page.set(51);
    let pid = fork_child(|| {
        if page.get() != 51 {
            return 1;
        }
        sync.set(1);
        await_value(sync.word(0), 2);
        i32::from(page.get() != 52)
    });
    await_value(sync.word(0), 1);
    page.madvise(advice::PAGEOUT)
        .map_err(|_| "PAGEOUT of a page the child maps too failed")?;
    page.set(52);
    sync.set(2);
    child_ok(pid)?;
    page.madvise(advice::PAGEOUT)
        .map_err(|_| "PAGEOUT of a page only the parent maps failed")?;
    let pid = fork_child(|| i32::from(page.get() != 52));
    child_ok(pid).map_err(|_| "a child did not read the shared page back from swap")?;
    if page.get() != 52 {
        return Err("the parent did not read the shared page back from swap");
    }
    Ok(())
}

fn mprotect_keeps_copy_on_write() -> Result<(), &'static str> {
    let page = Page::private();
    let sync = Page::shared();
    page.set(31);
    // SAFETY: the page holds only test values.
    unsafe { sys::mprotect(page.0, PAGE, Prot::READ) }.map_err(|_| "mprotect read-only")?;
    let pid = fork_child(|| {
        await_value(sync.word(0), 1);
        i32::from(page.get() != 31)
    });
    // Writable again while still shared with the child: the write must copy.
    // SAFETY: as above.
    unsafe { sys::mprotect(page.0, PAGE, Prot::READ | Prot::WRITE) }
        .map_err(|_| "mprotect read-write")?;
    page.set(32);
    sync.set(1);
    child_ok(pid)?;
    if page.get() != 32 {
        return Err("the parent's write was lost");
    }
    Ok(())
}

fn kernel_writes_copy_too() -> Result<(), &'static str> {
    let page = Page::private();
    page.set(u64::MAX);
    let pid = fork_child(|| {
        // The kernel writes the counters into the child's copy.
        // SAFETY: a whole page of ours, used only as bytes here.
        let buffer = unsafe { core::slice::from_raw_parts_mut(page.0, 64) };
        match sys::tlb_stats(buffer) {
            Ok(_) => i32::from(page.get() == u64::MAX),
            Err(_) => 1,
        }
    });
    child_ok(pid)?;
    if page.get() != u64::MAX {
        return Err("a kernel write into the child's copy reached the parent");
    }
    Ok(())
}

fn discarding_in_the_child_keeps_the_parents_page() -> Result<(), &'static str> {
    let page = Page::private();
    page.set(41);
    let pid = fork_child(|| {
        if page.madvise(advice::DONTNEED).is_err() || page.get() != 0 {
            return 1;
        }
        0
    });
    child_ok(pid)?;
    if page.get() != 41 {
        return Err("the child's DONTNEED reached the parent");
    }
    Ok(())
}

fn the_child_has_one_thread() -> Result<(), &'static str> {
    let stop = Page::shared().word(0);
    let sibling = thread::spawn(move || {
        await_value(stop, 1);
        0
    })
    .map_err(|_| "spawning a thread")?;
    let tid = sibling.tid();
    if sys::affinity_of(tid).is_err() {
        return Err("the parent cannot name its own thread");
    }
    let pid = fork_child(|| match sys::affinity_of(tid) {
        Err(Errno::Srch) => 0,
        _ => 1,
    });
    let child = child_ok(pid);
    stop.store(1, Ordering::Release);
    sibling.join().map_err(|_| "joining the thread")?;
    child.map_err(|_| "the child could name a thread of its parent")
}

/// Another thread of the parent keeps writing a private page on another
/// CPU while the main thread forks: `fork` write-protects the page, and the
/// flush that goes with it must reach that CPU, or its writes would land in
/// the frame that is now the child's too.
fn writes_on_other_cpus_after_fork_stay_in_the_parent() -> Result<(), &'static str> {
    let page = Page::private();
    let control = Page::shared();
    let (running, stop) = (control.word(0), control.word(1));
    page.set(1);
    let counter = page.word(0);
    let writer = thread::spawn(move || {
        if sys::set_affinity(1).is_err() {
            running.store(u64::MAX, Ordering::Release);
            return 0;
        }
        running.store(1, Ordering::Release);
        let mut value = 1;
        while stop.load(Ordering::Acquire) == 0 {
            value += 1;
            counter.store(value, Ordering::Relaxed);
        }
        0
    })
    .map_err(|_| "spawning the writer")?;
    let _ = sys::set_affinity(0);
    while running.load(Ordering::Acquire) == 0 {
        let _ = sys::yield_now();
    }
    let outcome = if running.load(Ordering::Acquire) == u64::MAX {
        // One CPU: the writer cannot run beside the fork.
        Ok(())
    } else {
        let pid = fork_child(|| {
            let snapshot = page.get();
            for _ in 0..64 {
                let _ = sys::yield_now();
                if page.get() != snapshot {
                    return 1;
                }
            }
            0
        });
        child_ok(pid).map_err(|_| "the child's copy changed after the fork")
    };
    stop.store(1, Ordering::Release);
    writer.join().map_err(|_| "joining the writer")?;
    let _ = sys::set_affinity(user::abi::ANY_CPU);
    outcome
}

fn a_fork_bomb_ends_in_eagain() -> Result<(), &'static str> {
    let release = Page::shared();
    let mut children = [0u64; MAX_PROCESSES];
    let mut count = 0;
    let outcome = loop {
        // SAFETY: each child only waits on the shared page and exits.
        match unsafe { sys::fork() } {
            Ok(0) => {
                await_value(release.word(0), 1);
                sys::exit(0);
            }
            Ok(pid) if count < children.len() => {
                children[count] = pid;
                count += 1;
            }
            Ok(_) => break Err("more processes than the limit"),
            Err(Errno::Again) => break Ok(()),
            Err(_) => break Err("fork failed with an error other than EAGAIN"),
        }
    };
    release.set(1);
    for &pid in &children[..count] {
        child_ok(pid)?;
    }
    outcome?;
    // Every place is free again.
    child_ok(fork_child(|| 0))
}

fn main(_args: &str) -> i32 {
    let cases: [(&str, Case); 13] = [
        ("fork/returns-pid-and-zero", returns_pid_and_zero),
        ("fork/child-sees-a-copy", child_sees_a_copy),
        (
            "fork/parent-writes-stay-in-the-parent",
            parent_writes_stay_in_the_parent,
        ),
        ("fork/shared-pages-are-shared", shared_pages_are_shared),
        ("fork/swapped-pages-are-copied", swapped_pages_are_copied),
        (
            "fork/pageout-of-a-copy-on-write-page-keeps-both-copies",
            paging_out_a_copy_on_write_page_keeps_both_copies,
        ),
        (
            "fork/pageout-of-shared-memory-keeps-it-shared",
            paging_out_shared_memory_keeps_it_shared,
        ),
        (
            "fork/mprotect-keeps-copy-on-write",
            mprotect_keeps_copy_on_write,
        ),
        ("fork/kernel-writes-copy-too", kernel_writes_copy_too),
        (
            "fork/discarding-in-the-child-keeps-the-parents-page",
            discarding_in_the_child_keeps_the_parents_page,
        ),
        ("fork/the-child-has-one-thread", the_child_has_one_thread),
        (
            "fork/writes-on-other-cpus-after-fork-stay-in-the-parent",
            writes_on_other_cpus_after_fork_stay_in_the_parent,
        ),
        (
            "fork/a-fork-bomb-ends-in-eagain",
            a_fork_bomb_ends_in_eagain,
        ),
    ];
    let mut failures = 0;
    for (name, case) in cases {
        match case() {
            Ok(()) => println!("PASS {name}"),
            Err(what) => {
                println!("FAIL {name}: {what}");
                failures += 1;
            }
        }
    }
    failures
}
