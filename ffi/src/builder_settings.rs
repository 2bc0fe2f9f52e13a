//! How the builder threads of every router of the process are scheduled
//! (`atc_builder_threads`, `atc_builder_priority`, `atc_builder_schedule`): process-wide
//! settings, read when a router's first background sync makes its builder ([`configure`]).
//!
//! By default the thread that builds runs under `SCHED_IDLE`, taking only the CPU requests
//! leave, and a second one at the caller's priority takes a build over once a version has
//! waited `boost_after_ms`. On Linux a policy and a nice value belong to a thread, so the
//! worker that routes requests keeps its own.

use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

use atc_router::{Builder, Lane};

use crate::ATC_OK;

/// How many nice levels below the thread that starts it a builder thread at normal priority runs
/// (see `atc_builder_priority`).
static BUILDER_NICE: AtomicI32 = AtomicI32::new(ATC_BUILDER_NICE_DEFAULT);

/// The default of `atc_builder_priority`: the lowest nice level. A thread at nice 19 still gets
/// its CFS share when requests keep every CPU busy (so a waiting version is built), but a
/// worker at nice 0 outweighs it about 70 to 1 and preempts it on wakeup.
pub const ATC_BUILDER_NICE_DEFAULT: i32 = 19;

/// `atc_builder_schedule`: the thread that builds runs under `SCHED_IDLE` (the default).
pub const ATC_BUILDER_IDLE: i32 = 0;
/// `atc_builder_schedule`: the thread that builds runs at the priority of the thread that
/// started it, less `atc_builder_priority`'s nice levels.
pub const ATC_BUILDER_NORMAL: i32 = 1;

/// The default of `atc_builder_schedule`'s `boost_after_ms`.
pub const ATC_BUILDER_BOOST_AFTER_MS_DEFAULT: u32 = 3000;

/// Most threads a build may use (`atc_builder_threads`).
pub const ATC_BUILDER_THREADS_MAX: i32 = 64;

/// `atc_builder_threads`: how many threads a fresh build may use.
static BUILDER_THREADS: AtomicI32 = AtomicI32::new(1);

/// The policy of `atc_builder_schedule`.
static BUILDER_POLICY: AtomicI32 = AtomicI32::new(ATC_BUILDER_IDLE);
/// `boost_after_ms` of `atc_builder_schedule` (0: never).
static BUILDER_BOOST_MS: AtomicU32 = AtomicU32::new(ATC_BUILDER_BOOST_AFTER_MS_DEFAULT);

/// Run first on every builder thread, with its lane: the background lane goes under
/// `SCHED_IDLE` (policy `ATC_BUILDER_IDLE`), or `BUILDER_NICE` levels down; the boosted lane
/// `BUILDER_NICE` levels down. On Linux a policy and a nice value belong to a thread, so the
/// worker that routes requests keeps its own.
fn set_priority(lane: Lane) {
    if lane == Lane::Background && BUILDER_POLICY.load(Ordering::Relaxed) == ATC_BUILDER_IDLE {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: sched_setscheduler(0, ...) changes only the calling thread's policy; `param`
        // is valid for the call. Lowering a thread to SCHED_IDLE needs no privilege; a failure
        // leaves the thread at its priority.
        unsafe {
            libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
        }
        return;
    }
    let delta = BUILDER_NICE.load(Ordering::Relaxed);
    if delta > 0 {
        // SAFETY: nice(2) takes an integer and changes only the calling thread's priority; a
        // failure (it cannot fail when lowering) leaves the priority as it was.
        unsafe {
            libc::nice(delta);
        }
    }
}

/// Run first on every helper thread a build starts (`atc_builder_threads`), with the lane it
/// helps. The lane's thread starts it, after `set_priority` ran there, and Linux passes the
/// policy and the nice value on to a new thread, so the helper runs as its lane already;
/// `set_priority` again would lower the nice value a second step. Only the policy, an absolute
/// value, is set again, so that a helper of the idle lane is under `SCHED_IDLE` whatever it
/// inherited.
fn set_helper_priority(lane: Lane) {
    if lane == Lane::Background && BUILDER_POLICY.load(Ordering::Relaxed) == ATC_BUILDER_IDLE {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: as in `set_priority`: only the calling thread's policy changes.
        unsafe {
            libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
        }
    }
}

