//! The builder's lanes: the loop each thread runs ([`run_lane`]). Whichever lane has the turn
//! takes the [`Worker`] (the thread side's state) out of the shared state for one task and
//! puts it back after, so the two never work at once; the background lane gives a task up
//! when the boosted lane takes the turn (see `build_worker.rs`).
//!
//! Invariant: the state is changed under its lock only, and an outcome is announced
//! (`Shared::ready`) only once it is in `State::results`.

use std::sync::atomic::Ordering;

use super::build_io::Lane;
use super::build_worker::{lock, Shared, State};
use super::held::Held;

/// Runs one lane of a builder until the builder is dropped (see the module docs).
pub(super) fn run_lane(shared: &Shared, lane: Lane) {
    let stop = || {
        shared.stop.load(Ordering::Relaxed)
            || (lane == Lane::Background && shared.boosted.load(Ordering::Relaxed))
    };
    let mut st = lock(&shared.state);
    loop {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        // The caller's copy of its routes is indexed here, without the lock: the caller's
        // next start or apply must not wait for it.
        if let Some(copy) = st.rebased.take() {
            st.rebasing = true;
            drop(st);
            let held = Held::from(copy);
            st = lock(&shared.state);
            st.rebasing = false;
            if st.rebased.is_none() {
                st.rebased_held = Some(held);
            }
            shared.wake.notify_all();
            continue;
        }
        if st.rebasing {
            // The other lane is indexing a copy: no task may start from an older base.
            st = shared.wake.wait(st).unwrap_or_else(|e| e.into_inner());
            continue;
        }
        if lane == Lane::Boosted && !st.boosted {
            // Watch the oldest waiting version; take the turn once it has waited too long.
            let waited = st
                .waiting_since()
                .zip(st.boost_after)
                .map(|(since, after)| (since.elapsed(), after));
            match waited {
                Some((w, after)) if w >= after => {
                    st.boosted = true;
                    shared.boosted.store(true, Ordering::Release);
                    shared.wake.notify_all();
                }
                Some((w, after)) => {
                    st = shared
                        .wake
                        .wait_timeout(st, after - w)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    continue;
                }
                None => {
                    st = shared.wake.wait(st).unwrap_or_else(|e| e.into_inner());
                    continue;
                }
            }
        }
        let turn = (lane == Lane::Boosted) == st.boosted;
        let Some(mut worker) = st.worker.take_if(|_| turn) else {
            st = shared.wake.wait(st).unwrap_or_else(|e| e.into_inner());
            continue;
        };
        let task = worker.next_task(&mut st, lane);
        // Outcomes pushed while taking (superseded versions) are ready now.
        publish_ready(shared, &st);
        let Some(task) = task else {
            st.worker = Some(worker);
            if lane == Lane::Boosted && st.queue.is_empty() {
                // Nothing waits any more: the work goes back to the background lane.
                st.boosted = false;
                shared.boosted.store(false, Ordering::Release);
                shared.wake.notify_all();
            }
            shared.busy.store(false, Ordering::Release);
            st = shared.wake.wait(st).unwrap_or_else(|e| e.into_inner());
            continue;
        };
        shared.busy.store(true, Ordering::Release);
        shared.queued.store(!st.queue.is_empty(), Ordering::Release);
        drop(st);
        let queued = || shared.queued.load(Ordering::Relaxed);
        worker.lane = lane;
        let effects = worker.run(task, &stop, &queued);
        st = lock(&shared.state);
        st.worker = Some(worker);
        if let Some(done) = effects.done {
            st.building = None;
            st.building_since = None;
            st.results.push_back(done);
        }
        if let Some(job) = effects.requeue {
            st.building = None;
            st.building_since = None;
            st.queue.push_front(job);
        }
        if let Some(old) = effects.recycle {
            st.recycled.push(*old);
        }
        publish_ready(shared, &st);
        // The other lane may have waited for the worker.
        shared.wake.notify_all();
    }
}

fn publish_ready(shared: &Shared, st: &State) {
    if !st.results.is_empty() {
        shared.ready.store(true, Ordering::Release);
    }
}
