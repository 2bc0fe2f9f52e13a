//! Builder threads run below the priority of the thread that starts them, so that a build takes
//! the CPU requests leave: by default the thread that builds is under `SCHED_IDLE` and the
//! boosted one `atc_builder_priority` nice levels down (`atc_builder_schedule`); with
//! `ATC_BUILDER_NORMAL` one thread, that many levels down. The helpers a build starts
//! (`atc_builder_threads`) run at the priority of the thread they help. A test binary of its
//! own: the settings are process-wide, and the test counts the process's builder threads.

use std::ffi::c_char;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use atc_router_ffi::*;

fn p(s: &str) -> *const c_char {
    s.as_ptr().cast()
}

/// The nice value and scheduling policy (`/proc/.../stat` fields 19 and 41) of each thread of
/// this process named `name` (as the kernel cuts it to 15 bytes).
fn threads(name: &str) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        // A thread that ended since the directory was read has no stat left: not counted.
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        // Fields after the command (which is in parentheses): state is field 3.
        let after: Vec<&str> = stat.get(close + 2..).unwrap_or("").split(' ').collect();
        let field = |i: usize| after.get(i).and_then(|f| f.parse().ok());
        if let (Some(nice), Some(policy)) = (field(16), field(38)) {
            out.push((nice, policy));
        }
    }
    out
}

const SCHED_OTHER: i64 = 0;
const SCHED_IDLE: i64 = 5;

fn own_nice() -> i64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split(' ').nth(16).unwrap().parse().unwrap()
}

/// A router that built one list: its builder threads are up.
unsafe fn built_router() -> (*mut AtcSchema, *mut AtcRouter) {
    let text = "1\ta8f2c1e4-0000-4000-8000-000000000001\thttp.path ^= \"/a\"\n";
    let (s, r, _) = router_building(text, |_| {});
    (s, r)
}

/// A router that built `text`, and the nice value and policy of every helper thread seen while
/// it built (`watch` is called with each sample).
unsafe fn router_building(
    text: &str,
    mut watch: impl FnMut(&[(i64, i64)]),
) -> (*mut AtcSchema, *mut AtcRouter, Vec<(i64, i64)>) {
    let s = atc_schema_new();
    let name = "http.path";
    atc_schema_add_field(
        s,
        p(name),
        name.len(),
        ATC_TYPE_STRING,
        null_mut(),
        null_mut(),
    );
    let r = atc_router_new(s, null_mut(), null_mut());
    let rc = atc_router_sync_start_text(
        r,
        1,
        p(text),
        text.len(),
        ATC_TEXT_COPY,
        ATC_SYNC_ALL_OR_NOTHING,
        null_mut(),
        null_mut(),
    );
    assert_eq!(rc, ATC_OK);
    let started = Instant::now();
    let mut seen = Vec::new();
    while atc_router_sync_ready(r) != 1 {
        assert!(started.elapsed() < Duration::from_secs(60));
        let helpers = threads("atc-router-help");
        watch(&helpers);
        seen.extend(helpers);
        std::thread::sleep(Duration::from_micros(200));
    }
    (s, r, seen)
}

/// A list long enough that its build starts helpers and takes a while.
fn long_list() -> String {
    (0..60_000u64)
        .map(|i| format!("1\ta8f2c1e4-0000-4000-8000-{i:012x}\thttp.path == \"/p/{i}/q\"\n"))
        .collect()
}

#[test]
fn builder_threads_run_below_the_callers_priority() {
    assert_eq!(atc_builder_priority(-1), ATC_ERR_INVALID);
    assert_eq!(atc_builder_priority(20), ATC_ERR_INVALID);
    assert_eq!(atc_builder_priority(5), ATC_BUILDER_NICE_DEFAULT);
    assert_eq!(atc_builder_priority(5), 5);
    assert_eq!(atc_builder_schedule(7, 0), ATC_ERR_INVALID);
    let below = (own_nice() + 5).min(19);
    unsafe {
        // The default: the thread that builds takes idle CPU only; the one that takes a build
        // over when a version waits too long runs below the caller.
        let (s, r) = built_router();
        // Each thread set its own priority before it built anything.
        assert_eq!(threads("atc-router-buil"), vec![(0, SCHED_IDLE)]);
        assert_eq!(threads("atc-router-boos"), vec![(below, SCHED_OTHER)]);
        atc_router_free(r);
        atc_schema_free(s);
        assert!(
            threads("atc-router-buil").is_empty(),
            "the threads ended with their router"
        );
        assert!(threads("atc-router-boos").is_empty());

        // One thread at normal priority, below the caller.
        assert_eq!(atc_builder_schedule(ATC_BUILDER_NORMAL, 0), ATC_OK);
        let (s, r) = built_router();
        assert_eq!(threads("atc-router-buil"), vec![(below, SCHED_OTHER)]);
        assert!(threads("atc-router-boos").is_empty());
        assert_eq!(own_nice(), own_nice(), "the caller's priority is its own");
        atc_router_free(r);
        atc_schema_free(s);

        // Helpers of a build run as the thread they help: under SCHED_IDLE with the idle lane,
        // below the caller with a lane at normal priority (not a second step below it).
        assert_eq!(atc_builder_threads(0), ATC_ERR_INVALID);
        assert_eq!(
            atc_builder_threads(ATC_BUILDER_THREADS_MAX + 1),
            ATC_ERR_INVALID
        );
        assert_eq!(atc_builder_threads(3), 1);
        let text = long_list();
        for (policy, want) in [
            (ATC_BUILDER_NORMAL, (below, SCHED_OTHER)),
            (ATC_BUILDER_IDLE, (0, SCHED_IDLE)),
        ] {
            assert_eq!(atc_builder_schedule(policy, 0), ATC_OK);
            let (s, r, seen) = router_building(&text, |_| {});
            assert!(!seen.is_empty(), "no helper seen while the build ran");
            assert!(seen.iter().all(|h| *h == want), "{seen:?}, want {want:?}");
            let rc = atc_router_sync_apply(
                r,
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
            );
            let mut len = 0;
            assert_eq!(atc_router_len(r, &mut len), ATC_OK);
            assert_eq!((rc, len), (ATC_OK, 60_000));
            atc_router_free(r);
            atc_schema_free(s);
            assert!(
                threads("atc-router-help").is_empty(),
                "helpers end with their build"
            );
        }
        assert_eq!(atc_builder_threads(1), 3);
    }
}