/// Sets how many threads (1, the default, to `ATC_BUILDER_THREADS_MAX`) a fresh build of the
/// routers whose builder starts from now on may use, for the whole process: a background sync of
/// a list most of which is new (a first load above all) prepares its routes and builds its index
/// on the builder thread and up to `threads - 1` helpers, started for the build and ended with
/// it, each at the priority of the builder thread it helps (under `SCHED_IDLE` with it). The
/// table built is exactly the one one thread builds; it is ready sooner where CPUs are idle.
/// Returns the previous value, or `ATC_ERR_INVALID` (nothing changed) outside 1 to
/// `ATC_BUILDER_THREADS_MAX`.
#[no_mangle]
pub extern "C" fn atc_builder_threads(threads: i32) -> i32 {
    if !(1..=ATC_BUILDER_THREADS_MAX).contains(&threads) {
        return crate::ATC_ERR_INVALID;
    }
    BUILDER_THREADS.swap(threads, Ordering::Relaxed)
}

/// Sets how many nice levels (0 to 19) below the thread that starts them the builder threads
/// that run at normal priority (the boosted lane, and every build under `ATC_BUILDER_NORMAL`)
/// started from now on run (default `ATC_BUILDER_NICE_DEFAULT`), for the whole process. 0
/// keeps the starting thread's priority. Returns the previous value, or `ATC_ERR_INVALID`
/// (nothing changed) outside 0 to 19.
#[no_mangle]
pub extern "C" fn atc_builder_priority(nice: i32) -> i32 {
    if !(0..=19).contains(&nice) {
        return crate::ATC_ERR_INVALID;
    }
    BUILDER_NICE.swap(nice, Ordering::Relaxed)
}

/// Sets, for the whole process and the builders whose threads start from now on, how builds
/// are scheduled. `policy` `ATC_BUILDER_IDLE` (the default): the thread that builds runs under
/// Linux's `SCHED_IDLE`, so that it takes only the CPU no request wants (a build never delays a
/// request, but takes longer while requests keep every CPU busy); and once the oldest version
/// handed over and not yet built has waited `boost_after_ms` milliseconds (0: never;
/// default `ATC_BUILDER_BOOST_AFTER_MS_DEFAULT`), a second thread of the builder, started at the
/// caller's priority less `atc_builder_priority`, takes the build over (restarting it: the idle
/// thread gives it up at its next check) and builds until nothing waits. An unprivileged thread
/// cannot leave `SCHED_IDLE`, which is why the second thread is started with the first.
/// `ATC_BUILDER_NORMAL`: one thread, at the caller's priority less `atc_builder_priority`.
/// `ATC_OK`, or `ATC_ERR_INVALID` (nothing changed) for another policy.
#[no_mangle]
pub extern "C" fn atc_builder_schedule(policy: i32, boost_after_ms: u32) -> i32 {
    if policy != ATC_BUILDER_IDLE && policy != ATC_BUILDER_NORMAL {
        return crate::ATC_ERR_INVALID;
    }
    BUILDER_POLICY.store(policy, Ordering::Relaxed);
    BUILDER_BOOST_MS.store(boost_after_ms, Ordering::Relaxed);
    ATC_OK
}

/// Sets a router's builder up from the process-wide settings of `atc_builder_threads`,
/// `atc_builder_schedule` and `atc_builder_priority`, when the router's first background sync
/// makes it (`BackgroundRouter::on_builder_made`).
pub(crate) fn configure(b: &mut Builder) {
    b.on_thread_start(set_priority);
    b.on_helper_start(set_helper_priority);
    // In range: `atc_builder_threads` checked it.
    let threads = BUILDER_THREADS.load(Ordering::Relaxed);
    if b.build_threads(threads.max(1) as usize).is_err() {
        let _ = b.build_threads(1);
    }
    let boost = BUILDER_BOOST_MS.load(Ordering::Relaxed);
    if BUILDER_POLICY.load(Ordering::Relaxed) == ATC_BUILDER_IDLE && boost > 0 {
        b.boost_after(Some(std::time::Duration::from_millis(u64::from(boost))));
    }
}
